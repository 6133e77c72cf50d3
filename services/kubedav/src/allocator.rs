//! The process's memory allocator: jemalloc, configured for a small, steady footprint.
//!
//! glibc's allocator locks an arena when a block allocated on one tokio worker is freed on
//! another, which a work-stealing runtime does all the time; jemalloc's thread caches
//! avoid that: GET 1 KiB +6 to 23 %, PROPFIND Depth 0 within the noise
//! (docs/benchmarks.md).
//! With its defaults (4 arenas per core, 32 KiB thread caches) the peak resident set
//! under PROPFIND Depth 1 load, with 70-odd blocking-pool threads, rose from 58 to 80 MiB;
//! one arena, 8 KiB thread caches and dirty pages returned after a second keep it at
//! glibc's level. 8 KiB rather than 4: hyper allocates a connection's 8 KiB read buffer
//! anew for each request with a body (the body still holds the old one when hyper looks
//! for the next request), and without a thread cache for that size each one took the
//! arena's lock and a fresh slab: PROPFIND Depth 0 and GET 1 KiB 4 to 6 % less CPU per
//! request, the peak under PROPFIND Depth 1 load unchanged (16 KiB added 8 MiB to it). Large reads reuse their chunk buffers (`kubedav_fileio::chunkpool`),
//! without which jemalloc's returned pages were refaulted and GET 1 MiB lost 15 %.
//! `_RJEM_MALLOC_CONF` overrides this at run time.

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Read by jemalloc when the process starts (its symbols carry the `_rjem_` prefix).
#[unsafe(export_name = "_rjem_malloc_conf")]
pub(crate) static MALLOC_CONF: &std::ffi::CStr =
    c"narenas:1,tcache_max:8192,dirty_decay_ms:1000,muzzy_decay_ms:0";
