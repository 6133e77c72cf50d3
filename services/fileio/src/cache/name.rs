//! A cache of directories' visible names for listings, checked against each listing's
//! own `statx` of the directory.
//!
//! Reading a directory was a tenth of a PROPFIND Depth 1's CPU on a collection of 1,000
//! files (`getdents64` and ext4's hash-ordered walk of the directory). Every change of a
//! directory's entries (a member created, removed or renamed in or out) sets the
//! directory's change time, so the names read under one version stay right for as long
//! as a `statx` shows that version ([`crate::cache::validity`] argues the timing). A listing
//! still makes one `statx` per member: the names are cached, never the members'
//! metadata.

use crate::cache::inode::InodeCache;
use kubedav_metrics::Counter;
use rustix::fs::Statx;
use std::sync::{Arc, LazyLock};
use std::time::SystemTime;

/// The cache's bound, in bytes of names plus a fixed overhead per name and directory.
const CAPACITY_BYTES: u64 = 8 * 1024 * 1024;
/// Directories with more names are read each time (one would take much of the bound).
pub const MAX_NAMES: usize = 16_384;
const NAME_OVERHEAD_BYTES: u64 = 32;
const DIRECTORY_OVERHEAD_BYTES: u64 = 128;

/// The two series, looked up once (a label lookup hashes and takes a lock).
static HITS: LazyLock<Counter> = LazyLock::new(|| kubedav_metrics::cache_lookups("fileio_name", "hit"));
static MISSES: LazyLock<Counter> = LazyLock::new(|| kubedav_metrics::cache_lookups("fileio_name", "miss"));

/// The visible names of directories, shared by every listing of one volume.
#[derive(Clone, Debug)]
pub struct NameCache {
    entries: InodeCache<Arc<Vec<String>>>,
}

impl Default for NameCache {
    fn default() -> Self {
        Self::new()
    }
}

impl NameCache {
    /// An empty cache, bounded at 8 MiB.
    pub fn new() -> Self {
        LazyLock::force(&HITS);
        LazyLock::force(&MISSES);
        Self {
            entries: InodeCache::new(CAPACITY_BYTES, 16 * 1024),
        }
    }

    /// The names of the directory `stx` describes, if the kept copy is current.
    pub fn get(&self, stx: &Statx) -> Option<Arc<Vec<String>>> {
        let found = self.entries.get(stx);
        if found.is_some() {
            HITS.inc();
        } else {
            MISSES.inc();
        }
        found
    }

    /// Keeps `names`, read after `read_began` from the directory `stx` described (the
    /// `statx` made before the read), if its ctime had settled by then.
    pub fn insert(&self, stx: &Statx, read_began: SystemTime, names: Vec<String>) {
        if names.len() > MAX_NAMES {
            return;
        }
        let bytes: u64 = names
            .iter()
            .map(|name| name.len() as u64 + NAME_OVERHEAD_BYTES)
            .sum();
        self.entries
            .insert(stx, read_began, Arc::new(names), DIRECTORY_OVERHEAD_BYTES + bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::validity::{SETTLED, stat_path};

    #[test]
    fn a_member_created_renamed_or_removed_misses() {
        let dir = tempfile::tempdir().unwrap();
        let cache = NameCache::new();
        let later = SystemTime::now() + SETTLED * 2;
        let changes: [(&str, &dyn Fn()); 3] = [
            ("created", &|| std::fs::write(dir.path().join("b"), b"").unwrap()),
            ("renamed", &|| {
                std::fs::rename(dir.path().join("b"), dir.path().join("c")).unwrap()
            }),
            ("removed", &|| std::fs::remove_file(dir.path().join("c")).unwrap()),
        ];
        for (what, change) in changes {
            let kept = stat_path(dir.path());
            cache.insert(&kept, later, vec!["kept".into()]);
            assert_eq!(
                cache.get(&stat_path(dir.path())).as_deref(),
                Some(&vec!["kept".to_owned()])
            );
            crate::cache::validity::wait_past_ctime(&kept);
            change();
            assert!(cache.get(&stat_path(dir.path())).is_none(), "a member {what}");
        }
    }

    #[test]
    fn a_directory_read_soon_after_a_change_or_too_large_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = NameCache::new();
        cache.insert(&stat_path(dir.path()), SystemTime::now(), vec![]);
        assert!(cache.get(&stat_path(dir.path())).is_none(), "just created");
        let later = SystemTime::now() + SETTLED * 2;
        let many = (0..=MAX_NAMES).map(|i| i.to_string()).collect();
        cache.insert(&stat_path(dir.path()), later, many);
        assert!(cache.get(&stat_path(dir.path())).is_none(), "too many names");
    }
}
