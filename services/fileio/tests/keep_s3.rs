//! Trash and versions in a bucket (issue 54, docs/trash-and-versions.md, "Operations on
//! S3"), on a real S3 server (versitygw) and a clock the test moves: two replicas over
//! one bucket purge each old item once; a full quota makes room from the oldest kept;
//! and the layout stays readable by other tools (live keys unchanged, everything kept
//! under the prefix's `.kubedav/`).

use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::fileio::*;
use kubedav_api::keep::{Keep, ListTrashRequest};
use kubedav_api::path::VolumePath;
use kubedav_fileio::ObjectFileIo;
use kubedav_fileio::keep::Keeping;
use kubedav_fileio::objects::config::Storage;
use kubedav_fileio::objects::sweep::Sweep;
use kubedav_fileio::s3::S3Config;
use kubedav_testkit::{S3_ACCESS_KEY, S3_REGION, S3_SECRET_KEY, S3Server};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tonic::Code;

/// The time every replica reads, which the test moves.
type Now = Arc<Mutex<SystemTime>>;

async fn replica(server: &S3Server, now: &Now) -> ObjectFileIo {
    let storage = Storage {
        s3: S3Config {
            endpoint: server.endpoint().parse().unwrap(),
            bucket: server.bucket().to_owned(),
            region: S3_REGION.to_owned(),
            access_key: S3_ACCESS_KEY.to_owned(),
            secret_key: S3_SECRET_KEY.to_owned(),
            path_style: true,
            session_token: None,
            ca_bundle: server.ca_bundle(),
        },
        prefix: "served".to_owned(),
        sweep: Sweep {
            idle: Duration::from_secs(3600),
        },
    };
    let clock = now.clone();
    let keeping = Keeping {
        clock: Arc::new(move || *clock.lock().unwrap()),
        // The test runs the retention.
        retain_every: Duration::ZERO,
        ..Keeping::defaults()
    };
    ObjectFileIo::open(&storage).await.unwrap().with_keeping(keeping)
}

fn clock() -> Now {
    Arc::new(Mutex::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    ))
}

async fn put(fileio: &dyn FileIo, path: &str, data: &'static [u8]) -> Result<WriteResponse, tonic::Status> {
    let header = WriteHeader {
        path: path.to_owned(),
        expected_size: Some(data.len() as u64),
        ..WriteHeader::default()
    };
    fileio
        .write(
            header,
            futures_util::stream::iter([Ok(Bytes::from_static(data))]).boxed(),
        )
        .await
}

async fn delete(fileio: &dyn FileIo, path: &str) -> String {
    let deleted = fileio
        .delete(DeleteRequest {
            path: path.to_owned(),
            by: "alice".to_owned(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(deleted.failures.is_empty());
    assert!(!deleted.trash_item.is_empty(), "{path} went to the trash");
    deleted.trash_item
}

async fn items(fileio: &ObjectFileIo) -> usize {
    fileio
        .keep()
        .list_trash(ListTrashRequest {
            roots: vec![String::new()],
            beneath: Vec::new(),
        })
        .await
        .unwrap()
        .items
        .len()
}

#[tokio::test]
async fn two_replicas_purge_each_old_item_once() {
    let server = S3Server::start("keep");
    let now = clock();
    let (a, b) = (replica(&server, &now).await, replica(&server, &now).await);
    for (i, name) in ["one", "two", "three", "four", "five", "six"].iter().enumerate() {
        let path = format!("{name}.txt");
        put(&a, &path, b"kept").await.unwrap();
        if i % 2 == 0 {
            put(&a, &path, b"kept, then replaced").await.unwrap();
        }
        delete(&b, &path).await;
    }
    assert_eq!(items(&a).await, 6);
    // Not old enough: nothing goes.
    let retained = a.keeper().unwrap().retain().await.unwrap();
    assert_eq!((retained.items, retained.versions), (0, 0));
    *now.lock().unwrap() += Duration::from_secs(31 * 86_400);
    let (first, second) = tokio::join!(a.keeper().unwrap().retain(), b.keeper().unwrap().retain());
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!(
        first.items + second.items,
        6,
        "each item purged once: {first:?} {second:?}"
    );
    assert_eq!(items(&b).await, 0);
    let left: Vec<String> = std::fs::read_dir(server.bucket_dir().join("served/.kubedav/trash/.kubedav"))
        .map(|dir| {
            dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "nothing of the items is left: {left:?}");
}

#[tokio::test]
async fn live_keys_stay_where_other_tools_read_them() {
    let server = S3Server::start("layout");
    let now = clock();
    let fileio = replica(&server, &now).await;
    fileio.mkdir(MkdirRequest { path: "docs".into() }).await.unwrap();
    put(&fileio, "docs/a.txt", b"first").await.unwrap();
    put(&fileio, "docs/a.txt", b"second").await.unwrap();
    let served = server.bucket_dir().join("served");
    assert_eq!(std::fs::read(served.join("docs/a.txt")).unwrap(), b"second");
    let versions = fileio
        .keep()
        .list_versions(kubedav_api::keep::ListVersionsRequest {
            path: "docs/a.txt".into(),
        })
        .await
        .unwrap()
        .versions;
    assert_eq!(versions.len(), 1);
    assert_eq!(
        std::fs::read(served.join(format!(
            ".kubedav/versions/docs/a.txt/.kubedav/{}",
            versions[0].id
        )))
        .unwrap(),
        b"first"
    );
    let id = delete(&fileio, "docs").await;
    assert!(!served.join("docs").exists(), "the live keys are gone");
    let item = served.join(format!(".kubedav/trash/.kubedav/{id}"));
    assert_eq!(std::fs::read(item.join("entry/a.txt")).unwrap(), b"second");
    assert!(item.join("item.json").exists() && !item.join("journal.json").exists());
    // The reserved area is no member of the served tree.
    let listed = fileio
        .stat(StatRequest {
            path: ".kubedav".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(listed.code(), Code::InvalidArgument);
    assert!(VolumePath::parse(".kubedav/trash").is_err());
}

#[tokio::test]
async fn a_full_quota_on_a_bucket_makes_room_from_the_oldest_kept() {
    use kubedav_fileio::quota::{Kept, QuotaFileIo};
    let server = S3Server::start("quota");
    let now = clock();
    let fileio = replica(&server, &now).await;
    let kept: Arc<dyn Kept> = Arc::new(fileio.keep());
    let quota = QuotaFileIo::new(Arc::new(fileio.clone()), 100, Duration::from_secs(3600)).keeping(kept);
    quota.counts_finished(2).await;
    let tick = || *now.lock().unwrap() += Duration::from_secs(1);
    let forty: &'static [u8] = &[b'x'; 40];
    put(&quota, "a.txt", forty).await.unwrap();
    tick();
    put(&quota, "b.txt", forty).await.unwrap();
    tick();
    delete(&quota, "a.txt").await;
    tick();
    // b's new content and its old one, kept as a version, do not fit with a in the
    // trash: a, the oldest kept, goes.
    put(&quota, "b.txt", forty).await.unwrap();
    assert_eq!(items(&fileio).await, 0, "the oldest kept went first");
    tick();
    // A write through a public link never makes room.
    let header = WriteHeader {
        path: "c.txt".into(),
        expected_size: Some(40),
        no_purge: true,
        ..WriteHeader::default()
    };
    let refused = quota
        .write(
            header,
            futures_util::stream::iter([Ok(Bytes::from_static(forty))]).boxed(),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    put(&quota, "c.txt", forty).await.unwrap();
    let versions = fileio
        .keep()
        .list_versions(kubedav_api::keep::ListVersionsRequest { path: "b.txt".into() })
        .await
        .unwrap()
        .versions;
    assert!(versions.is_empty(), "then the version went");
}
