//! Uploads in many requests with a real client, as they meet the internet: tuspy (PyPI)
//! sends a 1 GiB file in 4 MiB checksummed chunks through nginx, which refuses request
//! bodies over 8 MiB as an Ingress does (a single PUT of the file cannot pass), in front
//! of two gateway replicas. The client is killed at 40 % and resumed; at 60 % the replica
//! holding the upload is killed with SIGKILL (all-in-one: the whole process, and the
//! other replica takes over behind nginx; microservices: fileio, started again), and the
//! upload resumes: the file landed is the file sent. rclone (v1.76, its `nextcloud`
//! vendor) copies the same file through the same proxy in Nextcloud chunks.
//! docs/uploads.md.

#[macro_use]
mod common;

use common::fleet::{Fleet, fleet};
use common::tools::tool;
use common::{BACKEND, Backend, Mode, client};
use kubedav_testkit::RedisServer;
use reqwest::StatusCode;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

/// The file's size.
const SIZE: u64 = 1 << 30;
/// Each PATCH's bytes: under the proxy's limit.
const CHUNK: u64 = 4 << 20;
/// The proxy's limit on a request body, as `proxy-body-size: 8m` sets it on ingress-nginx.
const PROXY_BODY_LIMIT: &str = "8m";

/// nginx in front of `upstreams`, on a free port; stopped when dropped.
struct Proxy {
    child: Child,
    url: String,
}

impl Proxy {
    async fn start(dir: &Path, upstreams: &[String]) -> Proxy {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let servers: String = upstreams
            .iter()
            .map(|u| format!("server {};", u.trim_start_matches("http://")))
            .collect();
        let conf = dir.join("nginx.conf");
        let d = dir.display();
        std::fs::write(
            &conf,
            format!(
                "daemon off; worker_processes 1; error_log {d}/error.log; pid {d}/nginx.pid;\n\
                 events {{}}\n\
                 http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
                 fastcgi_temp_path {d}/f; uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;\n\
                 upstream kubedav {{ {servers} }}\n\
                 server {{ listen 127.0.0.1:{port}; client_max_body_size {PROXY_BODY_LIMIT};\n\
                 location / {{ proxy_pass http://kubedav; proxy_http_version 1.1;\n\
                 proxy_set_header Host $http_host; proxy_set_header Connection \"\"; }} }} }}\n"
            ),
        )
        .unwrap();
        let nginx = ["/usr/sbin/nginx", "nginx"]
            .into_iter()
            .find(|n| Path::new(n).exists())
            .unwrap_or("nginx");
        let child = Command::new(nginx)
            .args(["-c", &conf.display().to_string(), "-p", &d.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nginx starts (make test installs it)");
        let url = format!("http://127.0.0.1:{port}");
        for _ in 0..500 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return Proxy { child, url };
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("nginx did not listen on {port}");
    }
}

impl Drop for Proxy {
    /// A fast shutdown (SIGTERM), which its worker follows; SIGKILL would orphan it.
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
    }
}

/// A file of `SIZE` pseudo-random bytes (no two chunks alike, so a chunk landed at the
/// wrong offset shows).
fn random_file(dir: &Path) -> PathBuf {
    let path = dir.join("big.bin");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut rng = fastrand::Rng::with_seed(55);
    let mut block = vec![0u8; 1 << 20];
    for _ in 0..SIZE / block.len() as u64 {
        rng.fill(&mut block);
        file.write_all(&block).unwrap();
    }
    file.flush().unwrap();
    path
}

/// Whether two files hold the same bytes.
fn same_bytes(a: &Path, b: &Path) -> bool {
    let (mut a, mut b) = (std::fs::File::open(a).unwrap(), std::fs::File::open(b).unwrap());
    let (mut x, mut y) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = a.read(&mut x).unwrap();
        let m = b.read(&mut y[..n.max(1)]).unwrap();
        if n == 0 {
            return b.read(&mut y).unwrap() == 0;
        }
        if m == 0 || x[..m] != y[..m] {
            return false;
        }
        if m < n {
            // A short read of `b`: compare the rest of this block.
            let mut rest = vec![0u8; n - m];
            if b.read_exact(&mut rest).is_err() || x[m..n] != rest[..] {
                return false;
            }
        }
    }
}

/// What a tuspy run did before it ended, or before `stop` told it to go.
struct Run {
    url: Option<String>,
    resumed_at: Option<u64>,
    last_offset: u64,
    done: bool,
}

/// Runs tuspy on `file` to `target` through `endpoint` (resuming `url`), until it ends,
/// or until its offset reaches `stop_at`: then `at_stop` runs (it may kill the client or
/// a server) and the client is waited for.
async fn tuspy<F, Fut>(
    endpoint: &str,
    file: &Path,
    target: &str,
    url: Option<&str>,
    stop_at: u64,
    at_stop: F,
) -> Run
where
    F: FnOnce(u32) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let python = tool("KUBEDAV_TUSPY_PYTHON", "need-tuspy.sh");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/tus_upload.py");
    let mut args = vec![
        script.to_owned(),
        format!("{endpoint}/.kubedav/uploads/"),
        file.display().to_string(),
        target.to_owned(),
        CHUNK.to_string(),
    ];
    args.extend(url.map(str::to_owned));
    let mut child = Command::new(python)
        .args(&args)
        .env("TUS_AUTHORIZATION", "Basic YWxpY2U6cHc=")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut run = Run {
        url: None,
        resumed_at: None,
        last_offset: 0,
        done: false,
    };
    let mut at_stop = Some(at_stop);
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(url) = line.strip_prefix("url ") {
            run.url = Some(url.to_owned());
        } else if let Some(at) = line.strip_prefix("resumed at ") {
            run.resumed_at = at.parse().ok();
        } else if let Some(offset) = line.strip_prefix("offset ") {
            run.last_offset = offset.parse().unwrap();
            if run.last_offset >= stop_at
                && let Some(stop) = at_stop.take()
            {
                stop(pid).await;
            }
        } else if line == "done" {
            run.done = true;
        }
    }
    let _ = child.wait().await;
    run
}

fn sigkill(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
}

async fn a_killed_client_and_a_killed_replica_resume_through_a_proxy(mode: Mode) {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("alice", "pw")]);
    let envs = vec![
        ("KUBEDAV_LOCK_STORE".to_owned(), redis.url(0)),
        ("KUBEDAV_USERS_FILE".to_owned(), users.display().to_string()),
    ];
    let mut fleet: Fleet = fleet(mode, envs, dir.path()).await;
    let proxy = Proxy::start(dir.path(), &fleet.gateways).await;
    let file = random_file(dir.path());

    // One PUT of more than 8 MiB cannot pass the proxy.
    let put = client()
        .put(format!("{}/whole.bin", proxy.url))
        .basic_auth("alice", Some("pw"))
        .body(vec![0u8; 9 << 20])
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::PAYLOAD_TOO_LARGE);

    // The client dies at 40 %.
    let first = tuspy(
        &proxy.url,
        &file,
        "/big.bin",
        None,
        SIZE * 4 / 10,
        |pid| async move { sigkill(pid) },
    )
    .await;
    let url = first.url.expect("the upload was created");
    assert!(!first.done);

    // Resumed, it goes on from where the server has it; at 60 % the replica dies: the
    // whole process in all-in-one mode (nginx then sends everything to the other, and
    // the client may not even notice), fileio in microservices mode (started again: a
    // new process that never saw the upload).
    let victim = fleet.processes[0].pid();
    let second = tuspy(
        &proxy.url,
        &file,
        "/big.bin",
        Some(&url),
        SIZE * 6 / 10,
        |_| async move { sigkill(victim) },
    )
    .await;
    let resumed_at = second.resumed_at.unwrap();
    assert!(
        resumed_at >= first.last_offset && resumed_at < SIZE * 6 / 10,
        "{resumed_at}"
    );
    assert!(second.last_offset >= SIZE * 6 / 10);
    if mode == Mode::Microservices {
        assert!(!second.done, "the upload went on without fileio");
        fleet.processes[0].restart().await;
        // Ready again once the upload answers through each gateway (they reconnect to
        // fileio with a backoff of their own, and nginx may send the client to either).
        let path = url.strip_prefix(&proxy.url).unwrap().to_owned();
        for gateway in &fleet.gateways {
            let answers = common::eventually_async(std::time::Duration::from_secs(30), || async {
                client()
                    .head(format!("{gateway}{path}"))
                    .basic_auth("alice", Some("pw"))
                    .header("tus-resumable", "1.0.0")
                    .send()
                    .await
                    .is_ok_and(|r| r.status() == StatusCode::OK)
            })
            .await;
            assert!(
                answers,
                "the upload does not answer at {gateway} after fileio restarted"
            );
        }
    }
    if !second.done {
        let third = tuspy(&proxy.url, &file, "/big.bin", Some(&url), u64::MAX, |_| async {}).await;
        assert!(third.done, "the upload did not finish");
        assert!(third.resumed_at.unwrap() >= SIZE * 6 / 10);
    }
    assert!(
        same_bytes(&file, &fleet.disk("big.bin")),
        "the file landed is not the file sent"
    );
    nothing_left(&fleet).await;
}

/// Nothing of an upload is left in kubedav's area, nor, in a bucket, a multipart upload.
async fn nothing_left(fleet: &Fleet) {
    let left: Vec<_> = walk(&fleet.disk(".kubedav/uploads"))
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(fleet.multipart_uploads().await, 0);
}

/// rclone's `nextcloud` vendor copies the 1 GiB file through the proxy in 4 MiB chunks
/// (`START-END` names, MOVE .file with its modification time and SHA-1): the file
/// landed is the file sent, with its time, and nothing of the upload is left. In a
/// bucket the SHA-1 was carried over the chunks, so the landing read no byte again; on a
/// volume it read the file once.
async fn rclone_copies_a_large_file_in_nextcloud_chunks_through_a_proxy(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("alice", "pw")]);
    let envs = vec![("KUBEDAV_USERS_FILE".to_owned(), users.display().to_string())];
    let fleet: Fleet = fleet(mode, envs, dir.path()).await;
    let proxy = Proxy::start(dir.path(), &fleet.gateways).await;
    let file = random_file(dir.path());
    let rclone = tool("KUBEDAV_RCLONE", "need-rclone.sh");
    let obscured = common::tools::run(&rclone, &["obscure", "pw"], None).await;
    let remote = format!(
        ":webdav,url='{}/remote.php/dav/files/alice',vendor=nextcloud,user=alice,pass={}:",
        proxy.url,
        obscured.trim()
    );
    let config = dir.path().join("rclone.conf");
    common::tools::run(
        &rclone,
        &[
            "--config",
            config.to_str().unwrap(),
            "copyto",
            file.to_str().unwrap(),
            &format!("{remote}copied/big.bin"),
            "--webdav-nextcloud-chunk-size",
            "4M",
            "--retries",
            "1",
        ],
        None,
    )
    .await;
    assert!(
        same_bytes(&file, &fleet.disk("copied/big.bin")),
        "the file landed is not the file sent"
    );
    let head = client()
        .head(format!("{}/copied/big.bin", proxy.url))
        .basic_auth("alice", Some("pw"))
        .send()
        .await
        .unwrap();
    let got = httpdate::parse_http_date(head.headers()["last-modified"].to_str().unwrap()).unwrap();
    let sent = std::fs::metadata(&file).unwrap().modified().unwrap();
    let seconds = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert_eq!(seconds(sent), seconds(got), "X-OC-Mtime was not applied");
    nothing_left(&fleet).await;
    let expected = match common::backend() {
        common::Backend::Volume => 1.0,
        _ => 0.0,
    };
    assert_eq!(
        rereads(&fleet).await,
        expected,
        "landings that read the file again to learn its SHA-1"
    );
    let check = common::tools::run(
        &rclone,
        &[
            "--config",
            config.to_str().unwrap(),
            "check",
            "--one-way",
            dir.path().to_str().unwrap(),
            &format!("{remote}copied"),
            "--include",
            "/big.bin",
        ],
        None,
    )
    .await;
    assert!(check.contains("0 differences found"), "{check}");
}

/// How many landings read their upload's bytes again for a checksum, in every process
/// that serves the storage.
async fn rereads(fleet: &Fleet) -> f64 {
    let mut total = 0.0;
    for admin in &fleet.fileio_admins {
        total += common::metric_text(*admin)
            .await
            .lines()
            .filter(|line| line.starts_with(r#"kubedav_fileio_uploads_total{event="reread"}"#))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
    }
    total
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            found.push(path.clone());
            if path.is_dir() {
                found.extend(walk(&path));
            }
        }
    }
    found
}

/// The file manager (headless Chromium, `tests/clients/browser_uploads.py`) sends a
/// 48 MiB file by TUS: the network drops for two seconds at a quarter, the page is
/// reloaded at half way and the file picked again; the upload resumes each time, and
/// what lands is the file. Screenshots go to `KUBEDAV_SCREENSHOTS` when it is set.
async fn the_file_manager_resumes_a_large_upload(mode: Mode) {
    let server = common::Server::start(mode).await;
    let made = client()
        .request(
            reqwest::Method::from_bytes(b"MKCOL").unwrap(),
            server.url("/docs/"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    let local = tempfile::tempdir().unwrap();
    let big = local.path().join("big.bin");
    let mut rng = fastrand::Rng::with_seed(48);
    let data: Vec<u8> = std::iter::repeat_with(|| rng.u8(..)).take(48 << 20).collect();
    std::fs::write(&big, &data).unwrap();
    let shots = std::env::var("KUBEDAV_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| local.path().to_owned());
    let python = tool("KUBEDAV_BROWSER_PYTHON", "need-browser.sh");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/browser_uploads.py");
    let url = server.url("/docs/");
    let output = common::tools::run(
        &python,
        &[
            script,
            url.as_str(),
            shots.to_str().unwrap(),
            big.to_str().unwrap(),
        ],
        None,
    )
    .await;
    assert!(output.contains("browser uploads ok"), "{output}");
    let landed = client().get(server.url("/docs/big.bin")).send().await.unwrap();
    assert!(
        landed.bytes().await.unwrap().as_ref() == &data[..],
        "the file landed is not the file sent"
    );
    let left: Vec<_> = walk(&server.disk(".kubedav/uploads"))
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

in_both_modes!(
    a_killed_client_and_a_killed_replica_resume_through_a_proxy,
    rclone_copies_a_large_file_in_nextcloud_chunks_through_a_proxy,
    the_file_manager_resumes_a_large_upload
);

on_s3!(
    a_killed_client_and_a_killed_replica_resume_through_a_proxy,
    rclone_copies_a_large_file_in_nextcloud_chunks_through_a_proxy,
    the_file_manager_resumes_a_large_upload
);
