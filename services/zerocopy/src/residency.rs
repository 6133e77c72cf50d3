//! A memo of the mappings of whole files (or of the chunks a whole file is sent in) found
//! wholly in the page cache, kept for a second, so that a file sent again and again is
//! checked with `cachestat(2)` and mapped once per [`TRUSTED_FOR`], not once per GET.
//!
//! `cachestat` walks the file's cache folio by folio. A file that came into the cache
//! by being read from the disk, or written in small pieces, is held in small folios:
//! then the walk costs about 5–7 µs per MiB on the benchmark machine. `mmap` and
//! `munmap` of the range cost about 7 µs more. Together that is about a tenth of all a
//! GET of a 1 MiB file costs kubedav (docs/benchmarks.md).
//!
//! - **Eviction.** Pages leave the cache only when the kernel evicts them, and it evicts
//!   the least recently used first: a file sent within the last second is the last it
//!   would take. If it does, one `sendfile` waits for the disk on an async worker, which
//!   nginx accepts on every GET; the data is never wrong.
//! - **Open files.** A kept mapping keeps its file open. So it expires [`TRUSTED_FOR`]
//!   after the file was found cached, a thread drops the expired ones even when
//!   no request comes (the space of a file deleted meanwhile is freed within two
//!   seconds), and at most [`MOST_KEPT`] are kept.
//! - **Versions.** A mapping is kept for one version of the file: the inode, its size
//!   and its change time. A request that finds the file replaced or changed maps it
//!   afresh.
//! - **Whole files, and the chunks of files sent whole**: what repeats is a file sent
//!   whole again and again. A file of up to [`super::MAX_MAPPED_BYTES`] is one mapping;
//!   one of up to [`KEPT_IN_CHUNKS_UP_TO`] is sent in chunks of that size from its start,
//!   and each is kept (a 10 MiB file spent 5 % of a GET's CPU in `cachestat` of its
//!   chunks, docs/benchmarks.md). Not the chunks of larger files, nor a client's ranges,
//!   which would only crowd the small files out.

use bytes::Bytes;
use rustix::fs::Statx;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a file found wholly cached is trusted to stay so, and its mapping kept.
const TRUSTED_FOR: Duration = Duration::from_secs(1);

/// The most mappings kept at once (each keeps its file open).
const MOST_KEPT: usize = 64;

/// The largest file whose chunks are kept (four chunks): a larger one is a download too
/// long to repeat within [`TRUSTED_FOR`], and its chunks would crowd out the small files.
const KEPT_IN_CHUNKS_UP_TO: u64 = 4 * super::MAX_MAPPED_BYTES as u64;

/// Which state of which file a mapping shows: the inode, its size and its change time.
/// A file replaced or changed is another version, checked afresh.
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

    /// Whether `len` bytes from `offset` are worth keeping: one of the chunks a read of
    /// the whole version is sent in (of [`super::MAX_MAPPED_BYTES`] from the start, the
    /// last one shorter; a smaller file is one), when the file is at most
    /// [`KEPT_IN_CHUNKS_UP_TO`]. Never more than one mapping, so what is kept under an
    /// offset is the one range from it that a caller may ask for.
    fn is_worth_keeping(&self, offset: u64, len: usize) -> bool {
        let chunk = super::MAX_MAPPED_BYTES as u64;
        self.size <= KEPT_IN_CHUNKS_UP_TO
            && offset.is_multiple_of(chunk)
            && offset < self.size
            && len as u64 == chunk.min(self.size - offset)
    }
}

/// A mapping of a whole file or of one of its chunks, and when it was found wholly
/// cached.
struct Kept {
    found_at: Instant,
    bytes: Bytes,
}

/// The mappings kept, by the version of the file they show and where they begin in it.
#[derive(Default)]
struct Memo {
    kept: HashMap<(FileVersion, u64), Kept>,
}

impl Memo {
    /// The mapping of `version` from `offset`, if it was found cached less than
    /// [`TRUSTED_FOR`] ago.
    fn get(&self, version: &FileVersion, offset: u64, now: Instant) -> Option<Bytes> {
        let kept = self.kept.get(&(*version, offset))?;
        (now.saturating_duration_since(kept.found_at) < TRUSTED_FOR).then(|| kept.bytes.clone())
    }

    /// Keeps `bytes`, the mapping of `version` from `offset` just found cached, unless
    /// [`MOST_KEPT`] are kept and none has expired.
    fn keep(&mut self, version: FileVersion, offset: u64, bytes: &Bytes, now: Instant) {
        if self.kept.len() >= MOST_KEPT {
            self.drop_expired(now);
            if self.kept.len() >= MOST_KEPT {
                return;
            }
        }
        let bytes = bytes.clone();
        self.kept.insert((version, offset), Kept { found_at: now, bytes });
    }

    fn drop_expired(&mut self, now: Instant) {
        self.kept
            .retain(|_, kept| now.saturating_duration_since(kept.found_at) < TRUSTED_FOR);
    }
}

static MEMO: LazyLock<Mutex<Memo>> = LazyLock::new(Mutex::default);
/// Whether the thread that drops expired mappings runs (it ends when none is kept).
static SWEEPING: AtomicBool = AtomicBool::new(false);

fn memo() -> MutexGuard<'static, Memo> {
    MEMO.lock().unwrap_or_else(|e| e.into_inner())
}

/// The kept mapping of `len` bytes from `offset` of `version`, if they are worth keeping
/// ([`FileVersion::is_worth_keeping`]) and were found wholly cached within the last
/// [`TRUSTED_FOR`].
pub(crate) fn kept(version: FileVersion, offset: u64, len: usize) -> Option<Bytes> {
    if !version.is_worth_keeping(offset, len) {
        return None;
    }
    memo().get(&version, offset, Instant::now())
}

/// Keeps `bytes`, a mapping of `len` bytes from `offset` of `version`, which are wholly
/// cached now, if they are worth keeping: the whole file, or a chunk of a small enough
/// file sent whole ([`FileVersion::is_worth_keeping`]).
pub(crate) fn keep(version: FileVersion, offset: u64, len: usize, bytes: &Bytes) {
    if !version.is_worth_keeping(offset, len) {
        return;
    }
    memo().keep(version, offset, bytes, Instant::now());
    if !SWEEPING.swap(true, Ordering::AcqRel) {
        let spawned = std::thread::Builder::new()
            .name("kubedav-mappings".into())
            .spawn(sweep);
        if spawned.is_err() {
            SWEEPING.store(false, Ordering::Release);
        }
    }
}

/// Drops the expired mappings every [`TRUSTED_FOR`] until none is kept.
fn sweep() {
    loop {
        std::thread::sleep(TRUSTED_FOR);
        let mut memo = memo();
        memo.drop_expired(Instant::now());
        if memo.kept.is_empty() {
            // Under the lock: a `keep` after this sees the flag down and starts another.
            SWEEPING.store(false, Ordering::Release);
            return;
        }
    }
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

    fn bytes(n: u8) -> Bytes {
        Bytes::from(vec![n; 8])
    }

    #[test]
    fn a_mapping_is_kept_only_for_its_version_and_for_a_second() {
        let (mut memo, now) = (Memo::default(), Instant::now());
        let v = version(7);
        assert!(memo.get(&v, 0, now).is_none(), "never kept");
        memo.keep(v, 0, &bytes(1), now);
        let got = memo.get(&v, 0, now + TRUSTED_FOR / 2).expect("kept");
        assert_eq!(got, bytes(1));
        assert!(memo.get(&v, 4096, now).is_none(), "kept from another offset");
        assert!(memo.get(&v, 0, now + TRUSTED_FOR).is_none(), "too long ago");
        let changed = FileVersion {
            changed: (1_700_000_001, 5),
            ..v
        };
        assert!(memo.get(&changed, 0, now).is_none(), "the file changed since");
        memo.drop_expired(now + TRUSTED_FOR);
        assert!(memo.kept.is_empty(), "expired, so dropped");
    }

    #[test]
    fn of_a_small_file_only_the_whole_is_worth_keeping() {
        let v = version(7);
        assert!(v.is_worth_keeping(0, 1 << 20));
        assert!(!v.is_worth_keeping(4096, (1 << 20) - 4096), "another range");
        assert!(!v.is_worth_keeping(0, 4096), "a shorter range");
        assert!(!v.is_worth_keeping(0, 2 << 20), "a longer range");
        let large = FileVersion { size: 16 << 20, ..v };
        assert!(!large.is_worth_keeping(0, 16 << 20), "more than one mapping");
    }

    #[test]
    fn the_chunks_of_a_whole_file_of_up_to_four_are_worth_keeping() {
        let chunk = crate::MAX_MAPPED_BYTES;
        let sized = |size: u64| FileVersion { size, ..version(7) };
        let ten_mib = sized(10 << 20);
        assert!(ten_mib.is_worth_keeping(0, chunk), "the first chunk");
        assert!(
            ten_mib.is_worth_keeping(chunk as u64, (10 << 20) - chunk),
            "the last, shorter"
        );
        assert!(
            !ten_mib.is_worth_keeping(chunk as u64, 4096),
            "a range in the last chunk"
        );
        assert!(
            !ten_mib.is_worth_keeping(4096, chunk),
            "a chunk not from a chunk's start"
        );
        assert!(!ten_mib.is_worth_keeping(10 << 20, 0), "nothing past the end");
        let four_chunks = sized(KEPT_IN_CHUNKS_UP_TO);
        assert!(
            four_chunks.is_worth_keeping(3 * chunk as u64, chunk),
            "the fourth of four"
        );
        let larger = sized(KEPT_IN_CHUNKS_UP_TO + 1);
        assert!(
            !larger.is_worth_keeping(0, chunk),
            "a larger file's chunks are not kept"
        );
    }

    #[test]
    fn at_most_so_many_are_kept_and_the_expired_make_room() {
        let (mut memo, now) = (Memo::default(), Instant::now());
        for inode in 0..2 * MOST_KEPT as u64 {
            memo.keep(version(inode), 0, &bytes(0), now);
        }
        assert_eq!(memo.kept.len(), MOST_KEPT);
        assert!(memo.get(&version(0), 0, now).is_some(), "the first stay");
        let later = now + TRUSTED_FOR;
        memo.keep(version(u64::MAX), 0, &bytes(2), later);
        assert_eq!(memo.kept.len(), 1, "the expired ones went");
        assert_eq!(memo.get(&version(u64::MAX), 0, later), Some(bytes(2)));
    }

    #[test]
    fn the_process_memo_keeps_no_part_of_a_small_file_and_its_thread_lets_go() {
        let v = version(u64::MAX - 7);
        let whole = 1 << 20;
        keep(v, 0, 4096, &bytes(4));
        keep(v, 4096, whole - 4096, &bytes(5));
        assert!(kept(v, 0, 4096).is_none(), "a part of the file is not kept");
        assert!(kept(v, 4096, whole - 4096).is_none(), "nor is the rest");
        assert!(kept(v, 0, whole).is_none());
        keep(v, 0, whole, &bytes(3));
        assert_eq!(kept(v, 0, whole), Some(bytes(3)));
        // The thread drops it within two seconds; poll for it rather than sleep.
        let deadline = Instant::now() + 10 * TRUSTED_FOR;
        while memo().kept.contains_key(&(v, 0)) {
            assert!(Instant::now() < deadline, "the expired mapping was never dropped");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
