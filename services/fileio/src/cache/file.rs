//! A cache of small files' contents, checked against a `statx` on every read.
//!
//! A GET of a small file costs six system calls on the uncached path: receive, open
//! (`openat2`), `statx`, read, close and send. With a current copy in memory it costs
//! three: receive, one `statx` of the path and send. The copy is served only when that
//! `statx` shows the inode it was read from, in the same state ([`crate::cache::validity`]
//! argues why that is exact), with the same size and modification time.
//!
//! * The key is the path. The `statx` of the path follows symlinks and is not confined to
//!   the root, but it serves only as a comparison: a path that now leads to any other
//!   inode, inside the root or not, misses and takes the confined path (`openat2` with
//!   `RESOLVE_BENEATH`), and the bytes served are the ones that path read.
//! * Only whole files of at most [`MAX_FILE_BYTES`] are kept, each read whole and after
//!   its ctime had settled. Ranges of a kept file are served from the copy.
//! * The cache is bounded in bytes (quick_cache, whose S3-FIFO policy keeps the files
//!   read more than once); zero bytes turns it off.

use crate::cache::validity::{Identity, Version};
use bytes::Bytes;
use kubedav_api::path::VolumePath;
use kubedav_metrics::Counter;
use rustix::fd::AsFd;
use rustix::fs::{AtFlags, Statx};
use std::sync::{Arc, LazyLock};
use std::time::SystemTime;

/// The largest file the cache keeps.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// The default bound of the cache.
pub const DEFAULT_CAPACITY_BYTES: u64 = 16 * 1024 * 1024;
/// What an entry costs beyond its data and path, for the bound.
const ENTRY_OVERHEAD_BYTES: usize = 128;

static HITS: LazyLock<Counter> = LazyLock::new(|| kubedav_metrics::cache_lookups("fileio_file", "hit"));
static MISSES: LazyLock<Counter> = LazyLock::new(|| kubedav_metrics::cache_lookups("fileio_file", "miss"));

#[derive(Debug)]
struct Entry {
    identity: Identity,
    version: Version,
    size: u64,
    modified: (i64, u32),
    data: Bytes,
}

impl Entry {
    fn current(&self, stx: &Statx) -> bool {
        self.identity == Identity::of(stx)
            && self.version == Version::of(stx)
            && self.size == stx.stx_size
            && self.modified == (stx.stx_mtime.tv_sec, stx.stx_mtime.tv_nsec)
    }
}

/// A copy served from the cache, with the `statx` that showed it current.
#[derive(Debug)]
pub struct Hit {
    /// The metadata of the file now.
    pub stx: Statx,
    /// The whole file.
    pub data: Bytes,
}

/// What an entry costs against the cache's bound: its data, its path and a fixed overhead.
#[derive(Clone, Copy, Debug)]
struct EntryWeight;

impl quick_cache::Weighter<VolumePath, Arc<Entry>> for EntryWeight {
    fn weight(&self, path: &VolumePath, entry: &Arc<Entry>) -> u64 {
        (entry.data.len() + path.as_str().len() + ENTRY_OVERHEAD_BYTES) as u64
    }
}

/// The cache of one volume.
#[derive(Clone)]
pub struct FileCache {
    entries: Option<Arc<quick_cache::sync::Cache<VolumePath, Arc<Entry>, EntryWeight>>>,
}

impl std::fmt::Debug for FileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCache")
            .field("entries", &self.entries.as_ref().map(|e| e.len()))
            .finish()
    }
}

impl FileCache {
    /// A cache bounded at `capacity_bytes`; 0 keeps nothing.
    pub fn new(capacity_bytes: u64) -> Self {
        LazyLock::force(&HITS);
        LazyLock::force(&MISSES);
        let entries = (capacity_bytes > 0).then(|| {
            let estimated_entries = (capacity_bytes / 4096).clamp(16, 65_536) as usize;
            Arc::new(quick_cache::sync::Cache::with_weighter(
                estimated_entries,
                capacity_bytes,
                EntryWeight,
            ))
        });
        Self { entries }
    }

    /// The whole of the file at `path`, if a copy is kept and a `statx` of the path
    /// beneath `root` shows it current (counted as a hit).
    pub fn get(&self, root: impl AsFd, path: &VolumePath) -> Option<Hit> {
        let entry = self.entries.as_ref()?.get(path)?;
        let stx = rustix::fs::statx(root, path.as_str(), AtFlags::empty(), crate::metadata::WANTED).ok()?;
        entry.current(&stx).then(|| {
            HITS.inc();
            Hit {
                stx,
                data: entry.data.clone(),
            }
        })
    }

    /// Counts a miss: a file the cache would keep was read from the volume.
    pub fn missed(&self) {
        MISSES.inc();
    }

    /// Whether a file of `size` bytes would be kept.
    pub fn wants(&self, size: u64) -> bool {
        self.entries.is_some() && size <= MAX_FILE_BYTES
    }

    /// Keeps `data`, the whole file at `path` as read after `read_began` from the inode
    /// `stx` (the `statx` of the open file, made before the read), if its ctime had
    /// settled by then.
    pub fn insert(&self, path: &VolumePath, stx: &Statx, read_began: SystemTime, data: Bytes) {
        let Some(entries) = &self.entries else { return };
        let version = Version::of(stx);
        if data.len() as u64 != stx.stx_size
            || !self.wants(stx.stx_size)
            || !version.settled_before(read_began)
        {
            return;
        }
        entries.insert(
            path.clone(),
            Arc::new(Entry {
                identity: Identity::of(stx),
                version,
                size: stx.stx_size,
                modified: (stx.stx_mtime.tv_sec, stx.stx_mtime.tv_nsec),
                data,
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::validity::{SETTLED, stat_path};

    fn root(dir: &std::path::Path) -> std::fs::File {
        std::fs::File::open(dir).unwrap()
    }

    /// A time at which every change made so far has settled.
    fn later() -> SystemTime {
        SystemTime::now() + SETTLED * 2
    }

    #[test]
    fn serves_a_kept_copy_while_the_file_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"one").unwrap();
        let path = VolumePath::parse("f").unwrap();
        let cache = FileCache::new(1 << 20);
        assert!(cache.get(root(dir.path()), &path).is_none(), "nothing kept yet");
        cache.insert(
            &path,
            &stat_path(&dir.path().join("f")),
            later(),
            Bytes::from_static(b"one"),
        );
        let hit = cache.get(root(dir.path()), &path).expect("kept and unchanged");
        assert_eq!(&hit.data[..], b"one");
        assert_eq!(hit.stx.stx_size, 3);
    }

    #[test]
    fn a_replaced_or_rewritten_file_misses() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"one").unwrap();
        let path = VolumePath::parse("f").unwrap();
        let cache = FileCache::new(1 << 20);

        // Replaced by rename, as kubedav's own PUT does: another inode.
        cache.insert(&path, &stat_path(&file), later(), Bytes::from_static(b"one"));
        std::fs::write(dir.path().join("new"), b"two").unwrap();
        std::fs::rename(dir.path().join("new"), &file).unwrap();
        assert!(cache.get(root(dir.path()), &path).is_none());

        // Rewritten in place with the same length, by something else: a new ctime.
        cache.insert(&path, &stat_path(&file), later(), Bytes::from_static(b"two"));
        std::fs::write(&file, b"333").unwrap();
        assert!(cache.get(root(dir.path()), &path).is_none());

        // Replaced by a symlink to the same content elsewhere: the path leads to
        // another inode.
        cache.insert(&path, &stat_path(&file), later(), Bytes::from_static(b"333"));
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"333").unwrap();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), &file).unwrap();
        assert!(cache.get(root(dir.path()), &path).is_none());
    }

    #[test]
    fn keeps_only_whole_small_files_whose_change_had_settled() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"abc").unwrap();
        let path = VolumePath::parse("f").unwrap();
        let cache = FileCache::new(1 << 20);
        cache.insert(
            &path,
            &stat_path(&file),
            SystemTime::now(),
            Bytes::from_static(b"abc"),
        );
        assert!(
            cache.get(root(dir.path()), &path).is_none(),
            "just written: not settled"
        );
        cache.insert(&path, &stat_path(&file), later(), Bytes::from_static(b"ab"));
        assert!(cache.get(root(dir.path()), &path).is_none(), "a part of the file");

        let big = vec![7u8; MAX_FILE_BYTES as usize + 1];
        std::fs::write(&file, &big).unwrap();
        cache.insert(&path, &stat_path(&file), later(), Bytes::from(big));
        assert!(cache.get(root(dir.path()), &path).is_none(), "too big");

        let off = FileCache::new(0);
        std::fs::write(&file, b"abc").unwrap();
        off.insert(&path, &stat_path(&file), later(), Bytes::from_static(b"abc"));
        assert!(off.get(root(dir.path()), &path).is_none(), "turned off");
    }
}
