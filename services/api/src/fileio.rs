//! The fileio port: [`FileIo`], its gRPC client adapter [`RemoteFileIo`] and its gRPC
//! server adapter [`FileIoGrpc`].

use crate::BoxStream;
use crate::deadline;
use crate::lease::{Invalidation, Leases, WatchEvent, WatchRequest};
use crate::pb::fileio::v1 as pb;
use crate::rpc::ObservedChannel;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use std::sync::Arc;
use tonic::Status;

pub use pb::{
    CopyRequest, DeleteRequest, DeleteResponse, Depth, FileInfo, ListEntry, ListRequest, ListResponse,
    MkdirRequest, MkdirResponse, MoveRequest, PatchPropertiesRequest, PatchPropertiesResponse, ReadChunk,
    ReadHeader, ReadRequest, StatRequest, TransferResponse, UsageRequest, UsageResponse, WriteHeader,
    WriteResponse,
};

/// An open read: the header (metadata and resolved ranges) and the data that follows.
pub struct ReadReply {
    /// Metadata of the file and the ranges `chunks` will carry, in order.
    pub header: ReadHeader,
    /// The data, range by range, in chunks of at most [`crate::MAX_CHUNK_BYTES`].
    pub chunks: BoxStream<ReadChunk>,
}

/// The volume, as the gateway sees it. Implemented by fileio's core (local) and by
/// [`RemoteFileIo`] (over gRPC). See `proto/kubedav/fileio/v1/fileio.proto` for the
/// meaning of each call and its error codes.
#[async_trait::async_trait]
pub trait FileIo: Send + Sync + 'static {
    /// Metadata of one resource.
    async fn stat(&self, request: StatRequest) -> Result<FileInfo, Status>;
    /// A resource and its members, in batches.
    async fn list(&self, request: ListRequest) -> Result<BoxStream<ListResponse>, Status>;
    /// A streaming read of whole file or byte ranges.
    async fn read(&self, request: ReadRequest) -> Result<ReadReply, Status>;
    /// A streaming atomic write.
    async fn write(&self, header: WriteHeader, body: BoxStream<Bytes>) -> Result<WriteResponse, Status>;
    /// Delete a resource (recursively for a collection).
    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status>;
    /// Create a collection.
    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status>;
    /// Copy a resource.
    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status>;
    /// Move a resource.
    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status>;
    /// Set and remove dead properties.
    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status>;
    /// Space used and available.
    async fn usage(&self, request: UsageRequest) -> Result<UsageResponse, Status>;
}

type Client = pb::file_io_client::FileIoClient<ObservedChannel>;

/// The service's name in deadline errors.
const CALLEE: &str = "fileio";

/// [`FileIo`] over gRPC: what a gateway uses in microservices mode.
#[derive(Clone)]
pub struct RemoteFileIo {
    client: Client,
}

impl RemoteFileIo {
    /// A client on `channel`: one connection, or a balanced set of them
    /// (`kubedav_kit::balance::channel`), observed ([`ObservedChannel`]).
    pub fn new(channel: ObservedChannel) -> Self {
        let client =
            pb::file_io_client::FileIoClient::new(channel).max_decoding_message_size(4 * 1024 * 1024);
        Self { client }
    }
}

impl RemoteFileIo {
    /// Opens a lease stream (`Watch`): see [`crate::lease::hold`]. It lives as long as the
    /// lease, so it has no deadline; the lease itself notices a silent service.
    pub fn watch(
        &self,
        requests: crate::lease::Requests,
    ) -> impl std::future::Future<Output = Result<BoxStream<WatchEvent>, Status>> + Send + use<> {
        let mut client = self.client.clone();
        async move { Ok(client.watch(requests).await?.into_inner().boxed()) }
    }
}

#[async_trait::async_trait]
impl FileIo for RemoteFileIo {
    async fn stat(&self, request: StatRequest) -> Result<FileInfo, Status> {
        let t = deadline::call_timeout();
        let reply = deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .stat(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await?;
        reply
            .info
            .ok_or_else(|| Status::internal("fileio answered Stat without info"))
    }

    async fn list(&self, request: ListRequest) -> Result<BoxStream<ListResponse>, Status> {
        let stream = deadline::within(CALLEE, deadline::call_timeout(), async {
            Ok(self.client.clone().list(request).await?.into_inner().boxed())
        })
        .await?;
        Ok(deadline::each_within(CALLEE, stream))
    }

    async fn read(&self, request: ReadRequest) -> Result<ReadReply, Status> {
        let t = deadline::call_timeout();
        let (stream, first) = deadline::within(CALLEE, t, async {
            let mut stream = self.client.clone().read(request).await?.into_inner();
            let first = stream.message().await?;
            Ok((stream, first))
        })
        .await?;
        let header = match first {
            Some(pb::ReadResponse {
                item: Some(pb::read_response::Item::Header(header)),
            }) => header,
            _ => return Err(Status::internal("fileio answered Read without a header")),
        };
        let announced: u64 = header.ranges.iter().map(|r| r.last - r.first + 1).sum();
        let chunks = stream
            .map_ok(|message| match message.item {
                Some(pb::read_response::Item::Chunk(chunk)) => Ok(chunk),
                _ => Err(Status::internal("fileio sent an unexpected Read message")),
            })
            .map(|result| result.and_then(|inner| inner))
            .boxed();
        let chunks = ending_with_the_call(chunks, announced);
        Ok(ReadReply {
            header,
            chunks: deadline::each_within(CALLEE, chunks),
        })
    }

    async fn write(&self, header: WriteHeader, body: BoxStream<Bytes>) -> Result<WriteResponse, Status> {
        // A body that fails (the HTTP client went away, or sent less than it declared) must
        // cancel the RPC, never end it cleanly: a clean end would let fileio commit a
        // truncated file. So on an error the outgoing stream parks forever and reports the
        // error here; returning drops the call, which resets the HTTP/2 stream, and fileio
        // discards the upload.
        let (failure_tx, failure_rx) = tokio::sync::oneshot::channel::<Status>();
        let first = futures_util::stream::iter([pb::WriteRequest {
            item: Some(pb::write_request::Item::Header(header)),
        }]);
        let watch = deadline::WriteWatch::new();
        let data = CancelOnError {
            body,
            failure: Some(failure_tx),
            sent: 0,
            ended: false,
            watch: watch.clone(),
        };
        let mut client = self.client.clone();
        let call = client.write(first.chain(data));
        let timeout = deadline::call_timeout();
        tokio::select! {
            Ok(status) = failure_rx => Err(status),
            reply = call => Ok(reply?.into_inner()),
            // Dropping the call resets the stream: fileio discards the upload.
            _ = watch.stalled(timeout) => Err(deadline::exceeded(CALLEE, timeout)),
        }
    }
    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status> {
        let t = deadline::call_timeout() * deadline::TREE_FACTOR;
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .delete(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }

    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status> {
        let t = deadline::call_timeout();
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .mkdir(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }

    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status> {
        let t = deadline::call_timeout() * deadline::TREE_FACTOR;
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .copy(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }

    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status> {
        let t = deadline::call_timeout() * deadline::TREE_FACTOR;
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .r#move(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }

    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status> {
        let t = deadline::call_timeout();
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .patch_properties(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }

    async fn usage(&self, request: UsageRequest) -> Result<UsageResponse, Status> {
        let t = deadline::call_timeout();
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .usage(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }
}

/// Exposes any [`FileIo`] implementation as the `kubedav.fileio.v1.FileIo` gRPC service,
/// with leases on what its callers keep ([`Leases`]): every change is announced to
/// the lease holders before it is answered.
pub struct FileIoGrpc {
    inner: Arc<dyn FileIo>,
    leases: Arc<Leases>,
}

impl FileIoGrpc {
    /// Wraps a fileio core.
    pub fn new(inner: Arc<dyn FileIo>) -> Self {
        Self {
            inner,
            leases: Leases::new("fileio"),
        }
    }

    /// The leases it hands out, to close them when the service stops.
    pub fn leases(&self) -> Arc<Leases> {
        self.leases.clone()
    }

    /// Makes a change through the core under the leases ([`Leases::change`]), announcing
    /// `invalidation` whatever the outcome: a change that failed partway (a tree half
    /// deleted) may have changed something too.
    async fn change<T>(
        &self,
        change: impl std::future::Future<Output = Result<T, Status>>,
        invalidation: Invalidation,
    ) -> Result<T, Status> {
        self.leases.change(change, |_| Some(invalidation)).await
    }

    /// The tonic service, ready to be added to a server.
    pub fn into_service(self) -> pb::file_io_server::FileIoServer<Self> {
        pb::file_io_server::FileIoServer::new(self).max_decoding_message_size(4 * 1024 * 1024)
    }
}

#[async_trait::async_trait]
impl pb::file_io_server::FileIo for FileIoGrpc {
    type ListStream = BoxStream<ListResponse>;
    type ReadStream = BoxStream<pb::ReadResponse>;
    type WatchStream = BoxStream<WatchEvent>;

    async fn stat(
        &self,
        request: tonic::Request<StatRequest>,
    ) -> Result<tonic::Response<pb::StatResponse>, Status> {
        let info = self.inner.stat(request.into_inner()).await?;
        Ok(tonic::Response::new(pb::StatResponse { info: Some(info) }))
    }

    async fn list(
        &self,
        request: tonic::Request<ListRequest>,
    ) -> Result<tonic::Response<Self::ListStream>, Status> {
        Ok(tonic::Response::new(self.inner.list(request.into_inner()).await?))
    }

    async fn read(
        &self,
        request: tonic::Request<ReadRequest>,
    ) -> Result<tonic::Response<Self::ReadStream>, Status> {
        let ReadReply { header, chunks } = self.inner.read(request.into_inner()).await?;
        let header = pb::ReadResponse {
            item: Some(pb::read_response::Item::Header(header)),
        };
        let chunks = chunks.map_ok(|chunk| pb::ReadResponse {
            item: Some(pb::read_response::Item::Chunk(chunk)),
        });
        Ok(tonic::Response::new(
            futures_util::stream::iter([Ok(header)]).chain(chunks).boxed(),
        ))
    }

    async fn write(
        &self,
        request: tonic::Request<tonic::Streaming<pb::WriteRequest>>,
    ) -> Result<tonic::Response<WriteResponse>, Status> {
        let mut stream = request.into_inner();
        let header = match stream.message().await? {
            Some(pb::WriteRequest {
                item: Some(pb::write_request::Item::Header(header)),
            }) => header,
            _ => {
                return Err(Status::invalid_argument(
                    "the first Write message must be the header",
                ));
            }
        };
        let body = RequireEnd {
            messages: stream,
            received: 0,
            ended: false,
        }
        .boxed();
        let changed = member(&header.path);
        let answer = self.change(self.inner.write(header, body), changed).await?;
        Ok(tonic::Response::new(answer))
    }

    async fn delete(
        &self,
        request: tonic::Request<DeleteRequest>,
    ) -> Result<tonic::Response<DeleteResponse>, Status> {
        let request = request.into_inner();
        let changed = tree(&request.path);
        let answer = self.change(self.inner.delete(request), changed).await?;
        Ok(tonic::Response::new(answer))
    }

    async fn mkdir(
        &self,
        request: tonic::Request<MkdirRequest>,
    ) -> Result<tonic::Response<MkdirResponse>, Status> {
        let request = request.into_inner();
        let changed = member(&request.path);
        let answer = self.change(self.inner.mkdir(request), changed).await?;
        Ok(tonic::Response::new(answer))
    }

    async fn copy(
        &self,
        request: tonic::Request<CopyRequest>,
    ) -> Result<tonic::Response<TransferResponse>, Status> {
        let request = request.into_inner();
        let changed = tree(&request.destination);
        let answer = self.change(self.inner.copy(request), changed).await?;
        Ok(tonic::Response::new(answer))
    }

    async fn r#move(
        &self,
        request: tonic::Request<MoveRequest>,
    ) -> Result<tonic::Response<TransferResponse>, Status> {
        let request = request.into_inner();
        let changed = moved(&request.source, &request.destination);
        let answer = self.change(self.inner.r#move(request), changed).await?;
        Ok(tonic::Response::new(answer))
    }

    async fn patch_properties(
        &self,
        request: tonic::Request<PatchPropertiesRequest>,
    ) -> Result<tonic::Response<PatchPropertiesResponse>, Status> {
        let request = request.into_inner();
        let changed = member(&request.path);
        let answer = self.change(self.inner.patch_properties(request), changed).await?;
        Ok(tonic::Response::new(answer))
    }

    async fn usage(
        &self,
        request: tonic::Request<UsageRequest>,
    ) -> Result<tonic::Response<UsageResponse>, Status> {
        Ok(tonic::Response::new(
            self.inner.usage(request.into_inner()).await?,
        ))
    }

    async fn watch(
        &self,
        request: tonic::Request<tonic::Streaming<WatchRequest>>,
    ) -> Result<tonic::Response<Self::WatchStream>, Status> {
        Ok(tonic::Response::new(
            self.leases.watch(request.into_inner().boxed()),
        ))
    }
}

/// What a change of one resource invalidates: it, and its parent collection (whose
/// modification time and members change with it, and whose Depth 1 listing shows the
/// resource's properties).
fn member(path: &str) -> Invalidation {
    Invalidation::paths([path.to_owned(), parent(path).to_owned()])
}

/// What a change of a tree (DELETE, the destination of a COPY) invalidates: the tree
/// and the parent collection.
fn tree(path: &str) -> Invalidation {
    Invalidation {
        trees: vec![path.to_owned()],
        paths: vec![parent(path).to_owned()],
        ..Invalidation::default()
    }
}

/// What a MOVE invalidates: both trees and both parents.
fn moved(source: &str, destination: &str) -> Invalidation {
    Invalidation {
        trees: vec![source.to_owned(), destination.to_owned()],
        paths: vec![parent(source).to_owned(), parent(destination).to_owned()],
        ..Invalidation::default()
    }
}

/// The wire path of the collection holding `path` (`""`, the root, for a top-level name).
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

/// The body of a Write call: data chunks until the source ends; on a source error it
/// reports the error once and then stays pending forever, so the RPC is never ended
/// cleanly with a truncated body (see [`RemoteFileIo::write`]).
struct CancelOnError {
    body: BoxStream<Bytes>,
    failure: Option<tokio::sync::oneshot::Sender<Status>>,
    /// Body bytes sent so far.
    sent: u64,
    /// Whether the end message went out.
    ended: bool,
    /// Told who the upload waits for: a stuck fileio stops polling this stream.
    watch: deadline::WriteWatch,
}

impl futures_util::Stream for CancelOnError {
    type Item = pb::WriteRequest;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        if self.failure.is_none() {
            return Poll::Pending;
        }
        // Polled: fileio took what was handed over before.
        self.watch.progressed();
        let polled = self.poll_body(cx);
        // Handing a message over (or having ended) means waiting for fileio again;
        // pending means waiting for the client.
        self.watch.waiting(polled.is_ready());
        polled
    }
}

impl CancelOnError {
    fn poll_body(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<pb::WriteRequest>> {
        use std::task::Poll;
        match self.body.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(data))) => {
                self.sent += data.len() as u64;
                Poll::Ready(Some(pb::WriteRequest {
                    item: Some(pb::write_request::Item::Data(data)),
                }))
            }
            Poll::Ready(Some(Err(status))) => {
                if let Some(tx) = self.failure.take() {
                    let _ = tx.send(status);
                }
                Poll::Pending
            }
            // The body is complete: say so, so that fileio may commit.
            Poll::Ready(None) if !self.ended => {
                self.ended = true;
                Poll::Ready(Some(pb::WriteRequest {
                    item: Some(pb::write_request::Item::End(pb::WriteEnd { size: self.sent })),
                }))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The body of a Write as fileio's core sees it: the data messages, ending cleanly only
/// after the end message with the right size. A stream that stops without it (tonic
/// reports a client's RST_STREAM CANCEL as a clean end) fails, so the upload is
/// discarded instead of committed truncated.
struct RequireEnd {
    messages: tonic::Streaming<pb::WriteRequest>,
    received: u64,
    ended: bool,
}

impl futures_util::Stream for RequireEnd {
    type Item = Result<Bytes, Status>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        loop {
            let message = match futures_util::ready!(self.messages.poll_next_unpin(cx)) {
                Some(Ok(message)) => message,
                Some(Err(status)) => return Poll::Ready(Some(Err(status))),
                None if self.ended => return Poll::Ready(None),
                None => {
                    return Poll::Ready(Some(Err(Status::cancelled(
                        "the upload stopped before its end message; nothing was written",
                    ))));
                }
            };
            let problem = match message.item {
                Some(pb::write_request::Item::Data(_)) | Some(pb::write_request::Item::End(_))
                    if self.ended =>
                {
                    "nothing may follow the Write end message"
                }
                Some(pb::write_request::Item::Data(data)) => {
                    self.received += data.len() as u64;
                    return Poll::Ready(Some(Ok(data)));
                }
                Some(pb::write_request::Item::End(end)) if end.size == self.received => {
                    self.ended = true;
                    continue;
                }
                Some(pb::write_request::Item::End(_)) => {
                    "the Write end message's size differs from the data received"
                }
                Some(pb::write_request::Item::Header(_)) | None => {
                    "only data and the end may follow the Write header"
                }
            };
            return Poll::Ready(Some(Err(Status::invalid_argument(problem))));
        }
    }
}

/// The chunks of a read, holding back the last of the `announced` bytes until the call
/// has ended: the HTTP layer stops reading a body once it has all its bytes, and a call
/// dropped before its status arrives resets its HTTP/2 stream (see `run.rs` in the
/// binary for what too many resets cost). Reading the end also surfaces a status that
/// fails the call after its data. An empty read is ended before it is handed on.
fn ending_with_the_call(chunks: BoxStream<ReadChunk>, announced: u64) -> BoxStream<ReadChunk> {
    async fn end(chunks: &mut BoxStream<ReadChunk>) -> Result<(), Status> {
        match chunks.next().await {
            None => Ok(()),
            Some(Err(status)) => Err(status),
            Some(Ok(_)) => Err(Status::internal(
                "fileio sent more data than the ranges it announced",
            )),
        }
    }
    futures_util::stream::unfold(
        (chunks, announced, false),
        |(mut chunks, mut remaining, ended)| async move {
            if ended {
                return None;
            }
            if remaining == 0 {
                return end(&mut chunks)
                    .await
                    .err()
                    .map(|status| (Err(status), (chunks, 0, true)));
            }
            match chunks.next().await {
                Some(Ok(chunk)) => {
                    remaining = remaining.saturating_sub(chunk.data.len() as u64);
                    if remaining > 0 {
                        return Some((Ok(chunk), (chunks, remaining, false)));
                    }
                    let last = end(&mut chunks).await.map(|()| chunk);
                    Some((last, (chunks, 0, true)))
                }
                Some(Err(status)) => Some((Err(status), (chunks, 0, true))),
                None => None,
            }
        },
    )
    .boxed()
}
