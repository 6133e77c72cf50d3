//! Failed-login throttling: per user and per client address.
//!
//! After `max_failures` consecutive failures a key is locked out for `lockout`, and each
//! further failure doubles the lockout (up to [`MAX_LOCKOUT`]). A success clears the user's
//! count. While locked out, attempts are answered without any crypt work, so a flood
//! costs nothing but a lookup. Counts are forgotten after [`WINDOW`] without failures.

use moka::sync::Cache;
use std::time::{Duration, Instant};

/// Longest lockout.
pub const MAX_LOCKOUT: Duration = Duration::from_secs(15 * 60);
/// Failures are forgotten after this long without another one.
pub const WINDOW: Duration = Duration::from_secs(30 * 60);

#[derive(Clone, Copy, Debug)]
struct Record {
    failures: u32,
    locked_until: Option<Instant>,
}

/// The throttle.
pub struct Throttle {
    records: Cache<String, Record>,
    max_failures: u32,
    lockout: Duration,
}

impl Throttle {
    /// Locks a key out for `lockout` after `max_failures` failures (0 disables).
    pub fn new(max_failures: u32, lockout: Duration) -> Self {
        Self {
            records: Cache::builder()
                .max_capacity(100_000)
                .time_to_idle(WINDOW)
                .build(),
            max_failures,
            lockout,
        }
    }

    /// How long `key` is still locked out, if it is.
    pub fn locked(&self, key: &str) -> Option<Duration> {
        let until = self.records.get(key)?.locked_until?;
        until.checked_duration_since(Instant::now())
    }

    /// Records a failure; returns whether it started or extended a lockout.
    pub fn failure(&self, key: &str) -> bool {
        if self.max_failures == 0 {
            return false;
        }
        let mut record = self.records.get(key).unwrap_or(Record {
            failures: 0,
            locked_until: None,
        });
        record.failures += 1;
        let locked = record.failures >= self.max_failures;
        if locked {
            let doublings = (record.failures - self.max_failures).min(16);
            let lockout = self.lockout.saturating_mul(1 << doublings).min(MAX_LOCKOUT);
            record.locked_until = Some(Instant::now() + lockout);
        }
        self.records.insert(key.to_owned(), record);
        locked
    }

    /// Clears `key`'s failures.
    pub fn success(&self, key: &str) {
        self.records.invalidate(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_after_the_limit_and_doubles() {
        let t = Throttle::new(3, Duration::from_secs(10));
        assert!(!t.failure("u") && !t.failure("u"));
        assert!(t.locked("u").is_none());
        assert!(t.failure("u"));
        let first = t.locked("u").unwrap();
        assert!(first <= Duration::from_secs(10) && first > Duration::from_secs(9));
        t.failure("u");
        assert!(
            t.locked("u").unwrap() > Duration::from_secs(19),
            "the lockout doubles"
        );
        t.success("u");
        assert!(t.locked("u").is_none());
        assert!(t.locked("other").is_none());
        let off = Throttle::new(0, Duration::from_secs(10));
        for _ in 0..10 {
            off.failure("u");
        }
        assert!(off.locked("u").is_none(), "0 disables");
    }
}
