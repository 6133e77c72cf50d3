//! The operator's identity provider (`--oidc-*`): whose bearer tokens are accepted, and
//! how their claims become a principal.

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// The OpenID provider whose users kubedav serves beside the users file.
#[derive(Debug, Args)]
#[command(next_help_heading = "Identity provider (targets all, auth, gateway)")]
pub(crate) struct OidcArgs {
    /// The OpenID provider's issuer URL (e.g. https://keycloak.example/realms/files).
    /// Its discovery document and JWKS are fetched at start and kept fresh; bearer tokens
    /// it signs are accepted on every WebDAV method. Empty: no identity provider.
    #[arg(long, env = "KUBEDAV_OIDC_ISSUER", default_value = "")]
    pub oidc_issuer: String,

    /// The `aud` a bearer token must carry [default: --oidc-client-id].
    #[arg(long, env = "KUBEDAV_OIDC_AUDIENCE")]
    pub oidc_audience: Option<String>,

    /// kubedav's client id at the provider.
    #[arg(long, env = "KUBEDAV_OIDC_CLIENT_ID", default_value = "kubedav")]
    pub oidc_client_id: String,

    /// The claim that names the user. `sub` never changes; `preferred_username` reads
    /// better but can be renamed or reused at the provider, and whoever holds a name
    /// holds its home (docs/security.md).
    #[arg(long, env = "KUBEDAV_OIDC_USERNAME_CLAIM", default_value = "sub")]
    pub oidc_username_claim: String,

    /// The claim that lists the user's groups.
    #[arg(long, env = "KUBEDAV_OIDC_GROUPS_CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,

    /// Put before every user id from the provider, so that none can be a user of the
    /// users file: names starting with it are refused there.
    #[arg(long, env = "KUBEDAV_OIDC_USER_PREFIX", default_value = "oidc-")]
    pub oidc_user_prefix: String,

    /// A PEM file of CA certificates to trust for the provider, beside the public roots.
    #[arg(long, env = "KUBEDAV_OIDC_CA_FILE")]
    pub oidc_ca_file: Option<PathBuf>,

    /// Seconds between refreshes of the provider's keys.
    #[arg(long, env = "KUBEDAV_OIDC_JWKS_REFRESH_SECONDS", default_value_t = 300)]
    pub oidc_jwks_refresh_seconds: u64,

    /// Least seconds between two fetches of the keys made because a token named an
    /// unknown key (a key rotated in at the provider).
    #[arg(long, env = "KUBEDAV_OIDC_JWKS_MIN_REFRESH_SECONDS", default_value_t = 10)]
    pub oidc_jwks_min_refresh_seconds: u64,

    /// Oldest the keys may be, since the last successful fetch, and still verify tokens
    /// (while the provider is unreachable).
    #[arg(long, env = "KUBEDAV_OIDC_JWKS_MAX_AGE_SECONDS", default_value_t = 6 * 3600)]
    pub oidc_jwks_max_age_seconds: u64,

    /// Seconds of clock difference tolerated in a token's `exp` and `nbf`.
    #[arg(long, env = "KUBEDAV_OIDC_LEEWAY_SECONDS", default_value_t = 60)]
    pub oidc_leeway_seconds: u64,

    /// A file holding kubedav's client secret at the provider (a mounted Secret); the
    /// variable KUBEDAV_OIDC_CLIENT_SECRET may hold the secret itself instead (never a
    /// flag: a flag's value shows in the process list). With it the auth service signs
    /// browsers in (authorization code with PKCE).
    #[arg(long, env = "KUBEDAV_OIDC_CLIENT_SECRET_FILE")]
    pub oidc_client_secret_file: Option<PathBuf>,

    /// The scopes a browser sign-in asks for. `offline_access` brings the refresh token
    /// kubedav checks the account's standing with; add `groups` for Dex.
    #[arg(
        long,
        env = "KUBEDAV_OIDC_SCOPES",
        default_value = "openid profile offline_access"
    )]
    pub oidc_scopes: String,

    /// Seconds between checks, with the stored refresh token, that each signed-in
    /// account is still in good standing at the provider: the most a disabled account's
    /// app passwords and sessions keep working.
    #[arg(long, env = "KUBEDAV_OIDC_ACCOUNT_CHECK_SECONDS", default_value_t = 300)]
    pub oidc_account_check_seconds: u64,

    /// Seconds a browser session lasts after sign-in.
    #[arg(long, env = "KUBEDAV_SESSION_LIFETIME_SECONDS", default_value_t = 12 * 3600)]
    pub session_lifetime_seconds: u64,

    /// The address browsers reach kubedav at, through the Ingress
    /// (https://files.example.com): with --oidc-issuer it turns the browser sign-in on
    /// (the provider sends browsers back to it + {base}/.kubedav/callback).
    #[arg(long, env = "KUBEDAV_PUBLIC_URL")]
    pub public_url: Option<String>,
}

/// The variable that may hold the client secret itself.
pub(crate) const CLIENT_SECRET_VARIABLE: &str = "KUBEDAV_OIDC_CLIENT_SECRET";

impl OidcArgs {
    /// Whether an identity provider is configured.
    pub(crate) fn enabled(&self) -> bool {
        !self.oidc_issuer.trim().is_empty()
    }

    /// The client secret, from its file or its variable; `None` when neither is given.
    pub(crate) fn client_secret(&self) -> Result<Option<String>, String> {
        if let Some(path) = &self.oidc_client_secret_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!(
                    "--oidc-client-secret-file {}: {e}; mount the client secret there",
                    path.display()
                )
            })?;
            let secret = text.trim().to_owned();
            if secret.is_empty() {
                return Err(format!("--oidc-client-secret-file {} is empty", path.display()));
            }
            return Ok(Some(secret));
        }
        Ok(std::env::var(CLIENT_SECRET_VARIABLE)
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty()))
    }

    /// The gateway's browser sign-in, when `--public-url` and a provider are given.
    pub(crate) fn gateway_sign_in(&self) -> Option<kubedav_gateway::SignInSettings> {
        let public_url = self.public_url.as_deref()?.trim().trim_end_matches('/');
        (self.enabled() && !public_url.is_empty()).then(|| kubedav_gateway::SignInSettings {
            public_url: public_url.to_owned(),
        })
    }

    /// The auth core's provider settings, if a provider is configured.
    pub(crate) fn config(&self) -> Result<Option<kubedav_auth::oidc::OidcConfig>, String> {
        use kubedav_auth::oidc::{OidcConfig, bearer::Claims, keys::Freshness};
        if !self.enabled() {
            return Ok(None);
        }
        let sign_in = self
            .client_secret()?
            .map(|client_secret| kubedav_auth::sign_in::SignInConfig {
                client_id: self.oidc_client_id.clone(),
                client_secret,
                scopes: self.oidc_scopes.clone(),
                session_lifetime: Duration::from_secs(self.session_lifetime_seconds.max(60)),
                account_check: Duration::from_secs(self.oidc_account_check_seconds.max(1)),
            });
        Ok(Some(OidcConfig {
            issuer: self.oidc_issuer.trim().to_owned(),
            claims: Claims {
                audience: self
                    .oidc_audience
                    .clone()
                    .unwrap_or_else(|| self.oidc_client_id.clone()),
                username_claim: self.oidc_username_claim.clone(),
                groups_claim: self.oidc_groups_claim.clone(),
                user_prefix: self.oidc_user_prefix.clone(),
                leeway: Duration::from_secs(self.oidc_leeway_seconds),
            },
            freshness: Freshness {
                refresh: Duration::from_secs(self.oidc_jwks_refresh_seconds.max(1)),
                min_refresh: Duration::from_secs(self.oidc_jwks_min_refresh_seconds),
                max_age: Duration::from_secs(self.oidc_jwks_max_age_seconds.max(1)),
            },
            ca_file: self.oidc_ca_file.clone(),
            sign_in,
        }))
    }
}

/// App passwords, and the key of what kubedav keeps secret with the data.
#[derive(Debug, Args)]
#[command(next_help_heading = "App passwords (targets all, auth)")]
pub(crate) struct CredentialArgs {
    /// The key app passwords are hashed under: at least 32 random bytes (e.g.
    /// `openssl rand -base64 48`), the same on every auth replica, from a Kubernetes
    /// Secret (prefer the variable: a flag's value shows in the process list). The auth
    /// target keeps app passwords only with it (and --fileio-url, where they are kept);
    /// all-in-one without it makes a key and keeps it with the data.
    #[arg(long, env = "KUBEDAV_SECRET_KEY", hide_env_values = true)]
    pub secret_key: Option<String>,

    /// Milliseconds a replica uses what it read of an app password before reading it
    /// again: the most a revocation made through another replica takes to hold here.
    #[arg(long, env = "KUBEDAV_APP_PASSWORD_FRESHNESS_MS", default_value_t = 500)]
    pub app_password_freshness_ms: u64,
}

/// The shortest `--secret-key` accepted, in bytes.
pub(crate) const MIN_SECRET_KEY_BYTES: usize = 32;

impl CredentialArgs {
    /// The app passwords' settings: hashed under a key from `secret` (the configured
    /// one), or from one kept with the data when `None`.
    pub(crate) fn app_passwords(
        &self,
        secret: Option<Vec<u8>>,
    ) -> kubedav_auth::app_passwords::AppPasswordsConfig {
        kubedav_auth::app_passwords::AppPasswordsConfig {
            secret,
            freshness: Duration::from_millis(self.app_password_freshness_ms),
            last_used_every: Duration::from_secs(3600),
            clock: std::sync::Arc::new(std::time::SystemTime::now),
        }
    }
}
