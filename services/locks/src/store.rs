//! The in-memory lock store and the lock rules.

use kubedav_api::locks::{
    ActiveLock, CheckWriteRequest, CheckWriteResponse, Condition, DiscoverRequest, DiscoverResponse,
    LockDepth, LockRequest, LockResponse, Locks, RefreshRequest, RefreshResponse, ReleaseRequest,
    ReleaseResponse, ResourceLocks, Scope, UnlockRequest, UnlockResponse, check_write_response::Outcome,
    condition,
};
use prometheus::{IntCounter, IntGauge, register_int_counter, register_int_gauge};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};
use tonic::Status;

static ACTIVE: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge!("kubedav_locks_active", "Locks currently held.").expect("metric registers once")
});
static CONFLICTS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "kubedav_locks_conflicts_total",
        "LOCK requests and writes refused because of a lock."
    )
    .expect("metric registers once")
});

/// A held lock and when it expires.
#[derive(Clone, Debug)]
struct Held {
    lock: ActiveLock,
    expires: Instant,
}

impl Held {
    /// The lock as reported, with the seconds it has left.
    fn report(&self, now: Instant) -> ActiveLock {
        let left = self.expires.saturating_duration_since(now).as_secs().max(1);
        ActiveLock {
            timeout_seconds: left,
            ..self.lock.clone()
        }
    }

    fn infinite(&self) -> bool {
        self.lock.depth == LockDepth::Infinity as i32
    }

    fn exclusive(&self) -> bool {
        self.lock.scope == Scope::Exclusive as i32
    }
}

#[derive(Default)]
struct State {
    /// Locks by root path.
    by_root: BTreeMap<String, Vec<Held>>,
    /// Root path by token.
    roots: HashMap<String, String>,
}

/// The path and its ancestors, root ("") first.
fn ancestors_and_self(path: &str) -> Vec<&str> {
    let mut out = vec![""];
    for (i, c) in path.char_indices() {
        if c == '/' {
            out.push(&path[..i]);
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
    out
}

/// Whether `path` lies strictly below `root`.
fn below(path: &str, root: &str) -> bool {
    if root.is_empty() {
        return !path.is_empty();
    }
    path.len() > root.len() && path.starts_with(root) && path.as_bytes()[root.len()] == b'/'
}

impl State {
    fn prune(&mut self, root: &str, now: Instant) {
        if let Some(locks) = self.by_root.get_mut(root) {
            let before = locks.len();
            let roots = &mut self.roots;
            locks.retain(|held| {
                let live = held.expires > now;
                if !live {
                    roots.remove(&held.lock.token);
                }
                live
            });
            ACTIVE.sub((before - locks.len()) as i64);
            if locks.is_empty() {
                self.by_root.remove(root);
            }
        }
    }

    /// Locks that apply to `path`: rooted there, or depth infinity on an ancestor.
    fn applicable(&mut self, path: &str, now: Instant) -> Vec<Held> {
        let mut out = Vec::new();
        for root in ancestors_and_self(path) {
            self.prune(root, now);
            if let Some(locks) = self.by_root.get(root) {
                out.extend(locks.iter().filter(|h| root == path || h.infinite()).cloned());
            }
        }
        out
    }

    /// Locks rooted strictly below `path` (one range scan of the index).
    fn descendants(&mut self, path: &str, now: Instant) -> Vec<Held> {
        let roots: Vec<String> = if path.is_empty() {
            self.by_root.keys().filter(|k| !k.is_empty()).cloned().collect()
        } else {
            let (from, to) = (format!("{path}/"), format!("{path}0"));
            self.by_root.range(from..to).map(|(k, _)| k.clone()).collect()
        };
        let mut out = Vec::new();
        for root in roots {
            self.prune(&root, now);
            out.extend(self.by_root.get(&root).into_iter().flatten().cloned());
        }
        out
    }

    fn by_token(&mut self, token: &str, now: Instant) -> Option<Held> {
        let root = self.roots.get(token)?.clone();
        self.prune(&root, now);
        self.by_root
            .get(&root)?
            .iter()
            .find(|h| h.lock.token == token)
            .cloned()
    }

    fn remove_token(&mut self, token: &str) {
        if let Some(root) = self.roots.remove(token)
            && let Some(locks) = self.by_root.get_mut(&root)
        {
            locks.retain(|h| h.lock.token != token);
            ACTIVE.dec();
            if locks.is_empty() {
                self.by_root.remove(&root);
            }
        }
    }
}

/// Whether `held` applies to `path`.
fn applies(held: &Held, path: &str) -> bool {
    held.lock.root == path || (held.infinite() && below(path, &held.lock.root))
}

/// The in-memory lock store.
pub struct MemoryLocks {
    state: Mutex<State>,
    max_timeout: Duration,
}

impl MemoryLocks {
    /// A store granting at most `max_timeout` per lock (longer requests, and `Infinite`,
    /// get the maximum).
    pub fn new(max_timeout: Duration) -> Self {
        Self {
            state: Mutex::new(State::default()),
            max_timeout: max_timeout.max(Duration::from_secs(1)),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn grant(&self, requested: u64) -> Duration {
        if requested == 0 {
            self.max_timeout
        } else {
            Duration::from_secs(requested).min(self.max_timeout)
        }
    }

    fn condition_holds(
        state: &mut State,
        c: &Condition,
        resource: &str,
        request: &CheckWriteRequest,
        now: Instant,
    ) -> bool {
        let holds = match &c.kind {
            Some(condition::Kind::StateToken(token)) => state
                .applicable(resource, now)
                .iter()
                .any(|h| &h.lock.token == token),
            Some(condition::Kind::Etag(etag)) => request.etags.get(resource) == Some(etag),
            None => false,
        };
        holds != c.not
    }
}

#[async_trait::async_trait]
impl Locks for MemoryLocks {
    async fn lock(&self, request: LockRequest) -> Result<LockResponse, Status> {
        let now = Instant::now();
        let mut state = self.state();
        let exclusive = request.scope == Scope::Exclusive as i32;
        let mut relevant = state.applicable(&request.path, now);
        if request.depth == LockDepth::Infinity as i32 {
            relevant.extend(state.descendants(&request.path, now));
        }
        let conflicts: Vec<ActiveLock> = relevant
            .iter()
            .filter(|h| exclusive || h.exclusive())
            .map(|h| h.report(now))
            .collect();
        if !conflicts.is_empty() {
            CONFLICTS.inc();
            return Ok(LockResponse {
                lock: None,
                conflicts,
            });
        }
        let timeout = self.grant(request.timeout_seconds);
        let lock = ActiveLock {
            token: format!("urn:uuid:{}", uuid::Uuid::new_v4()),
            root: request.path.clone(),
            scope: request.scope,
            depth: request.depth,
            owner_xml: request.owner_xml,
            principal: request.principal,
            timeout_seconds: timeout.as_secs(),
            collection: request.collection,
        };
        state.roots.insert(lock.token.clone(), request.path.clone());
        state.by_root.entry(request.path).or_default().push(Held {
            lock: lock.clone(),
            expires: now + timeout,
        });
        ACTIVE.inc();
        Ok(LockResponse {
            lock: Some(lock),
            conflicts: Vec::new(),
        })
    }

    async fn refresh(&self, request: RefreshRequest) -> Result<RefreshResponse, Status> {
        let now = Instant::now();
        let mut state = self.state();
        let held = state
            .by_token(&request.token, now)
            .ok_or_else(|| Status::not_found(format!("no lock is held with the token {}", request.token)))?;
        if !applies(&held, &request.path) {
            return Err(Status::failed_precondition(format!(
                "the lock {} does not cover this resource",
                request.token
            )));
        }
        let expires = now + self.grant(request.timeout_seconds);
        let locks = state
            .by_root
            .get_mut(&held.lock.root)
            .expect("the lock was just found");
        let entry = locks
            .iter_mut()
            .find(|h| h.lock.token == request.token)
            .expect("the lock was just found");
        entry.expires = expires;
        Ok(RefreshResponse {
            lock: Some(entry.report(now)),
        })
    }

    async fn unlock(&self, request: UnlockRequest) -> Result<UnlockResponse, Status> {
        let now = Instant::now();
        let mut state = self.state();
        let held = state
            .by_token(&request.token, now)
            .ok_or_else(|| Status::not_found(format!("no lock is held with the token {}", request.token)))?;
        if !applies(&held, &request.path) {
            return Err(Status::failed_precondition(format!(
                "the lock {} does not cover this resource",
                request.token
            )));
        }
        if !held.lock.principal.is_empty() && held.lock.principal != request.principal {
            return Err(Status::permission_denied(
                "only the user who took a lock may release it",
            ));
        }
        state.remove_token(&request.token);
        Ok(UnlockResponse {})
    }

    async fn check_write(&self, request: CheckWriteRequest) -> Result<CheckWriteResponse, Status> {
        let now = Instant::now();
        let mut state = self.state();
        if !request.if_header.is_empty() {
            let holds = request.if_header.iter().any(|tagged| {
                let resource = if tagged.untagged {
                    request.request_path.as_str()
                } else {
                    tagged.path.as_str()
                };
                tagged.lists.iter().any(|list| {
                    list.conditions
                        .iter()
                        .all(|c| Self::condition_holds(&mut state, c, resource, &request, now))
                })
            });
            if !holds {
                return Ok(CheckWriteResponse {
                    outcome: Outcome::PreconditionFailed as i32,
                    conflicts: Vec::new(),
                });
            }
        }
        // A token counts as submitted when it appears in the If header and, with
        // authentication on, belongs to the requesting user.
        let submitted: HashSet<&str> = request
            .if_header
            .iter()
            .flat_map(|t| &t.lists)
            .flat_map(|l| &l.conditions)
            .filter_map(|c| match &c.kind {
                Some(condition::Kind::StateToken(token)) => Some(token.as_str()),
                _ => None,
            })
            .collect();
        let usable = |h: &Held| {
            submitted.contains(h.lock.token.as_str())
                && (h.lock.principal.is_empty() || h.lock.principal == request.principal)
        };
        let mut conflicts = Vec::new();
        for target in &request.targets {
            let mut relevant = state.applicable(&target.path, now);
            if target.recursive {
                relevant.extend(state.descendants(&target.path, now));
            }
            // Every exclusive lock needs its token; shared locks need one of theirs per
            // locked resource.
            let mut shared_roots: HashMap<&str, (bool, Vec<&Held>)> = HashMap::new();
            for held in &relevant {
                if held.exclusive() {
                    if !usable(held) {
                        conflicts.push(held.report(now));
                    }
                } else {
                    let entry = shared_roots.entry(held.lock.root.as_str()).or_default();
                    entry.0 |= usable(held);
                    entry.1.push(held);
                }
            }
            for (satisfied, locks) in shared_roots.values() {
                if !satisfied {
                    conflicts.extend(locks.iter().map(|h| h.report(now)));
                }
            }
        }
        if conflicts.is_empty() {
            Ok(CheckWriteResponse {
                outcome: Outcome::Allowed as i32,
                conflicts,
            })
        } else {
            CONFLICTS.inc();
            Ok(CheckWriteResponse {
                outcome: Outcome::Locked as i32,
                conflicts,
            })
        }
    }

    async fn discover(&self, request: DiscoverRequest) -> Result<DiscoverResponse, Status> {
        let now = Instant::now();
        let mut state = self.state();
        let mut resources = Vec::new();
        let own: Vec<ActiveLock> = state
            .applicable(&request.path, now)
            .iter()
            .map(|h| h.report(now))
            .collect();
        if !own.is_empty() {
            resources.push(ResourceLocks {
                path: request.path.clone(),
                locks: own,
            });
        }
        if request.depth >= 1 {
            let mut members: BTreeMap<String, Vec<ActiveLock>> = BTreeMap::new();
            for held in state.descendants(&request.path, now) {
                let rest = if request.path.is_empty() {
                    held.lock.root.as_str()
                } else {
                    &held.lock.root[request.path.len() + 1..]
                };
                if request.depth >= 2 || !rest.contains('/') {
                    members
                        .entry(held.lock.root.clone())
                        .or_default()
                        .push(held.report(now));
                }
            }
            resources.extend(
                members
                    .into_iter()
                    .map(|(path, locks)| ResourceLocks { path, locks }),
            );
        }
        Ok(DiscoverResponse { resources })
    }

    async fn release(&self, request: ReleaseRequest) -> Result<ReleaseResponse, Status> {
        let now = Instant::now();
        let mut state = self.state();
        let mut tokens: Vec<String> = state
            .descendants(&request.path, now)
            .into_iter()
            .map(|h| h.lock.token)
            .collect();
        tokens.extend(
            state
                .by_root
                .get(&request.path)
                .into_iter()
                .flatten()
                .map(|h| h.lock.token.clone()),
        );
        for token in &tokens {
            state.remove_token(token);
        }
        Ok(ReleaseResponse {
            released: tokens.len() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubedav_api::locks::{ConditionList, TaggedLists, WriteTarget};

    fn store() -> MemoryLocks {
        MemoryLocks::new(Duration::from_secs(3600))
    }

    async fn take(store: &MemoryLocks, path: &str, scope: Scope, depth: LockDepth) -> LockResponse {
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

    async fn check(store: &MemoryLocks, path: &str, recursive: bool, if_header: Vec<TaggedLists>) -> Outcome {
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

    #[tokio::test]
    async fn exclusive_and_shared_conflicts() {
        let s = store();
        let first = take(&s, "a/f", Scope::Shared, LockDepth::Zero).await;
        assert!(first.lock.is_some());
        assert!(
            take(&s, "a/f", Scope::Shared, LockDepth::Zero)
                .await
                .lock
                .is_some(),
            "shared locks coexist"
        );
        let refused = take(&s, "a/f", Scope::Exclusive, LockDepth::Zero).await;
        assert!(refused.lock.is_none() && refused.conflicts.len() == 2);
        assert!(
            take(&s, "a", Scope::Exclusive, LockDepth::Infinity)
                .await
                .lock
                .is_none(),
            "a lock below conflicts"
        );
        assert!(
            take(&s, "a", Scope::Exclusive, LockDepth::Zero)
                .await
                .lock
                .is_some(),
            "depth 0 does not reach below"
        );
        assert!(
            take(&s, "b", Scope::Exclusive, LockDepth::Infinity)
                .await
                .lock
                .is_some()
        );
        assert!(
            take(&s, "b/c/d", Scope::Shared, LockDepth::Zero)
                .await
                .lock
                .is_none(),
            "an ancestor's infinity lock"
        );
        assert!(
            take(&s, "bb", Scope::Exclusive, LockDepth::Zero)
                .await
                .lock
                .is_some(),
            "prefix is not ancestry"
        );
    }

    #[tokio::test]
    async fn writes_need_the_token() {
        let s = store();
        let token = take(&s, "dir", Scope::Exclusive, LockDepth::Infinity)
            .await
            .lock
            .unwrap()
            .token;
        assert_eq!(check(&s, "dir/deep/file", false, vec![]).await, Outcome::Locked);
        assert_eq!(
            check(&s, "dir/deep/file", false, vec![token_list(None, &[&token])]).await,
            Outcome::Allowed
        );
        assert_eq!(
            check(&s, "", true, vec![]).await,
            Outcome::Locked,
            "a tree write sees locks below"
        );
        assert_eq!(check(&s, "other", false, vec![]).await, Outcome::Allowed);
        let tagged = vec![token_list(Some("dir"), &[&token])];
        assert_eq!(check(&s, "dir/x", false, tagged).await, Outcome::Allowed);
        let wrong = vec![token_list(
            None,
            &["urn:uuid:00000000-0000-0000-0000-000000000000"],
        )];
        assert_eq!(
            check(&s, "dir/x", false, wrong).await,
            Outcome::PreconditionFailed
        );
    }

    #[tokio::test]
    async fn not_and_etag_conditions() {
        let s = store();
        let token = take(&s, "f", Scope::Exclusive, LockDepth::Zero)
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

    #[tokio::test]
    async fn refresh_unlock_release_and_expiry() {
        let s = MemoryLocks::new(Duration::from_secs(1));
        let lock = take(&s, "c", Scope::Exclusive, LockDepth::Infinity)
            .await
            .lock
            .unwrap();
        assert_eq!(lock.timeout_seconds, 1, "capped by the maximum");
        let refreshed = s
            .refresh(RefreshRequest {
                path: "c/member".into(),
                token: lock.token.clone(),
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
        let discovered = s
            .discover(DiscoverRequest {
                path: String::new(),
                depth: 1,
            })
            .await
            .unwrap();
        assert_eq!(discovered.resources.len(), 1);
        assert_eq!(
            s.release(ReleaseRequest { path: "c".into() })
                .await
                .unwrap()
                .released,
            1
        );
        assert_eq!(
            s.discover(DiscoverRequest {
                path: "c".into(),
                depth: 0
            })
            .await
            .unwrap()
            .resources
            .len(),
            0
        );

        let short = take(&s, "e", Scope::Exclusive, LockDepth::Zero)
            .await
            .lock
            .unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        assert!(
            s.discover(DiscoverRequest {
                path: "e".into(),
                depth: 0
            })
            .await
            .unwrap()
            .resources
            .is_empty()
        );
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
    }

    #[tokio::test]
    async fn principals_own_their_tokens() {
        let s = store();
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
        let unlock = UnlockRequest {
            path: "p".into(),
            token,
            principal: "bob".into(),
        };
        assert_eq!(
            s.unlock(unlock).await.unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
    }
}
