//! Escaping for each place text lands in Markdown: running text, the start of a line,
//! link destinations and titles, image alt text, table cells and code spans.
//!
//! Here, not in `kubedav-markdown`, because the gateway writes Markdown too (a
//! collection's listing, `handlers::agent_listing`) and should not depend on the
//! converter for it; `kubedav_markdown::escape` is this module.

/// Whether a link or image target may be kept: no script or local-file schemes.
pub fn safe_url(url: &str) -> bool {
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
pub fn destination(url: &str) -> String {
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
pub fn link_title(title: &str) -> String {
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
pub fn table_cell(text: &str) -> String {
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

/// Escapes what would start a block at the beginning of a line: a heading, a list
/// item, a thematic break or setext underline, a code fence.
pub fn escape_line_start(line: &str) -> std::borrow::Cow<'_, str> {
    let trimmed = line.trim_start();
    let bytes = trimmed.as_bytes();
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    let marker =
        |b: u8| bytes.first() == Some(&b) && bytes.get(1).is_none_or(|&next| next == b' ' || next == b);
    let needs = trimmed.starts_with('#')
        || marker(b'-')
        || marker(b'+')
        || marker(b'=')
        || trimmed.starts_with("~~~")
        || (digits > 0
            && matches!(bytes.get(digits), Some(b'.') | Some(b')'))
            && bytes.get(digits + 1).is_none_or(|b| b.is_ascii_whitespace()));
    if !needs {
        return line.into();
    }
    if digits > 0 {
        let (num, rest) = trimmed.split_at(digits);
        format!("{num}\\{rest}").into()
    } else {
        format!("\\{trimmed}").into()
    }
}

/// Appends `text` to `out` with runs of whitespace folded to one space (none at the
/// start of `out` or after a space already there) and, unless `literal`, Markdown
/// metacharacters escaped.
pub fn push_text(out: &mut String, text: &str, literal: bool) {
    let mut space = out.is_empty() || out.ends_with([' ', '\n']);
    let bytes = text.as_bytes();
    let plain = |b: u8| {
        b.is_ascii()
            && !b.is_ascii_whitespace()
            && (literal || !matches!(b, b'\\' | b'`' | b'*' | b'_' | b'[' | b']' | b'<' | b'>' | b'|'))
    };
    // Runs of ASCII that need nothing are copied whole.
    let mut at = 0;
    while at < bytes.len() {
        let run = bytes[at..].iter().take_while(|&&b| plain(b)).count();
        if run > 0 {
            out.push_str(&text[at..at + run]);
            at += run;
            space = false;
            continue;
        }
        let c = text[at..].chars().next().expect("not at the end");
        at += c.len_utf8();
        if c.is_whitespace() {
            if !space {
                out.push(' ');
                space = true;
            }
            continue;
        }
        space = false;
        if !literal && matches!(c, '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|') {
            out.push('\\');
        }
        out.push(c);
    }
}

/// `text` with runs of whitespace folded to one space and none at the start.
pub fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    push_text(&mut out, text, true);
    out
}
