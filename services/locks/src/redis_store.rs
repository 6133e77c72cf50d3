//! The Redis lock store: locks shared by every replica of the locks service, kept across
//! their restarts. Every change is one Lua script, so a conflict check and the insert
//! that follows it, a refresh, an unlock or a release happen atomically however many
//! replicas race; reads are one script too, so they see one consistent state. The data
//! layout is described in `lua/common.lua`.
//!
//! When Redis cannot be reached every call fails with `UNAVAILABLE`: the gateway answers
//! writes, LOCK and UNLOCK with 503 (fail closed: a write is never let through because
//! the lock state could not be read) and PROPFIND with empty lockdiscovery.

use crate::metrics::counted;
use crate::metrics::{ACTIVE, CONFLICTS, STORE_ERRORS};
use crate::rules;
use crate::rules::{grant, new_token, not_covering, not_held, not_owner, too_many_locks};
use kubedav_api::locks::check_write_response::Outcome;
use kubedav_api::locks::{
    ActiveLock, CheckWriteRequest, CheckWriteResponse, DiscoverRequest, DiscoverResponse, LockDepth,
    LockRequest, LockResponse, Locks, RefreshRequest, RefreshResponse, ReleaseRequest, ReleaseResponse,
    UnlockRequest, UnlockResponse,
};
use kubedav_kit::redis::Redis;
use redis::Script;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tonic::Status;
use tracing::Instrument;

macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| Script::new(concat!(include_str!("lua/common.lua"), include_str!($file))))
    };
}

static LOCK: LazyLock<Script> = script!("lua/lock.lua");
static REFRESH: LazyLock<Script> = script!("lua/refresh.lua");
static UNLOCK: LazyLock<Script> = script!("lua/unlock.lua");
static SNAPSHOT: LazyLock<Script> = script!("lua/snapshot.lua");
static RELEASE: LazyLock<Script> = script!("lua/release.lua");
static COUNT: LazyLock<Script> = script!("lua/count.lua");

/// A script's reply: a list of lists of strings (a status, or locks).
type Reply = Vec<Vec<Vec<u8>>>;

/// The lock store on Redis.
pub struct RedisLocks {
    connection: Redis,
    prefix: String,
    max_timeout: Duration,
    max_per_principal: usize,
}

impl RedisLocks {
    /// A store on `connection`, keeping its keys under `prefix` followed by `locks:`, and
    /// granting at most `max_timeout` per lock.
    pub fn new(connection: Redis, prefix: &str, max_timeout: Duration) -> Self {
        // Every operation's error series exists from the start (at 0), so rates and alerts
        // over it answer before the first outage.
        for operation in [
            "lock",
            "refresh",
            "unlock",
            "check_write",
            "discover",
            "release",
            "count",
        ] {
            STORE_ERRORS.with_label_values(&[operation]);
        }
        Self {
            connection,
            prefix: format!("{prefix}locks:"),
            max_timeout: max_timeout.max(Duration::from_secs(1)),
            max_per_principal: 0,
        }
    }

    /// At most `max` live locks per principal (0: no limit); past it LOCK fails with
    /// RESOURCE_EXHAUSTED. Counted in Redis, so the bound holds across replicas.
    pub fn with_max_locks_per_principal(mut self, max: usize) -> Self {
        self.max_per_principal = max;
        self
    }

    /// Whether Redis answers, for `/readyz`; also updates the count of active locks.
    pub async fn ready(&self) -> Result<(), String> {
        let reply = self
            .run(&COUNT, "count", Vec::new())
            .await
            .map_err(|status| status.message().to_owned())?;
        let count = status_of(&reply).parse::<i64>().unwrap_or_default();
        ACTIVE.set(count);
        Ok(())
    }

    /// Runs a script that reads, with the prefix and `args`.
    async fn run(&self, script: &Script, operation: &str, args: Vec<Vec<u8>>) -> Result<Reply, Status> {
        invoke(&self.connection, &self.prefix, script, operation, &args)
            .await
            .map_err(|e| self.unavailable(operation, &e))
    }

    /// Runs a script that changes locks, with the prefix and `args`: answered once as
    /// many replicas as `--redis-replica-acks` asks have the change, so that a failover
    /// never loses a change that was answered. A change they did not acknowledge is
    /// refused (`UNAVAILABLE`), and may or may not have been made.
    async fn change(&self, script: &Script, operation: &str, args: Vec<Vec<u8>>) -> Result<Reply, Status> {
        acknowledged(&self.connection, &self.prefix, script, operation, args)
            .await
            .map_err(|e| self.unavailable(operation, &e))
    }

    /// Takes back the lock that `undo` (its token, path and principal) names: at once, and,
    /// if Redis does not answer, again every [`TAKE_BACK_EVERY`] in the background until it
    /// does (the lock is then gone, or was never made) or the lock has run out anyway.
    async fn take_back(&self, undo: Vec<Vec<u8>>, timeout: Duration) {
        let until = tokio::time::Instant::now() + timeout;
        let Err(error) = unlock_with(&self.connection, &self.prefix, &undo).await else {
            return;
        };
        tracing::warn!(%error, "a refused lock could not be taken back yet; trying again until Redis answers");
        let (connection, prefix) = (self.connection.clone(), self.prefix.clone());
        tokio::spawn(async move {
            loop {
                if tokio::time::Instant::now() + TAKE_BACK_EVERY >= until {
                    return;
                }
                tokio::time::sleep(TAKE_BACK_EVERY).await;
                if unlock_with(&connection, &prefix, &undo).await.is_ok() {
                    tracing::info!("a refused lock was taken back once Redis answered");
                    return;
                }
            }
        });
    }

    fn unavailable(&self, operation: &str, error: &redis::RedisError) -> Status {
        STORE_ERRORS.with_label_values(&[operation]).inc();
        if kubedav_kit::redis::unacknowledged(error) {
            if first_this_second() {
                tracing::warn!(operation, %error, "lock change not acknowledged by Redis replicas: refused");
            }
            return Status::unavailable(format!(
                "the lock store (Redis) could not confirm that a replica has this change ({error}); \
                 try again"
            ));
        }
        if first_this_second() {
            tracing::warn!(operation, %error, "lock store (Redis) unreachable: failing closed");
        }
        Status::unavailable(format!(
            "the lock store (Redis) cannot be reached ({error}); lock decisions are refused until it is back"
        ))
    }
}

/// How often a refused lock is tried to be taken back while Redis does not answer.
const TAKE_BACK_EVERY: Duration = Duration::from_millis(250);

/// Runs `script` on `connection` with `prefix` and `args`, as is: no replica is waited
/// for.
async fn invoke(
    connection: &Redis,
    prefix: &str,
    script: &Script,
    operation: &str,
    args: &[Vec<u8>],
) -> redis::RedisResult<Reply> {
    let mut invocation = script.prepare_invoke();
    invocation.arg(prefix);
    for arg in args {
        invocation.arg(arg);
    }
    invocation
        .invoke_async(&mut connection.clone())
        .instrument(kubedav_kit::redis::span("EVALSHA", operation))
        .await
}

/// Runs `script` on `connection` with `prefix` and `args`, answered once as many Redis
/// replicas as `--redis-replica-acks` asks have the change.
async fn acknowledged(
    connection: &Redis,
    prefix: &str,
    script: &Script,
    operation: &str,
    args: Vec<Vec<u8>>,
) -> redis::RedisResult<Reply> {
    let mut all = Vec::with_capacity(args.len() + 1);
    all.push(prefix.as_bytes().to_vec());
    all.extend(args);
    connection
        .eval_acknowledged(script, &[], &all)
        .instrument(kubedav_kit::redis::span("EVALSHA", operation))
        .await
}

/// Runs UNLOCK with `undo` (a token, its path and principal) on `connection`, answered
/// once a Redis replica has it, as a lock change is: a take-back only the master had
/// would be lost in a failover to a replica that had the lock. A token that was never
/// made, or is gone already, answers "missing", which is as good.
async fn unlock_with(connection: &Redis, prefix: &str, undo: &[Vec<u8>]) -> redis::RedisResult<Reply> {
    acknowledged(connection, prefix, &UNLOCK, "unlock", undo.to_vec()).await
}

/// Whether this is the first call in the current second: an outage under load logs one
/// line a second, not one per request (the metric counts them all).
fn first_this_second() -> bool {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    LAST.swap(now, Ordering::Relaxed) != now
}

/// The first element of a reply: its status word.
fn status_of(reply: &Reply) -> &str {
    reply
        .first()
        .and_then(|status| status.first())
        .and_then(|word| std::str::from_utf8(word).ok())
        .unwrap_or_default()
}

fn text(field: &[u8]) -> Result<String, Status> {
    String::from_utf8(field.to_vec())
        .map_err(|_| Status::internal("the lock store returned a non-UTF-8 field"))
}

fn number(field: &[u8]) -> Result<i64, Status> {
    text(field)?
        .parse()
        .map_err(|_| Status::internal("the lock store returned a malformed number"))
}

/// A lock from its reply list (see `lua/common.lua`).
fn parse_lock(fields: &[Vec<u8>]) -> Result<ActiveLock, Status> {
    let [token, root, scope, depth, owner, principal, left_ms, collection] = fields else {
        return Err(Status::internal(format!(
            "the lock store returned a lock with {} fields, not 8",
            fields.len()
        )));
    };
    Ok(ActiveLock {
        token: text(token)?,
        root: text(root)?,
        scope: number(scope)? as i32,
        depth: number(depth)? as i32,
        owner_xml: owner.clone().into(),
        principal: text(principal)?,
        timeout_seconds: (number(left_ms)?.max(1) as u64).div_ceil(1000),
        collection: number(collection)? == 1,
    })
}

fn parse_locks(lists: &[Vec<Vec<u8>>]) -> Result<Vec<ActiveLock>, Status> {
    lists.iter().map(|fields| parse_lock(fields)).collect()
}

fn flag(on: bool) -> Vec<u8> {
    if on { b"1".to_vec() } else { b"0".to_vec() }
}

impl RedisLocks {
    /// The locks rules need about `paths`, and the free root of `tree` when asked for
    /// (see `lua/snapshot.lua`).
    async fn snapshot(
        &self,
        operation: &str,
        paths: &[(String, bool)],
        tree: Option<&str>,
    ) -> Result<(Vec<ActiveLock>, Option<String>), Status> {
        let asked = [flag(tree.is_some()), tree.unwrap_or_default().as_bytes().to_vec()];
        let args = asked
            .into_iter()
            .chain(
                paths
                    .iter()
                    .flat_map(|(path, recursive)| [path.as_bytes().to_vec(), flag(*recursive)]),
            )
            .collect();
        let reply = self.run(&SNAPSHOT, operation, args).await?;
        let Some((free, locks)) = reply.split_first() else {
            return Err(Status::internal("the snapshot script replied nothing"));
        };
        let free = free
            .first()
            .map(|root| String::from_utf8_lossy(root).into_owned());
        Ok((parse_locks(locks)?, free))
    }

    /// Interprets the refusals refresh and unlock share.
    fn refusal(reply: &Reply, token: &str) -> Result<(), Status> {
        match status_of(reply) {
            "missing" => Err(not_held(token)),
            "elsewhere" => Err(not_covering(token)),
            "forbidden" => Err(not_owner()),
            _ => Ok(()),
        }
    }
}

#[async_trait::async_trait]
impl Locks for RedisLocks {
    async fn lock(&self, request: LockRequest) -> Result<LockResponse, Status> {
        let timeout = grant(request.timeout_seconds, self.max_timeout);
        let principal = request.principal.clone();
        let path = request.path.clone();
        let args = vec![
            request.path.into_bytes(),
            request.scope.to_string().into_bytes(),
            flag(request.depth == LockDepth::Infinity as i32),
            new_token().into_bytes(),
            request.owner_xml.to_vec(),
            request.principal.into_bytes(),
            flag(request.collection),
            timeout.as_millis().to_string().into_bytes(),
            self.max_per_principal.to_string().into_bytes(),
        ];
        let token = args[3].clone();
        let reply = match acknowledged(&self.connection, &self.prefix, &LOCK, "lock", args).await {
            Ok(reply) => reply,
            Err(e) => {
                // Redis may have made it (no replica acknowledged it, or the answer was
                // lost), but the client is told it did not get it: it must not linger
                // unseen until its timeout, where the client's next LOCK or a DELETE of
                // the folder would meet it.
                let undo = vec![token, path.into_bytes(), principal.into_bytes()];
                self.take_back(undo, timeout).await;
                return Err(self.unavailable("lock", &e));
            }
        };
        if status_of(&reply) == "toomany" {
            let held = reply
                .first()
                .and_then(|status| status.get(1))
                .and_then(|count| std::str::from_utf8(count).ok()?.parse().ok())
                .unwrap_or(self.max_per_principal);
            return Err(too_many_locks(&principal, held));
        }
        let locks = parse_locks(reply.get(1..).unwrap_or_default())?;
        match status_of(&reply) {
            "granted" => {
                ACTIVE.inc();
                Ok(LockResponse {
                    lock: locks.into_iter().next(),
                    conflicts: Vec::new(),
                })
            }
            "conflict" => {
                CONFLICTS.inc();
                Ok(LockResponse {
                    lock: None,
                    conflicts: locks,
                })
            }
            other => Err(Status::internal(format!(
                "the lock store answered LOCK with {other:?}, neither granted nor conflict"
            ))),
        }
    }

    async fn refresh(&self, request: RefreshRequest) -> Result<RefreshResponse, Status> {
        let timeout = grant(request.timeout_seconds, self.max_timeout);
        let args = vec![
            request.token.clone().into_bytes(),
            request.path.into_bytes(),
            timeout.as_millis().to_string().into_bytes(),
            request.principal.into_bytes(),
        ];
        let reply = self.change(&REFRESH, "refresh", args).await?;
        Self::refusal(&reply, &request.token)?;
        Ok(RefreshResponse {
            lock: parse_locks(reply.get(1..).unwrap_or_default())?
                .into_iter()
                .next(),
        })
    }

    async fn unlock(&self, request: UnlockRequest) -> Result<UnlockResponse, Status> {
        let args = vec![
            request.token.clone().into_bytes(),
            request.path.into_bytes(),
            request.principal.into_bytes(),
        ];
        let reply = self.change(&UNLOCK, "unlock", args).await?;
        Self::refusal(&reply, &request.token)?;
        ACTIVE.dec();
        let root = reply
            .first()
            .and_then(|status| status.get(1))
            .map(|root| text(root));
        Ok(UnlockResponse {
            root: root.transpose()?.unwrap_or_default(),
        })
    }

    async fn check_write(&self, request: CheckWriteRequest) -> Result<CheckWriteResponse, Status> {
        let tree = rules::tree_to_free(&request);
        let (snapshot, free) = self
            .snapshot("check_write", &rules::paths_to_check(&request), tree.as_deref())
            .await?;
        let mut answer = counted(rules::check_write(&request, &snapshot));
        if answer.outcome() == Outcome::Allowed {
            answer.free_root = free;
        }
        Ok(answer)
    }

    async fn discover(&self, request: DiscoverRequest) -> Result<DiscoverResponse, Status> {
        let paths = [(request.path.clone(), request.depth >= 1)];
        let (snapshot, _) = self.snapshot("discover", &paths, None).await?;
        Ok(rules::discover(&request, &snapshot))
    }

    async fn release(&self, request: ReleaseRequest) -> Result<ReleaseResponse, Status> {
        let reply = self
            .change(&RELEASE, "release", vec![request.path.into_bytes()])
            .await?;
        let released = status_of(&reply).parse::<u64>().unwrap_or_default();
        ACTIVE.dec_by(released as i64);
        Ok(ReleaseResponse { released })
    }
}
