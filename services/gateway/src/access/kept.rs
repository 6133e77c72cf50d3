//! Who sees which trash items and versions (docs/trash-and-versions.md, "Who sees
//! what"): a trash item is decided by the collection it was deleted from, a version by
//! its file. Their requests name paths under `{base}/.kubedav/`, which the policy does
//! not know, so their handlers (`handlers::keep`) ask here with the paths they stand for.

use super::{Judge, Viewer, audit, decide, received_by};
use crate::Gateway;
use crate::dav::method::DavMethod;
use crate::http::errors::HttpError;
use crate::request::Principal;
use kubedav_api::path::VolumePath;

/// The viewer of `principal` under the gateway's policy, for a request its handler
/// decides; `None` without a policy (everyone may do everything).
pub fn viewer_of(gateway: &Gateway, principal: &Principal) -> Option<Viewer> {
    let policy = gateway.policy.as_ref()?.current();
    let subject = policy.subject(principal.name(), principal.groups());
    let received = received_by(gateway, &subject);
    Some(Viewer {
        policy,
        subject,
        received,
    })
}

/// The trash items to ask fileio for, as `kubedav.keep.v1.ListTrashRequest` takes them:
/// a superset of what the viewer may see, which the gateway then filters item by item.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrashQuestion {
    /// These quota roots' items.
    pub roots: Vec<VolumePath>,
    /// The items of every quota root at or beneath these paths.
    pub beneath: Vec<VolumePath>,
}

impl TrashQuestion {
    /// Every item there is.
    pub fn everything() -> Self {
        Self {
            roots: Vec::new(),
            beneath: vec![VolumePath::root()],
        }
    }
}

impl Viewer {
    /// Whether the viewer is one of the policy's administrators.
    pub fn is_admin(&self) -> bool {
        self.subject.is_admin()
    }

    /// Where the trash items the viewer may see can be: an administrator's, anywhere;
    /// anyone else's, in the whole tree's root and in the roots at, above or beneath
    /// the places the viewer may write that the policy or a share names (its home, a
    /// rule's path, a shared folder). Writing elsewhere is inherited from one of those.
    pub fn trash_question(&self) -> TrashQuestion {
        if self.is_admin() {
            return TrashQuestion::everything();
        }
        let mut beneath: Vec<VolumePath> = self.policy.home(&self.subject).into_iter().collect();
        beneath.extend(self.policy.named_paths().iter().cloned());
        beneath.extend(self.received.paths().cloned());
        beneath.retain(|path| self.may_write(path));
        beneath.sort();
        beneath.dedup();
        let mut roots = vec![VolumePath::root()];
        roots.extend(
            beneath
                .iter()
                .filter_map(|path| self.policy.quota_root(path))
                .map(|root| root.path),
        );
        roots.sort();
        roots.dedup();
        TrashQuestion { roots, beneath }
    }

    /// Decides `method` as if it named `target` (and `destination`) in the tree, with
    /// its audit line: a trash item's restore as a MOVE from where it was deleted, its
    /// purge as a DELETE there, a version's restore as a PUT of its file.
    pub fn decide_as(
        &self,
        method: DavMethod,
        target: &VolumePath,
        destination: Option<&VolumePath>,
    ) -> Result<(), HttpError> {
        let judge = Judge {
            policy: &self.policy,
            subject: &self.subject,
            received: &self.received,
        };
        let target = judge.decide(target);
        let destination = destination.map(|path| judge.decide(path));
        let decided = decide(&judge, method, &target, destination.as_ref());
        if tracing::enabled!(target: kubedav_kit::telemetry::AUDIT, tracing::Level::INFO) {
            audit::line(&self.subject, method, &target, destination.as_ref(), &decided);
        }
        decided
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubedav_policy::Policy;
    use std::sync::Arc;

    fn viewer(user: &str) -> Viewer {
        let policy = Arc::new(
            Policy::from_yaml(
                "homes: /home/{user}\nadmins: [root]\nquota:\n  homes: 1GiB\nrules:\n  - path: /projects\n    grant: {\"user:alice\": write}\n  - path: /public\n    grant: {\"*\": read}\n",
            )
            .unwrap(),
        );
        let subject = policy.subject(user, &[] as &[&str]);
        Viewer {
            policy,
            subject,
            received: Default::default(),
        }
    }

    fn paths(list: &[&str]) -> Vec<VolumePath> {
        list.iter().map(|p| VolumePath::parse(p).unwrap()).collect()
    }

    #[test]
    fn a_user_asks_for_the_roots_of_what_it_may_write_an_admin_for_all() {
        let alice = viewer("alice").trash_question();
        assert_eq!(alice.beneath, paths(&["home/alice", "projects"]));
        assert_eq!(alice.roots, paths(&["", "home/alice"]));
        let bob = viewer("bob").trash_question();
        assert_eq!(bob.beneath, paths(&["home/bob"]));
        assert_eq!(viewer("root").trash_question(), TrashQuestion::everything());
    }
}
