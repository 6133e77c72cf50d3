//! The credentials issued rather than listed: bearer tokens and browser sessions from
//! the identity provider, and app passwords, with what ties app passwords to the
//! provider's account. The users file's passwords are the core's own (`mod.rs`).

use super::*;

impl AuthCore {
    /// The browser sign-in, or why there is none.
    pub(super) fn sign_in(&self) -> Result<&SignIn, Status> {
        self.inner.sign_in.get().map(|s| &**s).ok_or_else(|| {
            Status::failed_precondition(
                "browser sign-in is not configured: give the auth service --oidc-issuer, the client secret (--oidc-client-secret-file or KUBEDAV_OIDC_CLIENT_SECRET), --secret-key and --fileio-url",
            )
        })
    }

    /// Whether `user` is one of the identity provider's users (by the prefix of its id).
    pub(super) fn provider_user(&self, user: &str) -> bool {
        self.inner
            .config
            .oidc
            .as_ref()
            .is_some_and(|c| !c.claims.user_prefix.is_empty() && user.starts_with(&c.claims.user_prefix))
    }

    /// Whether app passwords of `user` may be made and used: always for the users
    /// file's users; for the provider's, only while kubedav can tell their account is in
    /// good standing (docs/security.md, "App passwords and the identity provider").
    pub(super) async fn app_passwords_allowed(
        &self,
        user: &str,
        created: Option<i64>,
    ) -> Result<Result<(), String>, Status> {
        if !self.provider_user(user) {
            return Ok(Ok(()));
        }
        let Some(sign_in) = self.inner.sign_in.get() else {
            return Ok(Err("app passwords of the identity provider's users need browser sign-in (a client secret), so that kubedav can tell when the account is disabled".to_owned()));
        };
        Ok(match sign_in.standing(user).await? {
            Standing::Good { not_before } if created.is_some_and(|at| at < not_before) => Err(
                "this app password was made before the identity provider refused the account: make a new one".to_owned(),
            ),
            Standing::Good { .. } => Ok(()),
            Standing::Unchecked => Err("the identity provider gave kubedav no refresh token at your sign-in, so it cannot tell when your account is disabled: ask your administrator to allow offline_access".to_owned()),
            Standing::Suspended(why) => Err(format!("{why}; sign in through the file manager again")),
            Standing::Unknown => Err("sign in through the file manager once, so that kubedav can tell when your account is disabled".to_owned()),
        })
    }

    /// The app passwords, or why there are none.
    pub(super) fn app_passwords(&self) -> Result<&AppPasswords, Status> {
        self.inner.app_passwords.get().ok_or_else(|| {
            Status::failed_precondition(
                "app passwords are kept with the data: the auth service needs --fileio-url (and --secret-key) to keep them",
            )
        })
    }

    /// The keyed hash a token is cached under.
    pub(super) fn token_key(&self, token: &str) -> Key {
        let mut mac =
            <Hmac<Sha256> as KeyInit>::new_from_slice(&self.inner.key).expect("HMAC takes any key size");
        mac.update(b"bearer\0");
        mac.update(token.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// A bearer token: a kept verification while the token lives, else checked against
    /// the provider's keys. Refusals count against the client's address, as wrong
    /// passwords do, except when the provider's keys are not to be had.
    pub(super) async fn verify_bearer(&self, request: &VerifyRequest, address: &str) -> VerifyResponse {
        let key = self.token_key(&request.bearer_token);
        let keys_generation = self
            .inner
            .oidc
            .as_ref()
            .and_then(|o| o.bearer.keys().generation());
        if let Some(cache) = &self.inner.cache
            && let Some(kept) = cache.get(&key)
            && kept.expires_at > now_seconds()
            && kept.keys_generation == keys_generation
        {
            return allowed(&kept.principal, true);
        }
        let refusal = match &self.inner.oidc {
            None => Err(None),
            Some(oidc) => oidc.bearer.verify(&request.bearer_token).await.map_err(Some),
        };
        match refusal {
            Ok(verified) => {
                let principal = Arc::new(verified.principal);
                let reply = allowed(&principal, false);
                if let Some(cache) = &self.inner.cache {
                    cache.insert(
                        key,
                        Kept {
                            principal,
                            user: String::new(),
                            expires_at: verified.expires_at,
                            keys_generation: verified.keys_generation,
                        },
                    );
                }
                reply
            }
            Err(why) => {
                let (label, message) = match why {
                    Some(why) => (why.label(), why.message()),
                    None => (
                        "no_provider",
                        "bearer tokens are not accepted here: no identity provider is configured",
                    ),
                };
                VERIFICATIONS.with_label_values(&["bearer", label]).inc();
                tracing::info!(client = %request.client_address, reason = label, "bearer token refused");
                if why != Some(crate::oidc::bearer::Refusal::KeysUnavailable)
                    && !address.is_empty()
                    && self.inner.throttle_addresses.failure(address)
                {
                    LOCKOUTS.inc();
                    tracing::warn!(client = %request.client_address, "too many refused credentials: address locked out");
                }
                let mut reply = answer(Outcome::Denied, Duration::ZERO, false);
                reply.reason = message.to_owned();
                reply
            }
        }
    }
}

impl AuthCore {
    /// An app password (its shape says so): checked against its record, never cached
    /// apart from it, so a revocation is seen within the records' freshness.
    pub(super) async fn verify_app_password(
        &self,
        app_passwords: &AppPasswords,
        request: &VerifyRequest,
        address: &str,
    ) -> Result<VerifyResponse, Status> {
        let verified = match app_passwords.verify(&request.user, &request.password).await? {
            Ok((principal, kept, created)) => {
                match self.app_passwords_allowed(&request.user, Some(created)).await? {
                    Ok(()) => Ok((principal, kept)),
                    Err(why) => {
                        tracing::info!(user = %request.user, "app password refused: {why}");
                        Err(crate::app_passwords::Refused::AccountSuspended)
                    }
                }
            }
            Err(why) => Err(why),
        };
        match verified {
            Ok((principal, kept)) => {
                self.logged_in(request, address);
                Ok(allowed(&principal, kept))
            }
            Err(why) => {
                VERIFICATIONS
                    .with_label_values(&["app_password", "refused"])
                    .inc();
                tracing::info!(user = %request.user, client = %request.client_address, reason = ?why, "app password refused");
                self.failed(request, address);
                let mut reply = answer(Outcome::Denied, Duration::ZERO, false);
                reply.reason = "the user name or app password is wrong, expired or revoked".to_owned();
                Ok(reply)
            }
        }
    }

    /// A browser's session cookie. A made-up one is refused by its tag, without a read,
    /// and counts against the address like a wrong password.
    pub(super) async fn verify_session(
        &self,
        request: &VerifyRequest,
        address: &str,
    ) -> Result<VerifyResponse, Status> {
        let found = match self.inner.sign_in.get() {
            Some(sign_in) => sign_in.session(&request.session).await?,
            None => None,
        };
        if let Some((principal, kept)) = found {
            return Ok(allowed(&principal, kept));
        }
        VERIFICATIONS.with_label_values(&["session", "refused"]).inc();
        if !address.is_empty() && self.inner.throttle_addresses.failure(address) {
            LOCKOUTS.inc();
            tracing::warn!(client = %request.client_address, "too many refused credentials: address locked out");
        }
        let mut reply = answer(Outcome::Denied, Duration::ZERO, false);
        reply.reason = "the session has ended: sign in again".to_owned();
        Ok(reply)
    }
}
