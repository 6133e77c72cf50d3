//! The conversion: options, limits, the choice of content, front matter.

use crate::builder::{Builder, PageInfo, Select};
use crate::tokenizer::Tokenizer;
use std::time::{Duration, Instant};

pub use kubedav_api::markdown::CONVERTER_VERSION;

/// What of the page is converted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Content {
    /// The page's main content: `<main>`, else its `<article>`s, else `[role=main]`, else
    /// the body; without navigation, asides, footers, the page's header, dialogs, form
    /// controls, hidden elements, empty links and empty list items.
    #[default]
    Main,
    /// The whole body, minus scripts, styles, form controls and the pruned elements.
    Full,
}

impl std::str::FromStr for Content {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "main" => Ok(Content::Main),
            "full" => Ok(Content::Full),
            other => Err(format!("unknown content mode {other:?}: use main or full")),
        }
    }
}

impl Content {
    /// The mode's name, as the flag takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Content::Main => "main",
            Content::Full => "full",
        }
    }
}

/// Conversion settings and limits.
#[derive(Clone, Debug)]
pub struct Options {
    /// Elements dropped with their content, besides those always dropped.
    pub prune: Vec<String>,
    /// Characters per token for the estimate.
    pub chars_per_token: f32,
    /// Largest input accepted, in bytes.
    pub max_input_bytes: usize,
    /// Deepest element nesting accepted.
    pub max_depth: usize,
    /// Longest a conversion may take.
    pub max_time: Duration,
    /// What of the page is converted.
    pub content: Content,
    /// Whether YAML front matter (title, description, URL, source ETag) comes first.
    pub front_matter: bool,
    /// The page's own URL (from the request's Host and path): relative links and
    /// images are resolved against it. Without it they stay relative.
    pub base_url: Option<String>,
    /// The source's ETag, for the front matter.
    pub source_etag: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            prune: ["nav", "footer", "aside"].map(String::from).to_vec(),
            chars_per_token: 4.0,
            max_input_bytes: 16 << 20,
            max_depth: 256,
            max_time: Duration::from_secs(5),
            content: Content::Main,
            front_matter: false,
            base_url: None,
            source_etag: None,
        }
    }
}

/// The result of a conversion.
#[derive(Clone, Debug, PartialEq)]
pub struct Converted {
    /// The Markdown.
    pub markdown: String,
    /// Estimated tokens: characters ÷ `chars_per_token`.
    pub tokens: u64,
}

/// Why a conversion was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The input is larger than `max_input_bytes`.
    #[error("the HTML is larger than {0} bytes")]
    TooLarge(usize),
    /// Elements nest deeper than `max_depth`.
    #[error("the HTML nests deeper than {0} levels")]
    TooDeep(usize),
    /// The conversion took longer than `max_time`.
    #[error("the conversion took longer than {0:?}")]
    TooSlow(Duration),
}

/// Converts HTML bytes served with `content_type` to Markdown.
pub fn convert(html: &[u8], content_type: &str, options: &Options) -> Result<Converted, ConvertError> {
    if html.len() > options.max_input_bytes {
        return Err(ConvertError::TooLarge(options.max_input_bytes));
    }
    let started = Instant::now();
    let text = tracing::info_span!("markdown.decode", input_bytes = html.len() as i64)
        .in_scope(|| crate::charset::decode(html, content_type));
    let _span = tracing::info_span!("markdown.convert").entered();
    let mut tokenizer = Tokenizer::default();
    let mut select = match options.content {
        Content::Full => Select::Body,
        Content::Main => next_candidate(text.as_bytes(), None),
    };
    loop {
        let mut builder = Builder::new(options, select, started + options.max_time);
        tokenizer.run(&text, &mut builder);
        if let Some(error) = builder.error {
            return Err(error);
        }
        let last = select == Select::Body;
        if !builder.found && !last {
            select = next_candidate(text.as_bytes(), Some(select));
            continue;
        }
        let info = std::mem::take(&mut builder.info);
        let body = builder.writer.finish();
        if body.trim().is_empty() && !last {
            select = next_candidate(text.as_bytes(), Some(select));
            continue;
        }
        let mut markdown = if options.front_matter {
            front_matter(&info, options)
        } else {
            String::new()
        };
        markdown.push_str(&body);
        let tokens = (markdown.chars().count() as f32 / options.chars_per_token.max(0.1)).ceil() as u64;
        return Ok(Converted { markdown, tokens });
    }
}

/// The next element worth trying after `tried` (best first), from a scan for its tag:
/// a tag named only in a comment or a script costs a pass that finds nothing.
fn next_candidate(html: &[u8], tried: Option<Select>) -> Select {
    let has = |needles: &[&[u8]]| needles.iter().any(|n| memchr::memmem::find(html, n).is_some());
    let order = [Select::Main, Select::Article, Select::RoleMain];
    let from = tried
        .and_then(|t| order.iter().position(|s| *s == t))
        .map_or(0, |i| i + 1);
    for select in &order[from.min(order.len())..] {
        let present = match select {
            Select::Main => has(&[b"<main", b"<MAIN", b"<Main"]),
            Select::Article => has(&[b"<article", b"<ARTICLE", b"<Article"]),
            _ => has(&[b"role=\"main\"", b"role='main'", b"role=main"]),
        };
        if present {
            return *select;
        }
    }
    Select::Body
}

/// YAML front matter: each value a double-quoted scalar, escaped as JSON strings are
/// (which YAML reads the same), so no value can end it or add a key.
fn front_matter(info: &PageInfo, options: &Options) -> String {
    let mut out = String::from("---\n");
    let mut field = |key: &str, value: Option<&str>| {
        if let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) {
            out.push_str(key);
            out.push_str(": ");
            out.push_str(&yaml_string(value));
            out.push('\n');
        }
    };
    let title = info.title.as_deref().map(crate::escape::collapse);
    field("title", title.as_deref());
    field("description", info.description.as_deref());
    field("url", info.canonical.as_deref().or(options.base_url.as_deref()));
    // As the HTML's ETag header carries it, for an If-None-Match.
    let etag = options.source_etag.as_deref().map(|e| format!("\"{e}\""));
    field("source_etag", etag.as_deref());
    out.push_str("---\n\n");
    out
}

fn yaml_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
#[cfg(test)]
mod tests {
    use super::*;

    fn md(html: &str) -> String {
        convert(html.as_bytes(), "text/html", &Options::default())
            .unwrap()
            .markdown
    }

    #[test]
    fn limits_are_errors_not_hangs() {
        let small = Options {
            max_input_bytes: 10,
            ..Options::default()
        };
        assert_eq!(
            convert(b"<p>too long for ten</p>", "", &small),
            Err(ConvertError::TooLarge(10))
        );
        let deep = "<div>".repeat(400) + "x" + &"</div>".repeat(400);
        assert_eq!(
            convert(deep.as_bytes(), "", &Options::default()),
            Err(ConvertError::TooDeep(256))
        );
    }

    #[test]
    fn tokens_are_characters_over_the_ratio() {
        let out = convert(
            b"<p>12345678</p>",
            "",
            &Options {
                chars_per_token: 4.0,
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(out.markdown, "12345678\n");
        assert_eq!(
            out.tokens, 3,
            "9 characters (with the newline) over 4, rounded up"
        );
    }

    #[test]
    fn unsafe_links_keep_only_their_text() {
        assert_eq!(md("<a href=\"javascript:alert(1)\">x</a>"), "x\n");
        assert_eq!(md("<a href=\" JavaScript:alert(1)\">x</a>"), "x\n");
        assert_eq!(
            md("<a href=\"data:text/html,hi\">x</a> <img src=\"file:///etc/passwd\" alt=a>"),
            "x\n"
        );
        assert_eq!(md("<a href=\"/docs/a b\">x</a>"), "[x](</docs/a b>)\n");
    }

    /// Attribute text reaches the output only escaped for where it lands: a title with
    /// line breaks made a live `javascript:` link past the URL filter.
    #[test]
    fn attribute_text_cannot_inject_markdown() {
        let title = md("<a href=\"/ok\" title=\"a&#10;&#10;[evil](javascript:alert(1))\">x</a>");
        assert_eq!(title, "[x](/ok \"a [evil](javascript:alert(1))\")\n");
        let quoted = md(r#"<a href="/ok" title='say "hi" \'>x</a>"#);
        assert_eq!(quoted, "[x](/ok \"say \\\"hi\\\" \\\\\")\n");
        let href = md("<a href=\"/a&#10;&#10;[evil](javascript:alert(1))\">x</a>");
        assert!(
            !href.contains('\n') || href.trim_end().lines().count() == 1,
            "{href}"
        );
        assert!(href.starts_with("[x](<") && href.contains("%0A%0A"), "{href}");
        let backslash = md(r#"<a href="/a\">x</a> <a href="javascript:alert(1)">y</a>"#);
        assert!(backslash.starts_with("[x](/a%5C)"), "{backslash}");
        let alt = md("<img src=\"/i.png\" alt=\"a&#10;&#10;# not a heading ]\">");
        assert_eq!(alt, "![a # not a heading \\]](/i.png)\n");
        let cell =
            md("<table><tr><th>a|b</th><th><code>x|y</code></th></tr><tr><td>1</td><td>2</td></tr></table>");
        assert!(cell.starts_with("| a\\|b | `x\\|y` |"), "{cell}");
        let fence = md("<pre><code>```\nrm -rf /\n```</code></pre>");
        assert!(fence.starts_with("````\n```"), "{fence}");
    }
}
