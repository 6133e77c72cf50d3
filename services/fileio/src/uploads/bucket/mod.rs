//! Uploads in a bucket (docs/uploads.md, "On object storage"). Each upload is one S3
//! multipart upload, begun at its creation: to its target's key when it names one (TUS),
//! else to a key of its own (Nextcloud chunking, whose target comes with the last
//! request). Every append's bytes go to the bucket as parts of 8 MiB; what is left under
//! S3's smallest part (5 MiB) at the end of a request waits in one small buffer object
//! until the next request fills a part: the one place a byte is written twice, under
//! 5 MiB per upload. The state is one object beside it (`state`), so any replica goes on
//! with an upload, and nothing of it lives in a process.
//!
//! Layout under the served prefix: `.kubedav/uploads/{owner key}/{id}/` holds `state.json`,
//! `buffer.{start}`, `chunk.{key}` (Nextcloud chunks ahead of their turn) and `data` (the
//! bytes of an upload without a target, once complete).

mod append;
mod land;
mod parts;
mod state;

pub(crate) use parts::MAX_BUCKET_LENGTH;

use super::{UploadSettings, check_new, new_id, owner_key};
use crate::objects::keys::Keys;
use crate::s3::S3Client;
use bytes::Bytes;
use kubedav_api::BoxStream;
use kubedav_api::path::{RESERVED_AREA, VolumePath};
use kubedav_api::uploads::{
    AbortUploadRequest, AbortUploadResponse, AppendHeader, CreateUploadRequest, GetUploadRequest,
    ListUploadsRequest, ListUploadsResponse, Upload, Uploads,
};
use state::{Folder, State};
use std::collections::HashSet;
use std::sync::Arc;
use tonic::Status;

/// The uploads kept in one bucket prefix: the [`Uploads`] port, and the landing of an
/// upload through a write ([`BucketUploads::land`]).
#[derive(Clone)]
pub struct BucketUploads {
    s3: S3Client,
    keys: Keys,
    /// `{prefix}.kubedav/uploads/`.
    base: String,
    settings: Arc<UploadSettings>,
}

impl std::fmt::Debug for BucketUploads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketUploads")
            .field("base", &self.base)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Where the uploads of the prefix `prefix` are kept.
fn base_of(prefix: &str) -> String {
    format!("{prefix}{RESERVED_AREA}/uploads/")
}

impl BucketUploads {
    /// The uploads of the prefix `keys` serves.
    pub fn new(s3: S3Client, keys: Keys, settings: UploadSettings) -> Self {
        let base = base_of(keys.prefix());
        Self {
            s3,
            keys,
            base,
            settings: Arc::new(settings),
        }
    }

    /// How uploads are kept here.
    pub fn settings(&self) -> &UploadSettings {
        &self.settings
    }

    /// Removes expired uploads every [`UploadSettings::sweep_every`] (jittered), on the
    /// current Tokio runtime, for as long as the process runs.
    pub fn sweep_in_background(&self) {
        let every = self.settings.sweep_every;
        if every.is_zero() {
            return;
        }
        let uploads = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every + every.mul_f64(fastrand::f64() / 10.0)).await;
                let removed = uploads.expire().await;
                if removed > 0 {
                    tracing::info!(target: "kubedav", removed, "removed expired uploads");
                }
            }
        });
    }

    /// Removes every expired upload that no request holds (their multipart uploads
    /// aborted), and states that cannot be read once older than an expiry; how many
    /// went. Failures are logged: the next pass tries again.
    pub async fn expire(&self) -> usize {
        let keys = match state_keys(&self.s3, &self.base).await {
            Ok(keys) => keys,
            Err(status) => {
                tracing::warn!(target: "kubedav", error = %status.message(), "could not list the uploads to expire; the next pass tries again");
                return 0;
            }
        };
        let expiry_ns = i64::try_from(self.settings.expiry.as_nanos()).unwrap_or(i64::MAX);
        let mut removed = 0;
        for (key, written) in keys {
            let folder = Folder(key.trim_end_matches("state.json").to_owned());
            let state = match self.s3.get(&key).await {
                Ok(data) => state::parse(&data).ok(),
                Err(_) => continue,
            };
            let gone = match &state {
                Some(state) => {
                    self.settings.expired(&state.record)
                        && state
                            .lease
                            .as_ref()
                            .is_none_or(|lease| lease.until_unix_ns <= self.settings.now_ns())
                }
                None => written.saturating_add(expiry_ns) <= self.settings.now_ns(),
            };
            if gone && self.remove(&folder, state.as_ref()).await.is_ok() {
                removed += 1;
                crate::metrics::uploads_expired(1);
            }
        }
        removed
    }

    /// Removes an upload: its multipart upload aborted (unless it completed), every
    /// object of its folder, its state last (so a removal cut short is found again).
    async fn remove(&self, folder: &Folder, state: Option<&State>) -> Result<(), Status> {
        if let Some(state) = state
            && !state.whole
        {
            self.s3.abort_upload(&state.key, &state.multipart).await?;
        }
        let state_key = folder.state();
        let mut from = None;
        loop {
            let page = self.s3.list_all(&folder.0, from.as_deref()).await?;
            for object in page.objects.iter().filter(|o| o.key != state_key) {
                self.s3.delete(&object.key).await?;
            }
            match page.next {
                Some(next) => from = Some(next),
                None => break,
            }
        }
        self.s3.delete(&state_key).await
    }

    /// Removes the upload of `folder` if it expired and no request holds it; whether it
    /// did.
    async fn remove_if_expired(&self, folder: &Folder) -> Result<bool, Status> {
        let Some((data, _)) = self.s3.get_versioned(&folder.state()).await? else {
            return Ok(false);
        };
        let Ok(state) = state::parse(&data) else {
            return Ok(false);
        };
        let idle = state
            .lease
            .as_ref()
            .is_none_or(|lease| lease.until_unix_ns <= self.settings.now_ns());
        if !(self.settings.expired(&state.record) && idle) {
            return Ok(false);
        }
        self.remove(folder, Some(&state)).await?;
        Ok(true)
    }

    /// `owner`'s uploads: each one's id and state (an error where it cannot be read).
    async fn of_owner(&self, owner: &str) -> Result<Vec<(String, Result<State, Status>)>, Status> {
        let under = format!("{}{}/", self.base, owner_key(owner));
        let mut uploads = Vec::new();
        for (key, _) in state_keys(&self.s3, &under).await? {
            let id = key[under.len()..].trim_end_matches("/state.json").to_owned();
            let state = match self.s3.get(&key).await {
                Ok(data) => state::parse(&data),
                Err(status) => Err(status),
            };
            uploads.push((id, state));
        }
        Ok(uploads)
    }

    /// Refuses another upload to an owner at the cap ([`UploadSettings::per_owner`]).
    /// The states are read only when their number reaches it: expired ones are then
    /// removed and not counted; one that cannot be read holds its place until it
    /// expires. Two creations at once may pass the cap by one.
    async fn check_room(&self, owner: &str) -> Result<(), Status> {
        let under = format!("{}{}/", self.base, owner_key(owner));
        if state_keys(&self.s3, &under).await?.len() < self.settings.per_owner as usize {
            return Ok(());
        }
        let mut unfinished = 0;
        for (id, state) in self.of_owner(owner).await? {
            match state {
                Ok(state) if self.settings.expired(&state.record) => {
                    if state.lease.is_none() {
                        let folder = Folder::of(&self.base, owner, &id);
                        let _ = self.remove(&folder, Some(&state)).await;
                    }
                }
                Err(status) if status.code() == tonic::Code::NotFound => {}
                Ok(_) | Err(_) => unfinished += 1,
            }
        }
        match unfinished >= self.settings.per_owner {
            true => Err(super::too_many(unfinished, &self.settings)),
            false => Ok(()),
        }
    }

    async fn create_now(&self, request: CreateUploadRequest) -> Result<Upload, Status> {
        check_new(&request.owner, &request.target, &request.metadata)?;
        if let Some(length) = request.length
            && length > MAX_BUCKET_LENGTH
        {
            return Err(Status::out_of_range(format!(
                "an upload's length on object storage may be at most {MAX_BUCKET_LENGTH} bytes \
                 (10,000 parts of 8 MiB), not {length}"
            )));
        }
        self.check_room(&request.owner).await?;
        let id = new_id(&request.owner, &request.name)?;
        let folder = Folder::of(&self.base, &request.owner, &id);
        // A TUS upload goes straight to its file; one whose file is named at its end
        // (Nextcloud chunking) to a key of its own, copied there inside the bucket.
        let key = match (request.name.is_empty(), request.target.is_empty()) {
            (true, false) => self.keys.object(&VolumePath::parse(&request.target)?),
            _ => folder.own_data(),
        };
        let multipart = self.s3.start_upload(&key).await?;
        let now = self.settings.now_ns();
        let state = State {
            record: super::Record {
                owner: request.owner,
                target: request.target,
                length: request.length,
                offset: 0,
                created_unix_ns: now,
                touched_unix_ns: now,
                metadata: request.metadata.into_iter().collect(),
                chunks: None,
                sha1: None,
            },
            key,
            multipart,
            parts: Vec::new(),
            buffer: Vec::new(),
            whole: false,
            lease: None,
        };
        let json = serde_json::to_vec(&state)
            .map_err(|e| Status::internal(format!("an upload's state could not be written: {e}")))?;
        let mut made = self
            .s3
            .put_if(&folder.state(), Bytes::from(json.clone()), Some(""))
            .await;
        if made
            .as_ref()
            .is_err_and(|status| status.code() == tonic::Code::Aborted)
            && self.remove_if_expired(&folder).await?
        {
            // A named upload that expired and was not swept yet: its name is free.
            made = self.s3.put_if(&folder.state(), Bytes::from(json), Some("")).await;
        }
        if let Err(status) = made {
            let _ = self.s3.abort_upload(&state.key, &state.multipart).await;
            return Err(match status.code() {
                tonic::Code::Aborted => Status::already_exists(format!(
                    "an upload named {:?} exists already: continue it, or delete it first",
                    request.name
                )),
                _ => status,
            });
        }
        crate::metrics::uploads_created(1);
        Ok(self.settings.describe(&id, &state.record))
    }
}

/// Every state object below `under`: its key, and when it was written.
async fn state_keys(s3: &S3Client, under: &str) -> Result<Vec<(String, i64)>, Status> {
    let mut keys = Vec::new();
    let mut from = None;
    loop {
        let page = s3.list_all(under, from.as_deref()).await?;
        keys.extend(
            page.objects
                .into_iter()
                .filter(|object| object.key.ends_with("/state.json"))
                .map(|object| (object.key, object.modified_unix_ns)),
        );
        match page.next {
            Some(next) => from = Some(next),
            None => return Ok(keys),
        }
    }
}

/// The multipart uploads that unfinished uploads below `prefix` hold: the sweep of
/// abandoned multipart uploads leaves them alone (their expiry aborts them).
pub async fn multiparts_in_use(s3: &S3Client, prefix: &str) -> Result<HashSet<String>, Status> {
    let mut ids = HashSet::new();
    for (key, _) in state_keys(s3, &base_of(prefix)).await? {
        match s3.get(&key).await.and_then(|data| state::parse(&data)) {
            Ok(state) => {
                ids.insert(state.multipart);
            }
            // Gone since the listing (landed or cancelled), or unreadable for good.
            Err(status) if matches!(status.code(), tonic::Code::NotFound | tonic::Code::Internal) => {}
            // The bucket did not answer: no multipart upload may be judged on this pass.
            Err(status) => return Err(status),
        }
    }
    Ok(ids)
}

#[async_trait::async_trait]
impl Uploads for BucketUploads {
    async fn create(&self, request: CreateUploadRequest) -> Result<Upload, Status> {
        self.create_now(request).await
    }

    async fn get(&self, request: GetUploadRequest) -> Result<Upload, Status> {
        let loaded = state::load(&self.s3, &self.base, &self.settings, &request.id, &request.owner).await?;
        Ok(self.settings.describe(&loaded.id, &loaded.state.record))
    }

    async fn append(&self, header: AppendHeader, data: BoxStream<Bytes>) -> Result<Upload, Status> {
        self.append_now(header, data).await
    }

    async fn abort(&self, request: AbortUploadRequest) -> Result<AbortUploadResponse, Status> {
        match state::load(&self.s3, &self.base, &self.settings, &request.id, &request.owner).await {
            Ok(loaded) if loaded.leased(&self.settings) => return Err(state::busy()),
            Ok(loaded) => self.remove(&loaded.folder, Some(&loaded.state)).await?,
            // A state that cannot be read: the folder is in the owner's own, so it is
            // theirs to cancel.
            Err(status) if status.code() == tonic::Code::Internal => {
                let folder = Folder::of(&self.base, &request.owner, &request.id);
                self.remove(&folder, None).await?;
            }
            Err(status) => return Err(status),
        }
        Ok(AbortUploadResponse {})
    }

    async fn list(&self, request: ListUploadsRequest) -> Result<ListUploadsResponse, Status> {
        let mut uploads: Vec<Upload> = self
            .of_owner(&request.owner)
            .await?
            .into_iter()
            .filter_map(|(id, state)| {
                let state = state.ok()?;
                (state.record.owner == request.owner && !self.settings.expired(&state.record))
                    .then(|| self.settings.describe(&id, &state.record))
            })
            .collect();
        uploads.sort_by_key(|u| u.created_unix_ns);
        Ok(ListUploadsResponse { uploads })
    }
}
