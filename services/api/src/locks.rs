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

/// The deepest tree that holds every target of a write (a target's path, or the
/// deepest ancestor they share; the root, `""`, when nothing narrower does). `None`
/// without targets. Paths are as the locks service names them: no leading slash,
/// components joined by `/`.
pub fn common_tree(targets: &[WriteTarget]) -> Option<String> {
    let (first, rest) = targets.split_first()?;
    let mut common: &str = &first.path;
    for target in rest {
        while !within(&target.path, common) {
            common = common.rsplit_once('/').map_or("", |(parent, _)| parent);
        }
    }
    Some(common.to_owned())
}

/// Whether `path` is `tree` or lies below it.
pub use crate::lease::within;

/// What a change of a lock rooted at `root` may alter of the answers a lease holder
/// keeps: the lock discovery of `root` and of everything below it (where a lock of
/// depth infinity applies), of its ancestors (whose depth-1 and depth-infinity answers
/// list the lock), and the trees free of locks that hold `root` or lie below it.
pub fn changed_around(root: &str) -> crate::lease::Invalidation {
    let ancestors: Vec<String> = ancestors_and_self(root)
        .filter(|ancestor| *ancestor != root)
        .map(str::to_owned)
        .collect();
    crate::lease::Invalidation {
        paths: ancestors,
        trees: vec![root.to_owned()],
        ..Default::default()
    }
}

/// `path` and its ancestors, the root (`""`) first.
pub fn ancestors_and_self(path: &str) -> impl Iterator<Item = &str> {
    let inner = path
        .match_indices('/')
        .map(move |(at, _)| &path[..at])
        .chain((!path.is_empty()).then_some(path));
    std::iter::once("").chain(inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(paths: &[&str]) -> Vec<WriteTarget> {
        paths
            .iter()
            .map(|path| WriteTarget {
                path: (*path).to_owned(),
                recursive: false,
            })
            .collect()
    }

    #[test]
    fn the_common_tree_holds_every_target() {
        assert_eq!(common_tree(&targets(&["a/b/c", "a/b"])).as_deref(), Some("a/b"));
        assert_eq!(common_tree(&targets(&["a/b/c", "a/bc/d"])).as_deref(), Some("a"));
        assert_eq!(common_tree(&targets(&["a/b", "c"])).as_deref(), Some(""));
        assert_eq!(common_tree(&targets(&["a/b"])).as_deref(), Some("a/b"));
        assert_eq!(common_tree(&targets(&[])), None);
    }

    #[test]
    fn within_a_tree_means_below_it_by_whole_names() {
        assert!(within("a/b", "a"));
        assert!(within("a", "a"));
        assert!(within("a", ""));
        assert!(!within("ab", "a"));
        assert!(!within("a", "a/b"));
        let all: Vec<&str> = ancestors_and_self("a/b/c").collect();
        assert_eq!(all, ["", "a", "a/b", "a/b/c"]);
        assert_eq!(ancestors_and_self("").collect::<Vec<_>>(), [""]);
    }
}
