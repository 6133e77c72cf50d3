//! The HTTP conformance suite, run against both modes: all-in-one, and gateway plus
//! fileio as separate processes talking gRPC.

#[macro_use]
mod common;

use common::{Mode, Server, client, eventually, names_in, raw, raw_get};
use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use std::time::Duration;

fn method(name: &str) -> Method {
    Method::from_bytes(name.as_bytes()).unwrap()
}

async fn put(server: &Server, path: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
    client().put(server.url(path)).body(body).send().await.unwrap()
}

async fn get_bytes(server: &Server, path: &str) -> (StatusCode, Vec<u8>) {
    let response = client().get(server.url(path)).send().await.unwrap();
    (response.status(), response.bytes().await.unwrap().to_vec())
}

async fn get_and_head(mode: Mode) {
    let server = Server::start(mode).await;
    std::fs::write(server.disk("hello.txt"), b"hello world").unwrap();
    std::fs::write(server.disk("pic.png"), [0x89, b'P', b'N', b'G']).unwrap();
    let response = client().get(server.url("/hello.txt")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/plain");
    assert_eq!(headers["content-length"], "11");
    assert_eq!(headers["accept-ranges"], "bytes");
    let etag = headers["etag"].to_str().unwrap().to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && !etag.starts_with("W/"),
        "strong etag: {etag}"
    );
    assert!(httpdate::parse_http_date(headers["last-modified"].to_str().unwrap()).is_ok());
    assert_eq!(response.bytes().await.unwrap().as_ref(), b"hello world");

    let head = client().head(server.url("/hello.txt")).send().await.unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(head.headers()["content-length"], "11");
    assert_eq!(head.headers()["etag"].to_str().unwrap(), etag);
    assert!(head.bytes().await.unwrap().is_empty());

    let png = client().get(server.url("/pic.png")).send().await.unwrap();
    assert_eq!(png.headers()["content-type"], "image/png");
    assert_eq!(
        png.headers()["x-content-type-options"],
        "nosniff",
        "files are never sniffed"
    );
    let (status, _) = get_bytes(&server, "/missing.txt").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = get_bytes(&server, "/hello.txt/").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a file addressed as a collection");

    // The etag changes with the content.
    put(&server, "/hello.txt", "changed").await;
    let again = client().head(server.url("/hello.txt")).send().await.unwrap();
    assert_ne!(again.headers()["etag"].to_str().unwrap(), etag);
}

async fn conditional_requests(mode: Mode) {
    let server = Server::start(mode).await;
    put(&server, "/c.txt", "conditional").await;
    let first = client().get(server.url("/c.txt")).send().await.unwrap();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    let modified = first.headers()["last-modified"].to_str().unwrap().to_owned();
    let status = |request: reqwest::RequestBuilder| async move { request.send().await.unwrap().status() };
    let c = client();
    let url = server.url("/c.txt");
    assert_eq!(
        status(c.get(&url).header("if-none-match", &etag)).await,
        StatusCode::NOT_MODIFIED
    );
    assert_eq!(
        status(
            c.head(&url)
                .header("if-none-match", "\"other\", ".to_owned() + &etag)
        )
        .await,
        StatusCode::NOT_MODIFIED
    );
    assert_eq!(
        status(c.get(&url).header("if-none-match", "\"other\"")).await,
        StatusCode::OK
    );
    assert_eq!(
        status(c.get(&url).header("if-modified-since", &modified)).await,
        StatusCode::NOT_MODIFIED
    );
    assert_eq!(
        status(
            c.get(&url)
                .header("if-modified-since", "Thu, 01 Jan 2015 00:00:00 GMT")
        )
        .await,
        StatusCode::OK
    );
    assert_eq!(
        status(c.get(&url).header("if-match", "\"nope\"")).await,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(
        status(c.get(&url).header("if-match", &etag)).await,
        StatusCode::OK
    );
    assert_eq!(
        status(
            c.get(&url)
                .header("if-unmodified-since", "Thu, 01 Jan 2015 00:00:00 GMT")
        )
        .await,
        StatusCode::PRECONDITION_FAILED
    );
    // Writes honour them too: a lost update is refused and leaves the content alone.
    assert_eq!(
        status(c.put(&url).header("if-match", "\"stale\"").body("x")).await,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(
        status(c.put(&url).header("if-none-match", "*").body("x")).await,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(get_bytes(&server, "/c.txt").await.1, b"conditional");
    assert_eq!(
        status(c.put(&url).header("if-match", &etag).body("v2")).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        status(
            c.put(server.url("/new.txt"))
                .header("if-none-match", "*")
                .body("n")
        )
        .await,
        StatusCode::CREATED
    );
    assert_eq!(
        status(c.delete(&url).header("if-match", &etag)).await,
        StatusCode::PRECONDITION_FAILED
    );
}

async fn byte_ranges(mode: Mode) {
    let server = Server::start(mode).await;
    let content: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    put(&server, "/r.bin", content.clone()).await;
    let c = client();
    let url = server.url("/r.bin");

    let single = c.get(&url).header("range", "bytes=10-19").send().await.unwrap();
    assert_eq!(single.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(single.headers()["content-range"], "bytes 10-19/1000");
    assert_eq!(single.bytes().await.unwrap().as_ref(), &content[10..20]);

    let suffix = c.get(&url).header("range", "bytes=-5").send().await.unwrap();
    assert_eq!(suffix.headers()["content-range"], "bytes 995-999/1000");
    assert_eq!(suffix.bytes().await.unwrap().as_ref(), &content[995..]);

    let open = c
        .get(&url)
        .header("range", "bytes=990-5000")
        .send()
        .await
        .unwrap();
    assert_eq!(open.headers()["content-range"], "bytes 990-999/1000");

    let multi = c
        .get(&url)
        .header("range", "bytes=0-3,500-503")
        .send()
        .await
        .unwrap();
    assert_eq!(multi.status(), StatusCode::PARTIAL_CONTENT);
    let content_type = multi.headers()["content-type"].to_str().unwrap().to_owned();
    let boundary = content_type
        .strip_prefix("multipart/byteranges; boundary=")
        .expect("multipart")
        .to_owned();
    let declared: usize = multi.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body = multi.bytes().await.unwrap();
    assert_eq!(body.len(), declared, "Content-Length matches the multipart body");
    let text = String::from_utf8_lossy(&body);
    assert_eq!(text.matches(&format!("--{boundary}\r\n")).count(), 2);
    assert!(
        text.contains("Content-Range: bytes 0-3/1000") && text.contains("Content-Range: bytes 500-503/1000")
    );
    assert!(text.ends_with(&format!("--{boundary}--\r\n")));
    let part = "Content-Range: bytes 500-503/1000\r\n\r\n".to_string();
    let at = body
        .windows(part.len())
        .position(|w| w == part.as_bytes())
        .unwrap()
        + part.len();
    assert_eq!(&body[at..at + 4], &content[500..504]);

    let unsatisfiable = c
        .get(&url)
        .header("range", "bytes=5000-6000")
        .send()
        .await
        .unwrap();
    assert_eq!(unsatisfiable.status(), StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(unsatisfiable.headers()["content-range"], "bytes */1000");

    let garbage = c.get(&url).header("range", "bytes=z-").send().await.unwrap();
    assert_eq!(
        garbage.status(),
        StatusCode::OK,
        "an unparseable Range is ignored"
    );

    let stale = c
        .get(&url)
        .header("range", "bytes=0-1")
        .header("if-range", "\"old\"")
        .send()
        .await
        .unwrap();
    assert_eq!(
        stale.status(),
        StatusCode::OK,
        "If-Range with another etag sends the whole file"
    );
    assert_eq!(stale.bytes().await.unwrap().len(), 1000);
}

async fn put_statuses(mode: Mode) {
    let server = Server::start(mode).await;
    assert_eq!(put(&server, "/p.txt", "one").await.status(), StatusCode::CREATED);
    let replaced = put(&server, "/p.txt", "two").await;
    assert_eq!(replaced.status(), StatusCode::NO_CONTENT);
    assert!(replaced.headers().contains_key("etag"));
    assert_eq!(get_bytes(&server, "/p.txt").await.1, b"two");
    let orphan = put(&server, "/no/such/parent.txt", "x").await;
    assert_eq!(orphan.status(), StatusCode::CONFLICT);
    assert!(
        orphan.text().await.unwrap().contains("MKCOL"),
        "the message says what to do"
    );
    assert_eq!(
        put(&server, "/", "x").await.status(),
        StatusCode::METHOD_NOT_ALLOWED
    );
    std::fs::create_dir(server.disk("dir")).unwrap();
    assert_eq!(
        put(&server, "/dir", "x").await.status(),
        StatusCode::CONFLICT,
        "a file cannot replace a collection"
    );
    let ranged = client()
        .put(server.url("/p.txt"))
        .header("content-range", "bytes 0-1/3")
        .body("ab")
        .send()
        .await;
    assert_eq!(ranged.unwrap().status(), StatusCode::BAD_REQUEST);
    assert_eq!(std::fs::read(server.disk("p.txt")).unwrap(), b"two");
    // An empty body makes an empty file.
    assert_eq!(put(&server, "/empty", "").await.status(), StatusCode::CREATED);
    assert_eq!(std::fs::metadata(server.disk("empty")).unwrap().len(), 0);
}

async fn mkcol_delete_options(mode: Mode) {
    let server = Server::start(mode).await;
    let c = client();
    let mkcol = |path: &str| c.request(method("MKCOL"), server.url(path));
    assert_eq!(mkcol("/d").send().await.unwrap().status(), StatusCode::CREATED);
    assert!(server.disk("d").is_dir());
    assert_eq!(
        mkcol("/d").send().await.unwrap().status(),
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(
        mkcol("/").send().await.unwrap().status(),
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(mkcol("/x/y").send().await.unwrap().status(), StatusCode::CONFLICT);
    let with_body = mkcol("/e")
        .header("content-type", "application/xml")
        .body("<x/>")
        .send()
        .await
        .unwrap();
    assert_eq!(with_body.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(!server.disk("e").exists());

    put(&server, "/d/f.txt", "f").await;
    assert_eq!(
        mkcol("/d/f.txt/sub").send().await.unwrap().status(),
        StatusCode::CONFLICT
    );
    assert_eq!(
        mkcol("/d/sub/").send().await.unwrap().status(),
        StatusCode::CREATED
    );
    put(&server, "/d/sub/deep.txt", "deep").await;
    assert_eq!(
        c.delete(server.url("/d/f.txt")).send().await.unwrap().status(),
        StatusCode::NO_CONTENT
    );
    assert!(!server.disk("d/f.txt").exists());
    assert_eq!(
        c.delete(server.url("/d/f.txt")).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        c.delete(server.url("/d/")).send().await.unwrap().status(),
        StatusCode::NO_CONTENT
    );
    assert!(
        !server.disk("d").exists(),
        "a collection goes with everything below it"
    );
    assert_eq!(
        c.delete(server.url("/")).send().await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    assert!(server.root.is_dir());

    let options = c.request(Method::OPTIONS, server.url("/")).send().await.unwrap();
    assert_eq!(options.status(), StatusCode::OK);
    assert!(
        options.headers()["dav"]
            .to_str()
            .unwrap()
            .split(',')
            .any(|c| c.trim() == "1")
    );
    let allow = options.headers()["allow"].to_str().unwrap().to_owned();
    for m in ["GET", "HEAD", "PUT", "DELETE", "MKCOL", "OPTIONS"] {
        assert!(allow.contains(m), "Allow lists {m}: {allow}");
    }
    let unknown = c.request(method("BREW"), server.url("/")).send().await.unwrap();
    assert_eq!(unknown.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(unknown.headers().contains_key("allow"));
}

async fn html_listing(mode: Mode) {
    let server = Server::start(mode).await;
    std::fs::create_dir(server.disk("zeta dir")).unwrap();
    std::fs::write(server.disk("zeta dir/inner.txt"), b"in").unwrap();
    std::fs::write(server.disk("b.txt"), vec![0u8; 2048]).unwrap();
    std::fs::write(server.disk("<a&\"q\">.txt"), b"x").unwrap();
    std::fs::write(server.disk("100% #1?.txt"), b"y").unwrap();
    let response = client().get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    let policy = response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        policy.contains("default-src 'none'") && !policy.contains("script"),
        "no script may run on a listing: {policy}"
    );
    let html = response.text().await.unwrap();
    assert!(
        html.contains("&lt;a&amp;&quot;q&quot;&gt;.txt"),
        "names are escaped"
    );
    assert!(!html.contains("<a&"), "no raw markup from names");
    assert!(
        html.contains("href=\"/100%25%20%231%3F.txt\""),
        "links are percent-encoded: {html}"
    );
    assert!(html.contains("2.0 KiB"), "sizes are shown");
    assert!(html.contains("GMT"), "dates are shown");
    let dir = html.find("zeta dir/").unwrap();
    let a = html.find("100% #1?.txt").unwrap();
    let b = html.find(">b.txt<").unwrap();
    assert!(dir < a && a < b, "collections first, then names in order");
    assert!(!html.contains("../"), "the root has no parent link");
    // Every link can be followed.
    for href in html.split("href=\"").skip(1).map(|s| &s[..s.find('"').unwrap()]) {
        let status = client().get(server.url(href)).send().await.unwrap().status();
        assert_eq!(status, StatusCode::OK, "{href}");
    }
    let sub = client()
        .get(server.url("/zeta%20dir/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(sub.contains("href=\"/\">../</a>"), "a parent link");
    assert!(sub.contains("href=\"/zeta%20dir/inner.txt\""));
}

async fn request_ids_and_limits(mode: Mode) {
    let server = Server::start_with(mode, &["--max-body-bytes", "1000", "--max-header-bytes", "16384"]).await;
    let c = client();
    let generated = c.get(server.url("/")).send().await.unwrap();
    let id = generated.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(id.len() >= 16, "an id is generated: {id}");
    let other = c.get(server.url("/")).send().await.unwrap();
    assert_ne!(
        other.headers()["x-request-id"].to_str().unwrap(),
        id,
        "ids are unique"
    );
    let echoed = c
        .get(server.url("/"))
        .header("x-request-id", "my-trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "my-trace-42");

    let big = put(&server, "/big.bin", vec![7u8; 1001]).await;
    assert_eq!(big.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(!server.disk("big.bin").exists());
    let chunked = futures_util::stream::iter((0..4).map(|_| Ok::<_, std::io::Error>(vec![1u8; 400])));
    let big = c
        .put(server.url("/chunked.bin"))
        .body(reqwest::Body::wrap_stream(chunked))
        .send()
        .await
        .unwrap();
    assert_eq!(
        big.status(),
        StatusCode::PAYLOAD_TOO_LARGE,
        "the limit holds without Content-Length too"
    );
    // fileio learns of the cut-off stream just after the gateway answers.
    let root = server.root.clone();
    let clean = eventually(Duration::from_secs(10), || names_in(&root).is_empty()).await;
    assert!(clean, "nothing was left behind: {:?}", names_in(&server.root));
    assert_eq!(
        put(&server, "/ok.bin", vec![7u8; 1000]).await.status(),
        StatusCode::CREATED
    );

    let huge_header = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(20_000)
    );
    assert_eq!(raw(server.addr, huge_header.as_bytes()).await.status, 431);
}

async fn path_traversal_is_refused(mode: Mode) {
    let server = Server::start(mode).await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), b"top secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), server.disk("escape")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), server.disk("secret-link")).unwrap();
    std::fs::write(server.disk("inside.txt"), b"inside").unwrap();
    std::os::unix::fs::symlink("inside.txt", server.disk("inner-link")).unwrap();

    for target in [
        "/../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/%2E%2E/etc/passwd",
        "/a/..%2f..%2fetc/passwd",
        "/..%2fetc%2fpasswd",
        "/inside.txt%00.png",
        "/%00",
        "/escape/secret.txt",
        "/secret-link",
        "/escape/",
    ] {
        let response = raw_get(server.addr, "GET", target).await;
        assert!(
            (400..500).contains(&response.status),
            "{target} -> {}",
            response.status
        );
        assert!(
            !String::from_utf8_lossy(&response.body).contains("top secret"),
            "{target} leaked"
        );
    }
    for target in ["/escape/new.txt", "/%2e%2e/new.txt", "/secret-link"] {
        let request = format!(
            "PUT {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 5\r\n\r\nowned"
        );
        let response = raw(server.addr, request.as_bytes()).await;
        assert!(
            (400..500).contains(&response.status),
            "PUT {target} -> {}",
            response.status
        );
    }
    for target in ["/escape/secret.txt", "/escape"] {
        let response = raw_get(server.addr, "DELETE", target).await;
        assert!(
            (400..500).contains(&response.status),
            "DELETE {target} -> {}",
            response.status
        );
    }
    let response = raw_get(server.addr, "MKCOL", "/escape/newdir").await;
    assert!(
        (400..500).contains(&response.status),
        "MKCOL through a symlink -> {}",
        response.status
    );
    assert_eq!(
        std::fs::read(outside.path().join("secret.txt")).unwrap(),
        b"top secret"
    );
    assert_eq!(
        names_in(outside.path()),
        vec!["secret.txt"],
        "nothing was created outside the root"
    );

    let long = format!("/{}", vec!["segment"; 700].join("/"));
    assert_eq!(raw_get(server.addr, "GET", &long).await.status, 414);
    let long_name = format!("/{}", "n".repeat(300));
    assert_eq!(raw_get(server.addr, "GET", &long_name).await.status, 400);
    // A symlink that stays inside the root is followed, and the listing hides the
    // ones that leave it.
    assert_eq!(get_bytes(&server, "/inner-link").await.1, b"inside");
    let html = client()
        .get(server.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("inner-link") && !html.contains("escape") && !html.contains("secret-link"),
        "{html}"
    );
}

async fn aborted_upload_keeps_old_content(mode: Mode) {
    let server = Server::start(mode).await;
    put(&server, "/keep.bin", "the old content").await;
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    use tokio::io::AsyncWriteExt;
    let head = "PUT /keep.bin HTTP/1.1\r\nHost: t\r\nContent-Length: 8388608\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let half = vec![b'N'; 4 * 1024 * 1024];
    stream.write_all(&half).await.unwrap();
    stream.flush().await.unwrap();
    // Wait until the upload has reached the volume, then cut the connection.
    let root = server.root.clone();
    let reached = eventually(Duration::from_secs(20), || {
        names_in(&root).iter().any(|n| n.starts_with(".kubedav-upload-"))
    })
    .await;
    assert!(reached, "the upload started");
    drop(stream);
    let root = server.root.clone();
    let cleaned = eventually(Duration::from_secs(20), || {
        names_in(&root) == vec!["keep.bin".to_owned()]
    })
    .await;
    assert!(
        cleaned,
        "the temporary file is removed: {:?}",
        names_in(&server.root)
    );
    assert_eq!(get_bytes(&server, "/keep.bin").await.1, b"the old content");
    let html = client()
        .get(server.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!html.contains("kubedav-upload"));
    let hidden = client()
        .get(server.url("/.kubedav-upload-0000000000000000"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        hidden.status(),
        StatusCode::BAD_REQUEST,
        "reserved names cannot be addressed"
    );
}

async fn concurrent_puts_never_tear(mode: Mode) {
    let server = Server::start(mode).await;
    let bodies: Vec<Vec<u8>> = (0..16u8)
        .map(|i| vec![b'a' + i; 512 * 1024 + i as usize])
        .collect();
    for round in 0..2 {
        let uploads = bodies.iter().cloned().map(|body| {
            let url = server.url("/contended.bin");
            tokio::spawn(async move { client().put(url).body(body).send().await.unwrap().status() })
        });
        for status in futures_util::future::join_all(uploads).await {
            let status = status.unwrap();
            assert!(
                status == StatusCode::CREATED || status == StatusCode::NO_CONTENT,
                "round {round}: {status}"
            );
        }
        for _ in 0..3 {
            let (_, body) = get_bytes(&server, "/contended.bin").await;
            assert!(
                bodies.contains(&body),
                "round {round}: a torn body of {} bytes",
                body.len()
            );
        }
    }
    assert_eq!(
        names_in(&server.root),
        vec!["contended.bin"],
        "no temporary file is left"
    );
}

/// Many clients reading small files at once, with conditional GETs among them (whose
/// answers end the read early) and range requests: every answer is right. In
/// microservices mode each early end resets an HTTP/2 stream between the gateway and
/// fileio; the connection must take any number of them (it once answered 507 "h2
/// protocol error" after about a thousand, failing every call in flight).
async fn busy_small_reads_all_succeed(mode: Mode) {
    let server = Server::start(mode).await;
    let body: Vec<u8> = (0..1024u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(server.disk("small.bin"), &body).unwrap();
    let first = client().get(server.url("/small.bin")).send().await.unwrap();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    let clients = 128;
    let per_client = 300;
    let readers = (0..clients).map(|c| {
        let url = server.url("/small.bin");
        let (etag, body) = (etag.clone(), body.clone());
        tokio::spawn(async move {
            let http = client();
            for i in 0..per_client {
                let response = match (c + i) % 8 {
                    0 => http
                        .get(&url)
                        .header("if-none-match", &etag)
                        .send()
                        .await
                        .unwrap(),
                    1 => http.get(&url).header("range", "bytes=0-99").send().await.unwrap(),
                    _ => http.get(&url).send().await.unwrap(),
                };
                let status = response.status();
                let got = response.bytes().await.unwrap();
                match (c + i) % 8 {
                    0 => assert_eq!(status, StatusCode::NOT_MODIFIED, "{got:?}"),
                    1 => {
                        assert_eq!(status, StatusCode::PARTIAL_CONTENT, "{got:?}");
                        assert_eq!(&got[..], &body[..100]);
                    }
                    _ => {
                        assert_eq!(status, StatusCode::OK, "{got:?}");
                        assert_eq!(&got[..], &body[..]);
                    }
                }
            }
        })
    });
    for reader in futures_util::future::join_all(readers).await {
        reader.unwrap();
    }
}

const GIB: u64 = 1 << 30;

async fn one_gib_streams_in_bounded_memory(mode: Mode) {
    let server = Server::start(mode).await;
    let before = server.memory_kib("VmRSS");
    let chunk = bytes::Bytes::from(vec![0x5a; 1 << 20]);
    let body =
        futures_util::stream::iter((0..GIB >> 20).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
    let response = client()
        .put(server.url("/big.bin"))
        .header("content-length", GIB)
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(std::fs::metadata(server.disk("big.bin")).unwrap().len(), GIB);
    let response = client().get(server.url("/big.bin")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut received = 0u64;
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        assert!(chunk.iter().all(|b| *b == 0x5a));
        received += chunk.len() as u64;
    }
    assert_eq!(received, GIB);
    let peak = server.memory_kib("VmHWM");
    let growth_mib = peak.saturating_sub(before) / 1024;
    eprintln!(
        "{mode:?}: RSS before {} MiB, peak {} MiB, growth {growth_mib} MiB",
        before / 1024,
        peak / 1024
    );
    assert!(
        growth_mib < 64,
        "serving 1 GiB each way grew memory by {growth_mib} MiB"
    );
}

/// Small files are served from fileio's cache, and a change made on disk behind
/// kubedav's back (rewritten in place, replaced, turned into a symlink out of the root,
/// removed) is seen by fileio's very next read. In microservices mode the gateway's own
/// copies are turned off here: they see such changes within their freshness bound
/// (`tests/leases.rs`), not at once.
async fn small_files_changed_on_disk_are_served_fresh(mode: Mode) {
    let server = Server::start_with(mode, &["--gateway-cache-mib", "0"]).await;
    let fileio_admin = server
        .admin
        .iter()
        .find(|(name, _)| matches!(*name, "all" | "fileio"))
        .map(|(_, addr)| *addr)
        .unwrap();
    let hits = || async move {
        common::metric_text(fileio_admin)
            .await
            .lines()
            .find_map(|line| line.strip_prefix("kubedav_fileio_file_cache_lookups_total{result=\"hit\"} "))
            .map_or(0.0, |v| v.parse::<f64>().unwrap())
    };
    let path = server.disk("page.html");
    std::fs::write(&path, b"version one").unwrap();
    // A copy is kept once the file's last change is a second old: GET until one is served.
    let before = hits().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while hits().await == before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no GET was served from the cache"
        );
        assert_eq!(get_bytes(&server, "/page.html").await.1, b"version one");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let etag = client()
        .head(server.url("/page.html"))
        .send()
        .await
        .unwrap()
        .headers()["etag"]
        .clone();

    // Rewritten in place, same length.
    std::fs::write(&path, b"version two").unwrap();
    assert_eq!(
        get_bytes(&server, "/page.html").await,
        (StatusCode::OK, b"version two".to_vec())
    );
    let head = client().head(server.url("/page.html")).send().await.unwrap();
    assert_ne!(head.headers()["etag"], etag);

    // Replaced by rename.
    std::fs::write(server.disk("next.tmp"), b"version 3").unwrap();
    std::fs::rename(server.disk("next.tmp"), &path).unwrap();
    assert_eq!(
        get_bytes(&server, "/page.html").await,
        (StatusCode::OK, b"version 3".to_vec())
    );

    // Turned into a symlink out of the root: never served.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"version 3").unwrap();
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), &path).unwrap();
    let (status, body) = get_bytes(&server, "/page.html").await;
    assert!(status.is_client_error(), "{status}");
    assert_ne!(body, b"version 3");

    std::fs::remove_file(&path).unwrap();
    assert_eq!(get_bytes(&server, "/page.html").await.0, StatusCode::NOT_FOUND);
}

/// Without fileio the gateway says 503 with Retry-After, never hangs.
async fn fileio_down_gives_503() {
    let mut server = Server::start(Mode::Microservices).await;
    put(&server, "/x.txt", "x").await;
    server.process("fileio").child.kill().await.unwrap();
    let response = tokio::time::timeout(Duration::from_secs(20), client().get(server.url("/x.txt")).send())
        .await
        .expect("an answer, not a hang")
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
}

in_both_modes!(
    get_and_head,
    conditional_requests,
    byte_ranges,
    put_statuses,
    mkcol_delete_options,
    html_listing,
    request_ids_and_limits,
    path_traversal_is_refused,
    aborted_upload_keeps_old_content,
    concurrent_puts_never_tear,
    busy_small_reads_all_succeed,
    one_gib_streams_in_bounded_memory,
    small_files_changed_on_disk_are_served_fresh,
);
microservices_only!(fileio_down_gives_503);
