//! The store suite: every lock rule, run against both stores (memory and a real
//! `redis-server`), plus what only the Redis store has to show: sharing between
//! replicas, atomic races, expiry in Redis, key prefixes, indexes, and outages.

use kubedav_api::locks::{
    CheckWriteRequest, Condition, ConditionList, DiscoverRequest, LockDepth, LockRequest, LockResponse,
    Locks, RefreshRequest, ReleaseRequest, Scope, TaggedLists, UnlockRequest, WriteTarget,
    check_write_response::Outcome, condition,
};
use kubedav_locks::{MemoryLocks, RedisLocks};
use kubedav_testkit::RedisServer;
use std::sync::Arc;
use std::time::Duration;

/// Generates, for each case `async fn(Kind)`, one test per store.
macro_rules! for_each_store {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Kind::Memory).await
                }
            )*
        }
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Kind::Redis).await
                }
            )*
        }
    };
}

for_each_store!(
    exclusive_and_shared_conflicts,
    writes_need_the_token,
    not_and_etag_conditions,
    refresh_unlock_release_and_expiry,
    principals_own_their_tokens,
    locks_per_principal_are_bounded,
    discovery_by_depth,
    owner_and_flags_round_trip,
    an_allowed_write_reports_the_highest_tree_free_of_locks,
);

#[derive(Clone, Copy)]
enum Kind {
    Memory,
    Redis,
}

/// A store under test, with the Redis server it may need.
struct Store {
    locks: Arc<dyn Locks>,
    _redis: Option<RedisServer>,
}

impl std::ops::Deref for Store {
    type Target = dyn Locks;
    fn deref(&self) -> &Self::Target {
        &*self.locks
    }
}

impl Kind {
    async fn open(self, max_timeout: Duration) -> Store {
        self.open_limited(max_timeout, 0).await
    }

    /// A store granting each principal at most `per_principal` locks (0: no limit).
    async fn open_limited(self, max_timeout: Duration, per_principal: usize) -> Store {
        match self {
            Kind::Memory => Store {
                locks: Arc::new(MemoryLocks::new(max_timeout).with_max_locks_per_principal(per_principal)),
                _redis: None,
            },
            Kind::Redis => {
                let redis = RedisServer::start();
                let store =
                    redis_store(&redis, "test:", max_timeout).with_max_locks_per_principal(per_principal);
                Store {
                    locks: Arc::new(store),
                    _redis: Some(redis),
                }
            }
        }
    }
}

fn redis_store(redis: &RedisServer, prefix: &str, max_timeout: Duration) -> RedisLocks {
    let connection = kubedav_kit::redis::connect(&redis.url(0)).unwrap();
    RedisLocks::new(connection, prefix, max_timeout)
}

const HOUR: Duration = Duration::from_secs(3600);

async fn take(store: &dyn Locks, path: &str, scope: Scope, depth: LockDepth) -> LockResponse {
    store
        .lock(LockRequest {
            path: path.into(),
            scope: scope as i32,
            depth: depth as i32,
            ..Default::default()
        })
        .await
        .unwrap()
}

fn token_list(path: Option<&str>, tokens: &[&str]) -> TaggedLists {
    TaggedLists {
        path: path.unwrap_or_default().into(),
        untagged: path.is_none(),
        lists: vec![ConditionList {
            conditions: tokens
                .iter()
                .map(|t| Condition {
                    not: false,
                    kind: Some(condition::Kind::StateToken((*t).into())),
                })
                .collect(),
        }],
    }
}

async fn check(store: &dyn Locks, path: &str, recursive: bool, if_header: Vec<TaggedLists>) -> Outcome {
    let response = store
        .check_write(CheckWriteRequest {
            targets: vec![WriteTarget {
                path: path.into(),
                recursive,
            }],
            if_header,
            request_path: path.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    response.outcome()
}

async fn discover(store: &dyn Locks, path: &str, depth: u32) -> Vec<String> {
    let reply = store
        .discover(DiscoverRequest {
            path: path.into(),
            depth,
        })
        .await
        .unwrap();
    reply.resources.into_iter().map(|r| r.path).collect()
}

/// Polls `check` for up to 10 s.
async fn eventually<F: Future<Output = bool>>(check: impl FnMut() -> F) -> bool {
    kubedav_testkit::eventually(Duration::from_secs(10), check).await
}

async fn exclusive_and_shared_conflicts(kind: Kind) {
    let s = kind.open(HOUR).await;
    let first = take(&*s, "a/f", Scope::Shared, LockDepth::Zero).await;
    assert!(first.lock.is_some());
    let second = take(&*s, "a/f", Scope::Shared, LockDepth::Zero).await;
    assert!(second.lock.is_some(), "shared locks coexist");
    let refused = take(&*s, "a/f", Scope::Exclusive, LockDepth::Zero).await;
    assert!(refused.lock.is_none() && refused.conflicts.len() == 2);
    let refused = take(&*s, "a", Scope::Exclusive, LockDepth::Infinity).await;
    assert!(refused.lock.is_none(), "a lock below conflicts");
    assert_eq!(refused.conflicts[0].root, "a/f");
    let depth_zero = take(&*s, "a", Scope::Exclusive, LockDepth::Zero).await;
    assert!(depth_zero.lock.is_some(), "depth 0 does not reach below");
    assert!(
        take(&*s, "b", Scope::Exclusive, LockDepth::Infinity)
            .await
            .lock
            .is_some()
    );
    let under = take(&*s, "b/c/d", Scope::Shared, LockDepth::Zero).await;
    assert!(under.lock.is_none(), "an ancestor's infinity lock");
    let sibling = take(&*s, "bb", Scope::Exclusive, LockDepth::Zero).await;
    assert!(sibling.lock.is_some(), "prefix is not ancestry");
    let everything = take(&*s, "", Scope::Shared, LockDepth::Infinity).await;
    assert!(
        everything.lock.is_none(),
        "the root's infinity lock sees every exclusive lock"
    );
}

async fn writes_need_the_token(kind: Kind) {
    let s = kind.open(HOUR).await;
    let token = take(&*s, "dir", Scope::Exclusive, LockDepth::Infinity)
        .await
        .lock
        .unwrap()
        .token;
    assert_eq!(check(&*s, "dir/deep/file", false, vec![]).await, Outcome::Locked);
    assert_eq!(
        check(&*s, "dir/deep/file", false, vec![token_list(None, &[&token])]).await,
        Outcome::Allowed
    );
    assert_eq!(
        check(&*s, "", true, vec![]).await,
        Outcome::Locked,
        "a tree write sees locks below"
    );
    assert_eq!(check(&*s, "other", false, vec![]).await, Outcome::Allowed);
    let tagged = vec![token_list(Some("dir"), &[&token])];
    assert_eq!(check(&*s, "dir/x", false, tagged).await, Outcome::Allowed);
    let wrong = vec![token_list(
        None,
        &["urn:uuid:00000000-0000-0000-0000-000000000000"],
    )];
    assert_eq!(
        check(&*s, "dir/x", false, wrong).await,
        Outcome::PreconditionFailed
    );
}

/// The free root an allowed check of a PUT (the member and its collection) at `path`
/// reports when asked for, with an If header when `tokens` is given.
async fn free_root(store: &dyn Locks, path: &str, tokens: Option<&[&str]>) -> Option<String> {
    free_root_asking(store, path, tokens, true).await
}

async fn free_root_asking(
    store: &dyn Locks,
    path: &str,
    tokens: Option<&[&str]>,
    ask: bool,
) -> Option<String> {
    let parent = path.rsplit_once('/').map_or("", |(parent, _)| parent);
    let response = store
        .check_write(CheckWriteRequest {
            targets: [path, parent]
                .into_iter()
                .map(|target| WriteTarget {
                    path: target.into(),
                    recursive: false,
                })
                .collect(),
            if_header: tokens
                .map(|tokens| vec![token_list(None, tokens)])
                .unwrap_or_default(),
            request_path: path.into(),
            report_free_root: ask,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(response.outcome(), Outcome::Allowed, "{path}");
    response.free_root
}

/// What lets a gateway allow later writes itself while it holds the lease: the highest
/// tree around a write with no lock rooted at or below it.
async fn an_allowed_write_reports_the_highest_tree_free_of_locks(kind: Kind) {
    let s = kind.open(HOUR).await;
    assert_eq!(
        free_root(&*s, "a/b/c.txt", None).await.as_deref(),
        Some(""),
        "no lock at all"
    );
    assert_eq!(
        free_root_asking(&*s, "a/b/c.txt", None, false).await,
        None,
        "reported only when asked for"
    );
    let token = take(&*s, "a/b/locked.txt", Scope::Exclusive, LockDepth::Zero)
        .await
        .lock
        .unwrap()
        .token;
    assert_eq!(free_root(&*s, "x/y.txt", None).await.as_deref(), Some("x"));
    assert_eq!(
        free_root(&*s, "a/bc/d/e.txt", None).await.as_deref(),
        Some("a/bc")
    );
    assert_eq!(
        free_root(&*s, "a/b/other.txt", None).await,
        None,
        "the collection holds the lock"
    );
    assert_eq!(
        free_root(&*s, "a/b/locked.txt", Some(&[&token])).await,
        None,
        "an If header: its tokens may apply"
    );
    take(&*s, "q", Scope::Exclusive, LockDepth::Zero).await;
    assert_eq!(
        free_root(&*s, "q/r/s.txt", None).await.as_deref(),
        Some("q/r"),
        "a lock rooted at an ancestor itself"
    );
    take(&*s, "", Scope::Shared, LockDepth::Zero).await;
    assert_eq!(
        free_root(&*s, "x/y.txt", None).await.as_deref(),
        Some("x"),
        "a depth-0 lock on the root"
    );
}

async fn not_and_etag_conditions(kind: Kind) {
    let s = kind.open(HOUR).await;
    let token = take(&*s, "f", Scope::Exclusive, LockDepth::Zero)
        .await
        .lock
        .unwrap()
        .token;
    let not_no_lock = Condition {
        not: true,
        kind: Some(condition::Kind::StateToken("DAV:no-lock".into())),
    };
    let etag = |e: &str| Condition {
        not: false,
        kind: Some(condition::Kind::Etag(e.into())),
    };
    let request = |lists: Vec<ConditionList>| CheckWriteRequest {
        targets: vec![WriteTarget {
            path: "f".into(),
            recursive: false,
        }],
        if_header: vec![TaggedLists {
            path: String::new(),
            untagged: true,
            lists,
        }],
        etags: [("f".to_owned(), "\"e1\"".to_owned())].into(),
        request_path: "f".into(),
        ..Default::default()
    };
    let token_cond = Condition {
        not: false,
        kind: Some(condition::Kind::StateToken(token.clone())),
    };
    let good = request(vec![ConditionList {
        conditions: vec![token_cond.clone(), etag("\"e1\"")],
    }]);
    assert_eq!(s.check_write(good).await.unwrap().outcome(), Outcome::Allowed);
    let bad_etag = request(vec![ConditionList {
        conditions: vec![token_cond.clone(), etag("\"zz\"")],
    }]);
    assert_eq!(
        s.check_write(bad_etag).await.unwrap().outcome(),
        Outcome::PreconditionFailed
    );
    // (corrupt-token) OR (Not DAV:no-lock): the header holds, but no valid token is submitted.
    let corrupt = Condition {
        not: false,
        kind: Some(condition::Kind::StateToken(format!("{token}x"))),
    };
    let lists = vec![
        ConditionList {
            conditions: vec![corrupt],
        },
        ConditionList {
            conditions: vec![not_no_lock],
        },
    ];
    assert_eq!(
        s.check_write(request(lists)).await.unwrap().outcome(),
        Outcome::Locked
    );
}

async fn refresh_unlock_release_and_expiry(kind: Kind) {
    let s = kind.open(Duration::from_secs(1)).await;
    let lock = take(&*s, "c", Scope::Exclusive, LockDepth::Infinity)
        .await
        .lock
        .unwrap();
    assert_eq!(lock.timeout_seconds, 1, "capped by the maximum");
    let refreshed = s
        .refresh(RefreshRequest {
            path: "c/member".into(),
            token: lock.token.clone(),
            principal: String::new(),
            timeout_seconds: 100,
        })
        .await
        .unwrap();
    assert_eq!(
        refreshed.lock.unwrap().token,
        lock.token,
        "refresh through a member of the locked tree"
    );
    let wrong_path = UnlockRequest {
        path: "elsewhere".into(),
        token: lock.token.clone(),
        principal: String::new(),
    };
    assert_eq!(
        s.unlock(wrong_path).await.unwrap_err().code(),
        tonic::Code::FailedPrecondition
    );
    let refresh_elsewhere = RefreshRequest {
        path: "elsewhere".into(),
        token: lock.token.clone(),
        principal: String::new(),
        timeout_seconds: 1,
    };
    assert_eq!(
        s.refresh(refresh_elsewhere).await.unwrap_err().code(),
        tonic::Code::FailedPrecondition
    );
    assert_eq!(discover(&*s, "", 1).await, ["c"]);
    let released = s.release(ReleaseRequest { path: "c".into() }).await.unwrap();
    assert_eq!(released.released, 1);
    assert!(discover(&*s, "c", 0).await.is_empty());

    let short = take(&*s, "e", Scope::Exclusive, LockDepth::Zero)
        .await
        .lock
        .unwrap();
    assert_eq!(check(&*s, "e", false, vec![]).await, Outcome::Locked);
    assert!(
        eventually(|| async { check(&*s, "e", false, vec![]).await == Outcome::Allowed }).await,
        "the lock expires at its timeout"
    );
    assert!(discover(&*s, "e", 0).await.is_empty());
    let gone = UnlockRequest {
        path: "e".into(),
        token: short.token,
        principal: String::new(),
    };
    assert_eq!(
        s.unlock(gone).await.unwrap_err().code(),
        tonic::Code::NotFound,
        "expired locks disappear"
    );
    let tree = take(&*s, "u", Scope::Exclusive, LockDepth::Infinity)
        .await
        .lock
        .unwrap();
    let through_member = UnlockRequest {
        path: "u/member".into(),
        token: tree.token,
        principal: String::new(),
    };
    assert_eq!(
        s.unlock(through_member).await.unwrap().root,
        "u",
        "an unlock names the root of the lock it released"
    );
}

async fn principals_own_their_tokens(kind: Kind) {
    let s = kind.open(HOUR).await;
    let request = LockRequest {
        path: "p".into(),
        principal: "alice".into(),
        ..Default::default()
    };
    let token = s.lock(request).await.unwrap().lock.unwrap().token;
    let as_bob = CheckWriteRequest {
        targets: vec![WriteTarget {
            path: "p".into(),
            recursive: false,
        }],
        if_header: vec![token_list(None, &[&token])],
        principal: "bob".into(),
        request_path: "p".into(),
        ..Default::default()
    };
    assert_eq!(s.check_write(as_bob).await.unwrap().outcome(), Outcome::Locked);
    let unlock = |principal: &str| UnlockRequest {
        path: "p".into(),
        token: token.clone(),
        principal: principal.into(),
    };
    // Tokens show in every lock discovery: only the owner may keep a lock alive.
    let refresh = |principal: &str| RefreshRequest {
        path: "p".into(),
        token: token.clone(),
        timeout_seconds: 60,
        principal: principal.into(),
    };
    assert_eq!(
        s.refresh(refresh("bob")).await.unwrap_err().code(),
        tonic::Code::PermissionDenied
    );
    assert_eq!(
        s.refresh(refresh("alice")).await.unwrap().lock.unwrap().token,
        token
    );
    assert_eq!(
        s.unlock(unlock("bob")).await.unwrap_err().code(),
        tonic::Code::PermissionDenied
    );
    s.unlock(unlock("alice")).await.unwrap();
}

/// One user holds at most the configured number of live locks: past it LOCK fails with
/// RESOURCE_EXHAUSTED; unlocking, releasing or expiry frees places; other users are not
/// affected.
async fn locks_per_principal_are_bounded(kind: Kind) {
    let s = kind.open_limited(Duration::from_secs(1), 2).await;
    let lock = |path: &str, principal: &str| LockRequest {
        path: path.into(),
        principal: principal.into(),
        timeout_seconds: if path.starts_with("short") { 1 } else { 0 },
        ..Default::default()
    };
    let first = s.lock(lock("a", "alice")).await.unwrap().lock.unwrap();
    s.lock(lock("b", "alice")).await.unwrap().lock.unwrap();
    let refused = s.lock(lock("c", "alice")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert!(
        refused.message().contains("alice holds 2 locks"),
        "{}",
        refused.message()
    );
    assert!(s.lock(lock("c", "bob")).await.unwrap().lock.is_some(), "per user");
    let unlock = UnlockRequest {
        path: "a".into(),
        token: first.token,
        principal: "alice".into(),
    };
    s.unlock(unlock).await.unwrap();
    assert!(
        s.lock(lock("d", "alice")).await.unwrap().lock.is_some(),
        "unlocked: a place"
    );
    s.release(ReleaseRequest { path: "d".into() }).await.unwrap();
    assert!(
        s.lock(lock("short", "alice")).await.unwrap().lock.is_some(),
        "released: a place"
    );
    assert!(
        eventually(|| async { s.lock(lock("e", "alice")).await.is_ok() }).await,
        "expired locks free their places"
    );
}

async fn discovery_by_depth(kind: Kind) {
    let s = kind.open(HOUR).await;
    for path in ["d", "d/a", "d/a/deep", "d/b", "dd"] {
        assert!(
            take(&*s, path, Scope::Shared, LockDepth::Zero)
                .await
                .lock
                .is_some()
        );
    }
    assert_eq!(discover(&*s, "d", 0).await, ["d"]);
    assert_eq!(
        discover(&*s, "d", 1).await,
        ["d", "d/a", "d/b"],
        "members, not deeper"
    );
    assert_eq!(discover(&*s, "d", 2).await, ["d", "d/a", "d/a/deep", "d/b"]);
    assert_eq!(discover(&*s, "", 1).await, ["d", "dd"]);
    assert_eq!(
        s.release(ReleaseRequest { path: "d".into() })
            .await
            .unwrap()
            .released,
        4
    );
    assert_eq!(discover(&*s, "", 2).await, ["dd"], "release stops at the tree");
}

async fn owner_and_flags_round_trip(kind: Kind) {
    let s = kind.open(HOUR).await;
    let owner = "<D:href xmlns:D=\"DAV:\">mailto:ünïcode@example.com</D:href>";
    let granted = s
        .lock(LockRequest {
            path: "dir with space/ü".into(),
            scope: Scope::Shared as i32,
            depth: LockDepth::Infinity as i32,
            owner_xml: owner.as_bytes().to_vec().into(),
            principal: "carol".into(),
            timeout_seconds: 600,
            collection: true,
        })
        .await
        .unwrap()
        .lock
        .unwrap();
    let found = s
        .discover(DiscoverRequest {
            path: "dir with space/ü/x".into(),
            depth: 0,
        })
        .await
        .unwrap();
    let lock = &found.resources[0].locks[0];
    let same_but_time_left = kubedav_api::locks::ActiveLock {
        timeout_seconds: lock.timeout_seconds,
        ..granted
    };
    assert_eq!(
        lock, &same_but_time_left,
        "everything but the time left comes back as given"
    );
    assert!(
        (590..=600).contains(&lock.timeout_seconds),
        "{}",
        lock.timeout_seconds
    );
    assert_eq!(&lock.owner_xml[..], owner.as_bytes());
}

/// Two stores on one Redis, as two locks replicas are.
fn two_replicas(redis: &RedisServer) -> [Arc<dyn Locks>; 2] {
    [
        Arc::new(redis_store(redis, "test:", HOUR)),
        Arc::new(redis_store(redis, "test:", HOUR)),
    ]
}

async fn redis_command<T: ::redis::FromRedisValue>(redis: &RedisServer, args: &[&str]) -> T {
    let mut connection = kubedav_kit::redis::connect(&redis.url(0)).unwrap();
    let mut command = ::redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query_async(&mut connection).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_replicas_share_locks_and_exactly_one_wins_a_race() {
    let redis = RedisServer::start();
    let [a, b] = two_replicas(&redis);
    let mut racers = Vec::new();
    for i in 0..32 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        racers.push(tokio::spawn(async move {
            take(&*store, "contended", Scope::Exclusive, LockDepth::Zero).await
        }));
    }
    let mut winners = Vec::new();
    for racer in racers {
        if let Some(lock) = racer.await.unwrap().lock {
            winners.push(lock);
        }
    }
    assert_eq!(winners.len(), 1, "exactly one of 32 racing LOCKs wins");
    let token = &winners[0].token;
    for store in [&a, &b] {
        assert_eq!(check(&**store, "contended", false, vec![]).await, Outcome::Locked);
        let with_token = vec![token_list(None, &[token])];
        assert_eq!(
            check(&**store, "contended", false, with_token).await,
            Outcome::Allowed
        );
    }
    let unlock = UnlockRequest {
        path: "contended".into(),
        token: token.clone(),
        principal: String::new(),
    };
    b.unlock(unlock).await.unwrap();
    assert_eq!(check(&*a, "contended", false, vec![]).await, Outcome::Allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_keys_live_under_the_prefix() {
    let redis = RedisServer::start();
    let ours = redis_store(&redis, "team-a:", HOUR);
    let theirs = redis_store(&redis, "team-b:", HOUR);
    assert!(
        take(&ours, "f", Scope::Exclusive, LockDepth::Zero)
            .await
            .lock
            .is_some()
    );
    assert!(
        take(&theirs, "f", Scope::Exclusive, LockDepth::Zero)
            .await
            .lock
            .is_some(),
        "another prefix is another lock space"
    );
    let keys: Vec<String> = redis_command(&redis, &["KEYS", "*"]).await;
    assert!(!keys.is_empty());
    for key in keys {
        assert!(
            key.starts_with("team-a:locks:") || key.starts_with("team-b:locks:"),
            "{key} is outside the prefixes"
        );
    }
}

/// A store whose first connection met a peer that does not speak Redis's protocol (in
/// Kubernetes, a Service address before kube-proxy has programmed it can lead to such a
/// peer) works as soon as its Redis answers: the connection is tried again, where redis's
/// ConnectionManager alone kept returning that first failure (found on the real node).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_store_that_first_met_a_stranger_works_once_redis_answers() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let redis = RedisServer::start();
    let target = redis
        .url(0)
        .trim_start_matches("redis://")
        .trim_end_matches("/0")
        .to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front = listener.local_addr().unwrap();
    let redis_answers = Arc::new(AtomicBool::new(false));
    let answers = redis_answers.clone();
    tokio::spawn(async move {
        loop {
            let (mut client, _) = listener.accept().await.unwrap();
            if answers.load(Ordering::SeqCst) {
                let target = target.clone();
                tokio::spawn(async move {
                    let mut redis = tokio::net::TcpStream::connect(target).await.unwrap();
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut redis).await;
                });
            } else {
                let mut request = [0u8; 256];
                let _ = client.read(&mut request).await;
                let _ = client
                    .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                    .await;
            }
        }
    });
    let store = RedisLocks::new(
        kubedav_kit::redis::connect(&format!("redis://{front}/0")).unwrap(),
        "test:",
        HOUR,
    );
    let refused = store
        .lock(LockRequest {
            path: "f".into(),
            scope: Scope::Exclusive as i32,
            depth: LockDepth::Zero as i32,
            ..Default::default()
        })
        .await;
    assert!(refused.is_err(), "no lock while the peer is not Redis");

    redis_answers.store(true, Ordering::SeqCst);
    let mut locked = false;
    for _ in 0..50 {
        let request = LockRequest {
            path: "f".into(),
            scope: Scope::Exclusive as i32,
            depth: LockDepth::Zero as i32,
            ..Default::default()
        };
        if store
            .lock(request)
            .await
            .is_ok_and(|answer| answer.lock.is_some())
        {
            locked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(locked, "the store locks once Redis answers");
}

/// Calls of one Redis command since the last CONFIG RESETSTAT.
async fn calls(redis: &RedisServer, command: &str) -> u64 {
    let text: String = redis_command(redis, &["INFO", "commandstats"]).await;
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_descendant_checks_read_the_index_not_every_lock() {
    let redis = RedisServer::start();
    let store = redis_store(&redis, "test:", HOUR);
    for i in 0..500 {
        let path = format!("elsewhere/{i}");
        assert!(
            take(&store, &path, Scope::Exclusive, LockDepth::Zero)
                .await
                .lock
                .is_some()
        );
    }
    assert!(
        take(&store, "dir/sub/file", Scope::Exclusive, LockDepth::Zero)
            .await
            .lock
            .is_some()
    );
    redis_command::<()>(&redis, &["CONFIG", "RESETSTAT"]).await;
    let refused = take(&store, "dir", Scope::Exclusive, LockDepth::Infinity).await;
    assert_eq!(refused.conflicts.len(), 1, "the lock below is found");
    assert_eq!(
        check(&store, "dir", true, vec![]).await,
        Outcome::Locked,
        "and a tree write sees it"
    );
    let looked_at = calls(&redis, "pttl").await;
    assert!(
        looked_at <= 4,
        "a LOCK and a check on `dir` looked at {looked_at} locks; only the one below `dir` matters"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_outage_fails_closed_and_service_resumes_by_itself() {
    let mut redis = RedisServer::start();
    let store = redis_store(&redis, "test:", HOUR);
    let token = take(&store, "kept", Scope::Exclusive, LockDepth::Zero)
        .await
        .lock
        .unwrap()
        .token;
    store.ready().await.unwrap();

    redis.stop();
    let unavailable = tonic::Code::Unavailable;
    let started = std::time::Instant::now();
    let write = CheckWriteRequest {
        targets: vec![WriteTarget {
            path: "free".into(),
            recursive: false,
        }],
        request_path: "free".into(),
        ..Default::default()
    };
    assert_eq!(
        store.check_write(write.clone()).await.unwrap_err().code(),
        unavailable
    );
    let lock = LockRequest {
        path: "free".into(),
        ..Default::default()
    };
    assert_eq!(store.lock(lock.clone()).await.unwrap_err().code(), unavailable);
    let unlock = UnlockRequest {
        path: "kept".into(),
        token: token.clone(),
        principal: String::new(),
    };
    assert_eq!(store.unlock(unlock).await.unwrap_err().code(), unavailable);
    let refresh = RefreshRequest {
        path: "kept".into(),
        token: token.clone(),
        principal: String::new(),
        timeout_seconds: 60,
    };
    assert_eq!(store.refresh(refresh).await.unwrap_err().code(), unavailable);
    let discover = DiscoverRequest {
        path: String::new(),
        depth: 1,
    };
    assert_eq!(store.discover(discover).await.unwrap_err().code(), unavailable);
    let release = ReleaseRequest { path: "kept".into() };
    assert_eq!(store.release(release).await.unwrap_err().code(), unavailable);
    assert!(store.ready().await.unwrap_err().contains("Redis"));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "failing takes at most the connect timeout, not forever"
    );

    redis.restart();
    assert!(
        eventually(|| async { store.ready().await.is_ok() }).await,
        "the same store reconnects by itself"
    );
    assert_eq!(
        check(&store, "kept", false, vec![]).await,
        Outcome::Locked,
        "the lock survived (Redis persisted it)"
    );
    assert_eq!(
        store.check_write(write).await.unwrap().outcome(),
        Outcome::Allowed
    );
    assert!(store.lock(lock).await.unwrap().lock.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_that_never_answered_is_unavailable_not_a_hang() {
    let url = format!("redis://127.0.0.1:{}/0", kubedav_testkit::free_port());
    let store = RedisLocks::new(kubedav_kit::redis::connect(&url).unwrap(), "test:", HOUR);
    let status = store
        .lock(LockRequest {
            path: "f".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert!(status.message().contains("Redis"), "{}", status.message());
}
