//! The auth core: [`AuthCore`] implements the [`Auth`] port.

mod issued;

use crate::app_passwords::{AppPasswords, secret};
use crate::metrics::VERIFICATIONS;
use crate::oidc::{Oidc, OidcConfig};
use crate::pool::{Busy, CryptPool};
use crate::shared::SharedCache;
use crate::sign_in::SignIn;
use crate::sign_in::accounts::Standing;
use crate::throttle::{FailedPairs, Throttle, address_key};
use crate::users::{StoredHash, parse};
use hmac::{Hmac, KeyInit, Mac};
use kubedav_api::auth::{
    AppPasswordCreated, AppPasswordList, Auth, BeginSignInRequest, CreateAppPasswordRequest,
    FinishSignInRequest, ListAppPasswordsRequest, Principal, RevokeAppPasswordRequest,
    RevokeAppPasswordResponse, SignInStarted, SignOutRequest, SignedIn, SignedOut, VerifyRequest,
    VerifyResponse, verify_response::Outcome,
};
use kubedav_metrics::{Counter, CounterFamily};
use moka::sync::Cache;
use sha2::Sha256;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;
use tonic::Status;
use tracing::Instrument;

static ATTEMPTS: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_auth_attempts_total",
        "Verifications by outcome.",
        &["outcome"],
    )
});
/// The series of [`ATTEMPTS`] by [`Outcome`] (its number), looked up once.
static OUTCOMES: LazyLock<[Counter; 3]> = LazyLock::new(|| {
    ["allowed", "denied", "throttled"].map(|outcome| ATTEMPTS.with_label_values(&[outcome]))
});
static CACHE_HITS: LazyLock<Counter> = LazyLock::new(|| kubedav_metrics::cache_lookups("auth", "hit"));
static CACHE_MISSES: LazyLock<Counter> = LazyLock::new(|| kubedav_metrics::cache_lookups("auth", "miss"));
static CRYPTS: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter(
        "kubedav_auth_crypt_verifications_total",
        "Crypt verifications run.",
    )
});
/// The shared (Redis) cache's counters: lookups by result, and stores.
fn shared_counter(result: &str) -> Counter {
    if result == "stored" {
        kubedav_metrics::cache_stores("auth_shared")
    } else {
        kubedav_metrics::cache_lookups("auth_shared", result)
    }
}
static LOCKOUTS: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter("kubedav_auth_lockouts_total", "Lockouts started or extended.")
});

/// Settings of the auth core.
#[derive(Clone, Debug)]
pub struct AuthConfig {
    /// The users file; `None` when users come only from the identity provider.
    pub users_file: Option<PathBuf>,
    /// The identity provider whose bearer tokens are accepted, if any.
    pub oidc: Option<OidcConfig>,
    /// Accept plaintext entries.
    pub allow_plaintext: bool,
    /// How long a successful verification is cached; zero turns the cache off.
    pub cache_ttl: Duration,
    /// Most cached verifications.
    pub cache_capacity: u64,
    /// Crypt worker threads.
    pub workers: usize,
    /// Crypt jobs that may wait for a worker; more get 503 at once.
    pub queue: usize,
    /// Failures (from any address) after which an account is guarded: it refuses the
    /// addresses that failed on it, and only them (0: never).
    pub max_failures_per_user: u32,
    /// Consecutive failures before a client address is locked out (0: never).
    pub max_failures_per_address: u32,
    /// First lockout; each further failure doubles it.
    pub lockout: Duration,
}

#[cfg(test)]
mod tests;

type Key = [u8; 32];

/// A verification kept in the local cache.
#[derive(Clone)]
struct Kept {
    /// Who the credential stands for.
    principal: Arc<Principal>,
    /// For a password: the user it was verified for (a hash collision cannot give
    /// another user's principal). Empty for a token.
    user: String,
    /// When the credential itself expires (a token's `exp`, in seconds since the
    /// epoch); `u64::MAX`: only the cache's TTL.
    expires_at: u64,
    /// For a token: the generation of the provider's keys it was verified with
    /// ([`crate::oidc::keys::KeySet::generation`]); a token is verified again once the
    /// keys change, so a key removed at the provider stops its tokens at once.
    keys_generation: Option<u64>,
}

struct Inner {
    config: AuthConfig,
    users: RwLock<Arc<HashMap<String, StoredHash>>>,
    last_file: RwLock<Vec<u8>>,
    cache: Option<Cache<Key, Kept>>,
    oidc: Option<Oidc>,
    app_passwords: std::sync::OnceLock<AppPasswords>,
    sign_in: std::sync::OnceLock<Arc<SignIn>>,
    key: [u8; 32],
    pool: CryptPool,
    throttle_users: Throttle,
    throttle_addresses: Throttle,
    failed_pairs: FailedPairs,
    dummy: StoredHash,
    shared: Option<SharedCache>,
}

/// Verifies credentials against the users file. Cheap to clone.
#[derive(Clone)]
pub struct AuthCore {
    inner: Arc<Inner>,
}

impl AuthCore {
    /// Loads the users file (which must be readable) and starts the crypt pool.
    pub fn new(config: AuthConfig) -> Result<Self, String> {
        Self::with_shared_cache(config, None)
    }

    /// Like [`AuthCore::with_shared_cache`], reading the time for the identity
    /// provider's keys from `clock` (a test's).
    pub fn with_clock(
        config: AuthConfig,
        shared: Option<SharedCache>,
        clock: crate::oidc::keys::Clock,
    ) -> Result<Self, String> {
        let core = Self::build(config, shared, clock)?;
        if core.inner.config.users_file.is_some() {
            core.reload()?.ok_or("the users file is empty")?;
        } else if core.inner.oidc.is_none() {
            return Err(
                "no users file and no identity provider: give --users-file, --oidc-issuer, or both"
                    .to_owned(),
            );
        }
        Ok(core)
    }

    /// Like [`AuthCore::new`], sharing successful verifications with the other replicas
    /// through `shared` (behind the local cache).
    pub fn with_shared_cache(config: AuthConfig, shared: Option<SharedCache>) -> Result<Self, String> {
        Self::with_clock(config, shared, crate::oidc::keys::system_clock())
    }

    fn build(
        config: AuthConfig,
        shared: Option<SharedCache>,
        clock: crate::oidc::keys::Clock,
    ) -> Result<Self, String> {
        if shared.is_some() {
            for result in ["hit", "miss", "stored", "error"] {
                shared_counter(result);
            }
        }
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| format!("no randomness for the cache key: {e}"))?;
        let cache = (!config.cache_ttl.is_zero()).then(|| {
            Cache::builder()
                .max_capacity(config.cache_capacity)
                .time_to_live(config.cache_ttl)
                .support_invalidation_closures()
                .build()
        });
        // Unknown users are checked against this, so their answer takes as long.
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|e| format!("no randomness: {e}"))?;
        let dummy = StoredHash::ShaCrypt(crate::passwd::sha512_crypt(&format!("{random:?}"))?);
        if let Some(oidc) = &config.oidc
            && oidc.claims.user_prefix.is_empty()
            && config.users_file.is_some()
        {
            return Err("--oidc-user-prefix is empty beside a users file: a provider's user and a user of the file could then have one id, and with it one home and one set of grants; give a prefix (the default is oidc-), or serve the provider's users alone".to_owned());
        }
        let oidc = config.oidc.as_ref().map(|c| Oidc::new(c, clock)).transpose()?;
        let core = Self {
            inner: Arc::new(Inner {
                pool: CryptPool::new(config.workers, config.queue),
                throttle_users: Throttle::new(config.max_failures_per_user, config.lockout),
                throttle_addresses: Throttle::new(config.max_failures_per_address, config.lockout),
                failed_pairs: FailedPairs::default(),
                users: RwLock::new(Arc::new(HashMap::new())),
                last_file: RwLock::new(Vec::new()),
                cache,
                oidc,
                app_passwords: std::sync::OnceLock::new(),
                sign_in: std::sync::OnceLock::new(),
                key,
                dummy,
                shared: shared.filter(|_| !config.cache_ttl.is_zero()),
                config,
            }),
        };
        // Series that only move on trouble exist from the start (at 0), for rates and alerts.
        LazyLock::force(&LOCKOUTS);
        crate::metrics::register();
        Ok(core)
    }

    /// Starts fetching the identity provider's keys and keeping them fresh, and checking
    /// its accounts' standing when browser sign-in is on, if there is a provider. Needs
    /// a Tokio runtime; call it after [`AuthCore::set_app_passwords`].
    pub fn start_identity_provider(&self) -> Option<tokio::task::JoinHandle<()>> {
        let keys = self.inner.oidc.as_ref().map(Oidc::start)?;
        let accounts = self.inner.sign_in.get().map(SignIn::keep_accounts_checked);
        Some(tokio::spawn(async move {
            if let Some(accounts) = accounts {
                let _ = tokio::join!(keys, accounts);
            } else {
                let _ = keys.await;
            }
        }))
    }

    /// Accepts the app passwords kept in `app_passwords` (set once, at start; without
    /// them, app passwords can be neither made nor used), and keeps browser sessions
    /// and provider accounts in the same records, under the same secret, when browser
    /// sign-in is configured.
    pub fn set_app_passwords(&self, app_passwords: AppPasswords) {
        if let Some(oidc) = &self.inner.oidc
            && let Some(config) = self.inner.config.oidc.as_ref().and_then(|c| c.sign_in.clone())
        {
            let claims = &self.inner.config.oidc.as_ref().expect("configured").claims;
            let sign_in = SignIn::new(
                oidc.bearer.keys().clone(),
                claims,
                config,
                app_passwords.records(),
                app_passwords.secret_key(),
                app_passwords.freshness(),
                app_passwords.clock(),
            );
            let _ = self.inner.sign_in.set(Arc::new(sign_in));
        }
        let _ = self.inner.app_passwords.set(app_passwords);
    }

    /// The identity provider, if one is configured.
    pub fn identity_provider(&self) -> Option<&Oidc> {
        self.inner.oidc.as_ref()
    }

    /// Why the identity provider cannot be used now, if there is one and it cannot:
    /// never a reason to stop serving (passwords still work), but `/readyz` says it.
    pub fn identity_provider_trouble(&self) -> Option<String> {
        self.inner.oidc.as_ref().and_then(Oidc::trouble)
    }

    /// Re-reads the users file; returns the number of users when it changed (`None` when
    /// it did not). Cached verifications of changed or removed users are dropped.
    pub fn reload(&self) -> Result<Option<usize>, String> {
        let Some(path) = &self.inner.config.users_file else {
            return Ok(None);
        };
        let bytes = std::fs::read(path).map_err(|e| {
            format!(
                "cannot read the users file {}: {e}; make one with `kubedav passwd {} USER`, or \
                     serve without authentication with --allow-unauthenticated (and no --users-file)",
                path.display(),
                path.display()
            )
        })?;
        if *self.inner.last_file.read().unwrap_or_else(|p| p.into_inner()) == bytes {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&bytes);
        let mut parsed = parse(&text, self.inner.config.allow_plaintext);
        for (line, problem) in &parsed.problems {
            tracing::warn!(file = %path.display(), line, "users file: {problem}; line skipped");
        }
        // The identity provider's user ids start with its prefix; no user of the file
        // may take one of them (and with it a provider user's home and grants).
        if let Some(oidc) = &self.inner.config.oidc {
            let prefix = &oidc.claims.user_prefix;
            parsed.users.retain(|user, _| {
                let taken = !prefix.is_empty() && user.starts_with(prefix.as_str());
                if taken {
                    tracing::warn!(file = %path.display(), user, "users file: names starting with {prefix:?} belong to the identity provider's users (--oidc-user-prefix); user skipped");
                }
                !taken
            });
        }
        let old = self.inner.users.read().unwrap_or_else(|p| p.into_inner()).clone();
        let changed: HashSet<String> = old
            .iter()
            .filter(|(user, hash)| parsed.users.get(*user) != Some(*hash))
            .map(|(u, _)| u.clone())
            .collect();
        let count = parsed.users.len();
        *self.inner.users.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(parsed.users);
        *self.inner.last_file.write().unwrap_or_else(|p| p.into_inner()) = bytes;
        if let Some(cache) = &self.inner.cache
            && !changed.is_empty()
        {
            let _ = cache.invalidate_entries_if(move |_, kept| changed.contains(&kept.user));
        }
        tracing::info!(target: "kubedav", file = %path.display(), users = count, "users file loaded");
        Ok(Some(count))
    }

    /// Polls the users file every `interval` and reloads it when its content changed.
    /// Reading the file (not watching its inode) also catches the symlink swap with which
    /// Kubernetes updates Secret volumes.
    pub fn watch(&self, interval: Duration) -> Option<tokio::task::JoinHandle<()>> {
        self.inner.config.users_file.as_ref()?;
        let core = self.clone();
        Some(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let core = core.clone();
                match tokio::task::spawn_blocking(move || core.reload()).await {
                    Ok(Err(e)) => tracing::error!("{e}; keeping the users loaded before"),
                    Err(e) => tracing::error!("users file reload failed: {e}"),
                    Ok(Ok(_)) => {}
                }
            }
        }))
    }

    fn cache_key(&self, user: &str, password: &str) -> Key {
        let mut mac =
            <Hmac<Sha256> as KeyInit>::new_from_slice(&self.inner.key).expect("HMAC takes any key size");
        mac.update(user.as_bytes());
        mac.update(&[0]);
        mac.update(password.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Whether the shared cache holds this verification; an unreachable Redis counts as
    /// a miss (the core then verifies locally).
    async fn shared_hit(&self, shared: &SharedCache, key: &str) -> bool {
        match shared.contains(key).await {
            Ok(true) => {
                shared_counter("hit").inc();
                true
            }
            Ok(false) => {
                shared_counter("miss").inc();
                false
            }
            Err(e) => {
                shared_unavailable(&e);
                false
            }
        }
    }

    /// How long this attempt must wait, if it must: its address is locked out, or its
    /// account is guarded and this address failed on it (docs in `throttle.rs`).
    fn throttled(&self, request: &VerifyRequest, address: &str) -> Option<Duration> {
        let by_address = if address.is_empty() {
            None
        } else {
            self.inner.throttle_addresses.locked(address)
        };
        let by_user = self
            .inner
            .throttle_users
            .locked(&request.user)
            .filter(|_| self.inner.failed_pairs.has_failed(&request.user, address));
        by_user.max(by_address)
    }

    /// A verified login: its address's failures on the account are forgotten. Not the
    /// address's own count: a guesser holding one valid account could reset it.
    fn logged_in(&self, request: &VerifyRequest, address: &str) {
        self.inner.failed_pairs.succeeded(&request.user, address);
    }
}

fn shared_unavailable(error: &redis::RedisError) {
    shared_counter("error").inc();
    tracing::warn!(%error, "shared auth cache (Redis) unreachable: verifying locally");
}

fn answer(outcome: Outcome, retry_after: Duration, cached: bool) -> VerifyResponse {
    // Allowed = 0, Denied = 1, Throttled = 2, as the proto numbers them.
    OUTCOMES[outcome as usize].inc();
    let retry_after_seconds =
        u32::try_from(retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0)).unwrap_or(u32::MAX);
    VerifyResponse {
        outcome: outcome as i32,
        retry_after_seconds,
        cached,
        principal: None,
        reason: String::new(),
    }
}

/// An allowed answer for `principal`.
fn allowed(principal: &Principal, cached: bool) -> VerifyResponse {
    let mut reply = answer(Outcome::Allowed, Duration::ZERO, cached);
    reply.principal = Some(principal.clone());
    crate::metrics::count_good(&principal.kind, cached);
    reply
}

/// The principal of an htpasswd user.
fn password_principal(user: &str) -> Principal {
    Principal {
        user: user.to_owned(),
        display_name: user.to_owned(),
        groups: Vec::new(),
        read_only: false,
        path_prefix: String::new(),
        kind: "password".to_owned(),
        credential_id: String::new(),
    }
}

fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl AuthCore {
    /// A refused password: counted against the user and the address.
    fn failed(&self, request: &VerifyRequest, address: &str) {
        let mut locked = self.inner.throttle_users.failure(&request.user);
        self.inner.failed_pairs.failed(&request.user, address);
        if !address.is_empty() {
            locked |= self.inner.throttle_addresses.failure(address);
        }
        if locked {
            LOCKOUTS.inc();
            tracing::warn!(user = %request.user, client = %request.client_address, "too many failed logins: locked out");
        }
    }
}

#[async_trait::async_trait]
impl Auth for AuthCore {
    async fn create_app_password(
        &self,
        request: CreateAppPasswordRequest,
    ) -> Result<AppPasswordCreated, Status> {
        let app_passwords = self.app_passwords()?;
        let owner = request.owner.as_ref().map(|o| o.user.clone()).unwrap_or_default();
        if let Err(why) = self.app_passwords_allowed(&owner, None).await? {
            return Err(Status::failed_precondition(why));
        }
        app_passwords.create(request).await
    }

    async fn begin_sign_in(&self, request: BeginSignInRequest) -> Result<SignInStarted, Status> {
        self.sign_in()?.begin(request).await
    }

    async fn finish_sign_in(&self, request: FinishSignInRequest) -> Result<SignedIn, Status> {
        let sign_in = self.sign_in()?;
        let address = address_key(&request.client_address);
        if !address.is_empty()
            && let Some(wait) = self.inner.throttle_addresses.locked(&address)
        {
            return Err(Status::resource_exhausted(format!(
                "too many failed sign-ins from your address; try again in {} s",
                wait.as_secs().max(1)
            )));
        }
        let finished = sign_in.finish(request).await;
        if finished.is_err() && !address.is_empty() && self.inner.throttle_addresses.failure(&address) {
            LOCKOUTS.inc();
            tracing::warn!(client = %address, "too many refused sign-ins: address locked out");
        }
        finished
    }

    async fn sign_out(&self, request: SignOutRequest) -> Result<SignedOut, Status> {
        self.sign_in()?.sign_out(request).await
    }

    async fn list_app_passwords(&self, request: ListAppPasswordsRequest) -> Result<AppPasswordList, Status> {
        let app_passwords = self.app_passwords()?.list(&request.user).await?;
        Ok(AppPasswordList { app_passwords })
    }

    async fn revoke_app_password(
        &self,
        request: RevokeAppPasswordRequest,
    ) -> Result<RevokeAppPasswordResponse, Status> {
        self.app_passwords()?.revoke(&request.user, &request.id).await?;
        Ok(RevokeAppPasswordResponse {})
    }

    async fn verify(&self, request: VerifyRequest) -> Result<VerifyResponse, Status> {
        let address = address_key(&request.client_address);
        if let Some(wait) = self.throttled(&request, &address) {
            return Ok(answer(Outcome::Throttled, wait, false));
        }
        if !request.bearer_token.is_empty() {
            return Ok(self.verify_bearer(&request, &address).await);
        }
        if !request.session.is_empty() {
            return self.verify_session(&request, &address).await;
        }
        if secret::id_of(&request.password).is_some()
            && let Some(app_passwords) = self.inner.app_passwords.get()
        {
            return self.verify_app_password(app_passwords, &request, &address).await;
        }
        let key = self.cache_key(&request.user, &request.password);
        if let Some(cache) = &self.inner.cache
            && let Some(kept) = cache.get(&key)
            && kept.user == request.user
        {
            CACHE_HITS.inc();
            return Ok(allowed(&kept.principal, true));
        }
        let users = self.inner.users.read().unwrap_or_else(|p| p.into_inner()).clone();
        let (stored, known) = match users.get(&request.user) {
            Some(stored) => (stored.clone(), true),
            None => (self.inner.dummy.clone(), false),
        };
        let keep = |principal: &Arc<Principal>| {
            if let Some(cache) = &self.inner.cache {
                cache.insert(
                    key,
                    Kept {
                        principal: principal.clone(),
                        user: request.user.clone(),
                        expires_at: u64::MAX,
                        keys_generation: None,
                    },
                );
            }
        };
        let shared_key = match &self.inner.shared {
            Some(shared) if known => {
                let shared_key = shared.key(&request.user, &request.password, stored.text());
                if self.shared_hit(shared, &shared_key).await {
                    self.logged_in(&request, &address);
                    let principal = Arc::new(password_principal(&request.user));
                    keep(&principal);
                    return Ok(allowed(&principal, true));
                }
                Some(shared_key)
            }
            _ => None,
        };
        CACHE_MISSES.inc();
        let password = request.password.clone();
        let matched = self
            .inner
            .pool
            .run(move || stored.verify(&password))
            .instrument(tracing::info_span!("auth.crypt"))
            .await
            .map_err(|Busy| {
                ATTEMPTS.with_label_values(&["busy"]).inc();
                Status::resource_exhausted("too many password checks in progress; retry shortly")
            })?;
        CRYPTS.inc();
        if matched && known {
            self.logged_in(&request, &address);
            let principal = Arc::new(password_principal(&request.user));
            keep(&principal);
            if let (Some(shared), Some(shared_key)) = (&self.inner.shared, shared_key) {
                match shared.insert(&shared_key).await {
                    Ok(()) => {
                        shared_counter("stored").inc();
                    }
                    Err(e) => shared_unavailable(&e),
                }
            }
            return Ok(allowed(&principal, false));
        }
        VERIFICATIONS.with_label_values(&["password", "refused"]).inc();
        tracing::info!(user = %request.user, client = %request.client_address, "login refused");
        self.failed(&request, &address);
        let mut reply = answer(Outcome::Denied, Duration::ZERO, false);
        reply.reason = "the user name or password is wrong".to_owned();
        Ok(reply)
    }
}
