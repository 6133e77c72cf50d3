//! kubedav's fileio service core: the served volume.
//!
//! [`LocalFileIo`] implements the [`FileIo`] port over a directory. Every path is resolved
//! beneath the root in the kernel ([`volume`]), bodies stream in bounded chunks both ways
//! ([`read`], [`write`]), and writes are atomic ([`write`]). Blocking filesystem calls
//! run on tokio's blocking pool, never on the async workers.

pub mod cache;
pub mod chunkpool;
pub mod digest;
pub mod direct;
pub mod errors;
pub mod incoming;
pub mod keep;
pub mod left_out;
pub mod listing;
pub mod metadata;
pub mod metrics;
pub mod objects;
pub mod orphans;
#[allow(unsafe_code)] // getxattrat, on names and buffers that outlive the call
pub mod props;
pub mod quota;
#[allow(unsafe_code)] // preadv2 with RWF_NOWAIT, and the mapped reads for sendfile
pub mod read;
pub mod records;
pub mod s3;
pub mod scanslots;
pub mod serial;
pub mod transfer;
pub mod tree;
pub mod uploads;
#[allow(unsafe_code)] // io_uring submissions whose buffers outlive their completions
pub mod uring;
pub mod volume;
#[allow(unsafe_code)] // sync_file_range on the upload's own descriptor
pub mod write;

use bytes::Bytes;
use errors::{Op, blocking, io_status};
use futures_util::StreamExt;
use kubedav_api::fileio::{
    CopyRequest, DeleteRequest, DeleteResponse, Depth, FileInfo, FileIo, ListRequest, ListResponse,
    MkdirRequest, MkdirResponse, MoveRequest, PatchPropertiesRequest, PatchPropertiesResponse, ReadHeader,
    ReadReply, ReadRequest, StatRequest, TransferResponse, UsageRequest, UsageResponse, WriteHeader,
    WriteResponse,
};
use kubedav_api::path::VolumePath;
use kubedav_api::{BoxStream, MAX_CHUNK_BYTES};
pub use objects::ObjectFileIo;
use rustix::fs::OFlags;
use std::path::Path;
use std::sync::Arc;
use tonic::Status;
use tracing::Instrument;
pub use volume::{Durability, Volume};

/// Bytes an upload gathers before handing them to the blocking pool in one write.
const WRITE_BATCH_BYTES: usize = 1024 * 1024;

/// The fileio core over a local directory.
#[derive(Clone, Debug)]
pub struct LocalFileIo {
    volume: Arc<Volume>,
    property_locks: Arc<StripedLocks>,
    property_cache: cache::property::PropertyCache,
    name_cache: cache::name::NameCache,
    resolved: cache::resolved::ResolvedPaths,
    file_cache: cache::file::FileCache,
    scan_slots: scanslots::ScanSlots,
    /// What deletes and overwrites keep (none unless set).
    keeping: Option<Arc<keep::Keeping>>,
    /// The uploads that arrive in many requests, landed by writes.
    uploads: uploads::volume::VolumeUploads,
    /// The incoming area, where gateways write large bodies (none unless set).
    landings: Option<Arc<incoming::Landings>>,
}

/// A fixed set of mutexes a path hashes onto: serialises read-modify-write of one
/// resource's properties without a lock per path.
#[derive(Debug)]
struct StripedLocks(Vec<std::sync::Mutex<()>>);

impl StripedLocks {
    fn new() -> Self {
        Self((0..64).map(|_| std::sync::Mutex::new(())).collect())
    }

    fn lock(&self, path: &VolumePath) -> std::sync::MutexGuard<'_, ()> {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let index = BuildHasherDefault::<DefaultHasher>::default().hash_one(path) as usize % self.0.len();
        self.0[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl LocalFileIo {
    /// Serves the directory `root`, syncing every change. See [`Volume::open`] for the
    /// failures.
    pub fn open(root: &Path) -> Result<Self, String> {
        Self::open_with(root, Durability::default())
    }

    /// Serves the directory `root`; changes wait for what `durability` says.
    pub fn open_with(root: &Path, durability: Durability) -> Result<Self, String> {
        uring::detect();
        let volume = Arc::new(Volume::open(root)?.with_durability(durability));
        let started = orphans::filesystem_now(volume.root_fd()).unwrap_or_else(std::time::SystemTime::now);
        metrics::register();
        let swept = volume.clone();
        std::thread::Builder::new()
            .name("orphan-sweep".into())
            .spawn(move || {
                let removed = orphans::sweep(swept.root_fd(), started);
                if removed > 0 {
                    tracing::warn!(
                        target: "kubedav",
                        "removed {removed} temporary files left by uploads that were interrupted"
                    );
                }
            })
            .map_err(|e| format!("cannot start the orphan sweep: {e}"))?;
        metrics::report_capacity(volume.clone());
        Ok(Self {
            volume: volume.clone(),
            property_locks: Arc::new(StripedLocks::new()),
            property_cache: cache::property::PropertyCache::new(),
            name_cache: cache::name::NameCache::new(),
            resolved: cache::resolved::ResolvedPaths::new(),
            file_cache: cache::file::FileCache::new(cache::file::DEFAULT_CAPACITY_BYTES),
            scan_slots: scanslots::ScanSlots::for_this_machine(),
            keeping: None,
            uploads: uploads::volume::VolumeUploads::new(volume, uploads::UploadSettings::default()),
            landings: None,
        })
    }

    /// Lands the large bodies gateways write into the volume's incoming area
    /// (`.kubedav/incoming`, made here; [`incoming`]), and sweeps what they leave there.
    /// A volume where it cannot be made (read only) goes without, with a warning: a
    /// write that names a file there is then refused.
    pub fn with_incoming_area(mut self) -> Self {
        match incoming::Landings::open(&self.volume) {
            Ok(landings) => {
                let landings = Arc::new(landings);
                incoming::keep_swept(&landings);
                self.landings = Some(landings);
            }
            Err(status) => tracing::warn!(
                target: "kubedav",
                "no incoming area: {}; gateways' --fileio-incoming cannot be used",
                status.message()
            ),
        }
        self
    }

    /// Keeps uploads that arrive in many requests as `settings` say, and removes the
    /// expired ones in the background (docs/uploads.md).
    pub fn with_uploads(mut self, settings: uploads::UploadSettings) -> Self {
        self.uploads = uploads::volume::VolumeUploads::new(self.volume.clone(), settings);
        self.uploads.sweep_in_background();
        self
    }

    /// The uploads kept on this volume, as the uploads port.
    pub fn uploads(&self) -> uploads::volume::VolumeUploads {
        self.uploads.clone()
    }

    /// Keeps deleted resources in a trash and replaced files as versions, as `keeping`
    /// says (docs/trash-and-versions.md).
    pub fn with_keeping(mut self, keeping: keep::Keeping) -> Self {
        self.keeping = (keeping.trashes() || keeping.versions()).then(|| Arc::new(keeping));
        if let Some(keeping) = &self.keeping {
            keep::retain::retain_in_background(Arc::downgrade(&self.volume), keeping.clone());
        }
        self
    }

    /// The trash and versions this volume keeps, as the keep port.
    pub fn keep(&self) -> keep::local::LocalKeep {
        keep::local::LocalKeep::new(self.volume.clone(), self.keeping.clone())
    }

    /// What a change by `by` keeps, if anything is kept.
    fn keeper(&self, by: &str) -> Option<keep::volume::Keeper> {
        self.keeping.as_ref().map(|keeping| keep::volume::Keeper {
            volume: self.volume.clone(),
            keeping: keeping.clone(),
            by: by.to_owned(),
        })
    }

    /// The records kept with this volume's data, under `.kubedav/` at its root.
    pub fn records(&self) -> records::VolumeRecords {
        records::VolumeRecords::new(self.volume.clone())
    }

    /// Bounds the cache of small files' contents at `capacity_bytes` (0 turns it off;
    /// [`cache::file::DEFAULT_CAPACITY_BYTES`] unless set).
    pub fn with_file_cache(mut self, capacity_bytes: u64) -> Self {
        self.file_cache = cache::file::FileCache::new(capacity_bytes);
        self
    }

    /// [`FileIo::list`], inside its span.
    async fn list_in_span(&self, request: ListRequest) -> Result<BoxStream<ListResponse>, Status> {
        let path = parse(&request.path)?;
        let depth = Depth::try_from(request.depth).map_err(|_| Status::invalid_argument("unknown depth"))?;
        if depth == Depth::Zero {
            let selection = request.properties.unwrap_or_default();
            let scan = listing::Scan {
                volume: &self.volume,
                selection: &selection,
                cache: &self.property_cache,
                names: &self.name_cache,
                io_uring: false,
            };
            let entries = vec![scan.single(&path, &self.resolved)?];
            return Ok(futures_util::stream::iter([Ok(ListResponse { entries })]).boxed());
        }
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let volume = self.volume.clone();
        let cache = self.property_cache.clone();
        let names = self.name_cache.clone();
        let io_uring = uring::scans_enabled();
        metrics::scan(if io_uring {
            metrics::ScanPath::IoUring
        } else {
            metrics::ScanPath::Fallback
        });
        let mut outlet = self.scan_slots.enter(tx).await;
        tokio::task::spawn_blocking(move || {
            let selection = request.properties.unwrap_or_default();
            let scan = listing::Scan {
                volume: &volume,
                selection: &selection,
                cache: &cache,
                names: &names,
                io_uring,
            };
            if let Err(status) = scan.walk(path, depth, request.max_entries, &mut outlet) {
                let _ = outlet.send(Err(status));
            }
        });
        first_batch_decides(rx).await
    }

    /// Opens a read ([`FileIo::read`]); with `map_above`, the chunks of a file larger
    /// than that may be mappings ([`FileIo::read_to_send`]).
    async fn open_read(&self, request: ReadRequest, map_above: Option<u64>) -> Result<ReadReply, Status> {
        let path = parse(&request.path)?;
        if !request.version.is_empty() {
            return self.open_version(&path, &request).await;
        }
        let read_began = std::time::SystemTime::now();
        if let Some(hit) = self.file_cache.get(self.volume.root_fd(), &path) {
            return Ok(cached_reply(&path, hit, &request.ranges, read_began));
        }
        // Open and stat on this worker (the kernel's caches answer them), and the first
        // chunk too when it is small and already in the page cache (a read that cannot
        // wait for the disk): a cached small file costs no trip to the blocking pool.
        let fd = self
            .volume
            .open_beneath(&path, OFlags::RDONLY | OFlags::NONBLOCK)?;
        let stx = metadata::stat_fd(&fd, &path)?;
        let info = metadata::validated_file_info(&path, &stx, read_began);
        if info.is_collection {
            return Ok(ReadReply {
                header: ReadHeader {
                    info: Some(info),
                    ranges: Vec::new(),
                },
                chunks: futures_util::stream::empty().boxed(),
            });
        }
        let ranges = read::resolve_ranges(&request.ranges, info.size);
        let file = Arc::new(std::fs::File::from(fd));
        // Mapped chunks for a caller that sends them with sendfile, if the kernel tells
        // this process which pages are cached (kubedav_zerocopy).
        let mapped = (map_above.is_some_and(|above| info.size > above)
            && kubedav_zerocopy::residency_is_reported(stx.stx_uid))
        .then(|| kubedav_zerocopy::FileVersion::of(&stx));
        let first = match ranges.first() {
            Some(_) if mapped.is_some() => None,
            Some(range) => {
                let len = (range.last + 1 - range.first).min(MAX_CHUNK_BYTES as u64) as usize;
                // From the page cache right here, as the later chunks are (`ChunkStream`):
                // the blocking pool costs two thread wake-ups and a zeroed buffer.
                let data = match read::read_cached_at(&file, range.first, len) {
                    Some(data) => data,
                    None => {
                        let file = file.clone();
                        let offset = range.first;
                        blocking(move || read::read_exact_at(&file, offset, len)).await?
                    }
                };
                metrics::read_bytes(data.len() as u64);
                Some(data)
            }
            None => None,
        };
        if self.file_cache.wants(info.size) {
            self.file_cache.missed();
            let whole = match (&first, info.size) {
                (_, 0) => Some(Bytes::new()),
                (Some(data), _) if request.ranges.is_empty() => Some(data.clone()),
                _ => None,
            };
            if let Some(data) = whole {
                self.file_cache.insert(&path, &stx, read_began, data);
            }
        }
        let header = ReadHeader {
            info: Some(info),
            ranges,
        };
        let chunks = read::ChunkStream::new(file, header.ranges.clone(), first, metrics::read_bytes)
            .mapping(mapped)
            .boxed();
        Ok(ReadReply { header, chunks })
    }

    /// A read of a version of the file at `path` (never cached: versions are read rarely).
    async fn open_version(&self, path: &VolumePath, request: &ReadRequest) -> Result<ReadReply, Status> {
        let volume = self.volume.clone();
        let (path, id) = (path.clone(), request.version.clone());
        let (fd, stx) = blocking(move || {
            let fd = keep::volume::open_version(&volume, &path, &id)?;
            let stx = metadata::stat_fd(&fd, &path)?;
            Ok((fd, stx))
        })
        .await?;
        let path = parse(&request.path)?;
        let info = metadata::file_info(&path, &stx);
        let ranges = read::resolve_ranges(&request.ranges, info.size);
        let file = Arc::new(std::fs::File::from(fd));
        let chunks = read::ChunkStream::new(file, ranges.clone(), None, metrics::read_bytes).boxed();
        Ok(ReadReply {
            header: ReadHeader {
                info: Some(info),
                ranges,
            },
            chunks,
        })
    }

    /// Whether the root still answers (for `/readyz`).
    pub fn check(&self) -> Result<(), String> {
        metadata::stat_fd(self.volume.root_fd(), &VolumePath::root())
            .map(|_| ())
            .map_err(|s| s.message().to_owned())
    }
}

fn parse(path: &str) -> Result<VolumePath, Status> {
    Ok(VolumePath::parse(path)?)
}

/// A read answered from the cache of small files: each resolved range is one chunk, a
/// slice of the kept copy. `asked` is a moment before the cache's `statx`.
fn cached_reply(
    path: &VolumePath,
    hit: cache::file::Hit,
    ranges: &[kubedav_api::pb::fileio::v1::ByteRangeSpec],
    asked: std::time::SystemTime,
) -> ReadReply {
    let info = metadata::validated_file_info(path, &hit.stx, asked);
    let ranges = read::resolve_ranges(ranges, info.size);
    let chunks: Vec<_> = ranges
        .iter()
        .enumerate()
        .map(|(index, range)| {
            Ok(kubedav_api::fileio::ReadChunk {
                range_index: index as u32,
                data: hit.data.slice(range.first as usize..=range.last as usize),
            })
        })
        .collect();
    ReadReply {
        header: ReadHeader {
            info: Some(info),
            ranges,
        },
        chunks: futures_util::stream::iter(chunks).boxed(),
    }
}

/// fileio's span for one read-side call (stat, list, read), made only when something
/// reads it: traces are exported, or the caller's span is there to continue (log lines
/// with span ids), or debug lines are on (`kubedav_kit::telemetry::span_wanted`, as for
/// the gateway's request span). Otherwise making, entering and closing it was a twentieth
/// of the user time of an all-in-one GET of 1 MiB (docs/benchmarks.md, "2026-11-26 (5)").
/// Writes keep their spans always: they cost far more.
macro_rules! read_span {
    ($name:literal, $($fields:tt)*) => {
        if kubedav_kit::telemetry::span_wanted(!tracing::Span::current().is_none())
            || tracing::enabled!(tracing::Level::DEBUG)
        {
            tracing::info_span!($name, $($fields)*)
        } else {
            tracing::Span::none()
        }
    };
}

#[async_trait::async_trait]
impl FileIo for LocalFileIo {
    async fn stat(&self, request: StatRequest) -> Result<FileInfo, Status> {
        let span = read_span!("fileio.stat", path = %request.path);
        let _entered = span.enter();
        // A path lookup and a statx, answered from the kernel's caches like the open of a
        // read: on this worker, not worth two thread hand-offs to the blocking pool. A
        // path resolved beneath the root before, still leading to the same unchanged
        // inode, needs one statx instead of openat2, statx and close (`cache::resolved`).
        let path = parse(&request.path)?;
        let asked = std::time::SystemTime::now();
        if let Some(stx) = self.resolved.current(self.volume.root_fd(), &path) {
            return Ok(metadata::validated_file_info(&path, &stx, asked));
        }
        let fd = self.volume.open_beneath(&path, OFlags::PATH)?;
        let stx = metadata::stat_fd(&fd, &path)?;
        self.resolved.insert(&path, &stx, asked);
        Ok(metadata::validated_file_info(&path, &stx, asked))
    }

    async fn list(&self, request: ListRequest) -> Result<BoxStream<ListResponse>, Status> {
        let span = read_span!("fileio.list", path = %request.path, depth = request.depth);
        self.list_in_span(request).instrument(span).await
    }

    async fn read(&self, request: ReadRequest) -> Result<ReadReply, Status> {
        let span = read_span!("fileio.read", path = %request.path);
        self.open_read(request, None).instrument(span).await
    }

    async fn read_to_send(&self, request: ReadRequest, map_above: u64) -> Result<ReadReply, Status> {
        let span = read_span!("fileio.read", path = %request.path);
        self.open_read(request, Some(map_above)).instrument(span).await
    }

    #[tracing::instrument(skip_all, name = "fileio.write", fields(path = %header.path))]
    async fn write(&self, header: WriteHeader, mut body: BoxStream<Bytes>) -> Result<WriteResponse, Status> {
        if let Some(from) = header.from_upload.clone() {
            return self.land(header, from, body).await;
        }
        if !header.incoming.is_empty() {
            let Some(landings) = self.landings.clone() else {
                // A deployment's mistake, not the client's: never a 409 that blames the path.
                return Err(Status::internal(
                    "this fileio has no incoming area: start it with the volume writable, or leave \
                     the gateway's --fileio-incoming unset",
                ));
            };
            let landing = incoming::Landing {
                landings,
                volume: self.volume.clone(),
                keeping: self.keeping.clone(),
                keeper: self.keeper(""),
            };
            return landing.receive(header, body).await;
        }
        let path = parse(&header.path)?;
        let volume = self.volume.clone();
        let expected_size = header.expected_size;
        let digester = digest::Digester::for_write(&header)?;
        let (keeping, may_purge) = (self.keeping.clone(), !header.no_purge);
        let mut upload = blocking(move || {
            keep::space::begin_upload(&volume, keeping.as_deref(), path, expected_size, may_purge)
        })
        .await?;
        upload.digest_with(digester);
        // Double buffering: while one batch is written on the blocking pool, the next is
        // received. Memory per upload is bounded by two batches.
        let mut slot = UploadSlot::Ready(upload);
        let mut batch: Vec<Bytes> = Vec::new();
        let mut batch_len = 0usize;
        loop {
            let next = body.next().await;
            let end = next.is_none();
            if let Some(chunk) = next {
                let chunk = chunk?;
                batch_len += chunk.len();
                batch.push(chunk);
            }
            if batch_len >= WRITE_BATCH_BYTES || (end && batch_len > 0) {
                let mut upload = slot.wait().await?;
                let len = std::mem::take(&mut batch_len) as u64;
                if let Some(limit) = header.expected_size
                    && upload.written() + len > limit
                {
                    return Err(Status::invalid_argument(format!(
                        "the body is longer than the {limit} bytes declared; nothing was written"
                    )));
                }
                let chunks = std::mem::take(&mut batch);
                slot = UploadSlot::Writing(tokio::task::spawn_blocking(move || {
                    upload.write_chunks(&chunks)?;
                    metrics::written_bytes(len);
                    Ok(upload)
                }));
            }
            if end {
                break;
            }
        }
        let mut upload = slot.wait().await?;
        upload.keep_replaced(self.keeper(""));
        let committed = blocking(move || upload.commit(&header, true)).await?;
        tracing::debug!(
            bytes = committed.info.size as i64,
            created = committed.created,
            "upload committed"
        );
        Ok(WriteResponse {
            info: Some(committed.info),
            created: committed.created,
            checksums: committed.checksums,
        })
    }

    #[tracing::instrument(skip_all, name = "fileio.delete", fields(path = %request.path))]
    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status> {
        let path = parse(&request.path)?;
        let volume = self.volume.clone();
        let keeper = self.keeper(&request.by);
        let (failures, item) =
            blocking(move || tree::delete(&volume, &path, request.if_match.as_deref(), keeper.as_ref()))
                .await?;
        Ok(DeleteResponse {
            failures,
            trash_item: item.map(|item| item.id).unwrap_or_default(),
        })
    }

    #[tracing::instrument(skip_all, name = "fileio.mkdir", fields(path = %request.path))]
    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status> {
        let path = parse(&request.path)?;
        let volume = self.volume.clone();
        let info = blocking(move || tree::mkdir(&volume, &path)).await?;
        Ok(MkdirResponse { info: Some(info) })
    }

    #[tracing::instrument(skip_all, name = "fileio.copy", fields(source = %request.source, destination = %request.destination))]
    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status> {
        let (source, destination) = (parse(&request.source)?, parse(&request.destination)?);
        let depth = Depth::try_from(request.depth).map_err(|_| Status::invalid_argument("unknown depth"))?;
        let left_out = left_out::LeftOut::parse(&source, &request.leave_out)?;
        let volume = self.volume.clone();
        let keeper = self.keeper(&request.by);
        blocking(move || {
            transfer::copy(
                &volume,
                &source,
                &destination,
                depth,
                request.overwrite,
                &left_out,
                keeper.as_ref(),
            )
        })
        .await
    }

    #[tracing::instrument(skip_all, name = "fileio.move", fields(source = %request.source, destination = %request.destination))]
    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status> {
        let (source, destination) = (parse(&request.source)?, parse(&request.destination)?);
        let volume = self.volume.clone();
        let keeper = self.keeper(&request.by);
        blocking(move || transfer::rename(&volume, &source, &destination, request.overwrite, keeper.as_ref()))
            .await
    }

    #[tracing::instrument(skip_all, name = "fileio.proppatch", fields(path = %request.path))]
    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status> {
        let path = parse(&request.path)?;
        props::check(&request)?;
        let volume = self.volume.clone();
        let stripes = self.property_locks.clone();
        let cache = self.property_cache.clone();
        blocking(move || {
            let fd = volume.open_beneath(&path, OFlags::RDONLY | OFlags::NONBLOCK)?;
            // Read-modify-write under a per-path lock, so concurrent PROPPATCHes of one
            // resource never lose each other's changes.
            let _guard = stripes.lock(&path);
            let mut current = props::read(&fd, &path)?;
            props::apply(&mut current, &request);
            if let Some(modified) = request.modified_unix_ns {
                let before = metadata::etag(&metadata::stat_fd(&fd, &path)?);
                props::set_modified(&fd, modified, &path)?;
                let after = metadata::etag(&metadata::stat_fd(&fd, &path)?);
                props::rebind_checksums(&mut current, &before, &after);
            }
            let written = props::write_raw(&fd, &props::encode_or_empty(&current), &path);
            if let Ok(stx) = metadata::stat_fd(&fd, &path) {
                cache.forget(&stx);
            }
            written?;
            if let Some((parent, _)) = path.split_last() {
                let dir =
                    volume.open_beneath(&parent, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK)?;
                props::touch(&dir, &parent)?;
            }
            Ok(PatchPropertiesResponse {})
        })
        .await
    }

    async fn usage(&self, request: UsageRequest) -> Result<UsageResponse, Status> {
        let path = parse(&request.path)?;
        let volume = self.volume.clone();
        blocking(move || {
            let vfs = rustix::fs::fstatvfs(volume.root_fd()).map_err(|e| io_status(e, Op::Other, &path))?;
            Ok(UsageResponse {
                used_bytes: vfs
                    .f_blocks
                    .saturating_sub(vfs.f_bfree)
                    .saturating_mul(vfs.f_frsize),
                available_bytes: vfs.f_bavail.saturating_mul(vfs.f_frsize),
            })
        })
        .await
    }
}

/// The answer to a List whose batches come through `rx`: the first batch (or the error)
/// decides the call's own status, so a missing resource is a NOT_FOUND answer, not a
/// stream that fails later.
pub(crate) async fn first_batch_decides(
    mut rx: tokio::sync::mpsc::Receiver<Result<ListResponse, Status>>,
) -> Result<BoxStream<ListResponse>, Status> {
    match rx.recv().await {
        Some(Ok(first)) => {
            let rest = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
            Ok(futures_util::stream::iter([Ok(first)]).chain(rest).boxed())
        }
        Some(Err(status)) => Err(status),
        None => Err(Status::internal("the listing ended without an answer")),
    }
}

impl LocalFileIo {
    /// Lands the upload `from` as `header` says: its bytes become the file as a body's
    /// would, under the same checks (docs/uploads.md).
    async fn land(
        &self,
        header: WriteHeader,
        from: kubedav_api::fileio::FromUpload,
        mut body: BoxStream<Bytes>,
    ) -> Result<WriteResponse, Status> {
        if body
            .next()
            .await
            .transpose()?
            .is_some_and(|chunk| !chunk.is_empty())
        {
            return Err(Status::invalid_argument(
                "a write that lands an upload carries no body",
            ));
        }
        let path = parse(&header.path)?;
        let (uploads, keeper) = (self.uploads.clone(), self.keeper(""));
        let committed = blocking(move || {
            let (mut upload, landed) = uploads.land(&from, path, &header)?;
            upload.keep_replaced(keeper);
            let committed = upload.commit(&header, true)?;
            landed.clean_up();
            Ok(committed)
        })
        .await?;
        Ok(WriteResponse {
            info: Some(committed.info),
            created: committed.created,
            checksums: committed.checksums,
        })
    }
}

/// An upload that is either idle or busy writing a batch on the blocking pool.
enum UploadSlot {
    Ready(write::Upload),
    Writing(tokio::task::JoinHandle<Result<write::Upload, Status>>),
}

impl UploadSlot {
    /// The upload, once its current batch (if any) is written.
    async fn wait(self) -> Result<write::Upload, Status> {
        match self {
            UploadSlot::Ready(upload) => Ok(upload),
            UploadSlot::Writing(handle) => handle.await.map_err(errors::join_status)?,
        }
    }
}
