//! [`LivePolicy`]: the policy a gateway decides by, replaced whole when its file changes.

use kubedav_policy::Policy;
use std::sync::Arc;

/// The most users whose homes one gateway remembers having made.
const HOMES_REMEMBERED: usize = 100_000;

/// The policy in force, and what the gateway learnt under it. A request takes the
/// current policy once ([`LivePolicy::current`]) and is decided whole by it; a
/// replacement ([`crate::Gateway::replace_policy`]) applies from the next request on,
/// and nothing kept under the old one is used again.
pub struct LivePolicy {
    current: arc_swap::ArcSwap<Policy>,
    /// Users whose home exists: made or found by this gateway under this policy.
    homes_made: quick_cache::sync::Cache<Box<str>, ()>,
}

impl LivePolicy {
    /// A live policy starting as `policy`.
    pub fn new(policy: Arc<Policy>) -> Self {
        Self {
            current: arc_swap::ArcSwap::new(policy),
            homes_made: quick_cache::sync::Cache::new(HOMES_REMEMBERED),
        }
    }

    /// The policy in force.
    pub fn current(&self) -> Arc<Policy> {
        self.current.load_full()
    }

    /// Puts `policy` in force and forgets what was learnt under the old one.
    pub(crate) fn replace(&self, policy: Arc<Policy>) {
        self.current.store(policy);
        self.homes_made.clear();
    }

    /// Whether `user`'s home is known to exist.
    pub(crate) fn home_made(&self, user: &str) -> bool {
        self.homes_made.get(user).is_some()
    }

    /// Remembers that `user`'s home exists.
    pub(crate) fn remember_home(&self, user: &str) {
        self.homes_made.insert(user.into(), ());
    }
}

impl std::fmt::Debug for LivePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LivePolicy")
            .field("rules", &self.current.load().rule_count())
            .finish_non_exhaustive()
    }
}
