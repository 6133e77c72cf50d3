//! [`LocksGrpc`]: any [`Locks`] as the `kubedav.locks.v1.Locks` gRPC service.

use crate::stubs::locks as stubs;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use kubedav_api::BoxStream;
use kubedav_api::lease::{Invalidation, WatchEvent, WatchRequest};
use kubedav_api::locks::*;
use kubedav_lease::Leases;
use std::sync::Arc;
use tonic::Status;

/// Exposes any [`Locks`] implementation as the `kubedav.locks.v1.Locks` gRPC service.
pub struct LocksGrpc {
    inner: Arc<dyn Locks>,
    /// Leases on what callers keep of this service's answers (lock discovery, trees free
    /// of locks): for a sole keeper of locks, or a replica that registers.
    leases: Option<Arc<Leases>>,
}

impl LocksGrpc {
    /// Wraps a locks core. It offers no leases: see [`LocksGrpc::with_leases`].
    pub fn new(inner: Arc<dyn Locks>) -> Self {
        Self { inner, leases: None }
    }

    /// Offers leases on what callers keep (lock discovery, trees free of locks),
    /// announcing every lock change before answering it. Only for a core that is the
    /// sole keeper of its locks (the memory store), or a replica of a shared store that
    /// registers (so that gateways hold a lease from every replica): otherwise the store
    /// changes behind this service's back.
    pub fn with_leases(mut self) -> Self {
        self.leases = Some(Leases::new("locks"));
        self
    }

    /// The leases it hands out, if any, to close them when the service stops.
    pub fn leases(&self) -> Option<Arc<Leases>> {
        self.leases.clone()
    }

    /// Makes a lock change under the leases, if any ([`Leases::change`]), announcing
    /// what `changed` says it may have altered of kept answers (lock discovery, trees free
    /// of locks): around the lock's root ([`changed_around`]) where that is known.
    /// `change` is given the core; under leases it runs to its end even if the caller
    /// goes away.
    async fn change<T: Send + 'static>(
        &self,
        change: impl FnOnce(Arc<dyn Locks>) -> BoxFuture<'static, Result<T, Status>>,
        changed: impl FnOnce(&Result<T, Status>) -> Option<Invalidation> + Send + 'static,
    ) -> Result<T, Status> {
        self.change_or_undo(change, changed, |_, _| Box::pin(std::future::ready(None)))
            .await
    }

    /// [`LocksGrpc::change`], taking the change back with `undo` (given the core and what
    /// the change made) when it was made but cannot be answered ([`Leases::change_or_undo`]).
    async fn change_or_undo<T: Send + 'static>(
        &self,
        change: impl FnOnce(Arc<dyn Locks>) -> BoxFuture<'static, Result<T, Status>>,
        changed: impl FnOnce(&Result<T, Status>) -> Option<Invalidation> + Send + 'static,
        undo: impl FnOnce(Arc<dyn Locks>, T) -> BoxFuture<'static, Option<Invalidation>> + Send + 'static,
    ) -> Result<T, Status> {
        let change = change(self.inner.clone());
        match &self.leases {
            Some(leases) => {
                let core = self.inner.clone();
                leases
                    .change_or_undo(change, changed, move |made| undo(core, made))
                    .await
            }
            None => change.await,
        }
    }

    /// The tonic service, ready to be added to a server.
    pub fn into_service(self) -> stubs::locks_server::LocksServer<Self> {
        stubs::locks_server::LocksServer::new(self)
    }
}

#[async_trait::async_trait]
impl stubs::locks_server::Locks for LocksGrpc {
    type WatchStream = BoxStream<WatchEvent>;

    async fn watch(
        &self,
        request: tonic::Request<tonic::Streaming<WatchRequest>>,
    ) -> Result<tonic::Response<Self::WatchStream>, Status> {
        match &self.leases {
            Some(leases) => {
                let followed = super::followed_registry(&request);
                let events = leases.watch(followed.as_deref(), request.into_inner().boxed())?;
                Ok(tonic::Response::new(events))
            }
            None => Err(Status::failed_precondition(
                "this lock store is shared with other replicas: no leases are offered",
            )),
        }
    }

    async fn lock(
        &self,
        request: tonic::Request<LockRequest>,
    ) -> Result<tonic::Response<LockResponse>, Status> {
        let request = request.into_inner();
        // Announced whatever the outcome: a store may have kept the lock before an error
        // (a Redis reply lost after the script ran), and a lock no gateway heard of would
        // let writes past it.
        let around = changed_around(&request.path);
        // A lock granted but answered UNAVAILABLE (the registration lapsed meanwhile) is
        // taken back: its client never learnt the token, so it could neither use nor
        // remove it, and it would keep the resource locked until its timeout.
        let answer = self
            .change_or_undo(
                |core| Box::pin(async move { core.lock(request).await }),
                |_| Some(around),
                |core, granted| Box::pin(unlock_granted(core, granted)),
            )
            .await?;
        Ok(tonic::Response::new(answer))
    }

    async fn refresh(
        &self,
        request: tonic::Request<RefreshRequest>,
    ) -> Result<tonic::Response<RefreshResponse>, Status> {
        let request = request.into_inner();
        let answer = self
            .change(
                |core| Box::pin(async move { core.refresh(request).await }),
                |outcome| match outcome {
                    Ok(refreshed) => Some(
                        refreshed
                            .lock
                            .as_ref()
                            .map_or_else(Invalidation::everything, |lock| changed_around(&lock.root)),
                    ),
                    Err(status) => unless_refused(status),
                },
            )
            .await?;
        Ok(tonic::Response::new(answer))
    }

    async fn unlock(
        &self,
        request: tonic::Request<UnlockRequest>,
    ) -> Result<tonic::Response<UnlockResponse>, Status> {
        let request = request.into_inner();
        let answer = self
            .change(
                |core| Box::pin(async move { core.unlock(request).await }),
                |outcome| match outcome {
                    Ok(unlocked) => Some(changed_around(&unlocked.root)),
                    Err(status) => unless_refused(status),
                },
            )
            .await?;
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
        let request = request.into_inner();
        // Every lock it may drop is rooted in the tree.
        let around = changed_around(&request.path);
        let answer = self
            .change(
                |core| Box::pin(async move { core.release(request).await }),
                |_| Some(around),
            )
            .await?;
        Ok(tonic::Response::new(answer))
    }
}

/// Removes the lock `granted` holds, if one was granted; names what that changed.
async fn unlock_granted(core: Arc<dyn Locks>, granted: LockResponse) -> Option<Invalidation> {
    let lock = granted.lock?;
    let unlock = UnlockRequest {
        path: lock.root.clone(),
        token: lock.token,
        principal: lock.principal,
    };
    match core.unlock(unlock).await {
        Ok(unlocked) => Some(changed_around(&unlocked.root)),
        Err(status) => {
            tracing::warn!(
                root = %lock.root,
                message = status.message(),
                "a lock granted while this replica's registration lapsed could not be taken back: \
                 it holds until its timeout"
            );
            unless_refused(&status)
        }
    }
}

/// What a refresh or unlock that failed announces: nothing when the store refused it
/// before changing anything (no such lock, a lock that does not cover the path, another
/// user's lock), everything otherwise, since the lock it may have changed (a Redis reply
/// lost after the script ran) could be rooted at any ancestor of the path.
fn unless_refused(status: &Status) -> Option<Invalidation> {
    let refused = matches!(
        status.code(),
        tonic::Code::NotFound | tonic::Code::FailedPrecondition | tonic::Code::PermissionDenied
    );
    (!refused).then(Invalidation::everything)
}
