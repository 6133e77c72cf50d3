//! [`RemoteRecords`]: the [`Records`] port over gRPC.

use super::{Budget, Caller};
use crate::observe::ObservedChannel;
use crate::stubs::records as stubs;
use kubedav_api::records::*;
use tonic::Status;

type Client = stubs::records_client::RecordsClient<ObservedChannel>;

/// The service's name in deadline errors.
const CALLEE: &str = "records";

/// [`Records`] over gRPC: what auth and the gateway use in microservices mode, served by
/// the fileio target.
#[derive(Clone)]
pub struct RemoteRecords {
    calls: Caller<Client>,
}

impl RemoteRecords {
    /// A client on `channel` (fileio's).
    pub fn new(channel: ObservedChannel) -> Self {
        Self {
            calls: Caller::new(stubs::records_client::RecordsClient::new(channel), CALLEE),
        }
    }

    /// Gives every call `timeout` instead of [`crate::deadline::DEFAULT_CALL_TIMEOUT`].
    pub fn with_call_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.calls.set_timeout(timeout);
        self
    }
}

#[async_trait::async_trait]
impl Records for RemoteRecords {
    async fn get(&self, request: GetRecordRequest) -> Result<GetRecordResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.get(r).await })
            .await
    }

    async fn put(&self, request: PutRecordRequest) -> Result<PutRecordResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.put(r).await })
            .await
    }

    async fn delete(&self, request: DeleteRecordRequest) -> Result<DeleteRecordResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.delete(r).await })
            .await
    }

    async fn list(&self, request: ListRecordsRequest) -> Result<ListRecordsResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.list(r).await })
            .await
    }
}
