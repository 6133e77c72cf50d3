//! [`DirectIo`]: large GET bodies sent from fileio's volume mounted in the gateway
//! too (`--fileio-volume`), with `sendfile`, once fileio has named the version
//! (fileio's `direct` module gives the argument; it implements [`MountedVolume`]); and
//! large PUT bodies written into the volume's incoming area mounted in the gateway
//! (`--fileio-incoming`, [`writes`]). Every other call, and every read or write this
//! cannot answer, goes to the port it wraps.
//!
//! The mount may be a network filesystem: the file is opened on the blocking pool,
//! never on a worker that serves other connections, and a mount that stalls (an open
//! over [`OPEN_WITHIN`]) or keeps showing other versions than fileio's ([`DECLINES`] in
//! a row) is left alone for [`PAUSE`], with a warning: fileio sends meanwhile.

use crate::cache::CachedFileIo;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use kubedav_api::BoxStream;
use kubedav_api::fileio::{
    CopyRequest, DeleteRequest, DeleteResponse, FileInfo, FileIo, IncomingArea, ListRequest, ListResponse,
    MkdirRequest, MkdirResponse, MountedVolume, MoveRequest, PatchPropertiesRequest, PatchPropertiesResponse,
    ReadReply, ReadRequest, StatRequest, TransferResponse, UsageRequest, UsageResponse, WriteHeader,
    WriteResponse, same_version,
};
use kubedav_lease::{Requests, Watch, WatchEvent};
use kubedav_metrics::Counter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock, Weak};
use std::time::{Duration, Instant};
use tonic::Status;

mod writes;

/// The longest an open and `statx` on the mount may take before fileio sends instead.
pub const OPEN_WITHIN: Duration = Duration::from_secs(1);
/// Declines in a row after which the mount is taken to show another volume.
pub const DECLINES: u32 = 32;
/// How long a mount that stalled or kept declining is left alone.
pub const PAUSE: Duration = Duration::from_secs(60);

/// Reads sent from this gateway's mount of the volume.
static SENT: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter(
        "kubedav_gateway_direct_reads_total",
        "Large GETs sent from the gateway's mount of fileio's volume (--fileio-volume).",
    )
});

/// Reads opened there but answered by fileio: the file changed meanwhile, or the mount
/// shows another file than fileio's (or stalled).
static DECLINED: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter(
        "kubedav_gateway_direct_reads_declined_total",
        "Large GETs opened on the gateway's mount of fileio's volume but sent by fileio, as \
         fileio named another version of the file (or none), or the mount stalled.",
    )
});

/// `inner` (fileio over gRPC), with large reads to send answered from a mount of
/// fileio's volume when a `Stat` names the version opened there. It sits under the
/// gateway's cache, so a file the cache keeps never reaches it; the `Stat` goes through
/// that cache once it is there ([`VersionsFrom::set`]), which answers it from a kept
/// `Stat` while fileio's lease holds it, with no call at all.
#[derive(Clone)]
pub struct DirectIo<F> {
    inner: F,
    /// The mount; `None`: every call goes to `inner`.
    mount: Option<Arc<Mount>>,
    versions: VersionsFrom,
    /// The incoming area; `None`: every write goes to `inner`.
    incoming: Option<Arc<dyn IncomingArea>>,
}

/// The gateway's mount of fileio's volume, and whether it is being left alone.
struct Mount {
    reader: Arc<dyn MountedVolume>,
    root: PathBuf,
    declined_in_a_row: AtomicU32,
    /// Milliseconds after [`EPOCH`] until which the mount is left alone.
    paused_until: AtomicU64,
}

/// What [`Mount::paused_until`] counts from.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now_ms() -> u64 {
    EPOCH.elapsed().as_millis() as u64
}

impl Mount {
    fn trying(&self) -> bool {
        self.paused_until.load(Ordering::Relaxed) <= now_ms()
    }

    fn sent(&self) {
        SENT.inc();
        self.declined_in_a_row.store(0, Ordering::Relaxed);
    }

    fn declined(&self) {
        DECLINED.inc();
        if self.declined_in_a_row.fetch_add(1, Ordering::Relaxed) + 1 == DECLINES {
            self.pause(&format!(
                "fileio named other versions than the mount shows for {DECLINES} large GETs in a row: \
                 is it the volume fileio serves (its --root)?"
            ));
        }
    }

    fn pause(&self, why: &str) {
        self.declined_in_a_row.store(0, Ordering::Relaxed);
        self.paused_until
            .store(now_ms() + PAUSE.as_millis() as u64, Ordering::Relaxed);
        tracing::warn!(
            mount = %self.root.display(),
            "--fileio-volume: {why} fileio sends every file for the next {} s",
            PAUSE.as_secs()
        );
    }
}

/// Where [`DirectIo`] asks which version of a file is current: the gateway's cache
/// over it, once set; else the port it wraps.
#[derive(Clone, Default)]
pub struct VersionsFrom(Arc<OnceLock<Weak<CachedFileIo>>>);

impl VersionsFrom {
    /// Asks `cache` (which holds the [`DirectIo`] this came from) from now on.
    pub fn set(&self, cache: &Arc<CachedFileIo>) {
        let _ = self.0.set(Arc::downgrade(cache));
    }

    fn get(&self) -> Option<Arc<CachedFileIo>> {
        self.0.get().and_then(Weak::upgrade)
    }
}

impl<F> DirectIo<F> {
    /// Wraps `inner`, reading from `volume` (mounted at `root`) if given. Registers the
    /// metrics either way: a gateway without a mount exports them at 0, as every
    /// catalogued metric is exported (docs/observability.md).
    pub fn new(inner: F, volume: Option<(Arc<dyn MountedVolume>, PathBuf)>) -> Self {
        LazyLock::force(&SENT);
        LazyLock::force(&DECLINED);
        writes::register_metrics();
        Self {
            inner,
            mount: volume.map(|(reader, root)| {
                Arc::new(Mount {
                    reader,
                    root,
                    declined_in_a_row: AtomicU32::new(0),
                    paused_until: AtomicU64::new(0),
                })
            }),
            versions: VersionsFrom::default(),
            incoming: None,
        }
    }

    /// Writes large bodies into `area`, the incoming area of fileio's volume mounted
    /// here, for fileio to land ([`writes`]).
    pub fn with_incoming(mut self, area: Arc<dyn IncomingArea>) -> Self {
        self.incoming = Some(area);
        self
    }

    /// Where this asks for versions; set it once the cache over this is made.
    pub fn versions(&self) -> VersionsFrom {
        self.versions.clone()
    }
}

impl<F: Watch> Watch for DirectIo<F> {
    fn watch(&self, requests: Requests) -> BoxFuture<'static, Result<BoxStream<WatchEvent>, Status>> {
        self.inner.watch(requests)
    }
}

impl<F: FileIo> DirectIo<F> {
    /// The version `Stat` names for `path`, with its validator: through the cache over
    /// this when set.
    async fn named(&self, path: &str) -> Result<FileInfo, Status> {
        match self.versions.get() {
            Some(cache) => cache.current_version(path).await,
            None => {
                self.inner
                    .stat(StatRequest {
                        path: path.to_owned(),
                    })
                    .await
            }
        }
    }

    /// The read sent from the mount, if it shows the version fileio names.
    async fn sent_from_mount(
        &self,
        mount: &Arc<Mount>,
        request: &ReadRequest,
        map_above: u64,
    ) -> Option<ReadReply> {
        let (opening, asked) = (mount.clone(), request.clone());
        let opened = tokio::task::spawn_blocking(move || opening.reader.open_to_send(&asked, map_above));
        let mut opened = match tokio::time::timeout(OPEN_WITHIN, opened).await {
            Ok(Ok(opened)) => opened?,
            _ => {
                DECLINED.inc();
                mount.pause(&format!(
                    "opening a file took over {} ms.",
                    OPEN_WITHIN.as_millis()
                ));
                return None;
            }
        };
        match self.named(&request.path).await {
            // fileio's own metadata goes out, as it would with the bytes it sent.
            Ok(info) if same_version(&info.validator, &opened.validator) && info.size == opened.size() => {
                mount.sent();
                opened.reply.header.info = Some(info);
                Some(opened.reply)
            }
            _ => {
                mount.declined();
                None
            }
        }
    }
}

// Every method is written out, so a method the port gains with a default cannot be
// left to that default here (clippy checks it).
#[async_trait::async_trait]
#[deny(clippy::missing_trait_methods)]
impl<F: FileIo> FileIo for DirectIo<F> {
    async fn stat(&self, request: StatRequest) -> Result<FileInfo, Status> {
        self.inner.stat(request).await
    }

    async fn list(&self, request: ListRequest) -> Result<BoxStream<ListResponse>, Status> {
        self.inner.list(request).await
    }

    async fn read(&self, request: ReadRequest) -> Result<ReadReply, Status> {
        self.inner.read(request).await
    }

    async fn read_to_send(&self, request: ReadRequest, map_above: u64) -> Result<ReadReply, Status> {
        if let Some(mount) = self.mount.as_ref().filter(|mount| mount.trying())
            && let Some(reply) = self.sent_from_mount(mount, &request, map_above).await
        {
            return Ok(reply);
        }
        self.inner.read_to_send(request, map_above).await
    }

    async fn write(&self, header: WriteHeader, body: BoxStream<Bytes>) -> Result<WriteResponse, Status> {
        if let Some(area) = self.incoming.as_ref().filter(|_| writes::suits(&header)) {
            return writes::write_through(&self.inner, area, header, body).await;
        }
        self.inner.write(header, body).await
    }

    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status> {
        self.inner.delete(request).await
    }

    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status> {
        self.inner.mkdir(request).await
    }

    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status> {
        self.inner.copy(request).await
    }

    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status> {
        self.inner.r#move(request).await
    }

    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status> {
        self.inner.patch_properties(request).await
    }

    async fn usage(&self, request: UsageRequest) -> Result<UsageResponse, Status> {
        self.inner.usage(request).await
    }

    fn kept_copy(&self, path: &str) -> Option<u64> {
        self.inner.kept_copy(path)
    }
}
