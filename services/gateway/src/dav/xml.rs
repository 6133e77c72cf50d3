//! Minimal XML output for multistatus bodies.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use std::fmt::Write;

/// Escapes text for XML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(&mut out, text);
    out
}

/// Appends `text` to `out`, escaped as [`escape`] does, copying runs without special
/// characters whole (no allocation of its own).
pub fn escape_into(out: &mut String, text: &str) {
    let mut plain = 0;
    for (i, byte) in text.bytes().enumerate() {
        let entity = match byte {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            b'\'' => "&#39;",
            _ => continue,
        };
        out.push_str(&text[plain..i]);
        out.push_str(entity);
        plain = i + 1;
    }
    out.push_str(&text[plain..]);
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

/// A WebDAV error response: `status` with a `DAV:error` body holding the precondition
/// element `condition` (RFC 4918 16), and a description for people.
pub fn dav_error(status: StatusCode, condition: &str, description: &str) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:error xmlns:D=\"DAV:\"><D:{condition}/><D:responsedescription>{}</D:responsedescription></D:error>\n",
        escape(description)
    );
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}
