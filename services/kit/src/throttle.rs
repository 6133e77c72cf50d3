//! Failed-login throttling, built so that it cannot be turned against the users it
//! protects: the auth service's for passwords, the gateway's for links' passwords (an
//! account there is a link).
//!
//! The parts, each a [`Throttle`] (after `max_failures` failures a key is locked out for
//! `lockout`, each further failure doubles it up to [`MAX_LOCKOUT`]; counts are forgotten
//! after [`WINDOW`] without failures):
//!
//! * per client address ([`address_key`]: IPv4 address, IPv6 /64): a guesser is slowed
//!   down whichever accounts it tries. Behind an Ingress the address is the client's own
//!   (the gateway's `--trusted-proxies`), never the proxy's, so one guesser does not lock
//!   out everyone behind the same proxy.
//! * per account: after `max_failures` failures, from anywhere, the account is *guarded*.
//!   A guarded account refuses, without any crypt work, the addresses that have failed
//!   to log into it ([`FailedPairs`]), and only them: the account's owner, from an address
//!   that has not failed before, still logs in with the right password. So a guesser
//!   cannot lock a user out by failing on purpose, and each address gets one guess at a
//!   guarded account (docs/security.md has the figures).
//!
//! While locked out, attempts are answered without crypt work, so a flood costs nothing
//! but a lookup.

use moka::sync::Cache;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

/// Longest lockout.
pub const MAX_LOCKOUT: Duration = Duration::from_secs(15 * 60);
/// Failures are forgotten after this long without another one.
pub const WINDOW: Duration = Duration::from_secs(30 * 60);
/// Most keys remembered by each part; the least recently used are forgotten first.
const CAPACITY: u64 = 100_000;

#[derive(Clone, Copy, Debug)]
struct Record {
    failures: u32,
    locked_until: Option<Instant>,
}

/// One part of the throttle: failures counted per key.
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
                .max_capacity(CAPACITY)
                .time_to_idle(WINDOW)
                .build(),
            max_failures,
            lockout,
        }
    }

    /// How long `key` is still locked out, if it is.
    pub fn locked(&self, key: &str) -> Option<Duration> {
        self.locked_at(key, Instant::now())
    }

    /// [`Throttle::locked`] at the time `now`.
    pub fn locked_at(&self, key: &str, now: Instant) -> Option<Duration> {
        let until = self.records.get(key)?.locked_until?;
        until.checked_duration_since(now).filter(|left| !left.is_zero())
    }

    /// Records a failure; returns whether it started or extended a lockout.
    pub fn failure(&self, key: &str) -> bool {
        self.failure_at(key, Instant::now())
    }

    /// [`Throttle::failure`] at the time `now`.
    pub fn failure_at(&self, key: &str, now: Instant) -> bool {
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
            record.locked_until = Some(now + lockout);
        }
        self.records.insert(key.to_owned(), record);
        locked
    }

    /// Clears `key`'s failures.
    pub fn success(&self, key: &str) {
        self.records.invalidate(key);
    }
}

/// The (account, address) pairs that failed to log in within [`WINDOW`]: the addresses
/// a guarded account refuses.
pub struct FailedPairs(Cache<(String, String), ()>);

impl Default for FailedPairs {
    fn default() -> Self {
        Self(
            Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_idle(WINDOW)
                .build(),
        )
    }
}

impl FailedPairs {
    /// Remembers that `address` failed to log in as `user`.
    pub fn failed(&self, user: &str, address: &str) {
        self.0.insert((user.to_owned(), address.to_owned()), ());
    }

    /// Whether `address` failed to log in as `user` lately.
    pub fn has_failed(&self, user: &str, address: &str) -> bool {
        self.0.contains_key(&(user.to_owned(), address.to_owned()))
    }

    /// Forgets the failures of `address` for `user` (it logged in).
    pub fn succeeded(&self, user: &str, address: &str) {
        self.0.invalidate(&(user.to_owned(), address.to_owned()));
    }
}

/// The key a client address is throttled under: the address for IPv4, its /64 for IPv6
/// (one subscriber holds a whole /64). Text that is not an address is its own key.
pub fn address_key(address: &str) -> String {
    match address.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            format!("{}/64", Ipv6Addr::from(u128::from(v6) & (u128::MAX << 64)))
        }
        Ok(IpAddr::V6(v6)) => v6.to_ipv4_mapped().map(|v4| v4.to_string()).unwrap_or_default(),
        _ => address.to_owned(),
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

    #[test]
    fn ipv6_addresses_are_throttled_per_64() {
        assert_eq!(address_key("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
        assert_eq!(address_key("2001:db8:1:2:bbbb::2"), "2001:db8:1:2::/64");
        assert_eq!(address_key("::ffff:192.0.2.7"), "192.0.2.7");
        assert_eq!(address_key("192.0.2.7"), "192.0.2.7");
        assert_eq!(address_key(""), "");
    }

    /// What one address achieves in an hour when it guesses as fast as the throttle
    /// lets it, with the defaults (20 failures per address, 30 s first lockout): the
    /// figure docs/security.md states.
    #[test]
    fn one_address_gets_27_guesses_an_hour() {
        let throttle = Throttle::new(20, Duration::from_secs(30));
        let start = Instant::now();
        let mut now = start;
        let mut guesses = 0;
        while now < start + Duration::from_secs(3600) {
            match throttle.locked_at("a", now) {
                Some(wait) => now += wait,
                None => {
                    guesses += 1;
                    throttle.failure_at("a", now);
                }
            }
        }
        assert_eq!(guesses, 27);
    }
}
