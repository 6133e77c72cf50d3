//! The locks port: [`Locks`], the WebDAV lock manager as the gateway sees it. The gRPC
//! adapters are `kubedav_remote::client::RemoteLocks` and
//! `kubedav_remote::server::LocksGrpc`.

use crate::pb::locks::v1 as pb;
use tonic::Status;

pub use pb::{
    ActiveLock, CheckWriteRequest, CheckWriteResponse, Condition, ConditionList, DiscoverRequest,
    DiscoverResponse, LockDepth, LockRequest, LockResponse, RefreshRequest, RefreshResponse, ReleaseRequest,
    ReleaseResponse, ResourceLocks, Scope, TaggedLists, UnlockRequest, UnlockResponse, WriteTarget,
    check_write_response, condition,
};

/// The WebDAV lock manager, as the gateway sees it. Implemented by the locks service's
/// core (local) and by `RemoteLocks` (over gRPC). See
/// `proto/kubedav/locks/v1/locks.proto` for each call and its error codes.
#[async_trait::async_trait]
pub trait Locks: Send + Sync + 'static {
    /// Take a lock, or report what conflicts with it.
    async fn lock(&self, request: LockRequest) -> Result<LockResponse, Status>;
    /// Extend a lock's timeout.
    async fn refresh(&self, request: RefreshRequest) -> Result<RefreshResponse, Status>;
    /// Release a lock.
    async fn unlock(&self, request: UnlockRequest) -> Result<UnlockResponse, Status>;
    /// Decide whether a request may modify its targets.
    async fn check_write(&self, request: CheckWriteRequest) -> Result<CheckWriteResponse, Status>;
    /// The locks on a resource and its direct members.
    async fn discover(&self, request: DiscoverRequest) -> Result<DiscoverResponse, Status>;
    /// Drop the locks rooted at or below a path.
    async fn release(&self, request: ReleaseRequest) -> Result<ReleaseResponse, Status>;
}
