//! Hostile input, table-driven, in both modes: every request of the table must get a
//! clear 4xx (a status from 400 to 499 and a body saying what was wrong), no answer may
//! carry data from outside the root or a file system path of the server, nothing
//! outside the root may be read or written, no upload may be left half-written, and
//! after each one the server must still answer normally.
//!
//! Add a case by adding a row to [`cases`]: a name, the raw bytes sent (no client
//! library normalises them), and the status expected (`ANY_4XX` when several are
//! acceptable).

#[macro_use]
mod common;

use common::{BACKEND, Backend, Mode, Server, client, names_in};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Any status from 400 to 499.
const ANY_4XX: u16 = 0;

/// One hostile request.
struct Case {
    name: &'static str,
    request: Vec<u8>,
    /// The status wanted, or [`ANY_4XX`].
    status: u16,
    /// Close the sending side after the request (a body that ends early).
    half_close: bool,
    /// Whether the status wanted is the last answer on the connection rather than the
    /// first (the first request was well framed; what follows it is not).
    last: bool,
    /// Whether the answer must say in its body what was wrong. The HTTP layer answers
    /// broken framing (unparseable heads, oversized headers) with the status alone.
    explained: bool,
}

fn case(name: &'static str, request: impl Into<Vec<u8>>, status: u16) -> Case {
    Case {
        name,
        request: request.into(),
        status,
        half_close: false,
        last: false,
        explained: true,
    }
}

/// A case of broken HTTP framing: the status alone is the answer.
fn framing(name: &'static str, request: impl Into<Vec<u8>>, status: u16) -> Case {
    Case {
        explained: false,
        ..case(name, request, status)
    }
}

/// A request with `headers` (each ending in CRLF) and `body`; Content-Length is set
/// from the body.
fn request(method: &str, target: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "{method} {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

fn propfind(body: &str) -> Vec<u8> {
    request(
        "PROPFIND",
        "/",
        "Depth: 0\r\nContent-Type: application/xml\r\n",
        body.as_bytes(),
    )
}

const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#;

fn cases() -> Vec<Case> {
    let billion_laughs = r#"<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<D:propfind xmlns:D="DAV:"><D:prop><D:displayname>&lol9;</D:displayname></D:prop></D:propfind>"#;
    let external_entity = r#"<?xml version="1.0"?>
<!DOCTYPE d [ <!ENTITY secret SYSTEM "file:///etc/passwd"> ]>
<D:propfind xmlns:D="DAV:"><D:prop><D:displayname>&secret;</D:displayname></D:prop></D:propfind>"#;
    let undefined_entity =
        r#"<D:propfind xmlns:D="DAV:"><D:prop><D:displayname>&secret;</D:displayname></D:prop></D:propfind>"#;
    let deep = format!(
        r#"<D:propfind xmlns:D="DAV:">{}{}</D:propfind>"#,
        "<D:prop>".repeat(20_000),
        "</D:prop>".repeat(20_000)
    );
    let wide = format!(
        r#"<D:propfind xmlns:D="DAV:"><D:prop>{}</D:prop></D:propfind>"#,
        "<D:displayname/>".repeat(200_000)
    );
    let ranges = format!(
        "Range: bytes={}\r\n",
        (0..5000)
            .map(|i| format!("{i}-{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let oversized_header = format!("X-Filler: {}\r\n", "a".repeat(100_000));
    let many_headers: String = (0..5000).map(|i| format!("X-H{i}: v\r\n")).collect();

    vec![
        // Path traversal, in every spelling.
        case("dot-dot", request("GET", "/../etc/passwd", "", b""), ANY_4XX),
        case("encoded dot-dot", request("GET", "/%2e%2e/%2e%2e/etc/passwd", "", b""), ANY_4XX),
        case("encoded slash", request("GET", "/a/..%2f..%2fetc%2fpasswd", "", b""), ANY_4XX),
        case("double-encoded dot-dot", request("GET", "/%252e%252e/%252e%252e/etc/passwd", "", b""), ANY_4XX),
        case("backslashes", request("GET", "/..\\..\\etc\\passwd", "", b""), ANY_4XX),
        case("encoded backslashes", request("GET", "/..%5c..%5cetc%5cpasswd", "", b""), ANY_4XX),
        case("overlong UTF-8 dot-dot", request("GET", "/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd", "", b""), 400),
        case("NUL in a name", request("GET", "/sentinel.txt%00.png", "", b""), 400),
        case("a control character in a new name", request("PUT", "/new%01name.txt", "", b"x"), 400),
        case("a carriage return in a new name", request("MKCOL", "/new%0Ddir", "", b""), 400),
        case("absolute URI to another host", request("GET", "http://evil.example/../../etc/passwd", "", b""), ANY_4XX),
        case("through a symlink out of the root", request("GET", "/escape/secret.txt", "", b""), ANY_4XX),
        case("a symlink out of the root", request("GET", "/secret-link", "", b""), ANY_4XX),
        case("PUT through a symlink out of the root", request("PUT", "/escape/new.txt", "", b"owned"), ANY_4XX),
        case("PUT over a symlink out of the root", request("PUT", "/secret-link", "", b"owned"), ANY_4XX),
        case("MOVE out of the root", request("MOVE", "/sentinel.txt", "Destination: /../moved.txt\r\n", b""), ANY_4XX),
        case("COPY into a symlink out of the root", request("COPY", "/sentinel.txt", "Destination: /escape/copied.txt\r\n", b""), ANY_4XX),
        // Names the file system cannot hold, or that cannot be addressed.
        case("invalid UTF-8 name", request("PUT", "/%ff%fe.txt", "", b"x"), 400),
        case("name over 255 bytes", request("PUT", &format!("/{}", "n".repeat(300)), "", b"x"), 400),
        case("path over 4096 bytes", request("GET", &format!("/{}", vec!["segment"; 700].join("/")), "", b""), 414),
        // XML bombs and abuse.
        case("billion laughs", propfind(billion_laughs), 400),
        case("external entity", propfind(external_entity), 400),
        case("undefined entity", propfind(undefined_entity), 400),
        case("XML nested 20,000 deep", propfind(&deep), 400),
        case("XML with 200,000 elements", propfind(&wide), ANY_4XX),
        case("XML over 1 MiB", propfind(&format!("<D:propfind xmlns:D=\"DAV:\"><!--{}--></D:propfind>", "x".repeat(2 << 20))), 413),
        case("not XML", propfind("{\"propfind\": \"allprop\"}"), 400),
        case("XML that is not UTF-8", request("PROPFIND", "/", "Depth: 0\r\n", b"<D:propfind xmlns:D=\"DAV:\">\xff\xfe</D:propfind>"), 400),
        case("LOCK with an external entity", request("LOCK", "/sentinel.txt", "", format!("<!DOCTYPE d [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>{LOCKINFO}").as_bytes()), 400),
        // Bogus WebDAV headers.
        case("Depth: 2", request("PROPFIND", "/", "Depth: 2\r\n", b""), 400),
        case("Depth: banana", request("PROPFIND", "/", "Depth: banana\r\n", b""), 400),
        case("Timeout: Second-abc", request("LOCK", "/sentinel.txt", "Timeout: Second-abc\r\n", LOCKINFO.as_bytes()), 400),
        case("Timeout: Second-99999999999999999999999", request("LOCK", "/sentinel.txt", "Timeout: Second-99999999999999999999999\r\n", LOCKINFO.as_bytes()), 400),
        case("If: unterminated list", request("PUT", "/sentinel.txt", "If: (<urn:uuid:broken\r\n", b"changed"), 400),
        case("If: no list", request("PUT", "/sentinel.txt", "If: <urn:uuid:a>\r\n", b"changed"), 400),
        case("If: tagged list without a resource", request("PUT", "/sentinel.txt", "If: <> (<urn:uuid:a>)\r\n", b"changed"), ANY_4XX),
        case("If: a token nobody holds", request("PUT", "/sentinel.txt", "If: (<urn:uuid:00000000-0000-0000-0000-000000000000>)\r\n", b"changed"), 412),
        case("Destination missing", request("MOVE", "/sentinel.txt", "", b""), 400),
        case("Destination not a URI", request("MOVE", "/sentinel.txt", "Destination: http://[::1\r\n", b""), 400),
        case("Destination with NUL", request("COPY", "/sentinel.txt", "Destination: /copy%00.txt\r\n", b""), 400),
        case("Overwrite: maybe", request("COPY", "/sentinel.txt", "Destination: /copy.txt\r\nOverwrite: maybe\r\n", b""), 400),
        case("Lock-Token without brackets", request("UNLOCK", "/sentinel.txt", "Lock-Token: urn:uuid:a\r\n", b""), 400),
        case("Lock-Token missing", request("UNLOCK", "/sentinel.txt", "", b""), 400),
        case("Lock-Token nobody holds", request("UNLOCK", "/sentinel.txt", "Lock-Token: <urn:uuid:00000000-0000-0000-0000-000000000000>\r\n", b""), 409),
        // Ranges.
        case("5,000 ranges in one Range header", request("GET", "/sentinel.txt", &ranges, b""), 416),
        // Oversized and inconsistent framing.
        framing("a 100 KB header", request("GET", "/sentinel.txt", &oversized_header, b""), 431),
        framing("5,000 headers", request("GET", "/sentinel.txt", &many_headers, b""), 431),
        framing("two different Content-Lengths", b"PUT /sentinel.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello".to_vec(), 400),
        Case {
            name: "a body longer than its Content-Length",
            request: b"PUT /extra.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello, and this is not a request\r\n\r\n".to_vec(),
            status: 400,
            half_close: false,
            explained: false,
            last: true,
        },
        framing("Content-Length not a number", b"PUT /sentinel.txt HTTP/1.1\r\nHost: test\r\nContent-Length: five\r\n\r\nhello".to_vec(), 400),
        framing("bad chunk size", b"PUT /sentinel.txt HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n".to_vec(), 400),
        Case {
            name: "a body shorter than its Content-Length",
            request: b"PUT /sentinel.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\nonly twenty-two bytes".to_vec(),
            status: 400,
            half_close: true,
            last: false,
            explained: true,
        },
        framing("garbage request line", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not HTTP\r\n\r\n".to_vec(), 400),
        framing("HTTP/1.1 without Host", b"GET /sentinel.txt HTTP/1.1\r\nConnection: close\r\n\r\n".to_vec(), 400),
    ]
}

/// Sends one case on its own connection; returns the first response's status and body.
async fn send(server: &Server, case: &Case) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    // A server may answer and close before reading everything (431, 413): a failed
    // write is fine, the answer is what counts.
    let _ = stream.write_all(&case.request).await;
    if case.half_close {
        let _ = stream.shutdown().await;
    }
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        let mut chunk = [0u8; 8192];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if !case.last && complete(&buf) {
                break;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "{}: no answer within 30 s", case.name);
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    if case.last
        && let Some(at) = text.rfind("HTTP/1.1 ")
    {
        text = text.split_off(at);
    }
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{}: not an HTTP response: {text:?}", case.name));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Whether `buf` holds a whole response with a Content-Length (the server may keep the
/// connection open after an error).
fn complete(buf: &[u8]) -> bool {
    let text = String::from_utf8_lossy(buf);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .is_some_and(|len| body.len() >= len)
}

/// What the directory holding the root holds, but for versitygw's own temporary
/// directory (`.sgwtmp`) when the root is a prefix of its bucket.
fn beside(parent: &std::path::Path) -> Vec<String> {
    let mut names = names_in(parent);
    names.retain(|name| name != ".sgwtmp");
    names
}

async fn hostile_requests_get_a_clear_4xx(mode: Mode) {
    let server = Server::start(mode).await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), b"top secret").unwrap();
    // A bucket has no symlinks: one planted in the S3 server's own directory is that
    // server's business, so those cases are the volume's alone.
    let symlinks = common::backend() == Backend::Volume;
    if symlinks {
        std::os::unix::fs::symlink(outside.path(), server.disk("escape")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), server.disk("secret-link")).unwrap();
    }
    std::fs::write(server.disk("sentinel.txt"), b"sentinel content").unwrap();
    let parent = server.root.parent().unwrap().to_path_buf();
    let beside_root = beside(&parent);

    let mut failures = Vec::new();
    for case in cases() {
        if !symlinks && case.name.contains("symlink") {
            continue;
        }
        let (status, body) = send(&server, &case).await;
        let wanted = if case.status == ANY_4XX {
            (400..500).contains(&status)
        } else {
            status == case.status
        };
        if !wanted {
            failures.push(format!(
                "{}: {status} (wanted {}) {body:.200}",
                case.name, case.status
            ));
        }
        if case.explained && body.trim().len() < 10 {
            failures.push(format!("{}: {status} without an explanation", case.name));
        }
        // Neither data from outside the root nor where anything is on the server's disk.
        let root_dir = server.root.to_string_lossy().trim_end_matches('/').to_owned();
        let outside_dir = outside.path().to_string_lossy().into_owned();
        for leak in ["top secret", "root:x:0:0", &root_dir, &outside_dir] {
            if body.contains(leak) {
                failures.push(format!("{}: the answer leaks {leak:?}", case.name));
            }
        }
        // Still healthy, and the sentinel untouched.
        let response = client().get(server.url("/sentinel.txt")).send().await;
        match response {
            Ok(r) if r.status() == 200 => {
                let content = r.bytes().await.unwrap();
                if content.as_ref() != b"sentinel content" {
                    failures.push(format!("{}: the sentinel changed to {content:?}", case.name));
                }
            }
            other => failures.push(format!(
                "{}: the server is no longer healthy: {other:?}",
                case.name
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(
        std::fs::read(server.disk("extra.txt")).unwrap(),
        b"hello",
        "exactly the declared length"
    );

    assert_eq!(
        std::fs::read(outside.path().join("secret.txt")).unwrap(),
        b"top secret"
    );
    assert_eq!(
        names_in(outside.path()),
        vec!["secret.txt"],
        "nothing written outside the root"
    );
    assert_eq!(beside(&parent), beside_root, "nothing written beside the root");
    let planted: &[&str] = if symlinks {
        &["escape", "extra.txt", "secret-link", "sentinel.txt"]
    } else {
        &["extra.txt", "sentinel.txt"]
    };
    // An upload cut off by the gateway ends in fileio a moment after the client's answer
    // (in microservices, once the cancelled stream reaches it): its temporary file goes
    // then.
    common::eventually(Duration::from_secs(5), || names_in(&server.root) == planted).await;
    assert_eq!(
        names_in(&server.root),
        planted,
        "no upload or temporary file left in the root (extra.txt is the well-framed PUT that \
         came before the garbage)"
    );
}

/// A client that dribbles its request head in, a header every 200 ms, is cut off by the
/// header read timeout (1 s here) long before it finishes, and the server keeps serving
/// everyone else meanwhile.
async fn slowloris_is_cut_off(mode: Mode) {
    let server = Server::start_with(mode, &["--header-read-timeout-seconds", "1"]).await;
    std::fs::write(server.disk("sentinel.txt"), b"sentinel content").unwrap();
    let started = tokio::time::Instant::now();
    let mut slow = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    slow.write_all(b"GET /sentinel.txt HTTP/1.1\r\nHost: test\r\n")
        .await
        .unwrap();
    let mut cut_off = None;
    for i in 0..100 {
        // The answer to an intact client while the slow one holds its connection.
        let response = client().get(server.url("/sentinel.txt")).send().await.unwrap();
        assert_eq!(response.status(), 200);
        tokio::time::sleep(Duration::from_millis(200)).await;
        if slow
            .write_all(format!("X-Slow-{i}: x\r\n").as_bytes())
            .await
            .is_err()
        {
            cut_off = Some(started.elapsed());
            break;
        }
        let mut byte = [0u8; 1];
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(1), slow.read(&mut byte)).await {
            // Closed (0) or answered (408): either way the head was never completed.
            assert!(n == 0 || byte[0] == b'H', "unexpected data from the server");
            cut_off = Some(started.elapsed());
            break;
        }
    }
    let after = cut_off.expect("the dribbling client was never cut off (20 s)");
    assert!(after < Duration::from_secs(5), "cut off only after {after:?}");
}

/// Sends one keep-alive GET on `stream` and reads its whole answer; returns the status.
async fn keep_alive_get(stream: &mut tokio::net::TcpStream) -> u16 {
    stream
        .write_all(b"GET /sentinel.txt HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !complete(&buf) {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed before answering");
        buf.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8_lossy(&buf)
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

/// Thousands of idle keep-alive connections are bounded: past `--max-connections` a new
/// one gets 503 with Retry-After at once, idle ones are closed after the header read
/// timeout, and then the server takes new connections again.
async fn idle_connections_are_bounded(mode: Mode) {
    const LIMIT: usize = 1000;
    let server = Server::start_with(
        mode,
        &[
            "--max-connections",
            "1000",
            "--max-connections-per-address",
            "1000",
            "--header-read-timeout-seconds",
            "2",
        ],
    )
    .await;
    std::fs::write(server.disk("sentinel.txt"), b"sentinel content").unwrap();
    let mut idle = Vec::new();
    for _ in 0..LIMIT {
        let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        assert_eq!(keep_alive_get(&mut stream).await, 200);
        idle.push(stream);
    }
    for _ in 0..200 {
        let (status, body) = send(
            &server,
            &case("one too many", request("GET", "/sentinel.txt", "", b""), 503),
        )
        .await;
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("limit of 1000 connections"), "{body}");
    }
    let raw = common::raw(server.addr, b"GET /sentinel.txt HTTP/1.1\r\nHost: t\r\n\r\n").await;
    assert_eq!(raw.status, 503);
    assert!(
        raw.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{raw:?}"
    );

    // The idle connections are closed by the server after the timeout.
    let started = tokio::time::Instant::now();
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(20), idle[0].read(&mut byte)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "an idle connection stayed open: {closed:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(idle);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let response = client().get(server.url("/sentinel.txt")).send().await.unwrap();
        if response.status() == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "connections never freed: {}",
            response.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client that asks for a large file and then stops reading does not pin memory: the
/// server sends what the socket buffers take, then waits, holding about one chunk.
async fn a_stalled_download_does_not_pin_memory(mode: Mode) {
    const SIZE: u64 = 512 << 20;
    let server = Server::start(mode).await;
    let file = std::fs::File::create(server.disk("big.bin")).unwrap();
    file.set_len(SIZE).unwrap();
    let before = server.memory_kib("VmRSS");
    let gateway_admin = server.edge_admin();
    let sent = || async move {
        common::metric_text(gateway_admin)
            .await
            .lines()
            .find_map(|l| l.strip_prefix("kubedav_http_response_body_bytes_total{method=\"GET\"} "))
            .map_or(0.0, |v| v.parse::<f64>().unwrap())
    };
    let mut stalled = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    stalled
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 1024];
    let n = stalled.read(&mut head).await.unwrap();
    assert!(
        head[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&head[..n])
    );
    // Wait until the server has stopped sending: the count holds still for half a second.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut last = sent().await;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = sent().await;
        if now == last {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never stopped sending"
        );
        last = now;
    }
    let growth_mib = server.memory_kib("VmRSS").saturating_sub(before) / 1024;
    assert!(
        last < (64 << 20) as f64,
        "{last} bytes sent to a client that reads nothing"
    );
    assert!(growth_mib < 32, "a stalled download pins {growth_mib} MiB");
    // Others are served meanwhile, and the stalled client can still resume.
    let response = client()
        .get(server.url("/big.bin"))
        .header("range", "bytes=0-9")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 206);
    let mut received = n as u64;
    let mut chunk = vec![0u8; 1 << 20];
    while received < SIZE {
        let read = stalled.read(&mut chunk).await.unwrap();
        assert!(read > 0, "the stalled download was dropped");
        received += read as u64;
    }
}

/// What a request that expands must be answered with.
enum Bounded {
    /// This status, or any 4xx for 0.
    Refused(u16),
    /// A success whose body is at most this many bytes.
    AnswerAtMost(usize),
}

/// Bodies small on the wire that expand as they are parsed or answered: each one gets a
/// clear 4xx, or an answer bounded by what it asked for; the gateway's peak memory stays
/// within 64 MiB of where it started; and the server stays healthy. Before these bounds,
/// the first case (38 KB) made a 60 MB answer and took the gateway from 11 to 210 MB.
async fn expanding_bodies_stay_bounded(mode: Mode) {
    let server = Server::start(mode).await;
    for i in 0..100 {
        std::fs::write(server.disk(&format!("f{i:03}.txt")), b"x").unwrap();
    }
    std::fs::write(server.disk("sentinel.txt"), b"sentinel content").unwrap();
    let baseline_kib = server.gateway_memory_kib("VmRSS");
    let long_uri = format!("urn:{}", "u".repeat(20_000));
    let prop = |inner: &str, xmlns: &str| {
        format!(
            r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:" {xmlns}><D:prop>{inner}</D:prop></D:propfind>"#
        )
    };
    let set = |inner: &str, xmlns: &str| {
        format!(
            r#"<D:propertyupdate xmlns:D="DAV:" {xmlns}><D:set><D:prop>{inner}</D:prop></D:set></D:propertyupdate>"#
        )
    };
    let many_prefixes: String = (0..1_000).map(|i| format!(r#" xmlns:p{i}="urn:p{i}""#)).collect();
    let one_uri_many_prefixes: String = (0..1_000).map(|i| format!(r#" xmlns:p{i}="urn:same""#)).collect();
    let many_attributes: String = (0..40_000).map(|i| format!(r#" a{i}="""#)).collect();
    let names_512: String = (0..512).map(|i| format!("<z:n{i:04}/>")).collect();
    let asked_bytes = 512 * "n0000".len();
    // Every response of a Depth 1 listing: the live properties (at most about 2 KiB)
    // and each asked name written twice, with a short prefix and tags.
    let depth1_bound = 101 * (2048 + 2 * asked_bytes + 512 * 16);
    let cases: Vec<(&str, &str, &str, String, Bounded)> = vec![
        (
            "a 20 KB namespace URI used by 3,000 elements",
            "PROPFIND",
            "0",
            prop(&"<z:a/>".repeat(3_000), &format!(r#"xmlns:z="{long_uri}""#)),
            Bounded::Refused(400),
        ),
        (
            "a 20 KB namespace URI on 3,000 attributes",
            "PROPPATCH",
            "0",
            set(
                &format!("<z:v>{}</z:v>", r#"<e z:a="1"/>"#.repeat(3_000)),
                &format!(r#"xmlns:z="{long_uri}""#),
            ),
            Bounded::Refused(400),
        ),
        (
            "1,000 namespace prefixes",
            "PROPFIND",
            "0",
            prop("<p1:a/>", &many_prefixes),
            Bounded::Refused(400),
        ),
        (
            "1,000 prefixes of one namespace",
            "PROPFIND",
            "0",
            prop("<p1:a/>", &one_uri_many_prefixes),
            Bounded::Refused(400),
        ),
        (
            "40,000 attributes on one element",
            "PROPFIND",
            "0",
            prop(&format!("<D:getetag{many_attributes}/>"), ""),
            Bounded::Refused(400),
        ),
        (
            "a 100 KB local name",
            "PROPFIND",
            "0",
            prop(&format!("<{}/>", "n".repeat(100_000)), ""),
            Bounded::Refused(400),
        ),
        (
            "20,000 property names",
            "PROPFIND",
            "1",
            prop(&"<D:x/>".repeat(20_000), ""),
            Bounded::Refused(400),
        ),
        (
            "512 names in a 1 KB namespace over a Depth 1 listing",
            "PROPFIND",
            "1",
            prop(&names_512, &format!(r#"xmlns:z="urn:{}""#, "k".repeat(1_000))),
            Bounded::AnswerAtMost(depth1_bound),
        ),
        (
            "3,000 names in a 300-byte namespace, echoed by PROPPATCH",
            "PROPPATCH",
            "0",
            set(
                &(0..3_000).map(|i| format!("<z:n{i}/>")).collect::<String>(),
                &format!(r#"xmlns:z="urn:{}""#, "q".repeat(300)),
            ),
            Bounded::AnswerAtMost(3_000 * 16 + 4096),
        ),
        (
            "a 900 KB property value",
            "PROPPATCH",
            "0",
            set(
                &format!("<z:v>{}</z:v>", "v".repeat(900_000)),
                r#"xmlns:z="urn:z""#,
            ),
            Bounded::Refused(0),
        ),
    ];
    let mut failures = Vec::new();
    for (name, method, depth, body, bounded) in cases {
        let target = if method == "PROPPATCH" {
            "/sentinel.txt"
        } else {
            "/"
        };
        let response = client()
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                server.url(target),
            )
            .header("depth", depth)
            .header("content-type", "application/xml")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let answer = response.bytes().await.unwrap();
        match bounded {
            Bounded::Refused(wanted) => {
                // 0: any 4xx, or a 207 whose property failed (the volume's limit on
                // dead properties), or 507.
                let refused = if wanted == 0 {
                    (400..500).contains(&status) || status == 507 || status == 207
                } else {
                    status == wanted
                };
                if !refused || answer.len() < 10 || answer.len() > 4096 {
                    failures.push(format!(
                        "{name}: {status} with {} bytes: {:.200}",
                        answer.len(),
                        String::from_utf8_lossy(&answer)
                    ));
                }
            }
            Bounded::AnswerAtMost(most) => {
                if status != 207 || answer.len() > most {
                    failures.push(format!(
                        "{name}: {status} with {} bytes (at most {most})",
                        answer.len()
                    ));
                }
            }
        }
        let healthy = client().get(server.url("/sentinel.txt")).send().await.unwrap();
        if healthy.status() != 200 {
            failures.push(format!("{name}: the server then answered {}", healthy.status()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let peak_mib = server.gateway_memory_kib("VmHWM").saturating_sub(baseline_kib) / 1024;
    assert!(peak_mib < 64, "the gateway's peak grew by {peak_mib} MiB");
}

/// The HTTP/2 connection preface and an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
/// The first bytes of a TLS ClientHello, and nothing more.
const TLS_START: &[u8] = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";

/// Whether the server closes `stream` within `within`.
async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    let mut sink = [0u8; 4096];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// Connections that never send a request head (silent, an HTTP/2 preface and SETTINGS,
/// the first bytes of a TLS handshake) hold no slot for longer than the header read
/// timeout, and one address cannot take every slot: other clients are served at once,
/// and every client within the timeout.
async fn silent_connections_cannot_shut_clients_out(mode: Mode) {
    let server = Server::start_with(
        mode,
        &[
            "--max-connections",
            "25",
            "--max-connections-per-address",
            "8",
            "--header-read-timeout-seconds",
            "5",
        ],
    )
    .await;
    std::fs::write(server.disk("sentinel.txt"), b"sentinel content").unwrap();
    let get = b"GET /sentinel.txt HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
    let ip = |last: u8| std::net::IpAddr::from([127, 0, 0, last]);
    // Attacking addresses, each with a kind of connection that never completes a
    // request head, as many as the server lets one address hold (the header timeout is
    // 5 s, long enough to open them all on a busy machine). The first bytes of a TLS
    // handshake are no HTTP/1 method: those connections are answered 400 and closed at
    // once, and hold nothing.
    let mut held = Vec::new();
    for (source, opening) in [
        (2u8, &b""[..]),
        (3, H2_PREFACE),
        (4, TLS_START),
        (5, b"GET /sentinel.txt HTTP/1.1\r\nHost"),
    ] {
        for _ in 0..8 {
            let mut stream = common::connect_from(ip(source), server.addr).await;
            stream.write_all(opening).await.unwrap();
            if opening == TLS_START {
                assert!(
                    closed_within(&mut stream, Duration::from_secs(4)).await,
                    "not HTTP: closed at once"
                );
            } else {
                held.push(stream);
            }
        }
        // What the server holds is what the test counts on before going on.
        let admin = server.edge_admin();
        let open = held.len() as f64;
        assert!(
            common::eventually_async(Duration::from_secs(4), || async {
                common::metric_sum(admin, "kubedav_http_connections").await == open
            })
            .await,
            "the server does not hold the {open} connections opened so far"
        );
        if opening != TLS_START {
            let refused = common::raw_from(ip(source), server.addr, get).await;
            assert_eq!(refused.status, 429, "address {source} is capped: {refused:?}");
            assert!(refused.head.to_ascii_lowercase().contains("retry-after"));
        }
    }
    // Every slot is taken now, so a newcomer is refused; but not for longer than the
    // timeout, because each of those connections is closed when its time is up.
    held.push(common::connect_from(ip(6), server.addr).await);
    let full = common::raw_from(ip(8), server.addr, get).await;
    assert_eq!(full.status, 503, "{full:?}");
    let started = tokio::time::Instant::now();
    for stream in &mut held {
        assert!(
            closed_within(stream, Duration::from_secs(12)).await,
            "a connection that sent no request head stayed open"
        );
    }
    let closed_after = started.elapsed();
    assert!(
        closed_after < Duration::from_secs(9),
        "closed only after {closed_after:?}"
    );
    let served = common::raw_from(ip(6), server.addr, get).await;
    assert_eq!(served.status, 200, "{served:?}");
    // A client from an address that holds connections of its own is served too.
    let mut own: Vec<_> = Vec::new();
    for _ in 0..7 {
        own.push(common::connect_from(ip(7), server.addr).await);
    }
    assert_eq!(common::raw_from(ip(7), server.addr, get).await.status, 200);
}

/// An HTTP/2 connection that has been answered and then sits idle is closed after the
/// keep-alive timeout (the header read timeout), with a GOAWAY first.
async fn idle_http2_connections_are_closed(mode: Mode) {
    let server = Server::start_with(mode, &["--header-read-timeout-seconds", "2"]).await;
    std::fs::write(server.disk("sentinel.txt"), b"sentinel content").unwrap();
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(H2_PREFACE).await.unwrap();
    // HEADERS on stream 1, END_STREAM | END_HEADERS: GET (static index 2), http (6),
    // path "/" (4), authority "test" as a literal of static name 1.
    let block = [0x82, 0x86, 0x84, 0x41, 0x04, b't', b'e', b's', b't'];
    let mut frame = vec![0, 0, block.len() as u8, 0x01, 0x05, 0, 0, 0, 1];
    frame.extend_from_slice(&block);
    stream.write_all(&frame).await.unwrap();
    // Read frames until the answer's DATA ends the stream.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let answered = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed before answering");
            buf.extend_from_slice(&chunk[..n]);
            let mut at = 0;
            while at + 9 <= buf.len() {
                let len =
                    (usize::from(buf[at]) << 16) | (usize::from(buf[at + 1]) << 8) | usize::from(buf[at + 2]);
                let (kind, flags, stream_id) = (buf[at + 3], buf[at + 4], buf[at + 8]);
                if at + 9 + len > buf.len() {
                    break;
                }
                if stream_id == 1 && flags & 0x1 != 0 && (kind == 0x0 || kind == 0x1) {
                    return;
                }
                at += 9 + len;
            }
        }
    })
    .await;
    assert!(answered.is_ok(), "no HTTP/2 answer");
    let started = tokio::time::Instant::now();
    assert!(
        closed_within(&mut stream, Duration::from_secs(10)).await,
        "an idle HTTP/2 connection stayed open"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "closed only after {:?}",
        started.elapsed()
    );
}

in_both_modes!(
    expanding_bodies_stay_bounded,
    silent_connections_cannot_shut_clients_out,
    idle_http2_connections_are_closed,
    hostile_requests_get_a_clear_4xx,
    a_stalled_download_does_not_pin_memory,
    slowloris_is_cut_off,
    idle_connections_are_bounded
);
on_s3!(
    expanding_bodies_stay_bounded,
    silent_connections_cannot_shut_clients_out,
    idle_http2_connections_are_closed,
    hostile_requests_get_a_clear_4xx,
    a_stalled_download_does_not_pin_memory,
    slowloris_is_cut_off,
    idle_connections_are_bounded
);
