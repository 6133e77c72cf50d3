//! Uploads in many requests, through the ports (docs/uploads.md), on a volume and in a
//! bucket of a real S3 server (versitygw): what a broken or damaged append keeps, two
//! appends at once, the cap per owner, expiry on a clock the test moves (abandoned
//! uploads by the thousand included), landing through a write, whole or not at all, and
//! Nextcloud chunks assembled in the order of their keys. In a bucket, each upload is
//! one multipart upload, and none is left after a landing, a cancel or an expiry.

use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::checksums::Checksum;
use kubedav_api::fileio::{FileIo, FromUpload, WriteHeader};
use kubedav_api::uploads::{
    AbortUploadRequest, AppendHeader, Chunk, CreateUploadRequest, GetUploadRequest, ListUploadsRequest,
    Uploads,
};
use kubedav_fileio::objects::config::Storage;
use kubedav_fileio::objects::sweep::Sweep;
use kubedav_fileio::s3::{S3Client, S3Config};
use kubedav_fileio::uploads::UploadSettings;
use kubedav_fileio::{Durability, LocalFileIo, ObjectFileIo};
use kubedav_testkit::{S3_ACCESS_KEY, S3_REGION, S3_SECRET_KEY, S3Server};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tonic::{Code, Status};

type Now = Arc<Mutex<SystemTime>>;

/// The uploads under test, on one backend.
struct Setup {
    fileio: Arc<dyn FileIo>,
    uploads: Arc<dyn Uploads>,
    now: Now,
    backend: Backend,
}

enum Backend {
    Volume {
        root: tempfile::TempDir,
        fileio: Box<LocalFileIo>,
    },
    Bucket {
        server: Box<S3Server>,
        fileio: Box<ObjectFileIo>,
        s3: Box<S3Client>,
    },
}

/// The served prefix of the bucket.
const PREFIX: &str = "served";

fn settings(per_owner: u32, now: &Now) -> UploadSettings {
    let clock = now.clone();
    UploadSettings {
        expiry: Duration::from_secs(24 * 3600),
        per_owner,
        sweep_every: Duration::ZERO,
        clock: Arc::new(move || *clock.lock().unwrap()),
        ..Default::default()
    }
}

/// [`settings`] with leases renewed every `renewal`.
fn renewing(per_owner: u32, now: &Now, renewal: Duration) -> UploadSettings {
    UploadSettings {
        lease_renewal: renewal,
        ..settings(per_owner, now)
    }
}

fn clock() -> Now {
    Arc::new(Mutex::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    ))
}

impl Setup {
    fn volume(per_owner: u32) -> Setup {
        let root = tempfile::tempdir().unwrap();
        let now = clock();
        let fileio = LocalFileIo::open_with(root.path(), Durability::None)
            .unwrap()
            .with_uploads(settings(per_owner, &now));
        Setup {
            fileio: Arc::new(fileio.clone()),
            uploads: Arc::new(fileio.uploads()),
            now,
            backend: Backend::Volume {
                root,
                fileio: Box::new(fileio),
            },
        }
    }

    async fn bucket(per_owner: u32) -> Setup {
        Self::bucket_renewing(per_owner, Duration::from_secs(2)).await
    }

    /// A bucket whose uploads' leases are renewed every `renewal`.
    async fn bucket_renewing(per_owner: u32, renewal: Duration) -> Setup {
        let server = S3Server::start("files");
        let config = S3Config {
            endpoint: server.endpoint().parse().unwrap(),
            bucket: server.bucket().to_owned(),
            region: S3_REGION.to_owned(),
            access_key: S3_ACCESS_KEY.to_owned(),
            secret_key: S3_SECRET_KEY.to_owned(),
            path_style: true,
            session_token: None,
            ca_bundle: server.ca_bundle(),
        };
        let storage = Storage {
            s3: config.clone(),
            prefix: PREFIX.to_owned(),
            sweep: Sweep {
                idle: Duration::from_secs(3600),
            },
        };
        let now = clock();
        let fileio = ObjectFileIo::open(&storage)
            .await
            .unwrap()
            .with_uploads(renewing(per_owner, &now, renewal));
        Setup {
            fileio: Arc::new(fileio.clone()),
            uploads: Arc::new(fileio.uploads()),
            now,
            backend: Backend::Bucket {
                s3: Box::new(S3Client::new(&config).unwrap()),
                server: Box::new(server),
                fileio: Box::new(fileio),
            },
        }
    }

    /// Where the files are on disk (versitygw's posix backend keeps one file per object).
    fn files(&self) -> PathBuf {
        match &self.backend {
            Backend::Volume { root, .. } => root.path().to_owned(),
            Backend::Bucket { server, .. } => server.bucket_dir().join(PREFIX),
        }
    }

    /// The file `path`, if there is one.
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(self.files().join(path)).ok()
    }

    /// The names of the files left in kubedav's uploads area.
    fn leftovers(&self) -> Vec<String> {
        let mut names: Vec<String> = walk(&self.files().join(".kubedav/uploads"))
            .into_iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        names.sort();
        names
    }

    /// The multipart uploads under way in the bucket (none on a volume).
    async fn multiparts(&self) -> usize {
        match &self.backend {
            Backend::Volume { .. } => 0,
            Backend::Bucket { s3, .. } => s3.uploads(&format!("{PREFIX}/")).await.unwrap().len(),
        }
    }

    /// Removes the expired uploads now; how many went.
    async fn expire(&self) -> usize {
        match &self.backend {
            Backend::Volume { fileio, .. } => fileio.uploads().expire(),
            Backend::Bucket { fileio, .. } => fileio.uploads().expire().await,
        }
    }

    fn in_bucket(&self) -> bool {
        matches!(self.backend, Backend::Bucket { .. })
    }
}

/// Runs `test` on a volume and in a bucket, as two tests.
macro_rules! on_both {
    ($name:ident, $volume:ident, $bucket:ident, $per_owner:expr) => {
        #[tokio::test]
        async fn $volume() {
            $name(Setup::volume($per_owner)).await;
        }

        #[tokio::test]
        async fn $bucket() {
            $name(Setup::bucket($per_owner).await).await;
        }
    };
}

fn body(chunks: Vec<Result<&'static [u8], Status>>) -> BoxStream<Bytes> {
    futures_util::stream::iter(chunks.into_iter().map(|c| c.map(Bytes::from_static))).boxed()
}

async fn create(uploads: &dyn Uploads, owner: &str, target: &str, length: u64) -> String {
    uploads
        .create(CreateUploadRequest {
            owner: owner.into(),
            target: target.into(),
            length: Some(length),
            metadata: Default::default(),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
}

fn at(id: &str, owner: &str, offset: u64) -> AppendHeader {
    AppendHeader {
        id: id.into(),
        owner: owner.into(),
        offset,
        ..Default::default()
    }
}

async fn offset(uploads: &dyn Uploads, id: &str, owner: &str) -> Result<u64, Code> {
    uploads
        .get(GetUploadRequest {
            id: id.into(),
            owner: owner.into(),
        })
        .await
        .map(|u| u.offset)
        .map_err(|s| s.code())
}

fn landing(path: &str, id: &str, owner: &str, size: u64) -> WriteHeader {
    WriteHeader {
        path: path.into(),
        expected_size: Some(size),
        from_upload: Some(FromUpload {
            id: id.into(),
            owner: owner.into(),
        }),
        ..Default::default()
    }
}

fn empty() -> BoxStream<Bytes> {
    futures_util::stream::empty().boxed()
}

/// A body that breaks off keeps what arrived; with a checksum it keeps nothing, and a
/// wrong checksum keeps nothing; a landing before the last byte is refused and leaves
/// the upload; a landing whose checksum is wrong too; the right one lands it whole.
async fn appends_keep_what_they_should_and_a_landing_is_whole_or_nothing(s: Setup) {
    let (fileio, uploads) = (&s.fileio, &*s.uploads);
    let id = create(uploads, "alice", "f.txt", 11).await;
    assert_eq!(s.multiparts().await, usize::from(s.in_bucket()));
    let broke = Status::cancelled("the client went away");
    let refused = uploads
        .append(at(&id, "alice", 0), body(vec![Ok(b"hello"), Err(broke.clone())]))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Cancelled);
    assert_eq!(offset(uploads, &id, "alice").await, Ok(5));

    let sha1_of_world = "7c211433f02071597741e6ff5a8ea34789abbf43";
    let mut checked = at(&id, "alice", 5);
    checked.checksum = Some(Checksum {
        algorithm: "SHA1".into(),
        hex: sha1_of_world.into(),
    });
    let broken_checked = uploads
        .append(checked.clone(), body(vec![Ok(b" wor"), Err(broke)]))
        .await
        .unwrap_err();
    assert_eq!(broken_checked.code(), Code::Cancelled);
    assert_eq!(offset(uploads, &id, "alice").await, Ok(5));
    let damaged = uploads
        .append(checked, body(vec![Ok(b" WORLD")]))
        .await
        .unwrap_err();
    assert_eq!(damaged.code(), Code::InvalidArgument);
    assert_eq!(offset(uploads, &id, "alice").await, Ok(5));

    let early = fileio
        .write(landing("f.txt", &id, "alice", 11), empty())
        .await
        .unwrap_err();
    assert_eq!(early.code(), Code::FailedPrecondition);
    assert!(s.read("f.txt").is_none());

    uploads
        .append(at(&id, "alice", 5), body(vec![Ok(b" world")]))
        .await
        .unwrap();
    let mut wrong_sum = landing("f.txt", &id, "alice", 11);
    wrong_sum.checksums = vec![Checksum {
        algorithm: "SHA1".into(),
        hex: sha1_of_world.into(),
    }];
    let wrong = fileio.write(wrong_sum, empty()).await.unwrap_err();
    // In a bucket, bytes that went straight to their file cannot be read back before
    // they land: such an upload's checksums are checked per append.
    let refused_as = match s.in_bucket() {
        true => Code::FailedPrecondition,
        false => Code::InvalidArgument,
    };
    assert_eq!(wrong.code(), refused_as, "{}", wrong.message());
    assert!(s.read("f.txt").is_none());
    assert_eq!(offset(uploads, &id, "alice").await, Ok(11));

    let theirs = fileio
        .write(landing("f.txt", &id, "bob", 11), empty())
        .await
        .unwrap_err();
    assert_eq!(theirs.code(), Code::NotFound);

    let mut right = landing("f.txt", &id, "alice", 11);
    right.compute = vec!["SHA256".into()];
    let landed = fileio.write(right, empty()).await.unwrap();
    assert!(landed.created);
    assert_eq!(landed.checksums[0].algorithm, "SHA256");
    assert_eq!(s.read("f.txt").unwrap(), b"hello world");
    assert_eq!(offset(uploads, &id, "alice").await, Err(Code::NotFound));
    assert_eq!(s.multiparts().await, 0);
    assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
}

on_both!(
    appends_keep_what_they_should_and_a_landing_is_whole_or_nothing,
    appends_and_landings_on_a_volume,
    appends_and_landings_in_a_bucket,
    10
);

fn chunk(id: &str, key: u64, by_offset: bool) -> AppendHeader {
    AppendHeader {
        id: id.into(),
        owner: "alice".into(),
        chunk: Some(Chunk {
            key,
            by_offset,
            size: None,
        }),
        ..Default::default()
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// Nextcloud chunks: a named upload is found by its name and cannot be made twice;
/// numbered chunks that arrive out of order wait aside and are assembled by number; the
/// landing is refused while one is missing; a broken chunk keeps nothing; a chunk sent
/// again replaces itself (and may not change its size); chunks of the other naming are
/// refused; a cancelled upload leaves nothing behind.
async fn chunks_are_assembled_by_their_keys_whatever_their_order(s: Setup) {
    let (fileio, uploads) = (&s.fileio, &*s.uploads);
    let named = CreateUploadRequest {
        owner: "alice".into(),
        name: "web-file-upload-1".into(),
        ..Default::default()
    };
    let id = uploads.create(named.clone()).await.unwrap().id;
    assert_eq!(id, kubedav_api::uploads::named_id("alice", "web-file-upload-1"));
    let twice = uploads.create(named).await.unwrap_err();
    assert_eq!(twice.code(), Code::AlreadyExists);

    // Chunk 3, then 2: both wait for chunk 1.
    uploads
        .append(chunk(&id, 3, false), body(vec![Ok(b"ghi")]))
        .await
        .unwrap();
    let waiting = uploads
        .append(chunk(&id, 2, false), body(vec![Ok(b"def")]))
        .await
        .unwrap();
    assert_eq!((waiting.offset, waiting.missing_chunk), (0, Some(1)));
    let early = fileio
        .write(landing("c.txt", &id, "alice", 9), empty())
        .await
        .unwrap_err();
    assert_eq!(early.code(), Code::FailedPrecondition);
    assert!(early.message().contains("chunk 1"), "{}", early.message());

    // A broken chunk 1 keeps nothing; a whole one places 1, 2 and 3.
    let broke = Status::cancelled("the client went away");
    let refused = uploads
        .append(chunk(&id, 1, false), body(vec![Ok(b"ab"), Err(broke)]))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Cancelled);
    assert_eq!(offset(uploads, &id, "alice").await, Ok(0));
    let placed = uploads
        .append(chunk(&id, 1, false), body(vec![Ok(b"abc")]))
        .await
        .unwrap();
    assert_eq!((placed.offset, placed.missing_chunk), (9, None));
    assert!(!s.leftovers().iter().any(|n| n.starts_with("chunk.")));

    // Chunk 2 again replaces itself (on a volume; in a bucket its bytes are not sent
    // twice); it may not change its size; offset naming is refused.
    uploads
        .append(chunk(&id, 2, false), body(vec![Ok(b"DEF")]))
        .await
        .unwrap();
    let resized = uploads
        .append(chunk(&id, 2, false), body(vec![Ok(b"DEFG")]))
        .await
        .unwrap_err();
    assert_eq!(resized.code(), Code::InvalidArgument);
    let mixed = uploads
        .append(chunk(&id, 9, true), body(vec![Ok(b"x")]))
        .await
        .unwrap_err();
    assert_eq!(mixed.code(), Code::FailedPrecondition);
    let landed: &[u8] = match s.in_bucket() {
        true => b"abcdefghi",
        false => b"abcDEFghi",
    };
    // The whole file's SHA-1 is checked at the landing, whether it was carried over the
    // chunks (in a bucket, where chunk 2 sent again changed no byte) or the bytes are
    // read again (on a volume).
    let wrong = fileio
        .write(
            with_sha1(landing("c.txt", &id, "alice", 9), b"abcdefgh!"),
            empty(),
        )
        .await
        .unwrap_err();
    assert_eq!(wrong.code(), Code::InvalidArgument, "{}", wrong.message());
    assert_eq!(offset(uploads, &id, "alice").await, Ok(9), "the upload stays");
    fileio
        .write(with_sha1(landing("c.txt", &id, "alice", 9), landed), empty())
        .await
        .unwrap();
    assert_eq!(s.read("c.txt").unwrap(), landed);
    assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());

    // START-END chunks out of order: in a bucket the SHA-1 is carried over the chunk
    // that waited too.
    let id = uploads
        .create(CreateUploadRequest {
            owner: "alice".into(),
            name: "rclone-chunked-upload-y".into(),
            length: Some(6),
            ..Default::default()
        })
        .await
        .unwrap()
        .id;
    for (key, bytes) in [(3, b"def"), (0, b"abc")] {
        uploads
            .append(chunk(&id, key, true), body(vec![Ok(bytes)]))
            .await
            .unwrap();
    }
    let written = fileio
        .write(with_sha1(landing("d.txt", &id, "alice", 6), b"abcdef"), empty())
        .await
        .unwrap();
    assert_eq!(written.checksums[0].hex, sha1_hex(b"abcdef"));
    assert_eq!(s.read("d.txt").unwrap(), b"abcdef");

    // START-END chunks: placed by offset; one ahead waits; cancelling removes all.
    let id = uploads
        .create(CreateUploadRequest {
            owner: "alice".into(),
            name: "rclone-chunked-upload-x".into(),
            length: Some(6),
            ..Default::default()
        })
        .await
        .unwrap()
        .id;
    uploads
        .append(chunk(&id, 3, true), body(vec![Ok(b"def")]))
        .await
        .unwrap();
    let past = uploads
        .append(chunk(&id, 5, true), body(vec![Ok(b"xyz")]))
        .await
        .unwrap_err();
    assert_eq!(past.code(), Code::OutOfRange);
    assert!(s.leftovers().contains(&"chunk.3".to_owned()));
    uploads
        .abort(AbortUploadRequest {
            id: id.clone(),
            owner: "alice".into(),
        })
        .await
        .unwrap();
    assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
    assert_eq!(s.multiparts().await, 0);
}

on_both!(
    chunks_are_assembled_by_their_keys_whatever_their_order,
    chunks_on_a_volume,
    chunks_in_a_bucket,
    10
);

/// While one append is sending, a second on the same upload is ABORTED and changes
/// nothing; the first completes.
async fn two_appends_at_once_cannot_both_write(s: Setup) {
    let uploads = s.uploads.clone();
    let id = create(&*uploads, "alice", "f.txt", 8).await;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Status>>(1);
    let slow = tokio_stream_from(rx);
    let first = {
        let (uploads, id) = (uploads.clone(), id.clone());
        tokio::spawn(async move { uploads.append(at(&id, "alice", 0), slow).await })
    };
    // A channel of one: the second send returns once the first bytes were taken, so
    // the first append holds the upload by then.
    tx.send(Ok(Bytes::from_static(b"1234"))).await.unwrap();
    tx.send(Ok(Bytes::from_static(b"56"))).await.unwrap();
    let second = uploads
        .append(at(&id, "alice", 0), body(vec![Ok(b"abcdefgh")]))
        .await
        .unwrap_err();
    assert_eq!(second.code(), Code::Aborted);
    tx.send(Ok(Bytes::from_static(b"78"))).await.unwrap();
    drop(tx);
    let done = first.await.unwrap().unwrap();
    assert_eq!(done.offset, 8);
}

on_both!(
    two_appends_at_once_cannot_both_write,
    two_appends_at_once_on_a_volume,
    two_appends_at_once_in_a_bucket,
    10
);

fn tokio_stream_from(mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, Status>>) -> BoxStream<Bytes> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
}

/// One owner may hold `per_owner` unfinished uploads: one more is RESOURCE_EXHAUSTED
/// while others' are not counted; they expire a day after their last append, on the
/// clock the test moves (an append renews it), and then free their places.
async fn the_cap_per_owner_holds_and_expiry_frees_it(s: Setup) {
    let (uploads, now) = (s.uploads.clone(), &s.now);
    let ids: Vec<String> = futures_util::future::join_all((0..3).map(|i| {
        let uploads = uploads.clone();
        async move { create(&*uploads, "alice", &format!("f{i}"), 4).await }
    }))
    .await;
    let over = uploads
        .create(CreateUploadRequest {
            owner: "alice".into(),
            target: "g".into(),
            length: Some(1),
            metadata: Default::default(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(over.code(), Code::ResourceExhausted);
    assert!(over.message().contains("unfinished uploads"));
    create(&*uploads, "bob", "b", 1).await;

    *now.lock().unwrap() += Duration::from_secs(20 * 3600);
    uploads
        .append(at(&ids[0], "alice", 0), body(vec![Ok(b"ab")]))
        .await
        .unwrap();
    // An empty append renews nothing: ids[1] still expires a day after its creation.
    uploads
        .append(at(&ids[1], "alice", 0), body(vec![]))
        .await
        .unwrap();
    *now.lock().unwrap() += Duration::from_secs(5 * 3600);
    assert_eq!(offset(&*uploads, &ids[0], "alice").await, Ok(2));
    assert_eq!(offset(&*uploads, &ids[1], "alice").await, Err(Code::NotFound));
    let listed = uploads
        .list(ListUploadsRequest {
            owner: "alice".into(),
        })
        .await
        .unwrap()
        .uploads;
    assert_eq!(listed.len(), 1);
    assert_eq!(s.expire().await, 3, "alice's other two and bob's one");
    assert_eq!(s.multiparts().await, usize::from(s.in_bucket()));
    create(&*uploads, "alice", "g", 1).await;
}

on_both!(
    the_cap_per_owner_holds_and_expiry_frees_it,
    the_cap_per_owner_on_a_volume,
    the_cap_per_owner_in_a_bucket,
    3
);

/// Uploads abandoned by `users` users, 100 each (the cap), cost nothing in the process:
/// their state is with the data; a day later one sweep removes every one of them (and,
/// in a bucket, aborts their multipart uploads). 10,000 on a volume; 1,000 in a bucket,
/// where each costs a few requests to versitygw.
async fn abandoned_uploads_are_swept(s: Setup, users: usize) {
    let uploads = &*s.uploads;
    for owner in 0..users {
        let owner = format!("user{owner}");
        for i in 0..100 {
            create(uploads, &owner, &format!("f{i}"), 1 << 30).await;
        }
    }
    let count = || s.leftovers().iter().filter(|name| *name == "state.json").count();
    assert_eq!(count(), users * 100);
    if s.in_bucket() {
        assert_eq!(s.multiparts().await, users * 100);
    }
    *s.now.lock().unwrap() += Duration::from_secs(25 * 3600);
    assert_eq!(s.expire().await, users * 100);
    assert_eq!(count(), 0);
    assert_eq!(s.multiparts().await, 0);
}

#[tokio::test]
async fn ten_thousand_abandoned_uploads_are_swept_on_a_volume() {
    abandoned_uploads_are_swept(Setup::volume(100), 100).await;
}

#[tokio::test]
async fn a_thousand_abandoned_uploads_are_swept_in_a_bucket() {
    abandoned_uploads_are_swept(Setup::bucket(100).await, 10).await;
}

/// `len` pseudo-random bytes (no two parts alike, so a part out of place shows).
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..len).map(|_| rng.u8(..)).collect()
}

/// `header` with the SHA-1 of `data` to check.
fn with_sha1(mut header: WriteHeader, data: &[u8]) -> WriteHeader {
    header.checksums = vec![Checksum {
        algorithm: "SHA1".into(),
        hex: sha1_hex(data),
    }];
    header
}

fn sha1_hex(data: &[u8]) -> String {
    use sha1::Digest;
    kubedav_api::checksums::to_hex(&sha1::Sha1::digest(data))
}

/// A 37 MiB file in appends of odd sizes (so parts fill across appends and bytes wait
/// in the buffer between them; some say their size, so their parts go as they arrive,
/// and one of those breaks off in the middle of a part) lands byte for byte, straight to
/// its file; the same
/// bytes as numbered chunks, some out of order, land through an upload of their own
/// with their checksum verified and their time kept. Each upload is one multipart
/// upload while it lasts, and none is left after.
async fn large_uploads_land_byte_for_byte(s: Setup) {
    let (fileio, uploads) = (&s.fileio, &*s.uploads);
    let data = random_bytes((37 << 20) + 123, 7);
    let id = create(uploads, "alice", "big.bin", data.len() as u64).await;
    let mut sent = 0;
    // Requests of odd sizes, every other one saying its size (so its parts go as they
    // arrive)...
    for (i, piece) in data[..21 << 20].chunks((3 << 20) + 7).enumerate() {
        let mut header = at(&id, "alice", sent);
        header.bytes = (i % 2 == 1).then_some(piece.len() as u64);
        let appended = uploads.append(header, body_of(piece)).await.unwrap();
        sent += piece.len() as u64;
        assert_eq!(appended.offset, sent);
    }
    // ...one that says 16 MiB but breaks off in the middle of a part: what arrived is
    // kept...
    let mut header = at(&id, "alice", sent);
    header.bytes = Some(16 << 20);
    let mut cut: Vec<Result<Bytes, Status>> = data[sent as usize..(sent + (11 << 20)) as usize]
        .chunks(256 << 10)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    cut.push(Err(Status::cancelled("the client went away")));
    let broke = uploads
        .append(header, futures_util::stream::iter(cut).boxed())
        .await
        .unwrap_err();
    assert_eq!(broke.code(), Code::Cancelled);
    sent += 11 << 20;
    assert_eq!(offset(uploads, &id, "alice").await, Ok(sent));
    // ...and the rest in one request that says its size.
    let mut header = at(&id, "alice", sent);
    header.bytes = Some(data.len() as u64 - sent);
    uploads
        .append(header, body_of(&data[sent as usize..]))
        .await
        .unwrap();
    assert_eq!(s.multiparts().await, usize::from(s.in_bucket()));
    let landed = fileio
        .write(landing("big.bin", &id, "alice", data.len() as u64), empty())
        .await
        .unwrap();
    assert!(landed.created);
    assert!(
        s.read("big.bin").unwrap() == data,
        "the file landed is not the file sent"
    );

    let id = uploads
        .create(CreateUploadRequest {
            owner: "alice".into(),
            name: "nextcloud-1".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .id;
    let pieces: Vec<&[u8]> = data.chunks(6 << 20).collect();
    assert_eq!(pieces.len(), 7);
    for key in [2u64, 1, 4, 3, 5, 7, 6] {
        let piece = pieces[key as usize - 1];
        let mut header = chunk(&id, key, false);
        header.bytes = (key % 2 == 1).then_some(piece.len() as u64);
        uploads.append(header, body_of(piece)).await.unwrap();
    }
    let mut checked = landing("copy.bin", &id, "alice", data.len() as u64);
    checked.modified_unix_ns = Some(1_700_000_000_000_000_000);
    checked.checksums = vec![Checksum {
        algorithm: "SHA1".into(),
        hex: sha1_hex(&data),
    }];
    let landed = fileio.write(checked, empty()).await.unwrap();
    assert!(landed.created);
    assert!(
        s.read("copy.bin").unwrap() == data,
        "the chunks landed are not the chunks sent"
    );
    let info = fileio
        .stat(kubedav_api::fileio::StatRequest {
            path: "copy.bin".into(),
        })
        .await
        .unwrap();
    assert_eq!(info.modified_unix_ns, 1_700_000_000_000_000_000);
    assert_eq!(s.multiparts().await, 0);
    assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
}

on_both!(
    large_uploads_land_byte_for_byte,
    large_uploads_on_a_volume,
    large_uploads_in_a_bucket,
    10
);

fn body_of(data: &[u8]) -> BoxStream<Bytes> {
    let chunks: Vec<Result<Bytes, Status>> = data
        .chunks(256 << 10)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    futures_util::stream::iter(chunks).boxed()
}

/// The sweep of abandoned multipart uploads (`--abandoned-upload-seconds`, here with no
/// idle time at all) aborts one that no upload holds, and leaves an unfinished upload's
/// alone: that one still lands.
#[tokio::test]
async fn the_sweep_of_abandoned_multipart_uploads_spares_unfinished_uploads() {
    let s = Setup::bucket(10).await;
    let Backend::Bucket { s3, .. } = &s.backend else {
        unreachable!()
    };
    let id = create(&*s.uploads, "alice", "kept.txt", 5).await;
    s.uploads
        .append(at(&id, "alice", 0), body(vec![Ok(b"hello")]))
        .await
        .unwrap();
    s3.start_upload(&format!("{PREFIX}/stray.bin")).await.unwrap();
    assert_eq!(s.multiparts().await, 2);
    let aborted =
        kubedav_fileio::objects::sweep::abandoned_uploads(s3, &format!("{PREFIX}/"), Duration::ZERO).await;
    assert_eq!(aborted, 1);
    assert_eq!(s.multiparts().await, 1);
    s.fileio
        .write(landing("kept.txt", &id, "alice", 5), empty())
        .await
        .unwrap();
    assert_eq!(s.read("kept.txt").unwrap(), b"hello");
}

/// In a bucket, a request that hung past its lease (here: the clock moved on while it
/// held the upload) loses the upload to the next, and cannot spoil it afterwards: the
/// part it sends late has a number the new holder never uses, so what lands is the new
/// holder's bytes; the late request itself gets ABORTED.
#[tokio::test]
async fn a_request_that_lost_its_lease_cannot_spoil_the_upload() {
    let s = Setup::bucket(10).await;
    let uploads = s.uploads.clone();
    let late_bytes = random_bytes(17 << 20, 1);
    let kept_bytes = random_bytes(17 << 20, 2);
    let id = create(&*uploads, "alice", "f.bin", kept_bytes.len() as u64).await;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Status>>(1);
    let late = {
        let (uploads, id) = (uploads.clone(), id.clone());
        tokio::spawn(async move { uploads.append(at(&id, "alice", 0), tokio_stream_from(rx)).await })
    };
    // The first request holds the upload and has sent its first part...
    tx.send(Ok(Bytes::copy_from_slice(&late_bytes[..9 << 20])))
        .await
        .unwrap();
    tx.send(Ok(Bytes::new())).await.unwrap();
    // ...then stalls past its lease: another request takes the upload over.
    *s.now.lock().unwrap() += Duration::from_secs(9);
    let taken = uploads
        .append(at(&id, "alice", 0), body_of(&kept_bytes))
        .await
        .unwrap();
    assert_eq!(taken.offset, kept_bytes.len() as u64);
    // The first request wakes up and sends another part, then ends.
    tx.send(Ok(Bytes::copy_from_slice(&late_bytes[9 << 20..])))
        .await
        .unwrap();
    drop(tx);
    let refused = late.await.unwrap().unwrap_err();
    assert_eq!(refused.code(), Code::Aborted, "{}", refused.message());
    s.fileio
        .write(landing("f.bin", &id, "alice", kept_bytes.len() as u64), empty())
        .await
        .unwrap();
    assert!(
        s.read("f.bin").unwrap() == kept_bytes,
        "the late request spoiled the upload"
    );
    assert_eq!(s.multiparts().await, 0);
    assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
}

/// In a bucket, a renewal of a request's lease writes the state the request last saved,
/// never bytes it counted but has not finished: renewed every millisecond here, so
/// renewals fall everywhere in the request, no state written while the lease is held
/// counts more than before the request (were the replica to die right after such a
/// renewal, the upload would claim bytes that no part or buffer holds, and land with a
/// hole). Chunk 1 arrives after chunk 2, so its request also assembles chunk 2.
#[tokio::test]
async fn a_renewal_never_writes_what_the_request_has_not_finished() {
    let s = Setup::bucket_renewing(10, Duration::from_millis(1)).await;
    let uploads = s.uploads.clone();
    let data = random_bytes(18 << 20, 3);
    let id = uploads
        .create(CreateUploadRequest {
            owner: "alice".into(),
            name: "renewed".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .id;
    uploads
        .append(chunk(&id, 2, false), body_of(&data[9 << 20..]))
        .await
        .unwrap();
    let state = walk(&s.files().join(".kubedav/uploads"))
        .into_iter()
        .find(|p| p.ends_with("state.json"))
        .expect("the upload's state");
    // Every state seen on disk while the lease is held: its offset.
    let watching = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let watching = watching.clone();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while watching.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(text) = std::fs::read(&state) else { continue };
                let Ok(json) = serde_json::from_slice::<serde_json::Value>(&text) else {
                    continue;
                };
                if !json["lease"].is_null() {
                    seen.push(json["record"]["offset"].as_u64().unwrap());
                }
            }
            seen
        })
    };
    let placed = uploads
        .append(chunk(&id, 1, false), body_of(&data[..9 << 20]))
        .await
        .unwrap();
    watching.store(false, std::sync::atomic::Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    assert_eq!(placed.offset, data.len() as u64);
    assert!(!seen.is_empty(), "no state written under a lease was seen");
    let ahead: Vec<u64> = seen.iter().copied().filter(|offset| *offset != 0).collect();
    assert!(
        ahead.is_empty(),
        "{} of {} states written under the lease count bytes the request had not saved \
         (offset up to {:?})",
        ahead.len(),
        seen.len(),
        ahead.iter().max()
    );
    s.fileio
        .write(landing("r.bin", &id, "alice", data.len() as u64), empty())
        .await
        .unwrap();
    assert!(s.read("r.bin").unwrap() == data, "the landed file differs");
}
