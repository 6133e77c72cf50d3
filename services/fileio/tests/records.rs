//! The records port on both backends: a volume (`.kubedav/` at its root) and a bucket
//! on a real S3 server (versitygw, under the prefix's `.kubedav/`). Round trips, atomic
//! replacement, listings of one folder, names that cannot leave their area, the size
//! bound, and that the files port never reaches them.

use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::fileio::{FileIo, ListRequest, StatRequest};
use kubedav_api::records::*;
use kubedav_fileio::LocalFileIo;
use kubedav_fileio::records::{BucketRecords, VolumeRecords};
use kubedav_fileio::s3::{S3Client, S3Config};
use kubedav_testkit::{S3_ACCESS_KEY, S3_REGION, S3_SECRET_KEY, S3Server};
use tonic::Code;

fn get(area: &str, key: &str) -> GetRecordRequest {
    GetRecordRequest {
        area: area.into(),
        key: key.into(),
    }
}

fn put(area: &str, key: &str, data: &'static [u8]) -> PutRecordRequest {
    PutRecordRequest {
        area: area.into(),
        key: key.into(),
        data: Bytes::from_static(data),
        create_only: false,
    }
}

fn delete(area: &str, key: &str) -> DeleteRecordRequest {
    DeleteRecordRequest {
        area: area.into(),
        key: key.into(),
    }
}

async fn names(records: &dyn Records, area: &str, folder: &str) -> Vec<String> {
    records
        .list(ListRecordsRequest {
            area: area.into(),
            folder: folder.into(),
        })
        .await
        .unwrap()
        .names
}

/// The contract, against `records`.
async fn the_contract(records: &dyn Records) {
    let absent = records.get(get("app-passwords", "dXNlcg/k1")).await.unwrap();
    assert!(!absent.found);
    assert_eq!(
        names(records, "app-passwords", "dXNlcg").await,
        Vec::<String>::new()
    );
    records
        .put(put("app-passwords", "dXNlcg/k1", b"one"))
        .await
        .unwrap();
    records
        .put(put("app-passwords", "dXNlcg/k2", b"two"))
        .await
        .unwrap();
    records
        .put(put("app-passwords", "b3RoZXI/k3", b"other's"))
        .await
        .unwrap();
    records
        .put(put("app-passwords", "dXNlcg/deeper/k4", b"deep"))
        .await
        .unwrap();
    let found = records.get(get("app-passwords", "dXNlcg/k1")).await.unwrap();
    assert_eq!((found.found, &found.data[..]), (true, &b"one"[..]));
    records
        .put(put("app-passwords", "dXNlcg/k1", b"one, replaced"))
        .await
        .unwrap();
    assert_eq!(
        &records.get(get("app-passwords", "dXNlcg/k1")).await.unwrap().data[..],
        b"one, replaced"
    );
    assert_eq!(names(records, "app-passwords", "dXNlcg").await, ["k1", "k2"]);
    assert_eq!(names(records, "app-passwords", "b3RoZXI").await, ["k3"]);
    assert_eq!(
        names(records, "shares", "dXNlcg").await,
        Vec::<String>::new(),
        "areas are apart"
    );
    records
        .delete(delete("app-passwords", "dXNlcg/k1"))
        .await
        .unwrap();
    records
        .delete(delete("app-passwords", "dXNlcg/k1"))
        .await
        .unwrap();
    assert!(
        !records
            .get(get("app-passwords", "dXNlcg/k1"))
            .await
            .unwrap()
            .found
    );
    assert_eq!(names(records, "app-passwords", "dXNlcg").await, ["k2"]);

    // A record made only if absent: the first write of a name wins, every later one is
    // refused, and the first one's bytes stay.
    let slot = |data: &[u8]| kubedav_api::records::Area("links").create("uses/l1/0", data.to_vec());
    records.put(slot(b"first")).await.unwrap();
    let second = records.put(slot(b"second")).await.unwrap_err();
    assert_eq!(second.code(), Code::AlreadyExists);
    assert_eq!(
        &records.get(get("links", "uses/l1/0")).await.unwrap().data[..],
        b"first"
    );
    assert_eq!(names(records, "links", "uses/l1").await, ["0"]);

    for (area, key) in [
        ("app-passwords", "../x"),
        ("app-passwords", "a/../../b"),
        ("../x", "k"),
        ("a", "/etc"),
    ] {
        let refused = records.get(get(area, key)).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{area} {key}");
    }
    let big = vec![b'x'; MAX_RECORD_BYTES + 1];
    let refused = records
        .put(PutRecordRequest {
            area: "app-passwords".into(),
            key: "dXNlcg/big".into(),
            data: big.into(),
            create_only: false,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        !records
            .get(get("app-passwords", "dXNlcg/big"))
            .await
            .unwrap()
            .found
    );
}

#[tokio::test]
async fn records_on_a_volume_live_under_kubedav_and_no_file_path_reaches_them() {
    let dir = tempfile::tempdir().unwrap();
    let fileio = LocalFileIo::open(dir.path()).unwrap();
    let records: VolumeRecords = fileio.records();
    the_contract(&records).await;
    let stored = dir.path().join(".kubedav/app-passwords/dXNlcg/k2");
    assert_eq!(std::fs::read(&stored).unwrap(), b"two");
    // The files port neither lists nor reaches the reserved folder.
    let mut listing = fileio
        .list(ListRequest {
            path: String::new(),
            depth: kubedav_api::fileio::Depth::One as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    while let Some(batch) = listing.next().await {
        for entry in batch.unwrap().entries {
            let path = entry.info.unwrap().path;
            assert!(!path.contains(".kubedav"), "{path}");
        }
    }
    let refused = fileio
        .stat(StatRequest {
            path: ".kubedav/app-passwords/dXNlcg/k2".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn records_in_a_bucket_live_under_the_prefix_kubedav() {
    let server = S3Server::start("records");
    let s3 = S3Client::new(&S3Config {
        endpoint: server.endpoint().parse().unwrap(),
        bucket: server.bucket().to_owned(),
        region: S3_REGION.to_owned(),
        access_key: S3_ACCESS_KEY.to_owned(),
        secret_key: S3_SECRET_KEY.to_owned(),
        path_style: true,
        session_token: None,
        ca_bundle: server.ca_bundle(),
    })
    .unwrap();
    let records = BucketRecords::new(s3, "served/");
    the_contract(&records).await;
    assert_eq!(
        std::fs::read(
            server
                .bucket_dir()
                .join("served/.kubedav/app-passwords/dXNlcg/k2")
        )
        .unwrap(),
        b"two",
        "another S3 client finds it under the prefix's .kubedav/"
    );
}
