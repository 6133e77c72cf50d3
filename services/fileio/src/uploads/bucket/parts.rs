//! Bytes on their way into a multipart upload, in parts of [`PART_BYTES`]. When the
//! request says how many bytes it carries, a part is sent as its bytes arrive (an
//! UploadPart whose length is known before its bytes are), so they flow on to the bucket
//! while the request is received; otherwise each part is gathered, then sent while the
//! next gathers. Either way at most two parts are in memory (16 MiB), and what is left
//! under a part at the end (a cut part's bytes included) is handed back for the buffer.
//! Every part but an upload's last is [`PART_BYTES`], so 10,000 parts hold
//! [`MAX_BUCKET_LENGTH`].

use crate::objects::write::PART_BYTES;
use crate::s3::S3Client;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::Status;

/// S3's most parts of one upload.
pub(super) const MAX_PARTS: usize = 10_000;
/// The most bytes an upload in a bucket may hold: 10,000 parts of [`PART_BYTES`].
pub(crate) const MAX_BUCKET_LENGTH: u64 = MAX_PARTS as u64 * PART_BYTES as u64;
/// Pieces of a streamed part waiting for the S3 connection.
const STREAM_DEPTH: usize = 8;

/// A part sent: its number and ETag.
type Sent = (u16, String);

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
    /// The bytes of the part being gathered or streamed, in order.
    pending: VecDeque<Bytes>,
    pending_len: usize,
    /// The bytes the request will still push, when it said.
    expected: Option<u64>,
    /// The part being streamed: where its bytes go, and how many it still takes.
    streaming: Option<(mpsc::Sender<Bytes>, usize)>,
    in_flight: Option<JoinHandle<Result<Sent, Status>>>,
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
        let pending_len = pending.len();
        Self {
            s3: s3.clone(),
            key,
            upload,
            began: false,
            next: first,
            sent_parts: Vec::new(),
            pending: VecDeque::from_iter((!pending.is_empty()).then_some(pending)),
            pending_len,
            expected: None,
            streaming: None,
            in_flight: None,
        }
    }

    /// Tells the writer how many bytes will be pushed, so parts can be sent as they
    /// arrive.
    pub(super) fn expect(&mut self, bytes: Option<u64>) {
        self.expected = bytes;
    }

    /// The highest part number sending `extra` more bytes may use.
    pub(super) fn highest_after(&self, extra: usize) -> u16 {
        let parts = u16::try_from((self.pending_len + extra) / PART_BYTES).unwrap_or(u16::MAX);
        self.next.saturating_add(parts)
    }

    /// Adds `data`, sending parts as they fill (or as their bytes arrive).
    pub(super) async fn push(&mut self, mut data: Bytes) -> Result<(), Status> {
        if let Some(expected) = &mut self.expected {
            *expected = expected.saturating_sub(data.len() as u64);
        }
        while !data.is_empty() {
            let coming = self
                .expected
                .map(|more| self.pending_len as u64 + data.len() as u64 + more);
            if self.streaming.is_none() && coming.is_some_and(|all| all >= PART_BYTES as u64) {
                self.start_streaming().await?;
            }
            let Some((tx, left)) = &mut self.streaming else {
                self.pending_len += data.len();
                self.pending.push_back(data);
                while self.pending_len >= PART_BYTES {
                    let part = self.take_part();
                    self.send(part).await?;
                }
                return Ok(());
            };
            let piece = data.split_to((*left).min(data.len()));
            *left -= piece.len();
            let done = *left == 0;
            self.pending_len += piece.len();
            self.pending.push_back(piece.clone());
            if tx.send(piece).await.is_err() {
                // The part's request ended before its bytes did: its answer says why.
                self.streaming = None;
                self.settle().await?;
                return Err(Status::unavailable(
                    "a part's upload to the S3 server ended early",
                ));
            }
            if done {
                self.streaming = None;
                self.pending.clear();
                self.pending_len = 0;
            }
        }
        Ok(())
    }

    /// The next part's number, refused past S3's last.
    fn number(&mut self) -> Result<u16, Status> {
        let number = self.next;
        if usize::from(number) > MAX_PARTS {
            return Err(Status::out_of_range(format!(
                "an upload's length on object storage may be at most {MAX_BUCKET_LENGTH} bytes \
                 ({MAX_PARTS} parts of {} MiB)",
                PART_BYTES >> 20
            )));
        }
        self.next += 1;
        Ok(number)
    }

    /// The upload's id, begun now if it has none.
    async fn upload(&mut self) -> Result<String, Status> {
        if let Some(upload) = &self.upload {
            return Ok(upload.clone());
        }
        let upload = self.s3.start_upload(&self.key).await?;
        self.began = true;
        self.upload = Some(upload.clone());
        Ok(upload)
    }

    /// Starts the part whose bytes are the pending ones and those that come next.
    async fn start_streaming(&mut self) -> Result<(), Status> {
        self.settle().await?;
        let (number, upload) = (self.number()?, self.upload().await?);
        let (tx, rx) = mpsc::channel(STREAM_DEPTH);
        let (s3, key) = (self.s3.clone(), self.key.clone());
        let size = PART_BYTES as u64;
        self.in_flight = Some(tokio::spawn(async move {
            let etag = s3.upload_part_streamed(&key, &upload, number, size, rx).await?;
            Ok((number, etag))
        }));
        for piece in self.pending.iter().cloned() {
            if tx.send(piece).await.is_err() {
                self.settle().await?;
                return Err(Status::unavailable(
                    "a part's upload to the S3 server ended early",
                ));
            }
        }
        self.streaming = Some((tx, PART_BYTES - self.pending_len));
        Ok(())
    }

    /// The first [`PART_BYTES`] of the pending bytes.
    fn take_part(&mut self) -> Bytes {
        let mut part = BytesMut::with_capacity(PART_BYTES);
        while part.len() < PART_BYTES {
            let Some(mut piece) = self.pending.pop_front() else {
                break;
            };
            if part.len() + piece.len() > PART_BYTES {
                let rest = piece.split_off(PART_BYTES - part.len());
                self.pending.push_front(rest);
            }
            part.extend_from_slice(&piece);
        }
        self.pending_len -= part.len();
        part.freeze()
    }

    /// Waits for the part in flight, then sends `part` whole.
    async fn send(&mut self, part: Bytes) -> Result<(), Status> {
        self.settle().await?;
        let (number, upload) = (self.number()?, self.upload().await?);
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

    /// All pending bytes, as one.
    fn take_pending(&mut self) -> Bytes {
        let mut all = BytesMut::with_capacity(self.pending_len);
        for piece in self.pending.drain(..) {
            all.extend_from_slice(&piece);
        }
        self.pending_len = 0;
        all.freeze()
    }

    /// Waits for every whole part: what is left under a part (a part cut short by the
    /// request's end included), to keep in the buffer.
    pub(super) async fn finish(mut self) -> Result<(Self, Bytes), Status> {
        if self.streaming.take().is_some() {
            // Its bytes did not all come: the part is dropped, its bytes kept below.
            if let Some(cut) = self.in_flight.take() {
                cut.abort();
            }
        } else {
            self.settle().await?;
        }
        let tail = self.take_pending();
        Ok((self, tail))
    }

    /// Makes the bytes pushed the object `key`: one PutObject when no part went, else
    /// the rest as the last part and the upload completed.
    pub(super) async fn into_object(mut self) -> Result<(), Status> {
        if self.upload.is_none() {
            let data = self.take_pending();
            return self.s3.put(&self.key, data).await.map(drop);
        }
        if self.pending_len > 0 {
            let part = self.take_pending();
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
        let in_flight = self.in_flight.take();
        if !self.began {
            if let Some(part) = in_flight {
                part.abort();
            }
            return;
        }
        if let (Some(upload), Ok(runtime)) = (self.upload.clone(), tokio::runtime::Handle::try_current()) {
            let (s3, key) = (self.s3.clone(), self.key.clone());
            runtime.spawn(async move {
                // The part in flight finishes first, as an interrupted PUT's does
                // (`objects::write`): one completed after the abort could bring the
                // upload back. A part streamed from a request that ended fails at once.
                if let Some(part) = in_flight {
                    let _ = part.await;
                }
                let _ = s3.abort_upload(&key, &upload).await;
            });
        }
    }
}
