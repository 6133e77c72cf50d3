//! The tree-construction rules Markdown needs, applied to the tokens as they come,
//! without building a tree: the stack of open elements, the implied end tags of `p`,
//! `li`, `dt`/`dd`, headings and table parts, table structure with foster parenting
//! (text and elements misplaced in a table come out before it, as in a browser), the
//! list of active formatting elements (bold, emphasis, code and links reopened in the
//! next block, closed at table cells), and the head. It decides what is written: the
//! chosen content, minus the dropped elements.

mod elements;
mod sink;

use crate::tokenizer::{Tag, TextMode, decode_text};
use crate::writer::{Leaf, MarkKind, Writer};
use crate::{Content, ConvertError, Options};
use elements::{closes_p, formatting, is_special, language};
use std::ops::Range;
use std::time::Instant;

/// Formatting entries kept open at once (after the last table cell); more are read as
/// plain text, so a page of unclosed `<b>`s cannot make every block cost more.
const MAX_ACTIVE_FORMATTING: usize = 12;

/// What an element is, for the rules and the writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum El {
    Paragraph,
    Heading(u8),
    Pre,
    Quote,
    List(bool),
    Item,
    Definitions,
    Term,
    Definition,
    Table,
    TableSection,
    Row,
    Cell,
    Caption,
    /// A block container with nothing of its own to write (`div`, `section`...).
    Block,
    /// An inline element written as code (`kbd`, `samp`).
    CodeLike,
    /// Any other element: its text is written, it writes nothing itself.
    Ordinary,
}

/// Which element the `main` content mode keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    /// The first `<main>`.
    Main,
    /// Every outermost `<article>`.
    Article,
    /// The first element with `role="main"`.
    RoleMain,
    /// The whole body.
    Body,
}

struct Open {
    name: Range<usize>,
    el: El,
    /// Dropped with its content.
    skip: bool,
    /// The element the content mode keeps.
    selected: bool,
    /// Whether its opening was written (so its closing is).
    written: bool,
    /// A code mark it opened (`kbd`, `samp`).
    mark: Option<u32>,
    /// Foreign content (`svg`, `math`): `<x/>` closes itself there.
    foreign: bool,
}

enum Active {
    /// A table cell or caption: formatting before it does not reach into it.
    Marker,
    Formatting {
        name: &'static str,
        mark: Option<u32>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    BeforeBody,
    Body,
}

/// What the page says about itself, for front matter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageInfo {
    /// The `<title>`.
    pub title: Option<String>,
    /// `<meta name="description">`.
    pub description: Option<String>,
    /// `<link rel="canonical">`, resolved.
    pub canonical: Option<String>,
}

/// The tokenizer's sink: rules in, Markdown out.
pub struct Builder<'o> {
    options: &'o Options,
    select: Select,
    /// Main and role=main keep only the first: then this is set.
    selection_done: bool,
    selected: usize,
    pub(crate) writer: Writer,
    names: String,
    stack: Vec<Open>,
    active: Vec<Active>,
    skipping: usize,
    phase: Phase,
    in_title: bool,
    /// Inside a head `script`, `style`...: the text is dropped.
    in_head_raw: bool,
    base: Option<url::Url>,
    /// What the page says about itself.
    pub info: PageInfo,
    /// Whether the chosen element was found.
    pub found: bool,
    pub(crate) error: Option<ConvertError>,
    deadline: Instant,
    visited: usize,
}

impl<'o> Builder<'o> {
    /// A builder writing the content `select` chooses.
    pub fn new(options: &'o Options, select: Select, deadline: Instant) -> Self {
        let mut writer = Writer::new();
        writer.drop_empty_links = options.content == Content::Main;
        Self {
            options,
            select,
            selection_done: false,
            selected: 0,
            writer,
            names: String::new(),
            stack: Vec::new(),
            active: Vec::new(),
            skipping: 0,
            phase: Phase::BeforeBody,
            in_title: false,
            in_head_raw: false,
            base: options.base_url.as_deref().and_then(|b| url::Url::parse(b).ok()),
            info: PageInfo::default(),
            found: select == Select::Body,
            error: None,
            deadline,
            visited: 0,
        }
    }

    /// Whether what comes now is written.
    fn writing(&self) -> bool {
        self.skipping == 0 && self.phase == Phase::Body && (self.select == Select::Body || self.selected > 0)
    }

    fn name_of(&self, open: &Open) -> &str {
        &self.names[open.name.clone()]
    }

    fn tick(&mut self) {
        self.visited += 1;
        if self.visited.is_multiple_of(1024) && Instant::now() > self.deadline {
            self.error = Some(ConvertError::TooSlow(self.options.max_time));
        }
    }

    /// A URL from the page, resolved against the request's when one is known.
    fn resolve(&self, url: &str) -> String {
        let url = url.trim();
        match &self.base {
            Some(base) if !url.is_empty() && !url.starts_with('#') => base
                .join(url)
                .map(String::from)
                .unwrap_or_else(|_| url.to_owned()),
            _ => url.to_owned(),
        }
    }

    fn dropped(&self, tag: &Tag<'_>) -> bool {
        let name = tag.name;
        if matches!(
            name,
            "script"
                | "style"
                | "noscript"
                | "template"
                | "input"
                | "select"
                | "textarea"
                | "button"
                | "option"
                | "iframe"
                | "object"
                | "svg"
                | "title"
                | "head"
        ) || self.options.prune.iter().any(|p| p.eq_ignore_ascii_case(name))
        {
            return true;
        }
        if self.options.content != Content::Main {
            return false;
        }
        matches!(
            name,
            "nav" | "aside" | "footer" | "dialog" | "datalist" | "meter" | "progress"
        ) || (name == "header" && !self.in_sectioning())
            || tag.has("hidden")
            || tag
                .attr("aria-hidden")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }

    /// Whether an article, aside, main, nav or section is open (a `header` inside one is
    /// that section's, not the page's).
    fn in_sectioning(&self) -> bool {
        self.stack
            .iter()
            .any(|o| matches!(self.name_of(o), "article" | "aside" | "main" | "nav" | "section"))
    }

    fn selects(&self, tag: &Tag<'_>) -> bool {
        if self.selection_done || self.skipping > 0 {
            return false;
        }
        match self.select {
            Select::Main => tag.name == "main",
            Select::Article => tag.name == "article" && self.selected == 0,
            Select::RoleMain => tag
                .attr("role")
                .is_some_and(|r| r.trim().eq_ignore_ascii_case("main")),
            Select::Body => false,
        }
    }

    // ---- the stack

    fn has_in_scope(&self, wanted: impl Fn(&str, El) -> bool, extra: &[&str]) -> bool {
        for open in self.stack.iter().rev() {
            let name = self.name_of(open);
            if wanted(name, open.el) {
                return true;
            }
            if matches!(
                name,
                "table" | "td" | "th" | "caption" | "html" | "template" | "marquee" | "object" | "applet"
            ) || open.foreign
                || extra.contains(&name)
            {
                return false;
            }
        }
        false
    }

    fn pop(&mut self) {
        let Some(open) = self.stack.pop() else {
            return;
        };
        self.names.truncate(open.name.start);
        if open.written {
            self.close_effect(&open);
        }
        if open.selected {
            self.selected -= 1;
            if self.select != Select::Article {
                self.selection_done = true;
            }
        }
        if open.skip {
            self.skipping -= 1;
        }
        if matches!(open.el, El::Cell | El::Caption) {
            self.clear_to_marker();
        }
    }

    /// Pops up to and including the topmost element matching `wanted`.
    fn pop_until(&mut self, wanted: impl Fn(&str, El) -> bool) {
        while let Some(open) = self.stack.last() {
            let done = wanted(self.name_of(open), open.el);
            self.pop();
            if done {
                break;
            }
        }
    }

    fn close_p(&mut self) {
        if self.has_in_scope(|_, el| el == El::Paragraph, &["button"]) {
            self.pop_until(|_, el| el == El::Paragraph);
        }
    }

    fn clear_to_marker(&mut self) {
        while let Some(entry) = self.active.pop() {
            match entry {
                Active::Marker => break,
                Active::Formatting { mark, .. } => {
                    if let Some(mark) = mark {
                        self.writer.close_mark(mark);
                    }
                }
            }
        }
    }

    /// The nearest table part open: where table tags apply.
    fn table_context(&self) -> Option<El> {
        self.stack.iter().rev().map(|o| o.el).find(|el| {
            matches!(
                el,
                El::Table | El::TableSection | El::Row | El::Cell | El::Caption
            )
        })
    }

    fn push(&mut self, tag: &Tag<'_>, el: El) {
        if self.stack.len() >= self.options.max_depth {
            self.error = Some(ConvertError::TooDeep(self.options.max_depth));
            return;
        }
        let skip = self.skipping > 0 || self.dropped(tag);
        let selected = !skip && self.selects(tag);
        let start = self.names.len();
        self.names.push_str(tag.name);
        let foreign = matches!(tag.name, "svg" | "math") || self.stack.last().is_some_and(|o| o.foreign);
        let mut open = Open {
            name: start..self.names.len(),
            el,
            skip,
            selected,
            written: false,
            mark: None,
            foreign,
        };
        if open.skip {
            self.skipping += 1;
        }
        if selected {
            self.selected += 1;
            self.found = true;
        }
        if self.writing() {
            open.written = true;
            self.open_effect(tag, &mut open);
        }
        if matches!(el, El::Cell | El::Caption) {
            self.active.push(Active::Marker);
        }
        self.stack.push(open);
    }

    fn open_effect(&mut self, tag: &Tag<'_>, open: &mut Open) {
        let w = &mut self.writer;
        match open.el {
            El::Paragraph => w.start_leaf(Leaf::Paragraph),
            El::Heading(level) => w.start_leaf(Leaf::Heading(level)),
            El::Term => w.start_leaf(Leaf::Term),
            El::Caption => w.start_leaf(Leaf::Paragraph),
            El::Pre => w.open_pre(language(tag)),
            El::Quote => w.open_quote(),
            El::List(ordered) => {
                let start = tag.attr("start").and_then(|s| s.trim().parse().ok()).unwrap_or(1);
                w.open_list(ordered, start);
            }
            El::Item => w.open_item(),
            El::Definitions => w.open_definitions(),
            El::Definition => w.open_definition(),
            El::Table => w.open_table(),
            El::Row => w.open_row(),
            El::Cell => w.open_cell(),
            El::Block => w.block_boundary(),
            El::CodeLike => open.mark = Some(w.open_mark(MarkKind::Code)),
            El::TableSection | El::Ordinary => {}
        }
    }

    fn close_effect(&mut self, open: &Open) {
        let w = &mut self.writer;
        match open.el {
            El::Paragraph | El::Heading(_) | El::Term | El::Caption => w.close_leaf(),
            El::Pre => w.close_pre(),
            El::Quote | El::List(_) | El::Item | El::Definitions | El::Definition => w.close_container(),
            El::Table => w.end_table(),
            El::Cell => w.close_cell(),
            El::Block => w.block_boundary(),
            El::CodeLike => {
                if let Some(mark) = open.mark {
                    w.close_mark(mark);
                }
            }
            El::Row | El::TableSection | El::Ordinary => {}
        }
    }

    // ---- formatting

    fn formatting_start(&mut self, tag: &Tag<'_>, name: &'static str) {
        if let Some(i) = self.last_formatting("a").filter(|_| name == "a") {
            self.remove_formatting(i);
        }
        let after_marker = self
            .active
            .iter()
            .rev()
            .take_while(|a| !matches!(a, Active::Marker))
            .count();
        if after_marker >= MAX_ACTIVE_FORMATTING {
            return;
        }
        let mark = if self.writing() {
            let kind = match name {
                "a" => MarkKind::Link(tag.attr("href").map(|href| {
                    let href = self.resolve(&href);
                    let title = tag.attr("title").map(|t| t.into_owned());
                    (href, title)
                })),
                "b" | "strong" => MarkKind::Strong,
                "i" | "em" => MarkKind::Emphasis,
                _ => MarkKind::Code,
            };
            if name == "code" && self.writer.in_pre() {
                self.writer.pre_language(language(tag));
            }
            Some(self.writer.open_mark(kind))
        } else {
            None
        };
        self.active.push(Active::Formatting { name, mark });
    }

    fn last_formatting(&self, name: &str) -> Option<usize> {
        for (i, entry) in self.active.iter().enumerate().rev() {
            match entry {
                Active::Marker => return None,
                Active::Formatting { name: n, .. } if *n == name => return Some(i),
                _ => {}
            }
        }
        None
    }

    fn remove_formatting(&mut self, i: usize) {
        if let Active::Formatting { mark: Some(mark), .. } = self.active.remove(i) {
            self.writer.close_mark(mark);
        }
    }

    // ---- start tags

    fn body_start_tag(&mut self, tag: &Tag<'_>) -> TextMode {
        let name = tag.name;
        if let Some(fmt) = formatting(name) {
            self.formatting_start(tag, fmt);
            return TextMode::Data;
        }
        if self.stack.last().is_some_and(|o| o.foreign) {
            if !tag.self_closing {
                self.push(tag, El::Ordinary);
            }
            return TextMode::Data;
        }
        match name {
            "html" | "body" | "head" | "frameset" => return TextMode::Data,
            "br" => {
                if self.writing() {
                    self.writer.line_break();
                }
                return TextMode::Data;
            }
            "img" | "image" => {
                self.image(tag);
                return TextMode::Data;
            }
            "hr" => {
                self.close_p();
                if self.writing() {
                    self.writer.rule();
                }
                return TextMode::Data;
            }
            "area" | "base" | "basefont" | "bgsound" | "col" | "embed" | "input" | "keygen" | "link"
            | "meta" | "param" | "source" | "track" | "wbr" | "colgroup" => return TextMode::Data,
            _ => {}
        }
        let el = match name {
            "p" => El::Paragraph,
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => El::Heading(name.as_bytes()[1] - b'0'),
            "pre" | "listing" | "xmp" | "plaintext" => El::Pre,
            "blockquote" => El::Quote,
            "ul" | "menu" | "dir" => El::List(false),
            "ol" => El::List(true),
            "li" => El::Item,
            "dl" => El::Definitions,
            "dt" => El::Term,
            "dd" => El::Definition,
            "table" => El::Table,
            "thead" | "tbody" | "tfoot" => El::TableSection,
            "tr" => El::Row,
            "td" | "th" => El::Cell,
            "caption" => El::Caption,
            "kbd" | "samp" => El::CodeLike,
            _ if closes_p(name) || is_special(name) => El::Block,
            _ => El::Ordinary,
        };
        match el {
            El::Heading(_) => {
                self.close_p();
                if self.stack.last().is_some_and(|o| matches!(o.el, El::Heading(_))) {
                    self.pop();
                }
            }
            El::Item => self.close_list_item(|el| el == El::Item),
            El::Term | El::Definition => self.close_list_item(|el| matches!(el, El::Term | El::Definition)),
            El::TableSection | El::Row | El::Cell | El::Caption if !self.table_structure(el) => {
                return TextMode::Data;
            }
            El::Table => {
                self.close_p();
                if matches!(self.table_context(), Some(El::Table | El::TableSection | El::Row)) {
                    self.pop_until(|_, el| el == El::Table);
                }
            }
            _ if closes_p(name) => self.close_p(),
            _ => {}
        }
        self.push(tag, el);
        match name {
            "script" | "style" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => TextMode::RawText,
            "textarea" | "title" => TextMode::RcData,
            "plaintext" => TextMode::PlainText,
            _ => TextMode::Data,
        }
    }

    /// `li`, `dt` and `dd` end the open item of their kind (with what is inside it).
    fn close_list_item(&mut self, same: impl Fn(El) -> bool) {
        for i in (0..self.stack.len()).rev() {
            let open = &self.stack[i];
            if same(open.el) {
                self.pop_until(|_, el| same(el));
                break;
            }
            let name = self.name_of(open);
            if is_special(name) && !matches!(name, "address" | "div" | "p") {
                break;
            }
        }
        self.close_p();
    }

    /// Table parts close what they imply, or are ignored outside a table (false).
    fn table_structure(&mut self, el: El) -> bool {
        if !self.has_in_scope(|_, e| e == El::Table, &[])
            && !matches!(self.table_context(), Some(El::Cell | El::Caption))
        {
            return false;
        }
        let Some(context) = self.table_context() else {
            return false;
        };
        match el {
            El::Cell => {
                if matches!(context, El::Cell | El::Caption) {
                    self.pop_until(|_, e| matches!(e, El::Cell | El::Caption));
                }
                self.pop_while_not(&[El::Row, El::Table, El::TableSection]);
                if !matches!(self.stack.last().map(|o| o.el), Some(El::Row)) {
                    self.push_implied(El::Row);
                }
            }
            El::Row => {
                if matches!(context, El::Cell | El::Caption) {
                    self.pop_until(|_, e| matches!(e, El::Cell | El::Caption));
                }
                self.pop_while_not(&[El::Table, El::TableSection]);
            }
            _ => {
                if matches!(context, El::Cell | El::Caption) {
                    self.pop_until(|_, e| matches!(e, El::Cell | El::Caption));
                }
                self.pop_while_not(&[El::Table]);
            }
        }
        true
    }

    fn pop_while_not(&mut self, stop: &[El]) {
        while let Some(open) = self.stack.last() {
            if stop.contains(&open.el) {
                break;
            }
            self.pop();
        }
    }

    fn push_implied(&mut self, el: El) {
        let tag = Tag::implied(if el == El::Row { "tr" } else { "tbody" });
        self.push(&tag, el);
    }

    fn image(&mut self, tag: &Tag<'_>) {
        if !self.writing() {
            return;
        }
        let Some(src) = tag.attr("src") else {
            return;
        };
        let src = self.resolve(&src);
        let alt = tag.attr("alt").unwrap_or_default();
        if !crate::escape::safe_url(&src) || (self.options.content == Content::Main && alt.trim().is_empty())
        {
            return;
        }
        let mut text = String::from("![");
        crate::escape::push_text(&mut text, &alt, false);
        let text = text.trim_end();
        let markdown = format!("{text}]({})", crate::escape::destination(&src));
        self.writer.inline_markdown(&markdown);
    }

    fn head_start_tag(&mut self, tag: &Tag<'_>) -> Option<TextMode> {
        match tag.name {
            "html" | "head" => Some(TextMode::Data),
            "title" => {
                self.in_title = self.info.title.is_none();
                Some(TextMode::RcData)
            }
            "meta" => {
                if tag
                    .attr("name")
                    .is_some_and(|n| n.eq_ignore_ascii_case("description"))
                {
                    self.info.description = tag
                        .attr("content")
                        .map(|c| crate::escape::collapse(&c).trim().to_owned());
                }
                Some(TextMode::Data)
            }
            "link" => {
                let canonical = tag.attr("rel").is_some_and(|r| {
                    r.split_ascii_whitespace()
                        .any(|r| r.eq_ignore_ascii_case("canonical"))
                });
                if canonical {
                    self.info.canonical = tag.attr("href").map(|h| self.resolve(&h));
                }
                Some(TextMode::Data)
            }
            "base" => {
                if let (Some(href), Some(_)) = (tag.attr("href"), &self.base) {
                    self.base = url::Url::parse(&self.resolve(&href)).ok().or(self.base.take());
                }
                Some(TextMode::Data)
            }
            "style" | "script" | "noscript" | "noframes" => {
                self.in_head_raw = true;
                Some(TextMode::RawText)
            }
            "template" => {
                self.push(tag, El::Ordinary);
                Some(TextMode::Data)
            }
            "body" => {
                self.phase = Phase::Body;
                Some(TextMode::Data)
            }
            _ => None,
        }
    }
}
