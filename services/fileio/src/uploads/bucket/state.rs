//! An upload's state in the bucket: one small object, `state.json`, beside the upload's
//! other objects, replaced whole and only conditionally (If-Match on the ETag it was read
//! with), so two replicas never both change one upload. A request that changes the
//! upload holds a lease written into it, renewed while it runs: a second request meets
//! the lease (ABORTED), and a replica that died holding one loses it after
//! [`LEASE_FOR`].

use super::super::{Record, UploadSettings, not_found, owner_key};
use crate::s3::S3Client;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tonic::Status;

/// How long a lease holds without renewal: a replica killed during a request blocks
/// its upload this long at most (a client's retries outlast it: tus-js-client's take
/// 9 s).
pub(super) const LEASE_FOR_NS: i64 = 8_000_000_000;
/// How often a request renews its lease.
pub(super) const RENEW_AFTER_NS: i64 = 2_000_000_000;

/// The state of an upload in a bucket.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct State {
    /// What every backend keeps.
    pub(super) record: Record,
    /// The key the upload's multipart upload makes.
    pub(super) key: String,
    /// The S3 id of that multipart upload.
    pub(super) multipart: String,
    /// The ETags of the parts counted, part `n` at `n - 1`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) parts: Vec<String>,
    /// The bytes in those parts.
    #[serde(default)]
    pub(super) in_parts: u64,
    /// The bytes after them, kept in the buffer object until a part is full.
    #[serde(default)]
    pub(super) buffered: u64,
    /// Whether the multipart upload completed (to the upload's own key, before it was
    /// checked and copied to its file): the bytes are one object now.
    #[serde(default)]
    pub(super) whole: bool,
    /// The request changing the upload, if one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) lease: Option<Lease>,
}

/// A request's hold on an upload.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(super) struct Lease {
    /// Who holds it (random per request).
    pub(super) holder: String,
    /// Until when, in nanoseconds since the epoch by the uploads' clock.
    pub(super) until_unix_ns: i64,
}

/// Where one upload's objects are: `{base}{owner key}/{id}/`.
#[derive(Clone, Debug)]
pub(super) struct Folder(pub String);

impl Folder {
    pub(super) fn of(base: &str, owner: &str, id: &str) -> Self {
        Self(format!("{base}{}/{id}/", owner_key(owner)))
    }

    pub(super) fn state(&self) -> String {
        format!("{}state.json", self.0)
    }

    /// The key the bytes go to when the upload has no target of its own yet.
    pub(super) fn own_data(&self) -> String {
        format!("{}data", self.0)
    }

    /// The buffer of the bytes after the first `in_parts`: named by where it starts, so
    /// a state written before the buffer changed still finds its own.
    pub(super) fn buffer(&self, in_parts: u64) -> String {
        format!("{}buffer.{in_parts}", self.0)
    }

    /// A chunk kept aside until the chunks before it came.
    pub(super) fn aside(&self, key: u64) -> String {
        format!("{}chunk.{key}", self.0)
    }
}

/// A state as read, with the ETag it was read with.
#[derive(Clone, Debug)]
pub(super) struct Loaded {
    pub(super) folder: Folder,
    pub(super) id: String,
    pub(super) state: State,
    pub(super) etag: String,
}

impl Loaded {
    /// Whether another request holds the upload now.
    pub(super) fn leased(&self, settings: &UploadSettings) -> bool {
        self.state
            .lease
            .as_ref()
            .is_some_and(|lease| lease.until_unix_ns > settings.now_ns())
    }

    /// Writes the state, if it is still the one read (ABORTED otherwise: another
    /// request took the upload over).
    pub(super) async fn save(&mut self, s3: &S3Client) -> Result<(), Status> {
        let json = serde_json::to_vec(&self.state)
            .map_err(|e| Status::internal(format!("an upload's state could not be written: {e}")))?;
        self.etag = s3
            .put_if(&self.folder.state(), Bytes::from(json), Some(&self.etag))
            .await
            .map_err(|status| match status.code() {
                tonic::Code::Aborted => taken(),
                _ => status,
            })?;
        Ok(())
    }

    /// Takes the lease for a request, or ABORTED while another holds it.
    pub(super) async fn take(&mut self, s3: &S3Client, settings: &UploadSettings) -> Result<(), Status> {
        if self.leased(settings) {
            return Err(busy());
        }
        self.state.lease = Some(Lease {
            holder: format!("{:016x}", fastrand::u64(..)),
            until_unix_ns: settings.now_ns().saturating_add(LEASE_FOR_NS),
        });
        self.save(s3).await.map_err(|status| match status.code() {
            tonic::Code::Aborted => busy(),
            _ => status,
        })
    }

    /// Renews the lease when it is due.
    pub(super) async fn renew(&mut self, s3: &S3Client, settings: &UploadSettings) -> Result<(), Status> {
        let now = settings.now_ns();
        if let Some(lease) = &mut self.state.lease
            && lease.until_unix_ns - now < LEASE_FOR_NS - RENEW_AFTER_NS
        {
            lease.until_unix_ns = now.saturating_add(LEASE_FOR_NS);
            self.save(s3).await?;
        }
        Ok(())
    }

    /// Gives the lease back, the rest of the state as it was when taken.
    pub(super) async fn release(mut self, s3: &S3Client) {
        self.state.lease = None;
        if let Err(status) = self.save(s3).await {
            tracing::debug!(error = %status.message(), "an upload's lease could not be given back; it lapses");
        }
    }
}

/// Reads `owner`'s upload `id`: NOT_FOUND when there is none, it is another's, or it
/// has expired.
pub(super) async fn load(
    s3: &S3Client,
    base: &str,
    settings: &UploadSettings,
    id: &str,
    owner: &str,
) -> Result<Loaded, Status> {
    super::super::check_id(id)?;
    let folder = Folder::of(base, owner, id);
    let (data, etag) = s3.get_versioned(&folder.state()).await?.ok_or_else(not_found)?;
    let state = parse(&data)?;
    if state.record.owner != owner || settings.expired(&state.record) {
        return Err(not_found());
    }
    Ok(Loaded {
        folder,
        id: id.to_owned(),
        state,
        etag,
    })
}

/// A state object's contents.
pub(super) fn parse(data: &[u8]) -> Result<State, Status> {
    serde_json::from_slice(data).map_err(|e| {
        Status::internal(format!(
            "an upload's state in the bucket cannot be read ({e}); cancel the upload and start again"
        ))
    })
}

/// ABORTED: another request holds the upload.
pub(super) fn busy() -> Status {
    Status::aborted("another request is sending to this upload right now; try again once it ended")
}

/// ABORTED: the lease was lost during the request.
fn taken() -> Status {
    Status::aborted(
        "another request took this upload over while this one ran; nothing of this one counts: \
         ask for the upload's offset and go on from there",
    )
}
