//! [`FileIoGrpc`]: any [`FileIo`] as the `kubedav.fileio.v1.FileIo` gRPC service.

use super::LeasedFileIo;
use crate::lease::Leases;
use crate::stubs::fileio as stubs;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use kubedav_api::BoxStream;
use kubedav_api::fileio::*;
use kubedav_api::lease::{WatchEvent, WatchRequest};
use kubedav_api::pb::fileio::v1 as pb;
use std::sync::Arc;
use tonic::Status;

/// Exposes any [`FileIo`] implementation as the `kubedav.fileio.v1.FileIo` gRPC service,
/// with leases on what its callers keep ([`LeasedFileIo`]): every change is announced to
/// the lease holders before it is answered.
pub struct FileIoGrpc {
    inner: LeasedFileIo,
}

impl FileIoGrpc {
    /// Wraps a fileio core.
    pub fn new(inner: Arc<dyn FileIo>) -> Self {
        Self {
            inner: LeasedFileIo::new(inner),
        }
    }

    /// The leases it hands out, to close them when the service stops.
    pub fn leases(&self) -> Arc<Leases> {
        self.inner.leases()
    }

    /// The tonic service, ready to be added to a server.
    pub fn into_service(self) -> stubs::file_io_server::FileIoServer<Self> {
        stubs::file_io_server::FileIoServer::new(self).max_decoding_message_size(4 * 1024 * 1024)
    }
}

#[async_trait::async_trait]
impl stubs::file_io_server::FileIo for FileIoGrpc {
    type ListStream = BoxStream<ListResponse>;
    type ReadStream = BoxStream<pb::ReadResponse>;
    type WatchStream = BoxStream<WatchEvent>;

    async fn stat(
        &self,
        request: tonic::Request<StatRequest>,
    ) -> Result<tonic::Response<pb::StatResponse>, Status> {
        let info = self.inner.core().stat(request.into_inner()).await?;
        Ok(tonic::Response::new(pb::StatResponse { info: Some(info) }))
    }

    async fn list(
        &self,
        request: tonic::Request<ListRequest>,
    ) -> Result<tonic::Response<Self::ListStream>, Status> {
        Ok(tonic::Response::new(
            self.inner.core().list(request.into_inner()).await?,
        ))
    }

    async fn read(
        &self,
        request: tonic::Request<ReadRequest>,
    ) -> Result<tonic::Response<Self::ReadStream>, Status> {
        let ReadReply { header, chunks } = self.inner.core().read(request.into_inner()).await?;
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
        Ok(tonic::Response::new(self.inner.write(header, body).await?))
    }

    async fn delete(
        &self,
        request: tonic::Request<DeleteRequest>,
    ) -> Result<tonic::Response<DeleteResponse>, Status> {
        Ok(tonic::Response::new(
            self.inner.delete(request.into_inner()).await?,
        ))
    }

    async fn mkdir(
        &self,
        request: tonic::Request<MkdirRequest>,
    ) -> Result<tonic::Response<MkdirResponse>, Status> {
        Ok(tonic::Response::new(
            self.inner.mkdir(request.into_inner()).await?,
        ))
    }

    async fn copy(
        &self,
        request: tonic::Request<CopyRequest>,
    ) -> Result<tonic::Response<TransferResponse>, Status> {
        Ok(tonic::Response::new(self.inner.copy(request.into_inner()).await?))
    }

    async fn r#move(
        &self,
        request: tonic::Request<MoveRequest>,
    ) -> Result<tonic::Response<TransferResponse>, Status> {
        Ok(tonic::Response::new(
            self.inner.r#move(request.into_inner()).await?,
        ))
    }

    async fn patch_properties(
        &self,
        request: tonic::Request<PatchPropertiesRequest>,
    ) -> Result<tonic::Response<PatchPropertiesResponse>, Status> {
        Ok(tonic::Response::new(
            self.inner.patch_properties(request.into_inner()).await?,
        ))
    }

    async fn usage(
        &self,
        request: tonic::Request<UsageRequest>,
    ) -> Result<tonic::Response<UsageResponse>, Status> {
        Ok(tonic::Response::new(
            self.inner.core().usage(request.into_inner()).await?,
        ))
    }

    async fn watch(
        &self,
        request: tonic::Request<tonic::Streaming<WatchRequest>>,
    ) -> Result<tonic::Response<Self::WatchStream>, Status> {
        Ok(tonic::Response::new(
            self.inner.leases().watch(request.into_inner().boxed()),
        ))
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
