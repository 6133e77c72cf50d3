//! [`CachedFileIo`]: files of up to 1 MiB, single resources and Depth 1 listings kept
//! under fileio's lease, or under a lease from each of its replicas.

use super::admission::{AskedOnce, Filling};
pub(super) use super::entries::MAX_LISTING_ENTRIES;
use super::entries::{Dated, Kept, KeptFile, KeptListing, KeptResource, KeptStat, NEXT_COPY, Weight};
use super::{CacheConfig, Lookups};
use bytes::{Bytes, BytesMut};
use futures_util::{StreamExt, TryStreamExt};
use kubedav_api::BoxStream;
use kubedav_api::fileio::{
    CopyRequest, DeleteRequest, DeleteResponse, FileInfo, FileIo, ListEntry, ListRequest, ListResponse,
    MkdirRequest, MkdirResponse, MoveRequest, PatchPropertiesRequest, PatchPropertiesResponse, ReadChunk,
    ReadHeader, ReadReply, ReadRequest, StatRequest, TransferResponse, UsageRequest, UsageResponse,
    WriteHeader, WriteResponse,
};
use kubedav_api::lease::Invalidation;
use kubedav_api::pb::fileio::v1::{Depth, PropertySelection, property_selection};
use kubedav_lease::{self as lease, Coherence, OpenAt, ReplicaLeases, Watch};
use quick_cache::sync::Cache;
use std::sync::Arc;
use std::time::Instant;
use tonic::Status;

/// The largest file kept whole (less when the bound is small: see
/// [`CachedFileIo::new`]). A miss is read whole before it is answered, by one request
/// per file at a time ([`Filling`]); the others stream as they would without the cache.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Shards of the files' cache: each holds an equal part of the bound, and a file
/// heavier than its shard's part is never kept, so few and large ones.
const FILE_SHARDS: usize = 2;
/// [`FileIo`] that answers reads of files of up to 1 MiB, Depth 0 and Depth 1 listings
/// and stats from what it kept while its lease from fileio holds; every other call, and
/// every miss, goes to fileio: over gRPC or in this process ([`CachedFileIo::new`]), or
/// to its replicas ([`CachedFileIo::over_replicas`]).
pub struct CachedFileIo {
    remote: Arc<dyn FileIo>,
    /// The largest file kept: [`MAX_FILE_BYTES`], or less if a shard holds less.
    max_file_bytes: u64,
    /// Where copies of larger files go ([`sendable`]).
    copies: kubedav_zerocopy::CopyStore,
    filling: Filling,
    /// Files too large to keep at their first ask that were asked for once.
    asked_once: AskedOnce,
    lease: Arc<dyn Coherence>,
    /// The leases from each fileio replica, when there are several.
    replicas: Option<Arc<ReplicaLeases>>,
    kept: Arc<Kept>,
    freshness: std::time::Duration,
    files: Lookups,
    /// Stale file copies that fileio's `Stat` showed unchanged ([`Self::kept_file`]).
    revalidations: kubedav_metrics::Counter,
    resources: Lookups,
    stats: Lookups,
    listings: Lookups,
}

impl CachedFileIo {
    /// Wraps `fileio` and starts holding a lease from the fileio it reaches, over gRPC
    /// (`RemoteFileIo`) or in this process (`LeasedFileIo`): a task on the current
    /// runtime, for as long as this lives.
    pub fn new<P: FileIo + Watch + Clone>(fileio: P, config: CacheConfig) -> Self {
        let watcher = fileio.clone();
        Self::over(Arc::new(fileio), config, |drop_kept| {
            lease::hold(
                "fileio",
                move |requests| watcher.watch(requests),
                move |i| drop_kept(i),
            )
        })
    }

    /// Wraps `remote`, which reaches several fileio replicas, holding a lease from each
    /// replica that `replicas` shows through the streams `open` opens to its address.
    pub fn over_replicas(
        remote: Arc<dyn FileIo>,
        replicas: tokio::sync::watch::Receiver<lease::View>,
        open: OpenAt,
        config: CacheConfig,
    ) -> Self {
        let mut leases = None;
        let mut cached = Self::over(remote, config, |drop_kept| {
            let followed = ReplicaLeases::follow("fileio", replicas, open, drop_kept);
            leases = Some(followed.clone());
            followed
        });
        cached.replicas = leases;
        cached
    }

    /// The leases from each fileio replica ([`CachedFileIo::over_replicas`]): which
    /// replicas answer now.
    pub fn replica_leases(&self) -> Option<Arc<ReplicaLeases>> {
        self.replicas.clone()
    }

    /// Wraps `remote`, keeping copies under what `coherence` makes of the function
    /// that drops what an invalidation names.
    fn over<C: Coherence + 'static>(
        remote: Arc<dyn FileIo>,
        config: CacheConfig,
        coherence: impl FnOnce(Arc<dyn Fn(&Invalidation) + Send + Sync>) -> Arc<C>,
    ) -> Self {
        let third = (config.capacity_bytes / 3).max(1);
        let items = (third / 1024).max(16) as usize;
        let files = quick_cache::OptionsBuilder::new()
            .estimated_items_capacity(items)
            .weight_capacity(third)
            .shards(FILE_SHARDS)
            .build()
            .expect("every option is set");
        let files = Cache::with_options(files, Weight, Default::default(), Default::default());
        // quick_cache refuses an item heavier than 97 % of its shard's part.
        let max_file_bytes = config.max_file_bytes.min(files.shard_capacity() * 9 / 10);
        let kept = Arc::new(Kept {
            files,
            resources: Cache::with_weighter(items, third, Weight),
            // A small share beyond the bound: a few hundred bytes per file sent from
            // the gateway's mount.
            stats: Cache::with_weighter((items / 16).max(16), (third / 16).max(64 << 10), Weight),
            listings: Cache::with_weighter((items / 64).max(16), third, Weight),
        });
        let dropper = kept.clone();
        let lease = coherence(Arc::new(move |invalidation| {
            dropper.drop_invalidated(invalidation)
        }));
        Self {
            remote,
            max_file_bytes,
            copies: config.copies,
            filling: Filling::default(),
            asked_once: AskedOnce::default(),
            lease,
            replicas: None,
            kept,
            freshness: config.freshness,
            files: Lookups::of("file"),
            revalidations: kubedav_metrics::cache_lookups("gateway_file", "revalidated"),
            resources: Lookups::of("resource"),
            stats: Lookups::of("stat"),
            listings: Lookups::of("listing"),
        }
    }

    fn fresh(&self, kept_at: Instant) -> bool {
        kept_at.elapsed() < self.freshness
    }

    /// What `cache` keeps at `path`, if the lease holds and it is fresh.
    fn kept_in<V: Dated>(&self, cache: &Cache<String, Arc<V>, Weight>, path: &str) -> Option<Arc<V>>
    where
        Weight: quick_cache::Weighter<String, Arc<V>>,
    {
        if !self.lease.valid() {
            return None;
        }
        cache.get(path).filter(|kept| self.fresh(kept.kept_at()))
    }

    /// Lists a resource (Depth 0) or a collection and its members (Depth 1) from fileio
    /// with all their dead properties, keeps what it got if nothing changed meanwhile,
    /// and answers the selection asked for. A listing larger than
    /// [`MAX_LISTING_ENTRIES`] is handed on as it streams, not kept.
    async fn list_and_keep(&self, request: ListRequest) -> Result<BoxStream<ListResponse>, Status> {
        let selection = request.properties.clone().unwrap_or_default();
        let single = request.depth == Depth::Zero as i32;
        let epoch = self.lease.epoch();
        let asked = Instant::now();
        let path = request.path.clone();
        let mut batches = self.remote.list(all_properties(request)).await?;
        let mut entries = Vec::new();
        while let Some(batch) = batches.next().await {
            entries.extend(batch?.entries);
            if entries.len() > MAX_LISTING_ENTRIES {
                let first = select(std::mem::take(&mut entries), &selection);
                let rest = batches.map_ok(move |batch| select(batch.entries, &selection));
                return Ok(futures_util::stream::iter([Ok(first)]).chain(rest).boxed());
            }
        }
        if single {
            let Some(entry) = entries.into_iter().next() else {
                return Err(Status::internal("fileio sent an empty listing"));
            };
            let kept = Arc::new(KeptResource {
                entry,
                kept_at: asked,
                copy: NEXT_COPY.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            });
            self.keep_in(&self.kept.resources, epoch, path, &kept);
            return Ok(batched(std::slice::from_ref(&kept.entry), &selection));
        }
        let kept = Arc::new(KeptListing {
            entries,
            kept_at: asked,
        });
        self.keep_in(&self.kept.listings, epoch, path, &kept);
        Ok(batched(&kept.entries, &selection))
    }

    /// `Stat` of `path` with its validator (fileio's answer, kept or fetched): what a
    /// GET sent from the gateway's mount of the volume compares the file it opened
    /// with (`crate::direct`). Never from a kept resource: a listing carries no
    /// validator.
    pub async fn current_version(&self, path: &str) -> Result<FileInfo, Status> {
        if let Some(kept) = self.kept_in(&self.kept.files, path) {
            return Ok(kept.info.clone());
        }
        self.stat_or_keep(StatRequest {
            path: path.to_owned(),
        })
        .await
    }

    /// `Stat` from what is kept of it, or from fileio, keeping the answer when it has a
    /// validator (a file whose change time has settled; one changed in the last second
    /// has none yet, and the next ask may find one) or is a collection's.
    async fn stat_or_keep(&self, request: StatRequest) -> Result<FileInfo, Status> {
        if let Some(kept) = self.stats.count(self.kept_in(&self.kept.stats, &request.path)) {
            return Ok(kept.info.clone());
        }
        let epoch = self.lease.epoch();
        let asked = Instant::now();
        let path = request.path.clone();
        let info = self.remote.stat(request).await?;
        if !info.validator.is_empty() || info.is_collection {
            let kept = Arc::new(KeptStat {
                info: info.clone(),
                kept_at: asked,
            });
            self.keep_in(&self.kept.stats, epoch, path, &kept);
        }
        Ok(info)
    }

    /// Keeps `value` at `path` in `cache`, if no announcement arrived since `epoch` (read
    /// before the call that fetched it) and the lease holds.
    fn keep_in<V>(&self, cache: &Cache<String, Arc<V>, Weight>, epoch: u64, path: String, value: &Arc<V>)
    where
        Weight: quick_cache::Weighter<String, Arc<V>>,
    {
        self.lease.keep(
            epoch,
            || cache.insert(path.clone(), value.clone()),
            || {
                cache.remove(&path);
            },
        );
    }

    /// A read answered from the kept copy, or from fileio (keeping the file when it is
    /// small and read whole); `map_above` as in [`Self::read_and_keep`].
    ///
    /// A file that may come mapped (a read to send, over `map_above` bytes) is kept only
    /// when it is asked for again ([`AskedOnce`]): keeping it costs a read and a write of
    /// its bytes, which a file read once (a backup walking a photo library) would pay
    /// for nothing, where sending it from the page cache costs no copy at all.
    async fn read_or_keep(&self, request: ReadRequest, map_above: Option<u64>) -> Result<ReadReply, Status> {
        if let Some(kept) = self.kept_file(&request.path).await {
            return Ok(whole_or_ranges(&kept, &request.ranges));
        }
        // Ranges of a file not kept are never kept; nor is a file another request is
        // reading whole meanwhile.
        let claim = if request.ranges.is_empty() {
            self.filling.claim(&request.path)
        } else {
            None
        };
        let asked_before = map_above.is_none() || (claim.is_some() && self.asked_once.seen(&request.path));
        match (claim, map_above) {
            // Files small enough to keep are never mapped: keeping one reads it.
            (Some(_claim), _) if asked_before => {
                let map_above = map_above.map(|above| above.max(self.max_file_bytes));
                self.read_and_keep(request, map_above).await
            }
            // The first ask: kept if it comes whole (not over `map_above`), else sent as
            // fileio gives it, and remembered.
            (Some(_claim), Some(above)) => {
                let path = request.path.clone();
                let reply = self.read_and_keep(request, Some(above)).await?;
                if reply.header.info.as_ref().is_some_and(|info| info.size > above) {
                    self.asked_once.remember(path);
                }
                Ok(reply)
            }
            (None, None) => self.remote.read(request).await,
            (None, Some(above)) => {
                let above = above.max(self.max_file_bytes);
                self.remote.read_to_send(request, above).await
            }
            (Some(_), None) => unreachable!("a plain read counts as asked before"),
        }
    }

    /// The kept copy of the file at `path`, counted as a hit, or `None` (a miss). A copy
    /// older than the freshness bound is revalidated, not read again: if fileio's `Stat`
    /// repeats the validator the read gave (`FileInfo.validator`: fileio sets one only
    /// when any later change is bound to alter it), the bytes are the ones kept, and
    /// the copy is kept anew from the time of that `Stat`. So a hot file costs fileio
    /// one `Stat` per freshness period, not a read of up to 1 MiB during which the
    /// requests that found no copy streamed the file from fileio one by one
    /// (docs/benchmarks.md, "2026-11-25 (4)").
    async fn kept_file(&self, path: &str) -> Option<Arc<KeptFile>> {
        let kept = self.lease.valid().then(|| self.kept.files.get(path)).flatten();
        let Some(kept) = kept else {
            self.files.misses.inc();
            return None;
        };
        if self.fresh(kept.kept_at) {
            self.files.hits.inc();
            return Some(kept);
        }
        let epoch = self.lease.epoch();
        let asked = Instant::now();
        let current = self
            .remote
            .stat(StatRequest {
                path: path.to_owned(),
            })
            .await;
        let info = match current {
            Ok(info)
                if !info.validator.is_empty()
                    && info.validator == kept.info.validator
                    && self.lease.epoch() == epoch =>
            {
                info
            }
            // Changed, gone, or announced meanwhile: read afresh (the read keeps the new
            // copy, or drops what the announcement named).
            _ => {
                self.files.misses.inc();
                return None;
            }
        };
        let renewed = Arc::new(KeptFile {
            info,
            data: kept.data.clone(),
            kept_at: asked,
        });
        self.keep_in(&self.kept.files, epoch, path.to_owned(), &renewed);
        self.revalidations.inc();
        Some(renewed)
    }

    /// Reads a small file whole from fileio, keeps it if nothing changed meanwhile, and
    /// answers from the copy. A reply that is not one to keep (a collection, a file over
    /// the size kept) is handed on as it came.
    ///
    /// With `map_above` (a read to send, [`FileIo::read_to_send`]; never below the
    /// largest file kept), files too large to keep may come as mappings; the ones kept,
    /// read here, never do.
    async fn read_and_keep(&self, request: ReadRequest, map_above: Option<u64>) -> Result<ReadReply, Status> {
        let epoch = self.lease.epoch();
        let asked = Instant::now();
        let path = request.path.clone();
        let reply = match map_above {
            None => self.remote.read(request).await?,
            Some(above) => self.remote.read_to_send(request, above).await?,
        };
        let Some(info) = reply.header.info.clone() else {
            return Ok(reply);
        };
        // Over `map_above`, the chunks may be mappings, which are sent, never read.
        let may_be_mapped = map_above.is_some_and(|above| info.size > above);
        if info.is_collection || info.size > self.max_file_bytes || may_be_mapped {
            return Ok(reply);
        }
        let mut data = BytesMut::with_capacity(info.size as usize);
        let mut chunks = reply.chunks;
        while let Some(chunk) = chunks.next().await {
            data.extend_from_slice(&chunk?.data);
        }
        if data.len() as u64 != info.size {
            return Err(Status::internal("fileio sent another size than it announced"));
        }
        let kept = Arc::new(KeptFile {
            info,
            data: sendable(&self.copies, data.freeze()),
            kept_at: asked,
        });
        self.keep_in(&self.kept.files, epoch, path, &kept);
        Ok(whole_or_ranges(&kept, &[]))
    }
}

/// A kept file's data as the gateway keeps it: above [`crate::SENDFILE_ABOVE`], in a
/// file of `copies` (an unnamed file on disk, or a sealed memfd), mapped, which an HTTP/1
/// connection sends with sendfile, without copying it per request; smaller, or if the
/// kernel refuses, as it is.
fn sendable(copies: &kubedav_zerocopy::CopyStore, data: Bytes) -> Bytes {
    if data.len() as u64 <= crate::SENDFILE_ABOVE {
        return data;
    }
    copies.copy(&data).unwrap_or(data)
}

/// A read answered from a kept file: each resolved range is one chunk, a slice of it.
fn whole_or_ranges(kept: &KeptFile, ranges: &[kubedav_api::pb::fileio::v1::ByteRangeSpec]) -> ReadReply {
    let ranges = kubedav_api::ranges::resolve_ranges(ranges, kept.info.size);
    let chunks: Vec<_> = ranges
        .iter()
        .enumerate()
        .map(|(index, range)| {
            Ok(ReadChunk {
                range_index: index as u32,
                data: kept.data.slice(range.first as usize..=range.last as usize),
            })
        })
        .collect();
    ReadReply {
        header: ReadHeader {
            info: Some(kept.info.clone()),
            ranges,
        },
        chunks: futures_util::stream::iter(chunks).boxed(),
    }
}

/// The same listing request, asking for every dead property: one kept copy then answers
/// any selection.
fn all_properties(request: ListRequest) -> ListRequest {
    ListRequest {
        properties: Some(PropertySelection {
            mode: property_selection::Mode::All as i32,
            names: Vec::new(),
        }),
        ..request
    }
}

/// Entries with only the dead properties `selection` asks for.
fn select(entries: Vec<ListEntry>, selection: &PropertySelection) -> ListResponse {
    ListResponse {
        entries: entries
            .into_iter()
            .map(|entry| ListEntry {
                info: entry.info,
                properties: kubedav_api::properties::select(entry.properties, selection),
            })
            .collect(),
    }
}

/// Kept entries answered in batches of fileio's size (256 entries), so the gateway
/// renders them as it would a streamed listing; each entry copied with only the dead
/// properties `selection` asks for.
fn batched(entries: &[ListEntry], selection: &PropertySelection) -> BoxStream<ListResponse> {
    let batches: Vec<_> = entries
        .chunks(LISTING_BATCH)
        .map(|chunk| {
            let entries = chunk
                .iter()
                .map(|entry| ListEntry {
                    info: entry.info.clone(),
                    properties: kubedav_api::properties::select(entry.properties.clone(), selection),
                })
                .collect();
            Ok(ListResponse { entries })
        })
        .collect();
    futures_util::stream::iter(batches).boxed()
}

/// Entries per batch of a listing answered from a kept copy, as fileio sends them.
const LISTING_BATCH: usize = 256;

// Every method is written out, so a method the port gains with a default cannot be
// left to that default here, bypassing fileio's own (clippy checks it).
#[async_trait::async_trait]
#[deny(clippy::missing_trait_methods)]
impl FileIo for CachedFileIo {
    /// A hit counts for the cache that answered it; past the kept files and resources,
    /// the kept `Stat` answers count hits and misses (`gateway_stat`).
    async fn stat(&self, request: StatRequest) -> Result<FileInfo, Status> {
        if let Some(kept) = self.kept_in(&self.kept.files, &request.path) {
            self.files.hits.inc();
            return Ok(kept.info.clone());
        }
        if let Some(kept) = self.kept_in(&self.kept.resources, &request.path) {
            self.resources.hits.inc();
            return Ok(kept.entry.info.clone().unwrap_or_default());
        }
        self.stat_or_keep(request).await
    }

    async fn list(&self, request: ListRequest) -> Result<BoxStream<ListResponse>, Status> {
        // A bounded listing (max_entries) must stop where fileio would: not kept.
        if request.depth == Depth::One as i32 && request.max_entries == 0 {
            if let Some(kept) = self
                .listings
                .count(self.kept_in(&self.kept.listings, &request.path))
            {
                let selection = request.properties.unwrap_or_default();
                return Ok(batched(&kept.entries, &selection));
            }
            return self.list_and_keep(request).await;
        }
        if request.depth != Depth::Zero as i32 || request.max_entries != 0 {
            return self.remote.list(request).await;
        }
        if let Some(kept) = self
            .resources
            .count(self.kept_in(&self.kept.resources, &request.path))
        {
            let selection = request.properties.unwrap_or_default();
            return Ok(batched(std::slice::from_ref(&kept.entry), &selection));
        }
        self.list_and_keep(request).await
    }

    async fn read(&self, request: ReadRequest) -> Result<ReadReply, Status> {
        // A version is not the file: never answered from, nor kept as, its copy.
        if !request.version.is_empty() {
            return self.remote.read(request).await;
        }
        self.read_or_keep(request, None).await
    }

    async fn read_to_send(&self, request: ReadRequest, map_above: u64) -> Result<ReadReply, Status> {
        if !request.version.is_empty() {
            return self.remote.read_to_send(request, map_above).await;
        }
        self.read_or_keep(request, Some(map_above)).await
    }

    async fn write(&self, header: WriteHeader, body: BoxStream<Bytes>) -> Result<WriteResponse, Status> {
        self.remote.write(header, body).await
    }

    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status> {
        self.remote.delete(request).await
    }

    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status> {
        self.remote.mkdir(request).await
    }

    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status> {
        self.remote.copy(request).await
    }

    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status> {
        self.remote.r#move(request).await
    }

    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status> {
        self.remote.patch_properties(request).await
    }

    async fn usage(&self, request: UsageRequest) -> Result<UsageResponse, Status> {
        self.remote.usage(request).await
    }

    /// The kept resource's number while a Depth 0 listing of `path` would be answered
    /// from it: the lease holds and it is fresh. Answered here, never by the port it
    /// wraps: a Depth 0 listing through this port comes from this copy, or from a fetch
    /// that keeps a new one, so only this copy's number says what a listing was made of.
    fn kept_copy(&self, path: &str) -> Option<u64> {
        self.kept_in(&self.kept.resources, path).map(|kept| kept.copy)
    }
}
