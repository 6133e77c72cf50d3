//! Fuzzes `Accept` negotiation: any header must give each media type a quality between 0
//! and 1, never panic; and a client never gets Markdown unless it ranks text/markdown
//! strictly above text/html.

use kubedav_gateway::http::negotiate::{prefers_markdown, quality};

/// Checks one input: returns when every property holds, panics naming the one that
/// does not.
pub fn check(data: &[u8]) {
    let Ok(accept) = std::str::from_utf8(data) else {
        return;
    };
    let markdown = quality(accept, "text/markdown");
    let html = quality(accept, "text/html");
    for q in [markdown, html] {
        assert!((0.0..=1.0).contains(&q), "quality {q} for {accept:?}");
    }
    assert_eq!(prefers_markdown(Some(accept)), markdown > 0.0 && markdown > html);
}
