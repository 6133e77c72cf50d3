//! [`Sessions`]: the browser sessions that sign-ins open, kept as records with the data
//! (area `sessions`), so every gateway and auth replica accepts every session and a
//! sign-out ends it everywhere, with nothing held only in Redis or in one process.
//!
//! A session token is `{id}.{tag}`: `id` names the record (24 random bytes), `tag` is an
//! HMAC of `id` under a key derived from the secret key. A made-up token is refused by
//! its tag before any record is read, so cookies an unauthenticated client invents cost
//! one HMAC each. The record holds who signed in, when the session ends, and the ID
//! token (the provider's `id_token_hint` at sign-out); a replica uses what it read of a
//! record for at most the freshness bound, so a sign-out elsewhere is seen within it.

use crate::app_passwords::WallClock;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kubedav_api::auth::Principal;
use kubedav_api::records::{DeleteRecordRequest, GetRecordRequest, PutRecordRequest, Records};
use moka::sync::Cache;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tonic::Status;

/// The records area sessions live in.
pub const AREA: &str = "sessions";

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
        }
    }

    fn now(&self) -> i64 {
        (self.clock)()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    }

    fn tag(&self, id: &str) -> String {
        let mac = crate::secret_key::mac(&self.key, &[b"session", id.as_bytes()]);
        URL_SAFE_NO_PAD.encode(&mac[..16])
    }

    /// The id of `token` if its tag is right.
    fn id_of<'t>(&self, token: &'t str) -> Option<&'t str> {
        let (id, tag) = token.split_once('.')?;
        if id.len() != ID_CHARS || tag.len() != TAG_CHARS {
            return None;
        }
        let expected = self.tag(id);
        bool::from(subtle::ConstantTimeEq::ct_eq(tag.as_bytes(), expected.as_bytes())).then_some(id)
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
        self.records
            .put(PutRecordRequest {
                area: AREA.into(),
                key: id.clone(),
                data: data.into(),
            })
            .await?;
        let token = format!("{id}.{}", self.tag(&id));
        Ok(token)
    }

    /// The session `token` stands for, if it is one and has not ended, and whether the
    /// record was one read lately rather than now.
    pub async fn find(&self, token: &str) -> Result<Option<(Arc<Session>, bool)>, Status> {
        let Some(id) = self.id_of(token) else {
            return Ok(None);
        };
        let (session, kept) = match self.read.get(id) {
            Some(kept) => (kept, true),
            None => {
                let found = self.records.get(get(id)).await?;
                let session = found
                    .found
                    .then(|| serde_json::from_slice::<Session>(&found.data).ok().map(Arc::new))
                    .flatten();
                self.read.insert(id.to_owned(), session.clone());
                (session, false)
            }
        };
        Ok(session.filter(|s| s.expires_at > self.now()).map(|s| (s, kept)))
    }

    /// Ends the session of `token` everywhere; answers it if there was one.
    pub async fn end(&self, token: &str) -> Result<Option<Arc<Session>>, Status> {
        let found = self.find(token).await?;
        if let Some(id) = self.id_of(token) {
            self.records
                .delete(DeleteRecordRequest {
                    area: AREA.into(),
                    key: id.to_owned(),
                })
                .await?;
            self.read.invalidate(id);
        }
        Ok(found.map(|(session, _)| session))
    }
}

fn get(id: &str) -> GetRecordRequest {
    GetRecordRequest {
        area: AREA.into(),
        key: id.into(),
    }
}
