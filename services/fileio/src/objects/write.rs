//! PUT into a bucket. A body up to [`PART_BYTES`] is one PutObject, conditional on
//! what the client's preconditions saw; a longer one is a multipart upload of parts of
//! [`PART_BYTES`], one part sent while the next is received, so an upload holds at most
//! two parts (16 MiB) whatever its size. S3 makes the object appear only when the upload
//! completes; an upload that fails, is cut or is dropped is aborted, and one left by a
//! crash is swept at start ([`super::sweep`]).

use super::find::{file_info, require_parent};
use super::keys::Keys;
use crate::s3::{ObjectInfo, S3Client};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::fileio::{WriteHeader, WriteResponse};
use kubedav_api::path::VolumePath;
use tokio::task::JoinHandle;
use tonic::Status;

/// The size of a part of a multipart upload, and the largest body sent in one request.
pub const PART_BYTES: usize = 8 << 20;

/// Writes the body to `path`, replacing any file there.
pub async fn write(
    s3: &S3Client,
    keys: &Keys,
    path: &VolumePath,
    header: &WriteHeader,
    mut body: BoxStream<Bytes>,
    keeper: Option<&super::kept::BucketKeeper>,
) -> Result<WriteResponse, Status> {
    let (key, existing) = target(s3, keys, path, header).await?;
    let mut digester = crate::digest::Digester::for_write(header)?;
    let mut part = BytesMut::new();
    let mut multipart: Option<Multipart> = None;
    let mut received = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        received += chunk.len() as u64;
        if let Some(limit) = header.expected_size
            && received > limit
        {
            return Err(Status::invalid_argument(format!(
                "the body is longer than the {limit} bytes declared; nothing was written"
            )));
        }
        if let Some(digester) = &mut digester {
            digester.update(&chunk);
        }
        part.extend_from_slice(&chunk);
        if part.len() >= PART_BYTES {
            let full = part.split().freeze();
            match &mut multipart {
                Some(upload) => upload.send(full).await?,
                None => multipart = Some(Multipart::start(s3, &key, full, header.modified_unix_ns).await?),
            }
        }
    }
    if let Some(expected) = header.expected_size
        && expected != received
    {
        return Err(Status::cancelled(format!(
            "the body had {received} bytes but {expected} were declared; nothing was written"
        )));
    }
    // A mismatch returns here: nothing was put, and a multipart upload is aborted.
    let checksums = match digester {
        Some(digester) => digester.finish(path.as_str())?,
        None => Vec::new(),
    };
    let condition = match (&header.if_match, header.create_only) {
        (Some(etag), _) => Some(etag.as_str()),
        (None, true) => Some(""),
        (None, false) => None,
    };
    // The content about to be replaced is kept first: a crash between leaves one
    // version too many, never one too few.
    if let (Some(keeper), Some(existing)) = (keeper, &existing) {
        keeper.keep_version(path, existing).await?;
    }
    let etag = match multipart {
        None => s3
            .put_with(&key, part.freeze(), condition, header.modified_unix_ns)
            .await
            .map_err(|status| conflict(status, header, path))?,
        Some(mut upload) => {
            if !part.is_empty() {
                upload.send(part.freeze()).await?;
            }
            // The condition goes on the completion, where servers that know conditional
            // completion check it atomically; for those that ignore it, it is checked
            // again just before (a window of one request, docs/architecture.md).
            if condition.is_some() {
                check(header, path, s3.head(&key).await?.as_ref())?;
            }
            upload
                .complete(condition)
                .await
                .map_err(|status| conflict(status, header, path))?
        }
    };
    crate::metrics::written_bytes(received);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as i64);
    let object = ObjectInfo {
        key,
        size: received,
        etag,
        modified_unix_ns: header.modified_unix_ns.unwrap_or(now),
    };
    let info = file_info(path, &object);
    if !checksums.is_empty() || header.modified_unix_ns.is_some() {
        keep_content_record(s3, keys, path, &info.etag, &checksums, header.modified_unix_ns).await?;
    }
    Ok(WriteResponse {
        info: Some(info),
        created: existing.is_none(),
        checksums,
    })
}

/// The key a write of `path` makes, and the object it replaces: refused when `path` is
/// a collection (the root among them), its parent is not one, or `header`'s
/// preconditions do not hold.
pub(crate) async fn target(
    s3: &S3Client,
    keys: &Keys,
    path: &VolumePath,
    header: &WriteHeader,
) -> Result<(String, Option<ObjectInfo>), Status> {
    if path.is_root() {
        return Err(Status::failed_precondition(
            "the root is a collection; a file cannot replace it",
        ));
    }
    let key = keys.object(path);
    let children = keys.children(path);
    let (parent, existing, below) = tokio::join!(
        require_parent(s3, keys, path),
        s3.head(&key),
        s3.first_under(&children)
    );
    parent?;
    let existing = existing?;
    if below?.is_some() {
        return Err(Status::failed_precondition(format!(
            "{path} is a collection; a file cannot replace it"
        )));
    }
    check(header, path, existing.as_ref())?;
    Ok((key, existing))
}

/// Keeps what a listing cannot learn from the bucket in the property index of the
/// file's collection, named by the etag of the content (`kubedav_api::checksums`): its
/// checksums, and the modification time the client gave (HEAD and GET read that from
/// the object's own metadata; a listing has only the index). A failure here fails the
/// write, which was already made: the client sends it again.
pub(crate) async fn keep_content_record(
    s3: &S3Client,
    keys: &Keys,
    path: &VolumePath,
    etag: &str,
    checksums: &[kubedav_api::checksums::Checksum],
    modified_unix_ns: Option<i64>,
) -> Result<(), Status> {
    use kubedav_api::checksums::{Stored, is_reserved};
    let mut record = Vec::new();
    if !checksums.is_empty() {
        record.push(
            Stored {
                etag: etag.to_owned(),
                sums: checksums.to_vec(),
            }
            .to_property(),
        );
    }
    if let Some(modified) = modified_unix_ns {
        record.push(kubedav_api::checksums::modified_property(etag, modified));
    }
    let (parent, name) = Keys::index_entry(path, false);
    super::properties::update(s3, keys, &parent, |entries| {
        let entry = entries.entry(name.clone()).or_default();
        entry.retain(|p| !is_reserved(&p.namespace));
        entry.extend(record.iter().cloned());
        true
    })
    .await
}

/// The preconditions of `header` against what is stored: ABORTED for an If-Match that
/// no longer holds, ALREADY_EXISTS for a create-only write onto a file.
pub(crate) fn check(
    header: &WriteHeader,
    path: &VolumePath,
    existing: Option<&ObjectInfo>,
) -> Result<(), Status> {
    if let Some(wanted) = &header.if_match
        && existing.is_none_or(|object| &object.etag != wanted)
    {
        return Err(Status::aborted(format!(
            "{path} changed: its etag is no longer {wanted}"
        )));
    }
    if header.create_only && existing.is_some() {
        return Err(Status::already_exists(format!("{path} exists")));
    }
    Ok(())
}

/// A refused conditional PutObject, in the terms of the header's preconditions.
pub(crate) fn conflict(status: Status, header: &WriteHeader, path: &VolumePath) -> Status {
    if status.code() == tonic::Code::Aborted && header.if_match.is_none() && header.create_only {
        return Status::already_exists(format!("{path} exists"));
    }
    status
}

/// A multipart upload under way: at most one part in flight. Dropped before
/// [`Multipart::complete`], it is aborted once its part in flight has finished.
struct Multipart {
    s3: S3Client,
    key: String,
    id: String,
    etags: Vec<String>,
    in_flight: Option<JoinHandle<Result<String, Status>>>,
    done: bool,
}

impl Multipart {
    /// Starts the upload of `key` with its first part.
    async fn start(
        s3: &S3Client,
        key: &str,
        first: Bytes,
        modified_unix_ns: Option<i64>,
    ) -> Result<Self, Status> {
        let id = s3.start_upload_with(key, modified_unix_ns).await?;
        let mut upload = Self {
            s3: s3.clone(),
            key: key.to_owned(),
            id,
            etags: Vec::new(),
            in_flight: None,
            done: false,
        };
        upload.send(first).await?;
        Ok(upload)
    }

    /// Waits for the part in flight, then sends `part`.
    async fn send(&mut self, part: Bytes) -> Result<(), Status> {
        self.settle().await?;
        let number = u16::try_from(self.etags.len() + 1)
            .ok()
            .filter(|&n| n <= 10_000)
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "the body is larger than S3's 10,000 parts of {} MiB",
                    PART_BYTES >> 20
                ))
            })?;
        let (s3, key, id) = (self.s3.clone(), self.key.clone(), self.id.clone());
        self.in_flight = Some(tokio::spawn(async move {
            s3.upload_part(&key, &id, number, part).await
        }));
        Ok(())
    }

    /// Waits for the part in flight and keeps its ETag.
    async fn settle(&mut self) -> Result<(), Status> {
        if let Some(part) = self.in_flight.take() {
            let etag = part.await.map_err(crate::errors::join_status)??;
            self.etags.push(etag);
        }
        Ok(())
    }

    /// Waits for the last part and makes the object appear, if `condition` (as
    /// [`S3Client::put_if`] takes it) holds; its ETag.
    async fn complete(mut self, condition: Option<&str>) -> Result<String, Status> {
        self.settle().await?;
        let etag = self
            .s3
            .complete_upload(&self.key, &self.id, &self.etags, condition)
            .await?;
        self.done = true;
        Ok(etag)
    }
}

impl Drop for Multipart {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // The part in flight finishes first (at most one part more sent): S3 may
        // complete a part whose bytes it had all received even when its request is
        // cancelled, and a part completed after the abort keeps its storage (AWS says an
        // abort may need repeating while parts are in flight) or brings the upload back
        // (versitygw's posix backend makes its directory again).
        let in_flight = self.in_flight.take();
        let (s3, key, id) = (self.s3.clone(), self.key.clone(), self.id.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Some(part) = in_flight {
                    let _ = part.await;
                }
                if let Err(status) = s3.abort_upload(&key, &id).await {
                    tracing::warn!(%key, error = %status.message(), "an interrupted upload could not be aborted; the sweep of abandoned uploads removes it (--abandoned-upload-seconds)");
                }
            });
        }
    }
}
