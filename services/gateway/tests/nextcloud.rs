//! Nextcloud chunking and paths, in process (docs/uploads.md): chunks in any order land
//! as one PUT at `MOVE .file`, with its modification time and checksum; what a client
//! gets wrong is refused with a clear 4xx and lands nothing; an upload folder and the
//! files view are their user's alone, and a landing follows the policy as a PUT would.

mod common;

use common::App;
use common::send_as as send;
use http::StatusCode;
use sha2::Digest;

fn app() -> App {
    common::uploads_app()
}

fn content(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 13 % 251) as u8).collect()
}

const UPLOADS: &str = "/remote.php/dav/uploads";

/// Chunking v2: MKCOL with Destination and OC-Total-Length, chunks 3, 1 and 2, and a
/// `.file` MOVE refused while chunk 2 is missing (409, naming it); once all are there the
/// MOVE lands the file with the client's modification time and checksum (201), and the
/// upload folder is gone. The files view serves it with hrefs under the view.
#[tokio::test]
async fn chunks_in_any_order_land_with_the_move_and_its_headers() {
    let app = app();
    let data = content(30_000);
    let target = app.url("/remote.php/dav/files/alice/home/alice/in/c.bin");
    let folder = format!("{UPLOADS}/alice/web-file-upload-1");
    let made = send(
        &app,
        "alice",
        "MKCOL",
        &folder,
        &[
            ("destination", target.clone()),
            ("oc-total-length", data.len().to_string()),
        ],
        b"",
    )
    .await;
    assert_eq!(made.status(), StatusCode::CREATED);
    let again = send(&app, "alice", "MKCOL", &folder, &[], b"").await;
    assert_eq!(again.status(), StatusCode::METHOD_NOT_ALLOWED);

    for (number, range) in [(3, 20_000..30_000), (1, 0..10_000)] {
        let put = send(
            &app,
            "alice",
            "PUT",
            &format!("{folder}/{number}"),
            &[],
            &data[range],
        )
        .await;
        assert_eq!(put.status(), StatusCode::CREATED, "chunk {number}");
    }
    // A client resuming lists what arrived (chunks 1 and 3), to send only the others.
    let listed = send(&app, "alice", "PROPFIND", &folder, &[("depth", "1".into())], b"").await;
    assert_eq!(listed.status(), StatusCode::MULTI_STATUS);
    let xml = listed.text().await.unwrap();
    assert!(xml.contains("web-file-upload-1/00001</d:href>"), "{xml}");
    assert!(xml.contains("web-file-upload-1/00003</d:href>"), "{xml}");
    assert!(!xml.contains("web-file-upload-1/00002</d:href>"), "{xml}");
    let checksum = format!("SHA256:{}", hex(&sha2::Sha256::digest(&data)));
    let moving = [
        ("destination", target.clone()),
        ("oc-total-length", data.len().to_string()),
        ("x-oc-mtime", "1700000000".to_owned()),
        ("oc-checksum", checksum),
    ];
    let early = send(&app, "alice", "MOVE", &format!("{folder}/.file"), &moving, b"").await;
    assert_eq!(early.status(), StatusCode::CONFLICT);
    assert!(early.text().await.unwrap().contains("chunk 2"));
    assert!(!app.disk("home/alice/in/c.bin").exists());

    let put = send(
        &app,
        "alice",
        "PUT",
        &format!("{folder}/2"),
        &[],
        &data[10_000..20_000],
    )
    .await;
    assert_eq!(put.status(), StatusCode::CREATED);
    let landed = send(&app, "alice", "MOVE", &format!("{folder}/.file"), &moving, b"").await;
    assert_eq!(landed.status(), StatusCode::CREATED);
    assert_eq!(landed.headers()["x-oc-mtime"], "accepted");
    assert!(landed.headers().contains_key("etag"));
    assert_eq!(std::fs::read(app.disk("home/alice/in/c.bin")).unwrap(), data);
    let modified = std::fs::metadata(app.disk("home/alice/in/c.bin"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(
        modified.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs(),
        1_700_000_000
    );
    let gone = send(&app, "alice", "PROPFIND", &folder, &[("depth", "0".into())], b"").await;
    assert_eq!(gone.status(), StatusCode::NOT_FOUND);

    let listing = send(
        &app,
        "alice",
        "PROPFIND",
        "/remote.php/dav/files/alice/home/alice/in/",
        &[("depth", "1".into())],
        b"",
    )
    .await;
    assert_eq!(listing.status(), StatusCode::MULTI_STATUS);
    let xml = listing.text().await.unwrap();
    assert!(
        xml.contains("<D:href>/remote.php/dav/files/alice/home/alice/in/c.bin</D:href>"),
        "{xml}"
    );
}

/// START-END chunks (rclone's names) without a MKCOL Destination; a chunk past the
/// declared length (413), a bad chunk name or a name whose size is not the body's (400),
/// a chunk of the other naming (409), a MOVE whose OC-Total-Length is not what arrived
/// (409) and one whose checksum does not match (400, and the upload is dropped) land
/// nothing.
#[tokio::test]
async fn what_a_client_gets_wrong_is_refused_and_lands_nothing() {
    let app = app();
    let data = content(8_000);
    let folder = format!("{UPLOADS}/alice/rclone-chunked-upload-0f");
    assert_eq!(
        send(&app, "alice", "MKCOL", &format!("{folder}/"), &[], b"")
            .await
            .status(),
        StatusCode::CREATED
    );
    let first = format!("{folder}/000000000000000-000000000003999");
    assert_eq!(
        send(&app, "alice", "PUT", &first, &[], &data[..4000])
            .await
            .status(),
        StatusCode::CREATED
    );
    let declared = [("oc-total-length", "6000".to_owned())];
    let past = send(
        &app,
        "alice",
        "PUT",
        &format!("{folder}/000000000004000-000000000007999"),
        &declared,
        &data[4000..],
    )
    .await;
    assert_eq!(past.status(), StatusCode::PAYLOAD_TOO_LARGE);
    for (name, body, refused) in [
        ("0", &data[..10], StatusCode::BAD_REQUEST),
        ("10001", &data[..10], StatusCode::BAD_REQUEST),
        ("abc", &data[..10], StatusCode::BAD_REQUEST),
        (
            "000000000004000-000000000004009",
            &data[..5],
            StatusCode::BAD_REQUEST,
        ),
        ("2", &data[..10], StatusCode::CONFLICT),
    ] {
        let answer = send(&app, "alice", "PUT", &format!("{folder}/{name}"), &[], body).await;
        assert_eq!(answer.status(), refused, "chunk {name}");
    }
    let second = format!("{folder}/000000000004000-000000000007999");
    assert_eq!(
        send(&app, "alice", "PUT", &second, &[], &data[4000..])
            .await
            .status(),
        StatusCode::CREATED
    );
    let target = app.url("/home/alice/in/r.bin");
    let short = send(
        &app,
        "alice",
        "MOVE",
        &format!("{folder}/.file"),
        &[
            ("destination", target.clone()),
            ("oc-total-length", "9000".into()),
        ],
        b"",
    )
    .await;
    assert_eq!(short.status(), StatusCode::CONFLICT);
    let wrong_sum = send(
        &app,
        "alice",
        "MOVE",
        &format!("{folder}/.file"),
        &[
            ("destination", target),
            ("oc-checksum", format!("SHA1:{}", "0".repeat(40))),
        ],
        b"",
    )
    .await;
    assert_eq!(wrong_sum.status(), StatusCode::BAD_REQUEST);
    assert!(!app.disk("home/alice/in/r.bin").exists());
    let dropped = send(&app, "alice", "DELETE", &format!("{folder}/"), &[], b"").await;
    assert_eq!(dropped.status(), StatusCode::NOT_FOUND);
}

/// Another user's upload folder and files view answer as absent paths, byte for byte;
/// the same folder name is another upload for each user; a landing in a home the user
/// may not write is refused as that PUT would be.
#[tokio::test]
async fn uploads_and_the_files_view_are_their_users_alone() {
    let app = app();
    let folder = format!("{UPLOADS}/alice/shared-name");
    assert_eq!(
        send(&app, "alice", "MKCOL", &folder, &[], b"").await.status(),
        StatusCode::CREATED
    );
    let absent = send(
        &app,
        "bob",
        "PROPFIND",
        &format!("{UPLOADS}/alice/no-such"),
        &[],
        b"",
    )
    .await;
    let (absent_status, absent_body) = (absent.status(), absent.text().await.unwrap());
    assert_eq!(absent_status, StatusCode::NOT_FOUND);
    for (method, path) in [
        ("PROPFIND", folder.clone()),
        ("PUT", format!("{folder}/1")),
        ("DELETE", folder.clone()),
        ("MOVE", format!("{folder}/.file")),
        ("PROPFIND", "/remote.php/dav/files/alice/".to_owned()),
        ("GET", "/remote.php/dav/files/alice/home/alice/in/".to_owned()),
    ] {
        let answer = send(
            &app,
            "bob",
            method,
            &path,
            &[("destination", app.url("/home/bob/x"))],
            b"x",
        )
        .await;
        assert_eq!(answer.status(), absent_status, "{method} {path}");
        assert_eq!(answer.text().await.unwrap(), absent_body, "{method} {path}");
    }
    // Bob's folder of the same name is his own, empty upload.
    let bobs = format!("{UPLOADS}/bob/shared-name");
    assert_eq!(
        send(&app, "bob", "MKCOL", &bobs, &[], b"").await.status(),
        StatusCode::CREATED
    );
    assert_eq!(
        send(&app, "bob", "PUT", &format!("{bobs}/1"), &[], b"bob's bytes")
            .await
            .status(),
        StatusCode::CREATED
    );
    let into_alice = send(
        &app,
        "bob",
        "MOVE",
        &format!("{bobs}/.file"),
        &[("destination", app.url("/home/alice/in/from-bob"))],
        b"",
    )
    .await;
    let as_put = send(&app, "bob", "PUT", "/home/alice/in/from-bob", &[], b"bob's bytes").await;
    assert_eq!(into_alice.status(), as_put.status());
    assert!(!app.disk("home/alice/in/from-bob").exists());
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
