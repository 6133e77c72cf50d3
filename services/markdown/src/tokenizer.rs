//! A byte-level HTML tokenizer: the states of the WHATWG tokenizer that decide where
//! text, tags and attributes begin and end, without building anything.
//!
//! It follows the specification's data, tag open, end tag open, tag name, attribute,
//! comment, bogus comment and RAWTEXT/RCDATA/PLAINTEXT states, so a page splits into
//! the same tokens as in a browser. What it leaves to its [`Sink`]: character references
//! (text is handed over raw, with [`decode_text`] and [`Tag::attr`] to decode it) and
//! tree construction. Comments and doctypes are skipped. It allocates nothing per token:
//! text and attribute values are slices of the input, lowercased names live in a reused
//! buffer. `docs/markdown.md` says why kubedav has its own (the measured figures of
//! html5ever's and html5gum's tokenizers).

use std::borrow::Cow;
use std::ops::Range;

/// What the tokenizer hands over, in document order.
pub trait Sink {
    /// A start tag. Returns how the text after it is to be read.
    fn start_tag(&mut self, tag: &Tag<'_>) -> TextMode;
    /// An end tag, by its lowercased name.
    fn end_tag(&mut self, name: &str);
    /// Text: character references still encoded unless `raw` (the content of RAWTEXT
    /// elements such as `script`, `style` and `xmp`, which has none).
    fn text(&mut self, text: &str, raw: bool);
    /// Whether to stop early (a limit was reached).
    fn stopped(&self) -> bool {
        false
    }
}

/// How the text after a start tag is read (the specification switches state by the tag
/// name: `script` and `style` hold no markup, `title` and `textarea` hold no markup but
/// character references, `plaintext` runs to the end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextMode {
    /// Markup as usual.
    Data,
    /// Raw text up to the element's end tag.
    RawText,
    /// Text with character references, up to the element's end tag.
    RcData,
    /// Raw text to the end of the input.
    PlainText,
}

/// A start tag: its lowercased name, its attributes and whether it ends with `/>`.
pub struct Tag<'a> {
    source: &'a str,
    names: &'a str,
    /// The lowercased tag name.
    pub name: &'a str,
    attrs: &'a [Attr],
    /// Whether the tag was written `<name ... />`.
    pub self_closing: bool,
}

/// An attribute: its lowercased name in the names buffer, its value in the input.
#[derive(Clone, Debug)]
struct Attr {
    name: Range<usize>,
    value: Range<usize>,
}

impl<'a> Tag<'a> {
    /// A tag without attributes, for one the rules imply (a `tr` around a lone `td`).
    pub fn implied(name: &'a str) -> Tag<'a> {
        Tag {
            source: "",
            names: "",
            name,
            attrs: &[],
            self_closing: false,
        }
    }

    /// The value of attribute `name` (lowercase), character references decoded as in an
    /// attribute value; the first one wins when it is repeated, as in browsers.
    pub fn attr(&self, name: &str) -> Option<Cow<'a, str>> {
        self.attrs
            .iter()
            .find(|a| &self.names[a.name.clone()] == name)
            .map(|a| decode_attribute(&self.source[a.value.clone()]))
    }

    /// Whether attribute `name` is present, whatever its value.
    pub fn has(&self, name: &str) -> bool {
        self.attrs.iter().any(|a| &self.names[a.name.clone()] == name)
    }
}

/// Text with its character references decoded (`&amp;`, `&#42;`, `&nbsp`...), by the
/// WHATWG rules for text; NUL characters are dropped, as the tree builder does.
pub fn decode_text(text: &str) -> Cow<'_, str> {
    let decoded = if text.contains('&') {
        htmlize::unescape(text)
    } else {
        Cow::Borrowed(text)
    };
    if decoded.contains('\0') {
        Cow::Owned(decoded.replace('\0', ""))
    } else {
        decoded
    }
}

fn decode_attribute(value: &str) -> Cow<'_, str> {
    if value.contains('&') {
        htmlize::unescape_attribute(value)
    } else {
        Cow::Borrowed(value)
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

/// The tokenizer's reused buffers.
#[derive(Default)]
pub struct Tokenizer {
    names: String,
    attrs: Vec<Attr>,
}

impl Tokenizer {
    /// Tokenizes `html` into `sink`.
    pub fn run(&mut self, html: &str, sink: &mut impl Sink) {
        let bytes = html.as_bytes();
        let mut at = 0;
        while at < bytes.len() && !sink.stopped() {
            let Some(lt) = memchr::memchr(b'<', &bytes[at..]).map(|i| at + i) else {
                sink.text(&html[at..], false);
                return;
            };
            if lt > at {
                sink.text(&html[at..lt], false);
            }
            at = match bytes.get(lt + 1) {
                Some(b) if b.is_ascii_alphabetic() => match self.start_tag(html, lt + 1, sink) {
                    Some(end) => end,
                    None => return,
                },
                Some(b'/') => match bytes.get(lt + 2) {
                    Some(b) if b.is_ascii_alphabetic() => match self.end_tag(html, lt + 2, sink) {
                        Some(end) => end,
                        None => return,
                    },
                    Some(b'>') => lt + 3,
                    Some(_) => bogus_comment(bytes, lt + 2),
                    None => {
                        sink.text("</", false);
                        return;
                    }
                },
                Some(b'!') if bytes[lt + 2..].starts_with(b"--") => comment(bytes, lt + 4),
                Some(b'!' | b'?') => bogus_comment(bytes, lt + 2),
                _ => {
                    sink.text("<", false);
                    lt + 1
                }
            };
        }
    }

    /// Reads a tag name from `at`; returns where it ends.
    fn name(&mut self, html: &str, at: usize) -> usize {
        let bytes = html.as_bytes();
        let end = bytes[at..]
            .iter()
            .position(|&b| is_space(b) || b == b'/' || b == b'>')
            .map_or(bytes.len(), |i| at + i);
        push_lowercase(&mut self.names, &html[at..end]);
        end
    }

    fn start_tag(&mut self, html: &str, at: usize, sink: &mut impl Sink) -> Option<usize> {
        let bytes = html.as_bytes();
        self.names.clear();
        self.attrs.clear();
        let name_end = self.name(html, at);
        let tag_name = 0..self.names.len();
        let (end, self_closing) = self.attributes(html, name_end)?;
        let tag = Tag {
            source: html,
            names: &self.names,
            name: &self.names[tag_name],
            attrs: &self.attrs,
            self_closing,
        };
        let mode = sink.start_tag(&tag);
        let name = tag.name.to_owned();
        Some(match mode {
            TextMode::Data => end,
            TextMode::PlainText => {
                sink.text(&html[end..], true);
                html.len()
            }
            TextMode::RawText | TextMode::RcData => {
                let close = find_end_tag(bytes, end, name.as_bytes());
                if close > end {
                    sink.text(&html[end..close], mode == TextMode::RawText);
                }
                close
            }
        })
    }

    fn end_tag(&mut self, html: &str, at: usize, sink: &mut impl Sink) -> Option<usize> {
        self.names.clear();
        self.attrs.clear();
        let name_end = self.name(html, at);
        let name_len = self.names.len();
        // An end tag's attributes are read and ignored, as the specification says.
        let (end, _) = self.attributes(html, name_end)?;
        sink.end_tag(&self.names[..name_len]);
        Some(end)
    }

    /// Reads attributes from `at` up to the tag's `>`: returns the index after it and
    /// whether the tag is self-closing, or `None` when the input ends inside the tag
    /// (the specification then drops the tag).
    fn attributes(&mut self, html: &str, mut at: usize) -> Option<(usize, bool)> {
        let bytes = html.as_bytes();
        loop {
            while at < bytes.len() && is_space(bytes[at]) {
                at += 1;
            }
            match *bytes.get(at)? {
                b'>' => return Some((at + 1, false)),
                b'/' => {
                    if bytes.get(at + 1) == Some(&b'>') {
                        return Some((at + 2, true));
                    }
                    at += 1;
                    continue;
                }
                _ => {}
            }
            // The attribute's name: a leading `=` belongs to it.
            let start = at;
            at += 1;
            while at < bytes.len() && !is_space(bytes[at]) && !matches!(bytes[at], b'/' | b'>' | b'=') {
                at += 1;
            }
            let name_start = self.names.len();
            push_lowercase(&mut self.names, &html[start..at]);
            let name = name_start..self.names.len();
            while at < bytes.len() && is_space(bytes[at]) {
                at += 1;
            }
            let mut value = at..at;
            if bytes.get(at) == Some(&b'=') {
                at += 1;
                while at < bytes.len() && is_space(bytes[at]) {
                    at += 1;
                }
                match *bytes.get(at)? {
                    quote @ (b'"' | b'\'') => {
                        let close = memchr::memchr(quote, &bytes[at + 1..])? + at + 1;
                        value = at + 1..close;
                        at = close + 1;
                    }
                    b'>' => {}
                    _ => {
                        let begin = at;
                        while at < bytes.len() && !is_space(bytes[at]) && bytes[at] != b'>' {
                            at += 1;
                        }
                        value = begin..at;
                    }
                }
            }
            self.attrs.push(Attr { name, value });
        }
    }
}

/// Appends `name` lowercased (ASCII only, as the specification does). Tag and attribute
/// names end at ASCII bytes, so slicing the input there keeps whole UTF-8 sequences.
fn push_lowercase(out: &mut String, name: &str) {
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        out.extend(name.chars().map(|c| c.to_ascii_lowercase()));
    } else {
        out.push_str(name);
    }
}

/// The end of a comment whose text starts at `at`: after `-->` or `--!>`, also after the
/// abrupt `<!-->` and `<!--->`; the end of the input when it is never closed.
fn comment(bytes: &[u8], at: usize) -> usize {
    if bytes.get(at) == Some(&b'>') {
        return at + 1;
    }
    if bytes[at.min(bytes.len())..].starts_with(b"->") {
        return at + 2;
    }
    let mut from = at;
    while let Some(i) = memchr::memmem::find(&bytes[from..], b"--") {
        let dashes = from + i;
        let mut after = dashes + 2;
        while bytes.get(after) == Some(&b'-') {
            after += 1;
        }
        match bytes.get(after) {
            Some(b'>') => return after + 1,
            Some(b'!') if bytes.get(after + 1) == Some(&b'>') => return after + 2,
            Some(_) => from = after,
            None => break,
        }
    }
    bytes.len()
}

/// The end of a bogus comment (`<!DOCTYPE ...>`, `<?...>`, `</ ...>`): after its `>`.
fn bogus_comment(bytes: &[u8], at: usize) -> usize {
    memchr::memchr(b'>', &bytes[at.min(bytes.len())..]).map_or(bytes.len(), |i| at + i + 1)
}

/// Where the end tag `</name` (any case, followed by a space, `/` or `>`) starts, from
/// `at`; the end of the input when there is none. Returning to the data state there, the
/// end tag itself is then read as usual.
fn find_end_tag(bytes: &[u8], at: usize, name: &[u8]) -> usize {
    let mut from = at;
    while let Some(i) = memchr::memmem::find(&bytes[from..], b"</") {
        let start = from + i;
        let candidate = &bytes[start + 2..];
        if candidate.len() >= name.len()
            && candidate[..name.len()].eq_ignore_ascii_case(name)
            && candidate
                .get(name.len())
                .is_some_and(|&b| is_space(b) || b == b'/' || b == b'>')
        {
            return start;
        }
        from = start + 2;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Record(Vec<String>);

    impl Sink for Record {
        fn start_tag(&mut self, tag: &Tag<'_>) -> TextMode {
            let mut line = format!("<{}", tag.name);
            for attr in ["href", "a", "b", "c", "=x"] {
                if let Some(v) = tag.attr(attr) {
                    line.push_str(&format!(" {attr}={v:?}"));
                }
            }
            if tag.self_closing {
                line.push('/');
            }
            self.0.push(line + ">");
            match tag.name {
                "script" | "style" => TextMode::RawText,
                "title" => TextMode::RcData,
                "plaintext" => TextMode::PlainText,
                _ => TextMode::Data,
            }
        }
        fn end_tag(&mut self, name: &str) {
            self.0.push(format!("</{name}>"));
        }
        fn text(&mut self, text: &str, raw: bool) {
            let text = if raw { text.into() } else { decode_text(text) };
            match self.0.last_mut() {
                Some(last) if last.starts_with('"') => {
                    last.pop();
                    last.push_str(&text);
                    last.push('"');
                }
                _ => self.0.push(format!("\"{text}\"")),
            }
        }
    }

    fn tokens(html: &str) -> Vec<String> {
        let mut record = Record::default();
        Tokenizer::default().run(html, &mut record);
        record.0
    }

    #[test]
    fn tags_attributes_and_text() {
        assert_eq!(
            tokens("<P A=1 b='2' c=\"x&amp;y\" a=dup>Hi &lt;you&gt;</P >"),
            ["<p a=\"1\" b=\"2\" c=\"x&y\">", "\"Hi <you>\"", "</p>"]
        );
        assert_eq!(tokens("<br/><img a=x/>"), ["<br/>", "<img a=\"x/\">"]);
        assert_eq!(tokens("<a =x b>"), ["<a b=\"\" =x=\"\">"]);
        assert_eq!(tokens("<a href=\"x\"c=1>"), ["<a href=\"x\" c=\"1\">"]);
    }

    #[test]
    fn markup_that_is_not_a_tag_stays_text() {
        assert_eq!(tokens("1 < 2 <3 a<>b"), ["\"1 < 2 <3 a<>b\""]);
        assert_eq!(tokens("x</>y</ z>w"), ["\"xyw\""]);
        assert_eq!(tokens("end </"), ["\"end </\""]);
    }

    #[test]
    fn comments_and_doctypes_are_skipped() {
        assert_eq!(
            tokens("<!DOCTYPE html>a<!-- <p> -- -->b<!-->c<!--->d<?php x ?>e<!--x--!>f<!-- open"),
            ["\"abcdef\""]
        );
    }

    #[test]
    fn raw_text_runs_to_its_own_end_tag() {
        assert_eq!(
            tokens("<script>if (a</b) x = '</scriptx>';</SCRIPT>t"),
            [
                "<script>",
                "\"if (a</b) x = '</scriptx>';\"",
                "</script>",
                "\"t\""
            ]
        );
        assert_eq!(
            tokens("<title>a &amp; <b></title>"),
            ["<title>", "\"a & <b>\"", "</title>"]
        );
        assert_eq!(tokens("<style>never closed"), ["<style>", "\"never closed\""]);
        assert_eq!(
            tokens("<plaintext></plaintext>&amp;"),
            ["<plaintext>", "\"</plaintext>&amp;\""]
        );
    }

    #[test]
    fn a_tag_cut_by_the_end_of_input_is_dropped() {
        assert_eq!(tokens("a<p class=\"x"), ["\"a\""]);
        assert_eq!(tokens("a<p"), ["\"a\""]);
        assert_eq!(tokens("a</p"), ["\"a\""]);
    }
}
