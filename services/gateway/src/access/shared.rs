//! What shares add to the policy's decision ([`Received`]): a share in force gives its
//! recipient the share's permission on its path and beneath it, never more than its
//! creator holds there, and makes the collections on the way to it passable.
//!
//! A share is in force while it has not expired and its creator still manages its path
//! under the policy in force (a share never outlives its creator's right to make it).
//! Shares grant `read` or `write`, never `manage`: what a user may share comes from the
//! policy alone.

use crate::shares::ShareEntry;
use kubedav_api::path::VolumePath;
use kubedav_policy::{Access, Permission, Policy, Subject};
use std::sync::Arc;

/// The shares made to one request's principal (to it or to one of its groups) that
/// have not expired.
#[derive(Clone, Debug, Default)]
pub struct Received {
    entries: Vec<Arc<ShareEntry>>,
    /// The gateway's shares could not be confirmed lately: what a share alone would
    /// allow is refused with 503 instead.
    unconfirmed: bool,
}

impl Received {
    /// These shares.
    pub fn new(entries: Vec<Arc<ShareEntry>>) -> Self {
        Self {
            entries,
            unconfirmed: false,
        }
    }

    /// No shares, because the table could not be confirmed lately.
    pub fn unconfirmed() -> Self {
        Self {
            entries: Vec::new(),
            unconfirmed: true,
        }
    }

    /// Whether the shares could not be confirmed.
    pub fn is_unconfirmed(&self) -> bool {
        self.unconfirmed
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What `path` is to the principal, given what the policy makes of it
    /// (`by_policy`), and the share that raised it, if one did.
    pub fn access<'s>(
        &'s self,
        policy: &Policy,
        path: &VolumePath,
        by_policy: Access,
    ) -> (Access, Option<&'s Arc<ShareEntry>>) {
        if self.entries.is_empty() || by_policy == Access::Granted(Permission::Manage) {
            return (by_policy, None);
        }
        let mut best = (by_policy.permission(), None);
        let mut passable = by_policy == Access::Passable;
        for entry in &self.entries {
            let covers = entry.covers(path);
            if !covers && !entry.lies_beneath(path) {
                continue;
            }
            let Some(creator) = in_force(policy, entry) else {
                continue;
            };
            if !covers {
                passable = true;
                continue;
            }
            let given = policy
                .access(&creator, path)
                .permission()
                .min(entry.share.permission.permission());
            if given > best.0 {
                best = (given, Some(entry));
            }
        }
        match best {
            (permission, by) if permission >= Permission::Read => (Access::Granted(permission), by),
            _ if passable => (Access::Passable, None),
            _ => (by_policy, None),
        }
    }

    /// Whether any share bears on what lies in `collection`: one of its paths is the
    /// collection, lies on the way to it, or lies beneath it.
    pub fn bears_on(&self, collection: &VolumePath) -> bool {
        self.entries
            .iter()
            .any(|entry| entry.covers(collection) || entry.lies_beneath(collection))
    }

    /// The paths of these shares.
    pub fn paths(&self) -> impl Iterator<Item = &VolumePath> {
        self.entries.iter().map(|entry| &entry.path)
    }

    /// Whether a share's path lies strictly beneath `collection`: its listing then
    /// shows some members only because they lead to a share.
    pub fn lies_beneath(&self, collection: &VolumePath) -> bool {
        self.entries.iter().any(|entry| entry.lies_beneath(collection))
    }

    /// The creators' subjects whose shares in force cover `path`: what a copy of it
    /// leaves out is also what they may not read.
    pub fn creators_covering(&self, policy: &Policy, path: &VolumePath) -> Vec<Subject> {
        self.entries
            .iter()
            .filter(|entry| entry.covers(path))
            .filter_map(|entry| in_force(policy, entry))
            .collect()
    }

    /// Whether a share in force lets the principal write all of `path` and beneath.
    pub fn writes_all_below(&self, policy: &Policy, path: &VolumePath) -> bool {
        self.entries.iter().any(|entry| {
            entry.covers(path)
                && entry.share.permission.permission() >= Permission::Write
                && in_force(policy, entry).is_some_and(|creator| policy.writes_all_below(&creator, path))
        })
    }
}

/// The creator of `entry`, if it still manages the shared path.
fn in_force(policy: &Policy, entry: &ShareEntry) -> Option<Subject> {
    let creator = policy.subject(&entry.share.creator, &entry.share.creator_groups);
    (policy.access(&creator, &entry.path).permission() >= Permission::Manage).then_some(creator)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shares::{Share, Shared};

    const POLICY: &str = "homes: /home/{user}\nadmins: [root]\ngroups:\n  staff: [carol]\nrules:\n  - path: /projects\n    grant: {\"group:staff\": manage}\n";

    fn received(path: &str, creator: &str, permission: Shared) -> Received {
        Received::new(vec![Arc::new(
            ShareEntry::new(Share {
                id: "s".into(),
                path: path.into(),
                to: "user:bob".into(),
                permission,
                creator: creator.into(),
                creator_groups: Vec::new(),
                created: 0,
                expires_at: None,
                collection: true,
            })
            .unwrap(),
        )])
    }

    fn access(policy: &Policy, received: &Received, path: &str) -> Access {
        let bob = policy.subject("bob", &[] as &[&str]);
        let path = VolumePath::parse(path).unwrap();
        received.access(policy, &path, policy.access(&bob, &path)).0
    }

    #[test]
    fn a_share_gives_its_path_and_the_way_to_it() {
        let policy = Policy::from_yaml(POLICY).unwrap();
        let shared = received("home/alice/project", "alice", Shared::Write);
        assert_eq!(
            access(&policy, &shared, "home/alice/project/a.txt"),
            Access::Granted(Permission::Write)
        );
        assert_eq!(access(&policy, &shared, "home/alice"), Access::Passable);
        assert_eq!(access(&policy, &shared, "home/alice/other"), Access::Hidden);
        assert_eq!(access(&policy, &shared, "home/alice/projects"), Access::Hidden);
        let read = received("home/alice/project", "alice", Shared::Read);
        assert_eq!(
            access(&policy, &read, "home/alice/project"),
            Access::Granted(Permission::Read)
        );
    }

    #[test]
    fn a_share_stops_when_its_creator_no_longer_manages_the_path() {
        let policy = Policy::from_yaml(POLICY).unwrap();
        // carol manages /projects through staff; dave never did.
        let by_carol = received("projects/apollo", "carol", Shared::Read);
        assert_eq!(
            access(&policy, &by_carol, "projects/apollo"),
            Access::Granted(Permission::Read)
        );
        let carol_left = Policy::from_yaml(&POLICY.replace("[carol]", "[erin]")).unwrap();
        assert_eq!(access(&carol_left, &by_carol, "projects/apollo"), Access::Hidden);
        assert_eq!(access(&carol_left, &by_carol, "projects"), Access::Hidden);
        let by_dave = received("home/alice/project", "dave", Shared::Write);
        assert_eq!(access(&policy, &by_dave, "home/alice/project"), Access::Hidden);
    }
}
