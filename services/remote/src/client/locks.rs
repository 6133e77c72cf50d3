//! [`RemoteLocks`]: the [`Locks`] port over gRPC.

use super::{Budget, Caller};

use crate::observe::ObservedChannel;
use crate::stubs::locks as stubs;
use kubedav_api::locks::*;
use tonic::Status;

type Client = stubs::locks_client::LocksClient<ObservedChannel>;

/// The service's name in deadline errors.
const CALLEE: &str = "locks";

/// [`Locks`] over gRPC: what a gateway uses in microservices mode.
#[derive(Clone)]
pub struct RemoteLocks {
    calls: Caller<Client>,
}

impl RemoteLocks {
    /// A client on `channel`: one connection, or a balanced set of them
    /// ([`crate::balance::channel`]), observed ([`ObservedChannel`]).
    pub fn new(channel: ObservedChannel) -> Self {
        Self {
            calls: Caller::new(stubs::locks_client::LocksClient::new(channel), CALLEE),
        }
    }

    /// Gives every call `timeout` (`--rpc-timeout-seconds`) instead of
    /// [`crate::deadline::DEFAULT_CALL_TIMEOUT`].
    pub fn with_call_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.calls.set_timeout(timeout);
        self
    }
}

// Opens a lease stream (`Watch`): see [`kubedav_lease::hold`].
watch_on_the_stub!(RemoteLocks);

#[async_trait::async_trait]
impl Locks for RemoteLocks {
    async fn lock(&self, request: LockRequest) -> Result<LockResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.lock(r).await })
            .await
    }

    async fn refresh(&self, request: RefreshRequest) -> Result<RefreshResponse, Status> {
        self.calls
            .unary(
                Budget::Call,
                request,
                |mut c, r| async move { c.refresh(r).await },
            )
            .await
    }

    async fn unlock(&self, request: UnlockRequest) -> Result<UnlockResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.unlock(r).await })
            .await
    }

    async fn check_write(&self, request: CheckWriteRequest) -> Result<CheckWriteResponse, Status> {
        self.calls
            .unary(
                Budget::Call,
                request,
                |mut c, r| async move { c.check_write(r).await },
            )
            .await
    }

    async fn discover(&self, request: DiscoverRequest) -> Result<DiscoverResponse, Status> {
        self.calls
            .unary(
                Budget::Call,
                request,
                |mut c, r| async move { c.discover(r).await },
            )
            .await
    }

    async fn release(&self, request: ReleaseRequest) -> Result<ReleaseResponse, Status> {
        self.calls
            .unary(
                Budget::Call,
                request,
                |mut c, r| async move { c.release(r).await },
            )
            .await
    }
}
