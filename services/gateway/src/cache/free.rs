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
//! them, naming where the lock is rooted ([`kubedav_api::locks::changed_around`]): the
//! trees that hold that root, and those below it, are dropped. A tree is kept only if no
//! announcement came between the check that found it and its keeping (the lease's
//! epoch, as for every kept answer), and is used only while the lease is valid: a lease
//! that lapsed drops everything before it is valid again. A lock taken between the check
//! and the write it allowed is the race every lock check has (the check is not a
//! reservation), no wider here.
//!
//! Until 2026-12 any lock change dropped every tree (and every kept discovery): with
//! clients that lock what they edit (davfs2, Office), each LOCK, refresh and UNLOCK
//! anywhere sent every other user's next write back to the locks service.

use kubedav_api::lease::Invalidation;
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

impl quick_cache::Weighter<String, ()> for PathWeight {
    fn weight(&self, tree: &String, _: &()) -> u64 {
        tree.len() as u64 + 48
    }
}

/// Trees found free of locks.
pub(super) struct FreeTrees {
    trees: Cache<String, (), PathWeight>,
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

    pub(super) fn insert(&self, tree: String) {
        self.trees.insert(tree, ());
    }

    pub(super) fn remove(&self, tree: &str) {
        self.trees.remove(tree);
    }

    /// Whether `path` lies in a tree found free.
    pub(super) fn holds(&self, path: &str) -> bool {
        ancestors_and_self(path).any(|tree| self.trees.get(tree).is_some())
    }

    /// Forgets the trees an announcement names: its paths, and whatever lies in its
    /// trees; all of them for one that names everything (or a lease begun again).
    pub(super) fn forget(&self, invalidation: &Invalidation) {
        if invalidation.covers_everything() {
            self.trees.clear();
            return;
        }
        for path in &invalidation.paths {
            self.trees.remove(path);
        }
        if !invalidation.trees.is_empty() {
            self.trees.retain(|tree, _| !invalidation.covers(tree));
        }
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
    fn a_tree_holds_what_lies_in_it() {
        let free = FreeTrees::new();
        free.insert("a/b".into());
        assert!(free.holds("a/b"));
        assert!(free.holds("a/b/c/d"));
        assert!(!free.holds("a/bc"), "a sibling whose name starts alike");
        assert!(!free.holds("a"), "the tree's parent");
        free.forget(&Invalidation::everything());
        assert!(!free.holds("a/b/c"));
    }

    #[test]
    fn a_lock_change_forgets_the_trees_around_its_root_and_no_others() {
        let free = FreeTrees::new();
        let trees = [
            "",
            "home",
            "home/alice",
            "home/alice/docs",
            "home/bob",
            "home/alicia",
        ];
        let kept = |free: &FreeTrees| -> Vec<&str> {
            trees
                .iter()
                .copied()
                .filter(|tree| free.trees.get(*tree).is_some())
                .collect()
        };
        for tree in &trees[1..] {
            free.insert((*tree).to_owned());
        }
        free.forget(&kubedav_api::locks::changed_around("home/alice"));
        assert_eq!(
            kept(&free),
            ["home/bob", "home/alicia"],
            "the trees holding the lock's root and those below it go"
        );
        free.insert("".into());
        free.forget(&kubedav_api::locks::changed_around("home/bob/x.txt"));
        assert_eq!(kept(&free), ["home/alicia"], "the root holds every lock");
        free.forget(&kubedav_api::locks::changed_around(""));
        assert!(kept(&free).is_empty(), "a lock on the root");
    }

    #[test]
    fn only_a_check_without_tokens_finds_what_it_replaces_whole_free() {
        let delete = request(&[("a/b", true), ("a", false)], false);
        assert_eq!(FreeTrees::replaced_whole(&delete), ["a/b"]);
        let with_token = request(&[("a/b", true)], true);
        assert!(FreeTrees::replaced_whole(&with_token).is_empty());
    }
}
