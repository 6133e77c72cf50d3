//! [`KeptAnswers`]: PROPFIND Depth 0 answers as the gateway rendered them, answered
//! again for as long as what they were rendered from is unchanged.
//!
//! A file manager or sync client asks the same few properties of the same resources
//! over and over. Rendering a Depth 0 answer (the kept resource copied with the
//! properties asked for, its lock discovery, the XML written) was a third of the
//! gateway's user time per request (docs/benchmarks.md, "2026-11-26 (5)"). An answer is kept
//! with the number of the copy of the resource it was rendered from
//! ([`kubedav_api::fileio::FileIo::kept_copy`]), and answers again only while the fileio
//! port still answers from that copy: a change announced by fileio, or the copy passing
//! the freshness bound, ends it. Locks are read on every request as before; an answer is
//! kept only when no lock applied, and answers only while none does.
//!
//! The key is the request's path as it came (not decoded: the same bytes decode the same
//! way, and only paths that decoded are kept) and its body's exact bytes; what else
//! decides the rendering is the gateway's configuration, which does not change.

use super::Lookups;
use crate::request::KeptAnswer;
use bytes::Bytes;
use quick_cache::Equivalent;
use quick_cache::sync::Cache;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Bytes of answers kept (their bodies, request bodies and paths), per gateway.
pub const CAPACITY_BYTES: u64 = 8 << 20;

/// The largest request body whose answer is kept: a client's usual PROPFIND is a few
/// hundred bytes.
pub const MAX_REQUEST_BYTES: usize = 2048;

/// The largest answer kept: a Depth 0 answer of all properties is about 1 KB, more with
/// many dead properties.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// What identifies a request's answer: its path as it came and its body.
#[derive(PartialEq, Eq)]
struct Key {
    raw_path: Box<str>,
    request_body: Bytes,
}

/// A [`Key`] looked up without copying the request's path and body.
struct Lookup<'a> {
    raw_path: &'a str,
    request_body: &'a [u8],
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Lookup {
            raw_path: &self.raw_path,
            request_body: &self.request_body,
        }
        .hash(state);
    }
}

impl Hash for Lookup<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.raw_path.hash(state);
        self.request_body.hash(state);
    }
}

impl Equivalent<Key> for Lookup<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        self.raw_path == &*key.raw_path && self.request_body == &key.request_body[..]
    }
}

#[derive(Clone, Copy)]
struct Weight;

impl quick_cache::Weighter<Key, Arc<KeptAnswer>> for Weight {
    fn weight(&self, key: &Key, answer: &Arc<KeptAnswer>) -> u64 {
        (key.raw_path.len() + key.request_body.len() + answer.path.as_str().len() + answer.body.len() + 96)
            as u64
    }
}

/// The PROPFIND Depth 0 answers one gateway keeps (see the module's documentation).
pub struct KeptAnswers {
    answers: Cache<Key, Arc<KeptAnswer>, Weight>,
    lookups: Lookups,
}

impl Default for KeptAnswers {
    fn default() -> Self {
        Self {
            answers: Cache::with_weighter(8192, CAPACITY_BYTES, Weight),
            lookups: Lookups::of("answer"),
        }
    }
}

impl KeptAnswers {
    /// Forgets every kept answer (the access policy changed).
    pub fn clear(&self) {
        self.answers.clear();
    }

    /// The answer kept for a request with this path (as it came) and body. The caller
    /// checks that it still holds ([`KeptAnswer::copy`], [`KeptAnswer::shows_locks`]),
    /// and counts what it found with [`KeptAnswers::count`].
    pub fn get(&self, raw_path: &str, request_body: &[u8]) -> Option<Arc<KeptAnswer>> {
        self.answers.get(&Lookup {
            raw_path,
            request_body,
        })
    }

    /// Counts a lookup: a hit if an answer that holds was `found`, else a miss.
    pub fn count<T>(&self, found: Option<T>) -> Option<T> {
        self.lookups.count(found)
    }

    /// Keeps `answer` for requests with this path and body, unless either is larger than
    /// is kept.
    pub fn keep(&self, raw_path: &str, request_body: Bytes, answer: KeptAnswer) {
        if request_body.len() > MAX_REQUEST_BYTES || answer.body.len() > MAX_ANSWER_BYTES {
            return;
        }
        let key = Key {
            raw_path: raw_path.into(),
            request_body,
        };
        self.answers.insert(key, Arc::new(answer));
    }

    /// Forgets the answer kept for this path and body (it no longer holds).
    pub fn forget(&self, raw_path: &str, request_body: &[u8]) {
        self.answers.remove(&Lookup {
            raw_path,
            request_body,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubedav_api::path::VolumePath;

    fn answer(body: usize) -> KeptAnswer {
        KeptAnswer {
            path: VolumePath::parse("doc.txt").unwrap(),
            copy: 1,
            shows_locks: true,
            body: Bytes::from(vec![b'x'; body]),
        }
    }

    /// A client sending ever new bodies (each one keyed apart) never makes the answers
    /// hold more than their bound.
    #[test]
    fn answers_never_hold_more_than_their_bound() {
        let answers = KeptAnswers::default();
        for n in 0..20_000 {
            let request = Bytes::from(format!("<propfind n=\"{n}\"/>"));
            answers.keep("/doc.txt", request, answer(1024));
        }
        assert!(
            answers.answers.weight() <= CAPACITY_BYTES,
            "{} bytes kept",
            answers.answers.weight()
        );
        assert!(
            answers.answers.weight() > CAPACITY_BYTES / 2,
            "the bound is not used"
        );
    }

    /// Bodies and answers too large to keep are not kept; the same request finds the
    /// answer kept for it, another body or path does not.
    #[test]
    fn only_the_same_request_finds_a_kept_answer() {
        let answers = KeptAnswers::default();
        answers.keep("/doc.txt", Bytes::from_static(b"<a/>"), answer(10));
        assert!(answers.get("/doc.txt", b"<a/>").is_some());
        assert!(answers.get("/doc.txt", b"<b/>").is_none());
        assert!(answers.get("/doc.txt/", b"<a/>").is_none());
        answers.keep("/big", Bytes::from(vec![b' '; MAX_REQUEST_BYTES + 1]), answer(10));
        assert!(answers.get("/big", &vec![b' '; MAX_REQUEST_BYTES + 1]).is_none());
        answers.keep("/huge", Bytes::new(), answer(MAX_ANSWER_BYTES + 1));
        assert!(answers.get("/huge", b"").is_none());
        answers.forget("/doc.txt", b"<a/>");
        assert!(answers.get("/doc.txt", b"<a/>").is_none());
    }
}
