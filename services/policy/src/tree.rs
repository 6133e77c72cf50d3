//! The compiled policy: a tree of path segments, one node per segment of a path that a
//! rule, a quota or the home template names, and of the collections on the way to one.
//!
//! A decision walks a path's segments down the tree, one hash lookup each, and stops
//! where the tree does: what lies deeper than any rule inherits the deepest rule met.
//! So a decision costs the path's depth, not the number of rules. Each node also knows
//! who may read something beneath it ([`Readers`]), so whether a collection can be passed
//! through is decided at the node, without looking further down.

use crate::permission::LinkCap;
use std::collections::{HashMap, HashSet};

/// What decides at a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decider {
    /// The rule with this index in the policy's list.
    Rule(usize),
    /// A home: its owner, whose user id is the node's segment, manages it.
    Home,
}

/// One node: a path segment.
#[derive(Debug, Default)]
pub(crate) struct Node {
    /// The segments beneath it that the tree names.
    pub(crate) children: HashMap<Box<str>, Node>,
    /// Beneath the homes' parent: the node of every home that no literal child names.
    pub(crate) any_home: Option<Box<Node>>,
    /// What decides here, if anything does (else the nearest decider above).
    pub(crate) decider: Option<Decider>,
    /// The quota of the tree rooted here, in bytes.
    pub(crate) quota: Option<u64>,
    /// The most a link published beneath it may allow.
    pub(crate) links: Option<LinkCap>,
    /// Who may read something strictly beneath this node.
    pub(crate) readers_below: Readers,
}

impl Node {
    /// The child for `segment`: a literal one, else a home.
    pub(crate) fn child(&self, segment: &str) -> Option<&Node> {
        self.children.get(segment).or(self.any_home.as_deref())
    }

    /// The node at the end of `segments`, made with its ancestors if missing.
    pub(crate) fn make<'a>(&mut self, segments: impl IntoIterator<Item = &'a str>) -> &mut Node {
        let mut node = self;
        for segment in segments {
            node = node.children.entry(segment.into()).or_default();
        }
        node
    }

    /// Whether anything beneath it is named by the policy.
    pub(crate) fn has_children(&self) -> bool {
        !self.children.is_empty() || self.any_home.is_some()
    }
}

/// Who may read something beneath a node: the grantees of the rules beneath it that
/// grant at least `read`, and whether homes lie beneath it (each user reads their own).
#[derive(Debug, Default, Clone)]
pub(crate) struct Readers {
    pub(crate) users: HashSet<Box<str>>,
    pub(crate) groups: HashSet<Box<str>>,
    pub(crate) anyone: bool,
    pub(crate) homes: bool,
}

impl Readers {
    /// Adds everything `other` holds.
    pub(crate) fn extend(&mut self, other: &Readers) {
        self.users.extend(other.users.iter().cloned());
        self.groups.extend(other.groups.iter().cloned());
        self.anyone |= other.anyone;
        self.homes |= other.homes;
    }
}
