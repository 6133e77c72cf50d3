//! [`RemoteKeep`]: the [`Keep`] port over gRPC.

use super::{Budget, Caller};
use crate::observe::ObservedChannel;
use crate::stubs::keep as stubs;
use kubedav_api::keep::*;
use tonic::Status;

type Client = stubs::keep_client::KeepClient<ObservedChannel>;

/// The service's name in deadline errors.
const CALLEE: &str = "keep";

/// [`Keep`] over gRPC: what the gateway uses in microservices mode, served by the fileio
/// target.
#[derive(Clone)]
pub struct RemoteKeep {
    calls: Caller<Client>,
}

impl RemoteKeep {
    /// A client on `channel` (fileio's).
    pub fn new(channel: ObservedChannel) -> Self {
        Self {
            calls: Caller::new(stubs::keep_client::KeepClient::new(channel), CALLEE),
        }
    }

    /// Gives every call `timeout` instead of [`crate::deadline::DEFAULT_CALL_TIMEOUT`].
    pub fn with_call_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.calls.set_timeout(timeout);
        self
    }
}

#[async_trait::async_trait]
impl Keep for RemoteKeep {
    async fn list_trash(&self, request: ListTrashRequest) -> Result<ListTrashResponse, Status> {
        self.calls
            .unary(
                Budget::Call,
                request,
                |mut c, r| async move { c.list_trash(r).await },
            )
            .await
    }

    async fn restore_trash(&self, request: RestoreTrashRequest) -> Result<RestoreResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move {
                c.restore_trash(r).await
            })
            .await
    }

    async fn purge_trash(&self, request: PurgeTrashRequest) -> Result<PurgeTrashResponse, Status> {
        self.calls
            .unary(
                Budget::Call,
                request,
                |mut c, r| async move { c.purge_trash(r).await },
            )
            .await
    }

    async fn list_versions(&self, request: ListVersionsRequest) -> Result<ListVersionsResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move {
                c.list_versions(r).await
            })
            .await
    }

    async fn restore_version(&self, request: RestoreVersionRequest) -> Result<RestoreResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move {
                c.restore_version(r).await
            })
            .await
    }
}
