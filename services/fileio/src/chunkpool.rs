//! Reused buffers for the chunks of large reads.
//!
//! A GET of a large file reads it in chunks of [`MAX_CHUNK_BYTES`], each handed to the
//! HTTP layer as [`Bytes`] and freed once sent. Allocating each afresh made the
//! allocator return and refault their pages: 108,000 page faults in 3 s of GET 1 MiB
//! load under glibc and 385,000 under jemalloc, which cost jemalloc 15 % of the
//! throughput (docs/benchmarks.md). A chunk's buffer now goes back to a small pool when
//! the last [`Bytes`] pointing into it is dropped, and the next chunk reuses it.

use bytes::Bytes;
use kubedav_api::MAX_CHUNK_BYTES;
use std::sync::Mutex;

/// Reads smaller than this get a buffer of their own size, never pooled.
const POOLED_FROM: usize = 64 * 1024;

/// Idle chunk buffers, at most `kept` of them.
pub struct ChunkPool {
    idle: Mutex<Vec<Vec<u8>>>,
    kept: usize,
}

/// The pool large reads use: 4 MiB kept at most, whatever the load was.
pub static CHUNKS: ChunkPool = ChunkPool::new(16);

impl ChunkPool {
    /// An empty pool that keeps up to `kept` idle buffers.
    pub const fn new(kept: usize) -> Self {
        Self {
            idle: Mutex::new(Vec::new()),
            kept,
        }
    }

    /// An empty buffer with room for `len` bytes: a pooled chunk buffer when `len` is
    /// large enough to be worth it and fits one.
    pub fn buffer(&self, len: usize) -> Vec<u8> {
        if !(POOLED_FROM..=MAX_CHUNK_BYTES).contains(&len) {
            return Vec::with_capacity(len);
        }
        let reused = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        reused.unwrap_or_else(|| Vec::with_capacity(MAX_CHUNK_BYTES))
    }

    /// `buffer`, filled, as [`Bytes`] whose memory returns to this pool when the last
    /// clone or slice of it is dropped (if it is a chunk buffer and the pool has room).
    pub fn freeze(&'static self, buffer: Vec<u8>) -> Bytes {
        Bytes::from_owner(Pooled { buffer, pool: self })
    }

    fn give_back(&self, mut buffer: Vec<u8>) {
        if buffer.capacity() != MAX_CHUNK_BYTES {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.kept {
            buffer.clear();
            idle.push(buffer);
        }
    }

    #[cfg(test)]
    fn idle(&self) -> usize {
        self.idle.lock().unwrap().len()
    }
}

struct Pooled {
    buffer: Vec<u8>,
    pool: &'static ChunkPool,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.buffer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_buffer_is_reused_once_its_last_bytes_are_dropped() {
        static POOL: ChunkPool = ChunkPool::new(2);
        let mut first = POOL.buffer(MAX_CHUNK_BYTES);
        first.extend_from_slice(b"chunk");
        let address = first.as_ptr();
        let bytes = POOL.freeze(first);
        let slice = bytes.slice(1..3);
        drop(bytes);
        assert_eq!(POOL.idle(), 0, "a slice keeps the buffer in use");
        assert_eq!(&slice[..], b"hu");
        drop(slice);
        let again = POOL.buffer(100_000);
        assert_eq!(again.as_ptr(), address, "the same memory");
        assert!(again.is_empty(), "a reused buffer starts empty");
    }

    #[test]
    fn the_pool_is_bounded_and_keeps_only_chunk_buffers() {
        static POOL: ChunkPool = ChunkPool::new(2);
        let small = POOL.buffer(1000);
        assert_eq!(small.capacity(), 1000, "small reads get their own size");
        drop(POOL.freeze(small));
        assert_eq!(POOL.idle(), 0);
        let chunks: Vec<Bytes> = (0..3)
            .map(|_| POOL.freeze(POOL.buffer(MAX_CHUNK_BYTES)))
            .collect();
        drop(chunks);
        assert_eq!(POOL.idle(), 2, "no more than it keeps");
    }
}
