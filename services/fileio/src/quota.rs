//! RFC 4331 quota, over either backend: on the served root (`--quota-bytes`), and on the
//! quota roots of the access policy (`--policy`: each home, each `quota.paths` entry).
//!
//! [`QuotaFileIo`] wraps any [`FileIo`]. Every file counts against each quota root on its
//! way ([`QuotaRoots`]). It counts the bytes of the files below each root as writes,
//! deletes, copies and moves go through it, refuses with RESOURCE_EXHAUSTED (507) a write
//! that would pass a quota on its way (before any byte is stored when the size is
//! declared; as soon as the body passes it otherwise, and then nothing is stored), a copy
//! or a move that would bring a root past its quota, and answers `Usage` for the nearest
//! root holding the path. The counts start from a listing of the whole tree, in the
//! background, once at start and again every rescan period, which also corrects what the
//! counts cannot follow: changes made by other replicas or other tools, and trees
//! deleted (those start a rescan at once instead of being walked).

use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::fileio::{
    CopyRequest, DeleteRequest, DeleteResponse, Depth, FileInfo, FileIo, ListRequest, ListResponse,
    MkdirRequest, MkdirResponse, MoveRequest, PatchPropertiesRequest, PatchPropertiesResponse, ReadReply,
    ReadRequest, StatRequest, TransferResponse, UsageRequest, UsageResponse, WriteHeader, WriteResponse,
};
use kubedav_api::path::VolumePath;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::Status;

/// A quota root: a tree whose files may hold at most `limit` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// The root of the tree ("" for the served root).
    pub path: VolumePath,
    /// Its limit in bytes.
    pub limit: u64,
}

/// Where the quotas are.
pub trait QuotaRoots: Send + Sync + 'static {
    /// Every quota root on the way to `path` (the path itself included), outermost
    /// first; the last is the one RFC 4331's properties report.
    fn roots_of(&self, path: &VolumePath) -> Vec<Root>;
}

/// One quota on the whole served tree (`--quota-bytes`).
pub struct WholeTree(pub u64);

impl QuotaRoots for WholeTree {
    fn roots_of(&self, _path: &VolumePath) -> Vec<Root> {
        vec![Root {
            path: VolumePath::root(),
            limit: self.0,
        }]
    }
}

/// What fileio keeps of deleted and replaced content (docs/trash-and-versions.md), as the
/// quotas see it: it stays counted in its roots, and goes first, oldest first, when a
/// write would not fit.
pub trait Kept: Send + Sync + 'static {
    /// Whether deletes keep what they remove (a trash), and overwrites what they replace
    /// (versions).
    fn keeps(&self) -> (bool, bool);
    /// Everything kept: the path each thing counts at, and its bytes (blocking).
    fn counted(&self) -> Result<Vec<(VolumePath, u64)>, Status>;
    /// Removes the oldest things kept beneath `root` until `need` bytes are freed or
    /// none is left; the bytes freed and how many things went (blocking).
    fn make_room(&self, root: &VolumePath, need: u64) -> Result<(u64, u64), Status>;
}

/// The bytes below one root, as counted.
#[derive(Default, Clone, Copy)]
struct Count {
    used: i64,
    /// What writes changed since the current count from a listing began: added to its
    /// result, since the listing may not have seen them (one it did see is counted
    /// twice until the next count: too much, never too little).
    since_scan: i64,
}

/// The counts of every root met, by the root's path.
type Counts = Arc<Mutex<HashMap<VolumePath, Count>>>;

/// A backend whose files are held to the quotas of [`QuotaRoots`].
pub struct QuotaFileIo {
    inner: Arc<dyn FileIo>,
    roots: Arc<dyn QuotaRoots>,
    /// The trash and versions, once set ([`QuotaFileIo::keeping`]).
    kept: Arc<std::sync::OnceLock<Arc<dyn Kept>>>,
    counts: Counts,
    /// Wakes the scanner for a rescan.
    rescan: Arc<tokio::sync::Notify>,
    /// How many counts have finished.
    finished: tokio::sync::watch::Receiver<u64>,
}

impl QuotaFileIo {
    /// Wraps `inner` with a quota of `limit` bytes on the whole tree, counted from a
    /// listing every `period` (and at start). Must be called within a tokio runtime.
    pub fn new(inner: Arc<dyn FileIo>, limit: u64, period: Duration) -> Self {
        Self::with_roots(inner, Arc::new(WholeTree(limit)), period)
    }

    /// Wraps `inner` with the quotas of `roots`, counted from a listing every `period`
    /// (and at start). Must be called within a tokio runtime.
    pub fn with_roots(inner: Arc<dyn FileIo>, roots: Arc<dyn QuotaRoots>, period: Duration) -> Self {
        let counts = Counts::default();
        let rescan = Arc::new(tokio::sync::Notify::new());
        let kept = Arc::new(std::sync::OnceLock::new());
        let (finish, finished) = tokio::sync::watch::channel(0);
        tokio::spawn(scan_forever(
            Scanned {
                inner: inner.clone(),
                roots: roots.clone(),
                kept: kept.clone(),
                finish,
            },
            counts.clone(),
            rescan.clone(),
            period,
        ));
        Self {
            inner,
            roots,
            kept,
            counts,
            rescan,
            finished,
        }
    }

    /// Waits until `n` counts have finished since the start (the first at start, the
    /// second once [`QuotaFileIo::keeping`] is given): a test's writes then meet no
    /// count in progress, which counts a write it sees twice until the next one.
    pub async fn counts_finished(&self, n: u64) {
        let mut finished = self.finished.clone();
        let _ = finished.wait_for(|done| *done >= n).await;
    }

    /// Counts what `kept` keeps (trash, versions) in the roots, and removes its oldest
    /// things from a root before refusing a write the root has no room for.
    pub fn keeping(self, kept: Arc<dyn Kept>) -> Self {
        let _ = self.kept.set(kept);
        self.rescan.notify_one();
        self
    }

    /// Whether deletes keep what they remove, and overwrites what they replace.
    fn keeps(&self) -> (bool, bool) {
        self.kept.get().map_or((false, false), |kept| kept.keeps())
    }

    /// [`QuotaFileIo::admit`], after making room in each full root from what is kept
    /// there, oldest first.
    async fn admit_or_make_room(
        &self,
        path: &str,
        roots: &[Root],
        adding: u64,
        replacing: u64,
    ) -> Result<(), Status> {
        let refused = match self.admit(path, roots, adding, replacing) {
            Ok(()) => return Ok(()),
            Err(refused) => refused,
        };
        if self.kept.get().is_none() {
            return Err(refused);
        }
        self.make_room(path, roots, adding, replacing).await?;
        self.admit(path, roots, adding, replacing)
    }

    /// Removes the oldest things kept in each of `roots` that `adding` bytes (beyond
    /// `replacing`) would bring past its limit, until they fit or nothing is left.
    async fn make_room(&self, path: &str, roots: &[Root], adding: u64, replacing: u64) -> Result<(), Status> {
        let Some(kept) = self.kept.get().cloned() else {
            return Ok(());
        };
        for root in roots {
            let over = self
                .used(root)
                .saturating_sub(replacing)
                .saturating_add(adding)
                .saturating_sub(root.limit);
            if over == 0 {
                continue;
            }
            let (kept, at) = (kept.clone(), root.path.clone());
            let (freed, removed) = tokio::task::spawn_blocking(move || kept.make_room(&at, over))
                .await
                .map_err(|e| Status::internal(format!("making room failed: {e}")))??;
            if freed > 0 {
                crate::metrics::purged("quota", removed);
                tracing::info!(
                    target: "kubedav",
                    root = %root.path,
                    freed,
                    "quota: removed the oldest trash items and versions to make room for {path}"
                );
                // Exact: what was removed was counted at its declared size. No rescan
                // now: it would race the write this room is for, and count it twice.
                self.grew(&self.roots.roots_of(&root.path), -(freed as i64));
            }
        }
        Ok(())
    }

    fn roots_of(&self, path: &str) -> Vec<Root> {
        VolumePath::parse(path).map_or_else(|_| Vec::new(), |path| self.roots.roots_of(&path))
    }

    fn used(&self, root: &Root) -> u64 {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.get(&root.path).map_or(0, |c| c.used.max(0) as u64)
    }

    fn grew(&self, roots: &[Root], bytes: i64) {
        if bytes == 0 {
            return;
        }
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        for root in roots {
            let count = counts.entry(root.path.clone()).or_default();
            count.used += bytes;
            count.since_scan += bytes;
        }
    }

    /// RESOURCE_EXHAUSTED unless `adding` more bytes (beyond `replacing`, which they
    /// replace) fit in every one of `roots`.
    fn admit(&self, path: &str, roots: &[Root], adding: u64, replacing: u64) -> Result<(), Status> {
        for root in roots {
            let used = self.used(root);
            if used.saturating_sub(replacing).saturating_add(adding) > root.limit {
                return Err(exhausted(path, adding, root, used));
            }
        }
        Ok(())
    }

    /// The bytes a body may still bring, replacing `replacing`, in every one of `roots`,
    /// and the root that allows the fewest (for the refusal's message).
    fn room(&self, roots: &[Root], replacing: u64) -> Option<(u64, Root, u64)> {
        roots
            .iter()
            .map(|root| {
                let used = self.used(root);
                ((root.limit + replacing).saturating_sub(used), root.clone(), used)
            })
            .min_by_key(|(room, _, _)| *room)
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

    /// The bytes of `path`: a file's size, or the sum of a tree's files (a listing).
    async fn bytes_of(&self, path: &str) -> Result<u64, Status> {
        match self.file_size(path).await? {
            Some(bytes) => Ok(bytes),
            None => scan(self.inner.as_ref(), path, |_, _| {}).await,
        }
    }

    /// Admits a copy or move of `bytes` (those of `source`) onto `destination`, which
    /// replaces `replacing` there: the roots of the destination that do not hold the
    /// source already (for a move) must have room. Returns the roots it enters and those
    /// it leaves.
    fn admit_transfer(
        &self,
        source: &str,
        destination: &str,
        bytes: u64,
        replacing: u64,
        moving: bool,
    ) -> Result<(Vec<Root>, Vec<Root>), Status> {
        let (from, to) = (self.roots_of(source), self.roots_of(destination));
        let entered: Vec<Root> = to
            .iter()
            .filter(|root| !moving || !from.contains(root))
            .cloned()
            .collect();
        let left: Vec<Root> = from
            .into_iter()
            .filter(|root| moving && !to.contains(root))
            .collect();
        self.admit(destination, &entered, bytes, replacing)?;
        Ok((entered, left))
    }
}

fn exhausted(path: &str, adding: u64, root: &Root, used: u64) -> Status {
    let limit = root.limit;
    let whose = if root.path.is_root() {
        "the served root".to_owned()
    } else {
        root.path.to_string()
    };
    Status::resource_exhausted(format!(
        "the quota of {whose}, {limit} bytes, is reached ({used} used): {path} ({adding} bytes \
         or more) does not fit; nothing was written. Delete files there or ask for a larger quota"
    ))
}

/// What a count reads: the files, where the roots are, and what is kept.
struct Scanned {
    inner: Arc<dyn FileIo>,
    roots: Arc<dyn QuotaRoots>,
    kept: Arc<std::sync::OnceLock<Arc<dyn Kept>>>,
    /// Told each time a count finishes.
    finish: tokio::sync::watch::Sender<u64>,
}

/// Counts the bytes below every root with a listing of the whole tree (and of what is
/// kept), at start and every `period`, or at once when woken.
async fn scan_forever(scanned: Scanned, counts: Counts, rescan: Arc<tokio::sync::Notify>, period: Duration) {
    let Scanned {
        inner,
        roots,
        kept,
        finish,
    } = scanned;
    let mut first = true;
    loop {
        for count in counts.lock().unwrap_or_else(|e| e.into_inner()).values_mut() {
            count.since_scan = 0;
        }
        let mut totals: HashMap<VolumePath, i64> = HashMap::new();
        let mut counted = scan(inner.as_ref(), "", |path, size| {
            for root in roots.roots_of(path) {
                *totals.entry(root.path).or_default() += size as i64;
            }
        })
        .await;
        if let (Ok(total), Some(kept)) = (&mut counted, kept.get().cloned()) {
            match tokio::task::spawn_blocking(move || kept.counted()).await {
                Ok(Ok(things)) => {
                    for (path, size) in things {
                        *total = total.saturating_add(size);
                        for root in roots.roots_of(&path) {
                            *totals.entry(root.path).or_default() += size as i64;
                        }
                    }
                }
                Ok(Err(status)) => counted = Err(status),
                Err(e) => counted = Err(Status::internal(format!("counting the trash failed: {e}"))),
            }
        }
        match counted {
            Ok(total) => {
                let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
                for count in counts.values_mut() {
                    count.used = count.since_scan;
                }
                for (root, bytes) in totals {
                    counts.entry(root).or_default().used += bytes;
                }
                finish.send_modify(|done| *done += 1);
                if first {
                    tracing::info!(bytes = total, roots = counts.len(), "quota: usage counted");
                    first = false;
                } else {
                    tracing::debug!(bytes = total, roots = counts.len(), "quota: usage counted");
                }
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

/// The bytes of every file below `path` (a listing of the whole tree there), each file
/// also handed to `each` with its path and size.
async fn scan(inner: &dyn FileIo, path: &str, mut each: impl FnMut(&VolumePath, u64)) -> Result<u64, Status> {
    let mut batches = inner
        .list(ListRequest {
            path: path.to_owned(),
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
                if let Ok(file) = VolumePath::parse(&info.path) {
                    each(&file, info.size);
                }
            }
        }
    }
    Ok(total)
}

/// The body, failing with RESOURCE_EXHAUSTED once it passes `room` bytes, the room
/// `root` (with `used` bytes) leaves.
fn bounded(
    body: BoxStream<bytes::Bytes>,
    room: u64,
    path: String,
    root: Root,
    used: u64,
) -> BoxStream<bytes::Bytes> {
    let mut seen = 0u64;
    body.map(move |chunk| {
        let chunk = chunk?;
        seen += chunk.len() as u64;
        if seen > room {
            return Err(exhausted(&path, seen, &root, used));
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
        let roots = self.roots_of(&header.path);
        if roots.is_empty() {
            return self.inner.write(header, body).await;
        }
        // A replaced file kept as a version frees nothing.
        let versions = self.keeps().1;
        let replacing = match versions {
            true => 0,
            false => self.file_size(&header.path).await?.unwrap_or(0),
        };
        let adding = header.expected_size.unwrap_or(0);
        // The bytes of a version that has no room, when the write fits only if the
        // content it replaces is not kept: it goes ahead, and that version goes right
        // after it (a save is never refused for the sake of keeping what it replaces).
        let mut version_without_room = None;
        if header.no_purge {
            self.admit(&header.path, &roots, adding, replacing)?;
        } else if let Err(refused) = self
            .admit_or_make_room(&header.path, &roots, adding, replacing)
            .await
        {
            let there = match versions {
                true => self.file_size(&header.path).await?.unwrap_or(0),
                false => 0,
            };
            if there == 0 || self.admit(&header.path, &roots, adding, there).is_err() {
                return Err(refused);
            }
            version_without_room = Some(there);
        }
        let body = match self.room(&roots, version_without_room.unwrap_or(replacing)) {
            Some((room, root, used)) => bounded(body, room, header.path.clone(), root, used),
            None => body,
        };
        let path = header.path.clone();
        let reply = self.inner.write(header, body).await?;
        let size = reply.info.as_ref().map_or(0, |info| info.size);
        self.grew(&roots, size as i64 - replacing as i64);
        if version_without_room.is_some()
            && let Err(status) = self.make_room(&path, &roots, 0, 0).await
        {
            tracing::warn!(target: "kubedav", %path, "quota: the version kept of {path} was to go for want of room, and could not: {status}");
        }
        Ok(reply)
    }

    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status> {
        let roots = self.roots_of(&request.path);
        if roots.is_empty() {
            return self.inner.delete(request).await;
        }
        let size = self.file_size(&request.path).await?;
        let reply = self.inner.delete(request).await?;
        if !reply.trash_item.is_empty() {
            // In the trash, its bytes still count where they were.
            return Ok(reply);
        }
        match size {
            Some(bytes) if reply.failures.is_empty() => self.grew(&roots, -(bytes as i64)),
            _ => self.rescan.notify_one(),
        }
        Ok(reply)
    }

    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status> {
        self.inner.mkdir(request).await
    }

    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status> {
        if self.roots_of(&request.destination).is_empty() {
            return self.inner.copy(request).await;
        }
        // A tree's bytes come from a listing of it: more than a copy leaving members
        // out brings, never less; the next count corrects it.
        let (source_size, replacing) = tokio::try_join!(
            self.file_size(&request.source),
            self.file_size(&request.destination)
        )?;
        let tree = source_size.is_none();
        let bytes = match source_size {
            Some(bytes) => bytes,
            None => scan(self.inner.as_ref(), &request.source, |_, _| {}).await?,
        };
        let replacing = if self.keeps().1 { 0 } else { replacing.unwrap_or(0) };
        let (entered, _) =
            self.admit_transfer(&request.source, &request.destination, bytes, replacing, false)?;
        let reply = self.inner.copy(request).await?;
        self.grew(&entered, bytes as i64 - replacing as i64);
        if tree || !reply.failures.is_empty() {
            self.rescan.notify_one();
        }
        Ok(reply)
    }

    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status> {
        let (from, to) = (
            self.roots_of(&request.source),
            self.roots_of(&request.destination),
        );
        if from.is_empty() && to.is_empty() {
            return self.inner.r#move(request).await;
        }
        let replacing = match self.keeps() {
            // A replaced file kept as a version frees nothing.
            (_, true) => None,
            _ => self.file_size(&request.destination).await?,
        };
        // Only a move between roots needs the bytes it carries.
        let bytes = if from == to {
            0
        } else {
            self.bytes_of(&request.source).await?
        };
        let (entered, left) = self.admit_transfer(
            &request.source,
            &request.destination,
            bytes,
            replacing.unwrap_or(0),
            true,
        )?;
        let reply = self.inner.r#move(request).await?;
        if !reply.failures.is_empty() {
            self.rescan.notify_one();
            return Ok(reply);
        }
        match replacing {
            Some(old) => self.grew(&to, -(old as i64)),
            None => self.rescan.notify_one(),
        }
        self.grew(&entered, bytes as i64);
        self.grew(&left, -(bytes as i64));
        Ok(reply)
    }

    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status> {
        self.inner.patch_properties(request).await
    }

    /// The count against the nearest quota root holding the path (RFC 4331: used, and
    /// what is left of its quota); the backend's own figures where no root holds it.
    async fn usage(&self, request: UsageRequest) -> Result<UsageResponse, Status> {
        let Some(root) = self.roots_of(&request.path).pop() else {
            return self.inner.usage(request).await;
        };
        let used = self.used(&root);
        Ok(UsageResponse {
            used_bytes: used,
            available_bytes: root.limit.saturating_sub(used),
        })
    }

    fn kept_copy(&self, path: &str) -> Option<u64> {
        self.inner.kept_copy(path)
    }
}
