//! When a copy of something read from the volume is still current: the validators the
//! caches of fileio ([`crate::cache::property`], [`crate::cache::file`]) keep with each copy and
//! compare with a fresh `statx`.
//!
//! The argument: any change of an inode's data, attributes or extended attributes sets
//! its change time (ctime) to the current time, and a rename or a new file gives another
//! inode (or the same number with another birth time). A copy is kept only when the
//! ctime it was read under was at least [`SETTLED`] older than the moment the read
//! began, so a change made at any later moment gives a ctime that differs from the kept
//! one, however coarse the filesystem's timestamps are. A `statx` showing the same
//! device, inode, birth time and ctime therefore describes what was read.

use rustix::fs::{Statx, StatxFlags};
use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How much older than the start of a read a ctime must be for the read to be kept:
/// well above any filesystem's timestamp granularity (a jiffy, at most 10 ms).
pub const SETTLED: Duration = Duration::from_secs(1);

/// Which inode a `statx` describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    dev_major: u32,
    dev_minor: u32,
    ino: u64,
}

impl Identity {
    /// The inode of `stx`.
    pub fn of(stx: &Statx) -> Self {
        Self {
            dev_major: stx.stx_dev_major,
            dev_minor: stx.stx_dev_minor,
            ino: stx.stx_ino,
        }
    }
}

/// The state of an inode a `statx` describes: its birth time (zero where the filesystem
/// keeps none) and its change time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    birth: (i64, u32),
    change: (i64, u32),
}

impl Version {
    /// The state `stx` shows.
    pub fn of(stx: &Statx) -> Self {
        let birth = if stx.stx_mask & StatxFlags::BTIME.bits() != 0 {
            (stx.stx_btime.tv_sec, stx.stx_btime.tv_nsec)
        } else {
            (0, 0)
        };
        Self {
            birth,
            change: (stx.stx_ctime.tv_sec, stx.stx_ctime.tv_nsec),
        }
    }

    /// Whether a read that began at `read_began`, of the inode in this state, may be
    /// kept: its ctime was [`SETTLED`] by then.
    pub fn settled_before(&self, read_began: SystemTime) -> bool {
        let (secs, nanos) = self.change;
        let Ok(secs) = u64::try_from(secs) else {
            return false;
        };
        UNIX_EPOCH + Duration::new(secs, nanos) + SETTLED <= read_began
    }
}

/// The validator of a file's metadata (`FileInfo.validator` of fileio's contract): the
/// inode's identity and [`Version`], if its change time had [`SETTLED`] by `before`, a
/// moment before the `statx` that gave `stx`. By the argument above, any change made
/// after that `statx` gives another; so a gateway that finds the same validator later
/// holds the bytes the file still has. Empty when the change time had not settled.
pub fn validator(stx: &Statx, before: SystemTime) -> String {
    let version = Version::of(stx);
    if !version.settled_before(before) {
        return String::new();
    }
    let id = Identity::of(stx);
    let (birth, change) = (version.birth, version.change);
    // Written into room for the longest, not grown piece by piece as `format!` would.
    let mut out = String::with_capacity(96);
    let _ = write!(
        out,
        "{:x}.{:x}.{:x}.{}.{}.{}.{}",
        id.dev_major, id.dev_minor, id.ino, birth.0, birth.1, change.0, change.1
    );
    out
}

/// The `statx` of `path` with the fields the caches compare. For tests.
#[cfg(test)]
pub fn stat_path(path: &std::path::Path) -> Statx {
    rustix::fs::statx(
        rustix::fs::CWD,
        path,
        rustix::fs::AtFlags::empty(),
        crate::metadata::WANTED,
    )
    .unwrap()
}

/// Waits until the filesystem's clock (coarse, at most a tick behind the wall clock) has
/// moved past the ctime `stx` shows, as it has for any change a cache must see: those
/// come at least [`SETTLED`] later. For tests that change an inode right after keeping
/// a copy of it.
#[cfg(test)]
pub fn wait_past_ctime(stx: &Statx) {
    let (secs, nanos) = (stx.stx_ctime.tv_sec as u64, stx.stx_ctime.tv_nsec);
    let ctime = UNIX_EPOCH + Duration::new(secs, nanos);
    while SystemTime::now() < ctime + Duration::from_millis(25) {
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubedav_api::fileio::same_version;

    #[test]
    fn a_change_or_a_new_inode_gives_another_version() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let stx = stat_path(&file);
        let mut changed = stx;
        changed.stx_ctime.tv_nsec = (changed.stx_ctime.tv_nsec + 1) % 1_000_000_000;
        assert_ne!(Version::of(&changed), Version::of(&stx));
        let mut reborn = stx;
        reborn.stx_btime.tv_sec += 1;
        assert_ne!(Version::of(&reborn), Version::of(&stx));
        assert_eq!(Version::of(&stat_path(&file)), Version::of(&stx));

        let other = dir.path().join("g");
        std::fs::write(&other, b"x").unwrap();
        assert_ne!(Identity::of(&stat_path(&other)), Identity::of(&stx));
    }

    #[test]
    fn two_mounts_see_the_same_version_whatever_their_device_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let later = SystemTime::now() + SETTLED * 2;
        let stx = stat_path(&file);
        let here = validator(&stx, later);
        let mut elsewhere = stx;
        elsewhere.stx_dev_major += 1;
        elsewhere.stx_dev_minor += 7;
        let there = validator(&elsewhere, later);
        assert_ne!(here, there, "the device is part of the validator");
        assert!(same_version(&here, &there));
        let mut changed = stx;
        changed.stx_ctime.tv_nsec = (changed.stx_ctime.tv_nsec + 1) % 1_000_000_000;
        assert!(!same_version(&here, &validator(&changed, later)));
        let mut other = stx;
        other.stx_ino += 1;
        assert!(!same_version(&here, &validator(&other, later)));
        assert!(!same_version("", ""), "no validator names nothing");
        assert!(!same_version("1.2", "1.2"));
    }

    #[test]
    fn only_a_change_a_second_before_the_read_has_settled() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let version = Version::of(&stat_path(&file));
        assert!(!version.settled_before(SystemTime::now()), "just written");
        assert!(version.settled_before(SystemTime::now() + SETTLED * 2));
    }

    #[test]
    fn a_validator_is_given_once_settled_and_changes_with_any_change() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let later = SystemTime::now() + SETTLED * 2;
        let stx = stat_path(&file);
        assert_eq!(validator(&stx, SystemTime::now()), "", "not settled yet");
        let given = validator(&stx, later);
        assert!(!given.is_empty());
        assert_eq!(validator(&stat_path(&file), later), given, "unchanged");
        wait_past_ctime(&stx);
        // Same size, same modification time: only the change time tells.
        let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::fs::write(&file, b"y").unwrap();
        let handle = std::fs::File::options().write(true).open(&file).unwrap();
        handle.set_modified(modified).unwrap();
        let rewritten = stat_path(&file);
        assert_ne!(validator(&rewritten, SystemTime::now() + SETTLED * 2), given);
    }
}
