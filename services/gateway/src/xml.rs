//! Minimal XML output for multistatus bodies.

use std::fmt::Write;

/// Escapes text for XML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A `DAV:multistatus` body with one `DAV:response` per (href, status) pair.
pub fn multistatus(responses: &[(String, http::StatusCode, String)]) -> String {
    let mut body =
        String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:multistatus xmlns:D=\"DAV:\">\n");
    for (href, status, description) in responses {
        let _ = write!(
            body,
            "<D:response><D:href>{}</D:href><D:status>HTTP/1.1 {} {}</D:status>",
            escape(href),
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        if !description.is_empty() {
            let _ = write!(
                body,
                "<D:responsedescription>{}</D:responsedescription>",
                escape(description)
            );
        }
        body.push_str("</D:response>\n");
    }
    body.push_str("</D:multistatus>\n");
    body
}
