//! [`KeySet`]: the identity provider's signing keys, as its JWKS publishes them.
//!
//! * Fetched at start (discovery, then `jwks_uri`), in the background, so the service
//!   starts and serves its other credentials while the provider is down; retried with a
//!   growing pause until it answers.
//! * Refreshed every `refresh` period, and at once when a token names a key id the set
//!   does not hold (a key rotated in at the provider), at most once per `min_refresh`,
//!   so tokens with made-up key ids cost an attacker's target at most one fetch per
//!   period, whoever sends them.
//! * Used until it is older than `max_age` without a successful refresh; after that
//!   bearer tokens are refused until the provider answers again.
//! * Only asymmetric signing keys are kept: a key marked for encryption, a symmetric
//!   (`oct`) key and a key of an algorithm kubedav does not verify are left out, so no
//!   token can be checked with a public key used as an HMAC secret.

use super::fetch::{FetchError, Fetcher};
use arc_swap::ArcSwapOption;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The time as a [`KeySet`] reads it: the real clock, or one a test moves.
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The real clock.
pub fn system_clock() -> Clock {
    Arc::new(Instant::now)
}

/// How a key set is kept fresh.
#[derive(Clone, Debug)]
pub struct Freshness {
    /// Period of the background refresh.
    pub refresh: Duration,
    /// Least time between two fetches made because a token named an unknown key.
    pub min_refresh: Duration,
    /// Oldest a key set may be (since its last successful fetch) and still verify.
    pub max_age: Duration,
}

impl Default for Freshness {
    fn default() -> Self {
        Self {
            refresh: Duration::from_secs(300),
            min_refresh: Duration::from_secs(10),
            max_age: Duration::from_secs(6 * 3600),
        }
    }
}

/// What the discovery document of the provider says (the parts kubedav uses).
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Discovery {
    /// The issuer, which must be the configured one exactly.
    pub issuer: String,
    /// Where the signing keys are published.
    pub jwks_uri: String,
    /// Where a browser signs in.
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// Where a code is exchanged for tokens.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// Where a browser signs out, if the provider offers it.
    #[serde(default)]
    pub end_session_endpoint: Option<String>,
}

/// One verification key and the algorithms it may verify.
pub struct VerificationKey {
    /// The key.
    pub key: DecodingKey,
    /// Algorithms a token may name to be checked with it.
    pub algorithms: Vec<Algorithm>,
}

/// Keys of one successful fetch.
struct Snapshot {
    by_id: HashMap<String, Arc<VerificationKey>>,
    /// Keys published without an id (a provider with one key may do that).
    unnamed: Vec<Arc<VerificationKey>>,
    fetched: Instant,
    /// Changes whenever a fetch brings a different set of keys, so that what was
    /// verified with keys no longer published is verified again.
    generation: u64,
}

/// What a lookup found.
pub enum Lookup {
    /// The key to check the token with.
    Found(Arc<VerificationKey>),
    /// The set holds no key of that id.
    Unknown,
    /// The set is older than `max_age`, or was never fetched: no bearer token verifies.
    Unavailable,
}

/// The provider's keys and how they are kept fresh. See the module docs.
pub struct KeySet {
    issuer: String,
    fetcher: Fetcher,
    freshness: Freshness,
    clock: Clock,
    discovery: ArcSwapOption<Discovery>,
    snapshot: ArcSwapOption<Snapshot>,
    /// When a fetch for an unknown key id last started.
    last_demand: Mutex<Option<Instant>>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
    /// The last fetch's error, while the provider is unreachable.
    trouble: Mutex<Option<String>>,
}

impl KeySet {
    /// A key set for `issuer` (nothing fetched yet: see [`KeySet::keep_fresh`]).
    pub fn new(issuer: &str, fetcher: Fetcher, freshness: Freshness, clock: Clock) -> Self {
        Self {
            issuer: issuer.trim_end_matches('/').to_owned(),
            fetcher,
            freshness,
            clock,
            discovery: ArcSwapOption::empty(),
            snapshot: ArcSwapOption::empty(),
            last_demand: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
            trouble: Mutex::new(Some("not fetched yet".to_owned())),
        }
    }

    /// The issuer as configured (without a trailing slash).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The client the provider is read with.
    pub fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// The discovery document, once fetched.
    pub fn discovery(&self) -> Option<Arc<Discovery>> {
        self.discovery.load_full()
    }

    /// Why the provider cannot be used now, if it cannot: "not fetched yet", or the last
    /// fetch's error with its URL.
    pub fn trouble(&self) -> Option<String> {
        self.trouble.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Seconds since the keys in use were fetched; `None` before the first fetch.
    pub fn age(&self) -> Option<Duration> {
        let snapshot = self.snapshot.load();
        snapshot
            .as_ref()
            .map(|s| (self.clock)().saturating_duration_since(s.fetched))
    }

    /// Which set of keys is in use: a different number means keys were added or
    /// removed since. `None` before the first fetch.
    pub fn generation(&self) -> Option<u64> {
        self.snapshot.load().as_ref().map(|s| s.generation)
    }

    /// The key for a token naming `kid` (or none).
    pub fn lookup(&self, kid: Option<&str>) -> Lookup {
        let snapshot = self.snapshot.load();
        let Some(snapshot) = snapshot.as_ref() else {
            return Lookup::Unavailable;
        };
        if (self.clock)().saturating_duration_since(snapshot.fetched) > self.freshness.max_age {
            return Lookup::Unavailable;
        }
        let found = match kid {
            Some(kid) => snapshot.by_id.get(kid).cloned(),
            // Without a key id, only a provider publishing exactly one key is unambiguous.
            None => match (snapshot.by_id.len(), snapshot.unnamed.len()) {
                (0, 1) => snapshot.unnamed.first().cloned(),
                (1, 0) => snapshot.by_id.values().next().cloned(),
                _ => None,
            },
        };
        found.map_or(Lookup::Unknown, Lookup::Found)
    }

    /// Fetches the keys again because a token named a key the set does not hold, unless
    /// a fetch for that reason started less than `min_refresh` ago. Returns whether it
    /// fetched successfully.
    pub async fn refresh_on_demand(&self) -> bool {
        {
            let now = (self.clock)();
            let mut last = self.last_demand.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| now.saturating_duration_since(at) < self.freshness.min_refresh) {
                return false;
            }
            *last = Some(now);
        }
        self.refresh().await.is_ok()
    }

    /// Fetches discovery (the first time) and the JWKS, and puts the new keys in use.
    pub async fn refresh(&self) -> Result<usize, FetchError> {
        let _one_at_a_time = self.fetching.lock().await;
        let result = self.fetch().await;
        super::metrics::JWKS_FETCHES
            .with_label_values(&[if result.is_ok() { "ok" } else { "error" }])
            .inc();
        let mut trouble = self.trouble.lock().unwrap_or_else(|p| p.into_inner());
        match &result {
            Ok(count) => {
                if trouble.is_some() {
                    tracing::info!(target: "kubedav", issuer = %self.issuer, keys = count, "identity provider reached: signing keys loaded");
                }
                *trouble = None;
            }
            Err(e) => {
                tracing::warn!(target: "kubedav", issuer = %self.issuer, "identity provider unreachable: {e}; bearer tokens verify against the keys fetched before, if any, until they are {} s old", self.freshness.max_age.as_secs());
                *trouble = Some(e.to_string());
            }
        }
        super::metrics::IDP_UP.set(i64::from(result.is_ok()));
        result
    }

    async fn fetch(&self) -> Result<usize, FetchError> {
        let discovery = match self.discovery.load_full() {
            Some(discovery) => discovery,
            None => {
                let url = format!("{}/.well-known/openid-configuration", self.issuer);
                let discovery: Discovery = self.fetcher.json(&url).await?;
                if discovery.issuer.trim_end_matches('/') != self.issuer {
                    return Err(FetchError::Invalid {
                        url,
                        message: format!(
                            "names the issuer {:?}, not {:?}: set --oidc-issuer to the provider's issuer exactly",
                            discovery.issuer, self.issuer
                        ),
                    });
                }
                let discovery = Arc::new(discovery);
                self.discovery.store(Some(discovery.clone()));
                discovery
            }
        };
        let set: JwkSet = self.fetcher.json(&discovery.jwks_uri).await?;
        let mut by_id = HashMap::new();
        let mut unnamed = Vec::new();
        for jwk in &set.keys {
            let Some(key) = verification_key(jwk) else {
                continue;
            };
            match &jwk.common.key_id {
                Some(kid) => {
                    by_id.insert(kid.clone(), Arc::new(key));
                }
                None => unnamed.push(Arc::new(key)),
            }
        }
        let count = by_id.len() + unnamed.len();
        let previous = self.snapshot.load_full();
        let generation = match &previous {
            Some(previous)
                if previous.unnamed.is_empty()
                    && unnamed.is_empty()
                    && previous.by_id.len() == by_id.len()
                    && by_id.keys().all(|kid| previous.by_id.contains_key(kid)) =>
            {
                previous.generation
            }
            Some(previous) => previous.generation + 1,
            None => 0,
        };
        if count == 0 {
            return Err(FetchError::Invalid {
                url: discovery.jwks_uri.clone(),
                message: "holds no asymmetric signing key kubedav can verify with".to_owned(),
            });
        }
        self.snapshot.store(Some(Arc::new(Snapshot {
            by_id,
            unnamed,
            fetched: (self.clock)(),
            generation,
        })));
        Ok(count)
    }

    /// Puts the keys of `set` in use as if just fetched from the provider (for tests
    /// and benchmarks, which have no provider).
    pub fn install(&self, set: &JwkSet) {
        let mut by_id = HashMap::new();
        for jwk in &set.keys {
            if let (Some(key), Some(kid)) = (verification_key(jwk), &jwk.common.key_id) {
                by_id.insert(kid.clone(), Arc::new(key));
            }
        }
        let generation = self.generation().map_or(0, |g| g + 1);
        self.snapshot.store(Some(Arc::new(Snapshot {
            by_id,
            unnamed: Vec::new(),
            fetched: (self.clock)(),
            generation,
        })));
    }

    /// Keeps the set fresh until the process ends: fetches now, retries with a pause
    /// growing from 1 to 30 s while the provider is unreachable, then refreshes every
    /// `refresh` period.
    pub fn keep_fresh(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let keys = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut pause = Duration::from_secs(1);
            loop {
                let Some(set) = keys.upgrade() else { return };
                let next = match set.refresh().await {
                    Ok(_) => {
                        pause = Duration::from_secs(1);
                        set.freshness.refresh
                    }
                    Err(_) => {
                        let now = pause;
                        pause = (pause * 2).min(Duration::from_secs(30));
                        now.min(set.freshness.refresh)
                    }
                };
                super::metrics::JWKS_AGE.set(set.age().map_or(-1, |age| age.as_secs() as i64));
                drop(set);
                tokio::time::sleep(next).await;
            }
        })
    }
}

/// The verification key `jwk` stands for, if it is an asymmetric signing key of an
/// algorithm kubedav verifies.
pub(crate) fn verification_key(jwk: &Jwk) -> Option<VerificationKey> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    let family: &[Algorithm] = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => &[
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => &[Algorithm::ES256],
            EllipticCurve::P384 => &[Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(okp) => match okp.curve {
            EllipticCurve::Ed25519 => &[Algorithm::EdDSA],
            _ => return None,
        },
        // Symmetric keys have no place in a public key set.
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        Some(named) => {
            // The key's `alg`, by name (KeyAlgorithm also names encryption algorithms).
            let named: Algorithm = serde_json::to_value(named).ok()?.as_str()?.parse().ok()?;
            if !family.contains(&named) {
                return None;
            }
            vec![named]
        }
        None => family.to_vec(),
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(VerificationKey { key, algorithms })
}
