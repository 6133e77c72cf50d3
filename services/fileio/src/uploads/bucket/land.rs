//! The landing of a complete upload in a bucket, as a write of its target: the
//! multipart upload completes, so the file appears whole and at once. An upload that
//! went straight to its file completes there; one with a key of its own completes there
//! first, is read back once when a checksum is to be verified or computed, and is then
//! copied to its file inside the bucket (no byte through kubedav).

use super::BucketUploads;
use super::state::{self, Loaded};
use crate::digest::Digester;
use crate::objects::find::file_info;
use crate::objects::kept::BucketKeeper;
use crate::objects::write::{check, conflict, keep_content_record, target};
use crate::s3::{ObjectInfo, S3Client};
use crate::uploads::UploadSettings;
use bytes::Bytes;
use http_body_util::BodyExt;
use kubedav_api::fileio::{FromUpload, WriteHeader, WriteResponse};
use kubedav_api::path::VolumePath;
use tonic::Status;

impl BucketUploads {
    /// Lands the owner's complete upload `from` at `path`, as `header` asks (its
    /// preconditions, time and checksums): NOT_FOUND when the owner has no such upload,
    /// UNAVAILABLE while a request sends to it, FAILED_PRECONDITION when it is not
    /// complete, not of the declared size, or went straight to another file.
    pub async fn land(
        &self,
        from: &FromUpload,
        path: &VolumePath,
        header: &WriteHeader,
        keeper: Option<&BucketKeeper>,
    ) -> Result<WriteResponse, Status> {
        let mut loaded = state::load(&self.s3, &self.base, &self.settings, &from.id, &from.owner).await?;
        if loaded.leased(&self.settings) {
            return Err(Status::unavailable(state::busy().message().to_owned()));
        }
        crate::uploads::check_landing(&loaded.state.record, header)?;
        let key = self.keys.object(path);
        let own = loaded.state.key == loaded.folder.own_data();
        if !own && loaded.state.key != key {
            return Err(Status::failed_precondition(format!(
                "this upload was begun for {}; it can land only there",
                loaded.state.record.target
            )));
        }
        if !own && !header.checksums.is_empty() {
            return Err(Status::failed_precondition(
                "an upload that went straight to its file in object storage cannot have the whole \
                 file's checksum verified at its end; send a checksum with each part instead",
            ));
        }
        let (_, existing) = target(&self.s3, &self.keys, path, header).await?;
        let lease_before = loaded.state.lease.clone();
        loaded
            .take(&self.s3, &self.settings)
            .await
            .map_err(|status| match status.code() {
                tonic::Code::Aborted => Status::unavailable(status.message().to_owned()),
                _ => status,
            })?;
        let landing = Landing {
            uploads: self,
            path,
            key: &key,
            header,
            keeper,
            existing: existing.as_ref(),
        };
        let landed = match own {
            true => landing.by_copy(&mut loaded).await,
            false => landing.in_place(&mut loaded).await,
        };
        match landed {
            Ok((object, checksums)) => {
                crate::metrics::written_bytes(object.size);
                let info = file_info(path, &object);
                if !checksums.is_empty() || header.modified_unix_ns.is_some() {
                    keep_content_record(
                        &self.s3,
                        &self.keys,
                        path,
                        &info.etag,
                        &checksums,
                        header.modified_unix_ns,
                    )
                    .await?;
                }
                Ok(WriteResponse {
                    info: Some(info),
                    created: existing.is_none(),
                    checksums,
                })
            }
            Err(status) => {
                // Not landed: the upload stays as it was (the gateway cancels one that
                // can never land).
                let mut back = loaded;
                back.state.lease = lease_before;
                if let Err(e) = back.save(&self.s3).await {
                    tracing::debug!(error = %e.message(), "an upload's lease could not be given back; it lapses");
                }
                Err(status)
            }
        }
    }
}

/// One landing under way, its upload's lease held.
struct Landing<'a> {
    uploads: &'a BucketUploads,
    path: &'a VolumePath,
    key: &'a str,
    header: &'a WriteHeader,
    keeper: Option<&'a BucketKeeper>,
    existing: Option<&'a ObjectInfo>,
}

impl Landing<'_> {
    fn s3(&self) -> &S3Client {
        &self.uploads.s3
    }

    /// The write's precondition, as [`S3Client::put_if`] takes it.
    fn condition(&self) -> Option<&str> {
        match (&self.header.if_match, self.header.create_only) {
            (Some(etag), _) => Some(etag.as_str()),
            (None, true) => Some(""),
            (None, false) => None,
        }
    }

    /// Keeps the content about to be replaced, as a write does.
    async fn keep_replaced(&self) -> Result<(), Status> {
        if let (Some(keeper), Some(existing)) = (self.keeper, self.existing) {
            keeper.keep_version(self.path, existing).await?;
        }
        Ok(())
    }

    /// Sends the buffer as the last part and completes the multipart upload at its key
    /// (`condition` checked there); the object's ETag. An empty upload, which has no
    /// part, becomes an empty object instead.
    async fn complete(&self, loaded: &Loaded, condition: Option<&str>) -> Result<String, Status> {
        let state = &loaded.state;
        let s3 = self.s3();
        if state.record.offset == 0 {
            s3.abort_upload(&state.key, &state.multipart).await?;
            return s3.put_if(&state.key, Bytes::new(), condition).await;
        }
        let mut parts = state.parts.clone();
        if state.buffered() > 0 {
            let last = self.uploads.buffered(loaded).await?;
            // The lease reserved this number: no other request's part has it.
            let number = loaded.lease().first_part;
            parts.push((
                number,
                s3.upload_part(&state.key, &state.multipart, number, last).await?,
            ));
        }
        let numbered: Vec<(u16, &str)> = parts.iter().map(|(n, e)| (*n, e.as_str())).collect();
        s3.complete_numbered(&state.key, &state.multipart, &numbered, condition)
            .await
    }

    /// [`Landing::complete`] of an upload with a key of its own, once: an upload whose
    /// completion went through but whose state could not say so (the save failed or
    /// was lost) is found whole by its object, of its size.
    async fn complete_own(&self, loaded: &mut Loaded, settings: &UploadSettings) -> Result<(), Status> {
        if loaded.state.whole {
            return Ok(());
        }
        let snapshot = loaded.clone();
        let completed = loaded
            .held(self.s3(), settings, self.complete(&snapshot, None))
            .await?;
        if let Err(status) = completed {
            let whole = self.s3().head(&loaded.state.key).await?;
            if status.code() != tonic::Code::NotFound
                || whole.is_none_or(|object| object.size != loaded.state.record.offset)
            {
                return Err(status);
            }
        }
        loaded.state.whole = true;
        loaded.save(self.s3()).await
    }

    /// Lands an upload that went straight to its file: completed there, the
    /// precondition checked by the completion (and just before, for servers that ignore
    /// it there).
    async fn in_place(
        &self,
        loaded: &mut Loaded,
    ) -> Result<(ObjectInfo, Vec<kubedav_api::checksums::Checksum>), Status> {
        self.keep_replaced().await?;
        let condition = self.condition();
        if condition.is_some() {
            check(self.header, self.path, self.s3().head(self.key).await?.as_ref())?;
        }
        let settings = &*self.uploads.settings;
        let snapshot = loaded.clone();
        let mut etag = loaded
            .held(self.s3(), settings, self.complete(&snapshot, condition))
            .await?
            .map_err(|status| conflict(status, self.header, self.path))?;
        // Landed: what is left of the upload goes, whatever follows.
        loaded.state.whole = true;
        let _ = self.uploads.remove(&loaded.folder, Some(&loaded.state)).await;
        if let Some(modified) = self.header.modified_unix_ns {
            etag = self.s3().restamp(self.key, &etag, modified).await?;
        }
        let checksums = match Digester::for_write(self.header)? {
            Some(digester) => read_through(self.s3(), self.key, digester, self.path).await?,
            None => Vec::new(),
        };
        Ok((self.object(etag, loaded.state.record.offset), checksums))
    }

    /// Lands an upload with a key of its own: completed there once, checked, and copied
    /// to its file.
    async fn by_copy(
        &self,
        loaded: &mut Loaded,
    ) -> Result<(ObjectInfo, Vec<kubedav_api::checksums::Checksum>), Status> {
        let settings = &*self.uploads.settings;
        self.complete_own(loaded, settings).await?;
        let own = loaded.state.key.clone();
        let size = loaded.state.record.offset;
        // A mismatch returns here: nothing is copied.
        let checksums = match Digester::for_write(self.header)? {
            Some(mut digester) => {
                // The SHA-1 carried over the chunks spares reading them again.
                let carried = loaded
                    .state
                    .record
                    .sha1
                    .as_ref()
                    .and_then(|sha1| sha1.resume(size));
                match carried.is_some_and(|sha1| digester.continue_from(sha1)) {
                    true => digester.finish(self.path.as_str())?,
                    false => {
                        let read = read_through(self.s3(), &own, digester, self.path);
                        loaded.held(self.s3(), settings, read).await??
                    }
                }
            }
            None => Vec::new(),
        };
        self.keep_replaced().await?;
        // The precondition, checked just before the copy: a window of one request, as
        // for servers that ignore conditional completion (docs/architecture.md).
        check(self.header, self.path, self.s3().head(self.key).await?.as_ref())?;
        let copy = self
            .s3()
            .copy_whole(&own, self.key, size, self.header.modified_unix_ns);
        let etag = loaded.held(self.s3(), settings, copy).await??;
        let _ = self.uploads.remove(&loaded.folder, Some(&loaded.state)).await;
        Ok((self.object(etag, size), checksums))
    }

    /// The landed object, as a write describes it.
    fn object(&self, etag: String, size: u64) -> ObjectInfo {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as i64);
        ObjectInfo {
            key: self.key.to_owned(),
            size,
            etag,
            modified_unix_ns: self.header.modified_unix_ns.unwrap_or(now),
        }
    }
}

/// Reads the object `key` once through `digester`: the checksums, or the mismatch.
async fn read_through(
    s3: &S3Client,
    key: &str,
    mut digester: Digester,
    path: &VolumePath,
) -> Result<Vec<kubedav_api::checksums::Checksum>, Status> {
    crate::metrics::upload_reread();
    let opened = s3
        .open(key, None, None)
        .await?
        .ok_or_else(|| Status::internal(format!("the upload's bytes at {key} are gone")))?;
    let mut body = opened.body;
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|e| Status::unavailable(format!("reading {key} from the S3 server broke off: {e}")))?;
        if let Ok(data) = frame.into_data() {
            digester.update(&data);
        }
    }
    digester.finish(path.as_str())
}
