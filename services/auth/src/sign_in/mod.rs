//! Browser sign-in through the identity provider: the authorization code flow with
//! PKCE ([`flow`]), sessions kept with the data ([`sessions`]), and the provider
//! accounts behind them kept in good standing with a refresh token ([`accounts`]).
//!
//! The auth service does all of it that needs a secret: it holds the client secret,
//! exchanges the code, verifies the ID token (signature, `iss`, `aud` = the client id,
//! `exp`, and the `nonce` of the flow) and opens the session. The gateway only carries
//! the flow and the session token in cookies.

pub mod accounts;
pub mod flow;
pub mod sessions;

use crate::app_passwords::WallClock;
use crate::metrics::SIGN_INS;
use crate::oidc::bearer::{BearerVerifier, Claims};
use crate::oidc::keys::KeySet;
use crate::secret_key::SecretKey;
use accounts::{Accounts, Refreshed, Standing};
use flow::{Broken, Flow};
use kubedav_api::auth::{
    BeginSignInRequest, FinishSignInRequest, Principal, SignInStarted, SignOutRequest, SignedIn, SignedOut,
};
use kubedav_api::records::Records;
use serde_json::Value;
use sessions::Sessions;
use std::sync::Arc;
use std::time::Duration;
use tonic::Status;

/// Settings of the browser sign-in (`--oidc-client-secret-file` and the rest).
#[derive(Clone)]
pub struct SignInConfig {
    /// kubedav's client id at the provider.
    pub client_id: String,
    /// Its client secret.
    pub client_secret: String,
    /// The scopes asked for (`openid` among them; `offline_access` for a refresh token).
    pub scopes: String,
    /// How long a session lasts.
    pub session_lifetime: Duration,
    /// How often each account's standing is checked at the provider.
    pub account_check: Duration,
}

impl std::fmt::Debug for SignInConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignInConfig")
            .field("client_id", &self.client_id)
            .field("client_secret", &"(hidden)")
            .field("scopes", &self.scopes)
            .field("session_lifetime", &self.session_lifetime)
            .field("account_check", &self.account_check)
            .finish()
    }
}

/// The keyed parts, made once the secret key is known.
struct Keyed {
    flow_key: [u8; 32],
    sessions: Sessions,
    accounts: Accounts,
}

/// The browser sign-in and what it keeps. See the module docs.
pub struct SignIn {
    keys: Arc<KeySet>,
    id_tokens: BearerVerifier,
    config: SignInConfig,
    records: Arc<dyn Records>,
    secret: SecretKey,
    freshness: Duration,
    clock: WallClock,
    keyed: tokio::sync::OnceCell<Keyed>,
}

impl SignIn {
    /// The sign-in at the provider of `keys`, mapping ID tokens' claims as `claims`
    /// does (but for the audience, which is the client id), keeping sessions and
    /// accounts in `records`, keyed from `secret`, read again after `freshness`.
    pub fn new(
        keys: Arc<KeySet>,
        claims: &Claims,
        config: SignInConfig,
        records: Arc<dyn Records>,
        secret: SecretKey,
        freshness: Duration,
        clock: WallClock,
    ) -> Self {
        let id_claims = Claims {
            audience: config.client_id.clone(),
            ..claims.clone()
        };
        Self {
            id_tokens: BearerVerifier::new(keys.clone(), id_claims),
            keys,
            config,
            records,
            secret,
            freshness,
            clock,
            keyed: tokio::sync::OnceCell::new(),
        }
    }

    async fn keyed(&self) -> Result<&Keyed, Status> {
        self.keyed
            .get_or_try_init(|| async {
                Ok::<_, Status>(Keyed {
                    flow_key: self.secret.derive("kubedav sign-in flows v1").await?,
                    sessions: Sessions::new(
                        self.records.clone(),
                        self.secret.derive("kubedav sessions v1").await?,
                        self.freshness,
                        self.clock.clone(),
                    ),
                    accounts: Accounts::new(
                        self.records.clone(),
                        self.secret.derive("kubedav refresh tokens v1").await?,
                        self.freshness,
                        self.clock.clone(),
                    ),
                })
            })
            .await
    }

    fn now(&self) -> i64 {
        crate::app_passwords::seconds(&self.clock)
    }

    /// The provider's endpoints, or why they are not known yet.
    fn discovery(&self) -> Result<Arc<crate::oidc::keys::Discovery>, Status> {
        self.keys.discovery().ok_or_else(|| {
            Status::unavailable(format!(
                "the identity provider {} has not been reached yet: try again shortly, or use a password",
                self.keys.issuer()
            ))
        })
    }

    /// Starts a sign-in: where to send the browser, and the sealed flow to keep.
    pub async fn begin(&self, request: BeginSignInRequest) -> Result<SignInStarted, Status> {
        let redirect = url::Url::parse(&request.redirect_uri)
            .ok()
            .filter(|u| matches!(u.scheme(), "https" | "http"))
            .ok_or_else(|| Status::invalid_argument("the redirect URI must be an http(s) URL"))?;
        if !request.return_to.starts_with('/') || request.return_to.starts_with("//") {
            return Err(Status::invalid_argument(
                "return_to must be a path on this server",
            ));
        }
        let discovery = self.discovery()?;
        let endpoint = discovery.authorization_endpoint.as_deref().ok_or_else(|| {
            Status::failed_precondition("the identity provider names no authorization_endpoint")
        })?;
        let flow = Flow::new(&request.return_to, redirect.as_str(), self.now()).map_err(Status::internal)?;
        let mut url = url::Url::parse(endpoint).map_err(|e| {
            Status::failed_precondition(format!("the provider's authorization_endpoint is not a URL: {e}"))
        })?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", redirect.as_str())
            .append_pair("scope", &self.config.scopes)
            .append_pair("state", &flow.state)
            .append_pair("nonce", &flow.nonce)
            .append_pair("code_challenge", &flow.challenge())
            .append_pair("code_challenge_method", "S256");
        SIGN_INS.with_label_values(&["started"]).inc();
        Ok(SignInStarted {
            authorization_url: url.into(),
            flow: flow.seal(&self.keyed().await?.flow_key),
            max_age_seconds: flow::MAX_AGE_SECONDS as u32,
        })
    }

    /// Finishes a sign-in: the code exchanged, the ID token verified, a session opened.
    pub async fn finish(&self, request: FinishSignInRequest) -> Result<SignedIn, Status> {
        let result = self.finish_checked(request).await;
        let label = if result.is_ok() { "completed" } else { "refused" };
        SIGN_INS.with_label_values(&[label]).inc();
        if let Err(e) = &result {
            tracing::info!(target: "kubedav", "a sign-in was refused: {}", e.message());
        }
        result
    }

    async fn finish_checked(&self, request: FinishSignInRequest) -> Result<SignedIn, Status> {
        let keyed = self.keyed().await?;
        let flow = Flow::open(&request.flow, &keyed.flow_key, self.now()).map_err(|why| match why {
            Broken::Forged => {
                Status::invalid_argument("this sign-in was not started by this browser here: sign in again")
            }
            Broken::Expired => Status::invalid_argument(format!(
                "this sign-in took longer than {} minutes: sign in again",
                flow::MAX_AGE_SECONDS / 60
            )),
        })?;
        let state_matches: bool =
            subtle::ConstantTimeEq::ct_eq(flow.state.as_bytes(), request.state.as_bytes()).into();
        if !state_matches || flow.redirect_uri != request.redirect_uri {
            return Err(Status::invalid_argument(
                "this answer of the identity provider belongs to another sign-in: sign in again",
            ));
        }
        if request.code.is_empty() || request.code.len() > 4096 {
            return Err(Status::invalid_argument(
                "the identity provider sent no usable code: sign in again",
            ));
        }
        let tokens = self
            .token_call(&[
                ("grant_type", "authorization_code"),
                ("code", &request.code),
                ("redirect_uri", &flow.redirect_uri),
                ("code_verifier", &flow.verifier),
            ])
            .await?
            .map_err(|why| {
                Status::permission_denied(format!("the identity provider refused the sign-in: {why}"))
            })?;
        let id_token = tokens.get("id_token").and_then(Value::as_str).ok_or_else(|| {
            Status::permission_denied(
                "the identity provider sent no ID token (is `openid` among --oidc-scopes?)",
            )
        })?;
        let verified = self.id_tokens.verify(id_token).await.map_err(|why| {
            Status::permission_denied(format!("the ID token was refused: {}", why.message()))
        })?;
        let nonce_matches = verified
            .nonce
            .as_deref()
            .is_some_and(|n| bool::from(subtle::ConstantTimeEq::ct_eq(n.as_bytes(), flow.nonce.as_bytes())));
        if !nonce_matches {
            return Err(Status::permission_denied(
                "the ID token belongs to another sign-in: sign in again",
            ));
        }
        let mut principal = verified.principal;
        principal.kind = "session".to_owned();
        let refresh = tokens.get("refresh_token").and_then(Value::as_str);
        if refresh.is_none() {
            tracing::warn!(target: "kubedav", user = %principal.user, "the identity provider gave no refresh token: kubedav cannot tell when this account is disabled, so its app passwords are refused (ask for `offline_access` in --oidc-scopes and allow it at the provider)");
        }
        keyed.accounts.signed_in(&principal.user, refresh).await?;
        let session = keyed
            .sessions
            .open(&principal, id_token, self.config.session_lifetime)
            .await?;
        tracing::info!(target: "kubedav", user = %principal.user, "signed in through the identity provider");
        Ok(SignedIn {
            session,
            principal: Some(principal),
            max_age_seconds: u32::try_from(self.config.session_lifetime.as_secs()).unwrap_or(u32::MAX),
            return_to: flow.return_to,
        })
    }

    /// Ends a session; answers the provider's end-session URL when it has one.
    pub async fn sign_out(&self, request: SignOutRequest) -> Result<SignedOut, Status> {
        let ended = self.keyed().await?.sessions.end(&request.session).await?;
        let Some(session) = ended else {
            return Ok(SignedOut::default());
        };
        SIGN_INS.with_label_values(&["signed_out"]).inc();
        tracing::info!(target: "kubedav", user = %session.user, "signed out");
        let end_session_url = self
            .keys
            .discovery()
            .and_then(|d| d.end_session_endpoint.clone())
            .and_then(|endpoint| url::Url::parse(&endpoint).ok())
            .map(|mut url| {
                {
                    let mut query = url.query_pairs_mut();
                    query.append_pair("client_id", &self.config.client_id);
                    if !session.id_token.is_empty() {
                        query.append_pair("id_token_hint", &session.id_token);
                    }
                    if !request.post_logout_redirect_uri.is_empty() {
                        query.append_pair("post_logout_redirect_uri", &request.post_logout_redirect_uri);
                    }
                }
                url.to_string()
            })
            .unwrap_or_default();
        Ok(SignedOut { end_session_url })
    }

    /// The principal of a session token, if it is a live session of an account in good
    /// standing, and whether its record was read lately rather than now.
    pub async fn session(&self, token: &str) -> Result<Option<(Principal, bool)>, Status> {
        let keyed = self.keyed().await?;
        let Some((session, kept)) = keyed.sessions.find(token).await? else {
            return Ok(None);
        };
        match keyed.accounts.standing(&session.user).await? {
            Standing::Suspended(_) => return Ok(None),
            Standing::Good { not_before } if session.created < not_before => return Ok(None),
            _ => {}
        }
        Ok(Some((session.principal(), kept)))
    }

    /// The standing of `user`'s provider account: app passwords of an account not in
    /// good standing are refused.
    pub async fn standing(&self, user: &str) -> Result<Standing, Status> {
        self.keyed().await?.accounts.standing(user).await
    }

    /// Checks every account at the provider each [`SignInConfig::account_check`]
    /// period, and sweeps the sessions that have ended, in the background.
    pub fn keep_accounts_checked(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let period = this.config.account_check.max(Duration::from_secs(1));
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if this.keys.discovery().is_none() {
                    continue;
                }
                let keyed = match this.keyed().await {
                    Ok(keyed) => keyed,
                    Err(e) => {
                        tracing::warn!(target: "kubedav", "accounts not checked: {}", e.message());
                        continue;
                    }
                };
                // Due at half the period, so each is checked within one period.
                let checked = keyed
                    .accounts
                    .check_due(period / 2, |token| this.refresh(token))
                    .await;
                if let Err(e) = checked {
                    tracing::warn!(target: "kubedav", "accounts not checked: {}", e.message());
                }
                // The first sweep looks back a session's lifetime: what ended while no
                // replica ran (with a shorter lifetime than before, older ones stay).
                match keyed.sessions.sweep(this.config.session_lifetime).await {
                    Ok(0) => {}
                    Ok(swept) => tracing::info!(target: "kubedav", swept, "ended sessions swept"),
                    Err(e) => tracing::warn!(target: "kubedav", "ended sessions not swept: {}", e.message()),
                }
            }
        })
    }

    /// Uses a refresh token at the provider.
    async fn refresh(&self, token: String) -> Refreshed {
        match self
            .token_call(&[("grant_type", "refresh_token"), ("refresh_token", &token)])
            .await
        {
            Ok(Ok(tokens)) => Refreshed::Good(
                tokens
                    .get("refresh_token")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            ),
            Ok(Err(why)) if why.starts_with("invalid_grant") => Refreshed::Refused(why),
            Ok(Err(why)) => Refreshed::Unanswered(why),
            Err(status) => Refreshed::Unanswered(status.message().to_owned()),
        }
    }

    /// A call to the token endpoint: `Ok(Ok(tokens))`, `Ok(Err(error))` when the provider
    /// refused (its `error` and `error_description`), `Err` when it could not be asked.
    async fn token_call(
        &self,
        form: &[(&str, &str)],
    ) -> Result<Result<serde_json::Map<String, Value>, String>, Status> {
        let discovery = self.discovery()?;
        let endpoint = discovery
            .token_endpoint
            .as_deref()
            .ok_or_else(|| Status::failed_precondition("the identity provider names no token_endpoint"))?;
        let (status, body) = self
            .keys
            .fetcher()
            .post_form(endpoint, form, &self.config.client_id, &self.config.client_secret)
            .await
            .map_err(|e| Status::unavailable(format!("the identity provider cannot be reached: {e}")))?;
        let Value::Object(body) = body else {
            return Err(Status::unavailable(format!(
                "the token endpoint {endpoint} answered {status} without a JSON object"
            )));
        };
        if status.is_success() {
            return Ok(Ok(body));
        }
        let error = body.get("error").and_then(Value::as_str).unwrap_or("refused");
        let description = body
            .get("error_description")
            .and_then(Value::as_str)
            .unwrap_or("");
        if status.is_server_error() {
            return Err(Status::unavailable(format!(
                "the token endpoint answered {status}: {error} {description}"
            )));
        }
        Ok(Err(format!("{error}: {description}")))
    }
}
