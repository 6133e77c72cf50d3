//! A cache of dead properties for listings, checked against each listing's own `statx`.
//!
//! A PROPFIND with allprop needs every member's dead properties, and reading the
//! extended attribute was the largest single cost of a Depth 1 listing (a path lookup
//! and an attribute lookup per member, on top of the `statx` the listing makes anyway).
//! The cache keeps what was read, keyed by device and inode, together with the inode's
//! birth and change times; a listing uses an entry only when the `statx` it has just
//! made shows the same birth and change times.
//!
//! Why that is coherent is argued in [`crate::cache::validity`]. fileio also drops the entry
//! itself when it changes a resource's properties, so its own writes do not even rely
//! on the clock.

use crate::cache::inode::InodeCache;
use kubedav_api::pb::fileio::v1::DeadProperty;
use kubedav_metrics::Counter;
use rustix::fs::Statx;
use std::sync::{Arc, LazyLock};
use std::time::SystemTime;

/// The cache's bound, in bytes of properties plus a fixed overhead per entry.
const CAPACITY_BYTES: u64 = 16 * 1024 * 1024;
const ENTRY_OVERHEAD_BYTES: u32 = 96;

/// The two series, looked up once (a label lookup hashes and takes a lock).
static HITS: LazyLock<Counter> = LazyLock::new(|| kubedav_metrics::cache_lookups("fileio_property", "hit"));
static MISSES: LazyLock<Counter> =
    LazyLock::new(|| kubedav_metrics::cache_lookups("fileio_property", "miss"));

/// One listing's lookups, added to `kubedav_cache_lookups_total{{cache="fileio_property"}}` once
/// when it is dropped (not per entry).
#[derive(Debug, Default)]
pub struct Tally {
    hits: u64,
    misses: u64,
}

impl Drop for Tally {
    fn drop(&mut self) {
        if self.hits > 0 {
            HITS.inc_by(self.hits);
        }
        if self.misses > 0 {
            MISSES.inc_by(self.misses);
        }
    }
}

/// The cache: shared by every listing of one volume. A resource without dead
/// properties (most are) is kept as `None`: a hit then touches no memory beyond the
/// cache's table.
#[derive(Clone, Debug)]
pub struct PropertyCache {
    entries: InodeCache<Option<Arc<[DeadProperty]>>>,
}

impl Default for PropertyCache {
    fn default() -> Self {
        Self::new()
    }
}

impl PropertyCache {
    /// An empty cache, bounded at 16 MiB.
    pub fn new() -> Self {
        LazyLock::force(&HITS);
        LazyLock::force(&MISSES);
        Self {
            entries: InodeCache::new(CAPACITY_BYTES, u64::from(ENTRY_OVERHEAD_BYTES) * 8),
        }
    }

    /// The properties of the resource `stx` describes, if the cached copy is current;
    /// counts the lookup in `tally`.
    pub fn get(&self, stx: &Statx, tally: &mut Tally) -> Option<Vec<DeadProperty>> {
        let found = self.entries.get(stx);
        if found.is_some() {
            tally.hits += 1;
        } else {
            tally.misses += 1;
        }
        found.map(|properties| properties.map_or_else(Vec::new, |properties| properties.to_vec()))
    }

    /// Stores `properties`, read after `read_began` from the resource `stx` described
    /// (the `statx` made before the read), if its ctime had settled by then.
    pub fn insert(&self, stx: &Statx, read_began: SystemTime, properties: &[DeadProperty]) {
        let bytes: usize = properties
            .iter()
            .map(|p| p.namespace.len() + p.name.len() + p.value.len() + 64)
            .sum();
        let weight = u64::from(ENTRY_OVERHEAD_BYTES) + bytes as u64;
        let kept = (!properties.is_empty()).then(|| Arc::from(properties));
        self.entries.insert(stx, read_began, kept, weight);
    }

    /// Drops the entry of the resource `stx` describes (fileio changed its properties).
    pub fn forget(&self, stx: &Statx) {
        self.entries.forget(stx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::validity::SETTLED;
    use crate::cache::validity::stat_path;

    fn property(value: &str) -> DeadProperty {
        DeadProperty {
            namespace: "urn:test".into(),
            name: "p".into(),
            value: value.to_owned().into(),
        }
    }

    #[test]
    fn serves_only_a_copy_whose_times_still_match() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let stx = stat_path(&file);
        let cache = PropertyCache::new();
        let mut tally = Tally::default();
        let later = SystemTime::now() + SETTLED * 2;
        cache.insert(&stx, later, &[property("1")]);
        assert_eq!(cache.get(&stx, &mut tally), Some(vec![property("1")]));

        // Any change of ctime or birth time (a new inode with a reused number) misses.
        let mut changed = stx;
        changed.stx_ctime.tv_nsec = (changed.stx_ctime.tv_nsec + 1) % 1_000_000_000;
        assert_eq!(cache.get(&changed, &mut tally), None);
        let mut reborn = stx;
        reborn.stx_btime.tv_sec += 1;
        assert_eq!(cache.get(&reborn, &mut tally), None);

        // fileio's own changes drop the entry outright.
        cache.forget(&stx);
        assert_eq!(cache.get(&stx, &mut tally), None);
        assert_eq!((tally.hits, tally.misses), (1, 3));
    }

    #[test]
    fn a_resource_without_dead_properties_is_kept_too() {
        // Most resources have none: that they have none is what a listing needs to know
        // without reading the attribute again.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let stx = stat_path(&file);
        let cache = PropertyCache::new();
        let mut tally = Tally::default();
        cache.insert(&stx, SystemTime::now() + SETTLED * 2, &[]);
        assert_eq!(cache.get(&stx, &mut tally), Some(vec![]));
        assert_eq!((tally.hits, tally.misses), (1, 0));
    }

    #[test]
    fn a_read_soon_after_a_change_is_not_kept() {
        // The file was just written: another change within the filesystem's timestamp
        // granularity could keep the same ctime, so the read must not be cached.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let stx = stat_path(&file);
        let cache = PropertyCache::new();
        cache.insert(&stx, SystemTime::now(), &[property("1")]);
        assert_eq!(cache.get(&stx, &mut Tally::default()), None);
    }
}
