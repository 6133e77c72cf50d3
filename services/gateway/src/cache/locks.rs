//! [`CachedLocks`]: lock discovery kept under the locks service's lease, or under a lease
//! from each of its registered replicas.

use super::Lookups;
use kubedav_api::locks::{
    CheckWriteRequest, CheckWriteResponse, DiscoverRequest, DiscoverResponse, LockRequest, LockResponse,
    Locks, RefreshRequest, RefreshResponse, ReleaseRequest, ReleaseResponse, UnlockRequest, UnlockResponse,
};
use kubedav_lease::{self as lease, Coherence, OpenAt, ReplicaLeases, View, Watch};
use quick_cache::sync::Cache;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Status;

/// How many discoveries are kept (each is small: the locks on one resource and its
/// members).
const CAPACITY: usize = 4096;

/// A Discover answer, with when it was asked for and until when it holds: a lock's
/// timeout runs down while the answer is kept, and the answer is not used once the
/// first of its locks could have expired.
struct KeptDiscovery {
    answer: DiscoverResponse,
    asked_at: Instant,
    holds_until: Instant,
}

/// [`Locks`] (over gRPC, or in this process) that answers Discover from what it kept while its lease from the
/// locks service holds (a service with the memory store offers one; replicas on a
/// shared Redis store offer one each when they register, and a gateway then holds all of
/// them; unregistered ones on Redis offer none, and every call goes to the service).
/// Every other call goes to the service: a write's lock check is never answered from a
/// copy.
pub struct CachedLocks {
    remote: Arc<dyn Locks>,
    lease: Arc<dyn Coherence>,
    replicas: Option<Arc<ReplicaLeases>>,
    kept: Arc<Cache<(String, u32), Arc<KeptDiscovery>>>,
    lookups: Lookups,
}

impl CachedLocks {
    /// Wraps `locks` and starts holding a lease from the locks service it reaches.
    pub fn new<L: Locks + Watch + Clone>(locks: L) -> Self {
        let kept = Arc::new(Cache::new(CAPACITY));
        let watcher = locks.clone();
        let remote = Arc::new(locks);
        let dropper = kept.clone();
        let lease = lease::hold(
            "locks",
            move |requests| watcher.watch(requests),
            // Any lock change may show in any discovery (a depth-infinity lock applies to
            // a whole tree): drop them all. Lock changes are rare next to PROPFINDs.
            move |_| dropper.clear(),
        );
        Self {
            remote,
            lease,
            replicas: None,
            kept,
            lookups: Lookups::of("locks"),
        }
    }

    /// Wraps `remote`, which reaches several locks replicas on one store, holding a lease
    /// from each replica that `replicas` shows through the streams `open` opens.
    pub fn over_replicas(
        remote: Arc<dyn Locks>,
        replicas: tokio::sync::watch::Receiver<View>,
        open: OpenAt,
    ) -> Self {
        let kept: Arc<Cache<(String, u32), Arc<KeptDiscovery>>> = Arc::new(Cache::new(CAPACITY));
        let dropper = kept.clone();
        let leases = ReplicaLeases::follow("locks", replicas, open, Arc::new(move |_| dropper.clear()));
        Self {
            remote,
            lease: leases.clone(),
            replicas: Some(leases),
            kept,
            lookups: Lookups::of("locks"),
        }
    }

    /// The leases from each replica ([`CachedLocks::over_replicas`]): which replicas
    /// answer now.
    pub fn replica_leases(&self) -> Option<Arc<ReplicaLeases>> {
        self.replicas.clone()
    }

    fn kept(&self, key: &(String, u32)) -> Option<DiscoverResponse> {
        if !self.lease.valid() {
            return None;
        }
        let kept = self.kept.get(key)?;
        let now = Instant::now();
        if now >= kept.holds_until {
            return None;
        }
        let elapsed = now.duration_since(kept.asked_at).as_secs();
        let mut answer = kept.answer.clone();
        for lock in answer.resources.iter_mut().flat_map(|r| r.locks.iter_mut()) {
            if lock.timeout_seconds != 0 {
                lock.timeout_seconds = lock.timeout_seconds.saturating_sub(elapsed).max(1);
            }
        }
        Some(answer)
    }
}

/// Until when an answer asked for at `asked_at` may be used: a second short of its
/// earliest timeout (timeouts are whole seconds, rounded either way), or not at all
/// when that is nearer than two seconds.
fn holds_until(answer: &DiscoverResponse, asked_at: Instant) -> Option<Instant> {
    let earliest = answer
        .resources
        .iter()
        .flat_map(|r| r.locks.iter())
        .filter(|lock| lock.timeout_seconds != 0)
        .map(|lock| lock.timeout_seconds)
        .min();
    match earliest {
        None => Some(asked_at + Duration::from_secs(365 * 24 * 3600)),
        Some(seconds) if seconds >= 2 => Some(asked_at + Duration::from_secs(seconds - 1)),
        Some(_) => None,
    }
}

// Every method is written out, so a method the port gains with a default cannot be
// left to that default here, bypassing the locks service's own (clippy checks it).
#[async_trait::async_trait]
#[deny(clippy::missing_trait_methods)]
impl Locks for CachedLocks {
    async fn lock(&self, request: LockRequest) -> Result<LockResponse, Status> {
        self.remote.lock(request).await
    }

    async fn refresh(&self, request: RefreshRequest) -> Result<RefreshResponse, Status> {
        self.remote.refresh(request).await
    }

    async fn unlock(&self, request: UnlockRequest) -> Result<UnlockResponse, Status> {
        self.remote.unlock(request).await
    }

    async fn check_write(&self, request: CheckWriteRequest) -> Result<CheckWriteResponse, Status> {
        self.remote.check_write(request).await
    }

    async fn discover(&self, request: DiscoverRequest) -> Result<DiscoverResponse, Status> {
        let key = (request.path.clone(), request.depth);
        if let Some(answer) = self.lookups.count(self.kept(&key)) {
            return Ok(answer);
        }
        let epoch = self.lease.epoch();
        let asked_at = Instant::now();
        let answer = self.remote.discover(request).await?;
        if let Some(holds_until) = holds_until(&answer, asked_at) {
            let kept = Arc::new(KeptDiscovery {
                answer: answer.clone(),
                asked_at,
                holds_until,
            });
            self.lease.keep(
                epoch,
                || self.kept.insert(key.clone(), kept),
                || {
                    self.kept.remove(&key);
                },
            );
        }
        Ok(answer)
    }

    async fn release(&self, request: ReleaseRequest) -> Result<ReleaseResponse, Status> {
        self.remote.release(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubedav_api::locks::{ActiveLock, ResourceLocks};

    fn answer(timeouts: &[u64]) -> DiscoverResponse {
        DiscoverResponse {
            resources: vec![ResourceLocks {
                path: "a".into(),
                locks: timeouts
                    .iter()
                    .map(|&timeout_seconds| ActiveLock {
                        timeout_seconds,
                        ..ActiveLock::default()
                    })
                    .collect(),
            }],
        }
    }

    #[test]
    fn a_discovery_holds_until_a_second_before_its_first_lock_could_expire() {
        let now = Instant::now();
        assert_eq!(
            holds_until(&answer(&[600, 30]), now),
            Some(now + Duration::from_secs(29))
        );
        assert!(holds_until(&answer(&[0]), now).unwrap() > now + Duration::from_secs(3600));
        assert_eq!(
            holds_until(&answer(&[1, 600]), now),
            None,
            "about to expire: not kept"
        );
    }
}
