//! WebDAV request bodies: a small namespace-resolved tree, parsed with quick-xml.
//!
//! Request bodies are small (the gateway caps them), so a tree is the simplest correct
//! representation. Parsing refuses what has no place in a WebDAV body and is a known
//! attack vector: any DOCTYPE (so no entity can be declared, let alone expanded),
//! references to undeclared entities, undeclared namespace prefixes, empty prefix
//! bindings (`xmlns:p=""`, illegal in XML Namespaces 1.0), more than
//! [`MAX_DEPTH`] levels and more than [`MAX_ELEMENTS`] elements. It also refuses what
//! could not be written back as XML, because LOCK owners and PROPPATCH values are
//! stored and later sent inside responses: names that are not XML names (`a:b:c`,
//! `a@b`), characters XML 1.0 does not allow (`&#1;`), and an attribute given twice
//! under two prefixes of one namespace.

use quick_xml::NsReader;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;

/// The namespace of the predefined `xml:` prefix (`xml:lang`, `xml:space`).
const XML_NAMESPACE: &str = "http://www.w3.org/XML/1998/namespace";
/// The namespace of namespace declarations, which nothing else may use.
const XMLNS_NAMESPACE: &str = "http://www.w3.org/2000/xmlns/";

/// Deepest element nesting accepted.
pub const MAX_DEPTH: usize = 64;
/// Most elements accepted in one body.
pub const MAX_ELEMENTS: usize = 20_000;

/// An element with its resolved namespace ("" when unbound).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Element {
    /// Namespace URI, "" for none.
    pub namespace: String,
    /// Local name.
    pub name: String,
    /// Attributes other than namespace declarations: (namespace, local name, value).
    pub attributes: Vec<(String, String, String)>,
    /// Child nodes in document order.
    pub children: Vec<Node>,
}

/// A child of an element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A child element.
    Element(Element),
    /// Character data (entities resolved, CDATA included).
    Text(String),
}

/// Why a body was refused: always a 400 with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed XML body: {0}")]
pub struct XmlError(pub String);

fn err(message: impl Into<String>) -> XmlError {
    XmlError(message.into())
}

impl Element {
    /// Whether this element is `{namespace}name`.
    pub fn is(&self, namespace: &str, name: &str) -> bool {
        self.namespace == namespace && self.name == name
    }

    /// Child elements.
    pub fn elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|node| match node {
            Node::Element(e) => Some(e),
            Node::Text(_) => None,
        })
    }

    /// The first child element `{namespace}name`.
    pub fn child(&self, namespace: &str, name: &str) -> Option<&Element> {
        self.elements().find(|e| e.is(namespace, name))
    }

    /// The concatenated text of this element's direct text children.
    pub fn text(&self) -> String {
        self.children
            .iter()
            .filter_map(|node| match node {
                Node::Text(t) => Some(t.as_str()),
                Node::Element(_) => None,
            })
            .collect()
    }

    /// This element's content (children) as a self-contained XML fragment: every element
    /// declares its own default namespace, so the fragment means the same wherever it is
    /// inserted.
    pub fn content_xml(&self) -> String {
        let mut out = String::new();
        for child in &self.children {
            write_node(child, &mut out);
        }
        out
    }
}

/// Refuses a local name that is not an XML NCName (Namespaces in XML 1.0).
fn check_name(name: &str) -> Result<(), XmlError> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(is_name_start) && chars.all(is_name_char);
    if valid {
        Ok(())
    } else {
        Err(err(format!("'{name}' is not a valid XML name")))
    }
}

/// XML 1.0 NameStartChar, without ':'.
fn is_name_start(c: char) -> bool {
    matches!(c,
        'A'..='Z' | '_' | 'a'..='z' | '\u{C0}'..='\u{D6}' | '\u{D8}'..='\u{F6}'
        | '\u{F8}'..='\u{2FF}' | '\u{370}'..='\u{37D}' | '\u{37F}'..='\u{1FFF}'
        | '\u{200C}'..='\u{200D}' | '\u{2070}'..='\u{218F}' | '\u{2C00}'..='\u{2FEF}'
        | '\u{3001}'..='\u{D7FF}' | '\u{F900}'..='\u{FDCF}' | '\u{FDF0}'..='\u{FFFD}'
        | '\u{10000}'..='\u{EFFFF}')
}

/// XML 1.0 NameChar, without ':'.
fn is_name_char(c: char) -> bool {
    is_name_start(c)
        || matches!(c, '-' | '.' | '0'..='9' | '\u{B7}' | '\u{300}'..='\u{36F}' | '\u{203F}'..='\u{2040}')
}

/// Refuses text holding a character XML 1.0 does not allow (most C0 controls,
/// surrogates, U+FFFE and U+FFFF), even as a character reference.
fn check_chars(text: &str) -> Result<(), XmlError> {
    match text.chars().find(|&c| !is_xml_char(c)) {
        None => Ok(()),
        Some(c) => Err(err(format!(
            "the character U+{:04X} is not allowed in XML 1.0",
            c as u32
        ))),
    }
}

fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Escapes text content for a fragment; a carriage return becomes a reference, which
/// a reader's line-end normalisation would otherwise turn into a newline.
fn escape_text(text: &str, out: &mut String) {
    for part in text.split_inclusive('\r') {
        match part.strip_suffix('\r') {
            Some(before) => {
                crate::xml::escape_into(out, before);
                out.push_str("&#13;");
            }
            None => crate::xml::escape_into(out, part),
        }
    }
}

/// Escapes an attribute value for a fragment; tabs and line ends become references,
/// which a reader's attribute-value normalisation would otherwise turn into spaces.
fn escape_attribute(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            _ => crate::xml::escape_into(&mut out, c.encode_utf8(&mut [0; 4])),
        }
    }
    out
}

fn write_node(node: &Node, out: &mut String) {
    match node {
        Node::Text(text) => escape_text(text, out),
        Node::Element(e) => {
            out.push('<');
            out.push_str(&e.name);
            out.push_str(" xmlns=\"");
            out.push_str(&crate::xml::escape(&e.namespace));
            out.push('"');
            for (i, (namespace, name, value)) in e.attributes.iter().enumerate() {
                if namespace.is_empty() {
                    out.push_str(&format!(" {name}=\"{}\"", escape_attribute(value)));
                } else if namespace == XML_NAMESPACE {
                    // xml:lang, xml:space: the prefix is predefined and may not be rebound.
                    out.push_str(&format!(" xml:{name}=\"{}\"", escape_attribute(value)));
                } else {
                    out.push_str(&format!(
                        " xmlns:a{i}=\"{}\" a{i}:{name}=\"{}\"",
                        crate::xml::escape(namespace),
                        escape_attribute(value)
                    ));
                }
            }
            if e.children.is_empty() {
                out.push_str("/>");
            } else {
                out.push('>');
                for child in &e.children {
                    write_node(child, out);
                }
                out.push_str("</");
                out.push_str(&e.name);
                out.push('>');
            }
        }
    }
}

fn resolved(result: ResolveResult<'_>, what: &str) -> Result<String, XmlError> {
    match result {
        ResolveResult::Bound(ns) => quick_xml::escape::unescape(ns.as_ref())
            .map(|uri| uri.into_owned())
            .map_err(|e| err(format!("a namespace URI is malformed: {e}"))),
        ResolveResult::Unbound => Ok(String::new()),
        ResolveResult::Unknown(prefix) => Err(err(format!(
            "{what} uses the undeclared namespace prefix '{prefix}'"
        ))),
    }
}

fn entity(name: &str) -> Result<String, XmlError> {
    Ok(match name {
        "lt" => "<".into(),
        "gt" => ">".into(),
        "amp" => "&".into(),
        "quot" => "\"".into(),
        "apos" => "'".into(),
        _ => {
            let code = if let Some(hex) = name.strip_prefix("#x") {
                u32::from_str_radix(hex, 16).ok()
            } else if let Some(dec) = name.strip_prefix('#') {
                dec.parse().ok()
            } else {
                return Err(err(format!(
                    "the entity &{name}; is not defined (no DTD is accepted)"
                )));
            };
            code.and_then(char::from_u32)
                .ok_or_else(|| err(format!("&{name}; is not a valid character reference")))?
                .to_string()
        }
    })
}

/// Parses a whole body into its root element.
pub fn parse(body: &[u8]) -> Result<Element, XmlError> {
    let text = std::str::from_utf8(body).map_err(|_| err("the body is not UTF-8"))?;
    let mut reader = NsReader::from_str(text);
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let mut elements = 0usize;
    loop {
        let event = reader.read_event().map_err(|e| err(e.to_string()))?;
        match event {
            Event::Start(ref start) | Event::Empty(ref start) => {
                if root.is_some() {
                    return Err(err("content after the root element"));
                }
                elements += 1;
                if elements > MAX_ELEMENTS {
                    return Err(err(format!("more than {MAX_ELEMENTS} elements")));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(err(format!("nested deeper than {MAX_DEPTH} levels")));
                }
                let (ns, local) = reader.resolver().resolve_element(start.name());
                let namespace = resolved(ns, "an element")?;
                if namespace == XML_NAMESPACE || namespace == XMLNS_NAMESPACE {
                    return Err(err(format!(
                        "no element may be in the reserved namespace {namespace}"
                    )));
                }
                let name = local.as_ref().to_owned();
                check_name(&name)?;
                let mut attributes = Vec::new();
                for attribute in start.attributes() {
                    let attribute = attribute.map_err(|e| err(e.to_string()))?;
                    let key = attribute.key.as_ref().to_owned();
                    let value = attribute
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .map_err(|e| err(e.to_string()))?
                        .into_owned();
                    if key == "xmlns" {
                        continue;
                    }
                    if let Some(prefix) = key.strip_prefix("xmlns:") {
                        if value.is_empty() {
                            return Err(err(format!(
                                "the prefix '{prefix}' is bound to an empty namespace"
                            )));
                        }
                        continue;
                    }
                    let (ns, local) = reader.resolver().resolve_attribute(attribute.key);
                    let attr_ns = resolved(ns, "an attribute")?;
                    let local = local.as_ref().to_owned();
                    check_name(&local)?;
                    check_chars(&value)?;
                    if attributes.iter().any(|(n, l, _)| *n == attr_ns && *l == local) {
                        return Err(err(format!("the attribute '{local}' is given twice")));
                    }
                    attributes.push((attr_ns, local, value));
                }
                let element = Element {
                    namespace,
                    name,
                    attributes,
                    children: Vec::new(),
                };
                if matches!(event, Event::Empty(_)) {
                    close(element, &mut stack, &mut root);
                } else {
                    stack.push(element);
                }
            }
            Event::End(_) => {
                let element = stack.pop().ok_or_else(|| err("an end tag without a start"))?;
                close(element, &mut stack, &mut root);
            }
            Event::Text(t) => push_text(&mut stack, &t.xml10_content())?,
            Event::CData(c) => {
                let content = c.as_ref().to_owned();
                push_text(&mut stack, &content)?;
            }
            Event::GeneralRef(r) => {
                let name = r.into_inner();
                push_text(&mut stack, &entity(&name)?)?;
            }
            Event::DocType(_) => return Err(err("a DOCTYPE is not accepted")),
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
            Event::Eof => break,
        }
    }
    if !stack.is_empty() {
        return Err(err("the body ends inside an element"));
    }
    root.ok_or_else(|| err("there is no root element"))
}

fn close(element: Element, stack: &mut [Element], root: &mut Option<Element>) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(Node::Element(element)),
        None => *root = Some(element),
    }
}

fn push_text(stack: &mut [Element], text: &str) -> Result<(), XmlError> {
    check_chars(text)?;
    match stack.last_mut() {
        Some(parent) => {
            match parent.children.last_mut() {
                Some(Node::Text(existing)) => existing.push_str(text),
                _ => parent.children.push(Node::Text(text.to_owned())),
            }
            Ok(())
        }
        None if text.trim().is_empty() => Ok(()),
        None => Err(err("text outside the root element")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_namespaces_and_text() {
        let root = parse(
            br#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:z="urn:z"><D:prop><z:a/><b xmlns="urn:b">x &amp; y &#x41;<![CDATA[<c>]]></b></D:prop></D:propfind>"#,
        )
        .unwrap();
        assert!(root.is("DAV:", "propfind"));
        let prop = root.child("DAV:", "prop").unwrap();
        let names: Vec<_> = prop
            .elements()
            .map(|e| (e.namespace.as_str(), e.name.as_str()))
            .collect();
        assert_eq!(names, vec![("urn:z", "a"), ("urn:b", "b")]);
        assert_eq!(prop.child("urn:b", "b").unwrap().text(), "x & y A<c>");
    }

    #[test]
    fn fragments_are_self_contained() {
        let root =
            parse(br#"<p:v xmlns:p="urn:p" xmlns:q="urn:q"><q:x q:at="1" plain="2">t&lt;</q:x><y/></p:v>"#)
                .unwrap();
        let fragment = root.content_xml();
        assert_eq!(
            fragment,
            r#"<x xmlns="urn:q" xmlns:a0="urn:q" a0:at="1" plain="2">t&lt;</x><y xmlns=""/>"#
        );
        // It parses on its own, to the same tree.
        let again = parse(format!("<w>{fragment}</w>").as_bytes()).unwrap();
        assert_eq!(again.children, root.children);
    }

    #[test]
    fn refuses_malicious_and_malformed_bodies() {
        let billion_laughs = br#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><propfind xmlns="DAV:">&lol2;</propfind>"#;
        assert!(parse(billion_laughs).unwrap_err().0.contains("DOCTYPE"));
        let external = br#"<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>"#;
        assert!(parse(external).is_err());
        assert!(parse(b"<x>&e;</x>").unwrap_err().0.contains("not defined"));
        assert!(parse(b"<p:x/>").unwrap_err().0.contains("undeclared"));
        assert!(
            parse(br#"<x xmlns:p=""/>"#)
                .unwrap_err()
                .0
                .contains("empty namespace")
        );
        assert!(parse(b"<a><b></a>").is_err());
        assert!(parse(b"<a>").is_err());
        assert!(parse(b"").is_err());
        assert!(parse(b"<a/><b/>").is_err());
        assert!(parse(b"text").is_err());
        assert!(parse(&[0xff, 0xfe]).is_err());
        assert!(parse(b"<a>&#xD800;</a>").is_err());
        let deep = "<a>".repeat(MAX_DEPTH + 1) + &"</a>".repeat(MAX_DEPTH + 1);
        assert!(parse(deep.as_bytes()).unwrap_err().0.contains("deeper"));
        let wide = format!("<a>{}</a>", "<b/>".repeat(MAX_ELEMENTS));
        assert!(parse(wide.as_bytes()).unwrap_err().0.contains("elements"));
    }
    /// Found by fuzzing: what is stored must be writable back as XML.
    #[test]
    fn refuses_what_cannot_be_written_back() {
        for (body, why) in [
            (r#"<D:a xmlns:D="DAV:"><D:b@c:y/></D:a>"#, "not a valid XML name"),
            ("<a><b@c/></a>", "not a valid XML name"),
            ("<a>&#1;</a>", "U+0001"),
            ("<a x='&#xFFFE;'/>", "U+FFFE"),
            (
                r#"<a xmlns:p="urn:x" xmlns:q="urn:x" p:n="1" q:n="2"/>"#,
                "given twice",
            ),
            (r#"<a><xml:b/></a>"#, "reserved namespace"),
        ] {
            let refused = parse(body.as_bytes()).unwrap_err().0;
            assert!(refused.contains(why), "{body}: {refused}");
        }
    }

    /// Found by fuzzing: `xml:lang` (RFC 4918 4.3 asks that it be kept) was written back
    /// with its namespace bound to a new prefix, which XML forbids.
    #[test]
    fn xml_lang_survives_a_round_trip() {
        let root = parse(r#"<p><v xml:lang="de">Grüße</v></p>"#.as_bytes()).unwrap();
        let fragment = root.content_xml();
        assert!(fragment.contains(r#"xml:lang="de""#), "{fragment}");
        let again = parse(format!("<w>{fragment}</w>").as_bytes()).unwrap();
        assert_eq!(again.children, root.children);
    }

    #[test]
    fn line_ends_and_tabs_survive_a_round_trip() {
        let root = parse(b"<p><v a='x&#9;y&#10;'>one&#13;two</v></p>").unwrap();
        let again = parse(format!("<w>{}</w>", root.content_xml()).as_bytes()).unwrap();
        assert_eq!(again.children, root.children);
        let Node::Element(v) = &root.children[0] else {
            panic!()
        };
        assert_eq!(v.attributes[0].2, "x\ty\n");
        assert_eq!(v.text(), "one\rtwo");
    }
}
