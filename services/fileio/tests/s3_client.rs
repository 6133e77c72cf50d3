//! The S3 client of fileio's object-storage backend against a real S3 server
//! (versitygw, `kubedav_testkit::S3Server`): keys kept as they are, listings by
//! delimiter, multipart uploads that appear only when complete, and failures mapped to
//! the statuses the gateway turns into 503 or a logged 500, never a 404.

use bytes::Bytes;
use kubedav_fileio::s3::{S3Client, S3Config};
use kubedav_testkit::{S3_ACCESS_KEY, S3_REGION, S3_SECRET_KEY, S3Server};
use tonic::Code;

fn client(server: &S3Server, secret: &str) -> S3Client {
    S3Client::new(&config(server, secret)).unwrap()
}

fn config(server: &S3Server, secret: &str) -> S3Config {
    S3Config {
        endpoint: server.endpoint().parse().unwrap(),
        bucket: server.bucket().to_owned(),
        region: S3_REGION.to_owned(),
        access_key: S3_ACCESS_KEY.to_owned(),
        secret_key: secret.to_owned(),
        path_style: true,
        session_token: None,
        ca_bundle: server.ca_bundle(),
    }
}

#[tokio::test]
async fn objects_round_trip_under_their_own_keys() {
    let server = S3Server::start("files");
    let s3 = client(&server, S3_SECRET_KEY);
    let key = "docs/100% #1?[a].txt";
    assert_eq!(s3.head(key).await.unwrap(), None);
    let etag = s3.put(key, Bytes::from_static(b"hello")).await.unwrap();
    assert!(!etag.is_empty());
    let info = s3.head(key).await.unwrap().unwrap();
    assert_eq!((info.size, info.etag.as_str()), (5, etag.as_str()));
    assert_eq!(s3.get(key).await.unwrap(), Bytes::from_static(b"hello"));
    assert_eq!(
        std::fs::read(server.bucket_dir().join(key)).unwrap(),
        b"hello",
        "any other tool finds it under the same key"
    );
    s3.put("docs/sub/", Bytes::new()).await.unwrap();
    s3.put("docs/sub/deep.txt", Bytes::from_static(b"d"))
        .await
        .unwrap();
    let page = s3.list("docs/", None).await.unwrap();
    let keys: Vec<&str> = page.objects.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys, vec![key]);
    assert_eq!(page.prefixes, vec!["docs/sub/".to_owned()]);
    s3.delete(key).await.unwrap();
    assert_eq!(s3.head(key).await.unwrap(), None);
    assert_eq!(s3.get(key).await.unwrap_err().code(), Code::NotFound);
}

/// What the property index of a collection will rely on: a write conditional on the
/// version it read, so two writers never lose each other's change.
#[tokio::test]
async fn conditional_writes_refuse_a_changed_object() {
    let server = S3Server::start("conditions");
    let s3 = client(&server, S3_SECRET_KEY);
    let first = s3
        .put_if("index", Bytes::from_static(b"v1"), Some(""))
        .await
        .unwrap();
    let again = s3.put_if("index", Bytes::from_static(b"v1'"), Some("")).await;
    assert_eq!(again.unwrap_err().code(), Code::Aborted, "it exists already");
    let second = s3
        .put_if("index", Bytes::from_static(b"v2"), Some(&first))
        .await
        .unwrap();
    let stale = s3
        .put_if("index", Bytes::from_static(b"lost"), Some(&first))
        .await;
    assert_eq!(
        stale.unwrap_err().code(),
        Code::Aborted,
        "a write based on v1 is refused"
    );
    assert_eq!(s3.get("index").await.unwrap(), Bytes::from_static(b"v2"));
    assert_ne!(first, second);
}

#[tokio::test]
async fn a_multipart_upload_appears_only_when_complete() {
    let server = S3Server::start("uploads");
    let s3 = client(&server, S3_SECRET_KEY);
    let first = Bytes::from(vec![b'a'; 5 << 20]);
    let last = Bytes::from_static(b"tail");
    let upload = s3.start_upload("big.bin").await.unwrap();
    let etags = vec![
        s3.upload_part("big.bin", &upload, 1, first.clone())
            .await
            .unwrap(),
        s3.upload_part("big.bin", &upload, 2, last.clone()).await.unwrap(),
    ];
    assert_eq!(
        s3.head("big.bin").await.unwrap(),
        None,
        "nothing before it completes"
    );
    s3.complete_upload("big.bin", &upload, &etags, None)
        .await
        .unwrap();
    let whole = s3.get("big.bin").await.unwrap();
    assert_eq!(whole.len(), first.len() + last.len());
    assert!(whole.ends_with(b"tail"));

    let abandoned = s3.start_upload("never.bin").await.unwrap();
    s3.upload_part("never.bin", &abandoned, 1, last).await.unwrap();
    s3.abort_upload("never.bin", &abandoned).await.unwrap();
    assert_eq!(
        s3.head("never.bin").await.unwrap(),
        None,
        "an aborted upload leaves nothing"
    );
}

/// A completion conditional on the object's ETag (or on there being none) is refused
/// when the condition no longer holds, and nothing changes: the check is the S3
/// server's, atomic with the completion.
#[tokio::test]
async fn a_conditional_completion_is_refused_when_the_object_changed() {
    let server = S3Server::start("conditions");
    let s3 = client(&server, S3_SECRET_KEY);
    let old = s3.put("doc.bin", Bytes::from_static(b"old")).await.unwrap();
    let complete = |condition: Option<String>| {
        let s3 = s3.clone();
        async move {
            let condition = condition.as_deref();
            let upload = s3.start_upload("doc.bin").await.unwrap();
            let part = s3
                .upload_part("doc.bin", &upload, 1, Bytes::from_static(b"new"))
                .await
                .unwrap();
            let done = s3.complete_upload("doc.bin", &upload, &[part], condition).await;
            if done.is_err() {
                s3.abort_upload("doc.bin", &upload).await.unwrap();
            }
            done
        }
    };
    for condition in ["0123456789abcdef0123456789abcdef", ""] {
        let refused = complete(Some(condition.to_owned())).await.unwrap_err();
        assert_eq!(refused.code(), Code::Aborted, "{condition:?}: {refused:?}");
        assert_eq!(s3.get("doc.bin").await.unwrap(), Bytes::from_static(b"old"));
    }
    complete(Some(old)).await.unwrap();
    assert_eq!(s3.get("doc.bin").await.unwrap(), Bytes::from_static(b"new"));
}

#[tokio::test]
async fn failures_say_what_went_wrong() {
    let mut server = S3Server::start("faults");
    let forged = client(&server, "not-the-secret");
    let refused = forged.put("x.txt", Bytes::from_static(b"x")).await.unwrap_err();
    assert_eq!(
        refused.code(),
        Code::Internal,
        "a refused signature is no 404: {refused:?}"
    );
    assert!(
        refused.message().contains("SignatureDoesNotMatch"),
        "{}",
        refused.message()
    );

    let s3 = client(&server, S3_SECRET_KEY);
    s3.put("x.txt", Bytes::from_static(b"x")).await.unwrap();
    server.stop();
    let down = s3.get("x.txt").await.unwrap_err();
    assert_eq!(down.code(), Code::Unavailable, "{down:?}");
    server.restart();
    assert_eq!(
        s3.get("x.txt").await.unwrap(),
        Bytes::from_static(b"x"),
        "back without a new client"
    );
}

/// CopyObject and ranged, conditional reads, with names S3 tools get wrong most often
/// (spaces, `%`, `#`, `+`, non-ASCII): a copy lands under exactly the key asked for, and
/// a read of a version that has changed is refused rather than mixed.
#[tokio::test]
async fn copies_and_ranged_reads_keep_keys_and_versions() {
    use http_body_util::BodyExt;
    let server = S3Server::start("copies");
    let s3 = client(&server, S3_SECRET_KEY);
    let source = "dir/a b%20+#\u{fc}.txt";
    let etag = s3.put(source, Bytes::from_static(b"0123456789")).await.unwrap();
    let copied = s3.copy(source, "other/c d+%.txt").await.unwrap();
    assert_eq!(copied, etag, "the same bytes, the same ETag");
    assert_eq!(
        s3.get("other/c d+%.txt").await.unwrap(),
        Bytes::from_static(b"0123456789")
    );
    assert_eq!(s3.get(source).await.unwrap(), Bytes::from_static(b"0123456789"));

    let opened = s3.open(source, Some((2, 5)), Some(&etag)).await.unwrap().unwrap();
    assert_eq!(opened.info.size, 10, "the whole size, not the range's");
    let data = opened.body.collect().await.unwrap().to_bytes();
    assert_eq!(data, Bytes::from_static(b"2345"));
    s3.put(source, Bytes::from_static(b"changed")).await.unwrap();
    let stale = s3.open(source, Some((0, 1)), Some(&etag)).await;
    assert_eq!(stale.err().map(|s| s.code()), Some(Code::Aborted));
    let past = s3.open(source, Some((100, 200)), None).await;
    assert_eq!(past.err().map(|s| s.code()), Some(Code::OutOfRange));
    assert!(s3.open("no/such", None, None).await.unwrap().is_none());
}

/// An `https://` endpoint whose certificate a private CA issued: trusted once the CA is
/// in `AWS_CA_BUNDLE`; without it every request is refused as UNAVAILABLE with a
/// message that says to set it.
#[tokio::test]
async fn tls_to_a_server_of_a_private_ca() {
    let server = S3Server::start_tls("files");
    assert!(server.endpoint().starts_with("https://"));
    let s3 = client(&server, S3_SECRET_KEY);
    s3.put("secret.txt", Bytes::from_static(b"over TLS"))
        .await
        .unwrap();
    assert_eq!(
        s3.get("secret.txt").await.unwrap(),
        Bytes::from_static(b"over TLS")
    );

    let untrusting = S3Client::new(&S3Config {
        ca_bundle: None,
        ..config(&server, S3_SECRET_KEY)
    })
    .unwrap();
    let refused = untrusting.head("secret.txt").await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("AWS_CA_BUNDLE"),
        "says what to do: {}",
        refused.message()
    );

    let missing = S3Client::new(&S3Config {
        ca_bundle: Some("/nonexistent/ca.pem".into()),
        ..config(&server, S3_SECRET_KEY)
    });
    assert!(
        missing.is_err_and(|e| e.contains("AWS_CA_BUNDLE /nonexistent/ca.pem")),
        "an unreadable bundle is named at start"
    );
}

/// Keys S3 servers escape in their XML answers (`&`, `<`, `>`, `"`, `'`), that mean
/// something in a URL or a form (`%`, `+`, a space), or that are not ASCII, come back
/// exactly from every answer that names them: listings with and without a delimiter,
/// the uploads under way, copies and refusals.
#[tokio::test]
async fn keys_escaped_in_xml_come_back_exactly() {
    let server = S3Server::start("escaped");
    let s3 = client(&server, S3_SECRET_KEY);
    let dir = "odd &<>\"'%+ \u{e9}/";
    let names = [
        "a&b.txt",
        "<tag>.txt",
        "say \"hi\".txt",
        "it's.txt",
        "100%.txt",
        "50%25 off.txt",
        "a+b c.txt",
        "&amp;&#39;.txt",
        "gr\u{fc}\u{df}e \u{65e5}\u{672c} \u{2713}.txt",
    ];
    let mut keys: Vec<String> = names.iter().map(|name| format!("{dir}{name}")).collect();
    keys.sort();
    for key in &keys {
        s3.put(key, Bytes::from(key.clone())).await.unwrap();
    }
    s3.put(&format!("{dir}sub &'\"/deep.txt"), Bytes::from_static(b"d"))
        .await
        .unwrap();

    let page = s3.list(dir, None).await.unwrap();
    let listed: Vec<&str> = page.objects.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(listed, keys, "a listing by delimiter names every key as it is");
    assert_eq!(page.prefixes, vec![format!("{dir}sub &'\"/")]);
    let all = s3.list_all(dir, None).await.unwrap();
    assert_eq!(all.objects.len(), keys.len() + 1);
    for key in &keys {
        assert_eq!(s3.get(key).await.unwrap(), Bytes::from(key.clone()), "{key}");
    }

    let mut started = Vec::new();
    for key in &keys {
        started.push((key.clone(), s3.start_upload(key).await.unwrap()));
    }
    let mut uploads: Vec<(String, String)> = s3
        .uploads(dir)
        .await
        .unwrap()
        .into_iter()
        .map(|(key, id, _)| (key, id))
        .collect();
    uploads.sort();
    started.sort();
    assert_eq!(uploads, started, "the uploads under way name their keys exactly");
    for (key, id) in &started {
        s3.abort_upload(key, id).await.unwrap();
    }
    assert_eq!(
        s3.uploads(dir).await.unwrap(),
        vec![],
        "each one aborted by its key"
    );

    for key in &keys {
        let copy = format!("{key}.copy");
        let etag = s3.copy(key, &copy).await.unwrap();
        assert_eq!(s3.head(&copy).await.unwrap().unwrap().etag, etag, "{copy}");
    }
    let missing = s3.copy("no such &<'\".txt", "x").await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
}

/// A copy larger than one CopyObject may copy goes as ranges of a multipart upload
/// (UploadPartCopy; here 5 MiB ranges of an 11 MiB object, the last one short): the
/// copy is the same bytes, with the modification time asked for, and no upload is left.
#[tokio::test]
async fn a_copy_in_parts_is_the_same_object() {
    let server = S3Server::start("files");
    let s3 = client(&server, S3_SECRET_KEY);
    let data: Vec<u8> = (0..(11u32 << 20)).map(|i| (i % 251) as u8).collect();
    s3.put("a/big.bin", Bytes::from(data.clone())).await.unwrap();
    let modified = 1_700_000_000_123_456_789;
    s3.copy_in_parts(
        "a/big.bin",
        "b/big copy.bin",
        data.len() as u64,
        Some(modified),
        5 << 20,
    )
    .await
    .unwrap();
    assert!(s3.get("b/big copy.bin").await.unwrap() == data);
    let info = s3.head("b/big copy.bin").await.unwrap().unwrap();
    assert_eq!(info.size, data.len() as u64);
    assert_eq!(info.modified_unix_ns / 1000, modified / 1000);
    assert!(s3.uploads("").await.unwrap().is_empty());
    // The same by one CopyObject, the time replaced.
    s3.copy_whole("a/big.bin", "c.bin", data.len() as u64, Some(modified))
        .await
        .unwrap();
    assert!(s3.get("c.bin").await.unwrap() == data);
    let info = s3.head("c.bin").await.unwrap().unwrap();
    assert_eq!(info.modified_unix_ns / 1000, modified / 1000);
}
