//! A registered locks replica whose registration lapses while it grants a lock: the LOCK
//! is answered UNAVAILABLE, and the lock is taken back, since its client never learnt the
//! token and could neither use nor remove it.

use kubedav_api::locks::*;
use kubedav_kit::registry::Standing;
use kubedav_locks::MemoryLocks;
use kubedav_remote::server::LocksGrpc;
use kubedav_remote::stubs::locks::locks_server::Locks as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tonic::{Request, Status};

/// The memory store, granting a lock only after `delay` (of the test's paused clock).
struct SlowToLock {
    store: MemoryLocks,
    delay: Duration,
}

#[async_trait::async_trait]
impl Locks for SlowToLock {
    async fn lock(&self, request: LockRequest) -> Result<LockResponse, Status> {
        tokio::time::sleep(self.delay).await;
        self.store.lock(request).await
    }
    async fn refresh(&self, request: RefreshRequest) -> Result<RefreshResponse, Status> {
        self.store.refresh(request).await
    }
    async fn unlock(&self, request: UnlockRequest) -> Result<UnlockResponse, Status> {
        self.store.unlock(request).await
    }
    async fn check_write(&self, request: CheckWriteRequest) -> Result<CheckWriteResponse, Status> {
        self.store.check_write(request).await
    }
    async fn discover(&self, request: DiscoverRequest) -> Result<DiscoverResponse, Status> {
        self.store.discover(request).await
    }
    async fn release(&self, request: ReleaseRequest) -> Result<ReleaseResponse, Status> {
        self.store.release(request).await
    }
}

fn lock_of(principal: &str) -> Request<LockRequest> {
    Request::new(LockRequest {
        path: "docs/report.odt".to_owned(),
        scope: Scope::Exclusive as i32,
        depth: LockDepth::Zero as i32,
        owner_xml: Default::default(),
        principal: principal.to_owned(),
        timeout_seconds: 3600,
        collection: false,
    })
}

#[tokio::test(start_paused = true)]
async fn a_lock_answered_unavailable_after_the_registration_lapsed_is_taken_back() {
    let service = LocksGrpc::new(Arc::new(SlowToLock {
        store: MemoryLocks::new(Duration::from_secs(3600)),
        delay: Duration::from_secs(2),
    }))
    .with_leases();
    // Past the grace period of a new service, so that the lock is begun at once.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let now = Instant::now();
    // Open for one second, never renewed: Redis went out of reach as the lock was taken.
    let (publish, standing) = tokio::sync::watch::channel(Standing {
        generation: 1,
        open_from: now,
        open_until: now + Duration::from_secs(1),
    });
    let leases = service.leases().expect("leases were asked for");
    leases.admit_through(standing, "kubedav:locks:replicas");

    let refused = service.lock(lock_of("alice")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");

    // Redis is back: the file is not locked by a lock nobody holds the token of.
    let now = Instant::now();
    publish.send_replace(Standing {
        generation: 2,
        open_from: now,
        open_until: now + Duration::from_secs(3600),
    });
    let discovered = service
        .discover(Request::new(DiscoverRequest {
            path: "docs/report.odt".to_owned(),
            depth: 0,
        }))
        .await
        .unwrap()
        .into_inner();
    let locks: Vec<_> = discovered.resources.iter().flat_map(|r| &r.locks).collect();
    assert!(
        locks.is_empty(),
        "the lock answered UNAVAILABLE is still held: {locks:?}"
    );
    let granted = service.lock(lock_of("alice")).await.unwrap().into_inner();
    assert!(
        granted.lock.is_some(),
        "alice's LOCK, tried again, met her own lost lock: {:?}",
        granted.conflicts
    );
}
