//! The locks port: [`Locks`], its gRPC client adapter [`RemoteLocks`] and its gRPC server
//! adapter [`LocksGrpc`].

use crate::BoxStream;
use crate::deadline;
use crate::lease::{Invalidation, Leases, WatchEvent, WatchRequest};
use crate::pb::locks::v1 as pb;
use crate::rpc::ObservedChannel;
use futures_util::StreamExt;
use std::sync::Arc;
use tonic::Status;

pub use pb::{
    ActiveLock, CheckWriteRequest, CheckWriteResponse, Condition, ConditionList, DiscoverRequest,
    DiscoverResponse, LockDepth, LockRequest, LockResponse, RefreshRequest, RefreshResponse, ReleaseRequest,
    ReleaseResponse, ResourceLocks, Scope, TaggedLists, UnlockRequest, UnlockResponse, WriteTarget,
    check_write_response, condition,
};

/// The service's name in deadline errors.
const CALLEE: &str = "locks";

/// The WebDAV lock manager, as the gateway sees it. Implemented by the locks service's
/// core (local) and by [`RemoteLocks`] (over gRPC). See
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

type Client = pb::locks_client::LocksClient<ObservedChannel>;

/// [`Locks`] over gRPC: what a gateway uses in microservices mode.
#[derive(Clone)]
pub struct RemoteLocks {
    client: Client,
}

impl RemoteLocks {
    /// A client on `channel`: one connection, or a balanced set of them
    /// (`kubedav_kit::balance::channel`), observed ([`ObservedChannel`]).
    pub fn new(channel: ObservedChannel) -> Self {
        Self {
            client: pb::locks_client::LocksClient::new(channel),
        }
    }
}

impl RemoteLocks {
    /// Opens a lease stream (`Watch`): see [`crate::lease::hold`].
    pub fn watch(
        &self,
        requests: crate::lease::Requests,
    ) -> impl std::future::Future<Output = Result<BoxStream<WatchEvent>, Status>> + Send + use<> {
        let mut client = self.client.clone();
        async move { Ok(client.watch(requests).await?.into_inner().boxed()) }
    }
}

#[async_trait::async_trait]
impl Locks for RemoteLocks {
    async fn lock(&self, request: LockRequest) -> Result<LockResponse, Status> {
        let t = deadline::call_timeout();
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .lock(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }

    async fn refresh(&self, request: RefreshRequest) -> Result<RefreshResponse, Status> {
        let t = deadline::call_timeout();
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .refresh(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }

    async fn unlock(&self, request: UnlockRequest) -> Result<UnlockResponse, Status> {
        let t = deadline::call_timeout();
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .unlock(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }

    async fn check_write(&self, request: CheckWriteRequest) -> Result<CheckWriteResponse, Status> {
        let t = deadline::call_timeout();
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .check_write(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }

    async fn discover(&self, request: DiscoverRequest) -> Result<DiscoverResponse, Status> {
        let t = deadline::call_timeout();
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .discover(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }

    async fn release(&self, request: ReleaseRequest) -> Result<ReleaseResponse, Status> {
        let t = deadline::call_timeout();
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .release(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }
}

/// Exposes any [`Locks`] implementation as the `kubedav.locks.v1.Locks` gRPC service.
pub struct LocksGrpc {
    inner: Arc<dyn Locks>,
    /// Leases on callers' copies of Discover answers: only for a sole keeper of locks.
    leases: Option<Arc<Leases>>,
}

impl LocksGrpc {
    /// Wraps a locks core. It offers no leases: see [`LocksGrpc::with_leases`].
    pub fn new(inner: Arc<dyn Locks>) -> Self {
        Self { inner, leases: None }
    }

    /// Offers leases on Discover answers, announcing every lock change before answering
    /// it. Only for a core that is the sole keeper of its locks (the memory store): a
    /// store shared with other replicas changes behind this service's back.
    pub fn with_leases(mut self) -> Self {
        self.leases = Some(Leases::new("locks"));
        self
    }

    /// The leases it hands out, if any, to close them when the service stops.
    pub fn leases(&self) -> Option<Arc<Leases>> {
        self.leases.clone()
    }

    /// Makes a lock change under the leases, if any ([`Leases::change`]): a change that
    /// succeeded may show in every kept discovery, so all are dropped.
    async fn change<T>(
        &self,
        change: impl std::future::Future<Output = Result<T, Status>>,
    ) -> Result<T, Status> {
        match &self.leases {
            Some(leases) => {
                leases
                    .change(change, |outcome| outcome.is_ok().then(Invalidation::everything))
                    .await
            }
            None => change.await,
        }
    }

    /// The tonic service, ready to be added to a server.
    pub fn into_service(self) -> pb::locks_server::LocksServer<Self> {
        pb::locks_server::LocksServer::new(self)
    }
}

#[async_trait::async_trait]
impl pb::locks_server::Locks for LocksGrpc {
    type WatchStream = BoxStream<WatchEvent>;

    async fn watch(
        &self,
        request: tonic::Request<tonic::Streaming<WatchRequest>>,
    ) -> Result<tonic::Response<Self::WatchStream>, Status> {
        match &self.leases {
            Some(leases) => Ok(tonic::Response::new(leases.watch(request.into_inner().boxed()))),
            None => Err(Status::failed_precondition(
                "this lock store is shared with other replicas: no leases are offered",
            )),
        }
    }

    async fn lock(
        &self,
        request: tonic::Request<LockRequest>,
    ) -> Result<tonic::Response<LockResponse>, Status> {
        let answer = self.change(self.inner.lock(request.into_inner())).await?;
        Ok(tonic::Response::new(answer))
    }

    async fn refresh(
        &self,
        request: tonic::Request<RefreshRequest>,
    ) -> Result<tonic::Response<RefreshResponse>, Status> {
        let answer = self.change(self.inner.refresh(request.into_inner())).await?;
        Ok(tonic::Response::new(answer))
    }

    async fn unlock(
        &self,
        request: tonic::Request<UnlockRequest>,
    ) -> Result<tonic::Response<UnlockResponse>, Status> {
        let answer = self.change(self.inner.unlock(request.into_inner())).await?;
        Ok(tonic::Response::new(answer))
    }

    async fn check_write(
        &self,
        request: tonic::Request<CheckWriteRequest>,
    ) -> Result<tonic::Response<CheckWriteResponse>, Status> {
        Ok(tonic::Response::new(
            self.inner.check_write(request.into_inner()).await?,
        ))
    }

    async fn discover(
        &self,
        request: tonic::Request<DiscoverRequest>,
    ) -> Result<tonic::Response<DiscoverResponse>, Status> {
        Ok(tonic::Response::new(
            self.inner.discover(request.into_inner()).await?,
        ))
    }

    async fn release(
        &self,
        request: tonic::Request<ReleaseRequest>,
    ) -> Result<tonic::Response<ReleaseResponse>, Status> {
        let answer = self.change(self.inner.release(request.into_inner())).await?;
        Ok(tonic::Response::new(answer))
    }
}
