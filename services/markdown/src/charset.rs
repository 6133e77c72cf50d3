//! Charset detection for HTML bytes, in this order: a byte-order mark, the
//! Content-Type's `charset`, a `<meta>` declaration in the first 1,024 bytes, then UTF-8.

use encoding_rs::Encoding;

/// The encoding of `html`, given the Content-Type it was served with (may be empty).
pub fn detect(html: &[u8], content_type: &str) -> &'static Encoding {
    if let Some((encoding, _)) = Encoding::for_bom(html) {
        return encoding;
    }
    if let Some(encoding) = charset_param(content_type).and_then(|c| Encoding::for_label(c.as_bytes())) {
        return encoding;
    }
    if let Some(encoding) = meta_charset(&html[..html.len().min(1024)]) {
        return encoding;
    }
    encoding_rs::UTF_8
}

/// Decodes `html` to text with the detected encoding (malformed bytes become U+FFFD).
pub fn decode(html: &[u8], content_type: &str) -> String {
    let (text, _, _) = detect(html, content_type).decode(html);
    text.into_owned()
}

fn charset_param(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches(['"', '\'']).to_owned())
    })
}

/// `<meta charset=...>` or `<meta http-equiv="Content-Type" content="...; charset=...">`.
fn meta_charset(head: &[u8]) -> Option<&'static Encoding> {
    let text = String::from_utf8_lossy(head).to_ascii_lowercase();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("<meta") {
        rest = &rest[at + 5..];
        let tag = &rest[..rest.find('>').unwrap_or(rest.len())];
        if let Some(pos) = tag.find("charset") {
            let value = tag[pos + 7..].trim_start().strip_prefix('=')?.trim_start();
            let value = value.trim_start_matches(['"', '\'']);
            let end = value
                .find(|c: char| c == '"' || c == '\'' || c == ';' || c == '/' || c.is_whitespace())
                .unwrap_or(value.len());
            if let Some(encoding) = Encoding::for_label(&value.as_bytes()[..end]) {
                // A page that says UTF-16 in ASCII bytes cannot be UTF-16 (HTML spec).
                return Some(
                    if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE {
                        encoding_rs::UTF_8
                    } else {
                        encoding
                    },
                );
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_bom_header_meta_utf8() {
        let meta = b"<html><head><meta charset=\"windows-1252\"></head><body>caf\xe9</body></html>";
        assert_eq!(detect(meta, ""), encoding_rs::WINDOWS_1252);
        assert!(decode(meta, "").contains("caf\u{e9}"));
        assert_eq!(
            detect(meta, "text/html; charset=Shift_JIS"),
            encoding_rs::SHIFT_JIS,
            "the header wins over meta"
        );
        let bom = [&[0xEF, 0xBB, 0xBF][..], meta].concat();
        assert_eq!(
            detect(&bom, "text/html; charset=Shift_JIS"),
            encoding_rs::UTF_8,
            "the BOM wins over all"
        );
        let equiv = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=iso-8859-1\">";
        assert_eq!(
            detect(equiv, ""),
            encoding_rs::WINDOWS_1252,
            "ISO-8859-1 is decoded as windows-1252 (WHATWG)"
        );
        assert_eq!(detect(b"<p>plain</p>", ""), encoding_rs::UTF_8);
        let sjis = b"<meta charset=shift_jis><p>\x93\xfa\x96\x7b</p>";
        assert!(
            decode(sjis, "").contains("\u{65e5}\u{672c}"),
            "Shift_JIS text decodes"
        );
    }
}
