//! A bounded cache of what was read from inodes, served only while a fresh `statx` shows
//! the inode in the state it was read in: the common part of the caches of dead
//! properties ([`crate::cache::property`]) and of directories' names ([`crate::cache::name`]).
//!
//! The key is the inode ([`Identity`]); each copy keeps the [`Version`] it was read
//! under, and only reads that began after that version had settled are kept, so a copy
//! whose version matches a later `statx` is exactly what a read would give
//! ([`crate::cache::validity`] argues why). quick_cache holds the copies: a lookup is a shard's
//! read lock and a hash, and records nothing per lookup (docs/benchmarks.md has why it
//! was chosen over moka).

use crate::cache::validity::{Identity, Version};
use rustix::fs::Statx;
use std::sync::Arc;
use std::time::SystemTime;

/// A kept copy, its version and what it costs against the bound. Held in the cache's
/// table itself, not behind a pointer: a listing of 100,000 members looks up 100,000
/// inodes, and each pointer followed (and each reference count raised and lowered on it)
/// was a miss in the processor's caches (docs/benchmarks.md, "2026-12-06 (4)").
#[derive(Clone)]
struct Kept<V> {
    version: Version,
    weight: u64,
    value: V,
}

/// The weight of a kept copy: the bytes its owner declared when inserting it.
#[derive(Clone, Copy, Debug)]
struct DeclaredWeight;

impl<V> quick_cache::Weighter<Identity, Kept<V>> for DeclaredWeight {
    fn weight(&self, _: &Identity, kept: &Kept<V>) -> u64 {
        kept.weight
    }
}

/// Copies of values read from inodes, bounded in bytes. `V` is cloned on each hit, so it
/// should be cheap to clone (an `Arc`, or an `Option` of one).
pub struct InodeCache<V> {
    entries: Arc<quick_cache::sync::Cache<Identity, Kept<V>, DeclaredWeight>>,
}

impl<V> Clone for InodeCache<V> {
    fn clone(&self) -> Self {
        Self {
            entries: self.entries.clone(),
        }
    }
}

impl<V: Clone> std::fmt::Debug for InodeCache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InodeCache")
            .field("entries", &self.entries.len())
            .field("bytes", &self.entries.weight())
            .finish()
    }
}

impl<V: Clone> InodeCache<V> {
    /// An empty cache holding at most `capacity_bytes` of declared weight; sized for
    /// copies of about `typical_bytes` each.
    pub fn new(capacity_bytes: u64, typical_bytes: u64) -> Self {
        let estimated_entries = (capacity_bytes / typical_bytes.max(1)).clamp(16, 1 << 20) as usize;
        Self {
            entries: Arc::new(quick_cache::sync::Cache::with_weighter(
                estimated_entries,
                capacity_bytes,
                DeclaredWeight,
            )),
        }
    }

    /// The copy of the inode `stx` describes, if one is kept and `stx` shows the state it
    /// was read in.
    pub fn get(&self, stx: &Statx) -> Option<V> {
        self.entries
            .get(&Identity::of(stx))
            .filter(|kept| kept.version == Version::of(stx))
            .map(|kept| kept.value)
    }

    /// Keeps `value`, read after `read_began` from the inode `stx` described (a `statx`
    /// made before the read), if its ctime had settled by then; `weight` is its cost in
    /// bytes against the bound.
    pub fn insert(&self, stx: &Statx, read_began: SystemTime, value: V, weight: u64) {
        let version = Version::of(stx);
        if !version.settled_before(read_began) {
            return;
        }
        self.entries.insert(
            Identity::of(stx),
            Kept {
                version,
                weight,
                value,
            },
        );
    }

    /// Drops the copy of the inode `stx` describes.
    pub fn forget(&self, stx: &Statx) {
        self.entries.remove(&Identity::of(stx));
    }
}
