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

use kubedav_api::path::TEMPORARY_PREFIX;
use kubedav_metrics::Counter;
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Dir, FileType, FlockOperation, Mode, OFlags};
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

static REMOVED: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter(
        "kubedav_fileio_orphaned_uploads_removed_total",
        "Temporary files of uploads whose process died, removed when fileio started.",
    )
});

/// The time of the file system's own clock, read from a file made and removed under
/// `root`: the moment this process starts, as the change times of the files it makes
/// will read. The kernel stamps files from its coarse clock, which lags the precise clock
/// by up to a tick (1 to 10 ms), so an upload begun right after a start read from
/// `SystemTime::now()` could look older than the process in the moment before it locks
/// its file, and be swept (a PUT answered 404). `None` on a read-only volume, which has
/// no uploads to protect.
pub fn filesystem_now(root: &OwnedFd) -> Option<SystemTime> {
    let name = format!("{TEMPORARY_PREFIX}clock-{:016x}", fastrand::u64(..));
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let file = rustix::fs::openat(root, name.as_str(), flags, Mode::from_raw_mode(0o600)).ok()?;
    let stx = rustix::fs::statx(
        &file,
        "",
        AtFlags::EMPTY_PATH,
        rustix::fs::StatxFlags::BASIC_STATS,
    );
    let _ = rustix::fs::unlinkat(root, name.as_str(), AtFlags::empty());
    stx.ok().map(|stx| changed_at(&stx))
}

/// Removes the orphaned temporary files under `root` changed before `started` (best
/// read with [`filesystem_now`]); returns how many were removed. Directories that cannot
/// be read are skipped.
pub fn sweep(root: &OwnedFd, started: SystemTime) -> usize {
    LazyLock::force(&REMOVED);
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
            if name.starts_with(TEMPORARY_PREFIX) && entry.file_type() == FileType::Directory {
                if remove_tree_if_orphaned(&dir, name, started) {
                    removed += 1;
                    REMOVED.inc();
                }
            } else if name.starts_with(TEMPORARY_PREFIX) {
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

/// Removes the regular files of `dir` (not of its folders) that no writer holds and that
/// nothing changed since `unchanged_since`; returns how many went. Used for the incoming
/// area (`crate::incoming`), whose files are named by gateways.
pub(crate) fn sweep_folder(dir: &OwnedFd, unchanged_since: SystemTime) -> usize {
    let Ok(entries) = Dir::read_from(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| entry.file_type() == FileType::RegularFile)
        .filter_map(|entry| entry.file_name().to_str().ok().map(str::to_owned))
        .filter(|name| remove_if_orphaned(dir, name, unchanged_since))
        .count()
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
    // Open for writing: NFS emulates flock with byte-range locks, which an exclusive lock
    // takes only on a descriptor open for writing.
    let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
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
            .join(format!("{TEMPORARY_PREFIX}0000000000000001"));
        let live = dir.path().join(format!("{TEMPORARY_PREFIX}0000000000000002"));
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
    /// A file's change time comes from the kernel's coarse clock, a tick behind
    /// `SystemTime::now()`: read from that clock, a start is never later than the files
    /// made after it, so an upload begun just after fileio started is not taken for an
    /// orphan. (Read from `SystemTime::now()` it was, and the PUT answered 404.)
    fn files_made_after_the_start_never_read_older_than_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = open_root(dir.path());
        for i in 0..200 {
            let started = filesystem_now(&root).unwrap();
            let name = format!("{TEMPORARY_PREFIX}{i:016x}");
            std::fs::write(dir.path().join(&name), b"begun").unwrap();
            let stx = rustix::fs::statx(
                &root,
                name.as_str(),
                AtFlags::empty(),
                rustix::fs::StatxFlags::BASIC_STATS,
            )
            .unwrap();
            assert!(
                changed_at(&stx) >= started,
                "upload {i} looks older than the start"
            );
        }
        assert_eq!(
            sweep(&root, filesystem_now(&root).unwrap() - Duration::from_secs(60)),
            0
        );
        let left = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(left, 200, "and the clock's own file is gone");
    }

    #[test]
    fn removes_the_trees_of_copies_that_never_finished() {
        let dir = tempfile::tempdir().unwrap();
        let orphan = dir
            .path()
            .join(format!("{TEMPORARY_PREFIX}copy-0000000000000001"));
        let live = dir
            .path()
            .join(format!("{TEMPORARY_PREFIX}copy-0000000000000002"));
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
