//! XML output: text escaped ([`escape`], [`escape_into`]), numbers ([`push_decimal`]) and
//! the `DAV:error` body of a refusal ([`dav_error`]); multistatus bodies are
//! [`super::multistatus`]'s.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

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

/// `value` in decimal, without the formatting machinery (a size per PROPFIND entry).
pub fn push_decimal(out: &mut String, value: u64) {
    out.push_str(itoa::Buffer::new().format(value));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_as_display_writes_them() {
        for value in [0u64, 7, 10, 1_234_567, u64::MAX] {
            let mut out = String::from("x");
            push_decimal(&mut out, value);
            assert_eq!(out, format!("x{value}"));
        }
    }
}
