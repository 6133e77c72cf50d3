//! File data that only the kernel reads: the zero-copy path of large GET bodies.
//!
//! A [`Bytes`] made by [`map_resident`] is backed by a read-only shared mapping of the
//! file, and this module remembers, by address, which file and offset each such mapping
//! shows. A connection that finds such bytes among those it is asked to write
//! ([`locate`]) sends them with `sendfile(2)` from the file instead: the data goes from
//! the page cache to the socket with no copy through user space, as nginx sends files.
//!
//! Nothing in user space has to read the mapping, and on that path nothing does: the
//! pages are never even faulted in. Reading it stays *correct* (it shows the file's
//! bytes), which is why a mapping and not a mere token carries the address; but a
//! process that touches a page of a file truncated in place meanwhile gets `SIGBUS`. So
//! only a consumer that hands the bytes straight to such a connection may ask for them
//! (`FileIo::read_to_send`); every transformation (HTTP/2 framing, Markdown, a kept
//! copy) asks for an ordinary read. The kernel itself reading a truncated mapping
//! (`writev`) fails the call with `EFAULT`, and `sendfile` from the file sends what is
//! left and then reports the end: both close the connection, as nginx does.
//!
//! A gateway's kept copies of files are sent the same way: a [`CopyStore`] keeps them in
//! unnamed files on a disk filesystem, or in sealed memfds, mapped, which nothing can
//! truncate, so anyone may read those.
//!
//! Only pages already in the page cache are mapped: `sendfile` on a page that must come
//! from the disk would stall the async worker that called it. `cachestat(2)` (Linux 6.5)
//! counts them in one walk of the file's cache; before it, `mincore(2)` looks up each
//! page, which cost a tenth of a 1 MiB GET's CPU when measured. `cachestat` itself walks
//! the cache folio by folio, and `mmap` and `munmap` cost as much again, so the mapping
//! of a whole file (a version of it) found wholly cached is kept for a second and handed
//! out again ([`residency`]). The kernel reveals
//! residency only for files the process owns or may write (`mincore` reports every page
//! resident otherwise), so callers map only such files ([`residency_is_reported`]).

// Mapping files and asking the kernel about their pages is this crate's whole job.
#![allow(unsafe_code)]

mod copies;
mod residency;

pub use copies::CopyStore;
pub use residency::FileVersion;

use bytes::Bytes;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// The largest part of a file one mapping shows: 8 MiB (2,048 pages to check).
pub const MAX_MAPPED_BYTES: usize = 8 << 20;

/// The mappings alive, by the address of their first byte of data.
static MAPPINGS: RwLock<BTreeMap<usize, Region>> = RwLock::new(BTreeMap::new());
/// How many mappings are alive: a connection with none to look for skips the lookup.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// What one mapping shows.
#[derive(Clone, Copy, Debug)]
struct Region {
    len: usize,
    fd: RawFd,
    offset: u64,
}

/// Where an address lies in a mapping made by [`map_resident`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileSpan {
    /// The mapped file (open as long as the bytes at the address are alive).
    pub fd: RawFd,
    /// The offset in the file of the byte at the address.
    pub offset: u64,
    /// How many bytes of the mapping start at the address.
    pub available: usize,
}

/// Whether any mapping is alive (a cheap check before [`locate`]).
pub fn any_alive() -> bool {
    LIVE.load(Ordering::Acquire) > 0
}

/// The file span at `address`, if it lies in a live mapping made by [`map_resident`].
pub fn locate(address: *const u8) -> Option<FileSpan> {
    let address = address as usize;
    let mappings = MAPPINGS.read().unwrap_or_else(|e| e.into_inner());
    let (&start, region) = mappings.range(..=address).next_back()?;
    let into = address - start;
    (into < region.len).then(|| FileSpan {
        fd: region.fd,
        offset: region.offset + into as u64,
        available: region.len - into,
    })
}

/// Whether `mincore(2)` tells this process the truth about the page cache of a file
/// whose owner is `owner_uid`: it does for files the process owns (or as root, with
/// CAP_FOWNER); for others that it may not write, it reports every page resident.
pub fn residency_is_reported(owner_uid: u32) -> bool {
    // kubedav never changes its user: one `geteuid` per process, not one per GET.
    static ME: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let me = *ME.get_or_init(|| rustix::process::geteuid().as_raw());
    me == 0 || me == owner_uid
}

/// Up to `len` bytes of `file` from `offset`, as a mapping, if at least `min_len` of
/// them (from `offset` on) are in the page cache: as many leading bytes as are, up to
/// [`MAX_MAPPED_BYTES`]. `None` when fewer are, or the mapping fails; the caller then
/// reads the ordinary way. With the file's `version`, a whole file found wholly cached
/// within the last second, or a chunk of a file of up to four chunks sent whole, is
/// neither checked nor mapped again: its mapping is kept ([`residency`]).
///
/// # Safety
///
/// The result is memory that another program can take away: when anything truncates
/// the file in place while the mapping lives (kubedav replaces files by rename, but an
/// operator's tool on the volume may not), reading the bytes past the new end raises
/// `SIGBUS` and ends the process, and a change in place changes bytes Rust assumes
/// immutable. So the caller, and everything it hands the result to, must never read
/// the bytes in user space unless nothing can truncate or change the file while they
/// live. The one intended use: hand them unread to a connection that finds them with
/// [`locate`] and sends them from the file with `sendfile(2)` (the kernel reports a
/// truncation there as a short send, which ends the connection). Passing them through
/// code that only moves the [`Bytes`] (a stream, a body) is fine.
pub unsafe fn map_resident(
    file: &Arc<File>,
    version: Option<FileVersion>,
    offset: u64,
    len: usize,
    min_len: usize,
) -> Option<Bytes> {
    let len = len.min(MAX_MAPPED_BYTES);
    if len == 0 || len < min_len {
        return None;
    }
    if let Some(bytes) = version.and_then(|version| residency::kept(version, offset, len)) {
        return Some(bytes);
    }
    let cached = all_cached(file, offset, len);
    if cached == Some(false) {
        return None;
    }
    let (mapping, lead) = Mapping::of(file, offset, len)?;
    let available = match cached {
        Some(_) => len,
        None => resident_prefix(&mapping, lead, len)?,
    };
    if available < min_len.max(1) {
        return None;
    }
    let bytes = Bytes::from_owner(mapping.register(available, offset));
    if let Some(version) = version
        && cached == Some(true)
    {
        residency::keep(version, offset, len, &bytes);
    }
    Some(bytes)
}

/// `cachestat(2)`'s system call number, the same on every architecture (the libc crate
/// names it only for some).
const SYS_CACHESTAT: libc::c_long = 451;

/// Whether every page of `len` bytes of `file` from `offset` is in the page cache, by
/// `cachestat(2)`; `None` when the kernel does not say (before Linux 6.5, or refused).
fn all_cached(file: &File, offset: u64, len: usize) -> Option<bool> {
    #[repr(C)]
    struct Range {
        offset: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        cache: u64,
        dirty: u64,
        writeback: u64,
        evicted: u64,
        recently_evicted: u64,
    }
    let page = rustix::param::page_size() as u64;
    let range = Range {
        offset,
        len: len as u64,
    };
    let mut stat = Stat::default();
    #[cfg(test)]
    tests::CACHESTAT_CALLS.with(|calls| calls.set(calls.get() + 1));
    // SAFETY: cachestat reads `range` and writes `stat`, both alive for the call.
    let done = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const Range,
            &mut stat as *mut Stat,
            0,
        )
    };
    if done != 0 {
        return None;
    }
    let pages = (offset + len as u64).div_ceil(page) - offset / page;
    Some(stat.cache >= pages)
}

/// How many bytes of `mapping`'s data (`len` of them, `lead` bytes past its start) from
/// the first on are in the page cache, by `mincore(2)`.
fn resident_prefix(mapping: &Mapping, lead: usize, len: usize) -> Option<usize> {
    let page = rustix::param::page_size();
    let mut resident = vec![0u8; mapping.map_len.div_ceil(page)];
    // SAFETY: the range is the whole live mapping, and `resident` has one byte per page
    // of it.
    if unsafe { libc::mincore(mapping.address, mapping.map_len, resident.as_mut_ptr()) } != 0 {
        return None;
    }
    let pages = resident.iter().take_while(|&&flag| flag & 1 == 1).count();
    Some((pages * page).saturating_sub(lead).min(len))
}

/// One mapping; unregistered and unmapped when its last [`Bytes`] goes.
struct Mapping {
    address: *mut libc::c_void,
    map_len: usize,
    /// The address of the first byte of data (past the lead to the page boundary).
    data: usize,
    len: usize,
    /// Keeps the descriptor [`locate`] hands out open.
    file: Arc<File>,
}

// SAFETY: the mapping is read-only and owned by this value alone; the raw pointer is
// only an address.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// A read-only shared mapping of `len` bytes of `file` from `offset` (not yet
    /// registered), and how far past its start, at a page boundary, the data begins.
    fn of(file: &Arc<File>, offset: u64, len: usize) -> Option<(Self, usize)> {
        let page = rustix::param::page_size();
        let lead = (offset % page as u64) as usize;
        let map_len = lead + len;
        let map_offset = libc::off_t::try_from(offset - lead as u64).ok()?;
        // SAFETY: a fresh read-only shared mapping of an open file; nothing else refers
        // to the address range it returns.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                map_offset,
            )
        };
        if address == libc::MAP_FAILED {
            return None;
        }
        let mapping = Self {
            address,
            map_len,
            data: address as usize + lead,
            len: 0,
            file: file.clone(),
        };
        Some((mapping, lead))
    }

    /// Makes the first `len` bytes of data known to [`locate`] as `offset` on.
    fn register(mut self, len: usize, offset: u64) -> Self {
        self.len = len;
        let region = Region {
            len,
            fd: self.file.as_raw_fd(),
            offset,
        };
        MAPPINGS
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.data, region);
        LIVE.fetch_add(1, Ordering::AcqRel);
        self
    }
}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `data`..`data + len` lies in the live read-only mapping. Reading it is
        // what the module's rules say to avoid, but it is valid memory.
        unsafe { std::slice::from_raw_parts(self.data as *const u8, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.len > 0 {
            MAPPINGS
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&self.data);
            LIVE.fetch_sub(1, Ordering::AcqRel);
        }
        // SAFETY: the mapping made in `map_resident`, unmapped once, after its last user.
        unsafe { libc::munmap(self.address, self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::io::Write;

    thread_local! {
        /// The `cachestat` calls this test thread made.
        pub(super) static CACHESTAT_CALLS: Cell<usize> = const { Cell::new(0) };
    }

    fn file_of(len: usize) -> (tempfile::TempDir, Arc<File>, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        std::fs::File::create(&path).unwrap().write_all(&content).unwrap();
        (dir, Arc::new(File::open(&path).unwrap()), content)
    }

    #[test]
    fn a_mapping_shows_the_file_and_locate_finds_its_file_and_offset() {
        let (_dir, file, content) = file_of(300_000);
        // SAFETY: the test's own file, which nothing truncates.
        let bytes =
            unsafe { map_resident(&file, None, 5_000, 200_000, 1) }.expect("just written, so resident");
        assert_eq!(bytes.len(), 200_000);
        assert_eq!(&bytes[..], &content[5_000..205_000]);
        let span = locate(bytes[1_000..].as_ptr()).expect("inside the mapping");
        assert_eq!(span.fd, file.as_raw_fd());
        assert_eq!(span.offset, 6_000);
        assert_eq!(span.available, 199_000);
        assert_eq!(locate(content.as_ptr()), None, "ordinary memory is no mapping");
        let address = bytes.as_ptr();
        drop(bytes);
        assert_eq!(locate(address), None, "forgotten once dropped");
    }

    #[test]
    fn a_range_of_a_file_version_found_cached_is_neither_checked_nor_mapped_again_at_once() {
        let (_dir, file, content) = file_of(300_000);
        if all_cached(&file, 0, 300_000).is_none() {
            eprintln!("no cachestat here (Linux before 6.5): nothing to remember");
            return;
        }
        let stx = rustix::fs::statx(
            &*file,
            "",
            rustix::fs::AtFlags::EMPTY_PATH,
            rustix::fs::StatxFlags::ALL,
        )
        .unwrap();
        let version = FileVersion::of(&stx);
        let calls = || CACHESTAT_CALLS.with(Cell::get);
        let before = calls();
        // SAFETY: the test's own file, which nothing truncates.
        let first = unsafe { map_resident(&file, Some(version), 0, 300_000, 1) }.expect("resident");
        for _ in 0..2 {
            // SAFETY: as above.
            let again = unsafe { map_resident(&file, Some(version), 0, 300_000, 1) }.expect("resident");
            assert_eq!(again.as_ptr(), first.as_ptr(), "the same mapping, not a new one");
            assert_eq!(&again[..], &content[..]);
        }
        assert_eq!(calls() - before, 1, "checked once, then trusted");
        for _ in 0..2 {
            // SAFETY: as above.
            unsafe { map_resident(&file, None, 0, 300_000, 1) }.expect("resident");
        }
        assert_eq!(calls() - before, 3, "without a version, checked every time");
    }

    #[test]
    fn too_few_bytes_are_not_mapped() {
        let (_dir, file, _) = file_of(10_000);
        // SAFETY: the test's own file, which nothing truncates.
        assert!(unsafe { map_resident(&file, None, 0, 1_000, 4_096) }.is_none());
        // SAFETY: as above.
        assert!(unsafe { map_resident(&file, None, 0, 0, 0) }.is_none());
    }
}
