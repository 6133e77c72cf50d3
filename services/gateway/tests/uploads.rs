//! TUS uploads, in process (docs/uploads.md): an upload in many PATCHes lands whole and
//! at once; what a client gets wrong is refused with TUS's answers and moves nothing; an
//! upload is its owner's alone; its target follows the policy when it is created and
//! again when it lands, so a share revoked meanwhile stops it.

mod common;

use base64::Engine;
use common::{App, Response};
use http::{Method, StatusCode};
use sha2::Digest;

fn app() -> App {
    common::uploads_app()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A TUS request by `user` (a browser's cookie would need X-Kubedav-Request too; Basic
/// credentials do not).
async fn tus(
    app: &App,
    user: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Response {
    let mut all = vec![("tus-resumable", "1.0.0".to_owned())];
    all.extend(headers.iter().cloned());
    common::send_as(app, user, method, path, &all, body).await
}

/// Creates an upload of `length` bytes to `path` as `user`: its URL path, or the refusal.
async fn create(app: &App, user: &str, path: &str, length: usize) -> Result<String, Response> {
    let metadata = format!("path {},filename {}", b64(path.as_bytes()), b64(b"f"));
    let response = tus(
        app,
        user,
        "POST",
        "/.kubedav/uploads/",
        &[
            ("upload-length", length.to_string()),
            ("upload-metadata", metadata),
        ],
        b"",
    )
    .await;
    if response.status() != StatusCode::CREATED {
        return Err(response);
    }
    assert_eq!(response.headers()["tus-resumable"], "1.0.0");
    // An empty file landed at once: it has no expiry.
    assert_eq!(response.headers().contains_key("upload-expires"), length > 0);
    Ok(response.headers()["location"].to_str().unwrap().to_owned())
}

async fn patch(app: &App, user: &str, upload: &str, offset: usize, data: &[u8]) -> Response {
    let sum = b64(&sha2::Sha256::digest(data));
    tus(
        app,
        user,
        "PATCH",
        upload,
        &[
            ("upload-offset", offset.to_string()),
            ("content-type", "application/offset+octet-stream".to_owned()),
            ("upload-checksum", format!("sha256 {sum}")),
        ],
        data,
    )
    .await
}

async fn offset_of(app: &App, user: &str, upload: &str) -> Option<u64> {
    let head = tus(app, user, "HEAD", upload, &[], b"").await;
    if head.status() == StatusCode::NOT_FOUND {
        return None;
    }
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(head.headers()["cache-control"], "no-store");
    Some(head.headers()["upload-offset"].to_str().unwrap().parse().unwrap())
}

fn content(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// OPTIONS says what is spoken; three PATCHes with checksums land the file whole, and
/// only with the last: until then the target does not exist; afterwards the upload is
/// gone.
#[tokio::test]
async fn an_upload_in_three_patches_lands_whole_and_only_at_its_last_byte() {
    let app = app();
    let options = tus(&app, "alice", "OPTIONS", "/.kubedav/uploads/", &[], b"").await;
    assert_eq!(options.status(), StatusCode::NO_CONTENT);
    assert!(
        options.headers()["tus-extension"]
            .to_str()
            .unwrap()
            .contains("checksum")
    );
    assert!(
        options.headers()["tus-checksum-algorithm"]
            .to_str()
            .unwrap()
            .contains("sha256")
    );
    assert!(options.headers().contains_key("tus-max-size"));

    let data = content(300_000);
    let upload = create(&app, "alice", "/home/alice/in/big.bin", data.len())
        .await
        .unwrap();
    assert_eq!(offset_of(&app, "alice", &upload).await, Some(0));
    for (from, to) in [(0, 100_000), (100_000, 200_000)] {
        let answer = patch(&app, "alice", &upload, from, &data[from..to]).await;
        assert_eq!(answer.status(), StatusCode::NO_CONTENT);
        assert_eq!(answer.headers()["upload-offset"], to.to_string().as_str());
        assert!(!app.disk("home/alice/in/big.bin").exists());
    }
    assert_eq!(offset_of(&app, "alice", &upload).await, Some(200_000));
    let last = patch(&app, "alice", &upload, 200_000, &data[200_000..]).await;
    assert_eq!(last.status(), StatusCode::NO_CONTENT);
    assert_eq!(last.headers()["upload-offset"], "300000");
    assert_eq!(std::fs::read(app.disk("home/alice/in/big.bin")).unwrap(), data);
    assert_eq!(offset_of(&app, "alice", &upload).await, None);
}

/// A PATCH at the wrong offset (409, with the right one), past the length (413), with a
/// wrong checksum (460), of the wrong type (415), or without Tus-Resumable (412) keeps
/// nothing of its bytes; the upload goes on from where it was.
#[tokio::test]
async fn what_a_client_gets_wrong_is_refused_and_moves_nothing() {
    let app = app();
    let data = content(1000);
    let upload = create(&app, "alice", "/home/alice/in/f.bin", data.len())
        .await
        .unwrap();
    assert_eq!(
        patch(&app, "alice", &upload, 0, &data[..400]).await.status(),
        StatusCode::NO_CONTENT
    );

    let wrong_offset = patch(&app, "alice", &upload, 100, &data[100..500]).await;
    assert_eq!(wrong_offset.status(), StatusCode::CONFLICT);
    assert_eq!(wrong_offset.headers()["upload-offset"], "400");

    let mut longer = data[400..].to_vec();
    longer.extend_from_slice(b"past the end");
    assert_eq!(
        patch(&app, "alice", &upload, 400, &longer).await.status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );

    // The checksums Upload-Checksum may carry, and the content type, each wrong once.
    let octets = "application/offset+octet-stream";
    let other_sum = format!("sha256 {}", b64(&sha2::Sha256::digest(b"other bytes")));
    for (content_type, checksum, refused) in [
        (octets, other_sum.as_str(), StatusCode::from_u16(460).unwrap()),
        (octets, "crc32 AAAAAA==", StatusCode::BAD_REQUEST),
        (octets, "sha1 AAAA", StatusCode::BAD_REQUEST),
        ("text/plain", "", StatusCode::UNSUPPORTED_MEDIA_TYPE),
    ] {
        let mut headers = vec![
            ("upload-offset", "400".to_owned()),
            ("content-type", content_type.to_owned()),
        ];
        if !checksum.is_empty() {
            headers.push(("upload-checksum", checksum.to_owned()));
        }
        let answer = tus(&app, "alice", "PATCH", &upload, &headers, &data[400..]).await;
        assert_eq!(answer.status(), refused, "{content_type} {checksum}");
    }

    let without_version = app
        .client()
        .request(Method::HEAD, app.url(&upload))
        .basic_auth("alice", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(without_version.status(), StatusCode::PRECONDITION_FAILED);
    assert_eq!(without_version.headers()["tus-version"], "1.0.0");

    assert_eq!(offset_of(&app, "alice", &upload).await, Some(400));
    assert!(!app.disk("home/alice/in/f.bin").exists());
    assert_eq!(
        patch(&app, "alice", &upload, 400, &data[400..]).await.status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(std::fs::read(app.disk("home/alice/in/f.bin")).unwrap(), data);
}

/// Another user's upload answers exactly as one that does not exist, to every method;
/// a target follows the policy: a folder of another's home answers as a missing folder
/// (409), a read-only area is refused (403), a missing path is a bad request.
#[tokio::test]
async fn an_upload_is_its_owners_alone_and_its_target_follows_the_policy() {
    let app = app();
    let upload = create(&app, "alice", "/home/alice/in/mine.bin", 10)
        .await
        .unwrap();
    let unknown = "/.kubedav/uploads/0123456789abcdef0123456789abcdef";
    for method in ["HEAD", "PATCH", "DELETE"] {
        let headers = [
            ("upload-offset", "0".to_owned()),
            ("content-type", "application/offset+octet-stream".to_owned()),
        ];
        let theirs = tus(&app, "bob", method, &upload, &headers, b"0123456789").await;
        let absent = tus(&app, "bob", method, unknown, &headers, b"0123456789").await;
        assert_eq!(theirs.status(), StatusCode::NOT_FOUND, "{method}");
        assert_eq!(absent.status(), StatusCode::NOT_FOUND, "{method}");
        let strip = |r: &Response| {
            let mut h = r.headers().clone();
            h.remove("x-request-id");
            h.remove("date");
            h
        };
        assert_eq!(strip(&theirs), strip(&absent), "{method}");
        assert_eq!(
            theirs.text().await.unwrap(),
            absent.text().await.unwrap(),
            "{method}"
        );
    }
    assert_eq!(offset_of(&app, "alice", &upload).await, Some(0));

    let refused = |r: Result<String, Response>| r.unwrap_err().status();
    // Into a folder bob cannot see: as into one that does not exist.
    assert_eq!(
        refused(create(&app, "bob", "/home/alice/in/x", 1).await),
        StatusCode::CONFLICT
    );
    assert_eq!(
        refused(create(&app, "bob", "/home/alice/none/x", 1).await),
        StatusCode::CONFLICT
    );
    assert_eq!(
        refused(create(&app, "bob", "/library/x", 1).await),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        refused(create(&app, "bob", "/home/bob/no/such/x", 1).await),
        StatusCode::CONFLICT
    );
    let no_path = tus(
        &app,
        "bob",
        "POST",
        "/.kubedav/uploads/",
        &[("upload-length", "1".to_owned())],
        b"",
    )
    .await;
    assert_eq!(no_path.status(), StatusCode::BAD_REQUEST);
    assert!(no_path.text().await.unwrap().contains("path"));
}

/// A creation with the first bytes (201, their offset), a termination (204, then
/// absent), an empty file (landed by its creation: the client sends nothing more), a
/// creation whose bytes are refused (nothing left behind), and kubedav's own area never
/// a WebDAV path.
#[tokio::test]
async fn creation_with_upload_and_termination() {
    let app = app();
    let empty = create(&app, "alice", "/home/alice/in/empty.txt", 0)
        .await
        .unwrap();
    assert_eq!(std::fs::read(app.disk("home/alice/in/empty.txt")).unwrap(), b"");
    assert_eq!(offset_of(&app, "alice", &empty).await, None);
    let refused = tus(
        &app,
        "alice",
        "POST",
        "/.kubedav/uploads/",
        &[
            ("upload-length", "3".to_owned()),
            (
                "upload-metadata",
                format!("path {}", b64(b"/home/alice/in/r.bin")),
            ),
            ("content-type", "application/offset+octet-stream".to_owned()),
        ],
        b"0123456789",
    )
    .await;
    assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        common::names_in(&app.disk(".kubedav/uploads"))
            .iter()
            .all(|owner| { common::names_in(&app.disk(&format!(".kubedav/uploads/{owner}"))).is_empty() })
    );
    let metadata = format!("path {}", b64(b"/home/alice/in/t.bin"));
    let created = tus(
        &app,
        "alice",
        "POST",
        "/.kubedav/uploads/",
        &[
            ("upload-length", "10".to_owned()),
            ("upload-metadata", metadata),
            ("content-type", "application/offset+octet-stream".to_owned()),
        ],
        b"01234",
    )
    .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    assert_eq!(created.headers()["upload-offset"], "5");
    let upload = created.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(
        tus(&app, "alice", "DELETE", &upload, &[], b"").await.status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(offset_of(&app, "alice", &upload).await, None);
    let listing = tus(
        &app,
        "alice",
        "PROPFIND",
        "/.kubedav/",
        &[("depth", "1".to_owned())],
        b"",
    )
    .await;
    assert_ne!(listing.status(), StatusCode::MULTI_STATUS);
}

/// bob uploads into a folder alice shared with him; alice revokes the share before his
/// last PATCH: the upload does not land (409, as a PUT into a folder bob cannot see, or
/// one that does not exist) and is removed.
#[tokio::test]
async fn a_share_revoked_during_an_upload_stops_it_landing() {
    let app = app();
    let made = tus(
        &app,
        "alice",
        "POST",
        "/.kubedav/shares",
        &[
            ("x-kubedav-request", "1".to_owned()),
            ("content-type", "application/json".to_owned()),
        ],
        serde_json::json!({"path": "/home/alice/in", "to": "user:bob", "permission": "write"})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(made.status(), StatusCode::CREATED);
    let id = serde_json::from_str::<serde_json::Value>(&made.text().await.unwrap()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let data = content(2000);
    let upload = create(&app, "bob", "/home/alice/in/from-bob.bin", data.len())
        .await
        .unwrap();
    assert_eq!(
        patch(&app, "bob", &upload, 0, &data[..1000]).await.status(),
        StatusCode::NO_CONTENT
    );
    let revoked = tus(
        &app,
        "alice",
        "DELETE",
        &format!("/.kubedav/shares/{id}"),
        &[("x-kubedav-request", "1".to_owned())],
        b"",
    )
    .await;
    assert!(revoked.status().is_success(), "{}", revoked.status());
    let last = patch(&app, "bob", &upload, 1000, &data[1000..]).await;
    assert_eq!(last.status(), StatusCode::CONFLICT);
    assert!(!app.disk("home/alice/in/from-bob.bin").exists());
    assert_eq!(offset_of(&app, "bob", &upload).await, None);
}
