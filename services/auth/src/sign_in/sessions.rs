//! [`Sessions`]: the browser sessions that sign-ins open, kept as records with the data
//! (area `sessions`), so every gateway and auth replica accepts every session and a
//! sign-out ends it everywhere, with nothing held only in Redis or in one process.
//!
//! A session token is `{hour}.{id}.{tag}`: `hour` is the hour the session ends (hours
//! since the epoch), `id` 24 random bytes, `tag` an HMAC of both under a key derived
//! from the secret key. A made-up token is refused by its tag before any record is
//! read, so cookies an unauthenticated client invents cost one HMAC each. The record,
//! `{hour}/{id}`, holds who signed in, when the session ends, and the ID token (the
//! provider's `id_token_hint` at sign-out); a replica uses what it read of a record for
//! at most the freshness bound, so a sign-out elsewhere is seen within it. Sessions are
//! filed by the hour they end so that ended ones are swept an hour's folder at a time
//! ([`Sessions::sweep`]), never by reading every session.

use crate::app_passwords::WallClock;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kubedav_api::auth::Principal;
use kubedav_api::records::{Area, Records};
use moka::sync::Cache;
use std::sync::Arc;
use std::time::Duration;
use tonic::Status;

/// The records area sessions live in.
pub const AREA: &str = "sessions";

/// Its records.
const RECORDS: Area = Area(AREA);

/// Length of a session id (base64url of 24 bytes).
const ID_CHARS: usize = 32;

/// Length of a token's tag (base64url of 16 bytes of the HMAC).
const TAG_CHARS: usize = 22;

/// One session as stored.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Session {
    /// Who signed in.
    pub user: String,
    /// Their name to show.
    pub display_name: String,
    /// Their groups, as the provider said at sign-in.
    pub groups: Vec<String>,
    /// When (seconds since the epoch).
    pub created: i64,
    /// When it ends (seconds since the epoch).
    pub expires_at: i64,
    /// The ID token of the sign-in, for the provider's end-session endpoint.
    pub id_token: String,
}

impl Session {
    /// The principal a request with this session is made by.
    pub fn principal(&self) -> Principal {
        Principal {
            user: self.user.clone(),
            display_name: self.display_name.clone(),
            groups: self.groups.clone(),
            read_only: false,
            path_prefix: String::new(),
            kind: "session".to_owned(),
            credential_id: String::new(),
        }
    }
}

/// The sessions of every user. Cheap to clone.
#[derive(Clone)]
pub struct Sessions {
    records: Arc<dyn Records>,
    key: [u8; 32],
    clock: WallClock,
    /// What was read of each record: id to the session, or `None` when there was none.
    read: Cache<String, Option<Arc<Session>>>,
    /// The last hour whose ended sessions were swept.
    swept_through: Arc<std::sync::Mutex<Option<i64>>>,
}

impl Sessions {
    /// Sessions kept in `records`, their tokens tagged under `key`; a replica reads a
    /// record again after `freshness`.
    pub fn new(records: Arc<dyn Records>, key: [u8; 32], freshness: Duration, clock: WallClock) -> Self {
        Self {
            records,
            key,
            clock,
            read: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(freshness)
                .build(),
            swept_through: Arc::default(),
        }
    }

    fn now(&self) -> i64 {
        crate::app_passwords::seconds(&self.clock)
    }

    fn tag(&self, hour: &str, id: &str) -> String {
        let mac = crate::secret_key::mac(&self.key, &[b"session", hour.as_bytes(), id.as_bytes()]);
        URL_SAFE_NO_PAD.encode(&mac[..16])
    }

    /// The record key (`{hour}/{id}`) of `token` if its tag is right.
    fn key_of(&self, token: &str) -> Option<String> {
        let mut parts = token.split('.');
        let (Some(hour), Some(id), Some(tag), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        if hour.is_empty() || hour.len() > 12 || !hour.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if id.len() != ID_CHARS || tag.len() != TAG_CHARS {
            return None;
        }
        let expected = self.tag(hour, id);
        bool::from(subtle::ConstantTimeEq::ct_eq(tag.as_bytes(), expected.as_bytes()))
            .then(|| format!("{hour}/{id}"))
    }

    /// Opens a session for `principal` that lasts `lifetime`; answers its token.
    pub async fn open(
        &self,
        principal: &Principal,
        id_token: &str,
        lifetime: Duration,
    ) -> Result<String, Status> {
        let id = super::flow::random_text(24).map_err(Status::internal)?;
        let now = self.now();
        let session = Session {
            user: principal.user.clone(),
            display_name: principal.display_name.clone(),
            groups: principal.groups.clone(),
            created: now,
            expires_at: now + lifetime.as_secs() as i64,
            id_token: id_token.to_owned(),
        };
        let data = serde_json::to_vec(&session).map_err(|e| Status::internal(e.to_string()))?;
        let hour = (session.expires_at / 3600 + 1).to_string();
        self.records
            .put(RECORDS.put(&format!("{hour}/{id}"), data))
            .await?;
        Ok(format!("{hour}.{id}.{}", self.tag(&hour, &id)))
    }

    /// The session `token` stands for, if it is one and has not ended, and whether the
    /// record was one read lately rather than now.
    pub async fn find(&self, token: &str) -> Result<Option<(Arc<Session>, bool)>, Status> {
        let Some(key) = self.key_of(token) else {
            return Ok(None);
        };
        let (session, kept) = match self.read.get(&key) {
            Some(kept) => (kept, true),
            None => {
                let found = self.records.get(RECORDS.get(&key)).await?;
                let session = found
                    .found
                    .then(|| serde_json::from_slice::<Session>(&found.data).ok().map(Arc::new))
                    .flatten();
                self.read.insert(key, session.clone());
                (session, false)
            }
        };
        Ok(session.filter(|s| s.expires_at > self.now()).map(|s| (s, kept)))
    }

    /// Ends the session of `token` everywhere; answers it if there was one.
    pub async fn end(&self, token: &str) -> Result<Option<Arc<Session>>, Status> {
        let found = self.find(token).await?;
        if let Some(key) = self.key_of(token) {
            self.records.delete(RECORDS.delete(&key)).await?;
            self.read.invalidate(&key);
        }
        Ok(found.map(|(session, _)| session))
    }

    /// Deletes the records of sessions that have ended: the folders of the hours past
    /// since the last sweep (at the first, of the last `back` hours: sessions that ended
    /// while no replica ran). Answers how many were deleted.
    pub async fn sweep(&self, back: Duration) -> Result<usize, Status> {
        let now_hour = self.now() / 3600;
        let from = match *self.swept_through.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(hour) => hour + 1,
            None => now_hour - (back.as_secs() / 3600) as i64 - 1,
        };
        let mut swept = 0;
        for hour in from..=now_hour {
            let folder = hour.to_string();
            for id in self.records.list(RECORDS.list(&folder)).await?.names {
                self.records
                    .delete(RECORDS.delete(&format!("{folder}/{id}")))
                    .await?;
                swept += 1;
            }
            *self.swept_through.lock().unwrap_or_else(|p| p.into_inner()) = Some(hour);
        }
        Ok(swept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::SystemTime;

    #[tokio::test]
    async fn a_session_is_found_by_its_token_until_it_ends_and_then_swept() {
        let dir = tempfile::tempdir().unwrap();
        let fileio = kubedav_fileio::LocalFileIo::open(dir.path()).unwrap();
        let now = Arc::new(Mutex::new(
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        ));
        let clock = now.clone();
        let sessions = Sessions::new(
            Arc::new(fileio.records()),
            [9; 32],
            Duration::ZERO,
            Arc::new(move || *clock.lock().unwrap()),
        );
        let alice = Principal {
            user: "oidc-alice".into(),
            ..Default::default()
        };
        let token = sessions
            .open(&alice, "id-token", Duration::from_secs(3600))
            .await
            .unwrap();
        let (found, _) = sessions.find(&token).await.unwrap().unwrap();
        assert_eq!(found.user, "oidc-alice");
        // A changed tag, hour or id: refused without a read.
        let (hour, rest) = token.split_once('.').unwrap();
        for forged in [
            format!("{}.{rest}", hour.parse::<i64>().unwrap() + 1),
            token.replacen('.', "0.", 1),
            format!("{token}x"),
            format!("{hour}.{}", rest.replace(|c: char| c.is_ascii_lowercase(), "a")),
        ] {
            assert!(sessions.find(&forged).await.unwrap().is_none(), "{forged}");
        }
        assert_eq!(
            sessions.sweep(Duration::from_secs(3600)).await.unwrap(),
            0,
            "a live session is kept"
        );
        *now.lock().unwrap() += Duration::from_secs(3600);
        assert!(sessions.find(&token).await.unwrap().is_none(), "ended");
        *now.lock().unwrap() += Duration::from_secs(2 * 3600);
        assert_eq!(sessions.sweep(Duration::from_secs(3600)).await.unwrap(), 1);
        assert_eq!(sessions.sweep(Duration::from_secs(3600)).await.unwrap(), 0);
    }
}
