//! [`RemoteFileIo`]: the [`FileIo`] port over gRPC.

use super::{Budget, Caller};
use crate::deadline;
use crate::frames::{READ_PATH, WRITE_PATH, receive};

use crate::observe::ObservedChannel;
use crate::stubs::fileio as stubs;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use kubedav_api::BoxStream;
use kubedav_api::fileio::*;
use kubedav_api::pb::fileio::v1 as pb;
use tonic::Status;

type Client = stubs::file_io_client::FileIoClient<ObservedChannel>;

/// The service's name in deadline errors.
const CALLEE: &str = "fileio";

/// [`FileIo`] over gRPC: what a gateway uses in microservices mode.
#[derive(Clone)]
pub struct RemoteFileIo {
    calls: Caller<Client>,
    /// For `Read` and `Write`, which are made by hand ([`crate::frames`]).
    channel: ObservedChannel,
}

impl RemoteFileIo {
    /// A client on `channel`: one connection, or a balanced set of them
    /// ([`crate::balance::channel`]), observed ([`ObservedChannel`]).
    pub fn new(channel: ObservedChannel) -> Self {
        let client = stubs::file_io_client::FileIoClient::new(channel.clone())
            .max_decoding_message_size(crate::frames::MAX_WHOLE_MESSAGE);
        Self {
            calls: Caller::new(client, CALLEE),
            channel,
        }
    }

    /// Gives every call `timeout` (`--rpc-timeout-seconds`) instead of
    /// [`crate::deadline::DEFAULT_CALL_TIMEOUT`]; tree operations get
    /// [`crate::deadline::TREE_FACTOR`] times as long.
    pub fn with_call_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.calls.set_timeout(timeout);
        self
    }
}

// Opens a lease stream (`Watch`): see [`kubedav_lease::hold`].
watch_on_the_stub!(RemoteFileIo);

#[async_trait::async_trait]
impl FileIo for RemoteFileIo {
    async fn stat(&self, request: StatRequest) -> Result<FileInfo, Status> {
        let reply = self
            .calls
            .unary(Budget::Call, request, |mut c, r| async move { c.stat(r).await })
            .await?;
        reply
            .info
            .ok_or_else(|| Status::internal("fileio answered Stat without info"))
    }

    async fn list(&self, request: ListRequest) -> Result<BoxStream<ListResponse>, Status> {
        let stream = deadline::within(CALLEE, self.calls.timeout(), async {
            Ok(self.calls.client().list(request).await?.into_inner().boxed())
        })
        .await?;
        Ok(deadline::each_within(CALLEE, self.calls.timeout(), stream))
    }

    async fn read(&self, request: ReadRequest) -> Result<ReadReply, Status> {
        let t = self.calls.timeout();
        let (stream, first) = deadline::within(CALLEE, t, async {
            let request = futures_util::stream::iter([Ok(request)]);
            let mut stream =
                receive::call::<_, _, _, _, pb::ReadResponse>(self.channel.clone(), READ_PATH, request)
                    .await?;
            let first = stream.next().await.transpose()?;
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
            chunks: deadline::each_within(CALLEE, self.calls.timeout(), chunks),
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
        let messages = first.chain(data).map(Ok);
        let call =
            async { receive::unary(receive::call(self.channel.clone(), WRITE_PATH, messages).await?).await };
        let timeout = self.calls.timeout();
        tokio::select! {
            Ok(status) = failure_rx => Err(status),
            reply = call => reply,
            // Dropping the call resets the stream: fileio discards the upload.
            _ = watch.stalled(timeout) => Err(deadline::exceeded(CALLEE, timeout)),
        }
    }
    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status> {
        self.calls
            .unary(Budget::Tree, request, |mut c, r| async move { c.delete(r).await })
            .await
    }

    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.mkdir(r).await })
            .await
    }

    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status> {
        self.calls
            .unary(Budget::Tree, request, |mut c, r| async move { c.copy(r).await })
            .await
    }

    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status> {
        self.calls
            .unary(Budget::Tree, request, |mut c, r| async move { c.r#move(r).await })
            .await
    }

    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move {
                c.patch_properties(r).await
            })
            .await
    }

    async fn usage(&self, request: UsageRequest) -> Result<UsageResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.usage(r).await })
            .await
    }
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
