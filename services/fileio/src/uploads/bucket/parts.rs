//! Bytes on their way into a multipart upload: gathered into parts of [`PART_BYTES`],
//! one part sent while the next gathers (at most two parts in memory, 16 MiB), and what
//! is left under S3's smallest part at the end handed back to be kept in the buffer.

use crate::objects::write::PART_BYTES;
use crate::s3::S3Client;
use bytes::{Bytes, BytesMut};
use tokio::task::JoinHandle;
use tonic::Status;

/// S3's smallest part but for the last: what is left under it after a request waits in
/// the buffer object for the next.
pub(super) const MIN_PART_BYTES: usize = 5 << 20;
/// S3's most parts of one upload.
pub(super) const MAX_PARTS: usize = 10_000;
/// The most bytes an upload in a bucket may hold: 10,000 parts of [`PART_BYTES`].
pub(crate) const MAX_BUCKET_LENGTH: u64 = MAX_PARTS as u64 * PART_BYTES as u64;

/// A writer of parts into one multipart upload of `key` (begun when its first part goes,
/// when it has none yet). Dropped unfinished, the part in flight is abandoned; an upload
/// the writer began itself is aborted.
pub(super) struct Parts {
    s3: S3Client,
    key: String,
    upload: Option<String>,
    /// Whether the writer began the upload (and so aborts it if dropped unfinished).
    began: bool,
    /// Parts counted before this writer.
    before: usize,
    /// The ETags of the parts this writer sent.
    pub(super) etags: Vec<String>,
    /// The bytes in them.
    pub(super) sent: u64,
    pending: BytesMut,
    in_flight: Option<JoinHandle<Result<String, Status>>>,
    done: bool,
}

impl Parts {
    /// Parts after the `before` ones of the upload `upload` of `key`, starting with the
    /// bytes `pending`; a new upload of `key`, begun at the first part, when `upload` is
    /// `None`.
    pub(super) fn new(
        s3: &S3Client,
        key: String,
        upload: Option<String>,
        before: usize,
        pending: Bytes,
    ) -> Self {
        Self {
            s3: s3.clone(),
            key,
            upload,
            began: false,
            before,
            etags: Vec::new(),
            sent: 0,
            pending: BytesMut::from(&pending[..]),
            in_flight: None,
            done: false,
        }
    }

    /// Adds `data`, sending each part that fills.
    pub(super) async fn push(&mut self, data: &[u8]) -> Result<(), Status> {
        self.pending.extend_from_slice(data);
        while self.pending.len() >= PART_BYTES {
            let part = self.pending.split_to(PART_BYTES).freeze();
            self.send(part).await?;
        }
        Ok(())
    }

    /// Waits for the part in flight, then sends `part`.
    async fn send(&mut self, part: Bytes) -> Result<(), Status> {
        self.settle().await?;
        let number = self.before + self.etags.len() + 1;
        if number > MAX_PARTS {
            return Err(Status::out_of_range(format!(
                "an upload's length on object storage may be at most {MAX_BUCKET_LENGTH} bytes \
                 ({MAX_PARTS} parts of {} MiB)",
                PART_BYTES >> 20
            )));
        }
        let upload = match &self.upload {
            Some(upload) => upload.clone(),
            None => {
                let upload = self.s3.start_upload(&self.key).await?;
                self.began = true;
                self.upload = Some(upload.clone());
                upload
            }
        };
        self.sent += part.len() as u64;
        let (s3, key) = (self.s3.clone(), self.key.clone());
        self.in_flight = Some(tokio::spawn(async move {
            s3.upload_part(&key, &upload, number as u16, part).await
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

    /// Sends what is left when it makes a part of S3's smallest size, and waits for every
    /// part: what is left under it, to keep in the buffer.
    pub(super) async fn finish(mut self) -> Result<(Self, Bytes), Status> {
        if self.pending.len() >= MIN_PART_BYTES {
            let part = self.pending.split().freeze();
            self.send(part).await?;
        }
        self.settle().await?;
        self.done = true;
        let tail = self.pending.split().freeze();
        Ok((self, tail))
    }

    /// Sends everything left as the last part and waits for every part; the upload's id,
    /// `None` when no part was sent (then nothing was begun).
    pub(super) async fn finish_last(mut self) -> Result<(Self, Option<String>), Status> {
        if !self.pending.is_empty() {
            let part = self.pending.split().freeze();
            self.send(part).await?;
        }
        self.settle().await?;
        self.done = true;
        let upload = self.upload.clone();
        Ok((self, upload))
    }

    /// Makes the bytes pushed the object `key`: one PutObject when no part went, else
    /// the rest as the last part and the upload completed.
    pub(super) async fn into_object(mut self) -> Result<(), Status> {
        if self.upload.is_none() {
            let data = self.pending.split().freeze();
            self.done = true;
            return self.s3.put(&self.key, data).await.map(drop);
        }
        let (mut this, upload) = self.finish_last().await?;
        if let Some(upload) = upload {
            this.s3
                .complete_upload(&this.key, &upload, &this.etags, None)
                .await?;
        }
        this.keep();
        Ok(())
    }

    /// Keeps the upload this writer began, once it is recorded: it is no longer the
    /// writer's to abort.
    pub(super) fn keep(&mut self) {
        self.began = false;
    }
}

impl Drop for Parts {
    fn drop(&mut self) {
        if let Some(part) = self.in_flight.take() {
            part.abort();
        }
        if !self.began {
            return;
        }
        if let (Some(upload), Ok(runtime)) = (self.upload.clone(), tokio::runtime::Handle::try_current()) {
            let (s3, key) = (self.s3.clone(), self.key.clone());
            runtime.spawn(async move {
                let _ = s3.abort_upload(&key, &upload).await;
            });
        }
    }
}
