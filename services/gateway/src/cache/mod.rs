//! What a gateway keeps of the services' answers in microservices mode, under the
//! services' leases (`kubedav_lease`): [`CachedFileIo`] (files of up to 1 MiB, single
//! resources and collections' Depth 1 listings, with their dead properties, and `Stat`
//! answers with a validator or of a collection) and
//! [`CachedLocks`] (lock discovery). Each implements its port around the remote adapter,
//! so the gateway does not know they are there. Beside them, [`KeptAnswers`]: PROPFIND
//! Depth 0 answers rendered from what `CachedFileIo` keeps, for as long as it keeps it.
//!
//! Coherence: a change made through kubedav (by any gateway) is answered only after
//! every gateway has dropped what it kept of it, so a client that saw its PUT, PROPPATCH
//! or LOCK answered sees the result on its next request through any gateway. A change
//! made to the volume behind fileio's back (another program writing the files) is seen
//! once the copy is older than the freshness bound ([`CacheConfig::freshness`]).

mod admission;
pub mod answers;
mod entries;
mod fileio;
mod free;
mod locks;

pub use answers::KeptAnswers;
pub use fileio::{CachedFileIo, MAX_FILE_BYTES};
pub use locks::CachedLocks;

use kubedav_metrics::Counter;
use std::time::Duration;

/// How much a gateway keeps, for how long at most, and where its copies of files live.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Bytes of files, resources and listings kept (locks take a fixed small share
    /// on top).
    pub capacity_bytes: u64,
    /// The longest a copy is served without asking fileio again: the bound on how
    /// stale a change made behind fileio's back can be seen.
    pub freshness: Duration,
    /// The largest file kept whole: [`MAX_FILE_BYTES`], in either run mode. Files that
    /// may come mapped (over the size sent with sendfile) are kept from their second
    /// ask ([`CachedFileIo`]).
    pub max_file_bytes: u64,
    /// Where copies of files over [`crate::SENDFILE_ABOVE`] are written, to be sent with
    /// sendfile: unnamed files on a disk filesystem cost less CPU per GET than memfds.
    pub copies: kubedav_zerocopy::CopyStore,
}

/// Hit and miss counters of one cache.
struct Lookups {
    hits: Counter,
    misses: Counter,
}

impl Lookups {
    fn of(cache: &str) -> Self {
        Self {
            hits: kubedav_metrics::cache_lookups(&format!("gateway_{cache}"), "hit"),
            misses: kubedav_metrics::cache_lookups(&format!("gateway_{cache}"), "miss"),
        }
    }

    fn count<T>(&self, found: Option<T>) -> Option<T> {
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.inc();
        found
    }
}

/// Registers the cache metrics, so they are exported (at 0) before the first lookup.
pub fn register_metrics() {
    for cache in [
        "file",
        "resource",
        "stat",
        "listing",
        "locks",
        "write_check",
        "release",
        "answer",
    ] {
        let _ = Lookups::of(cache);
    }
}
