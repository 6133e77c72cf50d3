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
