//! The HTML directory listing for browsers.

use crate::dav::xml::escape;
use crate::http::dates::http_date;
use crate::http::paths::href;
use kubedav_api::fileio::FileInfo;
use kubedav_api::path::VolumePath;
use std::fmt::Write;

/// Renders a listing of `dir` with `members`: collections first, then files, each group
/// sorted by name; sizes in binary units, dates in HTTP format (UTC); names escaped and
/// links percent-encoded; a link to the parent unless `dir` is the root.
pub fn render(dir: &VolumePath, mut members: Vec<FileInfo>) -> String {
    members.sort_by(|a, b| {
        b.is_collection
            .cmp(&a.is_collection)
            .then_with(|| a.path.cmp(&b.path))
    });
    let title = escape(&format!("Index of {dir}"));
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n\
         <style>body{{font-family:system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{padding:.2em 1em;text-align:left}}td.size{{text-align:right}}tr:hover{{background:#f4f4f4}}</style>\n\
         </head>\n<body>\n<h1>{title}</h1>\n<table>\n<thead><tr><th>Name</th><th>Size</th><th>Last modified</th></tr></thead>\n<tbody>\n"
    );
    if let Some((parent, _)) = dir.split_last() {
        let _ = writeln!(
            html,
            "<tr><td><a href=\"{}\">../</a></td><td></td><td></td></tr>",
            escape(&href(&parent, true))
        );
    }
    for member in &members {
        let Ok(path) = VolumePath::parse(&member.path) else {
            continue;
        };
        let name = path.name();
        let suffix = if member.is_collection { "/" } else { "" };
        let size = if member.is_collection {
            String::new()
        } else {
            human_size(member.size)
        };
        let _ = writeln!(
            html,
            "<tr><td><a href=\"{}\">{}{suffix}</a></td><td class=\"size\">{size}</td><td>{}</td></tr>",
            escape(&href(&path, member.is_collection)),
            escape(name),
            http_date(member.modified_unix_ns),
        );
    }
    html.push_str("</tbody>\n</table>\n</body>\n</html>\n");
    html
}

/// A size in bytes, KiB, MiB, ... with one decimal.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(path: &str, dir: bool, size: u64) -> FileInfo {
        FileInfo {
            path: path.into(),
            is_collection: dir,
            size,
            ..Default::default()
        }
    }

    #[test]
    fn sorts_escapes_and_encodes() {
        let dir = VolumePath::parse("docs").unwrap();
        let html = render(
            &dir,
            vec![
                info("docs/b.txt", false, 2048),
                info("docs/<a&b>.txt", false, 1),
                info("docs/zdir", true, 0),
            ],
        );
        let zdir = html.find("zdir/").unwrap();
        let a = html.find("&lt;a&amp;b&gt;.txt").unwrap();
        let b = html.find(">b.txt<").unwrap();
        assert!(zdir < a && a < b, "collections first, then by name");
        assert!(html.contains("href=\"/docs/%3Ca%26b%3E.txt\""));
        assert!(html.contains("href=\"/\">../</a>"));
        assert!(html.contains("2.0 KiB"));
        assert!(!html.contains("<a&b>"));
    }

    #[test]
    fn root_has_no_parent_link() {
        assert!(!render(&VolumePath::root(), vec![]).contains("../"));
    }

    #[test]
    fn sizes() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(5 * 1024 * 1024 * 1024), "5.0 GiB");
    }
}
