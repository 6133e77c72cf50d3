//! Uploads on a volume. Each is a folder `.kubedav/uploads/{owner key}/{id}/` holding
//! its bytes in `data`, written at their offsets, and its state in `state.json`,
//! replaced whole by a rename once the bytes it counts are synced: after a crash the
//! state never counts a byte the disk lost. Bytes past the offset (an append that broke
//! off with a checksum, or was refused) are written over by the next append and cut
//! off at landing. An append holds `flock` on `data` for its whole length, so two
//! requests on one upload never interleave: the second is ABORTED.
//!
//! A Nextcloud chunk goes into `data` at its place when the chunks ahead of it are
//! there; one that arrives before them waits beside it as `chunk.{key}` and is copied
//! in when they came (the one case a byte is written twice on a volume). A chunk is all
//! or nothing: it is received into `data` past the offset or into `chunk.new`, and only
//! counts once whole.

use super::chunks::{Place, assemble, place_chunk, remove_consumed};
use super::folder::{
    BATCH_BYTES, CHUNK_NEW, DATA, aside_name, busy, copy_into, io_error, names, older_than, open_folder,
    read_record, read_through, remove, write_record,
};
use super::{Record, UploadSettings, check_id, check_new, new_id, not_found, owner_key};
use crate::digest::Digester;
use crate::errors::{blocking, join_status};
use crate::volume::{Volume, reserved_failed};
use crate::write;
use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::fileio::{FromUpload, WriteHeader};
use kubedav_api::path::VolumePath;
use kubedav_api::uploads::{
    AbortUploadRequest, AbortUploadResponse, AppendHeader, CreateUploadRequest, GetUploadRequest,
    ListUploadsRequest, ListUploadsResponse, Upload, Uploads,
};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use tonic::Status;

const AREA: &str = "uploads";

/// The uploads of one volume: the [`Uploads`] port, and the landing of an upload
/// through a write ([`VolumeUploads::land`]).
#[derive(Clone, Debug)]
pub struct VolumeUploads {
    volume: Arc<Volume>,
    settings: Arc<UploadSettings>,
}

/// An upload opened for a change, its `data` locked.
struct Opened {
    /// The folder of its owner's uploads.
    owners: OwnedFd,
    /// Its own folder.
    folder: OwnedFd,
    id: String,
    data: File,
    record: Record,
}

/// An append in progress.
struct Appending {
    opened: Opened,
    durability: crate::volume::Durability,
    /// Where its bytes go.
    place: Place,
    /// The size a chunk's name declares.
    size: Option<u64>,
    /// Bytes of this append written so far.
    written: u64,
    /// Its checksum, if it named one.
    digester: Option<Digester>,
    /// The declared length before this append (which may declare it).
    length_before: Option<u64>,
}

/// What is left to do once an upload landed: remove its state and folder.
pub struct Landed {
    owners: OwnedFd,
    id: String,
}

impl Landed {
    /// Removes what is left of the landed upload.
    pub fn clean_up(self) {
        remove(&self.owners, &self.id);
    }
}

impl VolumeUploads {
    /// The uploads of `volume`.
    pub fn new(volume: Arc<Volume>, settings: UploadSettings) -> Self {
        Self {
            volume,
            settings: Arc::new(settings),
        }
    }

    /// How uploads are kept here.
    pub fn settings(&self) -> &UploadSettings {
        &self.settings
    }

    /// Removes expired uploads every [`UploadSettings::sweep_every`], on a thread of its
    /// own, while the volume is served.
    pub fn sweep_in_background(&self) {
        let every = self.settings.sweep_every;
        if every.is_zero() {
            return;
        }
        let (volume, settings) = (Arc::downgrade(&self.volume), self.settings.clone());
        let _ = std::thread::Builder::new()
            .name("upload-expiry".into())
            .spawn(move || {
                loop {
                    let jitter = every.mul_f64(fastrand::f64() / 10.0);
                    std::thread::sleep(every + jitter);
                    let Some(volume) = volume.upgrade() else { return };
                    let uploads = VolumeUploads {
                        volume,
                        settings: settings.clone(),
                    };
                    let removed = uploads.expire();
                    if removed > 0 {
                        tracing::info!(target: "kubedav", removed, "removed expired uploads");
                    }
                }
            });
    }

    /// Removes every expired upload that no request is changing; how many went.
    pub fn expire(&self) -> usize {
        let Ok(Some(area)) = self.volume.reserved_folder(AREA, false) else {
            return 0;
        };
        let mut removed = 0;
        for owner in names(&area) {
            let Ok(owners) = open_folder(&area, &owner) else {
                continue;
            };
            // Not while one of this owner's uploads is being created.
            let _ = rustix::fs::flock(&owners, FlockOperation::LockExclusive);
            for id in names(&owners) {
                if check_id(&id).is_err() {
                    continue;
                }
                let expired = match open_folder(&owners, &id).and_then(|folder| read_record(&folder)) {
                    Ok(record) => self.settings.expired(&record),
                    // A folder without its state (a crash during its creation), or
                    // whose state cannot be read, goes too once it is older than an
                    // expiry: never one being made.
                    Err(_) => older_than(&owners, &id, self.settings.expiry),
                };
                if expired && !busy(&owners, &id) {
                    remove(&owners, &id);
                    removed += 1;
                    crate::metrics::uploads_expired(1);
                }
            }
        }
        removed
    }

    fn owner_folder(&self, owner: &str, create: bool) -> Result<Option<OwnedFd>, Status> {
        self.volume
            .reserved_folder(&format!("{AREA}/{}", owner_key(owner)), create)
    }

    /// Opens `owner`'s upload `id` and locks its bytes: NOT_FOUND as for an absent one
    /// when it is another's or has expired (then it is removed), ABORTED while another
    /// request holds it.
    fn open(&self, id: &str, owner: &str) -> Result<Opened, Status> {
        check_id(id)?;
        let owners = self.owner_folder(owner, false)?.ok_or_else(not_found)?;
        let folder = open_folder(&owners, id)?;
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let data = match rustix::fs::openat(&folder, DATA, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Err(not_found()),
            Err(e) => return Err(reserved_failed("open", "an upload's bytes", e)),
        };
        match rustix::fs::flock(&data, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(Status::aborted(
                    "another request is sending to this upload right now; try again once it ended",
                ));
            }
            // A file system without flock: no protection, as for uploads of one body.
            Err(_) => {}
        }
        let record = read_record(&folder)?;
        if record.owner != owner {
            return Err(not_found());
        }
        if self.settings.expired(&record) {
            drop(data);
            remove(&owners, id);
            return Err(not_found());
        }
        Ok(Opened {
            owners,
            folder,
            id: id.to_owned(),
            data: File::from(data),
            record,
        })
    }

    fn create_now(&self, request: CreateUploadRequest) -> Result<Upload, Status> {
        check_new(&request.owner, &request.target, &request.metadata)?;
        let owners = self
            .owner_folder(&request.owner, true)?
            .ok_or_else(|| Status::internal("the uploads folder could not be made"))?;
        // One creation at a time per owner, so the count below holds.
        let _ = rustix::fs::flock(&owners, FlockOperation::LockExclusive);
        let mut unfinished = 0;
        for id in names(&owners) {
            let record = match open_folder(&owners, &id).and_then(|folder| read_record(&folder)) {
                Ok(record) => record,
                // One being made, or whose state cannot be read: it holds its place
                // until it expires.
                Err(status) if status.code() != tonic::Code::NotFound => {
                    unfinished += 1;
                    continue;
                }
                Err(_) => continue,
            };
            if self.settings.expired(&record) {
                if !busy(&owners, &id) {
                    remove(&owners, &id);
                }
            } else {
                unfinished += 1;
            }
        }
        if unfinished >= self.settings.per_owner {
            return Err(super::too_many(unfinished, &self.settings));
        }
        let id = new_id(&request.owner, &request.name)?;
        match rustix::fs::mkdirat(&owners, id.as_str(), Mode::from_raw_mode(0o700)) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => {
                return Err(Status::already_exists(format!(
                    "an upload named {:?} exists already: continue it, or delete it first",
                    request.name
                )));
            }
            Err(e) => return Err(reserved_failed("make", "an upload's folder", e)),
        }
        let folder = open_folder(&owners, &id)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        // As a PUT's temporary file: the landed file is readable as any other.
        rustix::fs::openat(&folder, DATA, flags, Mode::from_raw_mode(0o644))
            .map_err(|e| reserved_failed("make", "an upload's file", e))?;
        let now = self.settings.now_ns();
        let record = Record {
            owner: request.owner,
            target: request.target,
            length: request.length,
            offset: 0,
            created_unix_ns: now,
            touched_unix_ns: now,
            metadata: request.metadata.into_iter().collect(),
            chunks: None,
            sha1: None,
        };
        let durability = self.volume.durability();
        write_record(&folder, &record, durability, true)?;
        durability.sync_dir(&owners, &VolumePath::root())?;
        crate::metrics::uploads_created(1);
        Ok(self.settings.describe(&id, &record))
    }

    fn begin_append(&self, header: &AppendHeader) -> Result<Appending, Status> {
        let mut opened = self.open(&header.id, &header.owner)?;
        let length_before = opened.record.length;
        let place = match &header.chunk {
            Some(chunk) => place_chunk(&opened.folder, &opened.record, chunk)?,
            None => Place::Next { chunk: false },
        };
        let again = matches!(place, Place::Again { .. });
        super::admit(&mut opened.record, header, again)?;
        let digester = match &header.checksum {
            Some(sum) => Digester::for_checksums(std::slice::from_ref(sum), &[])?,
            None => None,
        };
        Ok(Appending {
            opened,
            durability: self.volume.durability(),
            place,
            size: header.chunk.as_ref().and_then(|c| c.size),
            written: 0,
            digester,
            length_before,
        })
    }

    /// The finished upload `from` as the temporary file of a write to `path`: NOT_FOUND
    /// when the owner has no such upload, FAILED_PRECONDITION when it is not complete or
    /// not of `header`'s declared size. The checksums `header` asks for are computed by
    /// reading its bytes once.
    pub fn land(
        &self,
        from: &FromUpload,
        path: VolumePath,
        header: &WriteHeader,
    ) -> Result<(write::Upload, Landed), Status> {
        // An upload busy with another request lands once that ended: a wait, not a refusal.
        let Opened {
            owners,
            folder,
            id,
            data,
            record,
        } = self
            .open(&from.id, &from.owner)
            .map_err(|status| match status.code() {
                tonic::Code::Aborted => Status::unavailable(status.message().to_owned()),
                _ => status,
            })?;
        super::check_landing(&record, header)?;
        let offset = record.offset;
        data.set_len(offset)
            .map_err(|e| Status::internal(format!("cannot trim the upload's bytes: {e}")))?;
        let (dir, name) = self.volume.open_parent(&path)?;
        let name = name.to_owned();
        write::refuse_collection(&self.volume, &dir, &name, &path)?;
        let digester = match Digester::for_write(header)? {
            Some(mut digester) => {
                // Read once, in large batches from the page cache: cheaper here than a
                // SHA-1 carried over the chunks (docs/uploads.md, "The whole file's SHA-1").
                read_through(&data, offset, &mut digester, &path)?;
                crate::metrics::upload_reread();
                Some(digester)
            }
            None => None,
        };
        let mut upload = write::Upload::adopt(
            dir,
            name,
            path,
            folder,
            DATA.to_owned(),
            data,
            offset,
            self.volume.durability(),
        );
        upload.digest_with(digester);
        Ok((upload, Landed { owners, id }))
    }
}

impl Appending {
    /// Writes `chunks` after what this append wrote so far.
    fn write(&mut self, chunks: &[Bytes]) -> Result<(), Status> {
        let record = &self.opened.record;
        // Where this append's bytes end in the upload, and where they are written.
        let (start, file) = match &self.place {
            Place::Next { .. } => (record.offset, &self.opened.data),
            Place::Aside { key, file } => {
                let start = match record.chunks.as_ref().is_some_and(|c| c.by_offset) {
                    true => *key,
                    // A numbered chunk's place is not known yet: what is received and
                    // kept aside together must still fit (without the chunk this one
                    // replaces, if it was sent before).
                    false => {
                        let aside = record.chunks.as_ref().map_or(0, |c| {
                            c.aside
                                .iter()
                                .filter(|(k, _)| *k != key)
                                .map(|(_, v)| v)
                                .sum::<u64>()
                        });
                        record.offset.saturating_add(aside)
                    }
                };
                (start, file)
            }
            Place::Again { at, file, .. } => (*at, file),
        };
        let in_file = match self.place {
            Place::Next { .. } => start,
            _ => 0,
        };
        let from = in_file + self.written;
        for chunk in chunks {
            let end = start
                .saturating_add(self.written)
                .saturating_add(chunk.len() as u64);
            super::check_end(end, record.length, super::MAX_LENGTH)?;
            file.write_all_at(chunk, in_file + self.written)
                .map_err(|e| io_error(e, &record.target))?;
            if let Some(digester) = &mut self.digester {
                digester.update(chunk);
            }
            self.written += chunk.len() as u64;
        }
        // As a PUT does: the disk starts on this batch while the next arrives, so the
        // sync at the append's end waits for its last batch only.
        if self.durability == crate::volume::Durability::Fsync {
            crate::write::start_writeback(file, from, in_file + self.written - from);
        }
        crate::metrics::written_bytes(chunks.iter().map(|c| c.len() as u64).sum());
        Ok(())
    }

    /// Makes what was written count: synced, then the state's offset moved past it. With
    /// a checksum, only when `complete` and matching; otherwise nothing of it counts.
    fn finish(mut self, complete: bool, settings: &UploadSettings) -> Result<Upload, Status> {
        if let Some(digester) = self.digester.take() {
            if !complete {
                return Err(Status::cancelled(
                    "the data broke off; none of it was kept, since it named a checksum",
                ));
            }
            digester.finish(&self.opened.record.target)?;
        }
        let chunk = !matches!(self.place, Place::Next { chunk: false });
        if chunk && !complete {
            return Err(Status::cancelled(
                "the chunk broke off; none of it was kept: send it again",
            ));
        }
        let (written, durability) = (self.written, self.durability);
        let Opened {
            folder,
            id,
            data,
            mut record,
            ..
        } = self.opened;
        let sync = |file: &File, record: &Record| {
            durability
                .sync_data(file)
                .map_err(|e| io_error(e, &record.target))
        };
        if let (Some(size), true) = (self.size, chunk)
            && size != written
        {
            let _ = rustix::fs::unlinkat(&folder, CHUNK_NEW, AtFlags::empty());
            return Err(Status::invalid_argument(format!(
                "the chunk's name says {size} bytes, but {written} arrived; none of it was kept"
            )));
        }
        // Chunk files copied into `data`, removed once the state no longer lists them.
        let mut consumed = Vec::new();
        match self.place {
            Place::Next { chunk } => {
                if written > 0 {
                    sync(&data, &record)?;
                }
                record.offset += written;
                if let Some(chunks) = record.chunks.as_mut().filter(|_| chunk) {
                    if !chunks.by_offset {
                        chunks.placed.push(written);
                    }
                    consumed = assemble(&folder, &data, chunks, &mut record.offset, &record.target)?;
                    if !consumed.is_empty() {
                        sync(&data, &record)?;
                    }
                }
            }
            Place::Aside { key, file } => {
                sync(&file, &record)?;
                rustix::fs::renameat(&folder, CHUNK_NEW, &folder, aside_name(key).as_str())
                    .map_err(|e| reserved_failed("keep", "a chunk", e))?;
                if let Some(chunks) = record.chunks.as_mut() {
                    chunks.aside.insert(key, written);
                }
            }
            Place::Again {
                key,
                at,
                length,
                file,
            } => {
                let _ = rustix::fs::unlinkat(&folder, CHUNK_NEW, AtFlags::empty());
                if length.is_some_and(|length| length != written) || at + written > record.offset {
                    return Err(Status::invalid_argument(format!(
                        "chunk {key} arrived before with other bounds than these {written} bytes; \
                         a chunk cannot change its size (start a new upload)"
                    )));
                }
                copy_into(&file, written, &data, at, &record.target)?;
                sync(&data, &record)?;
            }
        }
        // Only data renews the expiry: empty requests cannot keep an upload forever.
        if written > 0 || chunk || record.length != self.length_before {
            record.touched_unix_ns = settings.now_ns();
            write_record(&folder, &record, durability, !consumed.is_empty())?;
        }
        remove_consumed(&folder, &consumed);
        Ok(settings.describe(&id, &record))
    }
}

/// An append that is either idle or busy writing a batch on the blocking pool.
enum Slot {
    Ready(Box<Appending>),
    Writing(tokio::task::JoinHandle<Result<Box<Appending>, Status>>),
}

impl Slot {
    async fn wait(self) -> Result<Box<Appending>, Status> {
        match self {
            Slot::Ready(appending) => Ok(appending),
            Slot::Writing(handle) => handle.await.map_err(join_status)?,
        }
    }
}

#[async_trait::async_trait]
impl Uploads for VolumeUploads {
    async fn create(&self, request: CreateUploadRequest) -> Result<Upload, Status> {
        let this = self.clone();
        blocking(move || this.create_now(request)).await
    }

    async fn get(&self, request: GetUploadRequest) -> Result<Upload, Status> {
        let this = self.clone();
        blocking(move || {
            check_id(&request.id)?;
            let owners = this.owner_folder(&request.owner, false)?.ok_or_else(not_found)?;
            let record = read_record(&open_folder(&owners, &request.id)?)?;
            if record.owner != request.owner || this.settings.expired(&record) {
                return Err(not_found());
            }
            Ok(this.settings.describe(&request.id, &record))
        })
        .await
    }

    async fn append(&self, header: AppendHeader, mut data: BoxStream<Bytes>) -> Result<Upload, Status> {
        let this = self.clone();
        let appending = blocking(move || this.begin_append(&header)).await?;
        // Double buffering, as a write's: while one batch is written, the next arrives.
        let mut slot = Slot::Ready(Box::new(appending));
        let (mut batch, mut batch_len) = (Vec::new(), 0usize);
        let broke = loop {
            let next = data.next().await;
            let end = !matches!(next, Some(Ok(_)));
            let broke = match next {
                Some(Ok(chunk)) => {
                    batch_len += chunk.len();
                    batch.push(chunk);
                    None
                }
                Some(Err(status)) => Some(status),
                None => None,
            };
            if batch_len >= BATCH_BYTES || (end && batch_len > 0) {
                let mut appending = slot.wait().await?;
                let chunks = std::mem::take(&mut batch);
                batch_len = 0;
                slot = Slot::Writing(tokio::task::spawn_blocking(move || {
                    appending.write(&chunks)?;
                    Ok(appending)
                }));
            }
            if end {
                break broke;
            }
        };
        let appending = slot.wait().await?;
        let settings = self.settings.clone();
        let complete = broke.is_none();
        let upload = blocking(move || appending.finish(complete, &settings)).await?;
        match broke {
            Some(status) => Err(status),
            None => Ok(upload),
        }
    }

    async fn abort(&self, request: AbortUploadRequest) -> Result<AbortUploadResponse, Status> {
        let this = self.clone();
        blocking(move || {
            match this.open(&request.id, &request.owner) {
                Ok(opened) => remove(&opened.owners, &opened.id),
                // A state that cannot be read: the folder is in the owner's own, so
                // it is theirs to cancel.
                Err(status) if status.code() == tonic::Code::Internal => {
                    let owners = this.owner_folder(&request.owner, false)?.ok_or_else(not_found)?;
                    if busy(&owners, &request.id) {
                        return Err(Status::aborted(
                            "another request is sending to this upload right now",
                        ));
                    }
                    remove(&owners, &request.id);
                }
                Err(status) => return Err(status),
            }
            Ok(AbortUploadResponse {})
        })
        .await
    }

    async fn list(&self, request: ListUploadsRequest) -> Result<ListUploadsResponse, Status> {
        let this = self.clone();
        blocking(move || {
            let Some(owners) = this.owner_folder(&request.owner, false)? else {
                return Ok(ListUploadsResponse::default());
            };
            let mut uploads = Vec::new();
            for id in names(&owners) {
                let Ok(record) = open_folder(&owners, &id).and_then(|folder| read_record(&folder)) else {
                    continue;
                };
                if record.owner == request.owner && !this.settings.expired(&record) {
                    uploads.push(this.settings.describe(&id, &record));
                }
            }
            uploads.sort_by_key(|u| u.created_unix_ns);
            Ok(ListUploadsResponse { uploads })
        })
        .await
    }
}
