//! kubedav's Redis connection behind real Sentinels follows a failover: commands go to
//! the master the Sentinels name; when it is killed they fail (none hangs past the
//! response timeout) until a replica is master, then go to it by themselves, and what was
//! replicated before is there. And a managed Redis (TLS, a password) works through the
//! same settings.

use kubedav_kit::redis::{RESPONSE_TIMEOUT, connect};
use kubedav_testkit::sentinel::{SentinelGroup, role};
use std::time::{Duration, Instant};

async fn set(redis: &kubedav_kit::redis::Redis, key: &str, value: &str) -> redis::RedisResult<()> {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(&mut redis.clone())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_follow_a_failover_to_the_new_master() {
    let mut group = SentinelGroup::start();
    let redis = connect(&group.url(0)).expect("a Sentinel URL");
    set(&redis, "before", "1").await.expect("a write to the master");
    // Replicated to both replicas before the master dies (replication is asynchronous:
    // what the last lag held would be lost, docs/deploy.md).
    let replicas: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(1500)
        .query_async(&mut redis.clone())
        .await
        .unwrap();
    assert_eq!(replicas, 2);
    let old = group.master_port().unwrap();

    let killed = Instant::now();
    let recovered_in = tokio::task::block_in_place(|| group.kill_master());
    let new = group.master_port().unwrap();
    assert_ne!(new, old);

    // The first commands may still meet the dead master; each fails within the response
    // timeout, and a later one reaches the new master without a restart.
    let mut failed = 0;
    loop {
        let started = Instant::now();
        match set(&redis, "after", "2").await {
            Ok(()) => break,
            Err(e) => {
                failed += 1;
                assert!(
                    started.elapsed() < RESPONSE_TIMEOUT * 3,
                    "a command hung {:?}: {e}",
                    started.elapsed()
                );
                assert!(failed < 50, "still failing after {failed} tries: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    eprintln!(
        "failover: master {old} → {new} in {recovered_in:?} (Sentinels); {failed} commands failed; \
         writes again {:?} after the kill",
        killed.elapsed()
    );
    let mut direct = redis::Client::open(SentinelGroup::server_url(new, 0))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let after: Option<String> = redis::cmd("GET")
        .arg("after")
        .query_async(&mut direct)
        .await
        .unwrap();
    assert_eq!(after.as_deref(), Some("2"), "the write went to the new master");
    let before: Option<String> = redis::cmd("GET")
        .arg("before")
        .query_async(&mut redis.clone())
        .await
        .unwrap();
    assert_eq!(before.as_deref(), Some("1"), "what was replicated survived");
    assert_eq!(role(new).as_deref(), Some("master"));
}

/// A hung master (SIGSTOP: connections to it open, and nothing answers) costs each
/// command a bounded wait, however many wait together. The Sentinels here take 4 s to
/// judge it down (bitnami's take 60), so for seconds they still name it: rounds of 20
/// commands at once run until a replica is master, and each ends within the bound
/// docs/deploy.md states (asking the Sentinels and checking the master 2 s, connecting
/// 1 s, the answer 2 s); then writes go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_master_costs_each_command_a_bounded_wait() {
    let mut group = SentinelGroup::start_noticing_after(Duration::from_secs(4));
    let redis = connect(&group.url(0)).expect("a Sentinel URL");
    set(&redis, "before", "1").await.expect("a write to the master");
    let bound = Duration::from_secs(5) + Duration::from_millis(500);
    let failed_over = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let frozen = {
        let (redis, failed_over) = (redis.clone(), failed_over.clone());
        tokio::spawn(async move {
            let mut waits = Vec::new();
            let mut round = 0;
            while !failed_over.load(std::sync::atomic::Ordering::Relaxed) {
                let commands = (0..20).map(|n| {
                    let redis = redis.clone();
                    async move {
                        let started = Instant::now();
                        let _ = set(&redis, &format!("k{round}.{n}"), "v").await;
                        started.elapsed()
                    }
                });
                waits.extend(futures_util::future::join_all(commands).await);
                round += 1;
            }
            waits
        })
    };
    let recovered_in = tokio::task::block_in_place(|| group.freeze_master());
    failed_over.store(true, std::sync::atomic::Ordering::Relaxed);
    let waits = frozen.await.unwrap();
    let longest = waits.iter().max().copied().unwrap_or_default();
    eprintln!(
        "hung master: failover in {recovered_in:?}; longest of {} commands {longest:?}",
        waits.len()
    );
    assert!(longest <= bound, "a command waited {longest:?}, past {bound:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while set(&redis, "after", "2").await.is_err() {
        assert!(
            Instant::now() < deadline,
            "no write went through after the failover"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A managed Redis's way: TLS with a CA of its own and a password. With the CA file the
/// commands go through; without it the server's certificate is refused, and the error
/// says the connection failed, not that the URL is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_password_and_a_ca_of_its_own() {
    let server = kubedav_testkit::RedisServer::start_tls("s3cret");
    let ca = server.ca_file();
    let redis = kubedav_kit::redis::connect_trusting(&server.url(0), Some(&ca)).expect("a rediss:// URL");
    set(&redis, "over-tls", "1").await.expect("a write over TLS");
    let got: Option<String> = redis::cmd("GET")
        .arg("over-tls")
        .query_async(&mut redis.clone())
        .await
        .unwrap();
    assert_eq!(got.as_deref(), Some("1"));
    let untrusting = connect(&server.url(0)).expect("a rediss:// URL");
    let refused = set(&untrusting, "k", "v").await.unwrap_err();
    assert!(
        refused.to_string().to_lowercase().contains("certificate"),
        "{refused}"
    );
    let wrong =
        kubedav_kit::redis::connect_trusting(&server.url(0).replace("s3cret", "wrong"), Some(&ca)).unwrap();
    let denied = set(&wrong, "k", "v").await.unwrap_err();
    assert!(!denied.to_string().contains("wrong"), "{denied}");
}
