//! The HTTP conformance suite, run against both modes: all-in-one, and gateway plus
//! fileio as separate processes talking gRPC: what needs a connection (request ids,
//! limits, raw paths, an upload cut off), concurrency, memory and changes on disk. What
//! only the handlers decide (GET and HEAD, conditional requests, ranges, statuses, the
//! listing) is tested in-process in `services/gateway/tests/http.rs`.

#[macro_use]
mod common;

use common::{BACKEND, Backend, Mode, Server, client, eventually, names_in, raw, raw_get};
use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use std::time::Duration;

async fn put(server: &Server, path: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
    client().put(server.url(path)).body(body).send().await.unwrap()
}

async fn get_bytes(server: &Server, path: &str) -> (StatusCode, Vec<u8>) {
    let response = client().get(server.url(path)).send().await.unwrap();
    (response.status(), response.bytes().await.unwrap().to_vec())
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
            .find_map(|line| {
                line.strip_prefix("kubedav_cache_lookups_total{cache=\"fileio_file\",result=\"hit\"} ")
            })
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

/// A kept file whose copy outlived the freshness bound is renewed when fileio's `Stat`
/// repeats its validator (on a volume: inode and settled change time; on a bucket: the
/// ETag), not read again: across several freshness periods of GETs, the gateway's
/// cache of files counts renewals and no miss. The file is 10 KiB, kept at its first
/// ask (larger ones are kept from their second: below).
async fn a_hot_copy_past_the_freshness_bound_is_revalidated(mode: Mode) {
    let server = Server::start_with(mode, &["--gateway-cache-freshness-ms", "100"]).await;
    let body = "0123456789".repeat(1_000);
    let status = client()
        .put(server.url("/hot.bin"))
        .body(body.clone())
        .send()
        .await
        .unwrap()
        .status();
    assert!(status.is_success(), "PUT: {status}");
    let gateway = match mode {
        Mode::AllInOne => "all",
        Mode::Microservices => "gateway",
    };
    let admin = server.admin_of(gateway);
    let lookups = |result: &'static str| async move {
        let needle = format!("kubedav_cache_lookups_total{{cache=\"gateway_file\",result=\"{result}\"}} ");
        common::metric_text(admin)
            .await
            .lines()
            .find_map(|line| {
                line.strip_prefix(needle.as_str())
                    .map(|v| v.parse::<f64>().unwrap())
            })
            .unwrap_or(0.0)
    };
    // GETs every 20 ms, spanning freshness periods, until `more` copies were renewed.
    let get_until_renewed = |more: f64| {
        let (server, body) = (&server, &body);
        async move {
            let target = lookups("revalidated").await + more;
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while lookups("revalidated").await < target {
                assert!(
                    std::time::Instant::now() < deadline,
                    "no kept copy was revalidated in 10 s"
                );
                let response = client().get(server.url("/hot.bin")).send().await.unwrap();
                assert_eq!(response.status(), StatusCode::OK);
                assert_eq!(&response.text().await.unwrap(), body);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    get_until_renewed(1.0).await;
    let misses = lookups("miss").await;
    get_until_renewed(3.0).await;
    assert_eq!(lookups("miss").await, misses, "the unchanged file was read again");
}

/// A file over 64 KiB (sent with sendfile) is sent as fileio gives it at its first ask
/// and kept from its second: a file read once costs no copy. Kept, it is served from
/// the copy, and a change on disk behind kubedav's back is seen within the freshness
/// bound (1 s).
async fn a_large_file_is_kept_from_its_second_ask(mode: Mode) {
    let server = Server::start(mode).await;
    let body: String = (0..512 * 1024)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    put(&server, "/large.bin", body.clone()).await;
    let gateway = match mode {
        Mode::AllInOne => "all",
        Mode::Microservices => "gateway",
    };
    let admin = server.admin_of(gateway);
    let hits = || async move {
        common::metric_text(admin)
            .await
            .lines()
            .find_map(|line| {
                line.strip_prefix("kubedav_cache_lookups_total{cache=\"gateway_file\",result=\"hit\"} ")
            })
            .map_or(0.0, |v| v.parse::<f64>().unwrap())
    };
    let before = hits().await;
    for ask in ["first", "second"] {
        let (status, bytes) = get_bytes(&server, "/large.bin").await;
        assert_eq!((status, bytes.len()), (StatusCode::OK, body.len()), "{ask} ask");
        assert!(bytes == body.as_bytes(), "{ask} ask: other bytes");
    }
    assert_eq!(hits().await, before, "a copy was kept at the first ask");
    let (status, bytes) = get_bytes(&server, "/large.bin").await;
    assert_eq!(status, StatusCode::OK);
    assert!(bytes == body.as_bytes(), "third ask: other bytes");
    assert_eq!(hits().await, before + 1.0, "the second ask kept no copy");

    let changed = "changed behind kubedav's back";
    std::fs::write(server.disk("large.bin"), changed).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while get_bytes(&server, "/large.bin").await.1 != changed.as_bytes() {
        assert!(
            std::time::Instant::now() < deadline,
            "the kept copy outlived a change on disk by 5 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `.kubedav`, the folder kubedav keeps its users' other records in, is no client's
/// path at any depth: a folder of that name already on the volume or in the bucket is
/// left out of every listing, cannot be addressed or written over by any method, and
/// keeps its bytes.
async fn the_reserved_area_is_no_ones_path(mode: Mode) {
    let server = Server::start_prepared(mode, &[], &|root| {
        std::fs::create_dir_all(root.join(".kubedav")).unwrap();
        std::fs::write(root.join(".kubedav/mine.txt"), b"an old folder's file").unwrap();
        std::fs::create_dir_all(root.join("sub/.kubedav")).unwrap();
        std::fs::write(root.join("sub/.kubedav/deep.txt"), b"deeper").unwrap();
        std::fs::write(root.join("sub/keep.txt"), b"kept").unwrap();
    })
    .await;
    for (collection, member) in [("/", "/sub/"), ("/sub/", "/sub/keep.txt")] {
        let listing = client()
            .request(Method::from_bytes(b"PROPFIND").unwrap(), server.url(collection))
            .header("depth", "1")
            .send()
            .await
            .unwrap();
        assert_eq!(listing.status(), StatusCode::MULTI_STATUS);
        let listing = listing.text().await.unwrap();
        assert!(listing.contains(member), "{listing}");
        assert!(!listing.contains(".kubedav"), "{listing}");
    }
    let html = client()
        .get(server.url("/sub/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // (The page's own script and style live under /.kubedav-ui/.)
    assert!(
        html.contains("keep.txt") && !html.contains("/sub/.kubedav") && !html.contains(">.kubedav"),
        "{html}"
    );

    let refused = |method: &'static str, path: &'static str, destination: Option<&'static str>| {
        let server = &server;
        async move {
            let mut request =
                client().request(Method::from_bytes(method.as_bytes()).unwrap(), server.url(path));
            if let Some(destination) = destination {
                request = request.header("destination", server.url(destination));
            }
            if method == "PUT" {
                request = request.body("new");
            }
            let response = request.send().await.unwrap();
            let status = response.status();
            let body = response.text().await.unwrap();
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "{method} {path} {destination:?}: {body}"
            );
            assert!(
                body.contains("'.kubedav'") && body.contains("reserved"),
                "{method} {path}: {body}"
            );
        }
    };
    refused("GET", "/.kubedav/mine.txt", None).await;
    refused("PROPFIND", "/.kubedav/", None).await;
    refused("PUT", "/.kubedav/mine.txt", None).await;
    refused("DELETE", "/.kubedav", None).await;
    refused("MKCOL", "/sub/.kubedav", None).await;
    refused("GET", "/%2ekubedav/mine.txt", None).await;
    refused("COPY", "/sub/keep.txt", Some("/.kubedav/mine.txt")).await;
    refused("MOVE", "/sub/keep.txt", Some("/.kubedav")).await;
    refused("LOCK", "/.kubedav/new.txt", None).await;
    assert_eq!(
        std::fs::read(server.disk(".kubedav/mine.txt")).unwrap(),
        b"an old folder's file"
    );
    assert_eq!(
        std::fs::read(server.disk("sub/.kubedav/deep.txt")).unwrap(),
        b"deeper"
    );
    assert_eq!(get_bytes(&server, "/sub/keep.txt").await.1, b"kept");
}

in_both_modes!(
    a_large_file_is_kept_from_its_second_ask,
    a_hot_copy_past_the_freshness_bound_is_revalidated,
    request_ids_and_limits,
    path_traversal_is_refused,
    aborted_upload_keeps_old_content,
    concurrent_puts_never_tear,
    busy_small_reads_all_succeed,
    one_gib_streams_in_bounded_memory,
    small_files_changed_on_disk_are_served_fresh,
    the_reserved_area_is_no_ones_path,
);
// On object storage too, but for what only a volume has: symlinks out of the root
// (path traversal, files changed behind the server's back) and temporary files (an
// aborted upload, which tests/objects.rs checks on S3 as a multipart upload).
on_s3!(
    the_reserved_area_is_no_ones_path,
    a_hot_copy_past_the_freshness_bound_is_revalidated,
    request_ids_and_limits,
    concurrent_puts_never_tear,
    busy_small_reads_all_succeed,
    one_gib_streams_in_bounded_memory,
);
microservices_only!(fileio_down_gives_503);
