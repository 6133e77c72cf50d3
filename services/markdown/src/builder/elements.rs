//! What the rules need to know of an element by its name.

use crate::tokenizer::Tag;

/// The formatting elements Markdown writes, by the name their entries keep.
pub(super) fn formatting(name: &str) -> Option<&'static str> {
    Some(match name {
        "a" => "a",
        "b" => "b",
        "strong" => "strong",
        "i" => "i",
        "em" => "em",
        "code" => "code",
        _ => return None,
    })
}

/// The language of a code block from `class="language-x"` (or `lang-x`), kept to the
/// characters a fence's info string can hold.
pub(super) fn language(tag: &Tag<'_>) -> String {
    tag.attr("class")
        .unwrap_or_default()
        .split_whitespace()
        .find_map(|c| c.strip_prefix("language-").or_else(|| c.strip_prefix("lang-")))
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_' | '#' | '.'))
        .take(32)
        .collect()
}

/// Start tags that end an open `p`.
pub(super) fn closes_p(name: &str) -> bool {
    matches!(
        name,
        "address"
            | "article"
            | "aside"
            | "blockquote"
            | "center"
            | "details"
            | "dialog"
            | "dir"
            | "div"
            | "dl"
            | "fieldset"
            | "figcaption"
            | "figure"
            | "footer"
            | "header"
            | "hgroup"
            | "main"
            | "menu"
            | "nav"
            | "ol"
            | "p"
            | "search"
            | "section"
            | "summary"
            | "ul"
            | "pre"
            | "listing"
            | "form"
            | "plaintext"
            | "xmp"
            | "li"
            | "dd"
            | "dt"
    )
}

/// The specification's "special" elements: an end tag for another element does not
/// close past them.
pub(super) fn is_special(name: &str) -> bool {
    closes_p(name)
        || matches!(
            name,
            "applet"
                | "area"
                | "base"
                | "basefont"
                | "bgsound"
                | "body"
                | "br"
                | "button"
                | "caption"
                | "col"
                | "colgroup"
                | "embed"
                | "frame"
                | "frameset"
                | "h1"
                | "h2"
                | "h3"
                | "h4"
                | "h5"
                | "h6"
                | "head"
                | "hr"
                | "html"
                | "iframe"
                | "img"
                | "input"
                | "keygen"
                | "link"
                | "marquee"
                | "meta"
                | "noembed"
                | "noframes"
                | "noscript"
                | "object"
                | "param"
                | "script"
                | "select"
                | "source"
                | "style"
                | "table"
                | "tbody"
                | "td"
                | "template"
                | "textarea"
                | "tfoot"
                | "th"
                | "thead"
                | "title"
                | "tr"
                | "track"
                | "wbr"
        )
}
