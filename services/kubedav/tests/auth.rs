//! Authentication, in both modes: every hash format, a malformed users file, hot reload
//! through a Kubernetes-style symlink swap, no caching of refusals, a full crypt queue,
//! lockouts, read-only users, anonymous reads, lock ownership, and open health endpoints.

#[macro_use]
mod common;

use common::{Mode, Server, client};
use reqwest::StatusCode;
use std::path::{Path, PathBuf};
use std::time::Duration;

// Hashes made by openssl passwd and Apache's htpasswd.
const USERS: &str = "# the team\n\
six:$6$saltsalt$LMtDgChSrV.wGnnrAr7LXtxT9OYdesYYRBi0J7VAO0UoNpOTX5uxqMPmQ0Gkk2HMqd/t1jYDOamm5q1ro0ZhX/\n\
five:$5$saltsalt$708Qd1GA5FblAgceNooXo6mCmXw7DIUSz5IHtzs/2E6\n\
bob:$2y$04$0NzdbFzsvv6XZI9hfsFXm.IvaTRCq/RgZYd4psDEFzN0rM.M68D4m\n\
old:$apr1$saltsalt$lSklNqYhb/pWvQ69oj2HK1\n\
plain:letmein\n\
this line is broken\n\
md5:$1$abc$def\n";

async fn status(server: &Server, user: &str, password: &str) -> StatusCode {
    client()
        .get(server.url("/"))
        .basic_auth(user, Some(password))
        .send()
        .await
        .unwrap()
        .status()
}

/// A users file laid out as Kubernetes mounts a Secret: `users -> ..data/users`, with
/// `..data` a symlink to a timestamped directory that an update swaps atomically.
struct SecretVolume {
    dir: tempfile::TempDir,
    generation: u32,
}

impl SecretVolume {
    fn new(content: &str) -> Self {
        let mut volume = SecretVolume {
            dir: tempfile::tempdir().unwrap(),
            generation: 0,
        };
        volume.update(content);
        std::os::unix::fs::symlink("..data/users", volume.dir.path().join("users")).unwrap();
        volume
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("users")
    }

    fn update(&mut self, content: &str) {
        self.generation += 1;
        let name = format!("..2026_11_22_{}", self.generation);
        let root = self.dir.path();
        std::fs::create_dir(root.join(&name)).unwrap();
        std::fs::write(root.join(&name).join("users"), content).unwrap();
        let _ = std::fs::remove_file(root.join("..data_tmp"));
        std::os::unix::fs::symlink(&name, root.join("..data_tmp")).unwrap();
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    }
}

async fn start(mode: Mode, users: &Path, auth_args: &[&str], gateway_args: &[&str]) -> Server {
    let mut args = vec!["--users-reload-seconds", "1"];
    args.extend_from_slice(auth_args);
    Server::start_auth(mode, Some(users), &args, gateway_args, &[]).await
}

fn verifier(mode: Mode) -> &'static str {
    if mode == Mode::AllInOne { "all" } else { "auth" }
}

async fn every_format_and_a_malformed_file(mode: Mode) {
    let volume = SecretVolume::new(USERS);
    let mut server = start(mode, &volume.path(), &["--allow-plaintext-passwords"], &[]).await;
    let warning = server.process(verifier(mode)).logged("line=7").await;
    assert!(warning.contains("line skipped"), "{warning}");
    server.process(verifier(mode)).logged("line=8").await;
    for (user, password) in [
        ("six", "secret6"),
        ("five", "secret5"),
        ("bob", "secret2y"),
        ("old", "secretapr"),
        ("plain", "letmein"),
    ] {
        assert_eq!(status(&server, user, password).await, StatusCode::OK, "{user}");
        assert_eq!(
            status(&server, user, "wrong").await,
            StatusCode::UNAUTHORIZED,
            "{user}"
        );
    }
    assert_eq!(
        status(&server, "nobody", "secret6").await,
        StatusCode::UNAUTHORIZED
    );
    let anonymous = client().get(server.url("/")).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        anonymous.headers()["www-authenticate"],
        "Basic realm=\"kubedav\", charset=\"UTF-8\""
    );
    // The admin endpoints ask for nothing.
    for (name, addr) in server.admin.clone() {
        for path in ["/healthz", "/readyz", "/metrics"] {
            let response = client().get(format!("http://{addr}{path}")).send().await.unwrap();
            assert_eq!(
                response.status(),
                StatusCode::OK,
                "{name}{path} without credentials"
            );
        }
    }
}

async fn reload_through_a_symlink_swap(mode: Mode) {
    let carol = kubedav_auth::passwd::sha512_crypt("carol-pw").unwrap();
    let dave = kubedav_auth::passwd::sha512_crypt("dave-pw").unwrap();
    let mut volume = SecretVolume::new(&format!("carol:{carol}\n"));
    let mut server = start(mode, &volume.path(), &[], &[]).await;
    assert_eq!(
        status(&server, "carol", "carol-pw").await,
        StatusCode::OK,
        "now cached"
    );
    assert_eq!(
        status(&server, "dave", "dave-pw").await,
        StatusCode::UNAUTHORIZED,
        "not a user yet"
    );
    volume.update(&format!("dave:{dave}\n"));
    let reloaded = server
        .process(verifier(mode))
        .next_log_line("users file loaded")
        .await;
    assert!(reloaded.contains("users=1"), "{reloaded}");
    assert_eq!(
        status(&server, "dave", "dave-pw").await,
        StatusCode::OK,
        "the added user is in"
    );
    // The refusal of dave was not cached, and carol's cached success was forgotten by
    // the auth service at once; a gateway remembers an acceptance for at most a second
    // (edge::verdicts), so she is out within that.
    let removed_at = std::time::Instant::now();
    assert!(
        common::eventually_async(std::time::Duration::from_secs(3), || async {
            status(&server, "carol", "carol-pw").await == StatusCode::UNAUTHORIZED
        })
        .await,
        "a removed user stays in"
    );
    let took = removed_at.elapsed();
    assert!(
        took <= std::time::Duration::from_millis(1200),
        "a removed user was out after {took:?}"
    );
}

async fn full_crypt_queue_answers_503(mode: Mode) {
    // One worker, room for one waiting job, and a hash that takes a while.
    let slow = kubedav_auth::passwd::sha512_crypt_with_rounds("slow-pw", 3_000_000).unwrap();
    let fast = kubedav_auth::passwd::sha512_crypt("fast-pw").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    std::fs::write(&path, format!("slow:{slow}\nfast:{fast}\n")).unwrap();
    let server = start(mode, &path, &["--auth-workers", "1", "--auth-queue", "1"], &[]).await;
    assert_eq!(
        status(&server, "fast", "fast-pw").await,
        StatusCode::OK,
        "fast is now cached"
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..6 {
        let (url, tx) = (server.url("/"), tx.clone());
        tokio::spawn(async move {
            let response = client()
                .get(url)
                .basic_auth("slow", Some("slow-pw"))
                .send()
                .await
                .unwrap();
            let retry = response.headers().contains_key("retry-after");
            let _ = tx.send(("slow", response.status(), retry));
        });
    }
    // Once the crypt worker is busy, a cached login must still be answered at once.
    let verifier_admin = server.admin_of(verifier(mode));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while common::metric_sum(verifier_admin, "kubedav_auth_crypt_verifications_total").await < 1.0
        && common::metric_sum(verifier_admin, "kubedav_auth_attempts_total").await < 2.0
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slow logins never reached the verifier"
        );
        tokio::task::yield_now().await;
    }
    {
        let (url, tx) = (server.url("/"), tx.clone());
        tokio::spawn(async move {
            let response = client()
                .get(url)
                .basic_auth("fast", Some("fast-pw"))
                .send()
                .await
                .unwrap();
            let _ = tx.send(("fast", response.status(), false));
        });
    }
    drop(tx);
    let mut order = Vec::new();
    while let Some(answer) = rx.recv().await {
        order.push(answer);
    }
    let busy: Vec<_> = order
        .iter()
        .filter(|(_, s, _)| *s == StatusCode::SERVICE_UNAVAILABLE)
        .collect();
    assert!(!busy.is_empty(), "some logins found the queue full: {order:?}");
    assert!(busy.iter().all(|(_, _, retry)| *retry), "503 carries Retry-After");
    let first_slow_ok = order
        .iter()
        .position(|(who, s, _)| *who == "slow" && *s == StatusCode::OK)
        .expect("admitted logins succeed");
    let fast = order.iter().position(|(who, _, _)| *who == "fast").unwrap();
    assert_eq!(order[fast].1, StatusCode::OK);
    assert!(
        fast < first_slow_ok,
        "the cached login did not wait for crypt work: {order:?}"
    );
    assert!(
        order[..first_slow_ok]
            .iter()
            .all(|(who, s, _)| *who == "fast" || *s == StatusCode::SERVICE_UNAVAILABLE),
        "503 came before any crypt finished: {order:?}"
    );
}

async fn lockout_engages_and_lifts(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let path = common::users_file(dir.path(), &[("alice", "alice-pw")]);
    let server = start(
        mode,
        &path,
        &["--auth-max-failures", "3", "--auth-lockout-seconds", "1"],
        &[],
    )
    .await;
    for _ in 0..3 {
        assert_eq!(status(&server, "alice", "guess").await, StatusCode::UNAUTHORIZED);
    }
    let verifier_admin = server.admin_of(verifier(mode));
    assert!(
        common::metric_sum(verifier_admin, "kubedav_auth_lockouts_total").await >= 1.0,
        "lockouts are counted"
    );
    let metrics = common::metric_text(verifier_admin).await;
    assert!(
        metrics.contains("kubedav_auth_attempts_total{outcome=\"denied\"} 3"),
        "attempts are counted: {metrics}"
    );
    assert!(!metrics.contains("guess"), "passwords never reach the metrics");
    let locked = client()
        .get(server.url("/"))
        .basic_auth("alice", Some("alice-pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        locked.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "even the right password waits"
    );
    assert!(locked.headers().contains_key("retry-after"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while status(&server, "alice", "alice-pw").await != StatusCode::OK {
        assert!(tokio::time::Instant::now() < deadline, "the lockout never lifted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A login from a client behind a trusted proxy, as the proxy forwards it.
async fn forwarded_status(server: &Server, client_ip: &str, user: &str, password: &str) -> StatusCode {
    client()
        .get(server.url("/"))
        .header("x-forwarded-for", format!("198.51.100.77, {client_ip}"))
        .basic_auth(user, Some(password))
        .send()
        .await
        .unwrap()
        .status()
}

/// Behind an Ingress every connection comes from the proxy. A guesser must lock out
/// only itself: not the other clients of the proxy, and not the owner of the account it
/// guesses at, who logs in from an address that has not failed.
async fn a_guesser_behind_a_proxy_locks_out_only_itself(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let path = common::users_file(dir.path(), &[("alice", "alice-pw"), ("bob", "bob-pw")]);
    let server = start(
        mode,
        &path,
        &[
            "--auth-max-failures",
            "3",
            "--auth-max-failures-per-address",
            "5",
            "--auth-lockout-seconds",
            "300",
        ],
        &["--trusted-proxies", "127.0.0.1/32"],
    )
    .await;
    let guesser = "203.0.113.66";
    for attempt in 0..5 {
        let user = if attempt % 2 == 0 { "alice" } else { "bob" };
        assert_eq!(
            forwarded_status(&server, guesser, user, "guess").await,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        forwarded_status(&server, guesser, "bob", "bob-pw").await,
        StatusCode::TOO_MANY_REQUESTS,
        "the guessing address is locked out"
    );
    // Alice's account has failed 3 times: it is guarded, but only against the guesser.
    assert_eq!(
        forwarded_status(&server, "203.0.113.10", "alice", "alice-pw").await,
        StatusCode::OK
    );
    assert_eq!(
        forwarded_status(&server, "203.0.113.11", "bob", "bob-pw").await,
        StatusCode::OK
    );
    // A second guesser gets its wrong answer, and then nothing more at alice.
    assert_eq!(
        forwarded_status(&server, "2001:db8:7:7::1", "alice", "guess").await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        forwarded_status(&server, "2001:db8:7:7:ffff::2", "alice", "alice-pw").await,
        StatusCode::TOO_MANY_REQUESTS,
        "a guarded account refuses an address that failed on it (IPv6: its /64)"
    );
    // The header counts only from the trusted proxy: a client cannot pick its address.
    assert_eq!(status(&server, "alice", "alice-pw").await, StatusCode::OK);
}

async fn access_rules_and_lock_owners(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let path = common::users_file(
        dir.path(),
        &[("alice", "alice-pw"), ("bob", "bob-pw"), ("reader", "reader-pw")],
    );
    let server = start(
        mode,
        &path,
        &[],
        &[
            "--read-only-users",
            "reader",
            "--anonymous-read",
            "--auth-realm",
            "Team Files",
        ],
    )
    .await;
    let c = client();
    assert_eq!(
        c.get(server.url("/")).send().await.unwrap().status(),
        StatusCode::OK,
        "anonymous reads"
    );
    let anonymous_put = c.put(server.url("/a.txt")).body("x").send().await.unwrap();
    assert_eq!(anonymous_put.status(), StatusCode::UNAUTHORIZED, "but not writes");
    assert_eq!(
        anonymous_put.headers()["www-authenticate"],
        "Basic realm=\"Team Files\", charset=\"UTF-8\""
    );
    let put = |user: &str, pw: &str| c.put(server.url("/a.txt")).basic_auth(user, Some(pw)).body("x");
    assert_eq!(
        put("reader", "reader-pw").send().await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        put("alice", "alice-pw").send().await.unwrap().status(),
        StatusCode::CREATED
    );
    // A lock belongs to the user who took it: bob cannot use alice's token.
    let lockinfo = r#"<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#;
    let lock = c
        .request(
            reqwest::Method::from_bytes(b"LOCK").unwrap(),
            server.url("/a.txt"),
        )
        .basic_auth("alice", Some("alice-pw"))
        .body(lockinfo)
        .send()
        .await
        .unwrap();
    assert_eq!(lock.status(), StatusCode::OK);
    let token = lock.headers()["lock-token"].to_str().unwrap().to_owned();
    let with_token = |user: &str, pw: &str| put(user, pw).header("if", format!("({token})"));
    assert_eq!(
        with_token("bob", "bob-pw").send().await.unwrap().status(),
        StatusCode::LOCKED
    );
    assert_eq!(
        with_token("alice", "alice-pw").send().await.unwrap().status(),
        StatusCode::NO_CONTENT
    );
    let unlock = c
        .request(
            reqwest::Method::from_bytes(b"UNLOCK").unwrap(),
            server.url("/a.txt"),
        )
        .basic_auth("bob", Some("bob-pw"))
        .header("lock-token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(
        unlock.status(),
        StatusCode::FORBIDDEN,
        "only the owner releases it"
    );
    let unlock = c
        .request(
            reqwest::Method::from_bytes(b"UNLOCK").unwrap(),
            server.url("/a.txt"),
        )
        .basic_auth("alice", Some("alice-pw"))
        .header("lock-token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(unlock.status(), StatusCode::NO_CONTENT, "and the owner does");
    assert_eq!(
        put("bob", "bob-pw").send().await.unwrap().status(),
        StatusCode::NO_CONTENT,
        "then anyone may write"
    );
}

/// No password, and no Authorization value, reaches any process's log, at debug level,
/// with the access log on, in text and JSON, whether the login succeeds, fails or is
/// refused for a malformed header.
async fn credentials_never_reach_the_logs(mode: Mode) {
    for format in ["text", "json"] {
        credentials_never_reach_the_logs_in(mode, format).await;
    }
}

async fn credentials_never_reach_the_logs_in(mode: Mode, format: &str) {
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("carol", "Sup3r-Secret-pw")]);
    let envs = [
        ("RUST_LOG", "debug"),
        ("KUBEDAV_LOG_FORMAT", format),
        ("KUBEDAV_ACCESS_LOG", "true"),
    ];
    let mut server = Server::start_auth(mode, Some(&users), &[], &[], &envs).await;
    let c = client();
    let attempts = [
        ("carol", "Sup3r-Secret-pw"),
        ("carol", "Wr0ng-Guess-pw"),
        ("nobody", "An0ther-Guess-pw"),
    ];
    for (user, password) in attempts {
        c.put(server.url("/f.txt"))
            .basic_auth(user, Some(password))
            .body("x")
            .send()
            .await
            .unwrap();
    }
    let raw = "Basic bm90LWEtdmFsaWQtaGVhZGVy";
    c.get(server.url("/"))
        .header("authorization", raw)
        .send()
        .await
        .unwrap();
    let ok = c
        .get(server.url("/"))
        .basic_auth("carol", Some("Sup3r-Secret-pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    use base64::Engine;
    let mut secrets: Vec<String> = attempts.iter().map(|(_, p)| p.to_string()).collect();
    secrets.extend(
        attempts
            .iter()
            .map(|(u, p)| base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))),
    );
    secrets.push("bm90LWEtdmFsaWQtaGVhZGVy".into());
    let mut lines = 0;
    for process in &mut server.processes {
        for line in process.log_so_far() {
            lines += 1;
            for secret in &secrets {
                assert!(
                    !line.contains(secret.as_str()),
                    "[{}] logged a credential in {format}: {line}",
                    process.name
                );
            }
        }
    }
    assert!(lines >= 5, "the processes did log ({lines} lines)");
}

in_both_modes!(
    credentials_never_reach_the_logs,
    every_format_and_a_malformed_file,
    reload_through_a_symlink_swap,
    full_crypt_queue_answers_503,
    lockout_engages_and_lifts,
    a_guesser_behind_a_proxy_locks_out_only_itself,
    access_rules_and_lock_owners,
);

/// Serving beyond loopback without authentication needs an explicit flag.
/// The image's default command (the Dockerfile's CMD, run here as the binary with its
/// paths and ports moved to temporary ones) refuses to serve without a users file, and
/// with one it asks every client for credentials: `docker run -p 8080:8080` never
/// serves read-write to everyone by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_serves_only_with_a_users_file() {
    let dockerfile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Dockerfile")).unwrap();
    let cmd = dockerfile
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("CMD "))
        .expect("a CMD");
    let args: Vec<String> = serde_json::from_str(cmd).expect("CMD in exec form");
    assert!(!args.iter().any(|a| a == "--allow-unauthenticated"), "{args:?}");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let users = dir.path().join("users");
    let local: Vec<String> = args
        .iter()
        .map(|arg| match arg.split_once('=') {
            Some(("--root", _)) => format!("--root={}", data.display()),
            Some(("--listen", _)) => "--listen=0.0.0.0:0".into(),
            Some(("--admin-listen", _)) => "--admin-listen=127.0.0.1:0".into(),
            Some(("--users-file", _)) => format!("--users-file={}", users.display()),
            _ => arg.clone(),
        })
        .collect();
    let missing = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubedav"))
        .args(&local)
        .output()
        .await
        .unwrap();
    assert!(!missing.status.success(), "it served without a users file");
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(
        said.contains("users file") && said.contains("kubedav passwd"),
        "{said}"
    );

    common::users_file(dir.path(), &[("alice", "alice-pw")]);
    let mut process = common::Process::spawn("image", &local, &[]);
    let addr = process.listening("gateway HTTP").await;
    let port = addr.port();
    let anonymous = client()
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let alice = client()
        .get(format!("http://127.0.0.1:{port}/"))
        .basic_auth("alice", Some("alice-pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(alice.status(), StatusCode::OK);
}

#[tokio::test]
async fn open_to_the_network_without_auth_needs_a_flag() {
    let root = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubedav"))
        .args([
            "--target=all",
            "--listen",
            "0.0.0.0:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--root",
        ])
        .arg(root.path())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("without authentication") && stderr.contains("--allow-unauthenticated"),
        "{stderr}"
    );
}
