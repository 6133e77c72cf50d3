//! [`FreeTrees`]: the trees the locks service found free of locks, kept under its lease,
//! so that a write without an If header into one needs no lock check and a removal of
//! one no release.
//!
//! Why that is sound: a lock check without an If header submits no token, so when it is
//! allowed, no lock applies to any of its targets, and the service also reports the
//! highest tree around them with no lock rooted at or below it (`free_root`). A write
//! into that tree then meets no lock until a lock is taken somewhere, and while this
//! gateway holds the service's lease, no lock is answered before this gateway has heard
//! of it: the service announces every lock change to its leaseholders and waits for
//! them. Hearing of one moves the lease's epoch on, and so does a lapse of the lease
//! before it is valid again. So each tree is kept with the epoch read before the check
//! that found it, and used only while the lease is valid and the epoch the same. A lock
//! taken between the check and the write it allowed is the race every lock check has
//! (the check is not a reservation), no wider here.

use kubedav_api::locks::{CheckWriteRequest, ancestors_and_self};
use quick_cache::sync::Cache;

/// About how many trees are kept.
const TYPICAL_TREES: usize = 4096;

/// Bytes of trees kept at most (their paths, and a fixed cost each): bounded in bytes,
/// since a path may be long.
const CAPACITY_BYTES: u64 = 1 << 20;

/// What a kept tree weighs against [`CAPACITY_BYTES`].
#[derive(Clone, Copy)]
struct PathWeight;

impl quick_cache::Weighter<String, u64> for PathWeight {
    fn weight(&self, tree: &String, _: &u64) -> u64 {
        tree.len() as u64 + 48
    }
}

/// Trees found free of locks, each with the lease's epoch of the check that found it.
pub(super) struct FreeTrees {
    trees: Cache<String, u64, PathWeight>,
}

impl FreeTrees {
    pub(super) fn new() -> Self {
        Self {
            trees: Cache::with_weighter(TYPICAL_TREES, CAPACITY_BYTES, PathWeight),
        }
    }

    /// The trees an allowed check of `request` found free besides the one the service
    /// reports: those the request removes or replaces whole (with no token submitted, a
    /// lock on or below them, or of depth infinity above them, would have been in the
    /// way). None for a request with an If header.
    pub(super) fn replaced_whole(request: &CheckWriteRequest) -> Vec<String> {
        if !request.if_header.is_empty() {
            return Vec::new();
        }
        request
            .targets
            .iter()
            .filter(|target| target.recursive)
            .map(|target| target.path.clone())
            .collect()
    }

    pub(super) fn insert(&self, tree: String, epoch: u64) {
        self.trees.insert(tree, epoch);
    }

    pub(super) fn remove(&self, tree: &str) {
        self.trees.remove(tree);
    }

    /// Whether `path` lies in a tree found free at `epoch`.
    pub(super) fn holds(&self, path: &str, epoch: u64) -> bool {
        ancestors_and_self(path).any(|tree| self.trees.get(tree) == Some(epoch))
    }

    /// Forgets them all: a lock changed, or the lease began again.
    pub(super) fn forget_all(&self) {
        self.trees.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubedav_api::locks::{TaggedLists, WriteTarget};

    fn request(targets: &[(&str, bool)], tokens: bool) -> CheckWriteRequest {
        CheckWriteRequest {
            targets: targets
                .iter()
                .map(|(path, recursive)| WriteTarget {
                    path: (*path).to_owned(),
                    recursive: *recursive,
                })
                .collect(),
            if_header: if tokens {
                vec![TaggedLists::default()]
            } else {
                Vec::new()
            },
            ..CheckWriteRequest::default()
        }
    }

    #[test]
    fn a_tree_holds_what_lies_in_it_at_its_own_epoch() {
        let free = FreeTrees::new();
        free.insert("a/b".into(), 7);
        assert!(free.holds("a/b", 7));
        assert!(free.holds("a/b/c/d", 7));
        assert!(!free.holds("a/bc", 7), "a sibling whose name starts alike");
        assert!(!free.holds("a", 7), "the tree's parent");
        assert!(!free.holds("a/b/c", 8), "another epoch");
        free.forget_all();
        assert!(!free.holds("a/b/c", 7));
    }

    #[test]
    fn only_a_check_without_tokens_finds_what_it_replaces_whole_free() {
        let delete = request(&[("a/b", true), ("a", false)], false);
        assert_eq!(FreeTrees::replaced_whole(&delete), ["a/b"]);
        let with_token = request(&[("a/b", true)], true);
        assert!(FreeTrees::replaced_whole(&with_token).is_empty());
    }
}
