//! [`RecordsGrpc`]: any [`Records`] as the `kubedav.records.v1.Records` gRPC service.

use crate::stubs::records as stubs;
use kubedav_api::records::*;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// Exposes any [`Records`] implementation as the `kubedav.records.v1.Records` service.
pub struct RecordsGrpc {
    inner: Arc<dyn Records>,
}

impl RecordsGrpc {
    /// Wraps a fileio core's records.
    pub fn new(inner: Arc<dyn Records>) -> Self {
        Self { inner }
    }

    /// The tonic service, ready to be added to a server.
    pub fn into_service(self) -> stubs::records_server::RecordsServer<Self> {
        stubs::records_server::RecordsServer::new(self)
    }
}

#[async_trait::async_trait]
impl stubs::records_server::Records for RecordsGrpc {
    async fn get(&self, request: Request<GetRecordRequest>) -> Result<Response<GetRecordResponse>, Status> {
        Ok(Response::new(self.inner.get(request.into_inner()).await?))
    }

    async fn put(&self, request: Request<PutRecordRequest>) -> Result<Response<PutRecordResponse>, Status> {
        Ok(Response::new(self.inner.put(request.into_inner()).await?))
    }

    async fn delete(
        &self,
        request: Request<DeleteRecordRequest>,
    ) -> Result<Response<DeleteRecordResponse>, Status> {
        Ok(Response::new(self.inner.delete(request.into_inner()).await?))
    }

    async fn list(
        &self,
        request: Request<ListRecordsRequest>,
    ) -> Result<Response<ListRecordsResponse>, Status> {
        Ok(Response::new(self.inner.list(request.into_inner()).await?))
    }
}
