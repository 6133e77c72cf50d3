//! The S3 server the object-storage suites run on: versitygw on a free port, checking
//! signatures, and keeping the bucket a plain bucket (an object is a file under its key,
//! whatever characters the key has; `dir/` markers are collections).

use kubedav_testkit::{S3_ACCESS_KEY, S3_SECRET_KEY, S3Server};
use rusty_s3::S3Action;
use rusty_s3::actions::{GetObject, ListObjectsV2, PutObject};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

#[test]
fn objects_keep_their_keys_and_markers_make_collections() {
    let server = S3Server::start("plain");
    let bucket = server.signing_bucket();
    let credentials = rusty_s3::Credentials::new(S3_ACCESS_KEY, S3_SECRET_KEY);
    let key = "dir/a b#%[x]?.txt";

    let put = PutObject::new(&bucket, Some(&credentials), key).sign(MINUTE);
    let (status, body) = server.send("PUT", &put, &[], b"hello");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let marker = PutObject::new(&bucket, Some(&credentials), "empty/").sign(MINUTE);
    assert_eq!(server.send("PUT", &marker, &[], b"").0, 200);

    let get = GetObject::new(&bucket, Some(&credentials), key).sign(MINUTE);
    assert_eq!(server.send("GET", &get, &[], b""), (200, b"hello".to_vec()));
    assert_eq!(
        std::fs::read(server.bucket_dir().join(key)).unwrap(),
        b"hello",
        "the object is stored under its key as it is"
    );

    let mut list = ListObjectsV2::new(&bucket, Some(&credentials));
    list.with_delimiter("/");
    let (status, xml) = server.send("GET", &list.sign(MINUTE), &[], b"");
    let xml = String::from_utf8_lossy(&xml);
    assert_eq!(status, 200, "{xml}");
    assert!(
        xml.contains("<Prefix>dir/</Prefix>") && xml.contains("<Prefix>empty/</Prefix>"),
        "{xml}"
    );

    let unsigned = GetObject::new(&bucket, None, key).sign(MINUTE);
    assert_eq!(
        server.send("GET", &unsigned, &[], b"").0,
        403,
        "requests must be signed"
    );
    let forged = rusty_s3::Credentials::new(S3_ACCESS_KEY, "not-the-secret");
    let forged = GetObject::new(&bucket, Some(&forged), key).sign(MINUTE);
    assert_eq!(
        server.send("GET", &forged, &[], b"").0,
        403,
        "signatures are checked"
    );
}
