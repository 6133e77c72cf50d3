//! Content negotiation between the HTML and Markdown variants (RFC 9110 12.5.1).

/// The q-value `accept` gives `media` (`type/subtype`): from the most specific matching
/// range (exact, then `type/*`, then `*/*`), 0 when nothing matches.
pub fn quality(accept: &str, media: &str) -> f32 {
    let (kind, _) = media.split_once('/').unwrap_or((media, ""));
    let mut best: Option<(u8, f32)> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let name = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map_or(1.0, |(_, v)| qvalue(v.trim()));
        let specificity = if name == media {
            3
        } else if name.strip_suffix("/*") == Some(kind) {
            2
        } else if name == "*/*" {
            1
        } else {
            continue;
        };
        if best.is_none_or(|(s, _)| specificity > s) {
            best = Some((specificity, q));
        }
    }
    best.map_or(0.0, |(_, q)| q)
}

/// A `qvalue` (RFC 9110 12.4.2: `0` to `1` with at most three decimals). Anything else
/// (`nan`, `inf`, `-1`, `0.5e1`) counts as 0, so a malformed weight never makes a
/// variant preferred.
fn qvalue(text: &str) -> f32 {
    let (whole, decimals) = text.split_once('.').unwrap_or((text, ""));
    let valid = matches!(whole, "0" | "1")
        && decimals.len() <= 3
        && decimals.bytes().all(|b| b.is_ascii_digit())
        && (whole == "0" || decimals.bytes().all(|b| b == b'0'));
    if valid { text.parse().unwrap_or(0.0) } else { 0.0 }
}

/// Whether a client prefers Markdown to HTML: text/markdown must rank strictly above
/// text/html. No Accept header means HTML.
pub fn prefers_markdown(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    let markdown = quality(accept, "text/markdown");
    markdown > 0.0 && markdown > quality(accept, "text/html")
}

/// Whether a media type is an HTML resource that has a Markdown variant.
pub fn is_html(content_type: &str) -> bool {
    matches!(content_type, "text/html" | "application/xhtml+xml")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_matrix() {
        for (accept, markdown) in [
            (None, false),
            (Some("text/markdown"), true),
            (Some("text/html"), false),
            (Some("*/*"), false),
            (Some("text/markdown, text/html"), false),
            (Some("text/markdown;q=0.9, text/html"), false),
            (Some("text/html;q=0.5, text/markdown"), true),
            (Some("text/*;q=0.8, text/markdown"), true),
            (Some("text/markdown;q=0.5, */*;q=0.1"), true),
            (Some("text/markdown;q=0"), false),
            // Malformed weights count as 0 (NaN was found by fuzzing).
            (Some("text/markdown;q=NaN"), false),
            (Some("text/markdown;q=inf, text/html;q=0.5"), false),
            (Some("text/markdown;q=1.000, text/html;q=0.999"), true),
            (Some("TEXT/MARKDOWN; Q=1, text/html; q=0.2"), true),
            (Some("text/plain"), false),
        ] {
            assert_eq!(prefers_markdown(accept), markdown, "{accept:?}");
        }
    }
}
