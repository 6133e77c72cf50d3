//! [`KeepGrpc`]: any [`Keep`] as the `kubedav.keep.v1.Keep` gRPC service.

use crate::stubs::keep as stubs;
use kubedav_api::keep::*;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// Exposes any [`Keep`] implementation as the `kubedav.keep.v1.Keep` service.
pub struct KeepGrpc {
    inner: Arc<dyn Keep>,
}

impl KeepGrpc {
    /// Wraps a fileio core's trash and versions (under its leases).
    pub fn new(inner: Arc<dyn Keep>) -> Self {
        Self { inner }
    }

    /// The tonic service, ready to be added to a server.
    pub fn into_service(self) -> stubs::keep_server::KeepServer<Self> {
        stubs::keep_server::KeepServer::new(self)
    }
}

#[async_trait::async_trait]
impl stubs::keep_server::Keep for KeepGrpc {
    async fn list_trash(
        &self,
        request: Request<ListTrashRequest>,
    ) -> Result<Response<ListTrashResponse>, Status> {
        Ok(Response::new(self.inner.list_trash(request.into_inner()).await?))
    }

    async fn restore_trash(
        &self,
        request: Request<RestoreTrashRequest>,
    ) -> Result<Response<RestoreResponse>, Status> {
        Ok(Response::new(
            self.inner.restore_trash(request.into_inner()).await?,
        ))
    }

    async fn purge_trash(
        &self,
        request: Request<PurgeTrashRequest>,
    ) -> Result<Response<PurgeTrashResponse>, Status> {
        Ok(Response::new(self.inner.purge_trash(request.into_inner()).await?))
    }

    async fn list_versions(
        &self,
        request: Request<ListVersionsRequest>,
    ) -> Result<Response<ListVersionsResponse>, Status> {
        Ok(Response::new(
            self.inner.list_versions(request.into_inner()).await?,
        ))
    }

    async fn restore_version(
        &self,
        request: Request<RestoreVersionRequest>,
    ) -> Result<Response<RestoreResponse>, Status> {
        Ok(Response::new(
            self.inner.restore_version(request.into_inner()).await?,
        ))
    }
}
