//! [`CachedLocks`]: lock discovery kept under the locks service's lease, or under a lease
//! from each of its registered replicas, and the trees found free of locks
//! ([`super::free`]).

use super::Lookups;
use super::free::FreeTrees;
use kubedav_api::locks::{
    CheckWriteRequest, CheckWriteResponse, DiscoverRequest, DiscoverResponse, LockRequest, LockResponse,
    Locks, RefreshRequest, RefreshResponse, ReleaseRequest, ReleaseResponse, UnlockRequest, UnlockResponse,
    check_write_response::Outcome, common_tree, within,
};
use kubedav_lease::{self as lease, Coherence, Invalidation, OpenAt, ReplicaLeases, View, Watch};
use quick_cache::sync::Cache;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Status;

/// How many discoveries are kept (each is small: the locks on one resource and its
/// members).
const CAPACITY: usize = 4096;

/// The deepest Discover depth (2: infinity); answers to others are not kept.
const DEEPEST: u32 = 2;

/// Kept discoveries, by path and depth.
type Discoveries = Cache<(String, u32), Arc<KeptDiscovery>>;

/// Drops what a lock change announced may have altered: the discoveries and the trees
/// free of locks that its paths and trees name ([`kubedav_api::locks::changed_around`]),
/// or all of them.
fn forget(kept: &Discoveries, free: &FreeTrees, invalidation: &Invalidation) {
    free.forget(invalidation);
    if invalidation.covers_everything() {
        kept.clear();
        return;
    }
    for path in &invalidation.paths {
        for depth in 0..=DEEPEST {
            kept.remove(&(path.clone(), depth));
        }
    }
    if !invalidation.trees.is_empty() {
        kept.retain(|(path, _), _| !invalidation.covers(path));
    }
}

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
///
/// Under the same lease it keeps the trees the service found free of locks
/// ([`FreeTrees`]): a write without an If header whose targets all lie in one is allowed
/// without asking the service, and the locks of a removed resource in one are not asked
/// to be released, since there are none. Every other call goes to the service.
pub struct CachedLocks {
    remote: Arc<dyn Locks>,
    lease: Arc<dyn Coherence>,
    replicas: Option<Arc<ReplicaLeases>>,
    kept: Arc<Discoveries>,
    free: Arc<FreeTrees>,
    lookups: Lookups,
    checks: Lookups,
    removals: Lookups,
}

impl CachedLocks {
    /// Wraps `locks` and starts holding a lease from the locks service it reaches.
    pub fn new<L: Locks + Watch + Clone>(locks: L) -> Self {
        let kept = Arc::new(Cache::new(CAPACITY));
        let free = Arc::new(FreeTrees::new());
        let watcher = locks.clone();
        let remote = Arc::new(locks);
        let dropper = (kept.clone(), free.clone());
        let lease = lease::hold(
            "locks",
            move |requests| watcher.watch(requests),
            move |invalidation| forget(&dropper.0, &dropper.1, invalidation),
        );
        Self::of(remote, lease, None, kept, free)
    }

    fn of(
        remote: Arc<dyn Locks>,
        lease: Arc<dyn Coherence>,
        replicas: Option<Arc<ReplicaLeases>>,
        kept: Arc<Discoveries>,
        free: Arc<FreeTrees>,
    ) -> Self {
        Self {
            remote,
            lease,
            replicas,
            kept,
            free,
            lookups: Lookups::of("locks"),
            checks: Lookups::of("write_check"),
            removals: Lookups::of("release"),
        }
    }

    /// Wraps `remote`, which reaches several locks replicas on one store, holding a lease
    /// from each replica that `replicas` shows through the streams `open` opens.
    pub fn over_replicas(
        remote: Arc<dyn Locks>,
        replicas: tokio::sync::watch::Receiver<View>,
        open: OpenAt,
    ) -> Self {
        let kept: Arc<Discoveries> = Arc::new(Cache::new(CAPACITY));
        let free = Arc::new(FreeTrees::new());
        let dropper = (kept.clone(), free.clone());
        let leases = ReplicaLeases::follow(
            "locks",
            replicas,
            open,
            Arc::new(move |invalidation: &Invalidation| forget(&dropper.0, &dropper.1, invalidation)),
        );
        Self::of(remote, leases.clone(), Some(leases), kept, free)
    }

    /// The leases from each replica ([`CachedLocks::over_replicas`]): which replicas
    /// answer now.
    pub fn replica_leases(&self) -> Option<Arc<ReplicaLeases>> {
        self.replicas.clone()
    }

    /// Whether `path` lies in a tree found free of locks, and the lease holds: no lock
    /// change around it has been announced since it was found (that would have dropped
    /// it), and none can be made without this gateway hearing of it first.
    fn free_now(&self, path: &str) -> bool {
        self.lease.valid() && self.free.holds(path)
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

    async fn check_write(&self, mut request: CheckWriteRequest) -> Result<CheckWriteResponse, Status> {
        let common = if request.if_header.is_empty() {
            common_tree(&request.targets)
        } else {
            None
        };
        if let Some(common) = &common {
            let free = self.checks.count(self.free_now(common).then_some(()));
            if free.is_some() {
                return Ok(CheckWriteResponse {
                    outcome: Outcome::Allowed as i32,
                    conflicts: Vec::new(),
                    free_root: None,
                });
            }
        }
        let epoch = self.lease.epoch();
        let whole = FreeTrees::replaced_whole(&request);
        // Without a valid lease a reported tree could not be kept: not asked for then.
        request.report_free_root = common.is_some() && self.lease.valid();
        let answer = self.remote.check_write(request).await?;
        let Some(common) = common.filter(|_| answer.outcome() == Outcome::Allowed) else {
            return Ok(answer);
        };
        // A reported tree that does not hold the targets is not what was asked for.
        let reported = answer.free_root.iter().filter(|root| within(&common, root));
        for found in reported.cloned().chain(whole) {
            self.lease.keep(
                epoch,
                || self.free.insert(found.clone()),
                || self.free.remove(&found),
            );
        }
        Ok(answer)
    }

    async fn discover(&self, request: DiscoverRequest) -> Result<DiscoverResponse, Status> {
        let key = (request.path.clone(), request.depth);
        if let Some(answer) = self.lookups.count(self.kept(&key)) {
            return Ok(answer);
        }
        let epoch = self.lease.epoch();
        let asked_at = Instant::now();
        let answer = self.remote.discover(request).await?;
        if let Some(holds_until) = holds_until(&answer, asked_at).filter(|_| key.1 <= DEEPEST) {
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
        if self
            .removals
            .count(self.free_now(&request.path).then_some(()))
            .is_some()
        {
            return Ok(ReleaseResponse { released: 0 });
        }
        self.remote.release(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubedav_api::locks::{ActiveLock, ResourceLocks, TaggedLists, WriteTarget};
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

    /// A lease the test holds and moves.
    #[derive(Default)]
    struct TestLease {
        lapsed: AtomicBool,
        epoch: AtomicU64,
    }

    impl Coherence for TestLease {
        fn valid(&self) -> bool {
            !self.lapsed.load(Ordering::SeqCst)
        }

        fn epoch(&self) -> u64 {
            self.epoch.load(Ordering::SeqCst)
        }
    }

    /// A locks service that allows every write, reports `free_root` as the tree found
    /// free, and counts the checks and releases asked of it.
    #[derive(Default)]
    struct Allowing {
        free_root: Option<String>,
        /// A lease whose epoch each check moves on, as a lock change announced while
        /// the check is answered would.
        announcing: Option<Arc<TestLease>>,
        checks: AtomicUsize,
        releases: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Locks for Allowing {
        async fn lock(&self, _: LockRequest) -> Result<LockResponse, Status> {
            unreachable!()
        }
        async fn refresh(&self, _: RefreshRequest) -> Result<RefreshResponse, Status> {
            unreachable!()
        }
        async fn unlock(&self, _: UnlockRequest) -> Result<UnlockResponse, Status> {
            unreachable!()
        }
        async fn check_write(&self, request: CheckWriteRequest) -> Result<CheckWriteResponse, Status> {
            self.checks.fetch_add(1, Ordering::SeqCst);
            if let Some(lease) = &self.announcing {
                lease.epoch.fetch_add(1, Ordering::SeqCst);
            }
            Ok(CheckWriteResponse {
                outcome: Outcome::Allowed as i32,
                conflicts: Vec::new(),
                free_root: self.free_root.clone().filter(|_| request.report_free_root),
            })
        }
        async fn discover(&self, _: DiscoverRequest) -> Result<DiscoverResponse, Status> {
            unreachable!()
        }
        async fn release(&self, _: ReleaseRequest) -> Result<ReleaseResponse, Status> {
            self.releases.fetch_add(1, Ordering::SeqCst);
            Ok(ReleaseResponse { released: 0 })
        }
    }

    fn removal(path: &str, tokens: bool) -> CheckWriteRequest {
        CheckWriteRequest {
            targets: vec![WriteTarget {
                path: path.into(),
                recursive: true,
            }],
            if_header: if tokens {
                vec![TaggedLists::default()]
            } else {
                Vec::new()
            },
            ..CheckWriteRequest::default()
        }
    }

    fn cached(remote: &Arc<Allowing>, lease: &Arc<TestLease>) -> CachedLocks {
        CachedLocks::of(
            remote.clone(),
            lease.clone(),
            None,
            Arc::new(Cache::new(16)),
            Arc::new(FreeTrees::new()),
        )
    }

    /// What the locks service's announcement of a lock change at `root` does: the epoch
    /// moves on, then what it names is dropped.
    fn announce(locks: &CachedLocks, lease: &TestLease, root: &str) {
        lease.epoch.fetch_add(1, Ordering::SeqCst);
        forget(
            &locks.kept,
            &locks.free,
            &kubedav_api::locks::changed_around(root),
        );
    }

    /// A PUT's check: the member and its collection.
    fn put(path: &str, tokens: bool) -> CheckWriteRequest {
        let mut request = removal(path, tokens);
        request.targets[0].recursive = false;
        request.targets.push(WriteTarget {
            path: path.rsplit_once('/').map_or("", |(parent, _)| parent).to_owned(),
            recursive: false,
        });
        request
    }

    #[tokio::test]
    async fn a_write_into_a_tree_found_free_is_allowed_without_asking_while_the_lease_holds() {
        let remote = Arc::new(Allowing {
            free_root: Some("a".into()),
            ..Allowing::default()
        });
        let lease = Arc::new(TestLease::default());
        let locks = cached(&remote, &lease);
        let asked = |expected: usize, why: &str| {
            assert_eq!(remote.checks.load(Ordering::SeqCst), expected, "{why}");
        };
        locks.check_write(put("a/x", false)).await.unwrap();
        asked(1, "nothing found free yet");
        let answer = locks.check_write(put("a/b/y", false)).await.unwrap();
        assert_eq!(answer.outcome(), Outcome::Allowed);
        asked(1, "a write into the tree found free");
        locks.check_write(put("c/z", false)).await.unwrap();
        asked(2, "a write elsewhere");
        locks.check_write(put("a/y", true)).await.unwrap();
        asked(3, "tokens submitted");
        announce(&locks, &lease, "a/q/r");
        locks.check_write(put("a/y", false)).await.unwrap();
        asked(4, "a lock change in the tree heard of since");
        announce(&locks, &lease, "c/q");
        locks.check_write(put("a/z", false)).await.unwrap();
        asked(4, "a lock change elsewhere heard of since");
        lease.lapsed.store(true, Ordering::SeqCst);
        locks.check_write(put("a/y", false)).await.unwrap();
        asked(5, "the lease lapsed");
    }

    #[tokio::test]
    async fn a_tree_is_not_kept_from_an_answer_crossed_by_a_lock_change_or_not_holding_the_write() {
        let lease = Arc::new(TestLease::default());
        let crossed = Arc::new(Allowing {
            free_root: Some("a".into()),
            announcing: Some(lease.clone()),
            ..Allowing::default()
        });
        let locks = cached(&crossed, &lease);
        locks.check_write(put("a/x", false)).await.unwrap();
        locks.check_write(put("a/y", false)).await.unwrap();
        assert_eq!(
            crossed.checks.load(Ordering::SeqCst),
            2,
            "kept across a lock change"
        );

        let lease = Arc::new(TestLease::default());
        let elsewhere = Arc::new(Allowing {
            free_root: Some("a".into()),
            ..Allowing::default()
        });
        let locks = cached(&elsewhere, &lease);
        locks.check_write(put("c/x", false)).await.unwrap();
        locks.check_write(put("a/y", false)).await.unwrap();
        assert_eq!(
            elsewhere.checks.load(Ordering::SeqCst),
            2,
            "kept a reported tree that does not hold the write checked"
        );
    }

    /// Checks the removal of `path` (with an If header when `tokens`), lets `meanwhile`
    /// happen to the lease, releases `path`, and says whether the service was asked.
    async fn released(path: &str, tokens: bool, meanwhile: impl FnOnce(&CachedLocks, &TestLease)) -> bool {
        let remote = Arc::new(Allowing::default());
        let lease = Arc::new(TestLease::default());
        let locks = cached(&remote, &lease);
        locks.check_write(removal(path, tokens)).await.unwrap();
        meanwhile(&locks, &lease);
        locks.release(ReleaseRequest { path: path.into() }).await.unwrap();
        remote.releases.load(Ordering::SeqCst) == 1
    }

    #[tokio::test]
    async fn a_release_is_spared_only_while_the_lease_held_since_a_check_without_tokens() {
        assert!(
            !released("gone", false, |_, _| {}).await,
            "nothing changed: spared"
        );
        assert!(
            released("gone", true, |_, _| {}).await,
            "tokens submitted: the tree may hold locks"
        );
        assert!(
            released("gone", false, |locks, lease| announce(locks, lease, "gone/x")).await,
            "a lock taken in the tree since the check"
        );
        assert!(
            !released("gone", false, |locks, lease| announce(locks, lease, "other/x")).await,
            "a lock taken elsewhere since the check: spared"
        );
        assert!(
            released("gone", false, |_, lease| lease
                .lapsed
                .store(true, Ordering::SeqCst))
            .await,
            "the lease lapsed"
        );
    }

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
    fn a_lock_change_drops_the_discoveries_that_may_list_its_lock_and_no_others() {
        let kept: Discoveries = Cache::new(16);
        let free = FreeTrees::new();
        let keys = [
            ("", 2),
            ("home", 1),
            ("home", 2),
            ("home/alice", 0),
            ("home/alice/x.txt", 0),
            ("home/alice/x.txt/y", 0),
            ("home/alice/docs", 1),
            ("home/bob", 1),
            ("home/bob", 2),
        ];
        for (path, depth) in keys {
            let discovery = KeptDiscovery {
                answer: DiscoverResponse::default(),
                asked_at: Instant::now(),
                holds_until: Instant::now(),
            };
            kept.insert((path.to_owned(), depth), Arc::new(discovery));
        }
        forget(
            &kept,
            &free,
            &kubedav_api::locks::changed_around("home/alice/x.txt"),
        );
        let left: Vec<_> = keys
            .iter()
            .filter(|(path, depth)| kept.get(&((*path).to_owned(), *depth)).is_some())
            .collect();
        assert_eq!(
            left,
            [&("home/alice/docs", 1), &("home/bob", 1), &("home/bob", 2)]
        );
        forget(&kept, &free, &Invalidation::everything());
        assert!(kept.is_empty());
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
