//! [`FileIoGrpc`]: any [`FileIo`] as the `kubedav.fileio.v1.FileIo` gRPC service.

use crate::stubs::fileio as stubs;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use kubedav_api::BoxStream;
use kubedav_api::fileio::*;
use kubedav_api::lease::{WatchEvent, WatchRequest};
use kubedav_api::pb::fileio::v1 as pb;
use kubedav_lease::{LeasedFileIo, Leases};
use std::convert::Infallible;
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

    /// The service, ready to be added to a server.
    pub fn into_service(self) -> FileIoService {
        let grpc = Arc::new(self);
        FileIoService {
            grpc: grpc.clone(),
            generated: stubs::file_io_server::FileIoServer::from_arc(grpc)
                .max_decoding_message_size(crate::frames::MAX_WHOLE_MESSAGE),
        }
    }

    /// Answers a `Read` call: its header and then its chunks.
    async fn read_messages(&self, request: ReadRequest) -> Result<BoxStream<pb::ReadResponse>, Status> {
        let ReadReply { header, chunks } = self.inner.core().read(request).await?;
        let header = pb::ReadResponse {
            item: Some(pb::read_response::Item::Header(header)),
        };
        let chunks = chunks.map_ok(|chunk| pb::ReadResponse {
            item: Some(pb::read_response::Item::Chunk(chunk)),
        });
        Ok(futures_util::stream::iter([Ok(header)]).chain(chunks).boxed())
    }

    /// Answers a `Write` call whose request messages are `messages`.
    async fn write_messages(
        &self,
        mut messages: BoxStream<pb::WriteRequest>,
    ) -> Result<WriteResponse, Status> {
        let header = match messages.next().await.transpose()? {
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
            messages,
            received: 0,
            ended: false,
        }
        .boxed();
        self.inner.write(header, body).await
    }
}

/// The `kubedav.fileio.v1.FileIo` service: tonic's generated server, except `Read` and
/// `Write`, which are framed by hand so that a file's bytes are not copied on their way
/// between the socket and the file ([`crate::frames`]).
#[derive(Clone)]
pub struct FileIoService {
    grpc: Arc<FileIoGrpc>,
    generated: stubs::file_io_server::FileIoServer<FileIoGrpc>,
}

impl tonic::server::NamedService for FileIoService {
    const NAME: &'static str = "kubedav.fileio.v1.FileIo";
}

type GeneratedFuture = <stubs::file_io_server::FileIoServer<FileIoGrpc> as tower_service::Service<
    http::Request<tonic::body::Body>,
>>::Future;

type ByHandFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<http::Response<tonic::body::Body>, Infallible>> + Send>,
>;

impl tower_service::Service<http::Request<tonic::body::Body>> for FileIoService {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = futures_util::future::Either<ByHandFuture, GeneratedFuture>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> {
        tower_service::Service::<http::Request<tonic::body::Body>>::poll_ready(&mut self.generated, cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        use crate::frames::{READ_PATH, WRITE_PATH, receive, send};
        use futures_util::future::Either;
        match request.uri().path() {
            READ_PATH => {
                let grpc = self.grpc.clone();
                let messages = receive::Frames::requests(request.into_body());
                Either::Left(Box::pin(async move {
                    let answered = async { grpc.read_messages(receive::unary(messages).await?).await };
                    Ok(match answered.await {
                        Ok(messages) => send::response(messages),
                        Err(status) => status.into_http(),
                    })
                }))
            }
            WRITE_PATH => {
                let grpc = self.grpc.clone();
                let messages = receive::Frames::requests(request.into_body()).boxed();
                Either::Left(Box::pin(async move {
                    Ok(match grpc.write_messages(messages).await {
                        Ok(reply) => send::response(futures_util::stream::iter([Ok(reply)])),
                        Err(status) => status.into_http(),
                    })
                }))
            }
            _ => Either::Right(self.generated.call(request)),
        }
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

    /// Not reached through [`FileIoService`], which frames `Read` by hand; kept as the
    /// reference the hand framing is tested against.
    async fn read(
        &self,
        request: tonic::Request<ReadRequest>,
    ) -> Result<tonic::Response<Self::ReadStream>, Status> {
        Ok(tonic::Response::new(
            self.read_messages(request.into_inner()).await?,
        ))
    }

    /// Not reached through [`FileIoService`], which frames `Write` by hand; kept as the
    /// reference the hand framing is tested against.
    async fn write(
        &self,
        request: tonic::Request<tonic::Streaming<pb::WriteRequest>>,
    ) -> Result<tonic::Response<WriteResponse>, Status> {
        let messages = request.into_inner().boxed();
        Ok(tonic::Response::new(self.write_messages(messages).await?))
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
        let followed = super::followed_registry(&request);
        let events = self
            .inner
            .leases()
            .watch(followed.as_deref(), request.into_inner().boxed())?;
        Ok(tonic::Response::new(events))
    }
}

/// The body of a Write as fileio's core sees it: the data messages, ending cleanly only
/// after the end message with the right size. A stream that stops without it (a
/// client's RST_STREAM CANCEL may read as a clean end) fails, so the upload is
/// discarded instead of committed truncated.
struct RequireEnd {
    messages: BoxStream<pb::WriteRequest>,
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
