//! Writing Markdown in one pass, as the elements open and close.
//!
//! The writer keeps only what the Markdown of the current place needs: the containers
//! around it (block quotes, lists, definition lists, each with its line prefix), the
//! inline text of the paragraph being written with its open emphasis, code and link
//! marks, and the rows of an open table (a GFM table's delimiter row follows its first
//! row, whose width is known only at the table's end). Everything else is written out
//! as soon as it is complete, so memory follows the largest paragraph or table, not the
//! page.

mod table;

use crate::escape::{destination, escape_line_start, link_title, push_text, safe_url};
use table::Table;

/// How deep block quotes and lists are indented; deeper ones are written at this depth
/// (their text is kept), so a hostile nesting cannot make each line longer without end.
const MAX_INDENTED_CONTAINERS: usize = 8;

/// An inline mark, by what it writes around its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarkKind {
    /// `*text*`
    Emphasis,
    /// `**text**`
    Strong,
    /// `` `text` ``: its text is literal.
    Code,
    /// `[text](href "title")`; `None` when the link has no safe target (its text stays).
    Link(Option<(String, Option<String>)>),
}

#[derive(Debug)]
struct Mark {
    id: u32,
    kind: MarkKind,
    start: usize,
    /// Opened inside code, where marks are text.
    inert: bool,
}

/// An inline context: the text of a paragraph, heading, term or table cell.
#[derive(Debug, Default)]
struct Inline {
    text: String,
    marks: Vec<Mark>,
    code: usize,
}

#[derive(Debug)]
enum Container {
    Quote,
    List {
        ordered: bool,
        next: u64,
        last_loose: bool,
    },
    Item {
        marker: Option<String>,
        loose: bool,
    },
    Definitions {
        term: Option<String>,
    },
    Definition,
}

#[derive(Debug, Default)]
struct Level {
    written: usize,
    last_loose: bool,
}

/// What a leaf block is, for how it is written and separated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaf {
    /// Running text outside any paragraph element.
    Text,
    /// A `p`: lists holding one are loose.
    Paragraph,
    /// A heading of this level.
    Heading(u8),
    /// A definition list's term.
    Term,
}

/// The Markdown writer.
#[derive(Default)]
pub struct Writer {
    out: String,
    containers: Vec<(Container, Level)>,
    root: Level,
    inline: Vec<Inline>,
    leaf: Option<Leaf>,
    pre: Option<(String, String)>,
    pre_depth: usize,
    tables: Vec<Table>,
    /// Headings, terms and cells open: blocks inside them are written as spaces.
    inline_only: usize,
    /// Leaf elements opened inside an inline-only context.
    nested_leaves: usize,
    next_id: u32,
    /// Whether links with no text are dropped (the `main` content mode).
    pub drop_empty_links: bool,
}

impl Writer {
    /// A writer.
    pub fn new() -> Self {
        Self {
            inline: vec![Inline::default()],
            ..Self::default()
        }
    }

    /// Ends everything still open and returns the Markdown.
    pub fn finish(mut self) -> String {
        self.end_leaf();
        while !self.tables.is_empty() {
            self.end_table();
        }
        while let Some((container, _)) = self.containers.pop() {
            if let Container::Definitions { term: Some(term) } = container {
                self.write_block(&term, false);
            }
        }
        let mut out = self.out;
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    }

    fn current(&mut self) -> &mut Inline {
        self.inline.last_mut().expect("the root inline context")
    }

    /// Text: folded, escaped, or literal inside code; kept as is inside `pre`.
    pub fn text(&mut self, text: &str) {
        if let Some((code, _)) = &mut self.pre {
            let text = text
                .strip_prefix('\n')
                .filter(|_| code.is_empty())
                .unwrap_or(text);
            code.push_str(&text.replace("\r\n", "\n").replace('\r', "\n"));
            return;
        }
        if self.leaf.is_none() && text.trim().is_empty() {
            return;
        }
        if self.leaf.is_none() {
            self.leaf = Some(Leaf::Text);
        }
        let inline = self.current();
        let literal = inline.code > 0;
        push_text(&mut inline.text, text, literal);
    }

    /// Inline Markdown already escaped (an image).
    pub fn inline_markdown(&mut self, markdown: &str) {
        if self.pre.is_some() {
            return;
        }
        if self.leaf.is_none() {
            self.leaf = Some(Leaf::Text);
        }
        self.current().text.push_str(markdown);
    }

    /// A line break (`<br>`).
    pub fn line_break(&mut self) {
        if let Some((code, _)) = &mut self.pre {
            code.push('\n');
        } else if self.inline_only > 0 {
            self.text(" ");
        } else if self.leaf.is_some() {
            self.current().text.push_str("\\\n");
        }
    }

    /// Opens an inline mark; its id closes it.
    pub fn open_mark(&mut self, kind: MarkKind) -> u32 {
        self.next_id += 1;
        let id = self.next_id;
        let in_pre = self.pre.is_some();
        let inline = self.current();
        let inert = in_pre || inline.code > 0;
        if kind == MarkKind::Code && !inert {
            inline.code += 1;
        }
        let start = inline.text.len();
        inline.marks.push(Mark {
            id,
            kind,
            start,
            inert,
        });
        id
    }

    /// Closes mark `id`: marks opened after it close with it and open again after it, as
    /// a browser reconstructs misnested formatting.
    pub fn close_mark(&mut self, id: u32) {
        let drop_empty = self.drop_empty_links;
        let inline = self.current();
        let Some(at) = inline.marks.iter().position(|m| m.id == id) else {
            return;
        };
        let mut after: Vec<Mark> = inline.marks.drain(at + 1..).collect();
        for mark in after.iter().rev() {
            wrap(&mut inline.text, mark, drop_empty);
        }
        let mark = inline.marks.pop().expect("found above");
        wrap(&mut inline.text, &mark, drop_empty);
        if mark.kind == MarkKind::Code && !mark.inert {
            inline.code -= 1;
        }
        let end = inline.text.len();
        for mark in &mut after {
            mark.start = end;
        }
        inline.marks.extend(after);
    }

    /// Starts a leaf block (`p`, a heading, a term): the running one ends.
    pub fn start_leaf(&mut self, leaf: Leaf) {
        if self.pre.is_some() {
            return;
        }
        if self.inline_only > 0 {
            self.nested_leaves += 1;
            self.text(" ");
            return;
        }
        self.end_leaf();
        self.leaf = Some(leaf);
        if matches!(leaf, Leaf::Heading(_) | Leaf::Term) {
            self.inline_only += 1;
        }
    }

    /// Closes the leaf element (`</p>`, `</h2>`, `</dt>`) last started.
    pub fn close_leaf(&mut self) {
        if self.nested_leaves > 0 && self.pre.is_none() {
            self.nested_leaves -= 1;
            self.text(" ");
            return;
        }
        self.end_leaf();
    }

    /// Ends the running leaf block and writes it.
    pub fn end_leaf(&mut self) {
        if self.pre.is_some() {
            return;
        }
        if self.inline_only > self.heading_or_term() {
            self.text(" ");
            return;
        }
        let Some(leaf) = self.leaf.take() else {
            return;
        };
        if matches!(leaf, Leaf::Heading(_) | Leaf::Term) {
            self.inline_only -= 1;
        }
        let text = self.take_inline();
        let text = match leaf {
            Leaf::Heading(level) => {
                let text = text.replace("\\\n", " ");
                let text = text.trim();
                if text.is_empty() {
                    return;
                }
                format!("{} {}", "#".repeat(usize::from(level)), text)
            }
            Leaf::Term => {
                let text = text.replace("\\\n", " ");
                let text = text.trim();
                if text.is_empty() {
                    return;
                }
                let term = format!("- **{text}**");
                if let Some((Container::Definitions { term: pending }, _)) = self.containers.last_mut() {
                    if let Some(previous) = pending.replace(term) {
                        self.write_block(&previous, false);
                    }
                    return;
                }
                term
            }
            Leaf::Text | Leaf::Paragraph => {
                let text = if text.contains('\n') {
                    let lines: Vec<_> = text.split('\n').map(|l| escape_line_start(l.trim())).collect();
                    lines.join("\n")
                } else {
                    escape_line_start(text.trim()).into_owned()
                };
                let trimmed = text.trim().trim_end_matches('\\').trim_end();
                if trimmed.is_empty() {
                    return;
                }
                if trimmed.len() == text.len() {
                    text
                } else {
                    trimmed.to_owned()
                }
            }
        };
        self.write_block(&text, leaf == Leaf::Paragraph);
    }

    /// How many of the open inline-only contexts are the current heading or term.
    fn heading_or_term(&self) -> usize {
        usize::from(matches!(self.leaf, Some(Leaf::Heading(_) | Leaf::Term)))
    }

    /// The current inline context's text, its marks closed (and kept, at the start of
    /// the next text: formatting carries over into the next block, as in a browser).
    fn take_inline(&mut self) -> String {
        let drop_empty = self.drop_empty_links;
        let inline = self.current();
        for mark in inline.marks.iter().rev() {
            wrap(&mut inline.text, mark, drop_empty);
        }
        for mark in &mut inline.marks {
            mark.start = 0;
            // A link is written once: the next blocks keep its text, not its target
            // again (a long href carried into every block would grow the output).
            if matches!(mark.kind, MarkKind::Link(_)) {
                mark.kind = MarkKind::Link(None);
            }
        }
        std::mem::take(&mut inline.text)
    }

    /// Starts a block container or a block that interrupts text (`div`, `hr`...).
    pub fn block_boundary(&mut self) {
        if self.pre.is_some() {
            return;
        }
        if self.inline_only > 0 {
            self.text(" ");
        } else {
            self.end_leaf();
        }
    }

    /// A thematic break.
    pub fn rule(&mut self) {
        if self.inline_only > 0 || self.pre.is_some() {
            return;
        }
        self.end_leaf();
        self.write_block("---", false);
    }

    /// Opens a block quote.
    pub fn open_quote(&mut self) {
        self.open_container(Container::Quote);
    }

    /// Opens a list.
    pub fn open_list(&mut self, ordered: bool, start: u64) {
        self.open_container(Container::List {
            ordered,
            next: start,
            last_loose: false,
        });
    }

    /// Opens a list item.
    pub fn open_item(&mut self) {
        self.open_container(Container::Item {
            marker: None,
            loose: false,
        });
    }

    /// Opens a definition list.
    pub fn open_definitions(&mut self) {
        self.open_container(Container::Definitions { term: None });
    }

    /// Opens a definition.
    pub fn open_definition(&mut self) {
        self.open_container(Container::Definition);
    }

    fn open_container(&mut self, container: Container) {
        if self.inline_only > 0 || self.pre.is_some() {
            self.text(" ");
            return;
        }
        self.end_leaf();
        self.containers.push((container, Level::default()));
    }

    /// Closes the innermost container (quote, list, item, definition list or definition).
    pub fn close_container(&mut self) {
        if self.inline_only > 0 || self.pre.is_some() {
            self.text(" ");
            return;
        }
        self.end_leaf();
        if let Some((Container::Definitions { term: Some(term) }, level)) = self.containers.pop() {
            self.containers
                .push((Container::Definitions { term: None }, level));
            self.write_block(&term, false);
            self.containers.pop();
        }
    }

    /// Opens `pre`: text is kept as is until it closes.
    pub fn open_pre(&mut self, language: String) {
        if self.inline_only > 0 {
            self.text(" ");
            return;
        }
        self.pre_depth += 1;
        if self.pre.is_none() {
            self.end_leaf();
            self.pre = Some((String::new(), language));
        }
    }

    /// Names the language of the open `pre` when it has none yet (from its `code`).
    pub fn pre_language(&mut self, language: String) {
        if let Some((code, lang)) = &mut self.pre
            && lang.is_empty()
            && code.is_empty()
        {
            *lang = language;
        }
    }

    /// Whether a `pre` is open.
    pub fn in_pre(&self) -> bool {
        self.pre.is_some()
    }

    /// Closes `pre` and writes its fenced code block.
    pub fn close_pre(&mut self) {
        if self.inline_only > 0 && self.pre.is_none() {
            self.text(" ");
            return;
        }
        self.pre_depth = self.pre_depth.saturating_sub(1);
        if self.pre_depth > 0 {
            return;
        }
        let Some((code, language)) = self.pre.take() else {
            return;
        };
        let code = code.trim_end_matches('\n');
        let longest = code.split(|c| c != '`').map(str::len).max().unwrap_or(0);
        let fence = "`".repeat(longest.max(2) + 1);
        self.write_block(&format!("{fence}{language}\n{code}\n{fence}"), true);
    }

    /// Writes a finished block under the open containers, after the separator its place
    /// asks for.
    fn write_block(&mut self, block: &str, loose: bool) {
        // A definition's first one-line block joins its term's line.
        let mut block = std::borrow::Cow::Borrowed(block);
        let mut joined = false;
        if let Some(at) = self
            .containers
            .iter()
            .rposition(|(c, _)| matches!(c, Container::Definitions { .. }))
        {
            let first_in_definition = matches!(self.containers.get(at + 1), Some((Container::Definition, level)) if level.written == 0)
                && self.containers.len() == at + 2;
            if let (Container::Definitions { term }, _) = &mut self.containers[at]
                && let Some(term) = term.take()
            {
                if first_in_definition && !block.contains('\n') {
                    block = format!("{term}: {block}").into();
                    joined = true;
                } else {
                    let depth = self.containers.len();
                    let saved: Vec<_> = self.containers.drain(at + 1..depth).collect();
                    self.write_block(&term, false);
                    self.containers.extend(saved);
                }
            }
        }
        self.separate(loose);
        if self.containers.is_empty() {
            self.out.push_str(&block);
            self.root.written += 1;
            return;
        }
        let (first_prefix, rest_prefix) = self.prefixes(joined);
        for (i, line) in block.split('\n').enumerate() {
            let prefix = if i == 0 { &first_prefix } else { &rest_prefix };
            if i > 0 {
                self.out.push('\n');
            }
            if line.is_empty() {
                self.out.push_str(prefix.trim_end());
            } else {
                self.out.push_str(prefix);
                self.out.push_str(line);
            }
        }
        // Every container now holds one more block.
        let mut item_loose = loose;
        for (container, level) in self.containers.iter_mut().rev() {
            level.written += 1;
            level.last_loose = loose;
            match container {
                Container::Item { loose: l, .. } => {
                    *l |= loose;
                    item_loose = *l;
                }
                Container::List { last_loose, .. } => *last_loose = item_loose,
                _ => {}
            }
        }
        self.root.written += 1;
    }

    /// The line prefixes of a block written now: block quote marks, list markers (given
    /// to items at their first block, numbered then) and indentation.
    fn prefixes(&mut self, joined_to_term: bool) -> (String, String) {
        let mut first = String::new();
        let mut rest = String::new();
        let depth = self.containers.len().min(MAX_INDENTED_CONTAINERS);
        for i in 0..depth {
            let (outer, inner) = self.containers.split_at_mut(i);
            match &mut inner[0].0 {
                Container::Quote => {
                    first.push_str("> ");
                    rest.push_str("> ");
                }
                Container::Item {
                    marker: Some(marker), ..
                } => {
                    let indent = " ".repeat(marker.len());
                    first.push_str(&indent);
                    rest.push_str(&indent);
                }
                Container::Item { marker, .. } => {
                    let new = match outer.last_mut() {
                        Some((
                            Container::List {
                                ordered: true, next, ..
                            },
                            _,
                        )) => {
                            *next += 1;
                            format!("{}. ", *next - 1)
                        }
                        _ => "- ".to_owned(),
                    };
                    first.push_str(&new);
                    rest.push_str(&" ".repeat(new.len()));
                    *marker = Some(new);
                }
                Container::Definition if !joined_to_term => {
                    first.push_str("  ");
                    rest.push_str("  ");
                }
                _ => {}
            }
        }
        (first, rest)
    }

    /// Writes what separates the next block from the last one: a line break inside a
    /// tight list or a definition list, else a blank line (keeping block quote marks).
    fn separate(&mut self, loose: bool) {
        if self.root.written == 0 {
            return;
        }
        let mut blank = true;
        for (container, level) in self.containers.iter().rev() {
            if level.written == 0 {
                continue;
            }
            blank = match container {
                Container::Quote => true,
                Container::List { last_loose, .. } => *last_loose || loose,
                Container::Item { .. } => level.last_loose || loose,
                Container::Definitions { .. } | Container::Definition => false,
            };
            break;
        }
        self.out.push('\n');
        if blank {
            let quotes = self.containers[..self.containers.len().min(MAX_INDENTED_CONTAINERS)]
                .iter()
                .filter(|(c, level)| matches!(c, Container::Quote) && level.written > 0)
                .count();
            self.out.push_str(">".repeat(quotes).as_str());
            self.out.push('\n');
        }
    }
}

/// Writes `mark` around the text after its start: its marks go inside any spaces at
/// the ends (`a **b** c`, not `a** b **c`), inserted in place.
fn wrap(text: &mut String, mark: &Mark, drop_empty_links: bool) {
    if mark.inert || mark.start > text.len() {
        return;
    }
    let inner = &text[mark.start..];
    let begin = mark.start + (inner.len() - inner.trim_start().len());
    let end = mark.start + inner.trim_end().len();
    let empty = begin >= end;
    let (open, close): (std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>) = match &mark.kind {
        MarkKind::Emphasis | MarkKind::Strong if empty || text[..end].ends_with('\\') => return,
        MarkKind::Emphasis => ("*".into(), "*".into()),
        MarkKind::Strong => ("**".into(), "**".into()),
        MarkKind::Code => {
            if empty {
                return;
            }
            let inner = &text[begin..end];
            let ticks = "`".repeat(inner.split(|c| c != '`').map(str::len).max().unwrap_or(0) + 1);
            if inner.starts_with('`') || inner.ends_with('`') {
                (format!("{ticks} ").into(), format!(" {ticks}").into())
            } else {
                (ticks.clone().into(), ticks.into())
            }
        }
        MarkKind::Link(None) => return,
        MarkKind::Link(Some(_)) if empty && drop_empty_links => {
            // Nothing but spaces inside: keep one, drop the link.
            let space = text[mark.start..].starts_with(' ');
            text.truncate(mark.start);
            if space {
                text.push(' ');
            }
            return;
        }
        MarkKind::Link(Some((href, title))) => {
            if !safe_url(href) {
                return;
            }
            let title = title.as_deref().map(link_title).unwrap_or_default();
            ("[".into(), format!("]({}{title})", destination(href)).into())
        }
    };
    text.insert_str(end, &close);
    text.insert_str(begin, &open);
}
