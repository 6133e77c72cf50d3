//! fileio on S3-compatible object storage, against a real S3 server (versitygw), in both
//! run modes: the bucket stays a plain bucket that other tools read and write, dead
//! properties cost a constant number of S3 requests per PROPFIND and follow COPY, MOVE
//! and DELETE, and an S3 server that stops, or a fileio killed in the middle of an
//! upload or a MOVE, loses nothing. The WebDAV suites (http, webdav, hostile, faults,
//! litmus) run on S3 too; this suite holds what only object storage has.

#[macro_use]
mod common;

use bytes::Bytes;
use common::{BACKEND, Backend, Mode, S3_PREFIX, Server, client};
use kubedav_fileio::s3::S3Client;
use reqwest::{Method, StatusCode};
use std::time::Duration;

/// A client of the test server's bucket, as another tool writing into it would be.
fn bucket(server: &Server) -> S3Client {
    common::bucket_client(server.s3.as_ref().expect("a server on S3"))
}

fn key(path: &str) -> String {
    format!("{S3_PREFIX}/{path}")
}

fn dav(server: &Server, verb: &str, path: &str) -> reqwest::RequestBuilder {
    client().request(Method::from_bytes(verb.as_bytes()).unwrap(), server.url(path))
}

async fn send(request: reqwest::RequestBuilder) -> (StatusCode, String) {
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.text().await.unwrap())
}

async fn propfind(server: &Server, path: &str, depth: &str) -> (StatusCode, String) {
    send(dav(server, "PROPFIND", path).header("depth", depth)).await
}

/// Whether a GET of `path` answers 200 with `content` within `limit`.
async fn reads_within(server: &Server, path: &str, content: &[u8], limit: Duration) -> bool {
    common::eventually_async(limit, || async {
        match client().get(server.url(path)).send().await {
            Ok(r) if r.status() == StatusCode::OK => r.bytes().await.is_ok_and(|b| b.as_ref() == content),
            _ => false,
        }
    })
    .await
}

/// The process that runs fileio.
fn fileio(mode: Mode) -> &'static str {
    match mode {
        Mode::AllInOne => "all",
        Mode::Microservices => "fileio",
    }
}

/// The admin address of the process that runs fileio.
fn fileio_admin(server: &Server, mode: Mode) -> std::net::SocketAddr {
    let process = fileio(mode);
    server.admin_of(process)
}

/// S3 requests fileio has made so far.
async fn s3_requests(server: &Server, mode: Mode) -> f64 {
    common::metric_sum(fileio_admin(server, mode), "kubedav_fileio_s3_requests_total").await
}

/// Objects another S3 client wrote, under keys kubedav never made and without any
/// collection marker, are listed and served; what kubedav writes is a plain object under
/// the key its path names.
async fn foreign_objects_are_listed_and_served(mode: Mode) {
    let server = Server::start(mode).await;
    let s3 = bucket(&server);
    s3.put(
        &key("outside/deep/a.txt"),
        Bytes::from_static(b"from another tool"),
    )
    .await
    .unwrap();
    s3.put(&key("x y%#.txt"), Bytes::from_static(b"odd name"))
        .await
        .unwrap();
    // Keys no WebDAV path can name are left out, and break nothing. (A key with a control
    // character cannot be tried here: versitygw lists it with U+FFFD in its place.)
    s3.put(&key(".kubedav-upload-stray"), Bytes::from_static(b"b"))
        .await
        .unwrap();
    // (An S3 server may refuse such a key itself; either way nothing breaks.)
    let _ = s3.put(&key("empty//segment"), Bytes::from_static(b"e")).await;

    // And one written by a client that shares no code with kubedav: curl's own SigV4.
    let by_curl = std::env::temp_dir().join(format!("kubedav-curl-{}", std::process::id()));
    std::fs::write(&by_curl, "signed by curl").unwrap();
    let s3_server = server.s3.as_ref().unwrap();
    let curl = std::process::Command::new("curl")
        .args(["-sS", "--fail", "--aws-sigv4", "aws:amz:us-east-1:s3"])
        .args([
            "--user",
            &format!(
                "{}:{}",
                kubedav_testkit::S3_ACCESS_KEY,
                kubedav_testkit::S3_SECRET_KEY
            ),
        ])
        .args(["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-T"])
        .arg(&by_curl)
        .arg(format!(
            "{}/{}/{S3_PREFIX}/by%20curl.txt",
            s3_server.endpoint(),
            s3_server.bucket()
        ))
        .output()
        .expect("curl runs (make test installs it)");
    let _ = std::fs::remove_file(&by_curl);
    assert!(
        curl.status.success(),
        "curl's PUT: {}",
        String::from_utf8_lossy(&curl.stderr)
    );

    let (status, xml) = propfind(&server, "/", "1").await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert!(xml.contains("<D:href>/outside/</D:href>"), "{xml}");
    assert!(xml.contains("<D:href>/by%20curl.txt</D:href>"), "{xml}");
    let response = client().get(server.url("/by%20curl.txt")).send().await.unwrap();
    assert_eq!(response.text().await.unwrap(), "signed by curl");
    assert!(xml.contains("<D:href>/x%20y%25%23.txt</D:href>"), "{xml}");
    assert!(!xml.contains("stray") && !xml.contains("segment"), "{xml}");
    let (status, xml) = propfind(&server, "/outside/deep/", "1").await;
    assert_eq!(
        status,
        StatusCode::MULTI_STATUS,
        "a prefix with no marker is a collection"
    );
    assert!(xml.contains("<D:href>/outside/deep/a.txt</D:href>"), "{xml}");
    let response = client()
        .get(server.url("/outside/deep/a.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.bytes().await.unwrap().as_ref(), b"from another tool");

    assert_eq!(send(dav(&server, "MKCOL", "/made/")).await.0, StatusCode::CREATED);
    let response = client()
        .put(server.url("/made/b.txt"))
        .body("written by kubedav")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(
        s3.get(&key("made/b.txt")).await.unwrap().as_ref(),
        b"written by kubedav"
    );
    assert!(
        s3.head(&key("made/")).await.unwrap().is_some(),
        "a collection marker, as S3 consoles make"
    );
}

/// What kubedav keeps of the bucket's answers (in microservices mode in the gateway,
/// all-in-one in front of fileio) is dropped at once by a change made through kubedav,
/// and a change another tool makes in the bucket shows within the freshness bound.
async fn kept_answers_follow_changes(mode: Mode) {
    let server = Server::start_with(mode, &["--gateway-cache-freshness-ms", "500"]).await;
    let s3 = bucket(&server);
    let get = |path: &'static str| {
        let server = &server;
        async move {
            let response = client().get(server.url(path)).send().await.unwrap();
            (response.status(), response.text().await.unwrap())
        }
    };
    let status = client()
        .put(server.url("/f.txt"))
        .body("one")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(get("/f.txt").await, (StatusCode::OK, "one".to_owned()));
    assert_eq!(
        get("/f.txt").await,
        (StatusCode::OK, "one".to_owned()),
        "now kept"
    );
    let status = client()
        .put(server.url("/f.txt"))
        .body("two")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        get("/f.txt").await,
        (StatusCode::OK, "two".to_owned()),
        "a change through kubedav is seen at once"
    );
    s3.put(&key("f.txt"), Bytes::from_static(b"three")).await.unwrap();
    s3.put(&key("g.txt"), Bytes::from_static(b"new")).await.unwrap();
    let seen = common::eventually_async(Duration::from_secs(10), || async {
        get("/f.txt").await.1 == "three"
            && propfind(&server, "/", "1")
                .await
                .1
                .contains("<D:href>/g.txt</D:href>")
    })
    .await;
    assert!(seen, "a change made by another tool never showed");
}

/// PROPFIND Depth 1 with every property of a collection of 1,000 objects costs 3 S3
/// requests (one listing page of the members, read at once with the collection's
/// property index and its parent's), not one per member. Each further 1,000 members
/// cost one listing page more (docs/architecture.md).
async fn propfind_depth_one_costs_three_s3_requests(mode: Mode) {
    let server = Server::start_with(mode, &["--gateway-cache-mib", "0"]).await;
    let s3 = bucket(&server);
    assert_eq!(send(dav(&server, "MKCOL", "/many/")).await.0, StatusCode::CREATED);
    let puts = (0..1000).map(|i| {
        let s3 = s3.clone();
        async move {
            s3.put(&key(&format!("many/f{i:04}")), Bytes::from_static(b"x"))
                .await
        }
    });
    for result in futures_util::future::join_all(puts).await {
        result.unwrap();
    }
    let set = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:z="urn:z"><D:set><D:prop><z:color>teal</z:color></D:prop></D:set></D:propertyupdate>"#;
    let (status, _) = send(dav(&server, "PROPPATCH", "/many/f0500").body(set)).await;
    assert_eq!(status, StatusCode::MULTI_STATUS);

    let before = s3_requests(&server, mode).await;
    let (status, xml) = send(
        dav(&server, "PROPFIND", "/many/")
            .header("depth", "1")
            .body(r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>"#),
    )
    .await;
    let spent = s3_requests(&server, mode).await - before;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert_eq!(xml.matches("<D:response>").count(), 1001);
    assert!(xml.contains(">teal</"), "the dead property is listed");
    eprintln!("{mode:?}: PROPFIND Depth 1 allprop on 1,000 objects: {spent} S3 requests");
    assert!(
        (1.0..=3.0).contains(&spent),
        "{spent} S3 requests (kubedav_fileio_s3_requests_total counts them)"
    );
}

/// Dead properties follow COPY and MOVE, of files and of collections with their
/// members, and go with DELETE: a new file of the same name starts with none.
async fn dead_properties_follow_copy_move_delete(mode: Mode) {
    let server = Server::start(mode).await;
    let set = |value: &str| {
        format!(
            r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:z="urn:z"><D:set><D:prop><z:tag>{value}</z:tag></D:prop></D:set></D:propertyupdate>"#
        )
    };
    // The value of the one property asked for (`<N0:tag>value</N0:tag>`); None for an
    // empty element or one reported missing.
    let tag = |xml: &str| {
        if xml.contains("404 Not Found") {
            return None;
        }
        let open_end = xml.find(":tag>")? + ":tag>".len();
        let close = xml[open_end..].find("</")? + open_end;
        Some(xml[open_end..close].to_owned())
    };
    let get_tag = |path: &'static str| {
        let server = &server;
        async move {
            let body = r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:z="urn:z"><D:prop><z:tag/></D:prop></D:propfind>"#;
            let (status, xml) = send(dav(server, "PROPFIND", path).header("depth", "0").body(body)).await;
            assert_eq!(status, StatusCode::MULTI_STATUS, "{path}: {xml}");
            tag(&xml)
        }
    };
    assert_eq!(send(dav(&server, "MKCOL", "/d/")).await.0, StatusCode::CREATED);
    assert_eq!(
        send(dav(&server, "MKCOL", "/d/sub/")).await.0,
        StatusCode::CREATED
    );
    for path in ["/d/a.txt", "/d/sub/b.txt"] {
        let status = client()
            .put(server.url(path))
            .body("x")
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, StatusCode::CREATED);
    }
    for (path, value) in [
        ("/d/", "dir"),
        ("/d/a.txt", "file"),
        ("/d/sub/", "subdir"),
        ("/d/sub/b.txt", "deep"),
    ] {
        assert_eq!(
            send(dav(&server, "PROPPATCH", path).body(set(value))).await.0,
            StatusCode::MULTI_STATUS
        );
    }
    // A PUT replaces the body, not the properties.
    client()
        .put(server.url("/d/a.txt"))
        .body("y")
        .send()
        .await
        .unwrap();
    assert_eq!(get_tag("/d/a.txt").await.as_deref(), Some("file"));

    let copy = dav(&server, "COPY", "/d/").header("destination", "/c/");
    assert_eq!(send(copy).await.0, StatusCode::CREATED);
    let moved = dav(&server, "MOVE", "/d/").header("destination", "/m/");
    assert_eq!(send(moved).await.0, StatusCode::CREATED);
    for root in ["/c", "/m"] {
        let at = |rest: &str| -> &'static str { Box::leak(format!("{root}{rest}").into_boxed_str()) };
        assert_eq!(get_tag(at("/")).await.as_deref(), Some("dir"), "{root}");
        assert_eq!(get_tag(at("/a.txt")).await.as_deref(), Some("file"), "{root}");
        assert_eq!(get_tag(at("/sub/")).await.as_deref(), Some("subdir"), "{root}");
        assert_eq!(get_tag(at("/sub/b.txt")).await.as_deref(), Some("deep"), "{root}");
    }
    assert_eq!(propfind(&server, "/d/", "0").await.0, StatusCode::NOT_FOUND);

    let copy = dav(&server, "COPY", "/m/a.txt").header("destination", "/lone.txt");
    assert_eq!(send(copy).await.0, StatusCode::CREATED);
    assert_eq!(get_tag("/lone.txt").await.as_deref(), Some("file"));
    assert_eq!(
        send(dav(&server, "DELETE", "/lone.txt")).await.0,
        StatusCode::NO_CONTENT
    );
    client()
        .put(server.url("/lone.txt"))
        .body("new")
        .send()
        .await
        .unwrap();
    assert_eq!(get_tag("/lone.txt").await, None, "a new file does not inherit");
    assert_eq!(
        send(dav(&server, "DELETE", "/m/")).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(send(dav(&server, "MKCOL", "/m/")).await.0, StatusCode::CREATED);
    assert_eq!(get_tag("/m/").await, None, "a new collection does not inherit");
}

/// The S3 server stopped: 503 with Retry-After, never a hang or a 404; started again:
/// served again, with no restart of kubedav.
async fn store_down_gives_503_then_recovers(mode: Mode) {
    let mut server = Server::start(mode).await;
    let status = client()
        .put(server.url("/kept.txt"))
        .body("kept")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::CREATED);
    server.s3.as_mut().unwrap().stop();
    for request in [
        client().get(server.url("/kept.txt")),
        client().put(server.url("/new.txt")).body("n"),
        dav(&server, "PROPFIND", "/").header("depth", "1"),
    ] {
        let response = tokio::time::timeout(Duration::from_secs(30), request.send())
            .await
            .expect("an answer, not a hang")
            .unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(response.headers().contains_key("retry-after"));
    }
    server.s3.as_mut().unwrap().restart();
    assert!(
        reads_within(&server, "/kept.txt", b"kept", Duration::from_secs(20)).await,
        "kubedav did not recover by itself"
    );
}

/// A client that goes away in the middle of a large PUT: the multipart upload is
/// aborted (its parts dropped at once, not at the next start), no object appears and
/// the old content stays. versitygw renames each part into place, which widens the
/// window in which the part in flight completes after an abort sent too early.
async fn a_cut_upload_is_aborted_and_keeps_old_content(mode: Mode) {
    let mut server = Server::start(mode).await;
    server
        .s3
        .as_mut()
        .expect("the S3 backend")
        .restart_renaming_into_place();
    let s3 = bucket(&server);
    s3.put(&key("keep.bin"), Bytes::from_static(b"the old content"))
        .await
        .unwrap();
    // kubedav's connections to the restarted server are renewed before the upload.
    assert!(
        reads_within(&server, "/keep.bin", b"the old content", Duration::from_secs(20)).await,
        "kubedav did not read from the restarted S3 server"
    );
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    use tokio::io::AsyncWriteExt;
    let head = "PUT /keep.bin HTTP/1.1\r\nHost: t\r\nContent-Length: 33554432\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&vec![b'N'; 12 << 20]).await.unwrap();
    stream.flush().await.unwrap();
    let started = common::eventually_async(Duration::from_secs(20), || async {
        s3.uploads(&key("")).await.is_ok_and(|u| u.len() == 1)
    })
    .await;
    assert!(started, "the multipart upload never started");
    drop(stream);
    let aborted = common::eventually_async(Duration::from_secs(20), || async {
        s3.uploads(&key("")).await.is_ok_and(|u| u.is_empty())
    })
    .await;
    assert!(aborted, "the cut upload was not aborted");
    assert_eq!(
        s3.get(&key("keep.bin")).await.unwrap().as_ref(),
        b"the old content"
    );
}

/// fileio killed (SIGKILL) in the middle of multipart uploads: no object appears, the
/// old content stays, and the sweep of the restarted fileio aborts the uploads left
/// behind once they have stored nothing for the idle time (3 s here).
async fn kill_during_multipart_upload_keeps_old_content(mode: Mode) {
    const UPLOADS: usize = 3;
    let mut server = Server::start_full(mode, &[], &[("KUBEDAV_ABANDONED_UPLOAD_SECONDS", "3")]).await;
    let s3 = bucket(&server);
    for i in 0..UPLOADS {
        s3.put(
            &key(&format!("f{i}.bin")),
            Bytes::from(format!("old content {i}")),
        )
        .await
        .unwrap();
    }
    let mut senders = Vec::new();
    let mut uploads = Vec::new();
    for i in 0..UPLOADS {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
        let url = server.url(&format!("/f{i}.bin"));
        let stream =
            futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
        uploads.push(tokio::spawn(async move {
            client()
                .put(url)
                .header("content-length", 32 << 20)
                .body(reqwest::Body::wrap_stream(stream))
                .send()
                .await
        }));
        // More than one part (8 MiB): the upload is under way at the S3 server.
        for _ in 0..10 {
            tx.send(Ok(vec![b'n'; 1 << 20])).await.unwrap();
        }
        senders.push(tx);
    }
    let started = common::eventually_async(Duration::from_secs(20), || async {
        s3.uploads(&key("")).await.is_ok_and(|u| u.len() == UPLOADS)
    })
    .await;
    assert!(started, "the multipart uploads never started");
    server.process(fileio(mode)).child.kill().await.unwrap();
    drop(senders);
    for upload in uploads {
        if let Ok(response) = upload.await.unwrap() {
            assert!(!response.status().is_success(), "an interrupted upload succeeded");
        }
    }
    for i in 0..UPLOADS {
        assert_eq!(
            s3.get(&key(&format!("f{i}.bin"))).await.unwrap(),
            Bytes::from(format!("old content {i}")),
            "a target lost its previous content"
        );
    }
    assert_eq!(
        s3.uploads(&key("")).await.unwrap().len(),
        UPLOADS,
        "the crash left its uploads"
    );
    server.process(fileio(mode)).restart().await;
    let swept = common::eventually_async(Duration::from_secs(20), || async {
        s3.uploads(&key("")).await.is_ok_and(|u| u.is_empty())
    })
    .await;
    assert!(swept, "the uploads left by the crash were not aborted");
}

/// S3 requests of `action` fileio has made so far.
async fn s3_requests_of(server: &Server, mode: Mode, action: &str) -> f64 {
    let needle = format!("action=\"{action}\"");
    common::metric_text(fileio_admin(server, mode))
        .await
        .lines()
        .filter(|line| line.starts_with("kubedav_fileio_s3_requests_total") && line.contains(&needle))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A fileio that starts while another replica's upload is in flight over the same
/// bucket (begun before the start, storing parts) leaves it alone: its sweep aborts
/// only uploads that stored nothing for the idle time, so the other replica completes
/// its upload.
async fn a_starting_fileio_leaves_uploads_in_flight_alone(mode: Mode) {
    let mut server = Server::start(mode).await;
    let s3 = bucket(&server);
    let other = key("other-replica.bin");
    let upload = s3.start_upload(&other).await.unwrap();
    let part = s3
        .upload_part(&other, &upload, 1, Bytes::from(vec![b'p'; 5 << 20]))
        .await
        .unwrap();
    server.process(fileio(mode)).restart().await;
    let swept = common::eventually_async(Duration::from_secs(20), || async {
        s3_requests_of(&server, mode, "ListMultipartUploads").await >= 1.0
    })
    .await;
    assert!(swept, "the started fileio never swept");
    let uploads = s3.uploads(&key("")).await.unwrap();
    assert!(
        uploads.iter().any(|(_, id, _)| *id == upload),
        "the other replica's upload was aborted: {uploads:?}"
    );
    s3.complete_upload(&other, &upload, &[part], None).await.unwrap();
    let response = client()
        .get(server.url("/other-replica.bin"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.bytes().await.unwrap().len(), 5 << 20);
}

/// fileio killed in the middle of a collection MOVE: the source is whole (copied first,
/// deleted only after), the destination partly there; the MOVE again with Overwrite
/// finishes it.
async fn kill_during_collection_move_keeps_the_source_whole(mode: Mode) {
    const FILES: usize = 400;
    let mut server = Server::start(mode).await;
    let s3 = bucket(&server);
    assert_eq!(send(dav(&server, "MKCOL", "/src/")).await.0, StatusCode::CREATED);
    let puts = (0..FILES).map(|i| {
        let s3 = s3.clone();
        async move {
            s3.put(&key(&format!("src/f{i:03}")), Bytes::from(format!("file {i}")))
                .await
        }
    });
    for result in futures_util::future::join_all(puts).await {
        result.unwrap();
    }
    let moving = tokio::spawn(send(dav(&server, "MOVE", "/src/").header("destination", "/dst/")));
    let copying = common::eventually_async(Duration::from_secs(20), || async {
        s3.list_all(&key("dst/"), None)
            .await
            .is_ok_and(|page| page.objects.len() > 20)
    })
    .await;
    assert!(copying, "the MOVE never began to copy");
    server.process(fileio(mode)).child.kill().await.unwrap();
    let _ = moving.await;
    for i in 0..FILES {
        assert_eq!(
            s3.get(&key(&format!("src/f{i:03}"))).await.unwrap(),
            Bytes::from(format!("file {i}")),
            "the source lost a member"
        );
    }
    server.process(fileio(mode)).restart().await;
    let again = common::eventually_async(Duration::from_secs(20), || async {
        let request = dav(&server, "MOVE", "/src/")
            .header("destination", "/dst/")
            .header("overwrite", "T");
        matches!(request.send().await, Ok(r) if r.status() == StatusCode::NO_CONTENT)
    })
    .await;
    assert!(again, "the MOVE did not complete when tried again");
    assert_eq!(propfind(&server, "/src/", "0").await.0, StatusCode::NOT_FOUND);
    let (_, xml) = propfind(&server, "/dst/", "1").await;
    assert_eq!(xml.matches("<D:response>").count(), FILES + 1);
}

/// The getlastmodified of `href` in a multistatus answer.
fn modified_of(xml: &str, href: &str) -> String {
    let response = xml
        .split("<D:response>")
        .find(|r| r.contains(&format!("<D:href>{href}</D:href>")))
        .unwrap_or_else(|| panic!("no response for {href}: {xml}"));
    let start = response.find("<D:getlastmodified>").expect("a getlastmodified") + 19;
    let end = response[start..].find('<').unwrap();
    response[start..start + end].to_owned()
}

/// A collection reports one time whichever way it is asked for: alone (Depth 0), as
/// the subject of a Depth 1 listing, and as a member of its parent's (a sync client
/// comparing them must not see a change that did not happen).
async fn collection_times_agree_at_every_depth(mode: Mode) {
    let server = Server::start_with(mode, &["--gateway-cache-mib", "0"]).await;
    for path in ["/c/", "/c/sub/"] {
        assert_eq!(send(dav(&server, "MKCOL", path)).await.0, StatusCode::CREATED);
    }
    let alone = modified_of(&propfind(&server, "/c/", "0").await.1, "/c/");
    let as_subject = modified_of(&propfind(&server, "/c/", "1").await.1, "/c/");
    let as_member = modified_of(&propfind(&server, "/", "1").await.1, "/c/");
    assert_eq!(alone, as_subject);
    assert_eq!(alone, as_member, "/c/ in the root's listing");
    let sub_alone = modified_of(&propfind(&server, "/c/sub/", "0").await.1, "/c/sub/");
    let sub_as_member = modified_of(&propfind(&server, "/c/", "1").await.1, "/c/sub/");
    assert_eq!(sub_alone, sub_as_member, "/c/sub/ in its parent's listing");
}

/// An `https://` S3 endpoint whose certificate a private CA issued: with the CA named in
/// `AWS_CA_BUNDLE`, files small and large (a multipart upload) go to the bucket and back
/// over TLS; without it, fileio refuses to start and says to set it.
async fn served_over_tls_with_a_private_ca(mode: Mode) {
    let server = Server::start(mode).await;
    let s3 = bucket(&server);
    assert!(s3_endpoint(&server).starts_with("https://"));
    let large: Vec<u8> = (0..10 * 1024 * 1024 + 7).map(|i| (i % 251) as u8).collect();
    for (path, body) in [("/small.txt", b"over TLS".to_vec()), ("/large.bin", large)] {
        let response = client()
            .put(server.url(path))
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED, "PUT {path}");
        let response = client().get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(
            response.bytes().await.unwrap() == body,
            "GET {path} gives what was PUT"
        );
        assert!(
            s3.get(&key(&path[1..])).await.unwrap() == body,
            "{path} in the bucket"
        );
    }
    let (status, xml) = propfind(&server, "/", "1").await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert!(xml.contains("<D:href>/large.bin</D:href>"), "{xml}");

    let storage = format!("s3://{}/{S3_PREFIX}", server.s3.as_ref().unwrap().bucket());
    let untrusting = [
        ("AWS_ENDPOINT_URL", s3_endpoint(&server)),
        ("AWS_ACCESS_KEY_ID", kubedav_testkit::S3_ACCESS_KEY.to_owned()),
        ("AWS_SECRET_ACCESS_KEY", kubedav_testkit::S3_SECRET_KEY.to_owned()),
    ]
    .map(|(name, value)| (name.to_owned(), value));
    let target = match mode {
        Mode::AllInOne => "--target=all",
        Mode::Microservices => "--target=fileio",
    };
    let args = [target, "--storage", &storage, "--listen", "127.0.0.1:0"]
        .map(str::to_owned)
        .to_vec();
    let mut refused = common::Process::spawn("untrusting", &args, &untrusting);
    let line = refused.logged("AWS_CA_BUNDLE").await;
    assert!(line.contains("certificate"), "names the cause: {line}");
}

/// Names S3 servers escape in their XML answers (`&`, `<`, `>`, `"`, `'`), that mean
/// something in a URL or a form (`%`, `+`, a space), or that are not ASCII.
const ODD_NAMES: [&str; 9] = [
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

/// A path with each segment percent-encoded but for unreserved characters.
fn encoded(path: &str) -> String {
    const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    path.split('/')
        .map(|segment| percent_encoding::utf8_percent_encode(segment, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// The paths a multistatus names, decoded, in order.
fn hrefs(xml: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::NsReader::from_str(xml);
    let (mut href, mut paths) = (None::<String>, Vec::new());
    loop {
        match reader.read_event().unwrap() {
            Event::Start(start) if start.local_name().as_ref() == "href" => href = Some(String::new()),
            Event::Text(text) => href.iter_mut().for_each(|h| h.push_str(&text.xml10_content())),
            Event::GeneralRef(name) => href
                .iter_mut()
                .for_each(|h| h.push_str(&format!("&{};", name.xml10_content()))),
            Event::End(_) => {
                if let Some(escaped) = href.take() {
                    let text = quick_xml::escape::unescape(&escaped).unwrap();
                    paths.push(
                        percent_encoding::percent_decode_str(&text)
                            .decode_utf8()
                            .unwrap()
                            .into_owned(),
                    );
                }
            }
            Event::Eof => return paths,
            _ => {}
        }
    }
}

/// Files named with [`ODD_NAMES`] in a collection named so too, one of them large
/// enough for a multipart upload: PUT, PROPFIND Depth 1, GET, MOVE (of each file, then of
/// the collection) and DELETE give their names and contents back exactly, and an upload
/// another tool left under such a name is swept by its exact key.
async fn odd_names_come_back_exactly(mode: Mode) {
    let server = Server::start_full(mode, &[], &[("KUBEDAV_ABANDONED_UPLOAD_SECONDS", "3")]).await;
    let s3 = bucket(&server);
    let dir = "/odd &<>\"'%+ \u{e9}/";
    let (status, body) = send(dav(&server, "MKCOL", &encoded(dir))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let big = "big \"&<'%+ \u{fc}.bin";
    let names: Vec<&str> = ODD_NAMES.iter().copied().chain([big]).collect();
    let content = |name: &str| -> Vec<u8> {
        if name.starts_with("big") {
            // More than one part (8 MiB): a multipart upload.
            (0..(9u32 << 20)).map(|i| (i % 251) as u8).collect()
        } else {
            format!("content of {name}").into_bytes()
        }
    };
    for name in &names {
        let path = encoded(&format!("{dir}{name}"));
        let (status, body) = send(dav(&server, "PUT", &path).body(content(name))).await;
        assert_eq!(status, StatusCode::CREATED, "PUT {name}: {body}");
    }
    // The collection and its members as PROPFIND Depth 1 names them, decoded and sorted.
    let listing = |dir: &'static str| {
        let server = &server;
        async move {
            let (status, xml) = propfind(server, &encoded(dir), "1").await;
            assert_eq!(status, StatusCode::MULTI_STATUS, "{xml}");
            let mut found = hrefs(&xml);
            found.sort();
            found
        }
    };
    let listed = |dir: &str, prefix: &str| {
        let mut paths: Vec<String> = names.iter().map(|name| format!("{dir}{prefix}{name}")).collect();
        paths.push(dir.to_owned());
        paths.sort();
        paths
    };
    assert_eq!(listing(dir).await, listed(dir, ""));
    for name in &names {
        let response = client()
            .get(server.url(&encoded(&format!("{dir}{name}"))))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "GET {name}");
        assert_eq!(response.bytes().await.unwrap(), content(name), "GET {name}");
    }

    for name in &names {
        let destination = server.url(&encoded(&format!("{dir}moved {name}")));
        let moving =
            dav(&server, "MOVE", &encoded(&format!("{dir}{name}"))).header("destination", destination);
        let (status, body) = send(moving).await;
        assert_eq!(status, StatusCode::CREATED, "MOVE {name}: {body}");
    }
    assert_eq!(listing(dir).await, listed(dir, "moved "));
    for name in &names {
        let response = client()
            .get(server.url(&encoded(&format!("{dir}moved {name}"))))
            .send()
            .await
            .unwrap();
        assert_eq!(response.bytes().await.unwrap(), content(name), "GET moved {name}");
        let gone = client()
            .get(server.url(&encoded(&format!("{dir}{name}"))))
            .send()
            .await
            .unwrap();
        assert_eq!(gone.status(), StatusCode::NOT_FOUND, "{name} after its MOVE");
    }

    let renamed = "/renamed \"&<>'%+ \u{f8}/";
    let moving = dav(&server, "MOVE", &encoded(dir)).header("destination", server.url(&encoded(renamed)));
    let (status, body) = send(moving).await;
    assert_eq!(status, StatusCode::CREATED, "MOVE of the collection: {body}");
    assert_eq!(listing(renamed).await, listed(renamed, "moved "));
    let (status, _) = propfind(&server, &encoded(dir), "0").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the collection after its MOVE");
    let big_moved = client()
        .get(server.url(&encoded(&format!("{renamed}moved {big}"))))
        .send()
        .await
        .unwrap();
    assert_eq!(big_moved.bytes().await.unwrap(), content(big));

    for name in &names {
        let path = encoded(&format!("{renamed}moved {name}"));
        let (status, body) = send(dav(&server, "DELETE", &path)).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "DELETE moved {name}: {body}");
    }
    assert_eq!(listing(renamed).await, vec![renamed.to_owned()]);
    let left: Vec<String> = s3
        .list_all(&key(""), None)
        .await
        .unwrap()
        .objects
        .into_iter()
        .map(|o| o.key)
        .filter(|key| !key.contains(".kubedav"))
        .collect();
    assert_eq!(
        left,
        vec![key(&renamed[1..])],
        "the bucket holds the marker alone"
    );

    // An upload another tool left under such a name, that stored nothing: the sweep
    // (every 1.5 s here) finds it and aborts it by its exact key.
    let abandoned = key(&format!("{}left 'behind' \"&<>\".bin", &renamed[1..]));
    s3.start_upload(&abandoned).await.unwrap();
    let swept = common::eventually_async(Duration::from_secs(20), || async {
        s3.uploads(&key("")).await.is_ok_and(|u| u.is_empty())
    })
    .await;
    assert!(swept, "the upload left under {abandoned:?} was not aborted");
}

/// The S3 server's URL.
fn s3_endpoint(server: &Server) -> String {
    server.s3.as_ref().expect("a server on S3").endpoint()
}

mod s3_over_tls {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn all_in_one() {
        BACKEND
            .scope(
                Backend::S3OverTls,
                served_over_tls_with_a_private_ca(Mode::AllInOne),
            )
            .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn microservices() {
        BACKEND
            .scope(
                Backend::S3OverTls,
                served_over_tls_with_a_private_ca(Mode::Microservices),
            )
            .await
    }
}

on_s3!(
    foreign_objects_are_listed_and_served,
    collection_times_agree_at_every_depth,
    kept_answers_follow_changes,
    propfind_depth_one_costs_three_s3_requests,
    dead_properties_follow_copy_move_delete,
    store_down_gives_503_then_recovers,
    a_cut_upload_is_aborted_and_keeps_old_content,
    kill_during_multipart_upload_keeps_old_content,
    a_starting_fileio_leaves_uploads_in_flight_alone,
    kill_during_collection_move_keeps_the_source_whole,
    odd_names_come_back_exactly,
);
