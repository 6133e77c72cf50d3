//! Uploads in many requests on a volume, through the ports (docs/uploads.md): what a
//! broken or damaged append keeps, two appends at once, the cap per owner, expiry on a
//! clock the test moves (10,000 abandoned uploads included), landing through a write,
//! whole or not at all, and Nextcloud chunks assembled in the order of their keys.

use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::checksums::Checksum;
use kubedav_api::fileio::{FileIo, FromUpload, WriteHeader};
use kubedav_api::uploads::{
    AbortUploadRequest, AppendHeader, Chunk, CreateUploadRequest, GetUploadRequest, ListUploadsRequest,
    Uploads,
};
use kubedav_fileio::uploads::UploadSettings;
use kubedav_fileio::{Durability, LocalFileIo};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tonic::{Code, Status};

type Now = Arc<Mutex<SystemTime>>;

fn volume(per_owner: u32) -> (tempfile::TempDir, LocalFileIo, Now) {
    let root = tempfile::tempdir().unwrap();
    let now: Now = Arc::new(Mutex::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    ));
    let clock = now.clone();
    let fileio = LocalFileIo::open_with(root.path(), Durability::None)
        .unwrap()
        .with_uploads(UploadSettings {
            expiry: Duration::from_secs(24 * 3600),
            per_owner,
            sweep_every: Duration::ZERO,
            clock: Arc::new(move || *clock.lock().unwrap()),
        });
    (root, fileio, now)
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
#[tokio::test]
async fn appends_keep_what_they_should_and_a_landing_is_whole_or_nothing() {
    let (root, fileio, _) = volume(10);
    let uploads = fileio.uploads();
    let id = create(&uploads, "alice", "f.txt", 11).await;
    let broke = Status::cancelled("the client went away");
    let refused = uploads
        .append(at(&id, "alice", 0), body(vec![Ok(b"hello"), Err(broke.clone())]))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Cancelled);
    assert_eq!(offset(&uploads, &id, "alice").await, Ok(5));

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
    assert_eq!(offset(&uploads, &id, "alice").await, Ok(5));
    let damaged = uploads
        .append(checked, body(vec![Ok(b" WORLD")]))
        .await
        .unwrap_err();
    assert_eq!(damaged.code(), Code::InvalidArgument);
    assert_eq!(offset(&uploads, &id, "alice").await, Ok(5));

    let early = fileio
        .write(landing("f.txt", &id, "alice", 11), empty())
        .await
        .unwrap_err();
    assert_eq!(early.code(), Code::FailedPrecondition);
    assert!(!root.path().join("f.txt").exists());

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
    assert_eq!(wrong.code(), Code::InvalidArgument);
    assert!(!root.path().join("f.txt").exists());
    assert_eq!(offset(&uploads, &id, "alice").await, Ok(11));

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
    assert_eq!(std::fs::read(root.path().join("f.txt")).unwrap(), b"hello world");
    assert_eq!(offset(&uploads, &id, "alice").await, Err(Code::NotFound));
}

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

/// The names left in an upload's folder (its bytes, its state, chunks kept aside).
fn leftovers(root: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = walk(&root.join(".kubedav/uploads"))
        .into_iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
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
#[tokio::test]
async fn chunks_are_assembled_by_their_keys_whatever_their_order() {
    let (root, fileio, _) = volume(10);
    let uploads = fileio.uploads();
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
    assert_eq!(offset(&uploads, &id, "alice").await, Ok(0));
    let placed = uploads
        .append(chunk(&id, 1, false), body(vec![Ok(b"abc")]))
        .await
        .unwrap();
    assert_eq!((placed.offset, placed.missing_chunk), (9, None));
    assert!(!leftovers(root.path()).iter().any(|n| n.starts_with("chunk.")));

    // Chunk 2 again replaces itself; it may not change its size; offset naming is refused.
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
    fileio
        .write(landing("c.txt", &id, "alice", 9), empty())
        .await
        .unwrap();
    assert_eq!(std::fs::read(root.path().join("c.txt")).unwrap(), b"abcDEFghi");
    assert!(leftovers(root.path()).is_empty(), "{:?}", leftovers(root.path()));

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
    assert!(leftovers(root.path()).contains(&"chunk.3".to_owned()));
    uploads
        .abort(AbortUploadRequest {
            id: id.clone(),
            owner: "alice".into(),
        })
        .await
        .unwrap();
    assert!(leftovers(root.path()).is_empty(), "{:?}", leftovers(root.path()));
}

/// While one append is sending, a second on the same upload is ABORTED and changes
/// nothing; the first completes.
#[tokio::test]
async fn two_appends_at_once_cannot_both_write() {
    let (_root, fileio, _) = volume(10);
    let uploads = Arc::new(fileio.uploads());
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

fn tokio_stream_from(mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, Status>>) -> BoxStream<Bytes> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
}

/// One owner may hold `per_owner` unfinished uploads: one more is RESOURCE_EXHAUSTED
/// while others' are not counted; they expire a day after their last append, on the
/// clock the test moves (an append renews it), and then free their places.
#[tokio::test]
async fn the_cap_per_owner_holds_and_expiry_frees_it() {
    let (_root, fileio, now) = volume(3);
    let uploads = fileio.uploads();
    let ids: Vec<String> = futures_util::future::join_all((0..3).map(|i| {
        let uploads = uploads.clone();
        async move { create(&uploads, "alice", &format!("f{i}"), 4).await }
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
    create(&uploads, "bob", "b", 1).await;

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
    assert_eq!(offset(&uploads, &ids[0], "alice").await, Ok(2));
    assert_eq!(offset(&uploads, &ids[1], "alice").await, Err(Code::NotFound));
    let listed = uploads
        .list(ListUploadsRequest {
            owner: "alice".into(),
        })
        .await
        .unwrap()
        .uploads;
    assert_eq!(listed.len(), 1);
    assert_eq!(uploads.expire(), 3, "alice's other two and bob's one");
    create(&uploads, "alice", "g", 1).await;
}

/// 10,000 uploads abandoned by 100 users (the cap each) cost nothing in the process:
/// their state is on the volume; a day later one sweep removes every one of them.
#[tokio::test]
async fn ten_thousand_abandoned_uploads_are_swept() {
    let (root, fileio, now) = volume(100);
    let uploads = fileio.uploads();
    for owner in 0..100 {
        let owner = format!("user{owner}");
        for i in 0..100 {
            create(&uploads, &owner, &format!("f{i}"), 1 << 30).await;
        }
    }
    let area = root.path().join(".kubedav/uploads");
    let count = || -> usize {
        std::fs::read_dir(&area)
            .unwrap()
            .map(|owner| std::fs::read_dir(owner.unwrap().path()).unwrap().count())
            .sum()
    };
    assert_eq!(count(), 10_000);
    *now.lock().unwrap() += Duration::from_secs(25 * 3600);
    assert_eq!(uploads.expire(), 10_000);
    assert_eq!(count(), 0);
}
