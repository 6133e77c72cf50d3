//! [`UploadsGrpc`]: any [`Uploads`] as the `kubedav.uploads.v1.Uploads` gRPC service.

use crate::stubs::uploads as stubs;
use futures_util::StreamExt;
use kubedav_api::pb::uploads::v1::{AppendRequest, append_request::Item};
use kubedav_api::uploads::*;
use std::sync::Arc;
use tonic::{Request, Response, Status, Streaming};

/// Exposes any [`Uploads`] implementation as the `kubedav.uploads.v1.Uploads` service.
pub struct UploadsGrpc {
    inner: Arc<dyn Uploads>,
}

impl UploadsGrpc {
    /// Wraps a fileio core's uploads.
    pub fn new(inner: Arc<dyn Uploads>) -> Self {
        Self { inner }
    }

    /// The tonic service, ready to be added to a server.
    pub fn into_service(self) -> stubs::uploads_server::UploadsServer<Self> {
        stubs::uploads_server::UploadsServer::new(self)
    }
}

#[async_trait::async_trait]
impl stubs::uploads_server::Uploads for UploadsGrpc {
    async fn create(&self, request: Request<CreateUploadRequest>) -> Result<Response<Upload>, Status> {
        Ok(Response::new(self.inner.create(request.into_inner()).await?))
    }

    async fn get(&self, request: Request<GetUploadRequest>) -> Result<Response<Upload>, Status> {
        Ok(Response::new(self.inner.get(request.into_inner()).await?))
    }

    /// The data until the end message; a stream that stops without it (the gateway's
    /// client broke off, or the gateway went away) ends the data with CANCELLED.
    async fn append(&self, request: Request<Streaming<AppendRequest>>) -> Result<Response<Upload>, Status> {
        let mut messages = request.into_inner();
        let header = match messages.next().await.transpose()? {
            Some(AppendRequest {
                item: Some(Item::Header(header)),
            }) => header,
            _ => {
                return Err(Status::invalid_argument(
                    "the first Append message must be the header",
                ));
            }
        };
        let data = futures_util::stream::unfold(
            (messages, 0u64, false),
            |(mut messages, received, ended)| async move {
                if ended {
                    return None;
                }
                let broke = || Status::cancelled("the upload's data broke off");
                match messages.next().await {
                    Some(Ok(AppendRequest {
                        item: Some(Item::Data(chunk)),
                    })) => {
                        let received = received + chunk.len() as u64;
                        Some((Ok(chunk), (messages, received, false)))
                    }
                    Some(Ok(AppendRequest {
                        item: Some(Item::End(end)),
                    })) if end.size == received => None,
                    Some(Ok(_)) => Some((
                        Err(Status::invalid_argument("an unexpected Append message")),
                        (messages, received, true),
                    )),
                    Some(Err(_)) | None => Some((Err(broke()), (messages, received, true))),
                }
            },
        )
        .boxed();
        Ok(Response::new(self.inner.append(header, data).await?))
    }

    async fn abort(
        &self,
        request: Request<AbortUploadRequest>,
    ) -> Result<Response<AbortUploadResponse>, Status> {
        Ok(Response::new(self.inner.abort(request.into_inner()).await?))
    }

    async fn list(
        &self,
        request: Request<ListUploadsRequest>,
    ) -> Result<Response<ListUploadsResponse>, Status> {
        Ok(Response::new(self.inner.list(request.into_inner()).await?))
    }
}
