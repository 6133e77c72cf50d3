//! The lease protocol's messages (`proto/kubedav/lease/v1/lease.proto`) and what an
//! [`Invalidation`] names. The protocol's two ends are in `kubedav-lease`.

use crate::pb::lease::v1 as pb;

pub use pb::{Invalidation, Pong, WatchEvent, WatchRequest, watch_event};

/// What was changed: dropped by a holder when it hears of it.
impl Invalidation {
    /// These paths.
    pub fn paths(paths: impl IntoIterator<Item = String>) -> Self {
        Self {
            paths: paths.into_iter().collect(),
            ..Self::default()
        }
    }

    /// These paths and everything below them.
    pub fn trees(trees: impl IntoIterator<Item = String>) -> Self {
        Self {
            trees: trees.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Everything.
    pub fn everything() -> Self {
        Self {
            everything: true,
            ..Self::default()
        }
    }

    /// Whether it names everything: said so, or names the root's tree.
    pub fn covers_everything(&self) -> bool {
        self.everything || self.trees.iter().any(String::is_empty)
    }

    /// Whether a path is among what this invalidation names (`path` itself, or below one
    /// of its trees).
    pub fn covers(&self, path: &str) -> bool {
        self.everything
            || self.paths.iter().any(|p| p == path)
            || self.trees.iter().any(|tree| within(path, tree))
    }
}

/// Whether `path` is `tree` or below it (`""` is the root, above everything).
pub fn within(path: &str, tree: &str) -> bool {
    tree.is_empty()
        || path
            .strip_prefix(tree)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_cover_their_members_only() {
        let trees = Invalidation::trees(["a/b".to_owned()]);
        assert!(trees.covers("a/b") && trees.covers("a/b/c"));
        assert!(!trees.covers("a/bc") && !trees.covers("a"));
        assert!(Invalidation::trees([String::new()]).covers("anything"));
        let paths = Invalidation::paths(["a".to_owned()]);
        assert!(paths.covers("a") && !paths.covers("a/b"));
    }
}
