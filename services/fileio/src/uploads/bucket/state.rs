//! An upload's state in the bucket: one small object, `state.json`, beside the upload's
//! other objects, replaced whole and only conditionally (If-Match on the ETag it was read
//! with), so two replicas never both change one upload. A request that changes the
//! upload holds a lease written into it, renewed every
//! [`UploadSettings::lease_renewal`] (2 s) while it runs, whether bytes arrive or not: a
//! second request meets the lease (ABORTED), and a replica that died holding one loses
//! it after [`LEASE_FOR_NS`]. A renewal writes the state as last saved with the new
//! lease, never what the request counted but has not saved.
//!
//! A request that lost its lease (it hung past it) may still be writing. Its writes can
//! never be taken for another's: its buffer objects carry its holder's name, and the
//! part numbers it may use are reserved in its lease ahead of use, so a request that
//! takes an upload over from a lapsed lease numbers its parts past them.

use super::super::{Record, UploadSettings, not_found, owner_key};
use crate::s3::S3Client;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tonic::Status;

/// How long a lease holds without renewal: a replica killed during a request blocks
/// its upload this long at most (a client's retries outlast it: tus-js-client's take
/// 9 s).
pub(super) const LEASE_FOR_NS: i64 = 8_000_000_000;
/// Part numbers a lease reserves ahead of use (512 MiB of parts): a takeover skips them.
const RESERVE_PARTS: u16 = 64;
/// S3's highest part number.
pub(super) const MAX_PART_NUMBER: u16 = 10_000;

/// The state of an upload in a bucket.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct State {
    /// What every backend keeps.
    pub(super) record: Record,
    /// The key the upload's multipart upload makes.
    pub(super) key: String,
    /// The S3 id of that multipart upload.
    pub(super) multipart: String,
    /// The parts counted, in order: each one's number (ascending, with gaps where a
    /// takeover skipped a lapsed lease's reservation) and ETag.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) parts: Vec<(u16, String)>,
    /// The bytes after them, in order, in small objects of the upload's folder until a
    /// part is full: each one's name and size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) buffer: Vec<(String, u64)>,
    /// Whether the multipart upload completed (to the upload's own key, before it was
    /// checked and copied to its file): the bytes are one object now.
    #[serde(default)]
    pub(super) whole: bool,
    /// The request changing the upload, if one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) lease: Option<Lease>,
}

impl State {
    /// The bytes waiting in the buffer.
    pub(super) fn buffered(&self) -> u64 {
        self.buffer.iter().map(|(_, size)| size).sum()
    }

    /// The number after the last part counted.
    fn next_part(&self) -> u16 {
        self.parts.last().map_or(1, |(number, _)| number + 1)
    }
}

/// A request's hold on an upload.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(super) struct Lease {
    /// Who holds it (random per request).
    pub(super) holder: String,
    /// Until when, in nanoseconds since the epoch by the uploads' clock.
    pub(super) until_unix_ns: i64,
    /// The first part number the holder may use.
    pub(super) first_part: u16,
    /// The last part number reserved for it.
    pub(super) reserved: u16,
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

    /// The object of a piece of the buffer: named by its holder and where it starts in
    /// the upload, so no other request's writes reach it.
    pub(super) fn buffer_piece(&self, holder: &str, at: u64) -> String {
        format!("{}buffer.{holder}.{at}", self.0)
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
    /// The state as the request changes it; it counts once [`Loaded::save`] wrote it.
    pub(super) state: State,
    /// The state as last read or saved: what a renewal writes, with the lease renewed,
    /// so a request that dies after a renewal leaves nothing counted that it did not
    /// finish (its offset moved on before its parts were listed, say).
    committed: State,
    pub(super) etag: String,
    /// When the lease held is renewed next.
    renew_at: tokio::time::Instant,
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
        let state = self.state.clone();
        self.write(s3, &state).await?;
        self.committed = state;
        Ok(())
    }

    /// Replaces the state object with `state`, if it is still the one read.
    async fn write(&mut self, s3: &S3Client, state: &State) -> Result<(), Status> {
        let json = serde_json::to_vec(state)
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

    /// Takes the lease for a request, or ABORTED while another holds it. Its part
    /// numbers start after the parts counted, and after what a lapsed lease reserved.
    pub(super) async fn take(&mut self, s3: &S3Client, settings: &UploadSettings) -> Result<(), Status> {
        if self.leased(settings) {
            return Err(busy());
        }
        let lapsed = self.state.lease.as_ref().map_or(0, |lease| lease.reserved);
        let first_part = self.state.next_part().max(lapsed.saturating_add(1));
        self.state.lease = Some(Lease {
            holder: format!("{:016x}", fastrand::u64(..)),
            until_unix_ns: settings.now_ns().saturating_add(LEASE_FOR_NS),
            first_part,
            reserved: first_part.saturating_add(RESERVE_PARTS),
        });
        self.save(s3).await.map_err(|status| match status.code() {
            tonic::Code::Aborted => busy(),
            _ => status,
        })?;
        self.renew_at = tokio::time::Instant::now() + settings.lease_renewal;
        Ok(())
    }

    /// The lease held: the request's own (it took it).
    pub(super) fn lease(&self) -> &Lease {
        self.state
            .lease
            .as_ref()
            .expect("a request that holds the upload")
    }

    /// Renews the lease, reserving part numbers up to `part` at least: the state last
    /// saved is written again with the new lease, nothing this request has not saved.
    async fn renew(&mut self, s3: &S3Client, settings: &UploadSettings, part: u16) -> Result<(), Status> {
        let now = settings.now_ns();
        if let Some(lease) = &mut self.state.lease {
            lease.until_unix_ns = now.saturating_add(LEASE_FOR_NS);
            if part > lease.reserved {
                lease.reserved = part.saturating_add(RESERVE_PARTS).min(MAX_PART_NUMBER);
            }
            let mut renewed = self.committed.clone();
            renewed.lease = self.state.lease.clone();
            self.write(s3, &renewed).await?;
            self.committed = renewed;
        }
        self.renew_at = tokio::time::Instant::now() + settings.lease_renewal;
        Ok(())
    }

    /// Reserves part numbers up to `part` (renewing the lease) unless they are.
    pub(super) async fn reserve(
        &mut self,
        s3: &S3Client,
        settings: &UploadSettings,
        part: u16,
    ) -> Result<(), Status> {
        if part > MAX_PART_NUMBER {
            return Err(Status::out_of_range(format!(
                "the upload's length on object storage may be at most {MAX_PART_NUMBER} parts \
                 (fewer after a request was taken over); none of these was kept"
            )));
        }
        if part > self.lease().reserved {
            self.renew(s3, settings, part).await?;
        }
        Ok(())
    }

    /// Runs `work` while the lease is held, renewing it on time however long `work`
    /// takes (a client that pauses, a slow part): ABORTED as soon as a renewal finds
    /// the lease taken over.
    pub(super) async fn held<T>(
        &mut self,
        s3: &S3Client,
        settings: &UploadSettings,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, Status> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return Ok(out),
                () = tokio::time::sleep_until(self.renew_at) => self.renew(s3, settings, 0).await?,
            }
        }
    }

    /// Gives the lease back: the state as it was before it was taken (so a lapsed
    /// lease's reservation, if one was taken over, still holds).
    pub(super) async fn put_back(mut self, s3: &S3Client, before: State) {
        self.state = before;
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
        committed: state.clone(),
        state,
        etag,
        renew_at: tokio::time::Instant::now(),
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
