//! Fuzzes the XML request parser and the request interpretations built on it
//! (PROPFIND bodies; LOCK owners and PROPPATCH values, which are stored as fragments and
//! later written into responses): any bytes must parse or be refused, never panic; a
//! stored fragment must read back as the same tree, so what a client stored comes back
//! intact and never breaks the XML of a later response; and what a body costs once
//! parsed stays bounded by what was sent: the tree holds no more bytes of names, values
//! and text than the body had (each namespace URI stored once), its names expand to at
//! most the parser's budget, and its fragment is at most six times both together.

use kubedav_gateway::dav::propfind::{MAX_PROPFIND_NAMES, Propfind};
use kubedav_gateway::dav::xmldom::{self, Element, MAX_EXPANDED_NAMES, Node};
use std::collections::HashSet;

/// Checks one input: returns when every property holds, panics naming the one that
/// does not.
pub fn check(data: &[u8]) {
    let Ok(root) = xmldom::parse(data) else { return };
    let mut size = Size::default();
    size.element(&root);
    // The `xml:` prefix's namespace is predefined: no body declares it.
    let namespaces: usize = size
        .namespaces
        .iter()
        .filter(|n| *n != "http://www.w3.org/XML/1998/namespace")
        .map(|n| n.len())
        .sum();
    assert!(
        size.bytes + namespaces <= data.len(),
        "the tree holds {} bytes (+{namespaces} of namespaces) from a body of {}",
        size.bytes,
        data.len()
    );
    assert!(
        size.expanded <= MAX_EXPANDED_NAMES,
        "names expand to {}",
        size.expanded
    );
    if let Ok(Propfind::Prop(names)) = Propfind::parse(Some(&root)) {
        assert!(names.len() <= MAX_PROPFIND_NAMES);
    }
    let fragment = root.content_xml();
    // Escaping makes a character at most six bytes (`"` is `&quot;`), and a fragment
    // binds a namespace, escaped, at most once per name it has.
    assert!(
        fragment.len() <= 6 * (data.len() + size.expanded) + 64,
        "a fragment of {} bytes from a body of {}",
        fragment.len(),
        data.len()
    );
    let wrapped = format!("<w xmlns=\"urn:w\">{fragment}</w>");
    let reread = match xmldom::parse(wrapped.as_bytes()) {
        Ok(reread) => reread,
        Err(e) => panic!("a stored fragment does not parse again: {e}\n{wrapped}"),
    };
    assert_eq!(
        merged(&reread.children),
        merged(&root.children),
        "the fragment changed\n{wrapped}"
    );
}

/// What a parsed tree holds: bytes of names, attribute values and text; its distinct
/// namespace URIs; and its names as expanded (each with its namespace URI).
#[derive(Default)]
struct Size {
    bytes: usize,
    namespaces: HashSet<String>,
    expanded: usize,
}

impl Size {
    fn element(&mut self, e: &Element) {
        self.bytes += e.name.len();
        self.expanded += e.namespace.len() + e.name.len();
        self.namespaces.insert(e.namespace.to_string());
        for (namespace, name, value) in &e.attributes {
            self.bytes += name.len() + value.len();
            self.expanded += namespace.len() + name.len();
            self.namespaces.insert(namespace.to_string());
        }
        for child in &e.children {
            match child {
                Node::Element(child) => self.element(child),
                Node::Text(text) => self.bytes += text.len(),
            }
        }
    }
}

/// Children with adjacent text nodes joined, as a reader sees them.
fn merged(children: &[Node]) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::new();
    for child in children {
        match (child, out.last_mut()) {
            (Node::Text(text), Some(Node::Text(last))) => last.push_str(text),
            (Node::Text(text), _) => out.push(Node::Text(text.clone())),
            (Node::Element(e), _) => {
                let mut e = e.clone();
                e.children = merged(&e.children);
                out.push(Node::Element(e));
            }
        }
    }
    out.retain(|n| !matches!(n, Node::Text(t) if t.is_empty()));
    out
}
