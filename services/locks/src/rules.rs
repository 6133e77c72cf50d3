//! The lock rules both stores share (RFC 4918 sections 6, 7 and 10.4): which locks apply
//! to a resource, which ones a new lock conflicts with, whether a write may go ahead
//! given its If header, and what lockdiscovery reports. The rules work on a snapshot of
//! the locks that matter to one request, so a store only has to find those locks: the
//! ones rooted at the paths involved or their ancestors and, for tree operations, below.

use kubedav_api::locks::{
    ActiveLock, CheckWriteRequest, CheckWriteResponse, Condition, DiscoverRequest, DiscoverResponse,
    LockDepth, LockRequest, ResourceLocks, Scope, check_write_response::Outcome, condition,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use tonic::Status;

/// The path and its ancestors, root ("") first.
pub fn ancestors_and_self(path: &str) -> Vec<&str> {
    kubedav_api::locks::ancestors_and_self(path).collect()
}

/// The highest of `common` and its ancestors with no lock rooted at or below it
/// (`rooted_within` says whether one is), if any: the `free_root` of an allowed
/// `CheckWrite` without an If header, `common` being its targets' common tree.
pub fn free_root(common: &str, rooted_within: impl Fn(&str) -> bool) -> Option<String> {
    kubedav_api::locks::ancestors_and_self(common)
        .find(|tree| !rooted_within(tree))
        .map(str::to_owned)
}

/// The tree whose free root an allowed `request` reports: its targets' common tree,
/// when it asks for it and carries no If header (with one, locks may apply whose tokens
/// it submitted).
pub fn tree_to_free(request: &CheckWriteRequest) -> Option<String> {
    if !request.report_free_root || !request.if_header.is_empty() {
        return None;
    }
    kubedav_api::locks::common_tree(&request.targets)
}

/// Whether `path` lies strictly below `root`.
pub fn below(path: &str, root: &str) -> bool {
    path != root && kubedav_api::locks::within(path, root)
}

/// Whether `lock` has depth infinity.
pub fn infinite(lock: &ActiveLock) -> bool {
    lock.depth == LockDepth::Infinity as i32
}

/// Whether `lock` is exclusive.
pub fn exclusive(lock: &ActiveLock) -> bool {
    lock.scope == Scope::Exclusive as i32
}

/// Whether `lock` applies to `path`: rooted there, or depth infinity above it.
pub fn applies(lock: &ActiveLock, path: &str) -> bool {
    lock.root == path || (infinite(lock) && below(path, &lock.root))
}

/// The paths whose locks [`check_write`] needs, each with whether the locks below it
/// count too: the targets and every resource the If header names.
pub fn paths_to_check(request: &CheckWriteRequest) -> Vec<(String, bool)> {
    let mut paths: Vec<(String, bool)> = request
        .targets
        .iter()
        .map(|t| (t.path.clone(), t.recursive))
        .collect();
    for tagged in &request.if_header {
        let resource = if tagged.untagged {
            &request.request_path
        } else {
            &tagged.path
        };
        if !paths.iter().any(|(p, _)| p == resource) {
            paths.push((resource.clone(), false));
        }
    }
    paths
}

/// The locks among `locks` that a new lock as requested conflicts with: every lock that
/// applies to its path (and, for depth infinity, every lock below it) when it is
/// exclusive; the exclusive ones among those when it is shared.
pub fn lock_conflicts(request: &LockRequest, locks: &[ActiveLock]) -> Vec<ActiveLock> {
    let wants_exclusive = request.scope == Scope::Exclusive as i32;
    let wants_infinite = request.depth == LockDepth::Infinity as i32;
    locks
        .iter()
        .filter(|l| applies(l, &request.path) || (wants_infinite && below(&l.root, &request.path)))
        .filter(|l| wants_exclusive || exclusive(l))
        .cloned()
        .collect()
}

/// Whether one If-header condition holds for `resource`.
fn condition_holds(c: &Condition, resource: &str, request: &CheckWriteRequest, locks: &[ActiveLock]) -> bool {
    let holds = match &c.kind {
        Some(condition::Kind::StateToken(token)) => {
            locks.iter().any(|l| &l.token == token && applies(l, resource))
        }
        Some(condition::Kind::Etag(etag)) => request.etags.get(resource) == Some(etag),
        None => false,
    };
    holds != c.not
}

/// Decides a write, given `locks`: a snapshot covering [`paths_to_check`].
pub fn check_write(request: &CheckWriteRequest, locks: &[ActiveLock]) -> CheckWriteResponse {
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
                    .all(|c| condition_holds(c, resource, request, locks))
            })
        });
        if !holds {
            return CheckWriteResponse {
                outcome: Outcome::PreconditionFailed as i32,
                conflicts: Vec::new(),
                free_root: None,
            };
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
    let usable = |l: &ActiveLock| {
        submitted.contains(l.token.as_str()) && (l.principal.is_empty() || l.principal == request.principal)
    };
    let mut conflicts = Vec::new();
    for target in &request.targets {
        let relevant = locks
            .iter()
            .filter(|l| applies(l, &target.path) || (target.recursive && below(&l.root, &target.path)));
        // Every exclusive lock needs its token; shared locks need one of theirs per
        // locked resource.
        let mut shared_roots: HashMap<&str, (bool, Vec<&ActiveLock>)> = HashMap::new();
        for lock in relevant {
            if exclusive(lock) {
                if !usable(lock) {
                    conflicts.push(lock.clone());
                }
            } else {
                let entry = shared_roots.entry(lock.root.as_str()).or_default();
                entry.0 |= usable(lock);
                entry.1.push(lock);
            }
        }
        for (satisfied, locks) in shared_roots.values() {
            if !satisfied {
                conflicts.extend(locks.iter().map(|l| (*l).clone()));
            }
        }
    }
    let outcome = if conflicts.is_empty() {
        Outcome::Allowed
    } else {
        Outcome::Locked
    };
    CheckWriteResponse {
        outcome: outcome as i32,
        conflicts,
        free_root: None,
    }
}

/// lockdiscovery for a resource and, with depth 1 or more, its members, given `locks`: a
/// snapshot of the path (recursive when the depth is not 0).
pub fn discover(request: &DiscoverRequest, locks: &[ActiveLock]) -> DiscoverResponse {
    let mut resources = Vec::new();
    let own: Vec<ActiveLock> = locks
        .iter()
        .filter(|l| applies(l, &request.path))
        .cloned()
        .collect();
    if !own.is_empty() {
        resources.push(ResourceLocks {
            path: request.path.clone(),
            locks: own,
        });
    }
    if request.depth >= 1 {
        let mut members: BTreeMap<String, Vec<ActiveLock>> = BTreeMap::new();
        for lock in locks.iter().filter(|l| below(&l.root, &request.path)) {
            let rest = if request.path.is_empty() {
                lock.root.as_str()
            } else {
                &lock.root[request.path.len() + 1..]
            };
            if request.depth >= 2 || !rest.contains('/') {
                members.entry(lock.root.clone()).or_default().push(lock.clone());
            }
        }
        resources.extend(
            members
                .into_iter()
                .map(|(path, locks)| ResourceLocks { path, locks }),
        );
    }
    DiscoverResponse { resources }
}

// What both stores answer the same way: granted timeouts, new tokens, and the errors
// of a refusal.

/// The timeout granted for a requested one: `requested` seconds (0 = as long as allowed),
/// at most `max`.
pub fn grant(requested: u64, max: Duration) -> Duration {
    if requested == 0 {
        max
    } else {
        Duration::from_secs(requested).min(max)
    }
}

/// A new lock's token.
pub fn new_token() -> String {
    format!("urn:uuid:{}", uuid::Uuid::new_v4())
}

/// The error for a token that is not held.
pub fn not_held(token: &str) -> Status {
    Status::not_found(format!("no lock is held with the token {token}"))
}

/// The error for a token used on a resource its lock does not cover.
pub fn not_covering(token: &str) -> Status {
    Status::failed_precondition(format!("the lock {token} does not cover this resource"))
}

/// The error for refreshing or releasing someone else's lock.
pub fn not_owner() -> Status {
    Status::permission_denied("only the user who took a lock may refresh or release it")
}

/// The error for a principal that holds the most locks allowed.
pub fn too_many_locks(principal: &str, held: usize) -> Status {
    let who = if principal.is_empty() {
        "unauthenticated clients hold".to_owned()
    } else {
        format!("{principal} holds")
    };
    Status::resource_exhausted(format!(
        "{who} {held} locks, the most this server grants one user; release some (UNLOCK) or let them expire"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestry() {
        assert_eq!(ancestors_and_self("a/b/c"), ["", "a", "a/b", "a/b/c"]);
        assert_eq!(ancestors_and_self(""), [""]);
        assert!(below("a/b", "a") && below("a", "") && !below("ab", "a") && !below("a", "a"));
    }
}
