//! The HTML page of a collection for browsers: a listing that works without scripts
//! (breadcrumbs, collections first, names escaped, links percent-encoded), made into a
//! small file manager by kubedav's own script and style sheet ([`ASSETS`]), served from
//! its origin under the reserved `.kubedav-ui/` prefix, which no file can take.

use crate::dav::xml::escape;
use crate::http::dates::http_date;
use crate::http::paths::BasePath;
use kubedav_api::fileio::FileInfo;
use kubedav_api::path::VolumePath;
use std::fmt::Write;

/// The page's script and style sheet: (path below the base path, content type, body).
pub const ASSETS: [(&str, &str, &str); 5] = [
    (
        // tus-js-client's browser bundle, as npm serves it (scripts/vendor-tus-js-client.sh).
        "/.kubedav-ui/tus.js",
        "text/javascript; charset=utf-8",
        include_str!("ui/vendor/tus-js-client-4.3.1.min.js"),
    ),
    (
        "/.kubedav-ui/app.js",
        "text/javascript; charset=utf-8",
        include_str!("ui/app.js"),
    ),
    (
        "/.kubedav-ui/app.css",
        "text/css; charset=utf-8",
        include_str!("ui/app.css"),
    ),
    (
        "/.kubedav-ui/account.js",
        "text/javascript; charset=utf-8",
        include_str!("ui/account.js"),
    ),
    (
        "/.kubedav-ui/link.js",
        "text/javascript; charset=utf-8",
        include_str!("ui/link.js"),
    ),
];

/// The Content-Security-Policy of the page: scripts, styles and requests from kubedav's
/// own origin only, nothing inline, no forms, no frames.
pub const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
     img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A page of kubedav's own, with its Content-Security-Policy ([`POLICY`]), never kept
/// by a cache.
pub fn page(status: http::StatusCode, html: String) -> axum::response::Response {
    use axum::response::IntoResponse;
    use http::{HeaderValue, header};
    let mut response = (status, html).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// What a page offers the one who asked for it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Offers {
    /// Uploads, new folders, rename and delete (the server refuses them for read-only
    /// users whatever the page shows).
    pub write: bool,
    /// A link to the signed-in user's app passwords (`{base}/.kubedav/account`).
    pub account: bool,
    /// A sign-out button (a browser session through the identity provider).
    pub sign_out: bool,
    /// The "Shares" panel: what was shared with the user, and what it shared
    /// (`{base}/.kubedav/shares`).
    pub shares: bool,
    /// "Share" buttons: the user manages the collection, so it may share it and what
    /// is in it.
    pub manage: bool,
    /// The "Trash" panel and each file's "Versions" (`{base}/.kubedav/trash/` and
    /// `{base}/.kubedav/versions`).
    pub keep: bool,
    /// Large files go up by TUS (`{base}/.kubedav/uploads/`; docs/uploads.md), resumable
    /// after a dropped network or a reloaded page.
    pub uploads: bool,
}

/// Renders the page of `dir` with `members`: collections first, then files, each group
/// sorted by name; sizes in binary units, dates in HTTP format (UTC); names escaped and
/// links percent-encoded; breadcrumbs and a link to the parent unless `dir` is the root;
/// what `offers` says. Every link is below `base`.
pub fn render(base: &BasePath, dir: &VolumePath, mut members: Vec<FileInfo>, offers: Offers) -> String {
    let writable = offers.write;
    members.sort_by(|a, b| {
        b.is_collection
            .cmp(&a.is_collection)
            .then_with(|| a.path.cmp(&b.path))
    });
    // Through a link, paths are shown beneath the link's folder, never where it is.
    let title = escape(&format!("Index of {}", base.shown(dir)));
    let prefix = base.as_str();
    let href = |path: &VolumePath, collection: bool| base.href(path, collection);
    let (tus_script, tus_endpoint) = match offers.uploads {
        true => (
            format!("<script src=\"{prefix}/.kubedav-ui/tus.js\" defer></script>\n"),
            format!(" data-uploads=\"{prefix}/.kubedav/uploads/\""),
        ),
        false => (String::new(), String::new()),
    };
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n\
         <link rel=\"stylesheet\" href=\"{prefix}/.kubedav-ui/app.css\">\n\
         {tus_script}<script src=\"{prefix}/.kubedav-ui/app.js\" defer></script>\n</head>\n\
         <body data-collection=\"{}\" data-writable=\"{writable}\" data-base=\"{}\"{tus_endpoint}>\n",
        escape(&href(dir, true)),
        escape(prefix)
    );
    if offers.account {
        let _ = writeln!(
            html,
            "<a id=\"account-link\" href=\"{prefix}/.kubedav/account\">App passwords</a>"
        );
    }
    if offers.sign_out {
        let _ = writeln!(
            html,
            "<button type=\"button\" id=\"sign-out\" data-href=\"{prefix}/.kubedav/sign-out\">Sign out</button>"
        );
    }
    if offers.shares {
        let _ = writeln!(
            html,
            "<button type=\"button\" id=\"shares-open\" data-href=\"{prefix}/.kubedav/shares\" \
             data-links=\"{prefix}/.kubedav/links\">Shares and links</button>"
        );
    }
    if offers.keep {
        let _ = writeln!(
            html,
            "<button type=\"button\" id=\"trash-open\" data-href=\"{prefix}/.kubedav/trash/\" \
             data-versions=\"{prefix}/.kubedav/versions\">Trash</button>"
        );
    }
    breadcrumbs(&mut html, base, dir);
    if offers.shares {
        html.push_str(SHARES_PANEL);
    }
    if offers.keep {
        html.push_str(KEEP_PANELS);
    }
    let _ = write!(
        html,
        "<h1>{title}</h1>\n<div id=\"toolbar\"{}>\
         <label>Upload files<input type=\"file\" id=\"files\" multiple></label>\
         <label>Upload a folder<input type=\"file\" id=\"folder\" webkitdirectory multiple></label>\
         <button type=\"button\" id=\"mkdir\">New folder</button>{}</div>\n\
         <div id=\"uploads\"></div>\n<p id=\"status\" role=\"status\"></p>\n<div id=\"drop\">\n\
         <table id=\"listing\">\n<thead><tr><th data-key=\"name\">Name</th><th data-key=\"size\">Size</th>\
         <th data-key=\"mtime\">Last modified</th><th>Actions</th></tr></thead>\n<tbody>\n",
        if writable { "" } else { " hidden" },
        if offers.manage {
            "<button type=\"button\" id=\"share-here\">Share this folder</button>"
        } else {
            ""
        }
    );
    let top = base.mount_root().is_some_and(|root| root == dir);
    if let Some((parent, _)) = dir.split_last().filter(|_| !top) {
        let _ = writeln!(
            html,
            "<tr><td><a href=\"{}\">../</a></td><td></td><td></td><td></td></tr>",
            escape(&href(&parent, true))
        );
    }
    for member in &members {
        let Ok(path) = VolumePath::parse(&member.path) else {
            continue;
        };
        let name = escape(path.name());
        let suffix = if member.is_collection { "/" } else { "" };
        let size = if member.is_collection {
            String::new()
        } else {
            human_size(member.size)
        };
        let mut actions = String::from("<button type=\"button\" data-action=\"link\">Copy link</button>");
        if !member.is_collection && path.name().to_ascii_lowercase().ends_with(".md") {
            actions.push_str("<button type=\"button\" data-action=\"preview\">Preview</button>");
        }
        if offers.keep && !member.is_collection {
            actions.push_str("<button type=\"button\" data-action=\"versions\">Versions</button>");
        }
        if offers.manage {
            actions.push_str(
                "<button type=\"button\" data-action=\"share\">Share</button>\
                 <button type=\"button\" data-action=\"publish\">Link</button>",
            );
        }
        if writable {
            actions.push_str(
                "<button type=\"button\" data-action=\"rename\">Rename</button>\
                 <button type=\"button\" data-action=\"delete\">Delete</button>",
            );
        }
        let _ = writeln!(
            html,
            "<tr data-name=\"{name}\" data-dir=\"{}\" data-size=\"{}\" data-mtime=\"{}\">\
             <td><a href=\"{}\">{name}{suffix}</a></td><td class=\"size\">{size}</td><td>{}</td><td>{actions}</td></tr>",
            u8::from(member.is_collection),
            member.size,
            member.modified_unix_ns,
            escape(&href(&path, member.is_collection)),
            http_date(member.modified_unix_ns),
        );
    }
    html.push_str("</tbody>\n</table>\n</div>\n<div id=\"preview\" hidden></div>\n</body>\n</html>\n");
    html
}

/// The "Shares" panel and the form that makes a share, filled and shown by the script.
const SHARES_PANEL: &str = "<section id=\"shares\" hidden>\
<h2>Shared with me</h2><ul id=\"shares-received\"></ul>\
<h2>Shared by me</h2><ul id=\"shares-made\"></ul>\
<h2>My public links</h2><ul id=\"links-made\"></ul></section>\n\
<form id=\"share-form\" hidden><h2>Share <span id=\"share-what\"></span></h2>\
<label>With<input name=\"to\" placeholder=\"user:ID or group:NAME\" required></label>\
<label>Permission<select name=\"permission\"><option value=\"read\">read</option>\
<option value=\"write\">read and write</option></select></label>\
<label>Until (optional)<input name=\"expires\" type=\"datetime-local\"></label>\
<button type=\"submit\">Share</button><button type=\"button\" id=\"share-cancel\">Cancel</button></form>\n\
<form id=\"link-form\" hidden><h2>Publish a link to <span id=\"link-what\"></span></h2>\
<label>Anyone with the link may<select name=\"permission\"><option value=\"read\">read</option>\
<option value=\"upload\">only upload (a drop box)</option><option value=\"write\">read and write</option></select></label>\
<label>Password (optional)<input name=\"password\" type=\"password\" autocomplete=\"new-password\"></label>\
<label>Until (optional)<input name=\"expires\" type=\"datetime-local\"></label>\
<button type=\"submit\">Publish</button><button type=\"button\" id=\"link-cancel\">Close</button>\
<p id=\"link-made\" hidden>The link, shown only now: <input id=\"link-url\" readonly size=\"70\"></p></form>\n";

/// The "Trash" panel and a file's "Versions" panel, filled and shown by the script.
const KEEP_PANELS: &str = "<section id=\"trash\" hidden><h2>Trash</h2>\
<p class=\"note\">What you deleted from the places you may change, kept until it is restored, \
purged or past the server's retention.</p>\
<table id=\"trash-items\"><thead><tr><th>Name</th><th>Deleted from</th><th>Deleted</th>\
<th>Size</th><th>Actions</th></tr></thead><tbody></tbody></table>\
<p><button type=\"button\" id=\"trash-empty\">Empty the trash</button>\
<button type=\"button\" id=\"trash-close\">Close</button></p></section>\n\
<section id=\"versions\" hidden><h2>Versions of <span id=\"versions-of\"></span></h2>\
<table id=\"versions-list\"><thead><tr><th>Replaced</th><th>Size</th><th>Actions</th></tr></thead>\
<tbody></tbody></table><p><button type=\"button\" id=\"versions-close\">Close</button></p></section>\n";

/// `/ › a › b` with a link on each ancestor of `dir` (beneath a link's folder, through
/// a link).
fn breadcrumbs(html: &mut String, base: &BasePath, dir: &VolumePath) {
    let top = base.mount_root().cloned().unwrap_or_else(VolumePath::root);
    html.push_str("<nav class=\"crumbs\"><a href=\"");
    html.push_str(&escape(&base.href(&top, true)));
    html.push_str("\">/</a>");
    let mut so_far = top;
    for segment in base.shown(dir).split('/').filter(|s| !s.is_empty()) {
        let Ok(next) = so_far.join(segment) else { break };
        so_far = next;
        let _ = write!(
            html,
            " \u{203a} <a href=\"{}\">{}</a>",
            escape(&base.href(&so_far, true)),
            escape(segment)
        );
    }
    html.push_str("</nav>\n");
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
            &BasePath::root(),
            &dir,
            vec![
                info("docs/b.txt", false, 2048),
                info("docs/<a&b>.txt", false, 1),
                info("docs/zdir", true, 0),
            ],
            Offers {
                write: true,
                ..Offers::default()
            },
        );
        let zdir = html.find(">zdir/<").unwrap();
        let a = html.find(">&lt;a&amp;b&gt;.txt<").unwrap();
        let b = html.find(">b.txt<").unwrap();
        assert!(zdir < a && a < b, "collections first, then by name");
        assert!(html.contains("href=\"/docs/%3Ca%26b%3E.txt\""));
        assert!(html.contains("href=\"/\">../</a>"));
        assert!(html.contains("2.0 KiB"));
        assert!(!html.contains("<a&b>"));
    }

    #[test]
    fn root_has_no_parent_link() {
        assert!(!render(&BasePath::root(), &VolumePath::root(), vec![], Offers::default()).contains("../"));
    }

    #[test]
    fn sizes() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(5 * 1024 * 1024 * 1024), "5.0 GiB");
    }
}
