//! RFC 4331 quota on the served root (`--quota-bytes`), over either backend.
//!
//! [`QuotaFileIo`] wraps any [`FileIo`]: it counts the bytes of the files below the root
//! as writes, deletes and copies go through it, refuses with RESOURCE_EXHAUSTED (507) a
//! write that would pass the quota (before any byte is stored when the size is declared;
//! as soon as the body passes it otherwise, and then nothing is stored), and answers
//! `Usage` from its count. The count starts from a listing of the whole tree, in the
//! background, once at start and again every rescan period, which also corrects what
//! the count cannot follow: changes made by other replicas or other tools, and trees
//! deleted, copied or replaced (those start a rescan at once instead of being walked).

use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::fileio::{
    CopyRequest, DeleteRequest, DeleteResponse, Depth, FileInfo, FileIo, ListRequest, ListResponse,
    MkdirRequest, MkdirResponse, MoveRequest, PatchPropertiesRequest, PatchPropertiesResponse, ReadReply,
    ReadRequest, StatRequest, TransferResponse, UsageRequest, UsageResponse, WriteHeader, WriteResponse,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use tonic::Status;

/// A backend whose files may hold at most `limit` bytes in all.
pub struct QuotaFileIo {
    inner: Arc<dyn FileIo>,
    limit: u64,
    /// Bytes of the files below the root, as counted.
    used: Arc<AtomicI64>,
    /// What writes changed since the current count from a listing began: added to its
    /// result, since the listing may not have seen them (one it did see is counted
    /// twice until the next count: too much, never too little).
    since_scan: Arc<AtomicI64>,
    /// Wakes the scanner for a rescan.
    rescan: Arc<tokio::sync::Notify>,
}

impl QuotaFileIo {
    /// Wraps `inner` with a quota of `limit` bytes, counted from a listing every
    /// `period` (and at start). Must be called within a tokio runtime.
    pub fn new(inner: Arc<dyn FileIo>, limit: u64, period: Duration) -> Self {
        let used = Arc::new(AtomicI64::new(0));
        let since_scan = Arc::new(AtomicI64::new(0));
        let rescan = Arc::new(tokio::sync::Notify::new());
        let counts = Counts {
            used: used.clone(),
            since_scan: since_scan.clone(),
        };
        tokio::spawn(scan_forever(inner.clone(), counts, rescan.clone(), period));
        Self {
            inner,
            limit,
            used,
            since_scan,
            rescan,
        }
    }

    fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed).max(0) as u64
    }

    fn grew(&self, bytes: i64) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
        self.since_scan.fetch_add(bytes, Ordering::Relaxed);
    }

    /// RESOURCE_EXHAUSTED unless `adding` more bytes (beyond `replacing`, which they
    /// replace) fit.
    fn admit(&self, path: &str, adding: u64, replacing: u64) -> Result<(), Status> {
        let after = self.used().saturating_sub(replacing).saturating_add(adding);
        if after > self.limit {
            return Err(exhausted(path, adding, self.limit, self.used()));
        }
        Ok(())
    }

    /// The size of the file at `path`: `Some(0)` for nothing there, `None` for a
    /// collection.
    async fn file_size(&self, path: &str) -> Result<Option<u64>, Status> {
        match self
            .inner
            .stat(StatRequest {
                path: path.to_owned(),
            })
            .await
        {
            Ok(info) if info.is_collection => Ok(None),
            Ok(info) => Ok(Some(info.size)),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(Some(0)),
            Err(status) => Err(status),
        }
    }
}

fn exhausted(path: &str, adding: u64, limit: u64, used: u64) -> Status {
    Status::resource_exhausted(format!(
        "the quota of {limit} bytes is reached ({used} used): {path} ({adding} bytes or more) \
         does not fit; nothing was written. Delete files or ask for a larger --quota-bytes"
    ))
}

/// The counters a count from a listing sets.
struct Counts {
    used: Arc<AtomicI64>,
    since_scan: Arc<AtomicI64>,
}

/// Counts the bytes below the root with a listing of the whole tree, at start and every
/// `period`, or at once when woken.
async fn scan_forever(
    inner: Arc<dyn FileIo>,
    counts: Counts,
    rescan: Arc<tokio::sync::Notify>,
    period: Duration,
) {
    loop {
        counts.since_scan.store(0, Ordering::Relaxed);
        match scan(inner.as_ref()).await {
            Ok(total) => {
                let during = counts.since_scan.load(Ordering::Relaxed);
                counts.used.store(total as i64 + during, Ordering::Relaxed);
                tracing::debug!(bytes = total, "quota: usage counted");
            }
            Err(status) => {
                tracing::warn!(
                    error = status.message(),
                    "quota: the usage could not be counted; trying again later"
                );
            }
        }
        tokio::select! {
            () = rescan.notified() => {}
            () = tokio::time::sleep(period) => {}
        }
    }
}

/// The bytes of every file below the root.
async fn scan(inner: &dyn FileIo) -> Result<u64, Status> {
    let mut batches = inner
        .list(ListRequest {
            path: String::new(),
            depth: Depth::Infinity as i32,
            max_entries: 0,
            properties: None,
        })
        .await?;
    let mut total = 0u64;
    while let Some(batch) = batches.next().await {
        for entry in batch?.entries {
            if let Some(info) = entry.info.filter(|i| !i.is_collection) {
                total = total.saturating_add(info.size);
            }
        }
    }
    Ok(total)
}

/// The body, failing with RESOURCE_EXHAUSTED once it passes `room` bytes.
fn bounded(
    body: BoxStream<bytes::Bytes>,
    room: u64,
    path: String,
    limit: u64,
    used: u64,
) -> BoxStream<bytes::Bytes> {
    let mut seen = 0u64;
    body.map(move |chunk| {
        let chunk = chunk?;
        seen += chunk.len() as u64;
        if seen > room {
            return Err(exhausted(&path, seen, limit, used));
        }
        Ok(chunk)
    })
    .boxed()
}

// Every method is written out, so a method the port gains with a default cannot be
// left to that default here, bypassing the backend's own (clippy checks it).
#[async_trait::async_trait]
#[deny(clippy::missing_trait_methods)]
impl FileIo for QuotaFileIo {
    async fn stat(&self, request: StatRequest) -> Result<FileInfo, Status> {
        self.inner.stat(request).await
    }

    async fn list(&self, request: ListRequest) -> Result<BoxStream<ListResponse>, Status> {
        self.inner.list(request).await
    }

    async fn read(&self, request: ReadRequest) -> Result<ReadReply, Status> {
        self.inner.read(request).await
    }

    async fn read_to_send(&self, request: ReadRequest, map_above: u64) -> Result<ReadReply, Status> {
        self.inner.read_to_send(request, map_above).await
    }

    async fn write(
        &self,
        header: WriteHeader,
        body: BoxStream<bytes::Bytes>,
    ) -> Result<WriteResponse, Status> {
        let replacing = self.file_size(&header.path).await?.unwrap_or(0);
        self.admit(&header.path, header.expected_size.unwrap_or(0), replacing)?;
        let room = (self.limit + replacing).saturating_sub(self.used());
        let body = bounded(body, room, header.path.clone(), self.limit, self.used());
        let reply = self.inner.write(header, body).await?;
        let size = reply.info.as_ref().map_or(0, |info| info.size);
        self.grew(size as i64 - replacing as i64);
        Ok(reply)
    }

    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status> {
        let size = self.file_size(&request.path).await?;
        let reply = self.inner.delete(request).await?;
        match size {
            Some(bytes) if reply.failures.is_empty() => self.grew(-(bytes as i64)),
            _ => self.rescan.notify_one(),
        }
        Ok(reply)
    }

    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status> {
        self.inner.mkdir(request).await
    }

    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status> {
        let (source, replacing) = tokio::try_join!(
            self.file_size(&request.source),
            self.file_size(&request.destination)
        )?;
        match source {
            Some(bytes) => self.admit(&request.destination, bytes, replacing.unwrap_or(0))?,
            // A tree: admitted while there is room at all, then counted again.
            None => self.admit(&request.destination, 1, 0)?,
        }
        let reply = self.inner.copy(request).await?;
        match (source, replacing) {
            (Some(bytes), Some(old)) => self.grew(bytes as i64 - old as i64),
            _ => self.rescan.notify_one(),
        }
        Ok(reply)
    }

    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status> {
        let replacing = self.file_size(&request.destination).await?;
        let reply = self.inner.r#move(request).await?;
        match replacing {
            Some(bytes) => self.grew(-(bytes as i64)),
            None => self.rescan.notify_one(),
        }
        Ok(reply)
    }

    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status> {
        self.inner.patch_properties(request).await
    }

    /// The count against the quota (RFC 4331: used, and what is left of the quota).
    async fn usage(&self, _request: UsageRequest) -> Result<UsageResponse, Status> {
        let used = self.used();
        Ok(UsageResponse {
            used_bytes: used,
            available_bytes: self.limit.saturating_sub(used),
        })
    }

    fn kept_copy(&self, path: &str) -> Option<u64> {
        self.inner.kept_copy(path)
    }
}
