//! Bytes on their way into a multipart upload: gathered into parts of [`PART_BYTES`],
//! one part sent while the next gathers (at most two parts in memory, 16 MiB), and what
//! is left under a part at the end handed back to be kept in the buffer. Every part but
//! an upload's last is [`PART_BYTES`], so 10,000 parts hold [`MAX_BUCKET_LENGTH`].

use crate::objects::write::PART_BYTES;
use crate::s3::S3Client;
use bytes::{Bytes, BytesMut};
use tokio::task::JoinHandle;
use tonic::Status;

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
    /// The number of the next part.
    next: u16,
    /// The parts this writer sent: each one's number and ETag.
    pub(super) sent_parts: Vec<(u16, String)>,
    /// The bytes in them.
    pub(super) sent: u64,
    pending: BytesMut,
    in_flight: Option<JoinHandle<Result<(u16, String), Status>>>,
}

impl Parts {
    /// Parts numbered from `first` of the upload `upload` of `key`, starting with the
    /// bytes `pending`; a new upload of `key`, begun at the first part, when `upload` is
    /// `None`.
    pub(super) fn new(
        s3: &S3Client,
        key: String,
        upload: Option<String>,
        first: u16,
        pending: Bytes,
    ) -> Self {
        Self {
            s3: s3.clone(),
            key,
            upload,
            began: false,
            next: first,
            sent_parts: Vec::new(),
            sent: 0,
            pending: BytesMut::from(&pending[..]),
            in_flight: None,
        }
    }

    /// The highest part number sending `extra` more bytes may use.
    pub(super) fn highest_after(&self, extra: usize) -> u16 {
        let parts = u16::try_from((self.pending.len() + extra) / PART_BYTES).unwrap_or(u16::MAX);
        self.next.saturating_add(parts).saturating_sub(1)
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
        let number = self.next;
        if usize::from(number) > MAX_PARTS {
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
        self.next += 1;
        let (s3, key) = (self.s3.clone(), self.key.clone());
        self.in_flight = Some(tokio::spawn(async move {
            let etag = s3.upload_part(&key, &upload, number, part).await?;
            Ok((number, etag))
        }));
        Ok(())
    }

    /// Waits for the part in flight and keeps its number and ETag.
    async fn settle(&mut self) -> Result<(), Status> {
        if let Some(part) = self.in_flight.take() {
            let sent = part.await.map_err(crate::errors::join_status)??;
            self.sent_parts.push(sent);
        }
        Ok(())
    }

    /// Waits for every part: what is left under a part, to keep in the buffer.
    pub(super) async fn finish(mut self) -> Result<(Self, Bytes), Status> {
        self.settle().await?;
        let tail = self.pending.split().freeze();
        Ok((self, tail))
    }

    /// Makes the bytes pushed the object `key`: one PutObject when no part went, else
    /// the rest as the last part and the upload completed.
    pub(super) async fn into_object(mut self) -> Result<(), Status> {
        if self.upload.is_none() {
            let data = self.pending.split().freeze();
            return self.s3.put(&self.key, data).await.map(drop);
        }
        if !self.pending.is_empty() {
            let part = self.pending.split().freeze();
            self.send(part).await?;
        }
        self.settle().await?;
        let upload = self.upload.clone().unwrap_or_default();
        let parts: Vec<(u16, &str)> = self.sent_parts.iter().map(|(n, e)| (*n, e.as_str())).collect();
        self.s3
            .complete_numbered(&self.key, &upload, &parts, None)
            .await?;
        self.began = false;
        Ok(())
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
