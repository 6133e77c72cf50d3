//! [`AppPasswords`]: making, listing, revoking and verifying app passwords over the
//! records port.

use super::secret;
use crate::secret_key::SecretKey;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use kubedav_api::auth::{AppPassword, AppPasswordCreated, CreateAppPasswordRequest, Principal};
use kubedav_api::records::{Area, Records};
use moka::sync::Cache;
use sha2::Sha256;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tonic::Status;

/// The records area app passwords live in.
pub const AREA: &str = "app-passwords";

/// Its records.
const RECORDS: Area = Area(AREA);

/// Most app passwords one user may hold.
pub const MAX_PER_USER: usize = 100;

/// Longest name of an app password, in characters.
pub const MAX_NAME_CHARS: usize = 100;

/// The time as app passwords read it (expiry, creation, last use): the system's, or a
/// test's.
pub use kubedav_kit::clock::WallClock;

/// Seconds since the epoch by `clock`.
pub fn seconds(clock: &WallClock) -> i64 {
    clock()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Settings of the app passwords.
#[derive(Clone)]
pub struct AppPasswordsConfig {
    /// The secret their hashes' key is derived from (`--secret-key`); `None`: a secret
    /// made once and kept with the data, as a record ([`KEPT_SECRET`]), made the first
    /// time an app password is made or checked (all-in-one without `--secret-key`).
    pub secret: Option<Vec<u8>>,
    /// How long a replica uses what it read of a record before reading it again: the
    /// bound on how late a revocation made elsewhere is seen.
    pub freshness: Duration,
    /// How often the time of last use is written, at most, per app password.
    pub last_used_every: Duration,
    /// The clock.
    pub clock: WallClock,
}

/// One app password as stored: no secret, only its keyed hash.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Stored {
    id: String,
    user: String,
    display_name: String,
    groups: Vec<String>,
    name: String,
    /// Hex of HMAC-SHA-256(key, password).
    hash: String,
    /// Seconds since the epoch.
    created: i64,
    /// Seconds since the epoch; `None`: never.
    expires_at: Option<i64>,
    /// "read" or "write".
    permission: String,
    /// A volume path, or "".
    path: String,
}

/// When an app password was last used, kept beside it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Used {
    at: i64,
}

/// Why an app password was not accepted (all answered alike to the client).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No such app password for this user, or the secret is wrong.
    Unknown,
    /// It has expired.
    Expired,
    /// Its owner's identity provider account is disabled, or cannot be checked.
    AccountSuspended,
}

/// The app passwords of every user. Cheap to clone.
#[derive(Clone)]
pub struct AppPasswords {
    records: Arc<dyn Records>,
    config: AppPasswordsConfig,
    /// The secret the key comes from.
    secret_key: SecretKey,
    /// The key hashes are made under, once known.
    key: Arc<tokio::sync::OnceCell<[u8; 32]>>,
    /// What was read of each record, for [`AppPasswordsConfig::freshness`]:
    /// `(user, id)` to the record, or `None` when there was none.
    read: Cache<(String, String), Option<Arc<Stored>>>,
    /// App passwords whose last use was written lately.
    used_written: Cache<String, ()>,
}

impl AppPasswords {
    /// App passwords kept in `records`.
    pub fn new(records: Arc<dyn Records>, config: AppPasswordsConfig) -> Self {
        Self {
            secret_key: SecretKey::new(records.clone(), config.secret.clone()),
            records,
            key: Arc::default(),
            read: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(config.freshness)
                .build(),
            used_written: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(config.last_used_every)
                .build(),
            config,
        }
    }

    fn now(&self) -> i64 {
        seconds(&self.config.clock)
    }

    async fn hash(&self, password: &str) -> Result<String, Status> {
        let key = self
            .key
            .get_or_try_init(|| self.secret_key.derive("kubedav app passwords v1"))
            .await?;
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key size");
        mac.update(password.as_bytes());
        Ok(hex(&mac.finalize().into_bytes()))
    }

    /// The secret this store's keys come from, for the other uses of it (sessions).
    pub fn secret_key(&self) -> SecretKey {
        self.secret_key.clone()
    }

    /// How long what was read of a record is used.
    pub fn freshness(&self) -> Duration {
        self.config.freshness
    }

    /// The clock.
    pub fn clock(&self) -> WallClock {
        self.config.clock.clone()
    }

    /// The records it keeps app passwords in.
    pub fn records(&self) -> Arc<dyn Records> {
        self.records.clone()
    }

    /// Makes an app password for `request.owner`.
    pub async fn create(&self, request: CreateAppPasswordRequest) -> Result<AppPasswordCreated, Status> {
        let owner = request
            .owner
            .ok_or_else(|| Status::invalid_argument("an app password needs an owner"))?;
        if owner.user.is_empty() {
            return Err(Status::permission_denied("sign in to make app passwords"));
        }
        if owner.kind == "app-password" {
            return Err(Status::permission_denied(
                "an app password cannot make app passwords: sign in with your password, the identity provider or a bearer token",
            ));
        }
        let name = request.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
            return Err(Status::invalid_argument(format!(
                "name the app password (1 to {MAX_NAME_CHARS} characters, no control characters), e.g. \"Laptop, davfs2\""
            )));
        }
        let permission = match request.permission.as_str() {
            "read" | "write" => request.permission.clone(),
            "" => "write".to_owned(),
            other => {
                return Err(Status::invalid_argument(format!(
                    "permission {other:?}: give \"read\" or \"write\""
                )));
            }
        };
        if owner.read_only && permission == "write" {
            return Err(Status::permission_denied(
                "you may only read, so your app passwords may only read",
            ));
        }
        let path = scope_path(&request.path)?;
        if !owner.path_prefix.is_empty() && !within(&path, &owner.path_prefix) {
            return Err(Status::permission_denied(format!(
                "you may only reach /{}",
                owner.path_prefix
            )));
        }
        let now = self.now();
        let expires_at = match request.expires_at.trim() {
            "" => None,
            text => {
                let at: jiff::Timestamp = text.parse().map_err(|e| {
                    Status::invalid_argument(format!("expires_at {text:?} is not an RFC 3339 time: {e}"))
                })?;
                if at.as_second() <= now {
                    return Err(Status::invalid_argument(
                        "expires_at is in the past: give a time to come",
                    ));
                }
                Some(at.as_second())
            }
        };
        let folder = user_folder(&owner.user);
        let held = self.records.list(RECORDS.list(&folder)).await?.names;
        if held.iter().filter(|n| secret::is_id(n)).count() >= MAX_PER_USER {
            return Err(Status::resource_exhausted(format!(
                "you hold {MAX_PER_USER} app passwords, the most one may: revoke some first"
            )));
        }
        let id = secret::new_id().map_err(Status::internal)?;
        let password = secret::new_password(&id).map_err(Status::internal)?;
        let stored = Stored {
            id: id.clone(),
            user: owner.user.clone(),
            display_name: owner.display_name.clone(),
            groups: owner.groups.clone(),
            name: name.to_owned(),
            hash: self.hash(&password).await?,
            created: now,
            expires_at,
            permission,
            path,
        };
        let data = serde_json::to_vec(&stored).map_err(|e| Status::internal(e.to_string()))?;
        self.records
            .put(RECORDS.put(&format!("{folder}/{id}"), data))
            .await?;
        self.read.invalidate(&(stored.user.clone(), id));
        crate::metrics::APP_PASSWORDS
            .with_label_values(&["created"])
            .inc();
        tracing::info!(target: "kubedav", user = %stored.user, id = %stored.id, "app password made");
        Ok(AppPasswordCreated {
            app_password: Some(shown(&stored, None)),
            password,
        })
    }

    /// `user`'s app passwords, oldest first.
    pub async fn list(&self, user: &str) -> Result<Vec<AppPassword>, Status> {
        let folder = user_folder(user);
        let names = self.records.list(RECORDS.list(&folder)).await?.names;
        let mut shown_all = Vec::new();
        for id in names.iter().filter(|n| secret::is_id(n)) {
            let (Some(stored), _) = self.fetch(user, id).await? else {
                continue;
            };
            let used = self.last_used(&folder, id).await?;
            shown_all.push((stored.created, shown(&stored, used)));
        }
        shown_all.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
        Ok(shown_all.into_iter().map(|(_, shown)| shown).collect())
    }

    /// Revokes `user`'s app password `id`; NOT_FOUND when there is none.
    pub async fn revoke(&self, user: &str, id: &str) -> Result<(), Status> {
        let folder = user_folder(user);
        let absent = || Status::not_found(format!("you have no app password {id}"));
        if !secret::is_id(id) {
            return Err(absent());
        }
        let key = format!("{folder}/{id}");
        let found = self.records.get(RECORDS.get(&key)).await?;
        if !found.found {
            return Err(absent());
        }
        self.records.delete(RECORDS.delete(&key)).await?;
        self.records
            .delete(RECORDS.delete(&format!("{key}.used")))
            .await?;
        self.read.invalidate(&(user.to_owned(), id.to_owned()));
        crate::metrics::APP_PASSWORDS
            .with_label_values(&["revoked"])
            .inc();
        tracing::info!(target: "kubedav", user, id, "app password revoked");
        Ok(())
    }

    /// The principal `password` stands for when it is one of `user`'s app passwords,
    /// whether its record was one read lately (kept) rather than read now, and when it
    /// was made (seconds since the epoch).
    pub async fn verify(
        &self,
        user: &str,
        password: &str,
    ) -> Result<Result<(Principal, bool, i64), Refused>, Status> {
        let Some(id) = secret::id_of(password) else {
            return Ok(Err(Refused::Unknown));
        };
        let (Some(stored), kept) = self.fetch(user, id).await? else {
            return Ok(Err(Refused::Unknown));
        };
        let hash = self.hash(password).await?;
        let matches: bool = subtle::ConstantTimeEq::ct_eq(hash.as_bytes(), stored.hash.as_bytes()).into();
        if !matches || stored.user != user {
            return Ok(Err(Refused::Unknown));
        }
        let now = self.now();
        if stored.expires_at.is_some_and(|at| at <= now) {
            return Ok(Err(Refused::Expired));
        }
        if self.used_written.get(&stored.id).is_none() {
            self.used_written.insert(stored.id.clone(), ());
            self.write_last_use(&user_folder(user), &stored.id, now);
        }
        let principal = Principal {
            user: stored.user.clone(),
            display_name: stored.display_name.clone(),
            groups: stored.groups.clone(),
            read_only: stored.permission == "read",
            path_prefix: stored.path.clone(),
            kind: "app-password".to_owned(),
            credential_id: stored.id.clone(),
        };
        Ok(Ok((principal, kept, stored.created)))
    }

    /// `user`'s record of `id`, as read within the freshness bound, and whether it was
    /// kept (read lately) rather than read now.
    async fn fetch(&self, user: &str, id: &str) -> Result<(Option<Arc<Stored>>, bool), Status> {
        let cache_key = (user.to_owned(), id.to_owned());
        if let Some(kept) = self.read.get(&cache_key) {
            return Ok((kept, true));
        }
        let folder = user_folder(user);
        let found = self.records.get(RECORDS.get(&format!("{folder}/{id}"))).await?;
        let stored = if found.found {
            match serde_json::from_slice::<Stored>(&found.data) {
                Ok(stored) => Some(Arc::new(stored)),
                Err(e) => {
                    tracing::error!(target: "kubedav", user, id, "an app password's record is unreadable ({e}); it is refused");
                    None
                }
            }
        } else {
            None
        };
        self.read.insert(cache_key, stored.clone());
        Ok((stored, false))
    }

    async fn last_used(&self, folder: &str, id: &str) -> Result<Option<i64>, Status> {
        let found = self
            .records
            .get(RECORDS.get(&format!("{folder}/{id}.used")))
            .await?;
        Ok(found
            .found
            .then(|| serde_json::from_slice::<Used>(&found.data).ok().map(|u| u.at))
            .flatten())
    }

    /// Writes the time of last use in the background (a failure only loses that time).
    fn write_last_use(&self, folder: &str, id: &str, at: i64) {
        let records = self.records.clone();
        let key = format!("{folder}/{id}.used");
        let data = serde_json::to_vec(&Used { at }).unwrap_or_default();
        tokio::spawn(async move {
            let put = RECORDS.put(&key, data);
            if let Err(e) = records.put(put).await {
                tracing::warn!(target: "kubedav", "the last use of an app password was not recorded: {}", e.message());
            }
        });
    }
}

/// The folder of `user`'s app passwords: the id in base64url (the records' alphabet),
/// or a hash of it when that would be longer than a name may be.
pub(crate) fn user_folder(user: &str) -> String {
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(user.as_bytes());
    if encoded.len() <= 200 {
        format!("u{encoded}")
    } else {
        use sha2::Digest;
        format!("h{}", hex(&Sha256::digest(user.as_bytes())))
    }
}

/// The scope path given at creation, as a volume path ("" for everything).
fn scope_path(given: &str) -> Result<String, Status> {
    let trimmed = given.trim().trim_matches('/');
    kubedav_api::path::VolumePath::parse(trimmed)
        .map(|path| path.as_str().to_owned())
        .map_err(|e| Status::invalid_argument(format!("path {given:?}: {e}")))
}

/// Whether `path` is `prefix` or lies beneath it.
fn within(path: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn shown(stored: &Stored, used: Option<i64>) -> AppPassword {
    let time = |seconds: i64| {
        jiff::Timestamp::from_second(seconds)
            .map(|t| t.to_string())
            .unwrap_or_default()
    };
    AppPassword {
        id: stored.id.clone(),
        username: stored.user.clone(),
        name: stored.name.clone(),
        created: time(stored.created),
        last_used: used.map(time).unwrap_or_default(),
        expires_at: stored.expires_at.map(time).unwrap_or_default(),
        permission: stored.permission.clone(),
        path: stored.path.clone(),
    }
}

fn hex(bytes: &[u8]) -> String {
    // Two table lookups a byte: every app password's use makes one of these.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}
