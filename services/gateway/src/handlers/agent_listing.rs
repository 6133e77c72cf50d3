//! The Markdown listing of a collection, for agents that prefer `text/markdown`: the
//! collection's name, then one line per member with its link, size, type and time.
//!
//! HTML members' titles are left out: fileio would have to read the head of every
//! HTML member, one more read per member on every listing (docs/markdown.md).

use crate::http::dates::write_rfc3339;
use crate::http::mediatype::of_name;
use crate::http::paths::BasePath;
use kubedav_api::fileio::FileInfo;
use kubedav_api::markdown::escape::{destination, push_text};
use kubedav_api::path::{VolumePath, last_name};
use std::fmt::Write;

/// The listing of `dir` with `members`: collections first, then files, each sorted by
/// name; names escaped for link text, links percent-encoded absolute paths (in angle
/// brackets when they hold parentheses), times in
/// RFC 3339 (UTC), sizes in bytes; links below `base`.
pub fn render(base: &BasePath, dir: &VolumePath, mut members: Vec<FileInfo>) -> String {
    members.sort_by(|a, b| {
        b.is_collection
            .cmp(&a.is_collection)
            .then_with(|| a.path.cmp(&b.path))
    });
    let mut out = String::from("# ");
    let shown = base.shown(dir);
    let slash = if shown.ends_with('/') { "" } else { "/" };
    push_text(&mut out, &format!("Index of {shown}{slash}"), false);
    let _ = write!(out, "\n\n{} members\n\n", members.len());
    for member in &members {
        let name = last_name(&member.path);
        out.push_str("- [");
        push_text(&mut out, name, false);
        if member.is_collection {
            out.push('/');
        }
        out.push_str("](");
        let path = VolumePath::parse(&member.path).unwrap_or_else(|_| dir.clone());
        out.push_str(&destination(&base.href(&path, member.is_collection)));
        out.push_str(") — ");
        if member.is_collection {
            out.push_str("collection");
        } else {
            let _ = write!(out, "{} bytes, {}", member.size, of_name(name));
        }
        out.push_str(", modified ");
        write_rfc3339(&mut out, member.modified_unix_ns);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(path: &str, dir: bool, size: u64) -> FileInfo {
        FileInfo {
            path: path.into(),
            is_collection: dir,
            size,
            modified_unix_ns: 1_700_000_000_000_000_000,
            ..Default::default()
        }
    }

    #[test]
    fn one_line_per_member_with_escaped_names_and_encoded_links() {
        let dir = VolumePath::parse("docs").unwrap();
        let listing = render(
            &BasePath::root(),
            &dir,
            vec![
                info("docs/b [x](javascript:y).html", false, 1234),
                info("docs/sub", true, 0),
            ],
        );
        assert_eq!(
            listing,
            "# Index of /docs/\n\n2 members\n\n\
             - [sub/](/docs/sub/) — collection, modified 2023-11-14T22:13:20Z\n\
             - [b \\[x\\](javascript:y).html](</docs/b%20%5Bx%5D(javascript:y).html>) — 1234 bytes, text/html, modified 2023-11-14T22:13:20Z\n"
        );
    }
}
