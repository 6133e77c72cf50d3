//! Paths resolved beneath the root before, with the inode each led to: a Depth 0 lookup
//! or a `Stat` of such a path needs one `statx` of it instead of `openat2`, `statx` and
//! `close`.
//!
//! A path is resolved beneath the root in the kernel (`openat2` with `RESOLVE_BENEATH`),
//! which costs a file descriptor and its `close`: 11 % of the CPU of a PROPFIND Depth 0
//! under load (docs/benchmarks.md). This cache remembers, for a path resolved that way,
//! the inode it led to and that inode's state ([`crate::cache::validity`]). A later lookup makes
//! one `statx` of the path relative to the root; if it shows the very inode, in the same
//! state (same birth and change times), the path still leads where the confined
//! resolution led, and that `statx` answers. Anything else (another inode, a changed one,
//! a path that now goes through a symlink out of the root and ends elsewhere, an error)
//! misses and takes the confined path, which refuses what it must. This is the argument
//! of the small-file cache ([`crate::cache::file`]), which serves file contents the same way.
//!
//! What a hit does not check is the route: if a directory on the path is moved out of the
//! root by someone outside kubedav and a symlink to it put in its place, a member's
//! unchanged inode is still found, and its metadata still answered, until that member
//! changes. It is what the same request showed a moment before the move; nothing written
//! or read since the move is answered from outside the root.
//!
//! An entry is kept only when the inode's change time had settled before the lookup
//! began, so a change at any later moment shows another change time.

use crate::cache::validity::{Identity, Version};
use kubedav_api::path::VolumePath;
use kubedav_metrics::Counter;
use rustix::fd::AsFd;
use rustix::fs::{AtFlags, Statx};
use std::sync::LazyLock;
use std::time::SystemTime;

/// The two series, looked up once (a label lookup hashes and takes a lock).
static HITS: LazyLock<Counter> = LazyLock::new(|| kubedav_metrics::cache_lookups("fileio_resolved", "hit"));
static MISSES: LazyLock<Counter> =
    LazyLock::new(|| kubedav_metrics::cache_lookups("fileio_resolved", "miss"));

/// How many paths are remembered (a path and two small keys each).
const CAPACITY: usize = 16 * 1024;

/// Paths and the inode, in its state, each resolved to beneath the root. Clones share
/// the entries.
#[derive(Clone)]
pub struct ResolvedPaths {
    entries: std::sync::Arc<quick_cache::sync::Cache<VolumePath, (Identity, Version)>>,
}

impl std::fmt::Debug for ResolvedPaths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedPaths")
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl Default for ResolvedPaths {
    fn default() -> Self {
        Self::new()
    }
}

impl ResolvedPaths {
    /// An empty cache.
    pub fn new() -> Self {
        LazyLock::force(&HITS);
        LazyLock::force(&MISSES);
        Self {
            entries: std::sync::Arc::new(quick_cache::sync::Cache::new(CAPACITY)),
        }
    }

    /// The `statx` of `path` if it still leads to the inode, in the state, it was resolved
    /// to beneath the root; `None` to resolve it again. The root itself is never kept.
    pub fn current(&self, root: impl AsFd, path: &VolumePath) -> Option<Statx> {
        if path.is_root() {
            return None;
        }
        let current = self.entries.get(path).and_then(|(identity, version)| {
            let stx =
                rustix::fs::statx(root, path.as_str(), AtFlags::empty(), crate::metadata::WANTED).ok()?;
            (Identity::of(&stx) == identity && Version::of(&stx) == version).then_some(stx)
        });
        if current.is_some() { &HITS } else { &MISSES }.inc();
        current
    }

    /// Remembers that `path`, resolved beneath the root by a lookup that began at
    /// `began`, led to the inode `stx` describes, if its change time had settled by then.
    pub fn insert(&self, path: &VolumePath, stx: &Statx, began: SystemTime) {
        let version = Version::of(stx);
        if path.is_root() || !version.settled_before(began) {
            return;
        }
        self.entries.insert(path.clone(), (Identity::of(stx), version));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::validity::{stat_path, wait_past_ctime};
    use std::time::Duration;

    fn volume() -> (tempfile::TempDir, std::fs::File) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::File::open(dir.path()).unwrap();
        (dir, root)
    }

    fn path(wire: &str) -> VolumePath {
        VolumePath::parse(wire).unwrap()
    }

    /// As if the lookup began a while after the file's last change.
    fn later() -> SystemTime {
        SystemTime::now() + Duration::from_secs(2)
    }

    #[test]
    fn a_path_still_leading_to_the_same_unchanged_inode_is_current() {
        let (dir, root) = volume();
        std::fs::write(dir.path().join("f"), b"one").unwrap();
        let cache = ResolvedPaths::new();
        let stx = stat_path(&dir.path().join("f"));
        cache.insert(&path("f"), &stx, later());
        let now = cache.current(&root, &path("f")).expect("unchanged");
        assert_eq!(now.stx_ino, stx.stx_ino);
    }

    #[test]
    fn a_change_a_replacement_or_a_symlink_out_of_the_root_misses() {
        let (dir, root) = volume();
        let file = dir.path().join("f");
        std::fs::write(&file, b"one").unwrap();
        let cache = ResolvedPaths::new();
        let stx = stat_path(&file);
        cache.insert(&path("f"), &stx, later());
        wait_past_ctime(&stx);
        std::fs::write(&file, b"two").unwrap();
        assert!(cache.current(&root, &path("f")).is_none(), "changed in place");

        let stx = stat_path(&file);
        cache.insert(&path("f"), &stx, later());
        std::fs::write(dir.path().join("g"), b"other").unwrap();
        std::fs::rename(dir.path().join("g"), &file).unwrap();
        assert!(cache.current(&root, &path("f")).is_none(), "replaced by rename");

        let stx = stat_path(&file);
        cache.insert(&path("f"), &stx, later());
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"x").unwrap();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), &file).unwrap();
        assert!(
            cache.current(&root, &path("f")).is_none(),
            "a symlink out of the root"
        );
    }

    #[test]
    fn a_lookup_right_after_a_change_is_not_kept() {
        let (dir, root) = volume();
        std::fs::write(dir.path().join("f"), b"one").unwrap();
        let cache = ResolvedPaths::new();
        cache.insert(&path("f"), &stat_path(&dir.path().join("f")), SystemTime::now());
        assert!(cache.current(&root, &path("f")).is_none());
    }
}
