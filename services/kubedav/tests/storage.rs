//! Storage faults on purpose, on real tmpfs mounts, in both modes: a full volume and a
//! read-only one. Mounting needs root, which CI has; elsewhere these tests say they were
//! skipped (and fail under `CI=true`, so CI can never skip them silently).

#[macro_use]
mod common;

use common::{Mode, Server, client, names_in};
use reqwest::{Method, StatusCode};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether this process may mount file systems; outside CI, a test without root says it
/// was skipped.
fn may_mount(test: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} needs root to mount a tmpfs, and CI must run it"
    );
    eprintln!("{test}: SKIPPED, mounting a tmpfs needs root");
    false
}

/// A tmpfs of `size` mounted on the (empty) root before kubedav starts.
fn tmpfs(size: &'static str) -> impl Fn(&Path) {
    move |root| {
        mount(
            &["-t", "tmpfs", "-o", &format!("size={size},mode=0755"), "tmpfs"],
            root,
        )
    }
}

fn mount(args: &[&str], target: &Path) {
    let status = Command::new("mount")
        .args(args)
        .arg(target)
        .status()
        .expect("mount runs");
    assert!(status.success(), "mount {args:?} {} failed", target.display());
}

/// Detaches the mount when the test ends, whatever still holds it open.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

async fn send(
    server: &Server,
    method: &str,
    path: &str,
    body: impl Into<reqwest::Body>,
) -> (StatusCode, String) {
    let response = client()
        .request(Method::from_bytes(method.as_bytes()).unwrap(), server.url(path))
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = response.status();
    (status, response.text().await.unwrap_or_default())
}

async fn content(server: &Server, path: &str) -> String {
    let response = client().get(server.url(path)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "GET {path}");
    response.text().await.unwrap()
}

/// A 16 MiB body sent without a declared size (chunked), so the volume fills while it
/// is written.
fn chunked(megabytes: usize) -> reqwest::Body {
    let chunks = (0..megabytes).map(|_| Ok::<_, std::io::Error>(vec![b'n'; 1 << 20]));
    reqwest::Body::wrap_stream(futures_util::stream::iter(chunks))
}

/// On a full volume an upload gets 507 Insufficient Storage saying so, whether its size
/// was declared (refused before its body is read) or not (refused when the disk fills);
/// the file it would have replaced keeps its old content and no temporary file remains.
/// Once there is room again, the same upload succeeds.
async fn a_full_volume_gives_507_and_keeps_the_old_content(mode: Mode) {
    if !may_mount("a_full_volume_gives_507_and_keeps_the_old_content") {
        return;
    }
    let server = Server::start_prepared(mode, &[], &tmpfs("8m")).await;
    let _mounted = Mounted(server.root.clone());
    let old = "old content";
    assert_eq!(send(&server, "PUT", "/doc.txt", old).await.0, StatusCode::CREATED);

    let intact = |what: &str, expected: &[&str]| {
        assert_eq!(
            names_in(&server.root),
            expected,
            "{what}: no temporary file is left"
        );
    };
    let (status, body) = send(&server, "PUT", "/doc.txt", vec![b'n'; 16 << 20]).await;
    assert_eq!(
        status,
        StatusCode::INSUFFICIENT_STORAGE,
        "declared 16 MiB on 8 MiB: {body}"
    );
    assert!(body.contains("no room for the 16777216 bytes"), "{body}");
    assert_eq!(content(&server, "/doc.txt").await, old);
    intact("declared", &["doc.txt"]);

    let (status, body) = send(&server, "PUT", "/doc.txt", chunked(16)).await;
    assert_eq!(
        status,
        StatusCode::INSUFFICIENT_STORAGE,
        "chunked 16 MiB on 8 MiB: {body}"
    );
    assert!(body.contains("full"), "{body}");
    assert_eq!(content(&server, "/doc.txt").await, old);
    intact("chunked", &["doc.txt"]);

    // Filled to the last byte by someone else: even a tiny upload cannot land.
    let filler = server.root.join("filler");
    let mut file = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 64 << 10];
    while std::io::Write::write_all(&mut file, &block).is_ok() {}
    drop(file);
    let (status, body) = send(&server, "PUT", "/doc.txt", "new").await;
    assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE, "a full disk: {body}");
    let (status, _) = send(&server, "PUT", "/other.txt", chunked(1)).await;
    assert_eq!(
        status,
        StatusCode::INSUFFICIENT_STORAGE,
        "a new file on a full disk"
    );
    assert_eq!(content(&server, "/doc.txt").await, old);
    intact("full", &["doc.txt", "filler"]);

    std::fs::remove_file(&filler).unwrap();
    assert_eq!(
        send(&server, "PUT", "/doc.txt", "new content").await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(content(&server, "/doc.txt").await, "new content");
    intact("room again", &["doc.txt"]);
}

/// A volume remounted read-only keeps serving reads (GET, PROPFIND with dead
/// properties) and readiness, refuses every write with 403 saying the volume is
/// read-only, changes nothing, and a fileio restarted on it starts and serves reads.
async fn a_read_only_volume_serves_reads_and_refuses_writes(mode: Mode) {
    if !may_mount("a_read_only_volume_serves_reads_and_refuses_writes") {
        return;
    }
    let mut server = Server::start_prepared(mode, &[], &tmpfs("8m")).await;
    let _mounted = Mounted(server.root.clone());
    assert_eq!(
        send(&server, "PUT", "/a.txt", "kept").await.0,
        StatusCode::CREATED
    );
    assert_eq!(send(&server, "MKCOL", "/dir", "").await.0, StatusCode::CREATED);
    let patch = r#"<D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:colour>blue</Z:colour></D:prop></D:set></D:propertyupdate>"#;
    assert_eq!(
        send(&server, "PROPPATCH", "/a.txt", patch).await.0,
        StatusCode::MULTI_STATUS
    );

    mount(&["-o", "remount,ro"], &server.root);
    let reads = |server: &Server| {
        let server_url = server.url("/");
        async move {
            let response = client()
                .request(Method::from_bytes(b"PROPFIND").unwrap(), server_url)
                .header("depth", "1")
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::MULTI_STATUS);
            let listing = response.text().await.unwrap();
            assert!(
                listing.contains("/a.txt") && listing.contains("/dir/"),
                "{listing}"
            );
            assert!(listing.contains("blue"), "dead properties are read: {listing}");
        }
    };
    reads(&server).await;
    assert_eq!(content(&server, "/a.txt").await, "kept");

    let copy_to = |method: &'static str| {
        client()
            .request(
                Method::from_bytes(method.as_bytes()).unwrap(),
                server.url("/a.txt"),
            )
            .header("destination", server.url("/b.txt"))
    };
    for (what, request) in [
        (
            "PUT over a file",
            client().put(server.url("/a.txt")).body("changed"),
        ),
        (
            "PUT of a new file",
            client().put(server.url("/new.txt")).body("new"),
        ),
        (
            "MKCOL",
            client().request(Method::from_bytes(b"MKCOL").unwrap(), server.url("/d2")),
        ),
        ("DELETE", client().delete(server.url("/a.txt"))),
        (
            "PROPPATCH",
            client()
                .request(Method::from_bytes(b"PROPPATCH").unwrap(), server.url("/a.txt"))
                .body(patch),
        ),
        ("COPY", copy_to("COPY")),
        ("MOVE", copy_to("MOVE")),
    ] {
        let response = request.send().await.unwrap();
        let status = response.status();
        let body = response.text().await.unwrap();
        assert_eq!(status, StatusCode::FORBIDDEN, "{what}: {body}");
        assert!(body.contains("read-only"), "{what} says why: {body}");
    }
    assert_eq!(content(&server, "/a.txt").await, "kept");
    assert_eq!(names_in(&server.root), ["a.txt", "dir"], "nothing changed");

    let (edge, service) = match mode {
        Mode::AllInOne => ("all", "all"),
        Mode::Microservices => ("gateway", "fileio"),
    };
    let ready = |server: &Server| {
        let admin = server.admin_of(edge);
        async move {
            let response = client()
                .get(format!("http://{admin}/readyz"))
                .send()
                .await
                .unwrap();
            response.status()
        }
    };
    assert_eq!(
        ready(&server).await,
        StatusCode::OK,
        "a read-only volume still serves"
    );
    server.process(service).restart().await;
    assert!(
        common::eventually_async(std::time::Duration::from_secs(10), || async {
            ready(&server).await == StatusCode::OK
        })
        .await,
        "a fileio started on a read-only volume becomes ready"
    );
    reads(&server).await;
    assert_eq!(content(&server, "/a.txt").await, "kept");
}

/// A COPY with `Overwrite: T` that fails (here: the volume fills) leaves the
/// destination as it was, for a collection and for a file, with nothing half-copied
/// left behind; with room, the same COPY replaces the destination whole.
async fn a_failed_copy_keeps_the_destination(mode: Mode) {
    if !may_mount("a_failed_copy_keeps_the_destination") {
        return;
    }
    let server = Server::start_prepared(mode, &[], &tmpfs("8m")).await;
    let _mounted = Mounted(server.root.clone());
    std::fs::create_dir(server.disk("src")).unwrap();
    for name in ["a.bin", "b.bin"] {
        std::fs::write(server.disk(&format!("src/{name}")), vec![b's'; 3 << 20]).unwrap();
    }
    std::fs::create_dir(server.disk("dst")).unwrap();
    std::fs::write(server.disk("dst/keep.txt"), b"old").unwrap();
    let copy = |from: &str, to: &str| {
        client()
            .request(Method::from_bytes(b"COPY").unwrap(), server.url(from))
            .header("destination", server.url(to))
            .header("overwrite", "T")
            .send()
    };
    let failed = copy("/src/", "/dst/").await.unwrap();
    assert!(
        matches!(failed.status().as_u16(), 207 | 507),
        "6 MiB into 2 MiB of room: {}",
        failed.status()
    );
    assert_eq!(content(&server, "/dst/keep.txt").await, "old");
    assert_eq!(names_in(&server.disk("dst")), ["keep.txt"]);
    assert_eq!(
        names_in(&server.root),
        ["dst", "src"],
        "nothing half-copied is left"
    );

    let failed = copy("/src/a.bin", "/dst/keep.txt").await.unwrap();
    assert_eq!(failed.status(), StatusCode::INSUFFICIENT_STORAGE);
    assert_eq!(content(&server, "/dst/keep.txt").await, "old");
    assert_eq!(names_in(&server.disk("dst")), ["keep.txt"]);

    std::fs::remove_file(server.disk("src/b.bin")).unwrap();
    assert_eq!(
        copy("/src/", "/dst/").await.unwrap().status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(names_in(&server.disk("dst")), ["a.bin"], "replaced whole");
    assert_eq!(names_in(&server.root), ["dst", "src"]);
}

/// The processes that serve the volume, and that talk HTTP to clients.
const VOLUME: &[&str] = &["fileio", "all"];
const EDGE: &[&str] = &["gateway", "all"];

/// The calls to `calls` (a comma-separated list of system calls, and `mkdirat` and
/// `accept4`) that the first of the server's processes named in `names` makes while
/// `act` runs, seen by strace attached to all its threads.
async fn traced_during(
    server: &Server,
    names: &[&str],
    calls: &str,
    act: impl std::future::Future<Output = ()>,
) -> Vec<String> {
    let fileio = server
        .processes
        .iter()
        .find(|p| names.contains(&p.name))
        .unwrap_or_else(|| panic!("no process is one of {names:?}"));
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut strace = tokio::process::Command::new("strace")
        .args(["-f", "-qq", "-e", &format!("trace={calls},mkdirat,accept4"), "-o"])
        .arg(out.path())
        .args(["-p", &fileio.pid().to_string()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run strace ({e}): `make test` installs it"));
    // strace says nothing when attached with -qq: a traced MKCOL shows it is, by its
    // mkdirat where the volume is, or its connection's accept4 at the edge.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        assert!(send(server, "MKCOL", "/probe-attached/", "").await.0.is_success());
        assert!(
            send(server, "DELETE", "/probe-attached/", "")
                .await
                .0
                .is_success()
        );
        let seen = std::fs::read_to_string(out.path()).unwrap_or_default();
        if seen.contains("mkdirat(") || seen.contains("accept4(") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "strace never attached to {}",
            fileio.name
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let before = std::fs::read_to_string(out.path())
        .unwrap_or_default()
        .lines()
        .count();
    act.await;
    // A call the client saw finish may not be written out whole yet: strace writes a
    // call's name and arguments when it starts and its result when it returns (on a
    // later `resumed>` line if another thread's call came between). Killed before
    // that, it would lose the result.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !all_resumed(&std::fs::read_to_string(out.path()).unwrap_or_default())
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    strace.start_kill().unwrap();
    let _ = strace.wait().await;
    let traced = std::fs::read_to_string(out.path()).unwrap_or_default();
    traced.lines().skip(before).map(str::to_owned).collect()
}

/// `--durability fsync` (the default) makes a PUT and a MKCOL durable before answering
/// them: the file's data is fdatasync'ed and the directory fsync'ed. `--durability none`
/// answers them without a sync call, and what was written is served all the same.
async fn durability_says_what_a_change_waits_for(mode: Mode) {
    for (durability, wants_syncs) in [("fsync", true), ("none", false)] {
        let server = Server::start_full(mode, &[], &[("KUBEDAV_DURABILITY", durability)]).await;
        let syncs = traced_during(&server, VOLUME, "fsync,fdatasync", async {
            assert_eq!(
                send(&server, "PUT", "/d.txt", "durable?").await.0,
                StatusCode::CREATED
            );
            assert_eq!(send(&server, "MKCOL", "/d/", "").await.0, StatusCode::CREATED);
        })
        .await;
        let calls = |name: &str| syncs.iter().filter(|l| l.contains(&format!("{name}("))).count();
        if wants_syncs {
            assert!(
                calls("fdatasync") >= 1,
                "{mode:?} {durability}: the PUT's data was not synced: {syncs:?}"
            );
            assert!(
                calls("fsync") >= 2,
                "{mode:?} {durability}: the directories were not synced: {syncs:?}"
            );
        } else {
            assert_eq!(
                calls("fdatasync") + calls("fsync"),
                0,
                "{mode:?} {durability}: sync calls were made: {syncs:?}"
            );
        }
        assert_eq!(content(&server, "/d.txt").await, "durable?");
    }
}

/// A file of `len` bytes that no window of a few bytes repeats in: a byte sent from the
/// wrong offset shows.
fn patterned(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_u32;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect()
}

/// PUTs `data` at `path`, a new file.
async fn put_bytes(server: &Server, path: &str, data: &[u8]) {
    let put = client()
        .put(server.url(path))
        .body(data.to_vec())
        .send()
        .await
        .unwrap_or_else(|e| panic!("PUT {path}: {e}"));
    assert_eq!(put.status(), StatusCode::CREATED, "PUT {path}");
}

async fn get_bytes(
    server: &Server,
    path: &str,
    range: Option<&str>,
) -> (StatusCode, reqwest::header::HeaderMap, Vec<u8>) {
    let mut request = client().get(server.url(path));
    if let Some(range) = range {
        request = request.header("range", range);
    }
    let response = request.send().await.unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, response.bytes().await.unwrap().to_vec())
}

/// A large file reaches the client byte for byte however it is asked for: whole, one
/// range, several ranges (multipart), over HTTP/2, and after its pages left the page
/// cache. In one process over a volume, the HTTP/1 bodies are sent from the page cache
/// with sendfile (docs/benchmarks.md): strace on the process shows the calls.
async fn large_files_arrive_whole_however_they_are_asked_for(mode: Mode) {
    let server = Server::start(mode).await;
    // Past one mapping (8 MiB) and not a whole number of pages.
    let data = patterned((9 << 20) + 4_321);
    put_bytes(&server, "/big.bin", &data).await;

    let traced = traced_during(&server, EDGE, "sendfile", async {
        // Sent from the page cache: the pages the PUT left there may have been reclaimed
        // since on a busy machine (those not cached are read, as they must be).
        if common::backend() == common::Backend::Volume {
            std::fs::read(server.disk("big.bin")).unwrap();
        }
        let (status, _, body) = get_bytes(&server, "/big.bin", None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            body == data,
            "the whole file differs ({} of {} bytes)",
            body.len(),
            data.len()
        );
    })
    .await;
    let sent = sent_with_sendfile(&traced);
    if mode == Mode::AllInOne && common::backend() == common::Backend::Volume {
        assert_eq!(
            sent,
            data.len(),
            "the body was not sent with sendfile: {traced:?}"
        );
    } else {
        assert_eq!(
            sent, 0,
            "{mode:?}: the gateway has no file to send from: {traced:?}"
        );
    }

    let (status, headers, body) = get_bytes(&server, "/big.bin", Some("bytes=4095-8388700")).await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        headers["content-range"],
        format!("bytes 4095-8388700/{}", data.len()).as_str()
    );
    assert!(body == data[4095..=8_388_700], "the range differs");

    let (status, headers, body) = get_bytes(&server, "/big.bin", Some("bytes=0-99999,9000000-")).await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    let boundary = headers["content-type"]
        .to_str()
        .unwrap()
        .split("boundary=")
        .nth(1)
        .unwrap()
        .to_owned();
    let first = find(&body, &data[..100_000]).expect("the first range is in the multipart body");
    let second = find(&body, &data[9_000_000..]).expect("the second range is in the multipart body");
    assert!(first < second);
    assert!(body.ends_with(format!("--{boundary}--\r\n").as_bytes()));

    let h2 = get_over_http2(&server, "/big.bin").await;
    assert!(h2 == data, "the file over HTTP/2 differs ({} bytes)", h2.len());

    if common::backend() == common::Backend::Volume {
        // Out of the page cache: the chunks come from the disk, read the ordinary way,
        // or within a second of being found cached (kubedav_zerocopy) by sendfile
        // from the disk; the bytes are the same either way.
        let file = std::fs::File::open(server.disk("big.bin")).unwrap();
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        let (status, _, body) = get_bytes(&server, "/big.bin", None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(body == data, "the file read back from the disk differs");
    }
}

/// Whether every call strace began writing has its result written too.
fn all_resumed(traced: &str) -> bool {
    (traced.is_empty() || traced.ends_with('\n'))
        && traced.matches("<unfinished ...>").count() <= traced.matches(" resumed>").count()
}

/// How many bytes the traced `sendfile` calls sent.
fn sent_with_sendfile(traced: &[String]) -> usize {
    traced
        .iter()
        .filter(|l| l.contains("sendfile"))
        .filter_map(|l| l.rsplit("= ").next()?.trim().parse::<usize>().ok())
        .sum()
}

/// A file the gateway keeps (over 64 KiB, at most 1 MiB) is sent with sendfile, with no
/// copy per request: in microservices from the gateway's kept copy (an unnamed file in
/// its cache directory), in one process over a volume from the page cache. Over HTTP/2, which reads
/// the kept copy to frame it, it arrives the same.
async fn kept_files_are_sent_with_sendfile_too(mode: Mode) {
    let server = Server::start(mode).await;
    let data = patterned(300_001);
    put_bytes(&server, "/kept.bin", &data).await;
    // The first GET reads the file whole and keeps it; the next is answered from the copy.
    assert!(get_bytes(&server, "/kept.bin", None).await.2 == data);
    let traced = traced_during(&server, EDGE, "sendfile", async {
        let (status, _, body) = get_bytes(&server, "/kept.bin", None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(body == data, "the kept file differs");
    })
    .await;
    assert_eq!(
        sent_with_sendfile(&traced),
        data.len(),
        "{mode:?}: the kept file was not sent with sendfile: {traced:?}"
    );
    let (status, _, body) = get_bytes(&server, "/kept.bin", Some("bytes=100000-")).await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    assert!(body == data[100_000..], "a range of the kept file differs");
    let h2 = get_over_http2(&server, "/kept.bin").await;
    assert!(
        h2 == data,
        "the kept file over HTTP/2 differs ({} bytes)",
        h2.len()
    );
}

/// A gateway writes its copies of files over 64 KiB as unnamed files in
/// `--gateway-cache-dir`: nothing appears there, the space goes when the copy does, and
/// what is sent is the file's current content.
#[tokio::test]
async fn a_gateways_kept_copies_live_unnamed_in_its_cache_dir_and_go_with_the_file() {
    let cache_dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = cache_dir.path().to_str().unwrap();
    let server = Server::start_with(Mode::Microservices, &["--gateway-cache-dir", dir]).await;
    let gateway = server
        .processes
        .iter()
        .find(|p| p.name == "gateway")
        .expect("a gateway process");
    // The copies the gateway holds open in the directory (besides the directory itself):
    // a file with no name there reads "<dir>/#<inode> (deleted)".
    let copies_held = || {
        std::fs::read_dir(format!("/proc/{}/fd", gateway.pid()))
            .unwrap()
            .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
            .filter(|target| target.starts_with(cache_dir.path()) && target != cache_dir.path())
            .count()
    };
    let first = patterned(300_001);
    put_bytes(&server, "/kept.bin", &first).await;
    for _ in 0..2 {
        assert!(
            get_bytes(&server, "/kept.bin", None).await.2 == first,
            "the file differs"
        );
    }
    assert_eq!(copies_held(), 1, "the gateway keeps its copy in {dir}");
    assert_eq!(
        std::fs::read_dir(cache_dir.path()).unwrap().count(),
        0,
        "a kept copy has no name in the directory"
    );
    let second: Vec<u8> = first.iter().rev().copied().collect();
    let replaced = client()
        .put(server.url("/kept.bin"))
        .body(second.clone())
        .send()
        .await
        .expect("PUT /kept.bin again");
    assert_eq!(
        replaced.status(),
        StatusCode::NO_CONTENT,
        "PUT over the kept file"
    );
    for _ in 0..2 {
        assert!(
            get_bytes(&server, "/kept.bin", None).await.2 == second,
            "the old content was sent"
        );
    }
    assert_eq!(
        send(&server, "DELETE", "/kept.bin", "").await.0,
        StatusCode::NO_CONTENT
    );
    // Dropped copies are let go when their last response has gone out.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while copies_held() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the gateway still holds {} copies in {dir} 10 s after the file was deleted",
            copies_held()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The body of a GET of `path` over HTTP/2 (h2c with prior knowledge, by curl).
async fn get_over_http2(server: &Server, path: &str) -> Vec<u8> {
    let curl = tokio::process::Command::new("curl")
        .args(["-sS", "--http2-prior-knowledge", "-o", "-", &server.url(path)])
        .output()
        .await
        .expect("curl runs");
    assert!(
        curl.status.success(),
        "curl over HTTP/2: {}",
        String::from_utf8_lossy(&curl.stderr)
    );
    curl.stdout
}

/// Where `needle` starts in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A file truncated in place behind kubedav's back while it is being sent: the response
/// ends short (the connection closes before Content-Length bytes), as nginx's does, and
/// the server carries on serving. Sent from a mapping of the file, a read of the
/// truncated pages by the process would kill it with SIGBUS; only the kernel reads them.
async fn a_file_truncated_while_sent_ends_the_response_and_nothing_else(mode: Mode) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = Server::start(mode).await;
    let data = patterned(64 << 20);
    put_bytes(&server, "/shrinks.bin", &data).await;
    let addr = server
        .url("/")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(b"GET /shrinks.bin HTTP/1.1\r\nHost: kubedav\r\n\r\n")
        .await
        .unwrap();
    let mut first = vec![0u8; 64 * 1024];
    let n = stream.read(&mut first).await.unwrap();
    assert!(
        first[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&first[..n.min(200)])
    );
    // The client has the head; most of the body is still to come when the file shrinks.
    std::fs::OpenOptions::new()
        .write(true)
        .open(server.disk("shrinks.bin"))
        .unwrap()
        .set_len(1024)
        .unwrap();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(60), stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the connection was not closed");
    let received = n + rest.len();
    assert!(
        received < data.len(),
        "{received} bytes arrived for a file cut to 1 KiB while it was sent"
    );
    let (status, _, body) = get_bytes(&server, "/shrinks.bin", None).await;
    assert_eq!(status, StatusCode::OK, "the server answers on");
    assert!(body == data[..1024], "the file as it is now");
}

/// A file whose mapping fileio keeps for repeated GETs (a whole file of 2 MiB, found
/// wholly in the page cache: `kubedav_zerocopy::map_resident`) truncated in place
/// behind kubedav's back while GETs of it keep coming from many connections: the server
/// never reads the truncated pages (that would kill it with SIGBUS); the GETs in flight
/// end short or show the file's own bytes, no GET after the truncation gets the old
/// file whole, and once the truncation is seen every GET gets the file as it is now.
async fn a_kept_file_truncated_under_load_ends_only_the_gets_in_flight(mode: Mode) {
    if common::backend() != common::Backend::Volume {
        return;
    }
    let server = std::sync::Arc::new(Server::start(mode).await);
    let data = std::sync::Arc::new(patterned(2 << 20));
    put_bytes(&server, "/kept-shrinks.bin", &data).await;
    let truncated = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let whole = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut loaders = Vec::new();
    for _ in 0..8 {
        let (server, data, truncated, stop, whole) = (
            server.clone(),
            data.clone(),
            truncated.clone(),
            stop.clone(),
            whole.clone(),
        );
        loaders.push(tokio::spawn(async move {
            // (whole old file, cut short or showing the shrinking, the file as it is now)
            let mut seen = (0usize, 0usize, 0usize);
            let client = client();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let after = truncated.load(std::sync::atomic::Ordering::SeqCst);
                let response = client
                    .get(server.url("/kept-shrinks.bin"))
                    .send()
                    .await
                    .expect("the server accepts every GET");
                assert_eq!(response.status(), StatusCode::OK);
                match response.bytes().await {
                    Ok(body) if body.len() == data.len() => {
                        assert!(!after, "the whole old file came after the truncation was done");
                        // A GET that was being sent as the file shrank may show the
                        // shrinking: the page cache gives a read no atomicity against a
                        // truncation, so the kernel's `sendfile` (nginx's too) may send
                        // old bytes and the zeros a truncation leaves past the new end.
                        // Never a byte from anywhere else.
                        let foreign = body.iter().zip(data.iter()).position(|(b, d)| b != d && *b != 0);
                        assert_eq!(
                            foreign, None,
                            "a whole-length body with bytes that were never the file's"
                        );
                        if body == data[..] {
                            seen.0 += 1;
                            whole.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        } else {
                            seen.1 += 1;
                        }
                    }
                    Ok(body) => {
                        assert!(
                            body == data[..1024],
                            "{} bytes, not the file as it is now",
                            body.len()
                        );
                        seen.2 += 1;
                    }
                    Err(_) => seen.1 += 1,
                }
            }
            seen
        }));
    }
    // Load first, so the mapping is kept and GETs are in flight when the file shrinks.
    assert!(
        common::eventually(std::time::Duration::from_secs(30), || {
            whole.load(std::sync::atomic::Ordering::SeqCst) >= 32
        })
        .await,
        "fewer than 32 whole GETs under load in 30 s"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(server.disk("kept-shrinks.bin"))
        .unwrap()
        .set_len(1024)
        .unwrap();
    truncated.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(
        common::eventually_async(std::time::Duration::from_secs(30), || {
            let server = server.clone();
            async move { get_bytes(&server, "/kept-shrinks.bin", None).await.2.len() == 1024 }
        })
        .await,
        "the truncated file was never served as it is now"
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut total = (0, 0, 0);
    for loader in loaders {
        let seen = loader.await.expect("a loader failed");
        total = (total.0 + seen.0, total.1 + seen.1, total.2 + seen.2);
    }
    eprintln!(
        "{mode:?}: {} whole, {} cut short or torn, {} of the truncated file",
        total.0, total.1, total.2
    );
    assert!(
        total.0 > 0 && total.2 > 0,
        "load on both sides of the truncation: {total:?}"
    );
    let (status, _, body) = get_bytes(&server, "/kept-shrinks.bin", None).await;
    assert_eq!(status, StatusCode::OK, "the server answers on");
    assert!(body == data[..1024], "the file as it is now");
}

/// A large file deleted through kubedav stops taking space within seconds of its last
/// GET: the mapping kept for GETs that repeat within a second (kubedav_zerocopy)
/// keeps the file open no longer, even when no request follows.
async fn a_deleted_file_is_let_go_soon_after_its_last_get(mode: Mode) {
    if common::backend() != common::Backend::Volume {
        return;
    }
    let server = Server::start(mode).await;
    let data = patterned(2 << 20);
    put_bytes(&server, "/gone.bin", &data).await;
    for _ in 0..2 {
        let (status, _, body) = get_bytes(&server, "/gone.bin", None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(body == data, "the file differs");
    }
    let disk = server.disk("gone.bin");
    assert_eq!(
        send(&server, "DELETE", "/gone.bin", "").await.0,
        StatusCode::NO_CONTENT
    );
    let process = server
        .processes
        .iter()
        .find(|p| VOLUME.contains(&p.name))
        .expect("a process serves the volume");
    let holds_it = || {
        std::fs::read_dir(format!("/proc/{}/fd", process.pid()))
            .unwrap()
            .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
            // A deleted file's link reads "<path> (deleted)".
            .any(|target| target.to_string_lossy().starts_with(&*disk.to_string_lossy()))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while holds_it() {
        assert!(
            std::time::Instant::now() < deadline,
            "{mode:?}: {} still holds the deleted file open after 10 s",
            process.name
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

in_both_modes!(
    durability_says_what_a_change_waits_for,
    a_deleted_file_is_let_go_soon_after_its_last_get,
    large_files_arrive_whole_however_they_are_asked_for,
    kept_files_are_sent_with_sendfile_too,
    a_file_truncated_while_sent_ends_the_response_and_nothing_else,
    a_kept_file_truncated_under_load_ends_only_the_gets_in_flight,
    a_failed_copy_keeps_the_destination,
    a_full_volume_gives_507_and_keeps_the_old_content,
    a_read_only_volume_serves_reads_and_refuses_writes
);
