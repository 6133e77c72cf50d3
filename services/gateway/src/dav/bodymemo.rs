//! PROPFIND bodies met last, per thread, with what they ask for.
//!
//! Clients send the same few PROPFIND bodies over and over (a file manager's allprop or
//! its list of properties, for every folder it opens). Parsing one into the checked
//! element tree and reading the request out of it was 5 % of the CPU of a PROPFIND Depth
//! 0; a body met before on this thread is answered from this memo instead. The memo is
//! keyed by the exact bytes, and parsing is a function of them, so an answer from it is
//! the answer the parser gives. Bodies the parser refuses are not kept.

use crate::dav::propfind::Propfind;
use bytes::Bytes;
use std::cell::RefCell;

/// How many bodies each thread remembers.
const REMEMBERED: usize = 4;

/// The largest body kept: a client's usual PROPFIND fits easily.
const LARGEST: usize = 2048;

thread_local! {
    /// The bodies parsed last on this thread and their requests, most recent first.
    static RECENT: RefCell<Vec<(Bytes, Propfind)>> = const { RefCell::new(Vec::new()) };
}

/// The request `body` asks for: from the memo when this thread met the same bytes
/// before, else from `parse` (which is kept when it succeeds, if the body is small).
pub fn propfind<E>(body: &Bytes, parse: impl FnOnce(&Bytes) -> Result<Propfind, E>) -> Result<Propfind, E> {
    if body.len() > LARGEST {
        return parse(body);
    }
    if let Some(found) = RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        let at = recent.iter().position(|(known, _)| known == body)?;
        let entry = recent.remove(at);
        let found = entry.1.clone();
        recent.insert(0, entry);
        Some(found)
    }) {
        return Ok(found);
    }
    let parsed = parse(body)?;
    RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        if recent.len() == REMEMBERED {
            recent.pop();
        }
        recent.insert(0, (body.clone(), parsed.clone()));
    });
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dav::properties::Name;
    use crate::dav::xmldom::XmlError;
    use std::cell::Cell;

    fn parse_counting<'a>(calls: &'a Cell<u32>) -> impl Fn(&Bytes) -> Result<Propfind, XmlError> + 'a {
        move |body| {
            calls.set(calls.get() + 1);
            Propfind::parse(Some(&crate::dav::xmldom::parse(body)?))
        }
    }

    #[test]
    fn a_body_met_before_gives_the_same_request_without_parsing() {
        let calls = Cell::new(0);
        let parse = parse_counting(&calls);
        let allprop = Bytes::from_static(
            b"<?xml version=\"1.0\"?><D:propfind xmlns:D=\"DAV:\"><D:allprop/></D:propfind>",
        );
        let prop = Bytes::from_static(b"<propfind xmlns=\"DAV:\"><prop><getetag/></prop></propfind>");
        assert_eq!(
            propfind(&allprop, &parse),
            Ok(Propfind::AllProp { include: vec![] })
        );
        let etag = Propfind::Prop(vec![Name {
            namespace: "DAV:".into(),
            local: "getetag".into(),
        }]);
        assert_eq!(propfind(&prop, &parse), Ok(etag.clone()));
        assert_eq!(calls.get(), 2);
        assert_eq!(
            propfind(&allprop, &parse),
            Ok(Propfind::AllProp { include: vec![] })
        );
        assert_eq!(propfind(&prop.clone(), &parse), Ok(etag));
        assert_eq!(calls.get(), 2, "both answered from the memo");
    }

    #[test]
    fn refused_bodies_are_refused_every_time() {
        let calls = Cell::new(0);
        let parse = parse_counting(&calls);
        let wrong = Bytes::from_static(b"<propfind xmlns=\"DAV:\"><nothing/></propfind>");
        assert!(propfind(&wrong, &parse).is_err());
        assert!(propfind(&wrong, &parse).is_err());
        assert_eq!(calls.get(), 2, "not kept");
    }

    #[test]
    fn the_memo_holds_the_bodies_met_last() {
        let calls = Cell::new(0);
        let parse = parse_counting(&calls);
        let body = |i: usize| {
            Bytes::from(format!(
                "<propfind xmlns=\"DAV:\"><prop><p{i}/></prop></propfind>"
            ))
        };
        for i in 0..=REMEMBERED {
            propfind(&body(i), &parse).unwrap();
        }
        let before = calls.get();
        propfind(&body(REMEMBERED), &parse).unwrap();
        assert_eq!(calls.get(), before, "the last body is kept");
        propfind(&body(0), &parse).unwrap();
        assert_eq!(calls.get(), before + 1, "the oldest was dropped");
    }
}
