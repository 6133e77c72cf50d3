//! [`Policy`]: the compiled policy and its decisions.

use crate::grantee::Grantee;
use crate::permission::{LinkCap, Permission};
use crate::tree::{Decider, Node, Readers};
use kubedav_api::path::VolumePath;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub use crate::compile::PolicyError;

/// A rule, compiled: its path and its grants.
#[derive(Debug)]
pub(crate) struct Rule {
    /// As the policy wrote it, for audit lines and errors (`/projects/apollo`).
    pub(crate) path: String,
    pub(crate) grants: Vec<(Grantee, Permission)>,
}

impl Rule {
    /// The highest permission any of the subject's grantees has here.
    pub(crate) fn permission(&self, subject: &Subject) -> Permission {
        self.grants
            .iter()
            .filter(|(grantee, _)| subject.is(grantee))
            .map(|(_, permission)| *permission)
            .max()
            .unwrap_or(Permission::None)
    }
}

/// Who is asking, as the policy sees them: a user id, the groups it belongs to (the
/// policy's and the identity provider's), and whether it is an administrator. Made once
/// per request by [`Policy::subject`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    user: Arc<str>,
    groups: Vec<Arc<str>>,
    admin: bool,
}

impl Subject {
    /// Whether `grantee` names this subject. `*` names every authenticated subject; an
    /// unauthenticated one (no user id) is named by nothing.
    pub(crate) fn is(&self, grantee: &Grantee) -> bool {
        if self.user.is_empty() {
            return false;
        }
        match grantee {
            Grantee::User(id) => **id == *self.user,
            Grantee::Group(name) => self.groups.iter().any(|g| **g == **name),
            Grantee::Anyone => true,
        }
    }

    /// Whether any of `readers` names this subject.
    pub(crate) fn among(&self, readers: &Readers) -> bool {
        if self.user.is_empty() {
            return false;
        }
        readers.anyone
            || readers.homes
            || readers.users.contains(&*self.user)
            || self.groups.iter().any(|g| readers.groups.contains(&**g))
    }

    /// The user id ("" for nobody).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Its groups: the policy's and those its credential claims.
    pub fn groups(&self) -> &[Arc<str>] {
        &self.groups
    }

    /// Whether the policy's `admins:` names it.
    pub fn is_admin(&self) -> bool {
        self.admin
    }

    /// A subject with exactly these parts, for checks at load and for tests.
    pub(crate) fn of(user: &str, groups: Vec<Arc<str>>, admin: bool) -> Self {
        Self {
            user: user.into(),
            groups,
            admin,
        }
    }
}

/// What a path is to a subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// It does not exist for the subject: every method answers as for an absent path.
    Hidden,
    /// A collection on the way to something the subject may read: it may be listed,
    /// showing only the members on the subject's way, and nothing else.
    Passable,
    /// The subject may read it, and perhaps more (never [`Permission::None`]).
    Granted(Permission),
}

impl Access {
    /// The permission it gives ([`Permission::None`] unless granted).
    pub fn permission(self) -> Permission {
        match self {
            Access::Granted(permission) => permission,
            Access::Hidden | Access::Passable => Permission::None,
        }
    }

    /// Whether the path exists for the subject at all.
    pub fn is_visible(self) -> bool {
        self != Access::Hidden
    }
}

/// A decision and what made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decided<'p> {
    /// What the path is to the subject.
    pub access: Access,
    /// What decided it. Never for the answer: only for the audit line.
    pub by: DecidedBy<'p>,
}

/// What made a decision; its `Display` is the audit line's words ("rule
/// /projects/apollo", "home of alice", "admins", "no rule").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecidedBy<'p> {
    /// The subject is an administrator.
    Admins,
    /// The rule with this path.
    Rule(&'p str),
    /// The home of this user.
    Home(&'p str),
    /// Nothing: no rule or home lies on the path's way.
    NoRule,
}

impl std::fmt::Display for DecidedBy<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecidedBy::Admins => f.write_str("admins"),
            DecidedBy::Rule(path) => write!(f, "rule {path}"),
            DecidedBy::Home(owner) => write!(f, "home of {owner}"),
            DecidedBy::NoRule => f.write_str("no rule"),
        }
    }
}

/// A quota root: the tree whose bytes count against one limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaRoot {
    /// The root of the tree.
    pub path: VolumePath,
    /// Its limit in bytes.
    pub limit: u64,
}

/// A compiled policy. See [the crate](crate) for the model.
#[derive(Debug)]
pub struct Policy {
    pub(crate) tree: Node,
    pub(crate) rules: Vec<Rule>,
    pub(crate) admins: HashSet<String>,
    /// Each user's groups from the policy's `groups:`.
    pub(crate) groups_of: HashMap<String, Vec<Arc<str>>>,
    /// The paths the policy names, which exist once it is loaded.
    pub(crate) named: Vec<VolumePath>,
    /// Where the homes are (`/home` for `homes: /home/{user}`).
    pub(crate) homes_parent: Option<VolumePath>,
    /// Whether a quota is set anywhere (`quota.homes` or `quota.paths`).
    pub(crate) has_quotas: bool,
}

/// What a permission at a node makes of a path: granted, passable when someone may
/// read beneath the node (`end`, if the tree reaches the path), else hidden.
fn access_of(permission: Permission, end: Option<&Node>, subject: &Subject) -> Access {
    if permission >= Permission::Read {
        Access::Granted(permission)
    } else if end.is_some_and(|end| subject.among(&end.readers_below)) {
        Access::Passable
    } else {
        Access::Hidden
    }
}

/// The members of one collection, decided for one subject by name
/// ([`Policy::members`]).
pub struct Members<'p> {
    policy: &'p Policy,
    subject: &'p Subject,
    /// What decides at the collection.
    decider: Option<(Decider, &'p str)>,
    /// The collection's node, if the tree reaches it.
    node: Option<&'p Node>,
}

impl Members<'_> {
    /// Whether the member `name` exists for the subject.
    pub fn sees(&self, name: &str) -> bool {
        if self.subject.admin {
            return true;
        }
        let child = self.node.and_then(|node| node.child(name));
        let decider = match child.and_then(|child| child.decider) {
            Some(decider) => Some((decider, name)),
            None => self.decider,
        };
        let (permission, _) = self.policy.permission_under(decider, self.subject);
        access_of(permission, child, self.subject).is_visible()
    }
}

/// What a subject may not read beneath a path ([`Policy::unreadable_below`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Unreadable {
    /// The topmost paths the policy names that the subject may not read.
    pub paths: Vec<VolumePath>,
    /// The homes' parent, when it lies at or beneath the path: its members that are
    /// homes the subject may not read are to be left out too.
    pub homes_in: Option<VolumePath>,
}

/// Where a walk down the tree ended, and what it met on the way.
struct Walk<'p> {
    /// The deepest decider met, the segment of its node, and its depth.
    decider: Option<(Decider, &'p str)>,
    /// The node of the whole path, if the tree reaches that deep.
    end: Option<&'p Node>,
    /// The deepest quota met, and the number of segments to its root.
    quota: Option<(u64, usize)>,
    /// The tightest link cap met.
    links: Option<LinkCap>,
}

impl Policy {
    /// Reads and compiles a policy from YAML; the error says what to fix and where.
    pub fn from_yaml(text: &str) -> Result<Policy, PolicyError> {
        crate::compile::compile(text)
    }

    /// The subject for `user`, who the identity provider says is in `claimed_groups`
    /// besides the groups the policy puts it in.
    pub fn subject<S: AsRef<str>>(&self, user: &str, claimed_groups: &[S]) -> Subject {
        let mut groups: Vec<Arc<str>> = self.groups_of.get(user).cloned().unwrap_or_default();
        for group in claimed_groups {
            if !groups.iter().any(|g| **g == *group.as_ref()) {
                groups.push(group.as_ref().into());
            }
        }
        Subject {
            user: user.into(),
            groups,
            admin: !user.is_empty() && self.admins.contains(user),
        }
    }

    fn walk<'p>(&'p self, path: &'p VolumePath) -> Walk<'p> {
        let mut node = &self.tree;
        let mut walk = Walk {
            decider: node.decider.map(|d| (d, "")),
            end: None,
            quota: node.quota.map(|q| (q, 0)),
            links: node.links,
        };
        for (depth, segment) in path.segments().enumerate() {
            match node.child(segment) {
                Some(next) => node = next,
                None => return walk,
            }
            if let Some(decider) = node.decider {
                walk.decider = Some((decider, segment));
            }
            if let Some(quota) = node.quota {
                walk.quota = Some((quota, depth + 1));
            }
            if let Some(cap) = node.links {
                walk.links = Some(walk.links.map_or(cap, |c| c.min(cap)));
            }
        }
        walk.end = Some(node);
        walk
    }

    /// What `path` is to `subject`, and what decided it.
    pub fn decide<'p>(&'p self, subject: &Subject, path: &'p VolumePath) -> Decided<'p> {
        if subject.admin {
            return Decided {
                access: Access::Granted(Permission::Manage),
                by: DecidedBy::Admins,
            };
        }
        let walk = self.walk(path);
        let (permission, by) = self.permission_under(walk.decider, subject);
        Decided {
            access: access_of(permission, walk.end, subject),
            by,
        }
    }

    /// The permission `decider` (with the segment of its node) gives `subject`.
    fn permission_under<'p>(
        &'p self,
        decider: Option<(Decider, &'p str)>,
        subject: &Subject,
    ) -> (Permission, DecidedBy<'p>) {
        match decider {
            None => (Permission::None, DecidedBy::NoRule),
            Some((Decider::Rule(index), _)) => {
                let rule = &self.rules[index];
                (rule.permission(subject), DecidedBy::Rule(&rule.path))
            }
            Some((Decider::Home, owner)) => {
                let permission = if !owner.is_empty() && owner == subject.user() {
                    Permission::Manage
                } else {
                    Permission::None
                };
                (permission, DecidedBy::Home(owner))
            }
        }
    }

    /// Decides the members of `collection` for `subject` by name, one lookup each: what
    /// a listing of it leaves out. (The same decisions as [`Policy::access`] on each
    /// member's path, without walking the tree again per member.)
    pub fn members<'p>(&'p self, subject: &'p Subject, collection: &'p VolumePath) -> Members<'p> {
        let walk = self.walk(collection);
        Members {
            policy: self,
            subject,
            decider: walk.decider,
            node: walk.end,
        }
    }

    /// What `path` is to `subject` (see [`Policy::decide`]).
    pub fn access(&self, subject: &Subject, path: &VolumePath) -> Access {
        self.decide(subject, path).access
    }

    /// Whether every member of `collection`, at any depth, is to any subject what the
    /// collection is: no rule, quota or home lies beneath it. A listing of it then needs
    /// no filtering.
    pub fn members_inherit(&self, collection: &VolumePath) -> bool {
        self.walk(collection).end.is_none_or(|end| !end.has_children())
    }

    /// Whether `subject` may write everything beneath `path`, at any depth: what a lock
    /// of all of it (a depth-infinity LOCK) needs. (Whatever `subject` may not write
    /// beneath a path it may write is readable to it, as the policy's load check makes
    /// sure, so the answer tells it nothing it cannot see.)
    pub fn writes_all_below(&self, subject: &Subject, path: &VolumePath) -> bool {
        if subject.admin {
            return true;
        }
        let Some(end) = self.walk(path).end else {
            return true;
        };
        let mut stack: Vec<&Node> = vec![end];
        while let Some(node) = stack.pop() {
            if node.any_home.is_some() {
                // Someone else's home, whoever the subject is.
                return false;
            }
            for (segment, child) in &node.children {
                if let Some(decider) = child.decider {
                    let (permission, _) = self.permission_under(Some((decider, segment)), subject);
                    if permission < Permission::Write {
                        return false;
                    }
                }
                stack.push(child);
            }
        }
        true
    }

    /// What `subject` may not read beneath `path`, which a copy of `path` leaves out:
    /// the topmost such paths the policy names, and the homes' parent if it lies at or
    /// beneath `path` (someone else's home is beneath it, whose names only a listing
    /// gives). Everything else beneath `path` is what `path` is to `subject`.
    pub fn unreadable_below(&self, subject: &Subject, path: &VolumePath) -> Unreadable {
        let mut unreadable = Unreadable::default();
        if subject.admin {
            return unreadable;
        }
        let walk = self.walk(path);
        let Some(end) = walk.end else {
            return unreadable;
        };
        let mut stack = vec![(end, path.clone(), walk.decider)];
        while let Some((node, at, decider)) = stack.pop() {
            if node.any_home.is_some() {
                unreadable.homes_in = Some(at.clone());
            }
            for (segment, child) in &node.children {
                let Ok(child_path) = at.join(segment) else {
                    continue;
                };
                let decider = child.decider.map(|d| (d, &**segment)).or(decider);
                let (permission, _) = self.permission_under(decider, subject);
                if permission >= Permission::Read {
                    stack.push((child, child_path, decider));
                } else {
                    unreadable.paths.push(child_path);
                }
            }
        }
        unreadable.paths.sort();
        unreadable
    }

    /// Whether `path` stays put: a rule, a quota or the home template names it or
    /// something beneath it, so only an administrator may move or delete it.
    pub fn is_fixed(&self, path: &VolumePath) -> bool {
        self.walk(path).end.is_some()
    }

    /// Every quota root on the way to `path` (the path itself included), outermost
    /// first: a file counts against each.
    pub fn quota_roots(&self, path: &VolumePath) -> Vec<QuotaRoot> {
        let mut roots = Vec::new();
        let mut node = &self.tree;
        let mut at = VolumePath::root();
        if let Some(limit) = node.quota {
            roots.push(QuotaRoot {
                path: at.clone(),
                limit,
            });
        }
        for segment in path.segments() {
            let Some(next) = node.child(segment) else { break };
            node = next;
            let Ok(deeper) = at.join(segment) else { break };
            at = deeper;
            if let Some(limit) = node.quota {
                roots.push(QuotaRoot {
                    path: at.clone(),
                    limit,
                });
            }
        }
        roots
    }

    /// Whether the policy names any quota root.
    pub fn has_quotas(&self) -> bool {
        self.has_quotas
    }

    /// The quota root that holds `path`, if any.
    pub fn quota_root(&self, path: &VolumePath) -> Option<QuotaRoot> {
        let (limit, depth) = self.walk(path).quota?;
        let root = VolumePath::from_segments(path.segments().take(depth)).ok()?;
        Some(QuotaRoot { path: root, limit })
    }

    /// The most a link published at `path` may allow; [`LinkCap::Write`] where no rule
    /// caps it.
    pub fn link_cap(&self, path: &VolumePath) -> LinkCap {
        self.walk(path).links.unwrap_or(LinkCap::Write)
    }

    /// The most a link published at `path` may allow, `default` where no rule caps it
    /// (`--links`).
    pub fn link_cap_or(&self, path: &VolumePath, default: LinkCap) -> LinkCap {
        self.walk(path).links.unwrap_or(default)
    }

    /// The paths the policy names (rules, quota roots, the homes' parent), which are
    /// created when it loads so that a space exists before anyone writes in it.
    pub fn named_paths(&self) -> &[VolumePath] {
        &self.named
    }

    /// The home of `subject` (`/home/alice` for alice under `homes: /home/{user}`), if
    /// the policy gives homes and the user's id can name one. A home is created when its
    /// owner first uses the service.
    pub fn home(&self, subject: &Subject) -> Option<VolumePath> {
        let parent = self.homes_parent.as_ref()?;
        parent.join(subject.user()).ok()
    }

    /// The number of rules.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }
}
