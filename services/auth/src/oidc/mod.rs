//! The operator's OpenID provider: its discovery document and signing keys
//! ([`keys::KeySet`]), fetched over HTTPS ([`fetch::Fetcher`]), and the bearer tokens
//! checked against them ([`bearer::BearerVerifier`]).
//!
//! The provider is never called per request: its keys are fetched at start, on a timer
//! and when a token names a key not yet seen (rate-limited). While it is down, the
//! service starts and serves passwords and app passwords; bearer tokens verify against
//! the last keys fetched until they are older than [`keys::Freshness::max_age`].

pub mod bearer;
pub mod fetch;
pub mod keys;
pub(crate) mod metrics;
pub mod ring_verify;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

/// Settings of the provider (`--oidc-*`).
#[derive(Clone, Debug)]
pub struct OidcConfig {
    /// The issuer URL (`--oidc-issuer`), whose `/.well-known/openid-configuration` is read.
    pub issuer: String,
    /// How tokens map to principals.
    pub claims: bearer::Claims,
    /// How the keys are kept fresh.
    pub freshness: keys::Freshness,
    /// A PEM file of CA certificates to trust for the provider, beside the public roots.
    pub ca_file: Option<PathBuf>,
    /// The browser sign-in, when a client secret is configured.
    pub sign_in: Option<crate::sign_in::SignInConfig>,
}

/// The provider as the auth core uses it.
pub struct Oidc {
    /// Checks bearer tokens.
    pub bearer: bearer::BearerVerifier,
}

impl Oidc {
    /// The provider `config` names, with nothing fetched yet; [`Oidc::start`] fetches.
    pub fn new(config: &OidcConfig, clock: keys::Clock) -> Result<Self, String> {
        let issuer = url::Url::parse(&config.issuer)
            .map_err(|e| format!("--oidc-issuer {:?} is not a URL: {e}", config.issuer))?;
        if !matches!(issuer.scheme(), "https" | "http") {
            return Err(format!("--oidc-issuer {issuer} must be an https:// URL"));
        }
        if issuer.scheme() == "http" && !issuer.host_str().is_some_and(is_loopback) {
            tracing::warn!(target: "kubedav", "--oidc-issuer {issuer} is plain HTTP: its keys can be replaced on the way; use https://");
        }
        if !bearer::valid_user_id(&format!("{}x", config.claims.user_prefix)) {
            return Err(format!(
                "--oidc-user-prefix {:?} cannot start a user id: use letters, digits, '-' or '_'",
                config.claims.user_prefix
            ));
        }
        if config.sign_in.is_some() && config.claims.user_prefix.is_empty() {
            return Err("--oidc-user-prefix is empty: with browser sign-in kubedav tells the provider's users (whose app passwords depend on their account's standing) by it; give one, e.g. oidc-".to_owned());
        }
        if config.claims.audience.is_empty() {
            return Err("--oidc-audience is empty: name the audience kubedav's tokens carry (the client id, or an audience the provider adds)".to_owned());
        }
        metrics::register();
        if !ring_verify::install() {
            tracing::debug!("jsonwebtoken's crypto provider was chosen before: signatures are checked by it");
        }
        let fetcher = fetch::Fetcher::new(config.ca_file.as_deref())?;
        let keys = Arc::new(keys::KeySet::new(
            &config.issuer,
            fetcher,
            config.freshness.clone(),
            clock,
        ));
        Ok(Self {
            bearer: bearer::BearerVerifier::new(keys, config.claims.clone()),
        })
    }

    /// Starts keeping the provider's keys fresh in the background.
    pub fn start(&self) -> tokio::task::JoinHandle<()> {
        self.bearer.keys().keep_fresh()
    }

    /// Why the provider cannot be used now, if it cannot (for `/readyz`).
    pub fn trouble(&self) -> Option<String> {
        self.bearer
            .keys()
            .trouble()
            .map(|why| format!("identity provider {}: {why}", self.bearer.keys().issuer()))
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
