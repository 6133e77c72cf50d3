//! What sync clients rely on beyond RFC 4918, spoken as they speak it, in both run modes
//! and on both backends: `X-OC-Mtime` keeps a file's time, `OC-Checksum` and
//! `Content-Digest` are checked against the body (a damaged upload is refused and the old
//! content kept), the checksums come back as `oc:checksums` and `Repr-Digest` for that
//! content only, PROPPATCH of the modification time properties sets the time, and a
//! collection's etag follows its members.

#[macro_use]
mod common;

use common::{BACKEND, Backend, Mode, Server, backend, client};
use reqwest::{Method, StatusCode};

const HELLO: &[u8] = b"hello world";
const HELLO_SHA1: &str = "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed";
const HELLO_MD5: &str = "5eb63bbbe01eeed093cb22bb8f5acdc3";
const HELLO_ADLER32: &str = "1a0b045d";
const HELLO_SHA256_B64: &str = "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=";

const OC_PROPS: &str = r#"<?xml version="1.0"?>
<d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">
 <d:prop><d:getlastmodified/><d:getcontentlength/><d:getetag/><oc:checksums/><oc:permissions/></d:prop>
</d:propfind>"#;

fn verb(name: &str) -> Method {
    Method::from_bytes(name.as_bytes()).unwrap()
}

async fn propfind(server: &Server, path: &str, depth: &str) -> String {
    let response = client()
        .request(verb("PROPFIND"), server.url(path))
        .header("depth", depth)
        .body(OC_PROPS)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::MULTI_STATUS);
    response.text().await.unwrap()
}

async fn get(server: &Server, path: &str) -> (StatusCode, Vec<u8>) {
    let response = client().get(server.url(path)).send().await.unwrap();
    (response.status(), response.bytes().await.unwrap().to_vec())
}

/// `X-OC-Mtime` sets the time a PROPFIND (at Depth 0 and in the parent's listing) and a
/// GET report, and is answered `accepted`; a malformed one is refused.
async fn oc_mtime_keeps_the_clients_time(mode: Mode) {
    let server = Server::start(mode).await;
    let put = client()
        .put(server.url("/old.txt"))
        .header("x-oc-mtime", "1500000000")
        .body(HELLO)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let accepted = put
        .headers()
        .get("x-oc-mtime")
        .map(|v| v.to_str().unwrap().to_owned());
    let get = client().get(server.url("/old.txt")).send().await.unwrap();
    let last_modified = get.headers()["last-modified"].to_str().unwrap().to_owned();
    assert_eq!(accepted.as_deref(), Some("accepted"));
    assert_eq!(last_modified, "Fri, 14 Jul 2017 02:40:00 GMT");
    for (path, depth) in [("/old.txt", "0"), ("/", "1")] {
        let listing = propfind(&server, path, depth).await;
        assert!(
            listing.contains("<D:getlastmodified>Fri, 14 Jul 2017 02:40:00 GMT</D:getlastmodified>"),
            "Depth {depth}: {listing}"
        );
    }
    let bad = client()
        .put(server.url("/bad.txt"))
        .header("x-oc-mtime", "yesterday")
        .body(HELLO)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(bad.text().await.unwrap().contains("X-OC-Mtime"));
    assert_eq!(get_status(&server, "/bad.txt").await, StatusCode::NOT_FOUND);
}

async fn get_status(server: &Server, path: &str) -> StatusCode {
    get(server, path).await.0
}

/// An `OC-Checksum` that does not match the body is refused with 400 and the old content
/// stays; one that matches is kept, and `oc:checksums` shows SHA1, MD5 and ADLER32 of
/// that content, in a Depth 0 and a Depth 1 listing, until the file is replaced.
async fn oc_checksum_is_checked_and_kept(mode: Mode) {
    let server = Server::start(mode).await;
    let first = client()
        .put(server.url("/f.txt"))
        .body("old content")
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    let damaged = client()
        .put(server.url("/f.txt"))
        .header("oc-checksum", "SHA1:0000000000000000000000000000000000000000")
        .body(HELLO)
        .send()
        .await
        .unwrap();
    assert_eq!(damaged.status(), StatusCode::BAD_REQUEST);
    let message = damaged.text().await.unwrap();
    assert!(
        message.contains("SHA1") && message.contains("nothing was written"),
        "{message}"
    );
    assert_eq!(get(&server, "/f.txt").await.1, b"old content");

    let good = client()
        .put(server.url("/f.txt"))
        .header("oc-checksum", format!("SHA1:{HELLO_SHA1}"))
        .body(HELLO)
        .send()
        .await
        .unwrap();
    assert_eq!(good.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        good.headers()["oc-checksum"],
        format!("SHA1:{HELLO_SHA1}").as_str()
    );
    let expected = format!("SHA1:{HELLO_SHA1} MD5:{HELLO_MD5} ADLER32:{HELLO_ADLER32}");
    for depth in ["0", "1"] {
        let path = if depth == "0" { "/f.txt" } else { "/" };
        let listing = propfind(&server, path, depth).await;
        assert!(listing.contains(&expected), "Depth {depth}: {listing}");
    }
    // Replaced without a checksum: the old checksums are not shown for the new content.
    let plain = client()
        .put(server.url("/f.txt"))
        .body("new")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), StatusCode::NO_CONTENT);
    let listing = propfind(&server, "/f.txt", "0").await;
    assert!(!listing.contains("SHA1:"), "{listing}");
    // A client cannot write kubedav's own checksum record.
    let forged = client()
        .request(verb("PROPPATCH"), server.url("/f.txt"))
        .body(
            r#"<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><k:checksums xmlns:k="urn:x-kubedav:content">x</k:checksums></D:prop></D:set></D:propertyupdate>"#,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::MULTI_STATUS);
    assert!(forged.text().await.unwrap().contains("403"));
}

/// RFC 9530: a `Content-Digest` that does not match is refused (400) and nothing is
/// written; one that matches is kept, and a GET or HEAD with `Want-Repr-Digest` gets the
/// `Repr-Digest` of the content.
async fn digests_are_checked_and_served(mode: Mode) {
    let server = Server::start(mode).await;
    let wrong = client()
        .put(server.url("/d.txt"))
        .header(
            "content-digest",
            "sha-256=:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=:",
        )
        .body(HELLO)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::BAD_REQUEST);
    assert_eq!(get_status(&server, "/d.txt").await, StatusCode::NOT_FOUND);
    let right = client()
        .put(server.url("/d.txt"))
        .header("content-digest", format!("sha-256=:{HELLO_SHA256_B64}:"))
        .body(HELLO)
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), StatusCode::CREATED);
    let digest = format!("sha-256=:{HELLO_SHA256_B64}:");
    assert_eq!(right.headers()["repr-digest"], digest.as_str());
    for method in [Method::GET, Method::HEAD] {
        let response = client()
            .request(method.clone(), server.url("/d.txt"))
            .header("want-repr-digest", "sha-256=5")
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["repr-digest"], digest.as_str(), "{method}");
    }
    let unasked = client().get(server.url("/d.txt")).send().await.unwrap();
    assert!(unasked.headers().get("repr-digest").is_none());
    // Want-Repr-Digest on the PUT keeps a digest the client did not send.
    let wanting = client()
        .put(server.url("/w.txt"))
        .header("want-repr-digest", "sha-256=1")
        .body(HELLO)
        .send()
        .await
        .unwrap();
    assert_eq!(wanting.headers()["repr-digest"], digest.as_str());
    let malformed = client()
        .put(server.url("/m.txt"))
        .header("content-digest", "sha-256=not-a-byte-sequence")
        .body(HELLO)
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);
    assert!(malformed.text().await.unwrap().contains("RFC 9530"));
}

/// `--upload-digests sha-256`: a plain PUT (no digest asked) keeps one, so a later GET
/// with `Want-Repr-Digest` gets `Repr-Digest`; without the setting it gets none.
async fn upload_digests_answer_for_any_upload(mode: Mode) {
    let server = Server::start_full(mode, &[], &[("KUBEDAV_UPLOAD_DIGESTS", "sha-256")]).await;
    let put = client()
        .put(server.url("/p.txt"))
        .body(HELLO)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let response = client()
        .get(server.url("/p.txt"))
        .header("want-repr-digest", "sha-256=1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["repr-digest"],
        format!("sha-256=:{HELLO_SHA256_B64}:").as_str()
    );
    let plain = Server::start(mode).await;
    client()
        .put(plain.url("/p.txt"))
        .body(HELLO)
        .send()
        .await
        .unwrap();
    let response = client()
        .get(plain.url("/p.txt"))
        .header("want-repr-digest", "sha-256=1")
        .send()
        .await
        .unwrap();
    assert!(response.headers().get("repr-digest").is_none());
}

/// PROPPATCH of `DAV:lastmodified` (rclone, ownCloud: Unix seconds), `DAV:getlastmodified`
/// and Windows' `Win32LastModifiedTime` (HTTP dates) sets the modification time (on a
/// bucket by copying the object onto itself with new metadata), and the checksums kept
/// stay those of the (unchanged) content.
async fn proppatch_sets_the_modification_time(mode: Mode) {
    let server = Server::start(mode).await;
    let put = client()
        .put(server.url("/t.txt"))
        .header("oc-checksum", format!("MD5:{HELLO_MD5}"))
        .body(HELLO)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let cases = [
        (
            r#"<lastmodified xmlns="DAV:">1500000000</lastmodified>"#,
            "Fri, 14 Jul 2017 02:40:00 GMT",
        ),
        (
            r#"<D:getlastmodified>Sat, 01 Jan 2000 00:00:00 GMT</D:getlastmodified>"#,
            "Sat, 01 Jan 2000 00:00:00 GMT",
        ),
        (
            r#"<Z:Win32LastModifiedTime xmlns:Z="urn:schemas-microsoft-com:">Wed, 02 Feb 2022 10:20:30 GMT</Z:Win32LastModifiedTime>"#,
            "Wed, 02 Feb 2022 10:20:30 GMT",
        ),
    ];
    for (property, shown) in cases {
        let body = format!(
            r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop>{property}<oc:checksums xmlns:oc="http://owncloud.org/ns"><oc:checksum>MD5:{HELLO_MD5}</oc:checksum></oc:checksums></D:prop></D:set></D:propertyupdate>"#
        );
        let response = client()
            .request(verb("PROPPATCH"), server.url("/t.txt"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::MULTI_STATUS);
        let text = response.text().await.unwrap();
        assert!(text.contains("200 OK") && !text.contains("403"), "{text}");
        let listing = propfind(&server, "/t.txt", "0").await;
        assert!(listing.contains(shown), "{property}: {listing}");
        assert!(listing.contains(&format!("MD5:{HELLO_MD5}")), "{listing}");
    }
    let bad = client()
        .request(verb("PROPPATCH"), server.url("/t.txt"))
        .body(r#"<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><D:lastmodified>noon</D:lastmodified></D:prop></D:set></D:propertyupdate>"#)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}

/// The etag of `path` in a Depth 0 PROPFIND, the same in its own Depth 1 listing and (on
/// a volume) in its parent's.
async fn collection_etag(server: &Server, path: &str) -> String {
    let etag_of = |listing: &str, href: &str| {
        let at = listing
            .find(&format!("<D:href>{href}</D:href>"))
            .unwrap_or_else(|| panic!("{href} missing: {listing}"));
        let rest = &listing[at..];
        let start = rest.find("<D:getetag>").unwrap() + "<D:getetag>".len();
        rest[start..start + rest[start..].find('<').unwrap()].to_owned()
    };
    let own = etag_of(&propfind(server, path, "0").await, path);
    let in_own_listing = etag_of(&propfind(server, path, "1").await, path);
    assert_eq!(own, in_own_listing, "{path}: Depth 0 and Depth 1 disagree");
    // A bucket would need a listing per subcollection to say it in the parent's listing
    // (docs/clients.md).
    if backend() == Backend::Volume {
        let from_parent = etag_of(&propfind(server, "/", "1").await, path);
        assert_eq!(
            own, from_parent,
            "{path}: Depth 0 and the parent's listing disagree"
        );
    }
    own
}

/// A collection's etag changes whenever a member is added, replaced, changed in place
/// (its properties or its time; on a volume) or removed, at Depth 0 and in its parent's
/// listing alike: a sync client polling it sees the change there.
async fn collection_etags_follow_their_members(mode: Mode) {
    let server = Server::start(mode).await;
    let mkcol = client()
        .request(verb("MKCOL"), server.url("/dir/"))
        .send()
        .await
        .unwrap();
    assert_eq!(mkcol.status(), StatusCode::CREATED);
    let mut seen = vec![collection_etag(&server, "/dir/").await];
    let mut changed = |etag: String, step: &str| {
        assert_ne!(
            seen.last(),
            Some(&etag),
            "{step} left the collection's etag as it was"
        );
        seen.push(etag);
    };
    let put = client()
        .put(server.url("/dir/a.txt"))
        .body("one")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    changed(collection_etag(&server, "/dir/").await, "adding a member");
    client()
        .put(server.url("/dir/a.txt"))
        .body("two")
        .send()
        .await
        .unwrap();
    changed(collection_etag(&server, "/dir/").await, "replacing a member");
    if backend() == Backend::Volume {
        let patch = client()
            .request(verb("PROPPATCH"), server.url("/dir/a.txt"))
            .body(r#"<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><D:lastmodified>1500000000</D:lastmodified></D:prop></D:set></D:propertyupdate>"#)
            .send()
            .await
            .unwrap();
        assert_eq!(patch.status(), StatusCode::MULTI_STATUS);
        changed(collection_etag(&server, "/dir/").await, "setting a member's time");
    }
    let delete = client().delete(server.url("/dir/a.txt")).send().await.unwrap();
    assert_eq!(delete.status(), StatusCode::NO_CONTENT);
    changed(collection_etag(&server, "/dir/").await, "removing a member");
}

/// The usage is counted again from a listing every `--quota-rescan-seconds`: a file
/// written behind kubedav's back is counted within a period or two.
async fn quota_counts_again_on_its_period(mode: Mode) {
    let envs = [
        ("KUBEDAV_QUOTA_BYTES", "1000"),
        ("KUBEDAV_QUOTA_RESCAN_SECONDS", "1"),
    ];
    let server = Server::start_full(mode, &[], &envs).await;
    std::fs::write(server.disk("outside.bin"), vec![1u8; 250]).unwrap();
    assert!(
        common::eventually_async(std::time::Duration::from_secs(10), || async {
            quota(&server).await == (250, 750)
        })
        .await,
        "the file written outside was not counted: {:?}",
        quota(&server).await
    );
}

in_both_modes!(
    upload_digests_answer_for_any_upload,
    quota_refuses_what_does_not_fit,
    quota_counts_again_on_its_period,
    collection_etags_follow_their_members,
    oc_mtime_keeps_the_clients_time,
    oc_checksum_is_checked_and_kept,
    digests_are_checked_and_served,
    proppatch_sets_the_modification_time
);
on_s3!(
    upload_digests_answer_for_any_upload,
    quota_refuses_what_does_not_fit,
    quota_counts_again_on_its_period,
    collection_etags_follow_their_members,
    oc_mtime_keeps_the_clients_time,
    oc_checksum_is_checked_and_kept,
    digests_are_checked_and_served,
    proppatch_sets_the_modification_time
);

/// The RFC 4331 figures of a collection: (quota-used-bytes, quota-available-bytes).
async fn quota(server: &Server) -> (u64, u64) {
    let response = client()
        .request(verb("PROPFIND"), server.url("/"))
        .header("depth", "0")
        .body(r#"<D:propfind xmlns:D="DAV:"><D:prop><D:quota-used-bytes/><D:quota-available-bytes/></D:prop></D:propfind>"#)
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    let number = |tag: &str| {
        let open = format!("<D:{tag}>");
        let at = text
            .find(&open)
            .unwrap_or_else(|| panic!("{tag} missing: {text}"))
            + open.len();
        text[at..at + text[at..].find('<').unwrap()]
            .parse::<u64>()
            .unwrap()
    };
    (number("quota-used-bytes"), number("quota-available-bytes"))
}

/// `--quota-bytes`: the usage is counted at start (a file already there) and as writes
/// go; a PUT that would pass the quota is refused with 507 before anything is stored,
/// with a Content-Length and chunked alike; replacing a file counts the difference (the
/// replaced content, which has no room to be kept as a version, goes); a DELETE keeps the
/// file in the trash, still counted, until a write needs its room. No count from a
/// listing runs meanwhile (the period is an hour), so every figure is exact.
async fn quota_refuses_what_does_not_fit(mode: Mode) {
    let envs = [
        ("KUBEDAV_QUOTA_BYTES", "1000"),
        ("KUBEDAV_QUOTA_RESCAN_SECONDS", "3600"),
    ];
    let server = Server::start_prepared_with(mode, &envs, &|root| {
        std::fs::write(root.join("outside.bin"), vec![1u8; 300]).unwrap();
    })
    .await;
    assert!(
        common::eventually_async(std::time::Duration::from_secs(10), || async {
            quota(&server).await == (300, 700)
        })
        .await,
        "the file there at start was not counted: {:?}",
        quota(&server).await
    );
    let put = |path: &'static str, body: reqwest::Body| {
        let server = &server;
        async move { client().put(server.url(path)).body(body).send().await.unwrap() }
    };
    assert_eq!(
        put("/a.bin", vec![2u8; 600].into()).await.status(),
        StatusCode::CREATED
    );
    assert_eq!(quota(&server).await, (900, 100));
    let refused = put("/b.bin", vec![3u8; 200].into()).await;
    assert_eq!(refused.status(), StatusCode::INSUFFICIENT_STORAGE);
    assert!(refused.text().await.unwrap().contains("quota"));
    let chunks = futures_util::stream::iter(
        (0..4).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![4u8; 50]))),
    );
    let chunked = put("/c.bin", reqwest::Body::wrap_stream(chunks)).await;
    assert_eq!(chunked.status(), StatusCode::INSUFFICIENT_STORAGE);
    for path in ["/b.bin", "/c.bin"] {
        assert_eq!(get_status(&server, path).await, StatusCode::NOT_FOUND, "{path}");
    }
    // Replacing a.bin (600) with 650 bytes needs 50 more: it fits, and the 600 it
    // replaced, which would need 600 more to be kept as a version, go.
    assert_eq!(
        put("/a.bin", vec![5u8; 650].into()).await.status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(quota(&server).await, (950, 50));
    let delete = client().delete(server.url("/a.bin")).send().await.unwrap();
    assert_eq!(delete.status(), StatusCode::NO_CONTENT);
    assert_eq!(quota(&server).await, (950, 50), "the trash counts");
    // A write that needs the room takes it from the trash.
    assert_eq!(
        put("/d.bin", vec![6u8; 600].into()).await.status(),
        StatusCode::CREATED
    );
    assert_eq!(quota(&server).await, (900, 100));
    assert_eq!(get_status(&server, "/a.bin").await, StatusCode::NOT_FOUND);
}
