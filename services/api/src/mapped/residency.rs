//! A memo of file ranges found wholly in the page cache, so that a file sent again and
//! again is checked with `cachestat(2)` once per [`TRUSTED_FOR`], not once per GET.
//!
//! `cachestat` walks the file's cache folio by folio. A file that came into the cache
//! by being read from the disk, or written in small pieces, is held in small folios:
//! then the walk costs about 5–7 µs per MiB on the benchmark machine, about a twentieth
//! of everything a GET of a 1 MiB file costs kubedav (docs/benchmarks.md). Pages leave
//! the cache only when the kernel evicts them, and it evicts the least recently used
//! first: a file sent within the last second is the last it would take. If it does,
//! the cost is one `sendfile` that waits for the disk on an async worker, which nginx
//! accepts on every GET; never wrong data.

use rustix::fs::Statx;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a range found wholly cached is trusted to stay so.
pub const TRUSTED_FOR: Duration = Duration::from_secs(1);

/// The most ranges remembered: beyond it the expired ones are dropped, and all of them
/// if none had expired.
const MOST_REMEMBERED: usize = 4096;

/// Which state of which file a range belongs to: the inode, its size and its change
/// time. A file replaced or changed is another version, checked afresh.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileVersion {
    device: (u32, u32),
    inode: u64,
    size: u64,
    changed: (i64, u32),
}

impl FileVersion {
    /// The version `stx` describes.
    pub fn of(stx: &Statx) -> Self {
        Self {
            device: (stx.stx_dev_major, stx.stx_dev_minor),
            inode: stx.stx_ino,
            size: stx.stx_size,
            changed: (stx.stx_ctime.tv_sec, stx.stx_ctime.tv_nsec),
        }
    }
}

/// A range of one version of a file: the version, the offset and the length.
type Range = (FileVersion, u64, usize);

/// When each range was last found wholly cached.
#[derive(Default)]
struct Memo {
    found: HashMap<Range, Instant>,
}

impl Memo {
    fn trusted(&self, range: &Range, now: Instant) -> bool {
        self.found
            .get(range)
            .is_some_and(|at| now.saturating_duration_since(*at) < TRUSTED_FOR)
    }

    fn found_cached(&mut self, range: Range, now: Instant) {
        if self.found.len() >= MOST_REMEMBERED {
            self.found
                .retain(|_, at| now.saturating_duration_since(*at) < TRUSTED_FOR);
            if self.found.len() >= MOST_REMEMBERED {
                self.found.clear();
            }
        }
        self.found.insert(range, now);
    }
}

static MEMO: Mutex<Option<Memo>> = Mutex::new(None);

/// Whether `len` bytes from `offset` of `version` were found wholly cached within the
/// last [`TRUSTED_FOR`].
pub fn trusted(version: FileVersion, offset: u64, len: usize) -> bool {
    let memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    memo.as_ref()
        .is_some_and(|memo| memo.trusted(&(version, offset, len), Instant::now()))
}

/// Remembers that `len` bytes from `offset` of `version` are wholly cached now.
pub fn found_cached(version: FileVersion, offset: u64, len: usize) {
    let mut memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    memo.get_or_insert_with(Memo::default)
        .found_cached((version, offset, len), Instant::now());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(inode: u64) -> FileVersion {
        FileVersion {
            device: (8, 1),
            inode,
            size: 1 << 20,
            changed: (1_700_000_000, 5),
        }
    }

    #[test]
    fn a_range_found_cached_is_trusted_only_as_found_and_for_a_second() {
        let (mut memo, now) = (Memo::default(), Instant::now());
        let v = version(7);
        assert!(!memo.trusted(&(v, 0, 4096), now), "never found");
        memo.found_cached((v, 0, 4096), now);
        assert!(memo.trusted(&(v, 0, 4096), now + TRUSTED_FOR / 2));
        assert!(!memo.trusted(&(v, 0, 4096), now + TRUSTED_FOR), "too long ago");
        assert!(!memo.trusted(&(v, 4096, 4096), now), "another range");
        assert!(!memo.trusted(&(v, 0, 8192), now), "a longer range");
        let changed = FileVersion {
            changed: (1_700_000_001, 5),
            ..v
        };
        assert!(!memo.trusted(&(changed, 0, 4096), now), "the file changed since");
    }

    #[test]
    fn the_memo_stays_bounded_and_drops_the_expired_first() {
        let (mut memo, now) = (Memo::default(), Instant::now());
        for inode in 0..MOST_REMEMBERED as u64 - 1 {
            memo.found_cached((version(inode), 0, 1), now);
        }
        let later = now + TRUSTED_FOR;
        memo.found_cached((version(u64::MAX), 0, 1), later);
        memo.found_cached((version(u64::MAX - 1), 0, 1), later);
        assert_eq!(memo.found.len(), 2, "the expired ones went");
        assert!(memo.trusted(&(version(u64::MAX), 0, 1), later));
        for inode in 0..2 * MOST_REMEMBERED as u64 {
            memo.found_cached((version(inode), 0, 1), later);
            assert!(memo.found.len() <= MOST_REMEMBERED);
        }
    }

    #[test]
    fn the_process_memo_answers() {
        let v = version(u64::MAX - 7);
        assert!(!trusted(v, 0, 1));
        found_cached(v, 0, 1);
        assert!(trusted(v, 0, 1));
    }
}
