//! [`Accounts`]: what kubedav knows of each identity provider user's account, so that
//! their app passwords and sessions stop working soon after the account is disabled or
//! deleted at the provider.
//!
//! At each browser sign-in the provider hands out a refresh token (with the
//! `offline_access` scope). kubedav keeps it, encrypted (ChaCha20-Poly1305 under a key
//! derived from the secret key, the user id as associated data), in a record of the
//! `idp-accounts` area, and uses it every check period: while the provider answers with
//! new tokens the account is in good standing; when it answers `invalid_grant` (the
//! account disabled or deleted, the grant revoked, the refresh token expired) the
//! account is suspended, and its app passwords and sessions are refused until the user
//! signs in again. An unreachable provider suspends nothing: app passwords keep working
//! while the provider is down.
//!
//! Replicas share the records: each checks the accounts whose last check is older than
//! the period, and a replica that gets `invalid_grant` for a token another replica has
//! just replaced (a provider that rotates refresh tokens) reads the record again before
//! suspending anything.

use crate::app_passwords::{WallClock, user_folder};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kubedav_api::records::{Area, Records};
use moka::sync::Cache;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use std::sync::Arc;
use std::time::Duration;
use tonic::Status;

/// The records area accounts live in.
pub const AREA: &str = "idp-accounts";

/// Its records.
const RECORDS: Area = Area(AREA);

/// Accounts checked at once, each a call to the provider.
pub const CONCURRENT_CHECKS: usize = 8;

/// How long a replica refused by the provider waits before it looks at the record again
/// (another replica may be storing the token the provider rotated to).
pub const RACE_GRACE: Duration = Duration::from_millis(500);

/// One account as stored.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Account {
    /// The user id.
    pub user: String,
    /// The refresh token, encrypted: base64url of nonce and ciphertext; empty when the
    /// provider gave none.
    pub refresh: String,
    /// When the account was last found in good standing (seconds since the epoch).
    pub checked_at: i64,
    /// Why it is suspended, if it is.
    pub suspended: Option<String>,
    /// Sessions and app passwords made before this time (seconds since the epoch) are
    /// refused: set when the account is suspended, and kept when the user signs in
    /// again, so that nothing made before the provider refused the account (by an
    /// attacker, say) comes back with the next sign-in.
    #[serde(default)]
    pub not_before: i64,
}

/// What an account's record says of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Checked and in good standing; what was made before `not_before` (seconds since
    /// the epoch) is refused all the same.
    Good {
        /// See [`Account::not_before`].
        not_before: i64,
    },
    /// Signed in, but the provider gave no refresh token: kubedav cannot tell when the
    /// account is disabled, so its app passwords are refused.
    Unchecked,
    /// The provider refused its refresh token: why.
    Suspended(String),
    /// No sign-in through the browser yet: kubedav cannot tell.
    Unknown,
}

/// What a refresh at the provider said.
pub enum Refreshed {
    /// New tokens: the new refresh token, if the provider rotated it.
    Good(Option<String>),
    /// `invalid_grant`: the account or its grant is gone.
    Refused(String),
    /// No answer kubedav can act on (the provider down): nothing changes.
    Unanswered(String),
}

/// The accounts of the provider's users. Cheap to clone.
#[derive(Clone)]
pub struct Accounts {
    records: Arc<dyn Records>,
    key: Arc<LessSafeKey>,
    clock: WallClock,
    read: Cache<String, Option<Arc<Account>>>,
}

impl Accounts {
    /// Accounts kept in `records`, refresh tokens encrypted under `key`; a replica reads
    /// a record again after `freshness`.
    pub fn new(records: Arc<dyn Records>, key: [u8; 32], freshness: Duration, clock: WallClock) -> Self {
        let key = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &key).expect("a 32-byte key"));
        Self {
            records,
            key: Arc::new(key),
            clock,
            read: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(freshness)
                .build(),
        }
    }

    fn now(&self) -> i64 {
        crate::app_passwords::seconds(&self.clock)
    }

    /// Records a sign-in of `user`: in good standing, with the refresh token it brought.
    pub async fn signed_in(&self, user: &str, refresh_token: Option<&str>) -> Result<(), Status> {
        let refresh = match refresh_token {
            Some(token) => self.seal(user, token)?,
            None => String::new(),
        };
        let not_before = self
            .fetch(&user_folder(user))
            .await?
            .map_or(0, |before| before.not_before);
        self.write(&Account {
            user: user.to_owned(),
            refresh,
            checked_at: self.now(),
            suspended: None,
            not_before,
        })
        .await
    }

    /// The standing of `user`'s account, as read within the freshness bound.
    pub async fn standing(&self, user: &str) -> Result<Standing, Status> {
        let account = match self.read.get(user) {
            Some(kept) => kept,
            None => {
                let account = self.fetch(&user_folder(user)).await?;
                self.read.insert(user.to_owned(), account.clone());
                account
            }
        };
        Ok(match account {
            None => Standing::Unknown,
            Some(account) => match &account.suspended {
                Some(why) => Standing::Suspended(why.clone()),
                None if account.refresh.is_empty() => Standing::Unchecked,
                None => Standing::Good {
                    not_before: account.not_before,
                },
            },
        })
    }

    /// Checks every account last checked more than `period` ago with `refresh`, which
    /// asks the provider for new tokens, [`CONCURRENT_CHECKS`] at a time. An account that
    /// cannot be checked (its record unreadable, the provider's answer unusable) is
    /// logged and left for the next pass; the others are checked all the same.
    pub async fn check_due<F, Fut>(&self, period: Duration, refresh: F) -> Result<(), Status>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Refreshed>,
    {
        use futures_util::StreamExt;
        let names = self.records.list(RECORDS.list("")).await?.names;
        futures_util::stream::iter(names)
            .for_each_concurrent(CONCURRENT_CHECKS, |name| {
                let refresh = &refresh;
                async move {
                    if let Err(e) = self.check_one(&name, period, refresh).await {
                        tracing::warn!(target: "kubedav", account = %name, "an account was not checked: {}", e.message());
                    }
                }
            })
            .await;
        Ok(())
    }

    async fn check_one<F, Fut>(&self, name: &str, period: Duration, refresh: &F) -> Result<(), Status>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Refreshed>,
    {
        let Some(account) = self.fetch(name).await? else {
            return Ok(());
        };
        let due = account.checked_at + period.as_secs() as i64 <= self.now();
        if !due || account.suspended.is_some() || account.refresh.is_empty() {
            return Ok(());
        }
        let Some(token) = self.open(&account.user, &account.refresh) else {
            tracing::error!(target: "kubedav", user = %account.user, "an account's refresh token cannot be decrypted (was --secret-key changed?); the account is suspended until the user signs in again");
            return self
                .suspend(&account, "kubedav cannot read its refresh token: sign in again")
                .await;
        };
        let outcome = refresh(token).await;
        // What another replica or a sign-in wrote meanwhile wins: only the record as it
        // was read is replaced.
        let now = self.fetch(name).await?;
        if now
            .as_ref()
            .is_none_or(|a| a.refresh != account.refresh || a.suspended.is_some())
        {
            return Ok(());
        }
        match outcome {
            Refreshed::Good(rotated) => {
                let mut checked = (*account).clone();
                checked.checked_at = self.now();
                if let Some(rotated) = rotated {
                    checked.refresh = self.seal(&account.user, &rotated)?;
                }
                self.write(&checked).await
            }
            Refreshed::Refused(why) => {
                // A replica that used the same token a moment before may be writing the
                // one the provider rotated to: look again after it had time to.
                tokio::time::sleep(RACE_GRACE).await;
                let again = self.fetch(name).await?;
                if again.as_ref().is_none_or(|a| a.refresh != account.refresh) {
                    return Ok(());
                }
                tracing::warn!(target: "kubedav", user = %account.user, "the identity provider refused the account's refresh token ({why}): its app passwords and sessions stop until the user signs in again, and those made before stay refused");
                crate::metrics::ACCOUNTS_SUSPENDED.inc();
                self.suspend(
                    &account,
                    &format!("the identity provider refused the account: {why}"),
                )
                .await
            }
            Refreshed::Unanswered(why) => {
                tracing::warn!(target: "kubedav", user = %account.user, "the account could not be checked: {why}; it keeps its standing");
                Ok(())
            }
        }
    }

    async fn suspend(&self, account: &Account, why: &str) -> Result<(), Status> {
        let mut suspended = account.clone();
        suspended.suspended = Some(why.to_owned());
        suspended.refresh = String::new();
        suspended.not_before = self.now() + 1;
        self.write(&suspended).await
    }

    async fn fetch(&self, name: &str) -> Result<Option<Arc<Account>>, Status> {
        let found = self.records.get(RECORDS.get(name)).await?;
        Ok(found
            .found
            .then(|| serde_json::from_slice::<Account>(&found.data).ok().map(Arc::new))
            .flatten())
    }

    async fn write(&self, account: &Account) -> Result<(), Status> {
        let data = serde_json::to_vec(account).map_err(|e| Status::internal(e.to_string()))?;
        self.records
            .put(RECORDS.put(&user_folder(&account.user), data))
            .await?;
        self.read.invalidate(&account.user);
        Ok(())
    }

    /// Encrypts `token` for `user`'s record.
    fn seal(&self, user: &str, token: &str) -> Result<String, Status> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| Status::internal(format!("no randomness: {e}")))?;
        let mut data = token.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(user.as_bytes()),
                &mut data,
            )
            .map_err(|_| Status::internal("the refresh token could not be encrypted"))?;
        Ok(URL_SAFE_NO_PAD.encode([nonce.as_slice(), &data].concat()))
    }

    /// Decrypts a refresh token of `user`'s record.
    fn open(&self, user: &str, sealed: &str) -> Option<String> {
        let bytes = URL_SAFE_NO_PAD.decode(sealed).ok()?;
        if bytes.len() < NONCE_LEN {
            return None;
        }
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let mut data = data.to_vec();
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(user.as_bytes()), &mut data)
            .ok()?;
        String::from_utf8(plain.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn accounts(dir: &std::path::Path, key: u8) -> Accounts {
        let fileio = kubedav_fileio::LocalFileIo::open(dir).unwrap();
        Accounts::new(
            Arc::new(fileio.records()),
            [key; 32],
            Duration::from_secs(1),
            Arc::new(SystemTime::now),
        )
    }

    #[test]
    fn a_refresh_token_is_kept_encrypted_and_bound_to_its_user() {
        let dir = tempfile::tempdir().unwrap();
        let accounts = accounts(dir.path(), 3);
        let sealed = accounts.seal("oidc-alice", "refresh-me").unwrap();
        assert!(!sealed.contains("refresh-me"));
        assert_eq!(
            accounts.open("oidc-alice", &sealed).as_deref(),
            Some("refresh-me")
        );
        assert_eq!(accounts.open("oidc-mallory", &sealed), None);
        assert_eq!(self::accounts(dir.path(), 4).open("oidc-alice", &sealed), None);
    }

    #[tokio::test]
    async fn a_refused_refresh_suspends_the_account_and_a_sign_in_restores_it() {
        let dir = tempfile::tempdir().unwrap();
        let accounts = accounts(dir.path(), 3);
        assert_eq!(accounts.standing("oidc-alice").await.unwrap(), Standing::Unknown);
        accounts.signed_in("oidc-alice", Some("r1")).await.unwrap();
        assert!(matches!(
            accounts.standing("oidc-alice").await.unwrap(),
            Standing::Good { .. }
        ));
        // Not due yet: the provider is not asked.
        accounts
            .check_due(Duration::from_secs(3600), |_| async { panic!("asked too early") })
            .await
            .unwrap();
        // Down: nothing changes.
        accounts
            .check_due(Duration::ZERO, |_| async { Refreshed::Unanswered("down".into()) })
            .await
            .unwrap();
        assert!(matches!(
            accounts.standing("oidc-alice").await.unwrap(),
            Standing::Good { .. }
        ));
        // Rotated: the new token is the one used next.
        accounts
            .check_due(Duration::ZERO, |token| async move {
                assert_eq!(token, "r1");
                Refreshed::Good(Some("r2".into()))
            })
            .await
            .unwrap();
        accounts
            .check_due(Duration::ZERO, |token| async move {
                assert_eq!(token, "r2");
                Refreshed::Refused("invalid_grant".into())
            })
            .await
            .unwrap();
        assert!(matches!(
            accounts.standing("oidc-alice").await.unwrap(),
            Standing::Suspended(_)
        ));
        accounts.signed_in("oidc-alice", Some("r3")).await.unwrap();
        // Good again, but what was made before the suspension stays refused.
        let Standing::Good { not_before } = accounts.standing("oidc-alice").await.unwrap() else {
            panic!("not in good standing after a sign-in");
        };
        assert!(not_before > 0);
        // A sign-in without a refresh token: kubedav cannot check the account.
        accounts.signed_in("oidc-bob", None).await.unwrap();
        assert_eq!(accounts.standing("oidc-bob").await.unwrap(), Standing::Unchecked);
    }
}
