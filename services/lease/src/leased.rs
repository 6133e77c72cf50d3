//! [`LeasedFileIo`]: a fileio core whose every change is announced to the holders of
//! leases on its answers before it is answered. `kubedav_remote::server::FileIoGrpc`
//! serves one over gRPC; `--target=all` on object storage keeps the gateway's cache in front of one
//! in-process (an S3 request costs what a gRPC call does, and more).

use crate::{Leases, Requests, Watch};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use kubedav_api::BoxStream;
use kubedav_api::fileio::*;
use kubedav_api::lease::{Invalidation, WatchEvent};
use std::sync::Arc;
use tonic::Status;

/// A fileio core under leases: reads pass through, changes are announced
/// ([`Leases::change`]).
#[derive(Clone)]
pub struct LeasedFileIo {
    inner: Arc<dyn FileIo>,
    leases: Arc<Leases>,
}

impl LeasedFileIo {
    /// Wraps a fileio core.
    pub fn new(inner: Arc<dyn FileIo>) -> Self {
        Self {
            inner,
            leases: Leases::new("fileio"),
        }
    }

    /// The core itself, for the calls that change nothing (no lease work to add).
    pub fn core(&self) -> &Arc<dyn FileIo> {
        &self.inner
    }

    /// The leases it hands out, to close them when the service stops.
    pub fn leases(&self) -> Arc<Leases> {
        self.leases.clone()
    }

    /// Makes a change through the core under the leases, announcing `invalidation`
    /// whatever the outcome: a change that failed partway (a tree half deleted) may have
    /// changed something too. `change` is given the core, and runs to its end even if
    /// the caller goes away ([`Leases::change`]).
    async fn change<T: Send + 'static>(
        &self,
        change: impl FnOnce(Arc<dyn FileIo>) -> BoxFuture<'static, Result<T, Status>>,
        invalidation: Invalidation,
    ) -> Result<T, Status> {
        let change = change(self.inner.clone());
        self.leases.change(change, |_| Some(invalidation)).await
    }
}

/// A lease stream for a holder in this process, as the `Watch` call opens one over gRPC.
impl Watch for LeasedFileIo {
    fn watch(&self, requests: Requests) -> BoxFuture<'static, Result<BoxStream<WatchEvent>, Status>> {
        // A holder in this process: the process registers no replica of its own.
        let events = self.leases.watch(None, requests.map(Ok).boxed());
        Box::pin(async move { events })
    }
}

// Every method is written out, so a method the port gains with a default cannot be
// left to that default here, bypassing the core's own (clippy checks it).
#[async_trait::async_trait]
#[deny(clippy::missing_trait_methods)]
impl FileIo for LeasedFileIo {
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
        self.inner.read_to_send(request, map_above).await
    }

    async fn write(&self, header: WriteHeader, body: BoxStream<Bytes>) -> Result<WriteResponse, Status> {
        let changed = member(&header.path);
        self.change(
            |core| Box::pin(async move { core.write(header, body).await }),
            changed,
        )
        .await
    }

    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status> {
        let changed = tree(&request.path);
        self.change(
            |core| Box::pin(async move { core.delete(request).await }),
            changed,
        )
        .await
    }

    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status> {
        let changed = member(&request.path);
        self.change(|core| Box::pin(async move { core.mkdir(request).await }), changed)
            .await
    }

    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status> {
        let changed = tree(&request.destination);
        self.change(|core| Box::pin(async move { core.copy(request).await }), changed)
            .await
    }

    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status> {
        let changed = moved(&request.source, &request.destination);
        self.change(
            |core| Box::pin(async move { core.r#move(request).await }),
            changed,
        )
        .await
    }

    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status> {
        let changed = member(&request.path);
        self.change(
            |core| Box::pin(async move { core.patch_properties(request).await }),
            changed,
        )
        .await
    }

    async fn usage(&self, request: UsageRequest) -> Result<UsageResponse, Status> {
        self.inner.usage(request).await
    }

    fn kept_copy(&self, path: &str) -> Option<u64> {
        self.inner.kept_copy(path)
    }
}

/// A keep port (trash and versions) under the same leases as its fileio core: a restore
/// changes the tree, and is announced as a change through FileIo would be.
pub struct LeasedKeep {
    inner: Arc<dyn kubedav_api::keep::Keep>,
    leases: Arc<Leases>,
}

impl LeasedKeep {
    /// `inner`, announcing its restores on `leases` (its fileio core's).
    pub fn new(inner: Arc<dyn kubedav_api::keep::Keep>, leases: Arc<Leases>) -> Self {
        Self { inner, leases }
    }
}

#[async_trait::async_trait]
impl kubedav_api::keep::Keep for LeasedKeep {
    async fn list_trash(
        &self,
        request: kubedav_api::keep::ListTrashRequest,
    ) -> Result<kubedav_api::keep::ListTrashResponse, Status> {
        self.inner.list_trash(request).await
    }

    async fn restore_trash(
        &self,
        request: kubedav_api::keep::RestoreTrashRequest,
    ) -> Result<kubedav_api::keep::RestoreResponse, Status> {
        let changed = tree(&request.destination);
        let inner = self.inner.clone();
        let restore = async move { inner.restore_trash(request).await };
        self.leases.change(restore, |_| Some(changed)).await
    }

    async fn purge_trash(
        &self,
        request: kubedav_api::keep::PurgeTrashRequest,
    ) -> Result<kubedav_api::keep::PurgeTrashResponse, Status> {
        self.inner.purge_trash(request).await
    }

    async fn list_versions(
        &self,
        request: kubedav_api::keep::ListVersionsRequest,
    ) -> Result<kubedav_api::keep::ListVersionsResponse, Status> {
        self.inner.list_versions(request).await
    }

    async fn restore_version(
        &self,
        request: kubedav_api::keep::RestoreVersionRequest,
    ) -> Result<kubedav_api::keep::RestoreResponse, Status> {
        let changed = member(&request.path);
        let inner = self.inner.clone();
        let restore = async move { inner.restore_version(request).await };
        self.leases.change(restore, |_| Some(changed)).await
    }
}

/// What a change of one resource invalidates: it, its parent collection (whose
/// modification time, etag and members change with it, and whose Depth 1 listing shows
/// the resource's properties), and the parent's parent (whose listing shows the parent's
/// etag and time).
fn member(path: &str) -> Invalidation {
    Invalidation::paths(around(path))
}

/// What a change of a tree (DELETE, the destination of a COPY) invalidates: the tree,
/// the parent collection and its parent.
fn tree(path: &str) -> Invalidation {
    Invalidation {
        trees: vec![path.to_owned()],
        paths: around(path)[1..].to_vec(),
        ..Invalidation::default()
    }
}

/// What a MOVE invalidates: both trees, both parents and theirs.
fn moved(source: &str, destination: &str) -> Invalidation {
    let mut paths = around(source)[1..].to_vec();
    paths.extend_from_slice(&around(destination)[1..]);
    Invalidation {
        trees: vec![source.to_owned(), destination.to_owned()],
        paths,
        ..Invalidation::default()
    }
}

/// `path`, its parent collection, and the parent's parent.
fn around(path: &str) -> [String; 3] {
    let parent = parent(path);
    [
        path.to_owned(),
        parent.to_owned(),
        self::parent(parent).to_owned(),
    ]
}

/// The wire path of the collection holding `path` (`""`, the root, for a top-level name).
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}
