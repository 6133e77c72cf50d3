//! Streaming reads with byte ranges.

use crate::errors::join_status;
use bytes::Bytes;
use kubedav_api::MAX_CHUNK_BYTES;
use kubedav_api::fileio::ReadChunk;
use kubedav_api::pb::fileio::v1::ResolvedRange;
use kubedav_zerocopy::FileVersion;
use std::fs::File;
use std::future::Future;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::task::JoinHandle;
use tonic::Status;

pub use kubedav_api::ranges::resolve_ranges;

/// Reads `len` bytes at `offset` only if every one of them is in the page cache
/// (`preadv2` with `RWF_NOWAIT`): it never waits for the disk, so it may run on an async
/// worker. `None` when some would have to come from the disk, or on any error (the
/// caller then reads on the blocking pool, which reports errors).
pub fn read_cached_at(file: &File, offset: u64, len: usize) -> Option<Bytes> {
    use std::os::fd::AsRawFd;
    // Read into uninitialised capacity: zeroing a 256 KiB chunk first would cost about
    // as much as copying it from the page cache.
    let mut buf = crate::chunkpool::CHUNKS.buffer(len);
    while buf.len() < len {
        let filled = buf.len();
        let spare = &mut buf.spare_capacity_mut()[..len - filled];
        let iov = libc::iovec {
            iov_base: spare.as_mut_ptr().cast(),
            iov_len: spare.len(),
        };
        let at = libc::off_t::try_from(offset + filled as u64).ok()?;
        // SAFETY: the iovec covers `spare`, writable memory owned by `buf` that outlives
        // the call; the kernel writes at most `iov_len` bytes into it.
        let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at, libc::RWF_NOWAIT) };
        match n {
            0 => return None,
            n if n > 0 => {
                // SAFETY: the kernel initialised the first `n` bytes of the spare capacity.
                unsafe { buf.set_len(filled + n as usize) };
            }
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return None,
        }
    }
    Some(crate::chunkpool::CHUNKS.freeze(buf))
}

/// Reads `len` bytes at `offset`, failing if the file ends early (it was truncated in
/// place by something other than kubedav while being read).
pub fn read_exact_at(file: &File, offset: u64, len: usize) -> Result<Bytes, Status> {
    let mut buf = crate::chunkpool::CHUNKS.buffer(len);
    buf.resize(len, 0);
    let mut filled = 0;
    while filled < len {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => return Err(Status::data_loss("the file shrank while it was being read")),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Status::internal(format!("read failed: {e}"))),
        }
    }
    Ok(crate::chunkpool::CHUNKS.freeze(buf))
}

/// The data of the resolved ranges of an open file, in chunks of at most
/// [`MAX_CHUNK_BYTES`], each read when the consumer asks for it: memory per read stays at
/// one chunk whatever the file size. A chunk in the page cache is read on the polling
/// worker, any other on the blocking pool.
pub struct ChunkStream {
    file: Arc<File>,
    ranges: Vec<ResolvedRange>,
    index: usize,
    offset: u64,
    ready: Option<ReadChunk>,
    pending: Option<JoinHandle<Result<Bytes, Status>>>,
    on_bytes: fn(u64),
    /// With the file's version, chunks in the page cache are mappings
    /// ([`ChunkStream::mapping`]).
    mapping: Option<FileVersion>,
}

/// The fewest bytes worth a mapping: below this, copying them costs less than mapping,
/// checking and unmapping.
pub const MIN_MAPPED_BYTES: usize = 16 * 1024;

impl ChunkStream {
    /// A stream over `ranges` of `file`. `first`, if given, is the already-read first
    /// chunk of the first range. `on_bytes` is told of every chunk read (for metrics).
    pub fn new(file: Arc<File>, ranges: Vec<ResolvedRange>, first: Option<Bytes>, on_bytes: fn(u64)) -> Self {
        let mut stream = Self {
            file,
            offset: ranges.first().map_or(0, |r| r.first),
            ranges,
            index: 0,
            ready: None,
            pending: None,
            on_bytes,
            mapping: None,
        };
        if let Some(data) = first {
            stream.ready = Some(ReadChunk {
                range_index: 0,
                data: data.clone(),
            });
            stream.advance(data.len() as u64);
        }
        stream
    }

    /// With the `version` of the file (`Some`), the stream's chunks that are in the page
    /// cache are mappings of the file, of up to
    /// [`kubedav_zerocopy::MAX_MAPPED_BYTES`] each, for a consumer that sends them
    /// with sendfile and never reads them (see [`kubedav_zerocopy`]); the others are
    /// read as always.
    pub fn mapping(mut self, version: Option<FileVersion>) -> Self {
        self.mapping = version;
        self
    }

    /// The next chunk as a mapping, if mapping is on and enough of it is cached.
    fn next_mapped(&self) -> Option<Bytes> {
        let version = self.mapping?;
        let range = self.ranges.get(self.index)?;
        let left = usize::try_from(range.last + 1 - self.offset).unwrap_or(usize::MAX);
        // SAFETY: mapping is on only for `FileIo::read_to_send`, whose caller hands the
        // chunks unread to a connection that sends them with sendfile (the port's
        // contract); every other read leaves it off and reads the ordinary way.
        unsafe {
            kubedav_zerocopy::map_resident(&self.file, Some(version), self.offset, left, MIN_MAPPED_BYTES)
        }
    }

    /// Length of the next chunk to read, if any is left.
    pub fn next_len(&self) -> Option<usize> {
        let range = self.ranges.get(self.index)?;
        Some((range.last + 1 - self.offset).min(MAX_CHUNK_BYTES as u64) as usize)
    }

    /// The chunk of `data`, just read at the current offset; moves past it.
    fn deliver(&mut self, data: Bytes) -> ReadChunk {
        let range_index = self.index as u32;
        (self.on_bytes)(data.len() as u64);
        self.advance(data.len() as u64);
        ReadChunk { range_index, data }
    }

    fn advance(&mut self, len: u64) {
        self.offset += len;
        if let Some(range) = self.ranges.get(self.index)
            && self.offset > range.last
        {
            self.index += 1;
            self.offset = self.ranges.get(self.index).map_or(0, |r| r.first);
        }
    }
}

impl futures_util::Stream for ChunkStream {
    type Item = Result<ReadChunk, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(chunk) = self.ready.take() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        if self.pending.is_none() {
            let Some(len) = self.next_len() else {
                return Poll::Ready(None);
            };
            if let Some(data) = self.next_mapped() {
                return Poll::Ready(Some(Ok(self.deliver(data))));
            }
            // A chunk already in the page cache is copied right here: a trip to the
            // blocking pool (two thread wake-ups) costs more than the copy.
            if let Some(data) = read_cached_at(&self.file, self.offset, len) {
                return Poll::Ready(Some(Ok(self.deliver(data))));
            }
            let (file, offset) = (self.file.clone(), self.offset);
            self.pending = Some(tokio::task::spawn_blocking(move || {
                read_exact_at(&file, offset, len)
            }));
        }
        let handle = self.pending.as_mut().expect("a read is pending");
        let result = match Pin::new(handle).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(joined) => joined.map_err(join_status).and_then(|r| r),
        };
        self.pending = None;
        Poll::Ready(Some(result.map(|data| self.deliver(data))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_read_returns_exactly_the_bytes_asked_and_nothing_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        let file = File::open(&path).unwrap();
        // Just written, so in the page cache.
        let read = read_cached_at(&file, 1000, 4096).expect("a just-written file is cached");
        assert_eq!(&read[..], &content[1000..5096]);
        assert_eq!(read_cached_at(&file, 9_000, 2_000), None, "past the end");
    }
}
