//! The fileio conformance suite: one set of cases, each run in this process against every
//! implementation of the `FileIo` port a gateway may hold: the volume core (`LocalFileIo`
//! on a temporary directory), the object-storage core (`ObjectFileIo` on a real versitygw,
//! `kubedav_testkit::S3Server`, which `scripts/need-versitygw.sh` builds; without it the
//! suite fails, as every S3 suite does), and each wrapper over each core: `QuotaFileIo`,
//! `LeasedFileIo`, the gateway's `CachedFileIo` over a leased core (as `--target=all`
//! keeps it), and that over a quota, in the order `services/kubedav/src/run.rs` stacks
//! them with `--quota-bytes`. Each case is one test, `conformance::<case>`, that runs it
//! against the ten at once and names those it failed on.
//!
//! The contract is the port's: `proto/kubedav/fileio/v1/fileio.proto` and the error table
//! of docs/architecture.md. A wrapper must answer as what it wraps does, except where it
//! is there to differ (the quota's usage and refusals, the cache's `kept_copy`); every
//! wrapper sits over a [`Probe`], which shows that the port's default methods
//! (`read_to_send`, `kept_copy`) reach what the wrapper wraps instead of the defaults
//! answering for it.
//!
//! The cases named `special_names_*` hold the keys with `&`, `<`, `>`, `"`, `'`, `%`,
//! `+`, spaces and non-ASCII letters (see [`SPECIAL_NAMES`]).

use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::checksums::{Stored, checksums_property_name, is_reserved};
use kubedav_api::fileio::{
    CopyRequest, DeleteRequest, DeleteResponse, Depth, FileInfo, FileIo, ListEntry, ListRequest,
    ListResponse, MkdirRequest, MkdirResponse, MoveRequest, PatchPropertiesRequest, PatchPropertiesResponse,
    ReadHeader, ReadReply, ReadRequest, StatRequest, TransferResponse, UsageRequest, UsageResponse,
    WriteHeader, WriteResponse,
};
use kubedav_api::pb::fileio::v1::{
    ByteRangeSpec, Checksum, DeadProperty, PropertyName, PropertyOperation, PropertySelection,
    property_operation, property_selection,
};
use kubedav_fileio::quota::QuotaFileIo;
use kubedav_fileio::{LocalFileIo, ObjectFileIo};
use kubedav_gateway::cache::{CacheConfig, CachedFileIo};
use kubedav_lease::LeasedFileIo;
use kubedav_testkit::S3Server;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::{Code, Status};

/// Generates, for each case `async fn(&Subject)`, a test that runs it against every
/// implementation ([`IMPLEMENTATIONS`]) at once, and names each that failed.
macro_rules! for_each_case {
    ($($case:ident),* $(,)?) => {
        mod conformance {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::everywhere(stringify!($case), |subject| async move {
                        super::$case(&subject).await
                    })
                    .await
                }
            )*
        }
    };
}

for_each_case!(
    put_and_get_whole,
    ranges,
    read_to_send_gives_what_read_gives,
    stat_files_and_collections,
    list_by_depth,
    mkdir_cases,
    refused_writes_keep_the_old_content,
    delete_cases,
    copy_files,
    copy_trees,
    a_copy_leaves_out_what_it_is_told,
    move_files_and_trees,
    dead_properties,
    checksums_and_validators,
    usage_and_quota,
    kept_copy_is_forwarded_or_answered,
    malformed_paths_are_refused,
    special_names_round_trip,
    special_names_are_listed,
    special_names_copy_move_delete,
    special_names_keep_properties,
);

/// Every implementation under test, by name: each core bare and under each wrapper.
const IMPLEMENTATIONS: [(&str, Backend, Wrapper); 10] = [
    ("volume", Backend::Volume, Wrapper::Bare),
    ("volume_quota", Backend::Volume, Wrapper::Quota),
    ("volume_leased", Backend::Volume, Wrapper::Leased),
    ("volume_cached", Backend::Volume, Wrapper::Cached),
    ("volume_cached_quota", Backend::Volume, Wrapper::CachedQuota),
    ("s3", Backend::S3, Wrapper::Bare),
    ("s3_quota", Backend::S3, Wrapper::Quota),
    ("s3_leased", Backend::S3, Wrapper::Leased),
    ("s3_cached", Backend::S3, Wrapper::Cached),
    ("s3_cached_quota", Backend::S3, Wrapper::CachedQuota),
];

/// Runs `case` against every implementation at once, each on storage of its own (a
/// temporary directory, or a prefix of one bucket of one versitygw), and fails naming
/// every implementation it failed on. At once, because a leased core makes its first
/// change wait out the lease's grace period (half a second): one after the other, the
/// suite would mostly wait.
async fn everywhere<F, Fut>(case: &str, run: F)
where
    F: Fn(Subject) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let s3 = S3Server::start("suite");
    let mut runs = Vec::new();
    for (name, backend, wrapper) in IMPLEMENTATIONS {
        let subject = Subject::open(backend, wrapper, &s3, name).await;
        runs.push((
            name,
            tokio::spawn(tokio::time::timeout(CASE_TIMEOUT, run(subject))),
        ));
    }
    let mut failed = Vec::new();
    for (name, run) in runs {
        match run.await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => failed.push(format!("{name}: did not end within {CASE_TIMEOUT:?}")),
            Err(error) => {
                let message = match error.try_into_panic() {
                    Ok(panic) => panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "a panic".to_owned()),
                    Err(error) => error.to_string(),
                };
                failed.push(format!("{name}: {message}"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{case} failed on {} of {} implementations:\n{}",
        failed.len(),
        IMPLEMENTATIONS.len(),
        failed.join("\n")
    );
}

/// The longest a case may take on one implementation (it takes a second or two).
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the files are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    /// `LocalFileIo` on a temporary directory.
    Volume,
    /// `ObjectFileIo` on a prefix of a versitygw bucket.
    S3,
}

/// What stands between the caller and the core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wrapper {
    /// The core itself.
    Bare,
    /// `QuotaFileIo` of [`QUOTA_BYTES`].
    Quota,
    /// `LeasedFileIo`.
    Leased,
    /// `CachedFileIo` over `LeasedFileIo`, as `--target=all` holds fileio.
    Cached,
    /// `CachedFileIo` over `LeasedFileIo` over `QuotaFileIo`, as `--target=all` holds it
    /// with `--quota-bytes`.
    CachedQuota,
}

impl Wrapper {
    fn has_quota(self) -> bool {
        matches!(self, Wrapper::Quota | Wrapper::CachedQuota)
    }

    fn is_cached(self) -> bool {
        matches!(self, Wrapper::Cached | Wrapper::CachedQuota)
    }
}

/// The quota of the quota wrappers: room for every case but [`usage_and_quota`]'s
/// refused writes.
const QUOTA_BYTES: u64 = 1 << 20;

/// An implementation under test, with what it runs on.
struct Subject {
    fileio: Arc<dyn FileIo>,
    /// What the wrapper wraps (`None` for a bare core).
    probe: Option<Arc<Probe>>,
    /// The quota wrapper, for its readiness (`None` without one).
    quota: Option<Arc<QuotaFileIo>>,
    backend: Backend,
    wrapper: Wrapper,
    _dir: Option<tempfile::TempDir>,
}

impl std::ops::Deref for Subject {
    type Target = dyn FileIo;
    fn deref(&self) -> &Self::Target {
        &*self.fileio
    }
}

impl Subject {
    /// `wrapper` over a core on `backend`: a temporary directory, or the prefix `prefix`
    /// of the bucket of `s3`.
    async fn open(backend: Backend, wrapper: Wrapper, s3: &S3Server, prefix: &str) -> Subject {
        let (core, dir): (Arc<dyn FileIo>, _) = match backend {
            Backend::Volume => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let core = LocalFileIo::open(dir.path()).expect("a volume core");
                (Arc::new(core), Some(dir))
            }
            Backend::S3 => {
                let core = ObjectFileIo::open(&storage(s3, prefix))
                    .await
                    .expect("an object-storage core");
                (Arc::new(core), None)
            }
        };
        let probe = Arc::new(Probe::new(core.clone()));
        let under: Arc<dyn FileIo> = probe.clone();
        let quota = wrapper.has_quota().then(|| {
            Arc::new(QuotaFileIo::new(
                under.clone(),
                QUOTA_BYTES,
                Duration::from_secs(3600),
            ))
        });
        let fileio: Arc<dyn FileIo> = match (wrapper, &quota) {
            (Wrapper::Quota, Some(quota)) => quota.clone(),
            (Wrapper::CachedQuota, Some(quota)) => Arc::new(cached(LeasedFileIo::new(quota.clone()))),
            (Wrapper::Leased, _) => Arc::new(LeasedFileIo::new(under)),
            (Wrapper::Cached, _) => Arc::new(cached(LeasedFileIo::new(under))),
            _ => core,
        };
        Subject {
            fileio,
            probe: (wrapper != Wrapper::Bare).then_some(probe),
            quota,
            backend,
            wrapper,
            _dir: dir,
        }
    }
}

/// The gateway's cache in this process, as `run.rs` makes it (its copies in memory).
/// Every change here goes through it, so what it keeps is dropped by the lease, never
/// by age: a long freshness bound keeps the cases from depending on how fast they run.
fn cached(leased: LeasedFileIo) -> CachedFileIo {
    CachedFileIo::new(
        leased,
        CacheConfig {
            capacity_bytes: 16 << 20,
            freshness: Duration::from_secs(60),
            max_file_bytes: kubedav_gateway::cache::MAX_FILE_BYTES,
            copies: kubedav_zerocopy::CopyStore::Memory,
        },
    )
}

/// `--storage s3://BUCKET/PREFIX` on `server`, with the environment every AWS tool reads.
fn storage(server: &S3Server, prefix: &str) -> kubedav_fileio::objects::config::Storage {
    let endpoint = server.endpoint();
    let url = format!("s3://{}/{prefix}", server.bucket());
    kubedav_fileio::objects::config::parse(&url, |name| match name {
        "AWS_ENDPOINT_URL" => Some(endpoint.clone()),
        "AWS_REGION" => Some(kubedav_testkit::S3_REGION.to_owned()),
        "AWS_ACCESS_KEY_ID" => Some(kubedav_testkit::S3_ACCESS_KEY.to_owned()),
        "AWS_SECRET_ACCESS_KEY" => Some(kubedav_testkit::S3_SECRET_KEY.to_owned()),
        _ => None,
    })
    .expect("a storage URL")
}

/// What [`Probe::kept_copy`] answers for `path`: a wrapper that forwards `kept_copy`
/// answers it too.
fn probe_copy(path: &str) -> u64 {
    0x5EED_0000 + path.len() as u64
}

/// A core seen through a port that records what reaches it of the port's default
/// methods: `read_to_send` (with its `map_above`) and `kept_copy` (which it answers
/// with [`probe_copy`], where a core answers `None`). Everything else is the core's.
struct Probe {
    inner: Arc<dyn FileIo>,
    sends: Mutex<Vec<(String, u64)>>,
}

impl Probe {
    fn new(inner: Arc<dyn FileIo>) -> Self {
        Self {
            inner,
            sends: Mutex::default(),
        }
    }

    /// The `read_to_send` calls that reached the core: path and `map_above`.
    fn sends(&self) -> Vec<(String, u64)> {
        self.sends.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
#[deny(clippy::missing_trait_methods)]
impl FileIo for Probe {
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
        self.sends.lock().unwrap().push((request.path.clone(), map_above));
        self.inner.read_to_send(request, map_above).await
    }

    async fn write(&self, header: WriteHeader, body: BoxStream<Bytes>) -> Result<WriteResponse, Status> {
        self.inner.write(header, body).await
    }

    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status> {
        self.inner.delete(request).await
    }

    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status> {
        self.inner.mkdir(request).await
    }

    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status> {
        self.inner.copy(request).await
    }

    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status> {
        self.inner.r#move(request).await
    }

    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status> {
        self.inner.patch_properties(request).await
    }

    async fn usage(&self, request: UsageRequest) -> Result<UsageResponse, Status> {
        self.inner.usage(request).await
    }

    fn kept_copy(&self, path: &str) -> Option<u64> {
        Some(probe_copy(path))
    }
}

// ---------------------------------------------------------------------------------------
// Calls, as a caller of the port makes them.

/// `data` as a body, in chunks of at most 64 KiB.
fn body(data: &[u8]) -> BoxStream<Bytes> {
    let chunks: Vec<Result<Bytes, Status>> = data
        .chunks(64 * 1024)
        .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
        .collect();
    futures_util::stream::iter(chunks).boxed()
}

fn header(path: &str, size: usize) -> WriteHeader {
    WriteHeader {
        path: path.to_owned(),
        expected_size: Some(size as u64),
        ..WriteHeader::default()
    }
}

async fn write(fileio: &dyn FileIo, header: WriteHeader, data: &[u8]) -> Result<WriteResponse, Status> {
    fileio.write(header, body(data)).await
}

/// Writes `data` to `path`, which must succeed.
async fn put(fileio: &dyn FileIo, path: &str, data: &[u8]) -> WriteResponse {
    write(fileio, header(path, data.len()), data)
        .await
        .unwrap_or_else(|status| panic!("PUT {path:?}: {status:?}"))
}

/// A read's header and the data of each of its ranges, checking the chunks' range
/// indexes.
async fn read_reply(reply: Result<ReadReply, Status>) -> Result<(ReadHeader, Vec<Vec<u8>>), Status> {
    let reply = reply?;
    let mut data = vec![Vec::new(); reply.header.ranges.len()];
    let mut chunks = reply.chunks;
    let mut last_index = 0;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        let index = chunk.range_index as usize;
        assert!(index < data.len(), "a chunk for range {index} of {}", data.len());
        assert!(index >= last_index, "chunks come in range order");
        last_index = index;
        data[index].extend_from_slice(&chunk.data);
    }
    Ok((reply.header, data))
}

async fn read(
    fileio: &dyn FileIo,
    path: &str,
    ranges: &[ByteRangeSpec],
) -> Result<(ReadHeader, Vec<Vec<u8>>), Status> {
    read_reply(
        fileio
            .read(ReadRequest {
                path: path.to_owned(),
                ranges: ranges.to_vec(),
                version: String::new(),
            })
            .await,
    )
    .await
}

/// The whole content of the file at `path`, which must be readable.
async fn get(fileio: &dyn FileIo, path: &str) -> Vec<u8> {
    let (header, data) = read(fileio, path, &[])
        .await
        .unwrap_or_else(|status| panic!("GET {path:?}: {status:?}"));
    let info = header.info.expect("a read's header has the file's metadata");
    assert!(!info.is_collection, "{path} is a file");
    let bytes = data.concat();
    assert_eq!(
        bytes.len() as u64,
        info.size,
        "{path}: the data is as long as the header says"
    );
    bytes
}

fn range(first: Option<u64>, last: Option<u64>) -> ByteRangeSpec {
    ByteRangeSpec { first, last }
}

async fn stat(fileio: &dyn FileIo, path: &str) -> Result<FileInfo, Status> {
    fileio
        .stat(StatRequest {
            path: path.to_owned(),
        })
        .await
}

/// The entries of a listing, whether it fails at once or in its stream.
async fn list_with(
    fileio: &dyn FileIo,
    path: &str,
    depth: Depth,
    properties: Option<PropertySelection>,
    max_entries: u64,
) -> Result<Vec<ListEntry>, Status> {
    let mut batches = fileio
        .list(ListRequest {
            path: path.to_owned(),
            depth: depth as i32,
            max_entries,
            properties,
        })
        .await?;
    let mut entries = Vec::new();
    while let Some(batch) = batches.next().await {
        entries.extend(batch?.entries);
    }
    Ok(entries)
}

/// The paths a listing shows: the listed resource's first, then the others sorted (the
/// port defines no order for them).
async fn listed(fileio: &dyn FileIo, path: &str, depth: Depth) -> (String, Vec<String>) {
    let entries = list_with(fileio, path, depth, None, 0)
        .await
        .unwrap_or_else(|status| panic!("listing {path:?} at {depth:?}: {status:?}"));
    let mut paths: Vec<String> = entries
        .into_iter()
        .map(|e| e.info.expect("an entry has its metadata").path)
        .collect();
    assert!(
        !paths.is_empty(),
        "a listing of {path:?} names the resource itself"
    );
    let first = paths.remove(0);
    paths.sort();
    (first, paths)
}

fn all_properties() -> Option<PropertySelection> {
    Some(PropertySelection {
        mode: property_selection::Mode::All as i32,
        names: Vec::new(),
    })
}

/// The dead properties a client set on `path` (fileio's own left out), as a Depth 0
/// listing with `selection` gives them: sorted (namespace, name, value).
async fn properties_with(
    fileio: &dyn FileIo,
    path: &str,
    selection: Option<PropertySelection>,
) -> Vec<(String, String, Vec<u8>)> {
    let entries = list_with(fileio, path, Depth::Zero, selection, 0)
        .await
        .unwrap_or_else(|status| panic!("listing {path:?}: {status:?}"));
    assert_eq!(entries.len(), 1, "a Depth 0 listing of {path:?} is one entry");
    client_properties(&entries[0].properties)
}

fn client_properties(properties: &[DeadProperty]) -> Vec<(String, String, Vec<u8>)> {
    let mut found: Vec<_> = properties
        .iter()
        .filter(|p| !is_reserved(&p.namespace))
        .map(|p| (p.namespace.clone(), p.name.clone(), p.value.to_vec()))
        .collect();
    found.sort();
    found
}

async fn properties(fileio: &dyn FileIo, path: &str) -> Vec<(String, String, Vec<u8>)> {
    properties_with(fileio, path, all_properties()).await
}

async fn mkdir(fileio: &dyn FileIo, path: &str) -> Result<MkdirResponse, Status> {
    fileio
        .mkdir(MkdirRequest {
            path: path.to_owned(),
        })
        .await
}

async fn delete(fileio: &dyn FileIo, path: &str) -> Result<DeleteResponse, Status> {
    fileio
        .delete(DeleteRequest {
            path: path.to_owned(),
            if_match: None,
            ..Default::default()
        })
        .await
}

async fn copy(
    fileio: &dyn FileIo,
    source: &str,
    destination: &str,
    depth: Depth,
    overwrite: bool,
) -> Result<TransferResponse, Status> {
    fileio
        .copy(CopyRequest {
            source: source.to_owned(),
            destination: destination.to_owned(),
            depth: depth as i32,
            overwrite,
            leave_out: Vec::new(),
            ..Default::default()
        })
        .await
}

async fn move_to(
    fileio: &dyn FileIo,
    source: &str,
    destination: &str,
    overwrite: bool,
) -> Result<TransferResponse, Status> {
    fileio
        .r#move(MoveRequest {
            source: source.to_owned(),
            destination: destination.to_owned(),
            overwrite,
            ..Default::default()
        })
        .await
}

async fn patch(
    fileio: &dyn FileIo,
    path: &str,
    operations: Vec<PropertyOperation>,
) -> Result<PatchPropertiesResponse, Status> {
    fileio
        .patch_properties(PatchPropertiesRequest {
            path: path.to_owned(),
            operations,
            modified_unix_ns: None,
        })
        .await
}

const NS: &str = "urn:example:suite";

fn set(name: &str, value: &[u8]) -> PropertyOperation {
    PropertyOperation {
        op: Some(property_operation::Op::Set(DeadProperty {
            namespace: NS.to_owned(),
            name: name.to_owned(),
            value: Bytes::copy_from_slice(value),
        })),
    }
}

fn remove(name: &str) -> PropertyOperation {
    PropertyOperation {
        op: Some(property_operation::Op::Remove(PropertyName {
            namespace: NS.to_owned(),
            name: name.to_owned(),
        })),
    }
}

fn property(name: &str, value: &[u8]) -> (String, String, Vec<u8>) {
    (NS.to_owned(), name.to_owned(), value.to_vec())
}

/// Asserts that `result` failed with `code`.
#[track_caller]
fn fails<T>(result: Result<T, Status>, code: Code, what: &str) {
    match result {
        Ok(_) => panic!("{what}: succeeded, but the contract says {code:?}"),
        Err(status) => assert_eq!(
            status.code(),
            code,
            "{what}: {:?} ({}), but the contract says {code:?}",
            status.code(),
            status.message()
        ),
    }
}

#[track_caller]
fn done<T>(result: Result<T, Status>, what: &str) -> T {
    result.unwrap_or_else(|status| panic!("{what}: {:?} ({})", status.code(), status.message()))
}

/// Asserts that a tree operation succeeded for every member.
#[track_caller]
fn whole(reply: Result<TransferResponse, Status>, what: &str) -> TransferResponse {
    let reply = done(reply, what);
    assert!(
        reply.failures.is_empty(),
        "{what}: members failed: {:?}",
        reply.failures
    );
    reply
}

/// Bytes that differ at every offset of a short period, so a range read from the wrong
/// place shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

// ---------------------------------------------------------------------------------------
// The cases.

/// A write creates (`created`), replaces (not `created`, another etag), and a read gives
/// the bytes back, the empty file and one of several chunks included.
async fn put_and_get_whole(fio: &Subject) {
    let first = put(&**fio, "a.txt", b"hello").await;
    assert!(first.created, "a new file is created");
    let info = first.info.expect("a write answers the new metadata");
    assert_eq!(
        (info.path.as_str(), info.size, info.is_collection),
        ("a.txt", 5, false)
    );
    assert!(!info.etag.is_empty(), "a file has an etag");
    assert_eq!(get(&**fio, "a.txt").await, b"hello");

    let second = put(&**fio, "a.txt", b"hello, world").await;
    assert!(!second.created, "an existing file is replaced");
    let replaced = second.info.unwrap();
    assert_eq!(replaced.size, 12);
    assert_ne!(replaced.etag, info.etag, "new content, new etag");
    assert_eq!(get(&**fio, "a.txt").await, b"hello, world");

    put(&**fio, "empty", b"").await;
    let (header, data) = done(read(&**fio, "empty", &[]).await, "reading an empty file");
    assert_eq!(header.info.unwrap().size, 0);
    assert!(
        header.ranges.is_empty() && data.is_empty(),
        "an empty file has no range to send"
    );

    let large = pattern(300 * 1024);
    put(&**fio, "large.bin", &large).await;
    let reply = done(
        fio.read(ReadRequest {
            path: "large.bin".into(),
            ranges: Vec::new(),
            version: String::new(),
        })
        .await,
        "reading 300 KiB",
    );
    let mut chunks = reply.chunks;
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.unwrap();
        // The gateway's cache answers a kept file's range as one slice of its copy.
        if !fio.wrapper.is_cached() {
            assert!(
                chunk.data.len() <= kubedav_api::MAX_CHUNK_BYTES,
                "a chunk of {} bytes",
                chunk.data.len()
            );
        }
        bytes.extend_from_slice(&chunk.data);
    }
    assert!(bytes == large, "300 KiB read back as written");
    assert!(get(&**fio, "large.bin").await == large, "and again");
}

/// Ranges resolve against the size (RFC 9110 14.1.2): closed, open, suffix, clamped,
/// several in their order; unsatisfiable ones are left out, a collection has none.
async fn ranges(fio: &Subject) {
    let data = pattern(100);
    put(&**fio, "r.bin", &data).await;
    mkdir(&**fio, "d").await.unwrap();
    // The Range header, the specs it makes, and the ranges they resolve to.
    type Case = (&'static str, Vec<ByteRangeSpec>, Vec<(u64, u64)>);
    let cases: [Case; 8] = [
        ("0-9", vec![range(Some(0), Some(9))], vec![(0, 9)]),
        ("90-", vec![range(Some(90), None)], vec![(90, 99)]),
        ("-10", vec![range(None, Some(10))], vec![(90, 99)]),
        ("-500", vec![range(None, Some(500))], vec![(0, 99)]),
        ("95-200", vec![range(Some(95), Some(200))], vec![(95, 99)]),
        (
            "0-1,50-52,-3",
            vec![
                range(Some(0), Some(1)),
                range(Some(50), Some(52)),
                range(None, Some(3)),
            ],
            vec![(0, 1), (50, 52), (97, 99)],
        ),
        ("100-", vec![range(Some(100), None)], vec![]),
        ("5-2", vec![range(Some(5), Some(2))], vec![]),
    ];
    // Twice: through the cache, the second time from the copy the whole read kept.
    for round in ["before a whole read", "after a whole read"] {
        for (name, specs, expected) in &cases {
            let (header, chunks) = done(read(&**fio, "r.bin", specs).await, name);
            assert_eq!(header.info.as_ref().map(|i| i.size), Some(100), "{name} {round}");
            let resolved: Vec<(u64, u64)> = header.ranges.iter().map(|r| (r.first, r.last)).collect();
            assert_eq!(&resolved, expected, "bytes={name} {round}");
            for ((first, last), bytes) in resolved.iter().zip(&chunks) {
                assert_eq!(
                    bytes[..],
                    data[*first as usize..=*last as usize],
                    "bytes={name} {round}"
                );
            }
        }
        assert_eq!(get(&**fio, "r.bin").await, data);
    }
    let (header, chunks) = done(read(&**fio, "d", &[]).await, "reading a collection");
    assert!(
        header.info.unwrap().is_collection,
        "a collection's read is its header"
    );
    assert!(header.ranges.is_empty() && chunks.is_empty());
    let (header, _) = done(read(&**fio, "", &[]).await, "reading the root");
    assert!(header.info.unwrap().is_collection);
    fails(
        read(&**fio, "nope", &[]).await,
        Code::NotFound,
        "reading an absent file",
    );
    fails(
        read(&**fio, "d/nope", &[range(Some(0), None)]).await,
        Code::NotFound,
        "a range of an absent file",
    );
}

/// A read to send gives the bytes a read gives, and through a wrapper it reaches the
/// core's (which may map them) instead of the port's default, a plain read.
async fn read_to_send_gives_what_read_gives(fio: &Subject) {
    const MAP_ABOVE: u64 = 64 * 1024;
    let large = pattern(200 * 1024);
    put(&**fio, "big.bin", &large).await;
    put(&**fio, "small.txt", b"small").await;
    for round in 0..2 {
        for (path, data) in [("big.bin", &large[..]), ("small.txt", &b"small"[..])] {
            let reply = fio
                .read_to_send(
                    ReadRequest {
                        path: path.into(),
                        ranges: Vec::new(),
                        version: String::new(),
                    },
                    MAP_ABOVE,
                )
                .await;
            let (header, chunks) = done(read_reply(reply).await, path);
            assert_eq!(header.info.unwrap().size, data.len() as u64);
            assert!(
                chunks.concat() == data,
                "{path}, read {round}: the bytes a read gives"
            );
        }
        let reply = fio
            .read_to_send(
                ReadRequest {
                    path: "big.bin".into(),
                    ranges: vec![range(Some(100_000), Some(100_999)), range(None, Some(10))],
                    version: String::new(),
                },
                MAP_ABOVE,
            )
            .await;
        let (_, chunks) = done(read_reply(reply).await, "ranges to send");
        assert_eq!(chunks.len(), 2);
        assert!(chunks[0] == large[100_000..101_000] && chunks[1] == large[large.len() - 10..]);
    }
    fails(
        fio.read_to_send(
            ReadRequest {
                path: "nope".into(),
                ranges: Vec::new(),
                version: String::new(),
            },
            MAP_ABOVE,
        )
        .await,
        Code::NotFound,
        "a read to send of an absent file",
    );
    if let Some(probe) = &fio.probe {
        let sends = probe.sends();
        let reached = sends
            .iter()
            .any(|(path, above)| path == "big.bin" && *above >= MAP_ABOVE);
        assert!(
            reached,
            "{:?}: read_to_send of big.bin never reached the core under the wrapper (a default answered \
             in its place?); what reached it: {sends:?}",
            fio.wrapper
        );
        if !fio.wrapper.is_cached() {
            assert!(
                sends.iter().all(|(_, above)| *above == MAP_ABOVE),
                "map_above is passed on as given: {sends:?}"
            );
        }
    }
}

/// Stat describes files, collections and the root; an absent path is NOT_FOUND however
/// it is absent.
async fn stat_files_and_collections(fio: &Subject) {
    let written = put(&**fio, "s.txt", b"12345").await.info.unwrap();
    let info = done(stat(&**fio, "s.txt").await, "stat of a file");
    assert_eq!(
        (info.path.as_str(), info.size, info.is_collection),
        ("s.txt", 5, false)
    );
    assert_eq!(info.etag, written.etag, "the etag the write answered");
    assert!(info.modified_unix_ns > 0);

    let made = done(mkdir(&**fio, "c").await, "MKCOL").info.unwrap();
    assert!(made.is_collection && made.path == "c");
    let info = done(stat(&**fio, "c").await, "stat of a collection");
    assert_eq!(
        (info.path.as_str(), info.size, info.is_collection),
        ("c", 0, true)
    );
    let root = done(stat(&**fio, "").await, "stat of the root");
    assert!(root.is_collection && root.path.is_empty());

    // A client's modification time (X-OC-Mtime), whole seconds as a bucket keeps them.
    let modified = 1_600_000_000_000_000_000;
    let mut timed = header("timed.txt", 1);
    timed.modified_unix_ns = Some(modified);
    done(write(&**fio, timed, b"t").await, "PUT with a time");
    assert_eq!(
        done(stat(&**fio, "timed.txt").await, "stat").modified_unix_ns,
        modified
    );

    for absent in ["nope", "c/nope", "nope/deeper", "s.txt/below-a-file"] {
        fails(
            stat(&**fio, absent).await,
            Code::NotFound,
            &format!("stat of {absent:?}"),
        );
    }
}

/// Depth 0 is the resource, Depth 1 its members, infinity everything below; the resource
/// comes first; `max_entries` stops a listing with OUT_OF_RANGE.
async fn list_by_depth(fio: &Subject) {
    mkdir(&**fio, "t").await.unwrap();
    put(&**fio, "t/a.txt", b"a").await;
    put(&**fio, "t/b.txt", b"bb").await;
    mkdir(&**fio, "t/sub").await.unwrap();
    put(&**fio, "t/sub/c.txt", b"ccc").await;
    let s = |v: &[&str]| v.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();

    assert_eq!(listed(&**fio, "t", Depth::Zero).await, ("t".into(), vec![]));
    assert_eq!(
        listed(&**fio, "t", Depth::One).await,
        ("t".into(), s(&["t/a.txt", "t/b.txt", "t/sub"]))
    );
    assert_eq!(
        listed(&**fio, "t", Depth::Infinity).await,
        ("t".into(), s(&["t/a.txt", "t/b.txt", "t/sub", "t/sub/c.txt"]))
    );
    assert_eq!(
        listed(&**fio, "t/a.txt", Depth::Zero).await,
        ("t/a.txt".into(), vec![])
    );
    assert_eq!(
        listed(&**fio, "t/a.txt", Depth::One).await,
        ("t/a.txt".into(), vec![])
    );
    assert_eq!(listed(&**fio, "", Depth::One).await, (String::new(), s(&["t"])));

    let entries = list_with(&**fio, "t", Depth::One, None, 0).await.unwrap();
    for entry in &entries {
        let info = entry.info.as_ref().unwrap();
        let expected = match info.path.as_str() {
            "t" | "t/sub" => (true, 0),
            "t/a.txt" => (false, 1),
            "t/b.txt" => (false, 2),
            other => panic!("{other} is not in t"),
        };
        assert_eq!((info.is_collection, info.size), expected, "{}", info.path);
        assert!(entry.properties.is_empty(), "no dead properties unless asked for");
    }

    // A change shows in the next listing (the cache drops what it kept).
    put(&**fio, "t/d.txt", b"d").await;
    assert_eq!(
        listed(&**fio, "t", Depth::One).await,
        ("t".into(), s(&["t/a.txt", "t/b.txt", "t/d.txt", "t/sub"]))
    );

    fails(
        list_with(&**fio, "nope", Depth::Zero, None, 0).await,
        Code::NotFound,
        "listing an absent path",
    );
    fails(
        list_with(&**fio, "t/nope", Depth::One, None, 0).await,
        Code::NotFound,
        "listing an absent path",
    );
    fails(
        list_with(&**fio, "t", Depth::Infinity, None, 2).await,
        Code::OutOfRange,
        "a listing past max_entries",
    );
}

/// MKCOL: one collection whose parent exists.
async fn mkdir_cases(fio: &Subject) {
    done(mkdir(&**fio, "m").await, "MKCOL");
    done(mkdir(&**fio, "m/n").await, "MKCOL in a collection");
    assert!(stat(&**fio, "m/n").await.unwrap().is_collection);
    put(&**fio, "f", b"file").await;
    fails(
        mkdir(&**fio, "m").await,
        Code::AlreadyExists,
        "MKCOL of an existing collection",
    );
    fails(mkdir(&**fio, "f").await, Code::AlreadyExists, "MKCOL over a file");
    fails(mkdir(&**fio, "").await, Code::AlreadyExists, "MKCOL of the root");
    fails(
        mkdir(&**fio, "no/such").await,
        Code::FailedPrecondition,
        "MKCOL without its parent",
    );
    fails(
        mkdir(&**fio, "f/sub").await,
        Code::FailedPrecondition,
        "MKCOL below a file",
    );
    assert_eq!(get(&**fio, "f").await, b"file");
}

/// Every refused write leaves what was there; the codes of the contract.
async fn refused_writes_keep_the_old_content(fio: &Subject) {
    put(&**fio, "f", b"old").await;
    mkdir(&**fio, "c").await.unwrap();
    let etag = stat(&**fio, "f").await.unwrap().etag;

    fails(
        write(&**fio, header("missing/x", 1), b"x").await,
        Code::FailedPrecondition,
        "PUT without its parent",
    );
    fails(
        write(&**fio, header("f/x", 1), b"x").await,
        Code::FailedPrecondition,
        "PUT below a file",
    );
    fails(
        write(&**fio, header("c", 1), b"x").await,
        Code::FailedPrecondition,
        "PUT onto a collection",
    );
    fails(
        write(&**fio, header("", 1), b"x").await,
        Code::FailedPrecondition,
        "PUT onto the root",
    );

    let mut create_only = header("f", 3);
    create_only.create_only = true;
    fails(
        write(&**fio, create_only.clone(), b"new").await,
        Code::AlreadyExists,
        "If-None-Match: * on a file",
    );
    create_only.path = "fresh".into();
    assert!(
        done(
            write(&**fio, create_only, b"new").await,
            "If-None-Match: * on nothing"
        )
        .created
    );

    let mut stale = header("f", 3);
    stale.if_match = Some("\"not-the-etag\"".into());
    fails(
        write(&**fio, stale, b"new").await,
        Code::Aborted,
        "If-Match with another etag",
    );
    let mut absent = header("absent", 3);
    absent.if_match = Some(etag.clone());
    fails(
        write(&**fio, absent, b"new").await,
        Code::Aborted,
        "If-Match on an absent file",
    );
    assert_eq!(
        stat(&**fio, "absent").await.map(|_| ()).unwrap_err().code(),
        Code::NotFound
    );

    fails(
        write(&**fio, header("f", 10), b"short").await,
        Code::Cancelled,
        "a body shorter than declared",
    );
    fails(
        write(&**fio, header("f", 3), b"longer").await,
        Code::InvalidArgument,
        "a body longer than declared",
    );
    let broken = futures_util::stream::iter(vec![
        Ok(Bytes::from_static(b"part")),
        Err(Status::cancelled("the client went away")),
    ])
    .boxed();
    let broken = fio.write(header("f", 100), broken).await;
    assert!(broken.is_err(), "a body that fails fails the write");
    assert_eq!(
        get(&**fio, "f").await,
        b"old",
        "every refused write left the old content"
    );
    assert_eq!(stat(&**fio, "f").await.unwrap().etag, etag);

    let mut matching = header("f", 3);
    matching.if_match = Some(etag);
    assert!(!done(write(&**fio, matching, b"new").await, "If-Match with the etag").created);
    assert_eq!(get(&**fio, "f").await, b"new");
}

/// DELETE: a file, a tree, its precondition, and what cannot be deleted.
async fn delete_cases(fio: &Subject) {
    put(&**fio, "f", b"f").await;
    mkdir(&**fio, "t").await.unwrap();
    put(&**fio, "t/a", b"a").await;
    mkdir(&**fio, "t/s").await.unwrap();
    put(&**fio, "t/s/b", b"b").await;
    // Kept by the cache before the deletes: they must not outlive them.
    listed(&**fio, "", Depth::One).await;
    listed(&**fio, "t", Depth::One).await;
    get(&**fio, "t/s/b").await;

    assert!(
        done(delete(&**fio, "f").await, "DELETE of a file")
            .failures
            .is_empty()
    );
    fails(stat(&**fio, "f").await, Code::NotFound, "a deleted file");
    assert!(
        done(delete(&**fio, "t").await, "DELETE of a tree")
            .failures
            .is_empty()
    );
    for gone in ["t", "t/a", "t/s", "t/s/b"] {
        fails(
            stat(&**fio, gone).await,
            Code::NotFound,
            &format!("{gone} in a deleted tree"),
        );
    }
    fails(
        read(&**fio, "t/s/b", &[]).await,
        Code::NotFound,
        "reading a deleted file",
    );
    assert_eq!(listed(&**fio, "", Depth::One).await, (String::new(), vec![]));

    fails(
        delete(&**fio, "nope").await,
        Code::NotFound,
        "DELETE of an absent path",
    );
    fails(
        delete(&**fio, "nope/deeper").await,
        Code::NotFound,
        "DELETE below an absent path",
    );
    fails(
        delete(&**fio, "").await,
        Code::PermissionDenied,
        "DELETE of the root",
    );

    put(&**fio, "g", b"g").await;
    let etag = stat(&**fio, "g").await.unwrap().etag;
    let conditional = |if_match: &str| DeleteRequest {
        path: "g".into(),
        if_match: Some(if_match.to_owned()),
        ..Default::default()
    };
    fails(
        fio.delete(conditional("\"other\"")).await,
        Code::Aborted,
        "DELETE with another etag",
    );
    assert_eq!(get(&**fio, "g").await, b"g");
    done(fio.delete(conditional(&etag)).await, "DELETE with the etag");
    fails(stat(&**fio, "g").await, Code::NotFound, "deleted");
}

/// COPY of files: new, refused and replacing destinations, and the misuses.
async fn copy_files(fio: &Subject) {
    put(&**fio, "a", b"A").await;
    put(&**fio, "c", b"C").await;
    assert!(
        whole(
            copy(&**fio, "a", "b", Depth::Infinity, false).await,
            "COPY to a new name"
        )
        .created
    );
    assert_eq!(
        (get(&**fio, "a").await, get(&**fio, "b").await),
        (b"A".to_vec(), b"A".to_vec())
    );

    fails(
        copy(&**fio, "a", "c", Depth::Infinity, false).await,
        Code::AlreadyExists,
        "COPY onto a file, Overwrite F",
    );
    assert_eq!(get(&**fio, "c").await, b"C");
    assert!(
        !whole(
            copy(&**fio, "a", "c", Depth::Infinity, true).await,
            "COPY onto a file, Overwrite T"
        )
        .created
    );
    assert_eq!(get(&**fio, "c").await, b"A");
    assert!(
        !whole(
            copy(&**fio, "a", "c", Depth::Zero, true).await,
            "COPY Depth 0 of a file"
        )
        .created
    );

    fails(
        copy(&**fio, "nope", "x", Depth::Infinity, false).await,
        Code::NotFound,
        "COPY of an absent source",
    );
    fails(
        copy(&**fio, "a", "missing/x", Depth::Infinity, false).await,
        Code::FailedPrecondition,
        "COPY without the destination's parent",
    );
    fails(
        copy(&**fio, "a", "a", Depth::Infinity, true).await,
        Code::PermissionDenied,
        "COPY onto itself",
    );
    fails(
        copy(&**fio, "a", "d", Depth::One, false).await,
        Code::InvalidArgument,
        "COPY Depth 1",
    );
    fails(
        stat(&**fio, "d").await,
        Code::NotFound,
        "a refused COPY made nothing",
    );
}

/// COPY of trees: infinity and 0, onto files and trees, and into itself.
async fn copy_trees(fio: &Subject) {
    mkdir(&**fio, "t").await.unwrap();
    put(&**fio, "t/x.txt", b"x").await;
    mkdir(&**fio, "t/s").await.unwrap();
    put(&**fio, "t/s/y.txt", b"y").await;
    let s = |v: &[&str]| v.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();

    assert!(
        whole(
            copy(&**fio, "t", "u", Depth::Infinity, false).await,
            "COPY of a tree"
        )
        .created
    );
    assert_eq!(
        listed(&**fio, "u", Depth::Infinity).await,
        ("u".into(), s(&["u/s", "u/s/y.txt", "u/x.txt"]))
    );
    assert_eq!(get(&**fio, "u/s/y.txt").await, b"y");
    assert_eq!(
        listed(&**fio, "t", Depth::Infinity).await,
        ("t".into(), s(&["t/s", "t/s/y.txt", "t/x.txt"])),
        "the source is whole"
    );

    whole(
        copy(&**fio, "t", "v", Depth::Zero, false).await,
        "COPY Depth 0 of a collection",
    );
    assert!(stat(&**fio, "v").await.unwrap().is_collection);
    assert_eq!(
        listed(&**fio, "v", Depth::One).await,
        ("v".into(), vec![]),
        "without its members"
    );

    fails(
        copy(&**fio, "t", "u", Depth::Infinity, false).await,
        Code::AlreadyExists,
        "COPY onto a tree, Overwrite F",
    );
    fails(
        copy(&**fio, "t", "t/s/in", Depth::Infinity, true).await,
        Code::PermissionDenied,
        "COPY into itself",
    );
    fails(
        copy(&**fio, "t/s", "t", Depth::Infinity, true).await,
        Code::PermissionDenied,
        "COPY onto its parent",
    );

    put(&**fio, "w", b"a file").await;
    assert!(
        !whole(
            copy(&**fio, "t", "w", Depth::Infinity, true).await,
            "COPY of a tree onto a file"
        )
        .created
    );
    assert_eq!(get(&**fio, "w/s/y.txt").await, b"y");
    put(&**fio, "u/s/extra", b"e").await;
    assert!(
        !whole(
            copy(&**fio, "t", "u", Depth::Infinity, true).await,
            "COPY of a tree onto a tree"
        )
        .created
    );
    fails(
        stat(&**fio, "u/s/extra").await,
        Code::NotFound,
        "the replaced tree's own members are gone",
    );
    assert!(
        !whole(
            copy(&**fio, "t/x.txt", "u", Depth::Infinity, true).await,
            "COPY of a file onto a tree"
        )
        .created
    );
    assert_eq!(get(&**fio, "u").await, b"x");
    fails(
        stat(&**fio, "u/s").await,
        Code::NotFound,
        "the tree a file replaced",
    );
}

/// A depth-infinity COPY leaves out the paths it is given (what the caller may not
/// read), each with all beneath it and with its dead properties, and copies the rest;
/// it refuses a path that is not beneath its source.
async fn a_copy_leaves_out_what_it_is_told(fio: &Subject) {
    mkdir(&**fio, "t").await.unwrap();
    put(&**fio, "t/x.txt", b"x").await;
    mkdir(&**fio, "t/secret").await.unwrap();
    put(&**fio, "t/secret/plan.txt", b"hidden").await;
    mkdir(&**fio, "t/s").await.unwrap();
    put(&**fio, "t/s/y.txt", b"y").await;
    put(&**fio, "t/s/private.txt", b"hidden too").await;
    done(
        patch(&**fio, "t/secret", vec![set("note", b"secret note")]).await,
        "PROPPATCH",
    );
    let s = |v: &[&str]| v.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
    let copied = fio
        .copy(CopyRequest {
            source: "t".into(),
            destination: "u".into(),
            depth: Depth::Infinity as i32,
            overwrite: false,
            leave_out: s(&["t/secret", "t/s/private.txt"]),
            ..Default::default()
        })
        .await;
    assert!(whole(copied, "COPY leaving out two members").created);
    assert_eq!(
        listed(&**fio, "u", Depth::Infinity).await,
        ("u".into(), s(&["u/s", "u/s/y.txt", "u/x.txt"]))
    );
    assert_eq!(
        listed(&**fio, "t", Depth::Infinity).await.1.len(),
        6,
        "the source is whole"
    );
    // A member made later where a left-out one was carries none of its properties.
    mkdir(&**fio, "u/secret").await.unwrap();
    assert_eq!(properties(&**fio, "u/secret").await, vec![]);
    for outside in ["t", "u/x.txt", "tt/x", "x"] {
        fails(
            fio.copy(CopyRequest {
                source: "t".into(),
                destination: "v".into(),
                depth: Depth::Infinity as i32,
                overwrite: false,
                leave_out: s(&[outside]),
                ..Default::default()
            })
            .await,
            Code::InvalidArgument,
            "leaving out what is not beneath the source",
        );
    }
}

/// MOVE of files and trees, over existing destinations or not, and into itself.
async fn move_files_and_trees(fio: &Subject) {
    put(&**fio, "a", b"A").await;
    assert!(whole(move_to(&**fio, "a", "b", false).await, "MOVE of a file").created);
    fails(stat(&**fio, "a").await, Code::NotFound, "a moved file's source");
    assert_eq!(get(&**fio, "b").await, b"A");

    put(&**fio, "c", b"C").await;
    fails(
        move_to(&**fio, "b", "c", false).await,
        Code::AlreadyExists,
        "MOVE onto a file, Overwrite F",
    );
    assert_eq!(
        (get(&**fio, "b").await, get(&**fio, "c").await),
        (b"A".to_vec(), b"C".to_vec())
    );
    assert!(
        !whole(
            move_to(&**fio, "b", "c", true).await,
            "MOVE onto a file, Overwrite T"
        )
        .created
    );
    fails(
        stat(&**fio, "b").await,
        Code::NotFound,
        "the source of a MOVE that replaced",
    );
    assert_eq!(get(&**fio, "c").await, b"A");

    mkdir(&**fio, "t").await.unwrap();
    put(&**fio, "t/x", b"x").await;
    mkdir(&**fio, "t/s").await.unwrap();
    put(&**fio, "t/s/y", b"y").await;
    listed(&**fio, "t", Depth::One).await;
    assert!(whole(move_to(&**fio, "t", "u", false).await, "MOVE of a tree").created);
    fails(stat(&**fio, "t").await, Code::NotFound, "a moved tree's source");
    fails(
        list_with(&**fio, "t", Depth::One, None, 0).await,
        Code::NotFound,
        "listing a moved tree's source",
    );
    assert_eq!(get(&**fio, "u/s/y").await, b"y");

    fails(
        move_to(&**fio, "u", "u/s/in", true).await,
        Code::PermissionDenied,
        "MOVE into itself",
    );
    fails(
        move_to(&**fio, "u", "u", true).await,
        Code::PermissionDenied,
        "MOVE onto itself",
    );
    assert_eq!(get(&**fio, "u/x").await, b"x", "a refused MOVE left the tree");
    fails(
        move_to(&**fio, "nope", "x", false).await,
        Code::NotFound,
        "MOVE of an absent source",
    );
    fails(
        move_to(&**fio, "c", "missing/x", false).await,
        Code::FailedPrecondition,
        "MOVE without the destination's parent",
    );

    mkdir(&**fio, "w").await.unwrap();
    put(&**fio, "w/old", b"o").await;
    assert!(
        !whole(
            move_to(&**fio, "u", "w", true).await,
            "MOVE of a tree onto a tree"
        )
        .created
    );
    fails(
        stat(&**fio, "w/old").await,
        Code::NotFound,
        "the replaced tree's members",
    );
    assert_eq!(get(&**fio, "w/s/y").await, b"y");
    fails(stat(&**fio, "u").await, Code::NotFound, "the moved tree's source");
}

/// Dead properties: set, replace, remove, each selection, on files and collections;
/// they follow COPY and MOVE, survive a PUT, and go with DELETE.
async fn dead_properties(fio: &Subject) {
    put(&**fio, "p.txt", b"p").await;
    mkdir(&**fio, "pc").await.unwrap();
    let xml: &[u8] = b"red &amp; <b xmlns=\"urn:b\">blue</b>";
    done(
        patch(&**fio, "p.txt", vec![set("color", xml), set("empty", b"")]).await,
        "PROPPATCH",
    );
    done(
        patch(&**fio, "pc", vec![set("color", b"green")]).await,
        "PROPPATCH of a collection",
    );
    assert_eq!(
        properties(&**fio, "p.txt").await,
        vec![property("color", xml), property("empty", b"")]
    );
    assert_eq!(properties(&**fio, "pc").await, vec![property("color", b"green")]);

    let names = Some(PropertySelection {
        mode: property_selection::Mode::Names as i32,
        names: Vec::new(),
    });
    assert_eq!(
        properties_with(&**fio, "p.txt", names).await,
        vec![property("color", b""), property("empty", b"")],
        "propname: names without values"
    );
    let selected = Some(PropertySelection {
        mode: property_selection::Mode::Selected as i32,
        names: vec![PropertyName {
            namespace: NS.into(),
            name: "color".into(),
        }],
    });
    assert_eq!(
        properties_with(&**fio, "p.txt", selected).await,
        vec![property("color", xml)]
    );
    assert_eq!(
        properties_with(&**fio, "p.txt", None).await,
        vec![],
        "none unless asked for"
    );

    let members = list_with(&**fio, "", Depth::One, all_properties(), 0)
        .await
        .unwrap();
    for entry in &members {
        let path = entry.info.as_ref().unwrap().path.as_str();
        let expected = match path {
            "" => vec![],
            "p.txt" => vec![property("color", xml), property("empty", b"")],
            "pc" => vec![property("color", b"green")],
            other => panic!("{other} is not in the root"),
        };
        assert_eq!(
            client_properties(&entry.properties),
            expected,
            "{path:?} in a Depth 1 listing"
        );
    }

    done(
        patch(&**fio, "p.txt", vec![remove("empty"), set("color", b"red")]).await,
        "PROPPATCH",
    );
    assert_eq!(properties(&**fio, "p.txt").await, vec![property("color", b"red")]);
    done(
        patch(&**fio, "p.txt", vec![remove("never-set")]).await,
        "removing what is not there",
    );

    fails(
        patch(&**fio, "nope", vec![set("a", b"")]).await,
        Code::NotFound,
        "PROPPATCH of an absent path",
    );
    let reserved = PropertyOperation {
        op: Some(property_operation::Op::Set(DeadProperty {
            namespace: kubedav_api::checksums::RESERVED_NAMESPACE.into(),
            name: "checksums".into(),
            value: Bytes::from_static(b"forged"),
        })),
    };
    fails(
        patch(&**fio, "p.txt", vec![set("ok", b""), reserved]).await,
        Code::InvalidArgument,
        "PROPPATCH of fileio's own namespace",
    );
    assert_eq!(
        properties(&**fio, "p.txt").await,
        vec![property("color", b"red")],
        "all or nothing"
    );

    put(&**fio, "p.txt", b"new content").await;
    assert_eq!(
        properties(&**fio, "p.txt").await,
        vec![property("color", b"red")],
        "a PUT keeps them"
    );
    whole(
        copy(&**fio, "p.txt", "q.txt", Depth::Infinity, false).await,
        "COPY",
    );
    assert_eq!(
        properties(&**fio, "q.txt").await,
        vec![property("color", b"red")],
        "COPY takes them"
    );
    whole(move_to(&**fio, "q.txt", "r.txt", false).await, "MOVE");
    assert_eq!(
        properties(&**fio, "r.txt").await,
        vec![property("color", b"red")],
        "MOVE takes them"
    );
    put(&**fio, "pc/member", b"m").await;
    done(
        patch(&**fio, "pc/member", vec![set("deep", b"1")]).await,
        "PROPPATCH",
    );
    whole(
        copy(&**fio, "pc", "pd", Depth::Infinity, false).await,
        "COPY of a tree",
    );
    assert_eq!(properties(&**fio, "pd").await, vec![property("color", b"green")]);
    assert_eq!(
        properties(&**fio, "pd/member").await,
        vec![property("deep", b"1")]
    );
    whole(move_to(&**fio, "pd", "pe", false).await, "MOVE of a tree");
    assert_eq!(
        properties(&**fio, "pe/member").await,
        vec![property("deep", b"1")]
    );

    done(delete(&**fio, "r.txt").await, "DELETE");
    put(&**fio, "r.txt", b"again").await;
    assert_eq!(properties(&**fio, "r.txt").await, vec![], "DELETE took them");

    // PROPPATCH of the modification time (whole seconds, as a bucket keeps them).
    let modified = 1_500_000_000_000_000_000;
    done(
        fio.patch_properties(PatchPropertiesRequest {
            path: "p.txt".into(),
            operations: vec![set("with-time", b"t")],
            modified_unix_ns: Some(modified),
        })
        .await,
        "PROPPATCH of the time",
    );
    assert_eq!(stat(&**fio, "p.txt").await.unwrap().modified_unix_ns, modified);
    assert_eq!(
        properties(&**fio, "p.txt").await,
        vec![property("color", b"red"), property("with-time", b"t")]
    );
    assert_eq!(get(&**fio, "p.txt").await, b"new content");
}

fn sums(pairs: &[(&str, &str)]) -> Vec<Checksum> {
    let mut sums: Vec<Checksum> = pairs
        .iter()
        .map(|(algorithm, hex)| Checksum {
            algorithm: (*algorithm).to_owned(),
            hex: (*hex).to_owned(),
        })
        .collect();
    sums.sort_by(|a, b| a.algorithm.cmp(&b.algorithm));
    sums
}

fn sorted(mut sums: Vec<Checksum>) -> Vec<Checksum> {
    sums.sort_by(|a, b| a.algorithm.cmp(&b.algorithm));
    sums
}

/// The checksums kept with `path`'s content, if they are its current content's.
async fn stored_checksums(fio: &Subject, path: &str) -> Option<Vec<Checksum>> {
    let selection = Some(PropertySelection {
        mode: property_selection::Mode::Selected as i32,
        names: vec![checksums_property_name()],
    });
    let entries = list_with(&**fio, path, Depth::Zero, selection, 0).await.unwrap();
    let etag = entries[0].info.as_ref().unwrap().etag.clone();
    Stored::find(&entries[0].properties)
        .and_then(|stored| stored.valid_for(&etag))
        .map(sorted)
}

/// Checksums asked for are computed while the body streams, answered and kept for that
/// content only; a body that does not match them is refused. A validator, when given,
/// names the bytes: repeated while they stay, never for other bytes.
async fn checksums_and_validators(fio: &Subject) {
    let hello = sums(&[
        ("SHA1", "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d"),
        ("MD5", "5d41402abc4b2a76b9719d911017c592"),
        ("ADLER32", "062c0215"),
        (
            "SHA256",
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        ),
    ]);
    let mut computing = header("h.txt", 5);
    computing.compute = vec!["SHA1".into(), "MD5".into(), "ADLER32".into(), "SHA256".into()];
    let reply = done(
        write(&**fio, computing, b"hello").await,
        "PUT computing checksums",
    );
    assert_eq!(sorted(reply.checksums), hello, "the checksums of 'hello'");
    assert_eq!(
        stored_checksums(fio, "h.txt").await,
        Some(hello.clone()),
        "kept with the content"
    );

    let mut verified = header("v.txt", 5);
    verified.checksums = sums(&[("SHA1", "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d")]);
    let reply = done(
        write(&**fio, verified, b"hello").await,
        "PUT with a matching checksum",
    );
    assert_eq!(
        sorted(reply.checksums),
        sums(&[("SHA1", "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d")])
    );

    let mut wrong = header("h.txt", 5);
    wrong.checksums = sums(&[("SHA1", "0000000000000000000000000000000000000000")]);
    fails(
        write(&**fio, wrong, b"jello").await,
        Code::InvalidArgument,
        "PUT with a checksum that does not match",
    );
    let mut unknown = header("h.txt", 5);
    unknown.compute = vec!["CRC99".into()];
    fails(
        write(&**fio, unknown, b"jello").await,
        Code::InvalidArgument,
        "PUT asking for an unknown algorithm",
    );
    assert_eq!(
        get(&**fio, "h.txt").await,
        b"hello",
        "refused: the old content stays"
    );
    assert_eq!(stored_checksums(fio, "h.txt").await, Some(hello));

    let before = stat(&**fio, "h.txt").await.unwrap();
    put(&**fio, "h.txt", b"other content").await;
    assert_eq!(
        stored_checksums(fio, "h.txt").await,
        None,
        "never shown for other content"
    );
    let after = stat(&**fio, "h.txt").await.unwrap();
    assert_ne!(before.etag, after.etag);
    if !before.validator.is_empty() {
        assert_ne!(
            before.validator, after.validator,
            "another content, another validator"
        );
    }
    let again = stat(&**fio, "h.txt").await.unwrap();
    if !after.validator.is_empty() && !again.validator.is_empty() {
        assert_eq!(
            after.validator, again.validator,
            "the same bytes, the same validator"
        );
    }
    if fio.backend == Backend::S3 {
        assert!(
            !after.validator.is_empty(),
            "on a bucket the object's ETag is the validator"
        );
    }
}

/// Usage: the volume's, none on a bucket (RFC 4331 lets it be left out), the count
/// against the quota through a quota wrapper, which refuses what would pass it with
/// RESOURCE_EXHAUSTED and stores nothing of it.
async fn usage_and_quota(fio: &Subject) {
    let fileio: &dyn FileIo = &**fio;
    let usage = move || fileio.usage(UsageRequest { path: String::new() });
    if !fio.wrapper.has_quota() {
        match fio.backend {
            Backend::Volume => {
                let usage = done(usage().await, "Usage of a volume");
                assert!(usage.used_bytes + usage.available_bytes > 0, "{usage:?}");
            }
            Backend::S3 => fails(usage().await, Code::Unimplemented, "Usage of a bucket"),
        }
        return;
    }
    // The count starts from a listing, in the background: let it end first.
    if let Some(quota) = &fio.quota {
        quota.counts_finished(1).await;
    }
    let start = done(usage().await, "Usage").used_bytes;
    put(&**fio, "q1", &pattern(1000)).await;
    let usage_now = done(usage().await, "Usage");
    assert_eq!(usage_now.used_bytes, start + 1000, "a write is counted");
    assert_eq!(usage_now.available_bytes, QUOTA_BYTES - usage_now.used_bytes);

    let too_much = pattern(QUOTA_BYTES as usize + 1);
    fails(
        write(&**fio, header("big", too_much.len()), &too_much).await,
        Code::ResourceExhausted,
        "a declared size past the quota",
    );
    fails(stat(&**fio, "big").await, Code::NotFound, "nothing was stored");
    let undeclared = WriteHeader {
        path: "big".into(),
        ..WriteHeader::default()
    };
    fails(
        write(&**fio, undeclared, &too_much).await,
        Code::ResourceExhausted,
        "a body of unknown size passing the quota",
    );
    fails(stat(&**fio, "big").await, Code::NotFound, "nothing was stored");
    assert_eq!(
        done(usage().await, "Usage").used_bytes,
        start + 1000,
        "refused writes count nothing"
    );

    put(&**fio, "q1", &pattern(3000)).await;
    assert_eq!(
        done(usage().await, "Usage").used_bytes,
        start + 3000,
        "a replaced file counts once"
    );
    let half = pattern(QUOTA_BYTES as usize / 2 + 10);
    put(&**fio, "half", &half).await;
    fails(
        copy(&**fio, "half", "half2", Depth::Infinity, false).await,
        Code::ResourceExhausted,
        "a COPY past the quota",
    );
    fails(stat(&**fio, "half2").await, Code::NotFound, "nothing was copied");
    done(delete(&**fio, "half").await, "DELETE");
    done(delete(&**fio, "q1").await, "DELETE");
    assert_eq!(
        done(usage().await, "Usage").used_bytes,
        start,
        "deletes free their bytes"
    );
    put(&**fio, "fits", &half).await;
}

/// `kept_copy` through a wrapper is what it wraps answers (the core's, here the
/// probe's), unless the wrapper keeps the copy itself: the gateway's cache answers with
/// its own copy's number, which stays while the copy does and changes with the resource.
async fn kept_copy_is_forwarded_or_answered(fio: &Subject) {
    put(&**fio, "k.txt", b"k").await;
    if !fio.wrapper.is_cached() {
        let expected = fio.probe.as_ref().map(|_| probe_copy("k.txt"));
        assert_eq!(
            fio.kept_copy("k.txt"),
            expected,
            "{:?}: kept_copy is answered by what the wrapper wraps (None: a default answered \
             in its place)",
            fio.wrapper
        );
        return;
    }
    assert_eq!(
        fio.kept_copy("k.txt"),
        None,
        "nothing kept yet (and never the port behind's number)"
    );
    // The cache keeps a Depth 0 listing once its lease holds.
    let mut copy = None;
    for _ in 0..100 {
        listed(&**fio, "k.txt", Depth::Zero).await;
        copy = fio.kept_copy("k.txt");
        if copy.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let copy = copy.expect("a Depth 0 listing is kept once the lease holds");
    assert_ne!(copy, probe_copy("k.txt"), "the cache's own copy");
    listed(&**fio, "k.txt", Depth::Zero).await;
    assert_eq!(fio.kept_copy("k.txt"), Some(copy), "answered from the same copy");
    done(
        patch(&**fio, "k.txt", vec![set("changed", b"1")]).await,
        "PROPPATCH",
    );
    assert_ne!(fio.kept_copy("k.txt"), Some(copy), "a change ends the copy");
    assert_eq!(properties(&**fio, "k.txt").await, vec![property("changed", b"1")]);
}

/// Paths the contract refuses (`VolumePath`): INVALID_ARGUMENT from every call.
async fn malformed_paths_are_refused(fio: &Subject) {
    put(&**fio, "ok", b"ok").await;
    for bad in [
        "../x",
        "a/../b",
        "a//b",
        "/abs",
        "trailing/",
        ".",
        ".kubedav-own",
        "nul\0byte",
    ] {
        let what = |call: &str| format!("{call} of {bad:?}");
        fails(stat(&**fio, bad).await, Code::InvalidArgument, &what("Stat"));
        fails(read(&**fio, bad, &[]).await, Code::InvalidArgument, &what("Read"));
        fails(
            list_with(&**fio, bad, Depth::One, None, 0).await,
            Code::InvalidArgument,
            &what("List"),
        );
        fails(
            write(&**fio, header(bad, 1), b"x").await,
            Code::InvalidArgument,
            &what("Write"),
        );
        fails(mkdir(&**fio, bad).await, Code::InvalidArgument, &what("Mkdir"));
        fails(delete(&**fio, bad).await, Code::InvalidArgument, &what("Delete"));
        fails(
            patch(&**fio, bad, vec![set("a", b"")]).await,
            Code::InvalidArgument,
            &what("PatchProperties"),
        );
        fails(
            copy(&**fio, "ok", bad, Depth::Infinity, true).await,
            Code::InvalidArgument,
            &what("Copy to"),
        );
        fails(
            copy(&**fio, bad, "ok2", Depth::Infinity, true).await,
            Code::InvalidArgument,
            &what("Copy from"),
        );
        fails(
            move_to(&**fio, "ok", bad, true).await,
            Code::InvalidArgument,
            &what("Move to"),
        );
        fails(
            move_to(&**fio, bad, "ok2", true).await,
            Code::InvalidArgument,
            &what("Move from"),
        );
    }
    assert_eq!(get(&**fio, "ok").await, b"ok");
    assert_eq!(
        listed(&**fio, "", Depth::One).await,
        (String::new(), vec!["ok".to_owned()])
    );
}

// ---------------------------------------------------------------------------------------
// SPECIAL CHARACTERS: names that XML, URLs or a shell would read otherwise. Every case
// below is named `special_names_*`.

/// File names with characters that XML (`&`, `<`, `>`, `"`, `'`), URLs (`%`, `+`, space)
/// or an encoding (non-ASCII) would read otherwise.
const SPECIAL_NAMES: [&str; 6] = [
    "café ü.txt",
    "a&b<c>\"d'e%20+f.txt",
    "日本語 ☃ & co.txt",
    "amp&amp;lt&lt;%2F+%+.txt",
    "lit &#34;&#39; ]]> <![CDATA[x]]>.txt",
    "😀 q?#[a];=@$,!~*.txt",
];

/// A collection name with the same characters.
const SPECIAL_DIR: &str = "dossier &<>\"'%+ é";

/// Every special name at the root and in [`SPECIAL_DIR`], each file holding its path.
async fn special_tree(fio: &Subject) -> Vec<String> {
    done(mkdir(&**fio, SPECIAL_DIR).await, "MKCOL of a special name");
    let mut paths = Vec::new();
    for name in SPECIAL_NAMES {
        for path in [name.to_owned(), format!("{SPECIAL_DIR}/{name}")] {
            put(&**fio, &path, path.as_bytes()).await;
            paths.push(path);
        }
    }
    paths
}

/// Special names are written, stat'ed and read under exactly their names.
async fn special_names_round_trip(fio: &Subject) {
    let paths = special_tree(fio).await;
    let dir = done(
        stat(&**fio, SPECIAL_DIR).await,
        "stat of a special collection name",
    );
    assert!(dir.is_collection && dir.path == SPECIAL_DIR, "{dir:?}");
    for path in &paths {
        let info = done(stat(&**fio, path).await, &format!("stat of {path:?}"));
        assert_eq!(
            (info.path.as_str(), info.size),
            (path.as_str(), path.len() as u64)
        );
        assert_eq!(get(&**fio, path).await, path.as_bytes(), "{path:?}");
        let (_, chunks) = done(read(&**fio, path, &[range(Some(1), Some(3))]).await, path);
        assert_eq!(chunks.concat(), path.as_bytes()[1..4], "a range of {path:?}");
        let listed = listed(&**fio, path, Depth::Zero).await;
        assert_eq!(listed, (path.clone(), vec![]), "a Depth 0 listing of {path:?}");
    }
}

/// Listings name special names as they were written.
async fn special_names_are_listed(fio: &Subject) {
    let paths = special_tree(fio).await;
    let mut at_root: Vec<String> = SPECIAL_NAMES.iter().map(|n| (*n).to_owned()).collect();
    at_root.push(SPECIAL_DIR.to_owned());
    at_root.sort();
    assert_eq!(
        listed(&**fio, "", Depth::One).await,
        (String::new(), at_root),
        "Depth 1 of the root"
    );
    let mut in_dir: Vec<String> = SPECIAL_NAMES
        .iter()
        .map(|n| format!("{SPECIAL_DIR}/{n}"))
        .collect();
    in_dir.sort();
    assert_eq!(
        listed(&**fio, SPECIAL_DIR, Depth::One).await,
        (SPECIAL_DIR.to_owned(), in_dir),
        "Depth 1 of a special collection"
    );
    let mut everything = paths.clone();
    everything.push(SPECIAL_DIR.to_owned());
    everything.sort();
    assert_eq!(
        listed(&**fio, "", Depth::Infinity).await,
        (String::new(), everything),
        "Depth infinity"
    );
    for entry in list_with(&**fio, SPECIAL_DIR, Depth::One, None, 0).await.unwrap() {
        let info = entry.info.unwrap();
        if !info.is_collection {
            assert_eq!(info.size, info.path.len() as u64, "{:?}: its size", info.path);
        }
    }
}

/// COPY, MOVE and DELETE of files and trees with special names.
async fn special_names_copy_move_delete(fio: &Subject) {
    special_tree(fio).await;
    let copied = "copie &<>\"'%+ ü";
    whole(
        copy(&**fio, SPECIAL_DIR, copied, Depth::Infinity, false).await,
        "COPY of a special tree",
    );
    for name in SPECIAL_NAMES {
        let path = format!("{copied}/{name}");
        assert_eq!(
            get(&**fio, &path).await,
            format!("{SPECIAL_DIR}/{name}").as_bytes(),
            "{path:?}"
        );
    }
    let [first, second, ..] = SPECIAL_NAMES;
    whole(
        move_to(&**fio, first, "moved & <'\"> %2F+.txt", false).await,
        "MOVE of a special file",
    );
    fails(
        stat(&**fio, first).await,
        Code::NotFound,
        "a moved special file's source",
    );
    assert_eq!(get(&**fio, "moved & <'\"> %2F+.txt").await, first.as_bytes());
    whole(
        copy(&**fio, second, first, Depth::Infinity, false).await,
        "COPY of a special file",
    );
    assert_eq!(get(&**fio, first).await, second.as_bytes());
    let moved = "déplacé &<>\"'%+";
    whole(
        move_to(&**fio, copied, moved, false).await,
        "MOVE of a special tree",
    );
    fails(
        stat(&**fio, copied).await,
        Code::NotFound,
        "a moved special tree's source",
    );
    let (_, members) = listed(&**fio, moved, Depth::One).await;
    assert_eq!(members.len(), SPECIAL_NAMES.len(), "{members:?}");
    for tree in [SPECIAL_DIR, moved] {
        assert!(
            done(delete(&**fio, tree).await, "DELETE of a special tree")
                .failures
                .is_empty()
        );
        fails(stat(&**fio, tree).await, Code::NotFound, "a deleted special tree");
        fails(
            stat(&**fio, &format!("{tree}/{second}")).await,
            Code::NotFound,
            "its members",
        );
    }
    for name in [first, second] {
        done(delete(&**fio, name).await, "DELETE of a special file");
    }
    assert_eq!(
        listed(&**fio, "", Depth::One).await,
        (String::new(), {
            let mut rest: Vec<String> = SPECIAL_NAMES[2..].iter().map(|n| (*n).to_owned()).collect();
            rest.push("moved & <'\"> %2F+.txt".to_owned());
            rest.sort();
            rest
        })
    );
}

/// Dead properties on special names, read back by Depth 0 and Depth 1 listings, and
/// carried by COPY and MOVE.
async fn special_names_keep_properties(fio: &Subject) {
    let paths = special_tree(fio).await;
    for path in &paths {
        done(
            patch(&**fio, path, vec![set("name", path.as_bytes())]).await,
            &format!("PROPPATCH of {path:?}"),
        );
    }
    done(
        patch(&**fio, SPECIAL_DIR, vec![set("name", b"dir")]).await,
        "PROPPATCH of a special collection",
    );
    for path in &paths {
        assert_eq!(
            properties(&**fio, path).await,
            vec![property("name", path.as_bytes())],
            "{path:?}"
        );
    }
    for entry in list_with(&**fio, SPECIAL_DIR, Depth::One, all_properties(), 0)
        .await
        .unwrap()
    {
        let path = entry.info.unwrap().path;
        let expected: &[u8] = if path == SPECIAL_DIR {
            b"dir"
        } else {
            path.as_bytes()
        };
        assert_eq!(
            client_properties(&entry.properties),
            vec![property("name", expected)],
            "{path:?} at Depth 1"
        );
    }
    let copied = "copie &<>\"'%+ ü";
    whole(
        copy(&**fio, SPECIAL_DIR, copied, Depth::Infinity, false).await,
        "COPY of a special tree",
    );
    whole(
        move_to(&**fio, copied, "moved ü&<>", false).await,
        "MOVE of a special tree",
    );
    assert_eq!(
        properties(&**fio, "moved ü&<>").await,
        vec![property("name", b"dir")]
    );
    for name in SPECIAL_NAMES {
        let original = format!("{SPECIAL_DIR}/{name}");
        assert_eq!(
            properties(&**fio, &format!("moved ü&<>/{name}")).await,
            vec![property("name", original.as_bytes())],
            "{name:?} after COPY and MOVE"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Beyond the matrix: the wrappers stacked in another order than run.rs's.

/// With the quota wrapper outside the cache (the order run.rs does not use), answers are
/// still kept: the cache's `kept_copy` reaches the gateway through the quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_over_the_cache_keeps_its_copies_visible() {
    let dir = tempfile::tempdir().unwrap();
    let core: Arc<dyn FileIo> = Arc::new(LocalFileIo::open(dir.path()).unwrap());
    let cache = Arc::new(cached(LeasedFileIo::new(core)));
    let fio = QuotaFileIo::new(cache.clone(), QUOTA_BYTES, Duration::from_secs(3600));
    put(&fio, "k.txt", b"k").await;
    let mut seen = None;
    for _ in 0..100 {
        listed(&fio, "k.txt", Depth::Zero).await;
        seen = cache.kept_copy("k.txt");
        if seen.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(seen.is_some(), "the cache keeps the listing");
    assert_eq!(
        fio.kept_copy("k.txt"),
        seen,
        "the quota wrapper passes the cache's copy on"
    );
}
