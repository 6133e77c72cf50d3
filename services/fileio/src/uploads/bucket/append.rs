//! An append to an upload in a bucket: its bytes go to the upload's multipart upload as
//! parts (after what waited in the buffer), or, for a Nextcloud chunk ahead of its turn,
//! to an object of their own until the chunks before it came. Only the state written at
//! the end makes them count: parts sent by an append that failed are numbered past the
//! counted ones, so the next append sends over them and the completion leaves them out.

use super::BucketUploads;
use super::parts::{MAX_BUCKET_LENGTH, Parts};
use super::state::{self, Loaded};
use crate::digest::{Digester, RunningSha1};
use crate::s3::S3Client;
use crate::uploads::UploadSettings;
use crate::uploads::chunks::{Turn, turn_of};
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::BodyExt;
use kubedav_api::BoxStream;
use kubedav_api::uploads::{AppendHeader, Upload};
use tonic::Status;

/// Where an append's bytes go.
enum Sink {
    /// After the bytes counted: into the upload's parts.
    Next(Parts),
    /// A chunk ahead of its turn, into the object of its own.
    Ahead { key: u64, parts: Parts },
    /// A chunk placed already, sent again: its bytes are counted, not kept (see
    /// docs/uploads.md).
    Again { at: u64, length: Option<u64> },
}

impl BucketUploads {
    pub(super) async fn append_now(
        &self,
        header: AppendHeader,
        mut data: BoxStream<Bytes>,
    ) -> Result<Upload, Status> {
        let mut loaded = state::load(&self.s3, &self.base, &self.settings, &header.id, &header.owner).await?;
        if loaded.leased(&self.settings) {
            return Err(state::busy());
        }
        let before = loaded.state.clone();
        let turn = match &header.chunk {
            Some(chunk) => Some(turn_of(&loaded.state.record, chunk)?),
            None => None,
        };
        crate::uploads::admit(
            &mut loaded.state.record,
            &header,
            matches!(turn, Some(Turn::Again { .. })),
        )?;
        let digester = match &header.checksum {
            Some(sum) => Digester::for_checksums(std::slice::from_ref(sum), &[])?,
            None => None,
        };
        loaded.take(&self.s3, &self.settings).await?;
        match self
            .receive(
                &mut loaded,
                &header,
                turn,
                &mut data,
                digester,
                before.record.length,
            )
            .await
        {
            // A body that broke off keeps what arrived (without a checksum), and the
            // client learns that it broke.
            Ok((_, Some(broke))) => Err(broke),
            Ok((upload, None)) => Ok(upload),
            Err(status) => {
                // Nothing of it counts: the state goes back as it was, its lease given up.
                loaded.put_back(&self.s3, before).await;
                Err(status)
            }
        }
    }

    /// Receives the append's bytes under the lease, and writes the state that counts
    /// them: the upload, and how the body broke off if it did.
    async fn receive(
        &self,
        loaded: &mut Loaded,
        header: &AppendHeader,
        turn: Option<Turn>,
        data: &mut BoxStream<Bytes>,
        mut digester: Option<Digester>,
        length_before: Option<u64>,
    ) -> Result<(Upload, Option<Status>), Status> {
        let (s3, settings) = (&self.s3, &*self.settings);
        let record = &loaded.state.record;
        // A chunk carries the upload's SHA-1 on over the bytes it adds in order (one sent
        // again changes no byte here: see Sink::Again).
        let mut sha1 = match header.chunk {
            Some(_) => RunningSha1::resume(record.sha1.as_ref(), record.offset),
            None => None,
        };
        let (mut sink, start) = match turn {
            None | Some(Turn::Next) => {
                let pending = self.buffered(loaded).await?;
                let mut parts = Parts::new(
                    s3,
                    loaded.state.key.clone(),
                    Some(loaded.state.multipart.clone()),
                    loaded.lease().first_part,
                    pending,
                );
                parts.expect(header.bytes);
                (Sink::Next(parts), record.offset)
            }
            Some(Turn::Ahead) => {
                let key = header.chunk.as_ref().map_or(0, |chunk| chunk.key);
                let chunks = record.chunks.clone().unwrap_or_default();
                // By offset a chunk's key says where it lies; a numbered one's place is
                // not known yet, so what is kept aside together must still fit.
                let start = match chunks.by_offset {
                    true => key,
                    false => {
                        let aside: u64 = chunks
                            .aside
                            .iter()
                            .filter(|(k, _)| **k != key)
                            .map(|(_, v)| v)
                            .sum();
                        record.offset.saturating_add(aside)
                    }
                };
                let parts = Parts::new(s3, loaded.folder.aside(key), None, 1, Bytes::new());
                (Sink::Ahead { key, parts }, start)
            }
            Some(Turn::Again { at, length }) => (Sink::Again { at, length }, at),
        };
        let mut written = 0u64;
        let mut broke = None;
        while let Some(item) = loaded.held(s3, settings, data.next()).await? {
            let bytes = match item {
                Ok(bytes) => bytes,
                Err(status) => {
                    broke = Some(status);
                    break;
                }
            };
            let end = start.saturating_add(written).saturating_add(bytes.len() as u64);
            crate::uploads::check_end(end, loaded.state.record.length, MAX_BUCKET_LENGTH)?;
            if let Some(digester) = &mut digester {
                digester.update(&bytes);
            }
            match &mut sink {
                Sink::Next(parts) => {
                    if let Some(sha1) = &mut sha1 {
                        sha1.update(&bytes);
                    }
                    loaded
                        .reserve(s3, settings, parts.highest_after(bytes.len()))
                        .await?;
                    loaded.held(s3, settings, parts.push(bytes.clone())).await??;
                }
                Sink::Ahead { parts, .. } => loaded.held(s3, settings, parts.push(bytes.clone())).await??,
                Sink::Again { .. } => {}
            }
            written += bytes.len() as u64;
        }
        let complete = broke.is_none();
        // From here `broke` is only reported: what arrived counts when it may.
        if let Some(digester) = digester {
            if !complete {
                return Err(Status::cancelled(
                    "the data broke off; none of it was kept, since it named a checksum",
                ));
            }
            digester.finish(&loaded.state.record.target)?;
        }
        let chunk = header.chunk.is_some();
        if chunk && !complete {
            return Err(Status::cancelled(
                "the chunk broke off; none of it was kept: send it again",
            ));
        }
        if let Some(size) = header.chunk.as_ref().and_then(|c| c.size)
            && size != written
        {
            return Err(Status::invalid_argument(format!(
                "the chunk's name says {size} bytes, but {written} arrived; none of it was kept"
            )));
        }
        // Objects that the state written at the end no longer names.
        let mut unnamed = Vec::new();
        match sink {
            Sink::Next(mut parts) => {
                loaded.state.record.offset += written;
                if chunk {
                    unnamed = self.assemble(loaded, &mut parts, written, sha1.as_mut()).await?;
                }
                let (parts, tail) = loaded.held(s3, settings, parts.finish()).await??;
                self.keep_tail(loaded, &parts, tail, &mut unnamed).await?;
                let state = &mut loaded.state;
                state.parts.extend(parts.sent_parts.iter().cloned());
            }
            Sink::Ahead { key, parts } => {
                loaded.held(s3, settings, parts.into_object()).await??;
                if let Some(chunks) = loaded.state.record.chunks.as_mut() {
                    chunks.aside.insert(key, written);
                }
            }
            Sink::Again { at, length } => {
                if length.is_some_and(|length| length != written) || at + written > loaded.state.record.offset
                {
                    let key = header.chunk.as_ref().map_or(0, |c| c.key);
                    return Err(Status::invalid_argument(format!(
                        "chunk {key} arrived before with other bounds than these {written} bytes; \
                         a chunk cannot change its size (start a new upload)"
                    )));
                }
            }
        }
        let state = &mut loaded.state;
        state.record.sha1 = sha1.and_then(|sha1| sha1.carried(state.record.offset));
        // Only data renews the expiry: empty requests cannot keep an upload forever.
        if written > 0 || chunk || state.record.length != length_before {
            state.record.touched_unix_ns = settings.now_ns();
        }
        state.lease = None;
        loaded.save(s3).await?;
        for key in unnamed {
            let _ = s3.delete(&key).await;
        }
        Ok((settings.describe(&loaded.id, &loaded.state.record), broke))
    }

    /// Keeps what is left under a part at the end of a request in the buffer: when a
    /// part went, the buffer held before is in it, and the tail (all new bytes, as the
    /// buffer held under a part) is its new first piece; otherwise the new bytes are one
    /// more piece after the pieces held. So a byte is written at most twice.
    async fn keep_tail(
        &self,
        loaded: &mut Loaded,
        parts: &Parts,
        tail: Bytes,
        unnamed: &mut Vec<String>,
    ) -> Result<(), Status> {
        let held = loaded.state.buffered();
        let new = match parts.sent_parts.is_empty() {
            true => tail.slice(usize::try_from(held).unwrap_or(usize::MAX).min(tail.len())..),
            false => {
                unnamed.extend(loaded.state.buffer.drain(..).map(|(key, _)| key));
                tail
            }
        };
        if !new.is_empty() {
            let at = loaded.state.record.offset - new.len() as u64;
            let key = loaded.folder.buffer_piece(&loaded.lease().holder, at);
            let size = new.len() as u64;
            loaded
                .held(&self.s3, &self.settings, self.s3.put(&key, new))
                .await??;
            loaded.state.buffer.push((key, size));
        }
        Ok(())
    }

    /// The bytes waiting in the upload's buffer, its pieces in order.
    pub(super) async fn buffered(&self, loaded: &Loaded) -> Result<Bytes, Status> {
        let mut all = bytes::BytesMut::new();
        for (key, size) in &loaded.state.buffer {
            let data = self.s3.get(key).await?;
            let wanted = usize::try_from(*size).unwrap_or(usize::MAX);
            if data.len() != wanted {
                return Err(Status::internal(format!(
                    "the upload's buffer {key} holds {} bytes, not {wanted}: cancel the upload and start again",
                    data.len()
                )));
            }
            all.extend_from_slice(&data);
        }
        Ok(all.freeze())
    }

    /// Sends into `parts` the chunks kept aside that are next now, in order, and counts
    /// them as placed (`placed` bytes of the chunk just received placed before them):
    /// the keys of their objects, to remove once the state no longer lists them. An
    /// object that is gone counts as not arrived.
    async fn assemble(
        &self,
        loaded: &mut Loaded,
        parts: &mut Parts,
        placed: u64,
        mut sha1: Option<&mut RunningSha1>,
    ) -> Result<Vec<String>, Status> {
        let mut consumed = Vec::new();
        let Some(mut chunks) = loaded.state.record.chunks.take() else {
            return Ok(consumed);
        };
        if !chunks.by_offset {
            chunks.placed.push(placed);
        }
        let result = async {
            while let Some(length) = chunks
                .aside
                .get(&chunks.next_key(loaded.state.record.offset))
                .copied()
            {
                let key = chunks.next_key(loaded.state.record.offset);
                let object = loaded.folder.aside(key);
                let into = Into {
                    parts: &mut *parts,
                    sha1: sha1.as_deref_mut(),
                };
                if !stream_into(&self.s3, &object, length, into, loaded, &self.settings).await? {
                    chunks.aside.remove(&key);
                    break;
                }
                chunks.aside.remove(&key);
                if !chunks.by_offset {
                    chunks.placed.push(length);
                }
                loaded.state.record.offset += length;
                consumed.push(object);
            }
            Ok::<_, Status>(())
        }
        .await;
        loaded.state.record.chunks = Some(chunks);
        result.map(|()| consumed)
    }
}

/// Where a chunk kept aside goes when its turn came.
struct Into<'a> {
    parts: &'a mut Parts,
    sha1: Option<&'a mut RunningSha1>,
}

/// Sends the `length` bytes of the object `key` into `into`, under `loaded`'s lease;
/// false when there is no such object.
async fn stream_into(
    s3: &S3Client,
    key: &str,
    length: u64,
    into: Into<'_>,
    loaded: &mut Loaded,
    settings: &UploadSettings,
) -> Result<bool, Status> {
    let Some(opened) = s3.open(key, None, None).await? else {
        return Ok(false);
    };
    if opened.info.size != length {
        return Err(Status::internal(format!(
            "the chunk kept as {key} has {} bytes, not {length}: cancel the upload and start again",
            opened.info.size
        )));
    }
    let Into { parts, mut sha1 } = into;
    let mut body = opened.body;
    while let Some(frame) = loaded.held(s3, settings, body.frame()).await? {
        let frame = frame
            .map_err(|e| Status::unavailable(format!("reading {key} from the S3 server broke off: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if let Some(sha1) = sha1.as_deref_mut() {
                sha1.update(&data);
            }
            loaded
                .reserve(s3, settings, parts.highest_after(data.len()))
                .await?;
            loaded.held(s3, settings, parts.push(data)).await??;
        }
    }
    Ok(true)
}
