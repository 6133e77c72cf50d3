//! What [`super::CachedFileIo`] keeps: the kept answers, when each was asked for, what
//! each weighs against the bound, and how an announcement drops them.

use bytes::Bytes;
use kubedav_api::fileio::{FileInfo, ListEntry};
use kubedav_api::lease::Invalidation;
use quick_cache::sync::Cache;
use std::sync::Arc;
use std::time::Instant;

/// What an entry costs beyond its data and path, for the bound.
const ENTRY_OVERHEAD_BYTES: u64 = 160;

/// A whole small file as fileio read it.
pub(super) struct KeptFile {
    pub(super) info: FileInfo,
    pub(super) data: Bytes,
    pub(super) kept_at: Instant,
}

/// A resource with all its dead properties, as a Depth 0 listing returned it.
pub(super) struct KeptResource {
    pub(super) entry: ListEntry,
    pub(super) kept_at: Instant,
    /// This copy's number (`FileIo::kept_copy`): unique in the process.
    pub(super) copy: u64,
}

/// A resource's metadata as `Stat` returned it, with its validator (which listings do
/// not carry): what a GET sent from the gateway's mount of the volume checks the file it
/// opened against (`crate::direct`).
pub(super) struct KeptStat {
    pub(super) info: FileInfo,
    pub(super) kept_at: Instant,
}

/// The next [`KeptResource::copy`].
pub(super) static NEXT_COPY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A collection and its members, each with all its dead properties, as a Depth 1
/// listing returned them.
pub(super) struct KeptListing {
    pub(super) entries: Vec<ListEntry>,
    pub(super) kept_at: Instant,
}

/// When a kept answer was asked for (the freshness bound counts from then).
pub(super) trait Dated {
    fn kept_at(&self) -> Instant;
}

impl Dated for KeptFile {
    fn kept_at(&self) -> Instant {
        self.kept_at
    }
}

impl Dated for KeptResource {
    fn kept_at(&self) -> Instant {
        self.kept_at
    }
}

impl Dated for KeptStat {
    fn kept_at(&self) -> Instant {
        self.kept_at
    }
}

impl Dated for KeptListing {
    fn kept_at(&self) -> Instant {
        self.kept_at
    }
}

/// The largest listing kept (entries, the collection included): a larger one streams
/// from fileio as it is read.
pub(super) const MAX_LISTING_ENTRIES: usize = 4096;

#[derive(Clone, Copy)]
pub(super) struct Weight;

/// What an entry of a listing or a kept resource costs against the bound.
pub(super) fn entry_weight(entry: &ListEntry) -> u64 {
    let properties: usize = entry
        .properties
        .iter()
        .map(|p| p.namespace.len() + p.name.len() + p.value.len() + 32)
        .sum();
    let path = entry
        .info
        .as_ref()
        .map_or(0, |info| info.path.len() + info.etag.len());
    (properties + path) as u64 + ENTRY_OVERHEAD_BYTES
}

impl quick_cache::Weighter<String, Arc<KeptFile>> for Weight {
    fn weight(&self, path: &String, kept: &Arc<KeptFile>) -> u64 {
        (kept.data.len() + path.len()) as u64 + ENTRY_OVERHEAD_BYTES
    }
}

impl quick_cache::Weighter<String, Arc<KeptResource>> for Weight {
    fn weight(&self, path: &String, kept: &Arc<KeptResource>) -> u64 {
        entry_weight(&kept.entry) + path.len() as u64
    }
}

impl quick_cache::Weighter<String, Arc<KeptStat>> for Weight {
    fn weight(&self, path: &String, kept: &Arc<KeptStat>) -> u64 {
        let info = &kept.info;
        (path.len() + info.path.len() + info.etag.len() + info.validator.len()) as u64 + ENTRY_OVERHEAD_BYTES
    }
}

impl quick_cache::Weighter<String, Arc<KeptListing>> for Weight {
    fn weight(&self, path: &String, kept: &Arc<KeptListing>) -> u64 {
        kept.entries.iter().map(entry_weight).sum::<u64>() + path.len() as u64
    }
}

/// What the gateway keeps of fileio under its lease.
pub(super) struct Kept {
    pub(super) files: Cache<String, Arc<KeptFile>, Weight>,
    pub(super) resources: Cache<String, Arc<KeptResource>, Weight>,
    pub(super) stats: Cache<String, Arc<KeptStat>, Weight>,
    /// Depth 1 listings, by the collection's path. A change of a member names the
    /// collection too (fileio announces a changed resource's parent), so it drops them.
    pub(super) listings: Cache<String, Arc<KeptListing>, Weight>,
}

impl Kept {
    pub(super) fn drop_invalidated(&self, invalidation: &Invalidation) {
        if invalidation.covers_everything() {
            self.files.clear();
            self.resources.clear();
            self.stats.clear();
            self.listings.clear();
            return;
        }
        for path in &invalidation.paths {
            self.files.remove(path);
            self.resources.remove(path);
            self.stats.remove(path);
            self.listings.remove(path);
        }
        if !invalidation.trees.is_empty() {
            // A tree's members are spread over the cache: one pass over what is kept.
            self.files.retain(|path, _| !invalidation.covers(path));
            self.resources.retain(|path, _| !invalidation.covers(path));
            self.stats.retain(|path, _| !invalidation.covers(path));
            self.listings.retain(|path, _| !invalidation.covers(path));
        }
    }
}
