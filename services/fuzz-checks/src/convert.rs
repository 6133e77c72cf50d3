//! Fuzzes the HTML to Markdown converter on any bytes, with any of a few content types
//! and either content mode. It must convert or fail with a limit error, never panic or
//! hang, and what it writes must keep these properties:
//! - valid UTF-8 ending with a newline;
//! - read as CommonMark (with GFM tables), no live link or image to `javascript:`,
//!   `vbscript:`, `data:` or `file:` (attribute text such as link titles must not be
//!   able to make one);
//! - bounded by the input: at most 24 bytes out per byte in (plus a constant), and
//!   blocks nested at most 16 deep as CommonMark reads them (the writer indents 8
//!   containers at most; a CommonMark reader can nest lazily continued lines deeper).

use pulldown_cmark::{Event, Tag, TagEnd};

/// Checks one input: returns when every property holds, panics naming the one that
/// does not.
pub fn check(data: &[u8]) {
    let (selector, html) = data.split_first().unwrap_or((&0, &[]));
    let content_type = match selector % 4 {
        0 => "text/html",
        1 => "text/html; charset=windows-1252",
        2 => "text/html; charset=shift_jis",
        _ => "",
    };
    let options = kubedav_markdown::Options {
        max_depth: 64,
        content: if selector & 4 == 0 {
            kubedav_markdown::Content::Main
        } else {
            kubedav_markdown::Content::Full
        },
        base_url: (selector & 8 != 0).then(|| "https://example.org/docs/page.html".to_owned()),
        ..Default::default()
    };
    let Ok(out) = kubedav_markdown::convert(html, content_type, &options) else {
        return;
    };
    let markdown = &out.markdown;
    assert!(markdown.ends_with('\n'));
    // A windows-1252 or Shift_JIS byte can become up to 3 UTF-8 bytes before escaping.
    assert!(
        markdown.len() <= 24 * html.len() + 64,
        "{} bytes out of {} in",
        markdown.len(),
        html.len()
    );
    let mut blocks = 0usize;
    for event in pulldown_cmark::Parser::new_ext(markdown, pulldown_cmark::Options::ENABLE_TABLES) {
        match event {
            Event::Start(tag) => {
                if let Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } = &tag {
                    let scheme = dest_url.trim_start().to_ascii_lowercase();
                    assert!(
                        !["javascript:", "vbscript:", "data:", "file:"]
                            .iter()
                            .any(|s| scheme.starts_with(s)),
                        "a live link to {dest_url} in:\n{markdown}"
                    );
                }
                if matches!(tag, Tag::BlockQuote(_) | Tag::List(_)) {
                    blocks += 1;
                    assert!(blocks <= 16, "blocks nested deeper than 16 in:\n{markdown}");
                }
            }
            Event::End(TagEnd::BlockQuote(_) | TagEnd::List(_)) => blocks -= 1,
            _ => {}
        }
    }
}
