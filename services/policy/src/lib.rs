//! The access policy of a kubedav serving many users (`--policy FILE`): who may do what
//! to which path.
//!
//! A policy is a YAML document ([`Policy::from_yaml`]): a home per user (`homes:
//! /home/{user}`), administrators, groups, rules that grant permissions on a path and
//! everything beneath it, and quota roots. Paths stay global: every decision is "may
//! this principal ([`Subject`]) do this to this path", and the **longest matching
//! prefix** decides: the deepest rule on a path's way down, or the path's home.
//!
//! * [`Permission`]s are `none`, `read`, `write` and `manage`; under a rule a subject has
//!   the highest that any of its grantees has there (`user:` its id, `group:` one of its
//!   groups, `*` anyone). There are no denials: a deeper rule is how a subtree gets other
//!   people.
//! * What a subject cannot read does not exist for it, except that a collection on the
//!   way to something it may read can be passed through ([`Access::Passable`]): its
//!   listing shows only the members on the subject's way.
//! * Paths that carry rules stay put ([`Policy::is_fixed`]): a rule, a quota or the home
//!   template names them, so moving one would move its subtree under other rules.
//! * A policy that would hide a name inside a collection where the same principal may
//!   write is refused when it loads ([`PolicyError::HiddenFromWriters`]): a write could
//!   create the hidden name, which could then be neither hidden nor protected.
//!
//! The rules are compiled into a tree of path segments ([`tree`]), so a decision walks
//! the path's segments once, whatever the number of rules. Names are compared as bytes,
//! as the volume and the bucket compare them.

#![forbid(unsafe_code)]

mod compile;
mod document;
mod grantee;
mod permission;
mod policy;
mod size;
mod tree;

pub use grantee::Grantee;
pub use permission::{LinkCap, Permission};
pub use policy::{Access, Decided, DecidedBy, Members, Policy, PolicyError, QuotaRoot, Subject, Unreadable};
pub use size::parse_size;
