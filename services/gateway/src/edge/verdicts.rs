//! [`Verdicts`]: the gateway's short memory of credentials the auth service accepted,
//! so that a client sending the same credential request after request costs one keyed
//! hash and one lookup here instead of a call to the auth service.
//!
//! * Keyed by HMAC-SHA-256 of the client's address and the credential as sent (the
//!   `Authorization` header's value, or the session cookie's), under a key made at start
//!   that never leaves the process: never by the credential itself.
//! * Only acceptances are kept, never refusals, each for a moment: a second for a
//!   password or a bearer token, a quarter of a second for an app password or a session,
//!   whose revocation must hold everywhere within a second (the auth service reads
//!   their records again after half a second). A changed users file is seen within a
//!   second more than before.
//! * Bounded: at most [`CAPACITY`] credentials.
//!
//! Measured: docs/benchmarks.md, "What each credential costs".

use crate::request::Principal;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

static HITS: LazyLock<kubedav_metrics::Counter> =
    LazyLock::new(|| kubedav_metrics::cache_lookups("gateway_credentials", "hit"));
static MISSES: LazyLock<kubedav_metrics::Counter> =
    LazyLock::new(|| kubedav_metrics::cache_lookups("gateway_credentials", "miss"));

/// Most credentials remembered.
pub const CAPACITY: usize = 10_000;

/// How long a password's or a bearer token's acceptance is remembered.
pub const LONG: Duration = Duration::from_secs(1);

/// How long an app password's or a session's acceptance is remembered.
pub const SHORT: Duration = Duration::from_millis(250);

/// The keyed hash a credential is remembered under.
pub type Key = [u8; 32];

#[derive(Clone)]
struct Kept {
    principal: Principal,
    until: Instant,
}

/// Credentials accepted lately. See the module docs.
pub struct Verdicts {
    /// HMAC-SHA-256 keyed once: each key clones it, so the key's own blocks are hashed
    /// once per process.
    mac: Hmac<Sha256>,
    kept: quick_cache::sync::Cache<Key, Kept>,
}

impl Verdicts {
    /// An empty memory under a random key.
    pub fn new() -> Self {
        LazyLock::force(&HITS);
        LazyLock::force(&MISSES);
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).expect("randomness for the credentials' key");
        Self {
            mac: <Hmac<Sha256> as KeyInit>::new_from_slice(&secret).expect("HMAC takes any key size"),
            kept: quick_cache::sync::Cache::new(CAPACITY),
        }
    }

    /// The key of `credential` sent from `client` (`session`: a cookie's value, else a
    /// header's). The client's address is part of it, so an address the auth service
    /// throttles or keeps away from an account it failed on is never let in by another
    /// address's acceptance.
    pub fn key(&self, client: Option<std::net::IpAddr>, session: bool, credential: &[u8]) -> Key {
        let mut mac = self.mac.clone();
        match client {
            Some(std::net::IpAddr::V4(ip)) => {
                mac.update(b"4");
                mac.update(&ip.octets());
            }
            Some(std::net::IpAddr::V6(ip)) => {
                mac.update(b"6");
                mac.update(&ip.octets());
            }
            None => mac.update(b"-"),
        }
        mac.update(if session { b"s" } else { b"h" });
        mac.update(credential);
        mac.finalize().into_bytes().into()
    }

    /// Who the credential of `key` was accepted for, if that was a moment ago.
    pub fn get(&self, key: &Key) -> Option<Principal> {
        let kept = self.kept.get(key).filter(|kept| kept.until > Instant::now());
        match kept {
            Some(kept) => {
                HITS.inc();
                Some(kept.principal)
            }
            None => {
                MISSES.inc();
                None
            }
        }
    }

    /// Forgets the credential of `key` (a session signed out here).
    pub fn forget(&self, key: &Key) {
        self.kept.remove(key);
    }

    /// Forgets `user`'s app password `id` (revoked here: it stops here at once).
    pub fn forget_app_password(&self, user: &str, id: &str) {
        self.kept.retain(|_, kept| {
            !(kept.principal.kind() == "app-password"
                && kept.principal.credential_id() == id
                && kept.principal.name() == user)
        });
    }

    /// Remembers that the credential of `key` was accepted for `principal`.
    pub fn keep(&self, key: Key, principal: &Principal) {
        let ttl = match principal.kind() {
            "app-password" | "session" => SHORT,
            _ => LONG,
        };
        self.kept.insert(
            key,
            Kept {
                principal: principal.clone(),
                until: Instant::now() + ttl,
            },
        );
    }
}

impl Default for Verdicts {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn principal(kind: &str) -> Principal {
        Principal::verified(kubedav_api::auth::Principal {
            user: "carol".into(),
            kind: kind.into(),
            credential_id: "abcd2345".into(),
            ..Default::default()
        })
    }

    #[test]
    fn remembers_an_acceptance_for_its_address_and_credential_only() {
        let verdicts = Verdicts::new();
        let here: IpAddr = "192.0.2.1".parse().unwrap();
        let there: IpAddr = "192.0.2.2".parse().unwrap();
        let key = verdicts.key(Some(here), false, b"Basic Y2Fyb2w6cHc=");
        assert_eq!(verdicts.get(&key), None);
        verdicts.keep(key, &principal("password"));
        assert_eq!(verdicts.get(&key), Some(principal("password")));
        for other in [
            verdicts.key(Some(there), false, b"Basic Y2Fyb2w6cHc="),
            verdicts.key(Some(here), true, b"Basic Y2Fyb2w6cHc="),
            verdicts.key(Some(here), false, b"Basic Y2Fyb2w6cHd="),
            verdicts.key(None, false, b"Basic Y2Fyb2w6cHc="),
        ] {
            assert_ne!(other, key);
            assert_eq!(verdicts.get(&other), None);
        }
        // Another process's key: the same credential gives another key.
        assert_ne!(Verdicts::new().key(Some(here), false, b"Basic Y2Fyb2w6cHc="), key);
    }

    #[test]
    fn a_revoked_app_password_is_forgotten_and_others_are_kept() {
        let verdicts = Verdicts::new();
        let app = verdicts.key(None, false, b"Basic app");
        let password = verdicts.key(None, false, b"Basic password");
        verdicts.keep(app, &principal("app-password"));
        verdicts.keep(password, &principal("password"));
        verdicts.forget_app_password("carol", "abcd2345");
        assert_eq!(verdicts.get(&app), None);
        assert!(verdicts.get(&password).is_some());
    }
}
