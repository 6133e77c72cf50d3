//! Fuzzes the XML request parser and the request interpretations built on it
//! (PROPFIND bodies; LOCK owners and PROPPATCH values, which are stored as fragments and
//! later written into responses): any bytes must parse or be refused, never panic; and a
//! stored fragment must read back as the same tree, so what a client stored comes back
//! intact and never breaks the XML of a later response.
#![no_main]

use kubedav_gateway::properties::Propfind;
use kubedav_gateway::xmldom::{self, Node};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(root) = xmldom::parse(data) else { return };
    let _ = Propfind::parse(Some(&root));
    let fragment = root.content_xml();
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
});

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
