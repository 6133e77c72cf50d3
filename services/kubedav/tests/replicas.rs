//! Many replicas on one Redis, each a separate process: two gateways, each talking to its
//! own locks replica (so that anything one gateway sees of the other's locks went
//! through Redis), one fileio, and one or two auth replicas. A lock taken through one
//! gateway binds the other, survives restarts of the locks replicas and expires at its
//! timeout; racing LOCKs have one winner; a Redis outage fails writes closed while reads
//! go on, and service resumes by itself; auth replicas share verifications. Locks kept
//! behind Sentinel follow a failover.

mod common;

use common::{Process, client, metric_sum, start_gateway, start_service};
use kubedav_testkit::RedisServer;
use reqwest::{Method, RequestBuilder, StatusCode};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const SECRET: &str = "a shared secret of the auth replicas";
const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>test</D:owner></D:lockinfo>"#;

/// One deployment: Redis, fileio, two locks replicas, `auth` auth replicas and two
/// gateways. Gateway `i` talks to locks replica `i` and auth replica `i % auth`.
struct Fleet {
    redis: RedisServer,
    dir: tempfile::TempDir,
    locks: Vec<Process>,
    locks_admin: Vec<SocketAddr>,
    auth_admin: Vec<SocketAddr>,
    gateway_http: Vec<SocketAddr>,
    gateway_admin: Vec<SocketAddr>,
    _others: Vec<Process>,
}

impl Fleet {
    async fn start(auth_replicas: usize) -> Fleet {
        let redis = RedisServer::start();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let users = common::users_file(dir.path(), &[("alice", "alice-pw"), ("bob", "bob-pw")]);
        let redis_env = vec![
            ("KUBEDAV_LOCK_STORE".to_owned(), redis.url(0)),
            ("KUBEDAV_AUTH_CACHE_REDIS".to_owned(), redis.url(0)),
            ("KUBEDAV_AUTH_CACHE_SECRET".to_owned(), SECRET.to_owned()),
        ];
        let mut others = Vec::new();
        let root_arg = vec!["--root".to_owned(), root.display().to_string()];
        let (fileio, fileio_grpc, _) = start_service("fileio", "fileio", &root_arg, &[]).await;
        others.push(fileio);
        let (mut locks, mut locks_grpc, mut locks_admin) = (Vec::new(), Vec::new(), Vec::new());
        for name in ["locks-a", "locks-b"] {
            let (process, grpc, admin) = start_service(name, "locks", &[], &redis_env).await;
            locks.push(process);
            locks_grpc.push(grpc);
            locks_admin.push(admin);
        }
        let (mut auth_grpc, mut auth_admin) = (Vec::new(), Vec::new());
        for name in ["auth-a", "auth-b"].into_iter().take(auth_replicas) {
            let args = vec!["--users-file".to_owned(), users.display().to_string()];
            let (process, grpc, admin) = start_service(name, "auth", &args, &redis_env).await;
            others.push(process);
            auth_grpc.push(grpc);
            auth_admin.push(admin);
        }
        let (mut gateway_http, mut gateway_admin) = (Vec::new(), Vec::new());
        for (i, name) in ["gateway-a", "gateway-b"].into_iter().enumerate() {
            let mut args = vec![
                "--fileio-url".to_owned(),
                format!("http://{fileio_grpc}"),
                "--locks-url".to_owned(),
                format!("http://{}", locks_grpc[i]),
                "--markdown-url".to_owned(),
                String::new(),
            ];
            if auth_replicas > 0 {
                args.extend([
                    "--auth-url".to_owned(),
                    format!("http://{}", auth_grpc[i % auth_replicas]),
                ]);
            }
            let (process, http, admin) = start_gateway(name, &args, &[]).await;
            others.push(process);
            gateway_http.push(http);
            gateway_admin.push(admin);
        }
        Fleet {
            redis,
            dir,
            locks,
            locks_admin,
            auth_admin,
            gateway_http,
            gateway_admin,
            _others: others,
        }
    }

    /// A request through gateway `g`, as alice when auth is on.
    fn request(&self, g: usize, method: &str, path: &str) -> RequestBuilder {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let request = client().request(method, format!("http://{}{path}", self.gateway_http[g]));
        if self.auth_admin.is_empty() {
            request
        } else {
            request.basic_auth("alice", Some("alice-pw"))
        }
    }

    async fn status(&self, request: RequestBuilder) -> StatusCode {
        request.send().await.unwrap().status()
    }

    /// An exclusive LOCK through gateway `g`; its token (with angle brackets) if granted.
    async fn lock(&self, g: usize, path: &str, timeout: &str) -> Option<String> {
        let response = self
            .request(g, "LOCK", path)
            .header("timeout", timeout)
            .body(LOCKINFO)
            .send()
            .await
            .unwrap();
        match response.status() {
            StatusCode::OK | StatusCode::CREATED => {
                Some(response.headers()["lock-token"].to_str().unwrap().to_owned())
            }
            StatusCode::LOCKED => None,
            other => panic!("LOCK {path} through gateway {g}: {other}"),
        }
    }

    /// A PUT through gateway `g`, with `token` in the If header if given.
    async fn put(&self, g: usize, path: &str, body: &str, token: Option<&str>) -> StatusCode {
        let mut request = self.request(g, "PUT", path).body(body.to_owned());
        if let Some(token) = token {
            request = request.header("if", format!("({token})"));
        }
        self.status(request).await
    }

    /// A refresh (LOCK without a body) through gateway `g`: the timeout it reports.
    async fn refresh(&self, g: usize, path: &str, token: &str, timeout: &str) -> String {
        let response = self
            .request(g, "LOCK", path)
            .header("if", format!("({token})"))
            .header("timeout", timeout)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "refresh through gateway {g}");
        let body = response.text().await.unwrap();
        let start = body
            .find("<D:timeout>")
            .expect("the refreshed lock reports its timeout")
            + 11;
        body[start..start + body[start..].find('<').unwrap()].to_owned()
    }

    fn disk(&self, relative: &str) -> PathBuf {
        self.dir.path().join("root").join(relative)
    }
}

fn is_success(status: StatusCode) -> bool {
    status == StatusCode::CREATED || status == StatusCode::NO_CONTENT
}

/// A LOCK whose client gave up while Redis was frozen: Redis runs the script once it runs
/// again, and the lock it grants is taken back, since its token reaches no one (it would
/// have refused every other LOCK and write of the file until it timed out, an hour here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_whose_client_gave_up_is_taken_back() {
    let mut fleet = Fleet::start(1).await;
    assert!(is_success(fleet.put(0, "/doc.txt", "content", None).await));
    // Once, so Redis has the LOCK script (a first EVALSHA would come back NOSCRIPT, and
    // the script itself would follow only if the caller still waited).
    let token = fleet.lock(0, "/doc.txt", "Second-60").await.expect("granted");
    let unlock = fleet
        .request(0, "UNLOCK", "/doc.txt")
        .header("lock-token", &token);
    assert_eq!(fleet.status(unlock).await, StatusCode::NO_CONTENT);
    fleet.redis.freeze();
    let lock = fleet
        .request(0, "LOCK", "/doc.txt")
        .header("timeout", "Second-3600")
        .body(LOCKINFO)
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    fleet.redis.thaw();
    assert!(
        lock.as_ref().is_err_and(|e| e.is_timeout()),
        "the LOCK was answered while Redis was frozen: {lock:?}"
    );
    // The script runs as soon as Redis does, and the take-back right after it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while fleet.lock(1, "/doc.txt", "Second-60").await.is_none() {
        assert!(
            Instant::now() < deadline,
            "a lock whose client gave up still refuses every other LOCK"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_taken_through_one_gateway_binds_the_other() {
    let mut fleet = Fleet::start(1).await;
    let token = fleet.lock(0, "/doc.txt", "Second-3600").await.expect("granted");
    assert_eq!(
        fleet.put(1, "/doc.txt", "from B", None).await,
        StatusCode::LOCKED,
        "gateway B honours gateway A's lock"
    );
    assert!(
        fleet.lock(1, "/doc.txt", "Second-60").await.is_none(),
        "and refuses a second one"
    );
    assert!(is_success(fleet.put(1, "/doc.txt", "from B", Some(&token)).await));

    // UNLOCK through B releases it for everyone.
    let unlock = fleet
        .request(1, "UNLOCK", "/doc.txt")
        .header("lock-token", &token);
    assert_eq!(fleet.status(unlock).await, StatusCode::NO_CONTENT);
    assert!(is_success(fleet.put(0, "/doc.txt", "from A", None).await));
    assert!(is_success(fleet.put(1, "/doc.txt", "from B", None).await));

    // A refresh through either gateway extends the lock: X is taken for 2 seconds and
    // refreshed; Y is taken after it for 2 seconds and left alone. Once Y has expired,
    // X's first timeout is over too, and X must still hold.
    let x = fleet.lock(0, "/x.txt", "Second-2").await.expect("granted");
    assert_eq!(fleet.refresh(1, "/x.txt", &x, "Second-3600").await, "Second-3600");
    assert_eq!(fleet.refresh(0, "/x.txt", &x, "Second-3600").await, "Second-3600");
    let y = fleet.lock(0, "/y.txt", "Second-2").await.expect("granted");
    assert_eq!(fleet.put(1, "/y.txt", "late", None).await, StatusCode::LOCKED);

    // Killing and restarting both locks replicas keeps the lock.
    for locks in &mut fleet.locks {
        locks.restart().await;
    }
    assert_eq!(fleet.put(1, "/x.txt", "no token", None).await, StatusCode::LOCKED);
    assert_eq!(fleet.put(0, "/x.txt", "no token", None).await, StatusCode::LOCKED);

    // The lock expires at its timeout.
    let mut expired = false;
    for _ in 0..100 {
        if is_success(fleet.put(1, "/y.txt", "late", None).await) {
            expired = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(expired, "the 2-second lock on y.txt expired");
    assert_eq!(std::fs::read_to_string(fleet.disk("y.txt")).unwrap(), "late");
    let unlock_y = fleet.request(0, "UNLOCK", "/y.txt").header("lock-token", &y);
    assert_eq!(
        fleet.status(unlock_y).await,
        StatusCode::CONFLICT,
        "its token is gone"
    );
    assert_eq!(
        fleet.put(1, "/x.txt", "no token", None).await,
        StatusCode::LOCKED,
        "the refreshed lock outlived its first timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_racing_locks_have_one_winner() {
    let fleet = Fleet::start(0).await;
    assert!(is_success(fleet.put(0, "/race.txt", "", None).await));
    let racers = (0..32).map(|i| {
        fleet
            .request(i % 2, "LOCK", "/race.txt")
            .header("timeout", "Second-600")
            .body(LOCKINFO)
            .send()
    });
    let statuses: Vec<StatusCode> = futures_util::future::join_all(racers)
        .await
        .into_iter()
        .map(|r| r.unwrap().status())
        .collect();
    let winners = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    let losers = statuses.iter().filter(|s| **s == StatusCode::LOCKED).count();
    assert_eq!((winners, losers), (1, 31), "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_fails_writes_closed_and_reads_go_on() {
    let mut fleet = Fleet::start(0).await;
    assert!(is_success(fleet.put(0, "/held.txt", "original", None).await));
    assert!(is_success(fleet.put(0, "/other.txt", "other", None).await));
    let token = fleet.lock(0, "/held.txt", "Second-3600").await.expect("granted");

    fleet.redis.stop();
    for g in 0..2 {
        let writes = [
            fleet.request(g, "PUT", "/held.txt").body("overwritten"),
            fleet.request(g, "PUT", "/free.txt").body("new"),
            fleet.request(g, "DELETE", "/other.txt"),
            fleet.request(g, "MKCOL", "/dir"),
            fleet
                .request(g, "MOVE", "/other.txt")
                .header("destination", format!("http://{}/moved.txt", fleet.gateway_http[g])),
            fleet
                .request(g, "COPY", "/other.txt")
                .header("destination", format!("http://{}/copied.txt", fleet.gateway_http[g])),
            fleet.request(g, "PROPPATCH", "/other.txt").body(
                r#"<D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:k>v</Z:k></D:prop></D:set></D:propertyupdate>"#,
            ),
            fleet.request(g, "LOCK", "/other.txt").body(LOCKINFO),
            fleet.request(g, "UNLOCK", "/held.txt").header("lock-token", &token),
            fleet
                .request(g, "PUT", "/held.txt")
                .header("if", format!("({token})"))
                .body("with token"),
        ];
        for write in writes {
            let response = write.send().await.unwrap();
            let url = response.url().clone();
            assert_eq!(
                response.status(),
                StatusCode::SERVICE_UNAVAILABLE,
                "{url} through gateway {g} while Redis is down"
            );
            assert!(response.headers().contains_key("retry-after"));
        }
    }
    assert_eq!(
        std::fs::read_to_string(fleet.disk("held.txt")).unwrap(),
        "original"
    );
    assert_eq!(std::fs::read_to_string(fleet.disk("other.txt")).unwrap(), "other");
    let mut names = common::names_in(&fleet.disk(""));
    names.retain(|n| !n.starts_with('.'));
    assert_eq!(names, ["held.txt", "other.txt"], "no write slipped through");

    for g in 0..2 {
        let get = fleet.request(g, "GET", "/held.txt").send().await.unwrap();
        assert_eq!(get.status(), StatusCode::OK);
        assert_eq!(get.text().await.unwrap(), "original");
        assert_eq!(
            fleet.status(fleet.request(g, "HEAD", "/held.txt")).await,
            StatusCode::OK
        );
        let propfind = fleet.request(g, "PROPFIND", "/").header("depth", "1");
        assert_eq!(fleet.status(propfind).await, StatusCode::MULTI_STATUS);
        assert!(
            metric_sum(
                fleet.gateway_admin[g],
                "kubedav_gateway_lockdiscovery_unavailable_total"
            )
            .await
                >= 1.0,
            "an empty lockdiscovery is counted"
        );
        let ready = client()
            .get(format!("http://{}/readyz", fleet.gateway_admin[g]))
            .send()
            .await
            .unwrap();
        assert_eq!(
            ready.status(),
            StatusCode::OK,
            "the gateways stay in service for reads"
        );
        let locks_ready = client()
            .get(format!("http://{}/readyz", fleet.locks_admin[g]))
            .send()
            .await
            .unwrap();
        assert_eq!(locks_ready.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            locks_ready.text().await.unwrap().contains("Redis"),
            "the reason names Redis"
        );
    }
    for admin in &fleet.locks_admin {
        assert!(metric_sum(*admin, "kubedav_locks_store_errors_total").await >= 1.0);
    }

    fleet.redis.restart();
    let mut resumed = false;
    for _ in 0..100 {
        let (a, b) = (
            fleet.put(0, "/free.txt", "new", None).await,
            fleet.put(1, "/free.txt", "new", None).await,
        );
        if is_success(a) && is_success(b) {
            resumed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        resumed,
        "writes resume within seconds, with no restart of kubedav"
    );
    assert_eq!(
        fleet.put(1, "/held.txt", "no token", None).await,
        StatusCode::LOCKED,
        "the lock is still there (Redis persisted it)"
    );
    for admin in &fleet.locks_admin {
        let ready = client()
            .get(format!("http://{admin}/readyz"))
            .send()
            .await
            .unwrap();
        assert_eq!(ready.status(), StatusCode::OK);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_replicas_share_verifications() {
    let mut fleet = Fleet::start(2).await;
    let crypts = "kubedav_auth_crypt_verifications_total";
    let (auth_a, auth_b) = (fleet.auth_admin[0], fleet.auth_admin[1]);
    assert_eq!(fleet.status(fleet.request(0, "GET", "/")).await, StatusCode::OK);
    assert_eq!(
        metric_sum(auth_a, crypts).await,
        1.0,
        "replica A verified with crypt"
    );
    assert_eq!(fleet.status(fleet.request(1, "GET", "/")).await, StatusCode::OK);
    assert_eq!(
        metric_sum(auth_b, crypts).await,
        0.0,
        "replica B served A's verification without crypt"
    );
    let hits = metric_text_line(
        auth_b,
        "kubedav_cache_lookups_total{cache=\"auth_shared\",result=\"hit\"}",
    )
    .await;
    assert_eq!(hits, 1.0);

    // A wrong password is never shared, and never accepted.
    let wrong = client()
        .get(format!("http://{}/", fleet.gateway_http[1]))
        .basic_auth("alice", Some("wrong"));
    assert_eq!(fleet.status(wrong).await, StatusCode::UNAUTHORIZED);

    // With Redis down, each replica verifies on its own.
    fleet.redis.stop();
    let bob = |g: usize| {
        client()
            .get(format!("http://{}/", fleet.gateway_http[g]))
            .basic_auth("bob", Some("bob-pw"))
    };
    assert_eq!(fleet.status(bob(1)).await, StatusCode::OK);
    assert_eq!(
        metric_sum(auth_b, crypts).await,
        2.0,
        "the wrong password and bob"
    );
    assert!(
        metric_text_line(
            auth_b,
            "kubedav_cache_lookups_total{cache=\"auth_shared\",result=\"error\"}"
        )
        .await
            >= 1.0,
        "the outage is counted"
    );
    assert_eq!(fleet.status(bob(1)).await, StatusCode::OK);
    assert_eq!(metric_sum(auth_b, crypts).await, 2.0, "from the local cache");
}

/// The value of one exact sample line of an admin port's metrics (0 when absent).
async fn metric_text_line(admin: SocketAddr, sample: &str) -> f64 {
    common::metric_text(admin)
        .await
        .lines()
        .find_map(|line| line.strip_prefix(sample)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Two all-in-one replicas over the volume `root`, with `envs`: each process, and where
/// its gateway listens.
async fn all_in_one_pair(root: &std::path::Path, envs: &[(String, String)]) -> Vec<(Process, SocketAddr)> {
    let mut replicas = Vec::new();
    for name in ["all-a", "all-b"] {
        let args: Vec<String> = [
            "--target=all",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--root",
        ]
        .into_iter()
        .map(str::to_owned)
        .chain([root.display().to_string()])
        .collect();
        let mut process = Process::spawn(name, &args, envs);
        let http = process.listening("gateway HTTP").await;
        replicas.push((process, http));
    }
    replicas
}

/// All-in-one mode takes `--lock-store` too: two monolithic replicas on one volume and
/// one Redis share their locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_in_one_replicas_share_locks_through_redis() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let envs = [("KUBEDAV_LOCK_STORE".to_owned(), redis.url(0))];
    let replicas = all_in_one_pair(dir.path(), &envs).await;
    let url = |i: usize| format!("http://{}/shared.txt", replicas[i].1);
    let c = client();
    let lock = c
        .request(Method::from_bytes(b"LOCK").unwrap(), url(0))
        .body(LOCKINFO)
        .send()
        .await
        .unwrap();
    assert_eq!(lock.status(), StatusCode::CREATED);
    let put = c.put(url(1)).body("from b").send().await.unwrap();
    assert_eq!(
        put.status(),
        StatusCode::LOCKED,
        "replica B honours replica A's lock"
    );
}

/// Locks in a Redis behind Sentinel (`redis+sentinel://`): two all-in-one replicas share
/// them through the master the Sentinels name; when it is killed, writes fail closed
/// (503) until a replica is master (each replica's first command after it meets the
/// dead master once), then LOCK and PUT work again without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_follow_a_sentinel_failover() {
    let mut group = kubedav_testkit::sentinel::SentinelGroup::start();
    let dir = tempfile::tempdir().unwrap();
    let envs = [("KUBEDAV_LOCK_STORE".to_owned(), group.url(0))];
    let replicas = all_in_one_pair(dir.path(), &envs).await;
    let url = |i: usize, name: &str| format!("http://{}/{name}", replicas[i].1);
    let c = client();
    let lock = |i: usize, name: &str| {
        c.request(Method::from_bytes(b"LOCK").unwrap(), url(i, name))
            .body(LOCKINFO)
            .send()
    };
    assert_eq!(lock(0, "a.txt").await.unwrap().status(), StatusCode::CREATED);
    let put = c.put(url(1, "a.txt")).body("from b").send().await.unwrap();
    assert_eq!(put.status(), StatusCode::LOCKED, "replica B honours A's lock");

    let failed_over_in = tokio::task::block_in_place(|| group.kill_master());
    let mut refused = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = lock(0, "b.txt").await.unwrap().status();
        if status == StatusCode::CREATED {
            break;
        }
        assert_eq!(
            status,
            StatusCode::SERVICE_UNAVAILABLE,
            "a write fails closed meanwhile"
        );
        refused += 1;
        assert!(std::time::Instant::now() < deadline, "LOCK still refused");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // B's own connection meets the dead master once (503), then asks the Sentinels.
    let put = loop {
        let status = c
            .put(url(1, "b.txt"))
            .body("from b")
            .send()
            .await
            .unwrap()
            .status();
        if status != StatusCode::SERVICE_UNAVAILABLE {
            break status;
        }
        refused += 1;
        assert!(std::time::Instant::now() < deadline, "PUT still refused");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        put,
        StatusCode::LOCKED,
        "B sees the lock taken after the failover"
    );
    let free = c.put(url(1, "c.txt")).body("free").send().await.unwrap();
    assert_eq!(free.status(), StatusCode::CREATED);
    eprintln!("locks: failover in {failed_over_in:?}; {refused} writes refused (503) meanwhile");
}
