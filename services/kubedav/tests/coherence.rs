//! Many fileio replicas on one storage, and two gateways in front of them: a change
//! through either gateway, whichever replica served it, is seen at once through the
//! other, although both gateways keep copies of what they read. On a bucket of a real S3
//! server (versitygw) and on one directory shared by the replicas (as a ReadWriteMany
//! volume is), with the replicas registered in a real Redis (`--registry`) and
//! locks on it too. The same holds for two all-in-one processes sharing the storage and
//! the locks. Switched off (each gateway talking to its own replica without the
//! registry, or all-in-one processes whose locks are not shared), the same checks see
//! stale answers: `the_checks_see_stale_copies_without_the_registry` shows it.

mod common;

use common::{Process, client, start_gateway, start_service};
use kubedav_testkit::{RedisServer, S3Server};
use reqwest::{Method, StatusCode};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Where the replicas keep the files.
#[derive(Clone, Copy, Debug)]
enum Storage {
    /// One directory, shared by every replica.
    SharedDirectory,
    /// A prefix of a bucket on versitygw.
    Bucket,
}

/// How the processes are put together.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Wiring {
    /// Two fileio replicas and two locks replicas registered in Redis, two gateways
    /// following the registry.
    Registry,
    /// Two fileio replicas, each gateway talking to its own one, no registry: the
    /// coherence across replicas switched off.
    Apart,
    /// Replicas registered as with `Registry`, but each gateway talking to its own one
    /// without following the registry (a misconfigured gateway): the replicas give it
    /// no lease, so it keeps nothing, and stays coherent.
    Unfollowed,
    /// Two all-in-one processes, locks shared through Redis.
    AllInOne,
    /// Two all-in-one processes, each with its own locks in memory (so each keeps
    /// copies of the bucket as if it were alone): switched off.
    AllInOneApart,
}

struct Fleet {
    gateways: Vec<SocketAddr>,
    /// The gateway processes, when they run apart from the services.
    gateway_processes: Vec<Process>,
    gateway_admin: Vec<SocketAddr>,
    replicas: Vec<Process>,
    replica_admin: Vec<SocketAddr>,
    _others: Vec<Process>,
    _s3: Option<S3Server>,
    _redis: RedisServer,
    _dir: tempfile::TempDir,
}

impl Fleet {
    async fn start(storage: Storage, wiring: Wiring, gateway_args: &[&str]) -> Fleet {
        let redis = RedisServer::start();
        let dir = tempfile::tempdir().unwrap();
        let (storage_args, envs, s3) = match storage {
            Storage::SharedDirectory => {
                let root: PathBuf = dir.path().join("root");
                std::fs::create_dir(&root).unwrap();
                (
                    vec!["--root".to_owned(), root.display().to_string()],
                    Vec::new(),
                    None,
                )
            }
            Storage::Bucket => {
                let s3 = S3Server::start("files");
                let args = vec!["--storage".to_owned(), format!("s3://{}/served", s3.bucket())];
                (args, common::s3_envs(&s3), Some(s3))
            }
        };
        let registry = ["--registry".to_owned(), redis.url(0)];
        let shared_locks = ["--lock-store".to_owned(), redis.url(0)];
        let extra: Vec<String> = gateway_args.iter().map(|s| s.to_string()).collect();
        let mut fleet = Fleet {
            gateways: Vec::new(),
            gateway_processes: Vec::new(),
            gateway_admin: Vec::new(),
            replicas: Vec::new(),
            replica_admin: Vec::new(),
            _others: Vec::new(),
            _s3: s3,
            _redis: redis,
            _dir: dir,
        };
        if matches!(wiring, Wiring::AllInOne | Wiring::AllInOneApart) {
            for name in ["all-a", "all-b"] {
                let mut args = vec![
                    "--target=all".to_owned(),
                    "--listen".into(),
                    "127.0.0.1:0".into(),
                    "--admin-listen".into(),
                    "127.0.0.1:0".into(),
                ];
                args.extend(storage_args.iter().cloned());
                if wiring == Wiring::AllInOne {
                    args.extend(shared_locks.iter().cloned());
                }
                args.extend(extra.iter().cloned());
                let mut all = Process::spawn(name, &args, &envs);
                fleet.gateways.push(all.listening("gateway HTTP").await);
                fleet.gateway_admin.push(all.listening("all admin").await);
                fleet._others.push(all);
            }
            return fleet;
        }
        let mut replica_grpc = Vec::new();
        for name in ["fileio-a", "fileio-b"] {
            let mut args = storage_args.clone();
            if matches!(wiring, Wiring::Registry | Wiring::Unfollowed) {
                args.extend(registry.iter().cloned());
            }
            let (process, grpc, admin) = start_service(name, "fileio", &args, &envs).await;
            fleet.replicas.push(process);
            replica_grpc.push(grpc);
            fleet.replica_admin.push(admin);
        }
        let mut locks_grpc = Vec::new();
        for name in ["locks-a", "locks-b"] {
            let mut args = shared_locks.to_vec();
            if matches!(wiring, Wiring::Registry | Wiring::Unfollowed) {
                args.extend(registry.iter().cloned());
            }
            let (locks, grpc, admin) = start_service(name, "locks", &args, &[]).await;
            fleet._others.push(locks);
            locks_grpc.push(grpc);
            fleet.replica_admin.push(admin);
        }
        for (i, name) in ["gateway-a", "gateway-b"].into_iter().enumerate() {
            let mut args = vec![
                "--fileio-url".to_owned(),
                format!("http://{}", replica_grpc[i]),
                "--locks-url".to_owned(),
                format!("http://{}", locks_grpc[i]),
                "--markdown-url".to_owned(),
                String::new(),
            ];
            if wiring == Wiring::Registry {
                args.extend(registry.iter().cloned());
            }
            args.extend(extra.iter().cloned());
            let (process, http, admin) = start_gateway(name, &args, &[]).await;
            fleet.gateways.push(http);
            fleet.gateway_admin.push(admin);
            fleet.gateway_processes.push(process);
        }
        // Registered replicas (fileio, then locks) answer changes only once every
        // gateway's view has seen them: their readiness says when.
        for admin in &fleet.replica_admin {
            let ready = common::eventually_async(Duration::from_secs(20), || async {
                let url = format!("http://{admin}/readyz");
                client()
                    .get(&url)
                    .send()
                    .await
                    .is_ok_and(|r| r.status() == StatusCode::OK)
            })
            .await;
            assert!(ready, "fileio replica at {admin} never became ready");
        }
        fleet
    }

    fn url(&self, gateway: usize, path: &str) -> String {
        format!("http://{}{path}", self.gateways[gateway])
    }

    /// Requests gateway `gateway` answered from what it kept in `cache`.
    async fn answered_from_copies(&self, gateway: usize, cache: &str) -> f64 {
        common::metric_text(self.gateway_admin[gateway])
            .await
            .lines()
            .filter(|line| {
                line.starts_with("kubedav_cache_lookups_total{")
                    && line.contains(r#"result="hit""#)
                    && line.contains(&format!(r#"cache="gateway_{cache}""#))
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

async fn send(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> (StatusCode, String) {
    let mut request = client().request(Method::from_bytes(method.as_bytes()).unwrap(), url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.body(body.to_owned()).send().await.unwrap();
    let status = response.status();
    (status, response.text().await.unwrap())
}

const PROPPATCH: &str = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:test"><D:set><D:prop><Z:colour>VALUE</Z:colour></D:prop></D:set></D:propertyupdate>"#;
const PROPFIND_COLOUR: &str = r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:Z="urn:test"><D:prop><Z:colour/></D:prop></D:propfind>"#;
const PROPFIND_LOCKS: &str =
    r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>"#;
const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>coherence</D:owner></D:lockinfo>"#;

/// What a check saw through the second gateway that the first one had changed before.
#[derive(Debug)]
struct Stale {
    what: String,
}

/// Changes through gateway `from` what gateway `to` has just read (and so keeps), and
/// reads it again through `to`, for PUT, PROPPATCH, MOVE, DELETE, MKCOL, LOCK and
/// UNLOCK, several rounds so that either replica serves each side. Returns the stale
/// answers seen.
async fn stale_answers(fleet: &Fleet, from: usize, to: usize, rounds: usize) -> Vec<Stale> {
    let mut stale = Vec::new();
    let mut saw = |ok: bool, what: String| {
        if !ok {
            stale.push(Stale { what });
        }
    };
    for round in 0..rounds {
        let file = format!("/r{round}-{from}.txt");
        let moved = format!("/r{round}-{from}-moved.txt");
        // PUT over a kept copy.
        assert!(
            send("PUT", &fleet.url(from, &file), &[], "one")
                .await
                .0
                .is_success()
        );
        for _ in 0..2 {
            assert_eq!(send("GET", &fleet.url(to, &file), &[], "").await.1, "one");
        }
        assert!(
            send("PUT", &fleet.url(from, &file), &[], "two")
                .await
                .0
                .is_success()
        );
        let (_, body) = send("GET", &fleet.url(to, &file), &[], "").await;
        saw(
            body == "two",
            format!("round {round}: GET after PUT gave {body:?}"),
        );
        // PROPPATCH over a kept resource.
        let depth0 = [("Depth", "0")];
        let patch = |value: &str| PROPPATCH.replace("VALUE", value);
        assert_eq!(
            send("PROPPATCH", &fleet.url(from, &file), &[], &patch("red"))
                .await
                .0,
            207
        );
        let (_, body) = send("PROPFIND", &fleet.url(to, &file), &depth0, PROPFIND_COLOUR).await;
        assert!(body.contains(">red<"), "{body}");
        assert_eq!(
            send("PROPPATCH", &fleet.url(from, &file), &[], &patch("blue"))
                .await
                .0,
            207
        );
        let (_, body) = send("PROPFIND", &fleet.url(to, &file), &depth0, PROPFIND_COLOUR).await;
        saw(
            body.contains(">blue<"),
            format!("round {round}: PROPFIND after PROPPATCH: {body}"),
        );
        // MOVE over a kept listing and a kept file.
        let depth1 = [("Depth", "1")];
        let (_, listing) = send("PROPFIND", &fleet.url(to, "/"), &depth1, "").await;
        assert!(listing.contains(&file[1..]), "{listing}");
        let destination = fleet.url(from, &moved);
        let (status, _) = send(
            "MOVE",
            &fleet.url(from, &file),
            &[("Destination", &destination)],
            "",
        )
        .await;
        assert!(status.is_success(), "MOVE: {status}");
        let (status, _) = send("GET", &fleet.url(to, &file), &[], "").await;
        saw(
            status == 404,
            format!("round {round}: GET of a moved file: {status}"),
        );
        let (_, listing) = send("PROPFIND", &fleet.url(to, "/"), &depth1, "").await;
        saw(
            listing.contains(&moved[1..]) && !listing.contains(&format!("{}<", &file[1..])),
            format!("round {round}: listing after MOVE: {listing}"),
        );
        // DELETE over a kept file.
        assert_eq!(send("GET", &fleet.url(to, &moved), &[], "").await.1, "two");
        assert!(
            send("DELETE", &fleet.url(from, &moved), &[], "")
                .await
                .0
                .is_success()
        );
        let (status, _) = send("GET", &fleet.url(to, &moved), &[], "").await;
        saw(
            status == 404,
            format!("round {round}: GET of a deleted file: {status}"),
        );
        // MKCOL over a kept 404.
        let collection = format!("/c{round}-{from}/");
        assert_eq!(
            send("PROPFIND", &fleet.url(to, &collection), &depth0, "").await.0,
            404
        );
        assert_eq!(send("MKCOL", &fleet.url(from, &collection), &[], "").await.0, 201);
        let (status, _) = send("PROPFIND", &fleet.url(to, &collection), &depth0, "").await;
        saw(
            status == 207,
            format!("round {round}: PROPFIND of a new collection: {status}"),
        );
        // LOCK and UNLOCK: a lock taken through one gateway binds the other at once, and
        // shows in its lock discovery, which it keeps.
        assert!(
            send("PUT", &fleet.url(from, &file), &[], "three")
                .await
                .0
                .is_success()
        );
        assert!(
            send("PUT", &fleet.url(to, &file), &[], "four")
                .await
                .0
                .is_success()
        );
        for _ in 0..2 {
            let (_, body) = send("PROPFIND", &fleet.url(to, &file), &depth0, PROPFIND_LOCKS).await;
            assert!(!body.contains("opaquelocktoken:"), "{body}");
        }
        let response = client()
            .request(Method::from_bytes(b"LOCK").unwrap(), fleet.url(from, &file))
            .body(LOCKINFO)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let token = response.headers()["lock-token"].to_str().unwrap().to_owned();
        let (_, body) = send("PROPFIND", &fleet.url(to, &file), &depth0, PROPFIND_LOCKS).await;
        saw(
            body.contains(token.trim_matches(['<', '>'])),
            format!("round {round}: lockdiscovery after LOCK: {body}"),
        );
        let (status, _) = send("PUT", &fleet.url(to, &file), &[], "five").await;
        saw(
            status == 423,
            format!("round {round}: PUT on a file locked elsewhere: {status}"),
        );
        let (status, _) = send("UNLOCK", &fleet.url(from, &file), &[("Lock-Token", &token)], "").await;
        assert_eq!(status, 204);
        let (_, body) = send("PROPFIND", &fleet.url(to, &file), &depth0, PROPFIND_LOCKS).await;
        saw(
            !body.contains("opaquelocktoken:"),
            format!("round {round}: lockdiscovery after UNLOCK: {body}"),
        );
        let (status, _) = send("PUT", &fleet.url(to, &file), &[], "six").await;
        saw(
            status.is_success(),
            format!("round {round}: PUT after UNLOCK elsewhere: {status}"),
        );
        assert!(
            send("DELETE", &fleet.url(from, &file), &[], "")
                .await
                .0
                .is_success()
        );
    }
    stale
}

/// Waits until both gateways serve a file from their copies: a fresh registry's first
/// epoch keeps them from it for a registration's lifetime (docs/architecture.md, "When
/// Redis loses registrations"). Returns the hits so far, per gateway and cache.
async fn copies_served(fleet: &Fleet) -> Vec<f64> {
    assert!(
        send("PUT", &fleet.url(0, "/warm.txt"), &[], "warm")
            .await
            .0
            .is_success()
    );
    for gateway in 0..2 {
        let served = kubedav_testkit::eventually(Duration::from_secs(10), || async {
            send("GET", &fleet.url(gateway, "/warm.txt"), &[], "").await;
            fleet.answered_from_copies(gateway, "file").await > 0.0
        })
        .await;
        assert!(served, "gateway {gateway} never served a kept copy");
    }
    let mut hits = Vec::new();
    for gateway in 0..2 {
        for cache in ["file", "resource", "locks"] {
            hits.push(fleet.answered_from_copies(gateway, cache).await);
        }
    }
    hits
}

/// Changes through gateway `from` a file whose `Stat` gateway `to` keeps (once the
/// file's change time has settled, its `Stat` carries a validator and is kept), and asks
/// `to` for it again with HEAD. Returns the stale answer, if any.
async fn stale_stats(fleet: &Fleet, from: usize, to: usize) -> Vec<Stale> {
    let file = format!("/settled-{from}.txt");
    assert!(
        send("PUT", &fleet.url(from, &file), &[], "one")
            .await
            .0
            .is_success()
    );
    let length = |url: String| async move {
        let response = client().head(url).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.headers()["content-length"].to_str().unwrap().to_owned()
    };
    let before = fleet.answered_from_copies(to, "stat").await;
    let kept = kubedav_testkit::eventually(Duration::from_secs(10), || async {
        assert_eq!(length(fleet.url(to, &file)).await, "3");
        fleet.answered_from_copies(to, "stat").await > before
    })
    .await;
    assert!(kept, "gateway {to} never answered a HEAD from a kept Stat");
    assert!(
        send("PUT", &fleet.url(from, &file), &[], "three")
            .await
            .0
            .is_success()
    );
    let now = length(fleet.url(to, &file)).await;
    if now == "5" {
        Vec::new()
    } else {
        vec![Stale {
            what: format!("HEAD after PUT over a kept Stat: Content-Length {now}"),
        }]
    }
}

async fn coherent(storage: Storage, wiring: Wiring) {
    let fleet = Fleet::start(storage, wiring, &[]).await;
    let before = match wiring {
        Wiring::Registry => copies_served(&fleet).await,
        _ => vec![0.0; 6],
    };
    let mut stale = stale_answers(&fleet, 0, 1, 4).await;
    stale.extend(stale_answers(&fleet, 1, 0, 4).await);
    if wiring == Wiring::Registry {
        stale.extend(stale_stats(&fleet, 0, 1).await);
    }
    assert!(
        stale.is_empty(),
        "{storage:?}, {wiring:?}: stale answers: {stale:#?}"
    );
    if wiring == Wiring::Registry {
        // Coherent because the copies are dropped in time, not because none were kept.
        for gateway in 0..2 {
            for (n, cache) in ["file", "resource", "locks"].into_iter().enumerate() {
                let hits = fleet.answered_from_copies(gateway, cache).await;
                assert!(
                    hits > before[gateway * 3 + n],
                    "{storage:?}: gateway {gateway} answered nothing from its {cache} copies"
                );
            }
        }
    }
}

#[tokio::test]
async fn replicas_on_a_bucket_are_coherent_through_every_gateway() {
    coherent(Storage::Bucket, Wiring::Registry).await;
}

#[tokio::test]
async fn replicas_on_a_shared_directory_are_coherent_through_every_gateway() {
    coherent(Storage::SharedDirectory, Wiring::Registry).await;
}

#[tokio::test]
async fn all_in_one_processes_on_a_bucket_are_coherent() {
    coherent(Storage::Bucket, Wiring::AllInOne).await;
}

#[tokio::test]
async fn all_in_one_processes_on_a_shared_directory_are_coherent() {
    coherent(Storage::SharedDirectory, Wiring::AllInOne).await;
}

/// A gateway that talks to one registered replica of each service without following
/// the registry (started without `--registry`) would hold a lease from that replica
/// alone, and not hear of changes made through the others. The replicas refuse it a
/// lease instead, and it says why: it keeps nothing, and serves nothing stale.
#[tokio::test]
async fn gateways_that_do_not_follow_the_registry_get_no_lease_and_serve_nothing_stale() {
    for storage in [Storage::Bucket, Storage::SharedDirectory] {
        let mut fleet = Fleet::start(storage, Wiring::Unfollowed, &[]).await;
        for gateway in &mut fleet.gateway_processes {
            for service in ["fileio", "locks"] {
                let line = gateway
                    .logged(&format!("{service} replica is one of several"))
                    .await;
                assert!(
                    line.contains("no lease offered") && line.contains("--registry"),
                    "{storage:?}: the gateway says why it keeps nothing of {service}'s answers: {line}"
                );
            }
        }
        let mut stale = stale_answers(&fleet, 0, 1, 2).await;
        stale.extend(stale_answers(&fleet, 1, 0, 2).await);
        assert!(stale.is_empty(), "{storage:?}: stale answers: {stale:#?}");
        for gateway in 0..2 {
            for cache in ["file", "resource", "locks"] {
                assert_eq!(
                    fleet.answered_from_copies(gateway, cache).await,
                    0.0,
                    "{storage:?}: gateway {gateway} answered from {cache} copies without a lease"
                );
            }
        }
    }
}

/// The checks above can fail: with the coherence switched off they see stale copies.
#[tokio::test]
async fn the_checks_see_stale_copies_without_the_registry() {
    for (storage, wiring) in [
        (Storage::Bucket, Wiring::Apart),
        (Storage::SharedDirectory, Wiring::Apart),
        (Storage::Bucket, Wiring::AllInOneApart),
    ] {
        let fleet = Fleet::start(storage, wiring, &[]).await;
        let stale = stale_answers(&fleet, 0, 1, 1).await;
        assert!(
            stale.iter().any(|s| s.what.contains("GET after PUT")),
            "{storage:?}, {wiring:?}: no stale copy was seen with the coherence off: {stale:#?}"
        );
    }
}

/// A replica paused with SIGSTOP. A write already sent to it waits for
/// `--rpc-timeout-seconds` (3 here), then 504. Once its lease has lapsed (0.5 s), writes
/// go to the other replica and complete as usual, long before its registration lapses
/// (3.25 s). No gateway serves a stale copy meanwhile, and none shows the paused
/// replica's write once it runs again.
#[tokio::test]
async fn a_paused_replica_delays_writes_by_a_bounded_time_and_nothing_stale_is_served() {
    for storage in [Storage::Bucket, Storage::SharedDirectory] {
        let mut fleet = Fleet::start(storage, Wiring::Registry, &["--rpc-timeout-seconds", "3"]).await;
        let url = |gateway: usize| fleet.url(gateway, "/p.txt");
        assert!(send("PUT", &url(0), &[], "before").await.0.is_success());
        assert_eq!(send("GET", &url(1), &[], "").await.1, "before");
        let paused = fleet.replicas[1].pid();
        common::stop(paused);
        let paused_at = Instant::now();
        // Writes at once, three per gateway: those that reach the paused replica hang.
        let early = [0, 1, 0, 1, 0, 1].map(|gateway| {
            let url = url(gateway);
            tokio::spawn(async move {
                let sent = Instant::now();
                let (status, _) = send("PUT", &url, &[], "early").await;
                (status, sent.elapsed())
            })
        });
        // What this test is about is the lapse of the paused replica's lease; nothing
        // reports it, so wait it out (twice over).
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut last_written = None;
        let mut slowest = Duration::ZERO;
        for round in 0..12 {
            let body = format!("during {round}");
            let sent = Instant::now();
            let (status, _) = send("PUT", &url(round % 2), &[], &body).await;
            slowest = slowest.max(sent.elapsed());
            assert!(
                status.is_success(),
                "{storage:?}: a write after the lease lapsed got {status}"
            );
            last_written = Some(body.clone());
            let (read, seen) = send("GET", &url(1 - round % 2), &[], "").await;
            assert!(
                read.is_success(),
                "{storage:?}: a read after the lease lapsed got {read}"
            );
            assert_eq!(
                seen, body,
                "{storage:?}: a stale copy was served while a replica was paused"
            );
        }
        let batch = paused_at.elapsed();
        assert!(
            batch < kubedav_kit::registry::TTL,
            "{storage:?}: the writes took until {batch:?} after the pause: they waited for the \
             registration to lapse, not the lease"
        );
        let mut early_slowest = Duration::ZERO;
        for write in early {
            let (status, took) = write.await.unwrap();
            early_slowest = early_slowest.max(took);
            assert!(
                status.is_success() || status == 504,
                "{storage:?}: a write sent as the replica paused got {status}"
            );
            // The bound: --rpc-timeout-seconds, and a margin for a loaded machine.
            assert!(
                took < Duration::from_secs(3 + 5),
                "{storage:?}: a write took {took:?}"
            );
        }
        common::signal(paused, rustix::process::Signal::CONT);
        // Once the replica runs again, neither gateway shows anything but the last write
        // answered: not the early one the paused replica had been sent.
        let last_written = last_written.unwrap();
        let agreed = common::eventually_async(Duration::from_secs(10), || async {
            send("PUT", &url(0), &[], "after").await.0.is_success()
        })
        .await;
        assert!(agreed, "{storage:?}: writes failed after the replica ran again");
        for gateway in 0..2 {
            let (_, seen) = send("GET", &url(gateway), &[], "").await;
            assert_eq!(seen, "after", "{storage:?}: gateway {gateway} after the pause");
        }
        eprintln!(
            "{storage:?}: writes sent as the replica paused took up to {early_slowest:?}; 12 writes \
             after its lease lapsed, slowest {slowest:?}, all done {batch:?} after the pause \
             (last {last_written:?})"
        );
        drop(fleet.replicas.remove(1));
    }
}

/// Locks in memory while fileio has replicas: the gateway refuses to run, and says why.
#[tokio::test]
async fn a_gateway_over_replicas_refuses_locks_kept_in_memory() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let registry = ["--registry".to_owned(), redis.url(0)];
    let mut args = vec!["--root".to_owned(), dir.path().display().to_string()];
    args.extend(registry.iter().cloned());
    let (_fileio, fileio_grpc, _) = start_service("fileio", "fileio", &args, &[]).await;
    let (_locks, locks_grpc, _) = start_service("locks", "locks", &[], &[]).await;
    let mut gateway = Process::spawn(
        "gateway",
        &[
            "--target=gateway".to_owned(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--admin-listen".into(),
            "127.0.0.1:0".into(),
            "--fileio-url".into(),
            format!("http://{fileio_grpc}"),
            "--locks-url".into(),
            format!("http://{locks_grpc}"),
            "--registry".into(),
            redis.url(0),
        ],
        &[],
    );
    let line = gateway.logged("locks in memory").await;
    assert!(line.contains("--lock-store redis://"), "{line}");
    let status = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(status) = gateway.child.try_wait().unwrap() {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the gateway exits");
    assert!(!status.success());

    let mut all = Process::spawn(
        "all",
        &[
            "--target=all".to_owned(),
            "--root".into(),
            dir.path().display().to_string(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--registry".into(),
            redis.url(0),
        ],
        &[],
    );
    let line = all.logged("--registry").await;
    assert!(line.contains("--lock-store redis://"), "{line}");

    let mut locks = Process::spawn(
        "locks",
        &[
            "--target=locks".to_owned(),
            "--grpc-listen".into(),
            "127.0.0.1:0".into(),
            "--registry".into(),
            redis.url(0),
        ],
        &[],
    );
    let line = locks.logged("--registry").await;
    assert!(line.contains("--lock-store redis://"), "{line}");
}
