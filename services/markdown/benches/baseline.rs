//! The first-generation converter (html5ever building an `RcDom`, then rendered), kept
//! here as the baseline the bench measures the current one against.

use html5ever::tendril::TendrilSink;
use markup5ever_rcdom::{Handle, NodeData, RcDom};
use std::time::{Duration, Instant};

/// Conversion settings and limits.
#[derive(Clone, Debug)]
pub struct Options {
    /// Elements pruned with their content, besides those always dropped.
    pub prune: Vec<String>,
    /// Characters per token for the estimate.
    pub chars_per_token: f32,
    /// Largest input accepted, in bytes.
    pub max_input_bytes: usize,
    /// Deepest element nesting accepted.
    pub max_depth: usize,
    /// Longest a conversion may take.
    pub max_time: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            prune: ["nav", "footer", "aside"].map(String::from).to_vec(),
            chars_per_token: 4.0,
            max_input_bytes: 16 << 20,
            max_depth: 256,
            max_time: Duration::from_secs(5),
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

/// Elements dropped with their content, always.
const DROPPED: [&str; 12] = [
    "script", "style", "noscript", "template", "input", "select", "textarea", "button", "option", "head",
    "iframe", "object",
];

/// Converts HTML bytes served with `content_type` to Markdown.
pub fn convert(html: &[u8], content_type: &str, options: &Options) -> Result<Converted, ConvertError> {
    if html.len() > options.max_input_bytes {
        return Err(ConvertError::TooLarge(options.max_input_bytes));
    }
    let started = Instant::now();
    let dom = tracing::info_span!("markdown.parse", input_bytes = html.len() as i64).in_scope(|| {
        let text = kubedav_markdown::charset::decode(html, content_type);
        html5ever::parse_document(RcDom::default(), Default::default()).one(text)
    });
    let mut renderer = Renderer {
        options,
        deadline: started + options.max_time,
        visited: 0,
    };
    let markdown = tracing::info_span!("markdown.convert").in_scope(|| renderer.blocks(&dom.document, 0))?;
    let markdown = markdown.trim().to_owned() + "\n";
    let tokens = (markdown.chars().count() as f32 / options.chars_per_token.max(0.1)).ceil() as u64;
    Ok(Converted { markdown, tokens })
}

struct Renderer<'a> {
    options: &'a Options,
    deadline: Instant,
    visited: usize,
}

fn name(node: &Handle) -> Option<String> {
    match &node.data {
        NodeData::Element { name, .. } => Some(name.local.to_string()),
        _ => None,
    }
}

fn attr(node: &Handle, wanted: &str) -> Option<String> {
    match &node.data {
        NodeData::Element { attrs, .. } => attrs
            .borrow()
            .iter()
            .find(|a| &*a.name.local == wanted)
            .map(|a| a.value.to_string()),
        _ => None,
    }
}

fn is_block(tag: &str) -> bool {
    matches!(
        tag,
        "p" | "div"
            | "section"
            | "article"
            | "main"
            | "header"
            | "body"
            | "html"
            | "figure"
            | "figcaption"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "ul"
            | "ol"
            | "blockquote"
            | "pre"
            | "hr"
            | "table"
            | "dl"
            | "address"
            | "details"
            | "summary"
            | "fieldset"
            | "form"
            | "center"
            | "li"
            | "nav"
            | "footer"
            | "aside"
            | "hgroup"
    )
}

/// Whether a link or image target may be kept: no script or local-file schemes.
fn safe_url(url: &str) -> bool {
    let scheme: String = url
        .trim()
        .chars()
        .take_while(|c| *c != ':')
        .filter(|c| !c.is_whitespace() && !c.is_control())
        .collect();
    let has_scheme = url.contains(':') && !scheme.contains(['/', '?', '#']);
    !(has_scheme
        && ["javascript", "vbscript", "data", "file"]
            .iter()
            .any(|s| scheme.eq_ignore_ascii_case(s)))
}

/// A link destination that is safe to write in Markdown: characters that could end it
/// early or escape its end (line breaks and other controls, `<`, `>`, `\\`) are
/// percent-encoded, and one with spaces or parentheses goes between angle brackets.
fn destination(url: &str) -> String {
    let url = url.trim();
    let mut encoded = String::with_capacity(url.len());
    for c in url.chars() {
        match c {
            '<' | '>' | '\\' => encoded.push_str(&format!("%{:02X}", c as u32)),
            c if c.is_control() => encoded.push_str(&format!("%{:02X}", c as u32)),
            c => encoded.push(c),
        }
    }
    if encoded.contains([' ', '(', ')']) || encoded.is_empty() {
        format!("<{encoded}>")
    } else {
        encoded
    }
}

/// A link title between double quotes: whitespace (line breaks included) folded to
/// single spaces, so it cannot end the link's line or paragraph, and `"` and `\\`
/// escaped, so it cannot end the title early.
fn link_title(title: &str) -> String {
    let mut out = String::from(" \"");
    for c in collapse(title).chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A table cell's text: every `|` not already escaped is, even inside a code span (GFM
/// reads a cell's pipes before its inline content).
fn table_cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut backslashes = 0;
    for c in text.chars() {
        if c == '|' && backslashes % 2 == 0 {
            out.push('\\');
        }
        backslashes = if c == '\\' { backslashes + 1 } else { 0 };
        out.push(c);
    }
    out
}

/// Escapes Markdown metacharacters in text.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Escapes what would start a block at the beginning of a line.
fn escape_line_start(line: &str) -> String {
    let trimmed = line.trim_start();
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    let needs = trimmed.starts_with('#')
        || trimmed.starts_with("- ")
        || trimmed.starts_with("+ ")
        || trimmed.starts_with("= ")
        || trimmed == "-"
        || (digits > 0
            && matches!(trimmed[digits..].chars().next(), Some('.') | Some(')'))
            && trimmed[digits + 1..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace));
    if !needs {
        return line.to_owned();
    }
    if digits > 0 {
        let (num, rest) = trimmed.split_at(digits);
        format!("{num}\\{rest}")
    } else {
        format!("\\{trimmed}")
    }
}

fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space {
                out.push(' ');
                space = false;
            }
            out.push(c);
        }
    }
    if space {
        out.push(' ');
    }
    out
}

fn text_of(node: &Handle) -> String {
    let mut out = String::new();
    fn walk(node: &Handle, out: &mut String) {
        if let NodeData::Text { contents } = &node.data {
            out.push_str(&contents.borrow());
        }
        for child in node.children.borrow().iter() {
            walk(child, out);
        }
    }
    walk(node, &mut out);
    out
}

fn prefix_lines(text: &str, first: &str, rest: &str) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let prefix = if i == 0 { first } else { rest };
        if line.is_empty() {
            out.push_str(prefix.trim_end());
        } else {
            out.push_str(prefix);
            out.push_str(line);
        }
        out.push('\n');
    }
    out.trim_end_matches('\n').to_owned()
}

impl Renderer<'_> {
    fn tick(&mut self, depth: usize) -> Result<(), ConvertError> {
        if depth > self.options.max_depth {
            return Err(ConvertError::TooDeep(self.options.max_depth));
        }
        self.visited += 1;
        if self.visited.is_multiple_of(1024) && Instant::now() > self.deadline {
            return Err(ConvertError::TooSlow(self.options.max_time));
        }
        Ok(())
    }

    fn dropped(&self, tag: &str) -> bool {
        DROPPED.contains(&tag) || self.options.prune.iter().any(|p| p.eq_ignore_ascii_case(tag))
    }

    /// The children of `node` as Markdown blocks separated by blank lines.
    fn blocks(&mut self, node: &Handle, depth: usize) -> Result<String, ConvertError> {
        let mut out: Vec<String> = Vec::new();
        let mut inline = String::new();
        for child in node.children.borrow().iter() {
            self.tick(depth)?;
            let tag = name(child);
            match tag.as_deref() {
                Some(tag) if self.dropped(tag) => {}
                Some(tag) if is_block(tag) || wraps_blocks(child) => {
                    flush(&mut inline, &mut out);
                    let block = self.block(child, tag, depth + 1)?;
                    if !block.trim().is_empty() {
                        out.push(block);
                    }
                }
                _ => inline.push_str(&self.inline(child, depth + 1)?),
            }
        }
        flush(&mut inline, &mut out);
        Ok(out.join("\n\n"))
    }

    fn block(&mut self, node: &Handle, tag: &str, depth: usize) -> Result<String, ConvertError> {
        Ok(match tag {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let level = usize::from(tag.as_bytes()[1] - b'0');
                let text = collapse(&self.inline_children(node, depth)?).trim().to_owned();
                if text.is_empty() {
                    String::new()
                } else {
                    format!("{} {}", "#".repeat(level), text)
                }
            }
            "hr" => "---".into(),
            "pre" => self.code_block(node),
            "blockquote" => prefix_lines(&self.blocks(node, depth)?, "> ", "> "),
            "ul" | "ol" => self.list(node, tag == "ol", depth)?,
            "table" => self.table(node, depth)?,
            "dl" => self.definitions(node, depth)?,
            _ => self.blocks(node, depth)?,
        })
    }

    fn code_block(&self, node: &Handle) -> String {
        let code = node
            .children
            .borrow()
            .iter()
            .find(|c| name(c).as_deref() == Some("code"))
            .cloned();
        let class = code
            .as_ref()
            .and_then(|c| attr(c, "class"))
            .or_else(|| attr(node, "class"))
            .unwrap_or_default();
        let language = class
            .split_whitespace()
            .find_map(|c| c.strip_prefix("language-").or_else(|| c.strip_prefix("lang-")))
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_' | '#' | '.'))
            .collect::<String>();
        let text = text_of(code.as_ref().unwrap_or(node));
        let text = text.strip_prefix('\n').unwrap_or(&text).trim_end_matches('\n');
        let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
        let fence = "`".repeat(longest.max(2) + 1);
        format!("{fence}{language}\n{text}\n{fence}")
    }

    fn list(&mut self, node: &Handle, ordered: bool, depth: usize) -> Result<String, ConvertError> {
        let start: usize = attr(node, "start")
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1);
        let mut items = Vec::new();
        for child in node.children.borrow().iter() {
            if name(child).as_deref() != Some("li") {
                continue;
            }
            let marker = if ordered {
                format!("{}. ", start + items.len())
            } else {
                "- ".to_owned()
            };
            let mut body = self.blocks(child, depth + 1)?;
            // An item of text and nested lists (no paragraphs) stays tight.
            if !child
                .children
                .borrow()
                .iter()
                .any(|c| matches!(name(c).as_deref(), Some("p" | "pre" | "blockquote" | "table")))
            {
                body = body.replace("\n\n", "\n");
            }
            let indent = " ".repeat(marker.len());
            items.push(prefix_lines(
                if body.is_empty() { " " } else { &body },
                &marker,
                &indent,
            ));
        }
        let tight = items.iter().all(|i| !i.contains("\n\n"));
        Ok(items.join(if tight { "\n" } else { "\n\n" }))
    }

    fn table(&mut self, node: &Handle, depth: usize) -> Result<String, ConvertError> {
        let mut rows: Vec<Vec<String>> = Vec::new();
        self.rows(node, depth, &mut rows)?;
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        if width == 0 {
            return Ok(String::new());
        }
        let line = |cells: &[String]| {
            let mut padded: Vec<String> = cells.to_vec();
            padded.resize(width, String::new());
            format!("| {} |", padded.join(" | "))
        };
        let mut out = vec![line(&rows[0]), format!("|{}", " --- |".repeat(width))];
        out.extend(rows[1..].iter().map(|r| line(r)));
        Ok(out.join("\n"))
    }

    /// The rows of a table (or of its sections), in document order.
    fn rows(&mut self, node: &Handle, depth: usize, rows: &mut Vec<Vec<String>>) -> Result<(), ConvertError> {
        for child in node.children.borrow().iter() {
            self.tick(depth)?;
            match name(child).as_deref() {
                Some("tr") => {
                    let mut cells = Vec::new();
                    for cell in child.children.borrow().iter() {
                        if matches!(name(cell).as_deref(), Some("td" | "th")) {
                            let text = collapse(&self.inline_children(cell, depth + 1)?)
                                .trim()
                                .to_owned();
                            cells.push(table_cell(&text.replace('\n', " ")));
                        }
                    }
                    rows.push(cells);
                }
                Some("thead" | "tbody" | "tfoot") => self.rows(child, depth + 1, rows)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// A definition list as a Markdown list: `- **term**: definition`.
    fn definitions(&mut self, node: &Handle, depth: usize) -> Result<String, ConvertError> {
        let mut items: Vec<String> = Vec::new();
        for child in node.children.borrow().iter() {
            match name(child).as_deref() {
                Some("dt") => items.push(format!(
                    "- **{}**",
                    collapse(&self.inline_children(child, depth + 1)?).trim()
                )),
                Some("dd") => {
                    let definition = self.blocks(child, depth + 1)?;
                    match items.last_mut() {
                        Some(item) if !item.contains(": ") && !definition.contains('\n') => {
                            item.push_str(": ");
                            item.push_str(&definition);
                        }
                        _ => items.push(prefix_lines(&definition, "  ", "  ")),
                    }
                }
                _ => {}
            }
        }
        Ok(items.join("\n"))
    }

    fn inline_children(&mut self, node: &Handle, depth: usize) -> Result<String, ConvertError> {
        let mut out = String::new();
        for child in node.children.borrow().iter() {
            self.tick(depth)?;
            out.push_str(&self.inline(child, depth + 1)?);
        }
        Ok(out)
    }

    fn inline(&mut self, node: &Handle, depth: usize) -> Result<String, ConvertError> {
        self.tick(depth)?;
        let tag = match &node.data {
            NodeData::Text { contents } => return Ok(escape(&collapse(&contents.borrow()))),
            NodeData::Element { name, .. } => name.local.to_string(),
            _ => return Ok(String::new()),
        };
        if self.dropped(&tag) {
            return Ok(String::new());
        }
        let wrap = |inner: String, mark: &str| {
            let trimmed = inner.trim();
            if trimmed.is_empty() {
                inner
            } else {
                let lead = if inner.starts_with(' ') { " " } else { "" };
                let trail = if inner.ends_with(' ') { " " } else { "" };
                format!("{lead}{mark}{trimmed}{mark}{trail}")
            }
        };
        Ok(match tag.as_str() {
            "em" | "i" => wrap(self.inline_children(node, depth)?, "*"),
            "strong" | "b" => wrap(self.inline_children(node, depth)?, "**"),
            "code" | "kbd" | "samp" => {
                let text = collapse(&text_of(node));
                let ticks = "`".repeat(text.split(|c| c != '`').map(str::len).max().unwrap_or(0) + 1);
                let pad = if text.starts_with('`') || text.ends_with('`') {
                    " "
                } else {
                    ""
                };
                format!("{ticks}{pad}{text}{pad}{ticks}")
            }
            "br" => "\\\n".into(),
            "a" => {
                let text = self.inline_children(node, depth)?;
                match attr(node, "href") {
                    Some(href) if safe_url(&href) && !href.trim().is_empty() => {
                        let title = attr(node, "title").map(|t| link_title(&t)).unwrap_or_default();
                        format!("[{}]({}{title})", text.trim(), destination(&href))
                    }
                    _ => text,
                }
            }
            "img" => match attr(node, "src") {
                Some(src) if safe_url(&src) => {
                    format!(
                        "![{}]({})",
                        escape(&collapse(&attr(node, "alt").unwrap_or_default())),
                        destination(&src)
                    )
                }
                _ => String::new(),
            },
            _ => self.inline_children(node, depth)?,
        })
    }
}

/// Whether an inline element holds block elements (html5ever puts a table inside the
/// `<b>` it reconstructs, as browsers do): then it is rendered as a container.
/// It looks at most four levels down, so the check stays cheap on deep inline nesting.
fn wraps_blocks(node: &Handle) -> bool {
    fn within(node: &Handle, levels: usize) -> bool {
        levels > 0
            && node
                .children
                .borrow()
                .iter()
                .any(|c| name(c).is_some_and(|t| is_block(&t) || within(c, levels - 1)))
    }
    within(node, 4)
}

/// Ends the running paragraph of inline content.
fn flush(inline: &mut String, out: &mut Vec<String>) {
    let paragraph = std::mem::take(inline);
    let lines: Vec<String> = paragraph
        .split('\n')
        .map(|l| escape_line_start(l.trim()))
        .collect();
    let text = lines.join("\n").trim().to_owned();
    if !text.is_empty() && text != "\\" {
        out.push(text);
    }
}
