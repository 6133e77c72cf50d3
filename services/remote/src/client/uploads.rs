//! [`RemoteUploads`]: the [`Uploads`] port over gRPC.

use super::{Budget, Caller};
use crate::observe::ObservedChannel;
use crate::stubs::uploads as stubs;
use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::pb::fileio::v1::WriteEnd;
use kubedav_api::pb::uploads::v1::{AppendRequest, append_request::Item};
use kubedav_api::uploads::*;
use tonic::Status;

type Client = stubs::uploads_client::UploadsClient<ObservedChannel>;

/// The service's name in deadline errors.
const CALLEE: &str = "uploads";

/// [`Uploads`] over gRPC: what the gateway uses in microservices mode, served by the
/// fileio target. Any replica serves any upload: their state is with the data.
#[derive(Clone)]
pub struct RemoteUploads {
    calls: Caller<Client>,
}

impl RemoteUploads {
    /// A client on `channel` (fileio's).
    pub fn new(channel: ObservedChannel) -> Self {
        Self {
            calls: Caller::new(stubs::uploads_client::UploadsClient::new(channel), CALLEE),
        }
    }

    /// Gives every call `timeout` instead of [`crate::deadline::DEFAULT_CALL_TIMEOUT`].
    pub fn with_call_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.calls.set_timeout(timeout);
        self
    }
}

#[async_trait::async_trait]
impl Uploads for RemoteUploads {
    async fn create(&self, request: CreateUploadRequest) -> Result<Upload, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.create(r).await })
            .await
    }

    async fn get(&self, request: GetUploadRequest) -> Result<Upload, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.get(r).await })
            .await
    }

    /// The data goes as it arrives; a body that breaks off ends the stream without its
    /// end message, so fileio keeps what arrived (or, with a checksum, nothing), and the
    /// body's error is the answer. Like a write, no deadline bounds the whole call: the
    /// client's pace does, and the gateway's limits on a slow body.
    async fn append(&self, header: AppendHeader, data: BoxStream<Bytes>) -> Result<Upload, Status> {
        let (failure_tx, mut failure_rx) = tokio::sync::oneshot::channel::<Status>();
        let header = AppendRequest {
            item: Some(Item::Header(header)),
        };
        let messages = Messages {
            header: Some(header),
            data,
            failure: Some(failure_tx),
            sent: 0,
            ended: false,
        };
        let reply = self.calls.client().append(messages).await;
        // The body's error was told before its stream ended, so before fileio answered.
        if let Ok(status) = failure_rx.try_recv() {
            return Err(status);
        }
        Ok(reply?.into_inner())
    }

    async fn abort(&self, request: AbortUploadRequest) -> Result<AbortUploadResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.abort(r).await })
            .await
    }

    async fn list(&self, request: ListUploadsRequest) -> Result<ListUploadsResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.list(r).await })
            .await
    }
}

/// The header of an append, its data as messages, then its end message; on a data error, the error
/// goes to `failure` and the stream ends without an end message.
struct Messages {
    header: Option<AppendRequest>,
    data: BoxStream<Bytes>,
    failure: Option<tokio::sync::oneshot::Sender<Status>>,
    sent: u64,
    ended: bool,
}

impl futures_util::Stream for Messages {
    type Item = AppendRequest;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<AppendRequest>> {
        use std::task::Poll;
        if let Some(header) = self.header.take() {
            return Poll::Ready(Some(header));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        let item = match std::task::ready!(self.data.poll_next_unpin(cx)) {
            Some(Ok(chunk)) => {
                self.sent += chunk.len() as u64;
                Item::Data(chunk)
            }
            Some(Err(status)) => {
                self.ended = true;
                if let Some(tx) = self.failure.take() {
                    let _ = tx.send(status);
                }
                return Poll::Ready(None);
            }
            None => {
                self.ended = true;
                Item::End(WriteEnd { size: self.sent })
            }
        };
        Poll::Ready(Some(AppendRequest { item: Some(item) }))
    }
}
