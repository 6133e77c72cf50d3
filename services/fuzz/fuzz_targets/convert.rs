//! Fuzzes the HTML to Markdown converter: any bytes, with any of a few content types,
//! must convert or fail with a limit error, never panic or hang, and the output must be
//! valid UTF-8 ending with a newline; and read as CommonMark it has no live link or
//! image to `javascript:`, `vbscript:`, `data:` or `file:` (attribute text such as link
//! titles must not be able to make one).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (selector, html) = data.split_first().unwrap_or((&0, &[]));
    let content_type = match selector % 4 {
        0 => "text/html",
        1 => "text/html; charset=windows-1252",
        2 => "text/html; charset=shift_jis",
        _ => "",
    };
    let options = kubedav_markdown::Options {
        max_depth: 64,
        ..Default::default()
    };
    if let Ok(out) = kubedav_markdown::convert(html, content_type, &options) {
        assert!(out.markdown.ends_with('\n'));
        let options = pulldown_cmark::Options::ENABLE_TABLES;
        for event in pulldown_cmark::Parser::new_ext(&out.markdown, options) {
            if let pulldown_cmark::Event::Start(
                pulldown_cmark::Tag::Link { dest_url, .. } | pulldown_cmark::Tag::Image { dest_url, .. },
            ) = event
            {
                let scheme = dest_url.trim_start().to_ascii_lowercase();
                assert!(
                    !["javascript:", "vbscript:", "data:", "file:"]
                        .iter()
                        .any(|s| scheme.starts_with(s)),
                    "a live link to {dest_url} in:\n{}",
                    out.markdown
                );
            }
        }
    }
});
