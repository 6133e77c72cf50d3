//! Uploads that arrive in many requests (issue 55; docs/uploads.md): TUS 1.0 and
//! Nextcloud chunking, as the gateway speaks them, over the
//! [`kubedav_api::uploads::Uploads`] port.
//!
//! An upload's bytes and state live with the data, in kubedav's own area
//! (`.kubedav/uploads/{owner key}/{id}/`), so it survives any restart and goes on
//! through any replica. It lands through a `Write` with `from_upload`, which checks and
//! commits it as a body that arrived at once. [`volume`] keeps them on a volume.

pub mod bucket;
mod chunks;
mod folder;
pub mod volume;

pub use chunks::{Chunks, MAX_CHUNKS};

use kubedav_api::uploads::Upload;
use kubedav_kit::clock::WallClock;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tonic::Status;

/// How uploads are kept.
#[derive(Clone)]
pub struct UploadSettings {
    /// How long an upload lives after its last append (`--upload-expiry-hours`).
    pub expiry: Duration,
    /// Most unfinished uploads one owner may have (`--uploads-per-user`).
    pub per_owner: u32,
    /// How often expired uploads are removed (each replica, jittered by up to a tenth);
    /// zero: never by itself (a test runs it).
    pub sweep_every: Duration,
    /// The time uploads are stamped with and expire by.
    pub clock: WallClock,
    /// How often a request renews its lease on an upload in a bucket (a test makes it
    /// short, so renewals fall everywhere in a request).
    pub lease_renewal: Duration,
}

/// The default of `--upload-expiry-hours`.
pub const DEFAULT_EXPIRY_HOURS: u64 = 24;
/// The default of `--uploads-per-user`: room for a sync client's parallel transfers and
/// a browser's dropped folder, while no one can hold unbounded state.
pub const DEFAULT_PER_OWNER: u32 = 100;

impl Default for UploadSettings {
    fn default() -> Self {
        Self {
            expiry: Duration::from_secs(DEFAULT_EXPIRY_HOURS * 3600),
            per_owner: DEFAULT_PER_OWNER,
            sweep_every: Duration::from_secs(600),
            clock: kubedav_kit::clock::system(),
            lease_renewal: Duration::from_secs(2),
        }
    }
}

impl std::fmt::Debug for UploadSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadSettings")
            .field("expiry", &self.expiry)
            .field("per_owner", &self.per_owner)
            .field("sweep_every", &self.sweep_every)
            .finish_non_exhaustive()
    }
}

impl UploadSettings {
    /// Now, in nanoseconds since the Unix epoch, by the settings' clock.
    pub fn now_ns(&self) -> i64 {
        kubedav_kit::clock::unix_nanos(&self.clock)
    }

    /// Whether `record` has expired.
    fn expired(&self, record: &Record) -> bool {
        self.expires_ns(record) <= self.now_ns()
    }

    fn expires_ns(&self, record: &Record) -> i64 {
        let expiry = i64::try_from(self.expiry.as_nanos()).unwrap_or(i64::MAX);
        record.touched_unix_ns.saturating_add(expiry)
    }

    /// The port's view of `record`.
    fn describe(&self, id: &str, record: &Record) -> Upload {
        Upload {
            id: id.to_owned(),
            owner: record.owner.clone(),
            target: record.target.clone(),
            length: record.length,
            offset: record.offset,
            created_unix_ns: record.created_unix_ns,
            expires_unix_ns: self.expires_ns(record),
            metadata: record
                .metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<HashMap<_, _>>(),
            missing_chunk: match &record.chunks {
                Some(chunks) if !chunks.aside.is_empty() => Some(chunks.next_key(record.offset)),
                _ => None,
            },
            chunks: record.chunks.as_ref().map(Chunks::received).unwrap_or_default(),
        }
    }
}

/// An upload's state, as kept beside its bytes (`state.json`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Record {
    /// Who may append to it, land it and abort it.
    pub owner: String,
    /// Where it was said to land.
    pub target: String,
    /// The declared length.
    pub length: Option<u64>,
    /// The bytes received, from the start, without a gap.
    pub offset: u64,
    /// When it was created.
    pub created_unix_ns: i64,
    /// Its last creation or append: it expires [`UploadSettings::expiry`] after.
    pub touched_unix_ns: i64,
    /// What the client said about it.
    pub metadata: BTreeMap<String, String>,
    /// How its chunks are placed, once a chunk arrived (Nextcloud chunking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Chunks>,
    /// The SHA-1 of its bytes so far, while they came in order (Nextcloud chunking in a
    /// bucket; docs/uploads.md, "The whole file's SHA-1").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<crate::digest::CarriedSha1>,
}

/// Longest target path, metadata and number of metadata keys an upload may carry: its
/// state stays a small file.
const MAX_TARGET_BYTES: usize = 4096;
const MAX_METADATA_BYTES: usize = 4096;
/// The most bytes an upload may hold: S3's largest object, 5 TiB (TUS's `Tus-Max-Size`).
pub const MAX_LENGTH: u64 = 5 << 40;
/// Longest name a client may give an upload (a Nextcloud upload folder).
const MAX_NAME_BYTES: usize = 255;

/// The id of a new upload: 32 random hex digits (the owner is checked on every call, so
/// an id is a name, not a secret), or the one its client's `name` stands for.
fn new_id(owner: &str, name: &str) -> Result<String, Status> {
    if name.is_empty() {
        return Ok(format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..)));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(Status::invalid_argument(format!(
            "an upload's name may be at most {MAX_NAME_BYTES} bytes"
        )));
    }
    Ok(kubedav_api::uploads::named_id(owner, name))
}

/// The folder name of `owner`'s uploads: a hash, so no name can reach outside it.
fn owner_key(owner: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(owner.as_bytes());
    kubedav_api::checksums::to_hex(&digest[..16])
}

/// Refuses an id that cannot name an upload (as absent: the caller learns nothing).
fn check_id(id: &str) -> Result<(), Status> {
    if kubedav_api::uploads::is_upload_id(id) {
        Ok(())
    } else {
        Err(not_found())
    }
}

fn not_found() -> Status {
    Status::not_found("no such upload: it finished, was cancelled, expired, or is not yours")
}

/// Refuses a request without an owner, or whose target or metadata are too large.
fn check_new(owner: &str, target: &str, metadata: &HashMap<String, String>) -> Result<(), Status> {
    if owner.is_empty() {
        return Err(Status::invalid_argument("an upload needs an owner"));
    }
    if !target.is_empty() {
        kubedav_api::path::VolumePath::parse(target)?;
    }
    if target.len() > MAX_TARGET_BYTES {
        return Err(Status::invalid_argument(format!(
            "the target path is longer than {MAX_TARGET_BYTES} bytes"
        )));
    }
    let size: usize = metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_METADATA_BYTES {
        return Err(Status::invalid_argument(format!(
            "the upload's metadata is larger than {MAX_METADATA_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Admits an append described by `header` to the upload `record`, on any backend: a
/// plain append must start at the offset, a length once declared cannot change (and
/// is taken when first given), and an upload holds at most [`MAX_CHUNKS`] chunks (a
/// chunk sent `again`, or replacing one kept aside, is not a new one).
fn admit(
    record: &mut Record,
    header: &kubedav_api::uploads::AppendHeader,
    again: bool,
) -> Result<(), Status> {
    if header.chunk.is_none() && header.offset != record.offset {
        return Err(Status::failed_precondition(format!(
            "the upload is at offset {}, not {}: send from there (HEAD tells it)",
            record.offset, header.offset
        )));
    }
    match (record.length, header.length) {
        (Some(had), Some(now)) if had != now => {
            return Err(Status::invalid_argument(format!(
                "the upload's length is {had}; it cannot change to {now}"
            )));
        }
        (None, Some(now)) if now < record.offset => {
            return Err(Status::invalid_argument(format!(
                "the upload already has {} bytes, more than the length {now}",
                record.offset
            )));
        }
        (None, Some(now)) => record.length = Some(now),
        _ => {}
    }
    if let Some(chunk) = &header.chunk {
        let chunks = record.chunks.get_or_insert_with(|| Chunks {
            by_offset: chunk.by_offset,
            ..Chunks::default()
        });
        if chunks.placed.len() + chunks.aside.len() >= MAX_CHUNKS
            && !again
            && !chunks.aside.contains_key(&chunk.key)
        {
            return Err(Status::resource_exhausted(format!(
                "an upload may have at most {MAX_CHUNKS} chunks; send larger ones"
            )));
        }
    }
    Ok(())
}

/// The bounds every append's bytes are held to: an upload's largest size, and its
/// declared length. `end` is where the bytes received so far end in the upload.
fn check_end(end: u64, length: Option<u64>, most: u64) -> Result<(), Status> {
    if end > most {
        return Err(Status::out_of_range(format!(
            "an upload's length may be at most {most} bytes here; none of these was kept"
        )));
    }
    if let Some(length) = length
        && end > length
    {
        return Err(Status::out_of_range(format!(
            "the data goes past the upload's length of {length} bytes; none of it was kept"
        )));
    }
    Ok(())
}

/// RESOURCE_EXHAUSTED: an owner with `unfinished` uploads may start no other.
fn too_many(unfinished: u32, settings: &UploadSettings) -> Status {
    Status::resource_exhausted(format!(
        "you have {unfinished} unfinished uploads, the most this server keeps for one user; \
         finish or cancel one first (unfinished uploads expire {} hours after their last data)",
        settings.expiry.as_secs() / 3600
    ))
}

/// Refuses to land an upload that is not complete (a chunk missing, or bytes short of
/// its length), or not of the size `header` declares.
fn check_landing(record: &Record, header: &kubedav_api::fileio::WriteHeader) -> Result<(), Status> {
    let offset = record.offset;
    if let Some(chunks) = &record.chunks
        && let Some(first) = chunks.aside.keys().next()
    {
        let missing = chunks.next_key(offset);
        return Err(Status::failed_precondition(format!(
            "chunk {missing} has not arrived, so chunk {first} and those after it cannot be \
             assembled; send it before the upload can land"
        )));
    }
    if let Some(length) = record.length
        && length != offset
    {
        return Err(Status::failed_precondition(format!(
            "the upload has {offset} of its {length} bytes; send the rest before it can land"
        )));
    }
    if let Some(declared) = header.expected_size
        && declared != offset
    {
        return Err(Status::failed_precondition(format!(
            "the upload has {offset} bytes, not the {declared} declared"
        )));
    }
    Ok(())
}
