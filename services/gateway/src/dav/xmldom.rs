//! WebDAV request bodies: a small namespace-resolved tree, parsed with quick-xml.
//!
//! Request bodies are small (the gateway caps them at 1 MiB), so a tree is the simplest
//! correct representation. What a body costs once parsed is bounded as well as its
//! bytes, because XML namespaces expand: a URI declared once is part of every name that
//! uses it. So namespace URIs are interned (each distinct URI is stored once per body
//! and shared by every name in it), and the names and namespace URIs of all elements
//! and attributes, counted as the body expands them, may total at most
//! [`MAX_EXPANDED_NAMES`] bytes. Parsing is linear in the body's size: at most
//! [`MAX_ATTRIBUTES`] attributes per element (checked for duplicates against each
//! other) and [`MAX_BODY_ATTRIBUTES`] in all, at most [`MAX_NAMESPACES`] distinct
//! namespaces, and quick-xml's own bound on the namespace bindings in scope, so every
//! name resolves in bounded time.
//!
//! Parsing refuses what has no place in a WebDAV body and is a known attack vector: any
//! DOCTYPE (so no entity can be declared, let alone expanded), references to undeclared
//! entities, undeclared namespace prefixes, empty prefix bindings (`xmlns:p=""`, illegal
//! in XML Namespaces 1.0), more than [`MAX_DEPTH`] levels and more than
//! [`MAX_ELEMENTS`] elements, and names longer than [`MAX_NAME_BYTES`]. It also refuses
//! what could not be written back as XML, because LOCK owners and PROPPATCH values are
//! stored and later sent inside responses: names that are not XML names (`a:b:c`,
//! `a@b`), characters XML 1.0 does not allow (`&#1;`), and an attribute given twice
//! under two prefixes of one namespace.

use quick_xml::NsReader;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

/// The namespace of the predefined `xml:` prefix (`xml:lang`, `xml:space`).
const XML_NAMESPACE: &str = "http://www.w3.org/XML/1998/namespace";
/// The namespace of namespace declarations, which nothing else may use.
const XMLNS_NAMESPACE: &str = "http://www.w3.org/2000/xmlns/";

/// Deepest element nesting accepted.
pub const MAX_DEPTH: usize = 64;
/// Most elements accepted in one body.
pub const MAX_ELEMENTS: usize = 20_000;
/// Most attributes on one element (namespace declarations included).
pub const MAX_ATTRIBUTES: usize = 64;
/// Most attributes in one body, namespace declarations included (WebDAV bodies hardly
/// have any; each costs as much to keep as an element).
pub const MAX_BODY_ATTRIBUTES: usize = 20_000;
/// Most distinct namespace URIs in one body.
pub const MAX_NAMESPACES: usize = 100;
/// Longest local name of an element or attribute, in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// Most bytes of names and namespace URIs in one body, counted as the body expands them
/// (each element's and attribute's namespace URI plus local name): twice the body
/// limit, so a body that declares a long URI once and uses it everywhere is refused.
pub const MAX_EXPANDED_NAMES: usize = 2 << 20;
/// Namespace bindings quick-xml keeps in scope at once (its resolution scans them): room
/// for every distinct namespace of a body plus the defaults a fragment
/// ([`Element::content_xml`]) declares.
const MAX_BINDINGS_IN_SCOPE: usize = 2 * MAX_NAMESPACES + 8;

/// A namespace URI, shared by every name of a body that is in it.
pub type Namespace = Arc<str>;

/// An element with its resolved namespace ("" when unbound).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Element {
    /// Namespace URI, "" for none.
    pub namespace: Namespace,
    /// Local name.
    pub name: String,
    /// Attributes other than namespace declarations: (namespace, local name, value).
    pub attributes: Vec<(Namespace, String, String)>,
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
        &*self.namespace == namespace && self.name == name
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

    /// This element's content (children) as a self-contained XML fragment: it means the
    /// same wherever it is inserted. Its top elements reset the default namespace
    /// (`xmlns=""`), and every namespace is bound to a prefix `nK` on the topmost
    /// element that needs it, so a URI is written once per branch, not once per name.
    pub fn content_xml(&self) -> String {
        let mut writer = FragmentWriter::default();
        for child in &self.children {
            writer.node(child, true);
        }
        writer.out
    }
}

/// Writes fragments for [`Element::content_xml`].
#[derive(Default)]
struct FragmentWriter {
    out: String,
    /// Every namespace met so far; a namespace's prefix is `n` and its place here.
    known: Vec<Namespace>,
    /// The places in `known` of the namespaces bound on the current branch.
    bound: Vec<usize>,
}

impl FragmentWriter {
    /// The place of `namespace` in `known`, and whether this branch must bind it.
    fn place(&mut self, namespace: &Namespace) -> (usize, bool) {
        let place = match self.known.iter().position(|k| k == namespace) {
            Some(place) => place,
            None => {
                self.known.push(namespace.clone());
                self.known.len() - 1
            }
        };
        (place, !self.bound.contains(&place))
    }

    fn node(&mut self, node: &Node, top: bool) {
        match node {
            Node::Text(text) => escape_text(text, &mut self.out),
            Node::Element(e) => self.element(e, top),
        }
    }

    fn element(&mut self, e: &Element, top: bool) {
        let bound_before = self.bound.len();
        let mut declarations = String::new();
        let mut declare = |writer: &mut Self, namespace: &Namespace| -> usize {
            let (place, new) = writer.place(namespace);
            if new {
                writer.bound.push(place);
                declarations.push_str(&format!(" xmlns:n{place}=\""));
                crate::dav::xml::escape_into(&mut declarations, namespace);
                declarations.push('"');
            }
            place
        };
        let element_prefix = (!e.namespace.is_empty()).then(|| declare(self, &e.namespace));
        let mut attributes = String::new();
        for (namespace, name, value) in &e.attributes {
            attributes.push(' ');
            if namespace.is_empty() {
            } else if &**namespace == XML_NAMESPACE {
                // xml:lang, xml:space: the prefix is predefined and may not be rebound.
                attributes.push_str("xml:");
            } else {
                let place = declare(self, namespace);
                attributes.push_str(&format!("n{place}:"));
            }
            attributes.push_str(name);
            attributes.push_str("=\"");
            escape_attribute(value, &mut attributes);
            attributes.push('"');
        }
        let tag = match element_prefix {
            Some(place) => format!("n{place}:{}", e.name),
            None => e.name.clone(),
        };
        self.out.push('<');
        self.out.push_str(&tag);
        if top {
            // Names without a prefix, here and below, are in no namespace.
            self.out.push_str(" xmlns=\"\"");
        }
        self.out.push_str(&declarations);
        self.out.push_str(&attributes);
        if e.children.is_empty() {
            self.out.push_str("/>");
        } else {
            self.out.push('>');
            for child in &e.children {
                self.node(child, false);
            }
            self.out.push_str("</");
            self.out.push_str(&tag);
            self.out.push('>');
        }
        self.bound.truncate(bound_before);
    }
}

/// Refuses a local name that is not an XML NCName (Namespaces in XML 1.0), or is longer
/// than [`MAX_NAME_BYTES`].
fn check_name(name: &str) -> Result<(), XmlError> {
    if name.len() > MAX_NAME_BYTES {
        return Err(err(format!(
            "a name of {} bytes is longer than the {MAX_NAME_BYTES} accepted",
            name.len()
        )));
    }
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
                crate::dav::xml::escape_into(out, before);
                out.push_str("&#13;");
            }
            None => crate::dav::xml::escape_into(out, part),
        }
    }
}

/// Escapes an attribute value for a fragment; tabs and line ends become references,
/// which a reader's attribute-value normalisation would otherwise turn into spaces.
fn escape_attribute(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            _ => crate::dav::xml::escape_into(out, c.encode_utf8(&mut [0; 4])),
        }
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

/// What one body has used of its bounds, and its interned namespaces.
struct Budget {
    namespaces: HashSet<Namespace>,
    none: Namespace,
    expanded: usize,
    elements: usize,
    attributes: usize,
}

impl Budget {
    fn new() -> Self {
        let none: Namespace = Arc::from("");
        Self {
            namespaces: HashSet::from([none.clone()]),
            none,
            expanded: 0,
            elements: 0,
            attributes: 0,
        }
    }

    /// The shared copy of a resolved namespace URI.
    fn intern(&mut self, result: ResolveResult<'_>, what: &str) -> Result<Namespace, XmlError> {
        let ns = match result {
            ResolveResult::Bound(ns) => ns,
            ResolveResult::Unbound => return Ok(self.none.clone()),
            ResolveResult::Unknown(prefix) => {
                return Err(err(format!(
                    "{what} uses the undeclared namespace prefix '{prefix}'"
                )));
            }
        };
        let uri: Cow<'_, str> = quick_xml::escape::unescape(ns.as_ref())
            .map_err(|e| err(format!("a namespace URI is malformed: {e}")))?;
        if let Some(known) = self.namespaces.get(&*uri) {
            return Ok(known.clone());
        }
        if self.namespaces.len() > MAX_NAMESPACES {
            return Err(err(format!("more than {MAX_NAMESPACES} distinct namespaces")));
        }
        let uri: Namespace = Arc::from(&*uri);
        self.namespaces.insert(uri.clone());
        Ok(uri)
    }

    /// Counts a name as the body expands it.
    fn expand(&mut self, namespace: &str, local: &str) -> Result<(), XmlError> {
        self.expanded += namespace.len() + local.len();
        if self.expanded > MAX_EXPANDED_NAMES {
            return Err(err(format!(
                "its names and namespace URIs expand to more than {MAX_EXPANDED_NAMES} bytes"
            )));
        }
        Ok(())
    }
}

/// Parses a whole body into its root element.
pub fn parse(body: &[u8]) -> Result<Element, XmlError> {
    let text = std::str::from_utf8(body).map_err(|_| err("the body is not UTF-8"))?;
    let mut reader = NsReader::from_str(text);
    reader
        .resolver_mut()
        .set_max_namespace_bindings(MAX_BINDINGS_IN_SCOPE);
    let mut budget = Budget::new();
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        let event = reader.read_event().map_err(|e| err(e.to_string()))?;
        match event {
            Event::Start(ref start) | Event::Empty(ref start) => {
                if root.is_some() {
                    return Err(err("content after the root element"));
                }
                budget.elements += 1;
                if budget.elements > MAX_ELEMENTS {
                    return Err(err(format!("more than {MAX_ELEMENTS} elements")));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(err(format!("nested deeper than {MAX_DEPTH} levels")));
                }
                let element = open(&reader, start, &mut budget)?;
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
            Event::CData(c) => push_text(&mut stack, c.as_ref())?,
            Event::GeneralRef(r) => push_text(&mut stack, &entity(&r.into_inner())?)?,
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

/// The element a start tag opens, its names resolved and counted.
fn open(reader: &NsReader<&[u8]>, start: &BytesStart<'_>, budget: &mut Budget) -> Result<Element, XmlError> {
    let (ns, local) = reader.resolver().resolve_element(start.name());
    let namespace = budget.intern(ns, "an element")?;
    if &*namespace == XML_NAMESPACE || &*namespace == XMLNS_NAMESPACE {
        return Err(err(format!(
            "no element may be in the reserved namespace {namespace}"
        )));
    }
    let name = local.as_ref().to_owned();
    check_name(&name)?;
    budget.expand(&namespace, &name)?;
    let mut attributes: Vec<(Namespace, String, String)> = Vec::new();
    // quick-xml's own duplicate check compares each attribute with every earlier one;
    // with at most MAX_ATTRIBUTES per element the same comparison here stays cheap, and
    // it compares resolved names, which also catches one namespace under two prefixes.
    for (count, attribute) in start.attributes().with_checks(false).enumerate() {
        if count >= MAX_ATTRIBUTES {
            return Err(err(format!(
                "an element has more than {MAX_ATTRIBUTES} attributes"
            )));
        }
        budget.attributes += 1;
        if budget.attributes > MAX_BODY_ATTRIBUTES {
            return Err(err(format!("more than {MAX_BODY_ATTRIBUTES} attributes")));
        }
        let attribute = attribute.map_err(|e| err(e.to_string()))?;
        let key = attribute.key.as_ref();
        let value = attribute
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|e| err(e.to_string()))?;
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
        let attr_ns = budget.intern(ns, "an attribute")?;
        let local = local.as_ref().to_owned();
        check_name(&local)?;
        check_chars(&value)?;
        budget.expand(&attr_ns, &local)?;
        if attributes.iter().any(|(n, l, _)| *n == attr_ns && *l == local) {
            return Err(err(format!("the attribute '{local}' is given twice")));
        }
        attributes.push((attr_ns, local, value.into_owned()));
    }
    Ok(Element {
        namespace,
        name,
        attributes,
        children: Vec::new(),
    })
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
            .map(|e| (&*e.namespace, e.name.as_str()))
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
            r#"<n0:x xmlns="" xmlns:n0="urn:q" n0:at="1" plain="2">t&lt;</n0:x><y xmlns=""/>"#
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
    /// A URI declared once is stored once, however many names use it, and what a body
    /// expands to is bounded (a 20 KB URI used by 3,000 elements expanded to 60 MB).
    #[test]
    fn namespaces_are_interned_and_expansion_is_bounded() {
        let root = parse(br#"<a xmlns="urn:long"><b/><c xmlns:p="urn:long" p:x="1"/></a>"#).unwrap();
        let b = root.child("urn:long", "b").unwrap();
        let c = root.child("urn:long", "c").unwrap();
        assert!(Arc::ptr_eq(&root.namespace, &b.namespace));
        assert!(Arc::ptr_eq(&root.namespace, &c.attributes[0].0));

        let uri = "u".repeat(20_000);
        let amplified = format!(
            r#"<D:propfind xmlns:D="DAV:" xmlns:z="urn:{uri}"><D:prop>{}</D:prop></D:propfind>"#,
            "<z:a/>".repeat(3_000)
        );
        assert!(amplified.len() < 40_000);
        let refused = parse(amplified.as_bytes()).unwrap_err().0;
        assert!(refused.contains("expand to more than"), "{refused}");
        // The same names in a short namespace are fine.
        let plain = format!(
            r#"<D:propfind xmlns:D="DAV:" xmlns:z="urn:z"><D:prop>{}</D:prop></D:propfind>"#,
            "<z:a/>".repeat(3_000)
        );
        assert!(parse(plain.as_bytes()).is_ok());
    }

    /// 40,000 attributes on one element took 6.5 s of CPU: every attribute was compared
    /// with every earlier one. They are bounded per element now.
    #[test]
    fn attributes_names_and_namespaces_are_bounded() {
        let many: String = (0..40_000).map(|i| format!(" a{i}=\"\"")).collect();
        let refused = parse(format!("<x{many}/>").as_bytes()).unwrap_err().0;
        assert!(refused.contains("more than 64 attributes"), "{refused}");
        let most: String = (0..MAX_ATTRIBUTES).map(|i| format!(" a{i}=\"\"")).collect();
        assert!(parse(format!("<x{most}/>").as_bytes()).is_ok());
        let spread = "<e a=\"1\" b=\"2\" c=\"3\" d=\"4\"/>".repeat(MAX_BODY_ATTRIBUTES / 4 + 1);
        let refused = parse(format!("<x>{spread}</x>").as_bytes()).unwrap_err().0;
        assert!(refused.contains("more than 20000 attributes"), "{refused}");

        let long = "n".repeat(MAX_NAME_BYTES + 1);
        let refused = parse(format!("<{long}/>").as_bytes()).unwrap_err().0;
        assert!(refused.contains("longer than"), "{refused}");

        let namespaces: String = (0..=MAX_NAMESPACES)
            .map(|i| format!(r#"<p:e xmlns:p="urn:{i}"/>"#))
            .collect();
        let refused = parse(format!("<x>{namespaces}</x>").as_bytes()).unwrap_err().0;
        assert!(refused.contains("distinct namespaces"), "{refused}");
    }

    /// A fragment binds each namespace once per branch, so storing and echoing it does
    /// not multiply a long URI by the number of names.
    #[test]
    fn fragments_bind_each_namespace_once_per_branch() {
        let uri = "u".repeat(1_000);
        let body = format!(r#"<o xmlns:z="urn:{uri}"><z:a><z:b z:c="1"/><z:b/></z:a><z:a/></o>"#);
        let root = parse(body.as_bytes()).unwrap();
        let fragment = root.content_xml();
        assert_eq!(fragment.matches(&uri).count(), 2, "{fragment}");
        let again = parse(format!("<w xmlns=\"urn:w\">{fragment}</w>").as_bytes()).unwrap();
        assert_eq!(again.children, root.children);
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
