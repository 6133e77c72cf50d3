//! Temporary files left by uploads that never finished because their process died
//! (killed, crashed, node lost), and the staged or replaced trees of COPYs that never
//! finished (`transfer.rs`), found and removed when fileio starts.
//!
//! Every upload holds an exclusive `flock` on its temporary file for as long as it runs
//! (`write.rs`), and the kernel releases it when the process dies, however it dies. The
//! sweep removes a temporary file only if it can take that lock itself, so the uploads of
//! another live fileio process on the same volume (replicas on shared storage) are left
//! alone; and only files whose last change is older than this process, so an upload that
//! has just created its file but not yet locked it is never mistaken for an orphan.
//! Symlinks are never followed.

use kubedav_api::path::RESERVED_PREFIX;
use prometheus::{IntCounter, register_int_counter};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Dir, FileType, FlockOperation, Mode, OFlags};
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

static REMOVED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "kubedav_fileio_orphaned_uploads_removed_total",
        "Temporary files of uploads whose process died, removed when fileio started."
    )
    .expect("metric registers once")
});

/// How much earlier than the precise clock a file's change time may read. The kernel
/// stamps files from its coarse clock, which lags by up to a tick (1 to 10 ms), so an
/// upload this process starts right after `started` can carry a change time just
/// *before* it, and would be taken for an orphan in the moment before it locks its file.
/// A file changed in the second before this process started is left to the next start.
const CLOCK_SLACK: Duration = Duration::from_secs(1);

/// Removes the orphaned temporary files under `root` changed before `started` (less
/// [`CLOCK_SLACK`]); returns how many were removed. Directories that cannot be read are
/// skipped.
pub fn sweep(root: &OwnedFd, started: SystemTime) -> usize {
    LazyLock::force(&REMOVED);
    let started = started.checked_sub(CLOCK_SLACK).unwrap_or(UNIX_EPOCH);
    let mut removed = 0;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(first) = rustix::fs::openat(root, ".", flags, Mode::empty()) else {
        return 0;
    };
    let mut pending = vec![first];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = Dir::read_from(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if name == "." || name == ".." {
                continue;
            }
            if name.starts_with(RESERVED_PREFIX) && entry.file_type() == FileType::Directory {
                if remove_tree_if_orphaned(&dir, name, started) {
                    removed += 1;
                    REMOVED.inc();
                }
            } else if name.starts_with(RESERVED_PREFIX) {
                if remove_if_orphaned(&dir, name, started) {
                    removed += 1;
                    REMOVED.inc();
                }
            } else if entry.file_type() == FileType::Directory
                && let Ok(child) = rustix::fs::openat(&dir, name, flags, Mode::empty())
            {
                pending.push(child);
            }
        }
    }
    removed
}

/// Removes the hidden directory `name` (a COPY's staged tree, or a replaced one) unless
/// a live copy holds its lock or it changed after this process started.
fn remove_tree_if_orphaned(dir: &OwnedFd, name: &str, started: SystemTime) -> bool {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(tree) = rustix::fs::openat(dir, name, flags, Mode::empty()) else {
        return false;
    };
    let Ok(stx) = rustix::fs::statx(
        &tree,
        "",
        AtFlags::EMPTY_PATH,
        rustix::fs::StatxFlags::BASIC_STATS,
    ) else {
        return false;
    };
    if changed_at(&stx) >= started
        || rustix::fs::flock(&tree, FlockOperation::NonBlockingLockExclusive).is_err()
    {
        return false;
    }
    let path = kubedav_api::path::VolumePath::default();
    matches!(crate::tree::remove_entry(dir, name, &path, &stx), Ok(failures) if failures.is_empty())
}

fn changed_at(stx: &rustix::fs::Statx) -> SystemTime {
    u64::try_from(stx.stx_ctime.tv_sec)
        .map(|secs| UNIX_EPOCH + Duration::new(secs, stx.stx_ctime.tv_nsec))
        .unwrap_or(UNIX_EPOCH)
}

fn remove_if_orphaned(dir: &OwnedFd, name: &str, started: SystemTime) -> bool {
    let Ok(stx) = rustix::fs::statx(
        dir,
        name,
        AtFlags::SYMLINK_NOFOLLOW,
        rustix::fs::StatxFlags::BASIC_STATS,
    ) else {
        return false;
    };
    if changed_at(&stx) >= started || FileType::from_raw_mode(stx.stx_mode.into()) != FileType::RegularFile {
        return false;
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let Ok(file) = rustix::fs::openat(dir, name, flags, Mode::empty()) else {
        return false;
    };
    if rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
        return false; // a live upload holds it
    }
    rustix::fs::unlinkat(dir, name, AtFlags::empty()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_root(path: &std::path::Path) -> OwnedFd {
        rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
    }

    #[test]
    fn removes_only_unlocked_temporary_files_older_than_the_process() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let orphan = dir
            .path()
            .join("sub")
            .join(format!("{RESERVED_PREFIX}0000000000000001"));
        let live = dir.path().join(format!("{RESERVED_PREFIX}0000000000000002"));
        let keep = dir.path().join("sub").join("data.txt");
        for file in [&orphan, &live, &keep] {
            std::fs::write(file, b"x").unwrap();
        }
        let held = std::fs::File::open(&live).unwrap();
        rustix::fs::flock(&held, FlockOperation::NonBlockingLockExclusive).unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);

        // Files changed after the process started are someone's upload being set up.
        assert_eq!(sweep(&open_root(dir.path()), UNIX_EPOCH), 0);
        assert_eq!(sweep(&open_root(dir.path()), later), 1);
        assert!(!orphan.exists(), "the orphan is gone");
        assert!(live.exists(), "a locked upload is left alone");
        assert!(keep.exists(), "other files are never touched");
        drop(held);
        assert_eq!(
            sweep(&open_root(dir.path()), later),
            1,
            "unlocked, it is an orphan too"
        );
    }

    #[test]
    /// A file's change time comes from the kernel's coarse clock: an upload begun just
    /// after the process started may look a few milliseconds older than the process, and
    /// must not be swept before it takes its lock. (It was: a PUT right after fileio
    /// started could answer 404, its temporary file gone before the rename.)
    fn an_upload_just_begun_is_not_taken_for_an_orphan() {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("{RESERVED_PREFIX}0000000000000001");
        std::fs::write(dir.path().join(&name), b"begun").unwrap();
        let started_just_after = SystemTime::now() + Duration::from_millis(50);
        assert_eq!(sweep(&open_root(dir.path()), started_just_after), 0);
        assert!(dir.path().join(&name).exists());
    }

    #[test]
    fn removes_the_trees_of_copies_that_never_finished() {
        let dir = tempfile::tempdir().unwrap();
        let orphan = dir.path().join(format!("{RESERVED_PREFIX}copy-0000000000000001"));
        let live = dir.path().join(format!("{RESERVED_PREFIX}copy-0000000000000002"));
        for tree in [&orphan, &live] {
            std::fs::create_dir_all(tree.join("sub")).unwrap();
            std::fs::write(tree.join("sub").join("f.txt"), b"x").unwrap();
        }
        let held = std::fs::File::open(&live).unwrap();
        rustix::fs::flock(&held, FlockOperation::NonBlockingLockExclusive).unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);
        assert_eq!(sweep(&open_root(dir.path()), later), 1);
        assert!(!orphan.exists(), "the abandoned copy is gone");
        assert!(
            live.join("sub").join("f.txt").exists(),
            "a copy in progress is left alone"
        );
    }
}
