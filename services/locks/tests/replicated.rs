//! The Redis lock store answers a change only once a Redis replica has it
//! (`--redis-replica-acks`, 1 behind Sentinel): a failover then never loses a lock that
//! was granted. A lock no replica acknowledged is refused with 503 and taken back, so it
//! does not linger unseen until its timeout.

use kubedav_api::locks::{DiscoverRequest, LockRequest, Locks, UnlockRequest};
use kubedav_locks::RedisLocks;
use kubedav_testkit::RedisServer;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

async fn locks_on(store: &RedisLocks, path: &str) -> usize {
    let reply = store
        .discover(DiscoverRequest {
            path: path.into(),
            depth: 0,
        })
        .await
        .unwrap();
    reply.resources.iter().map(|r| r.locks.len()).sum()
}

fn lock(path: &str) -> LockRequest {
    LockRequest {
        path: path.into(),
        principal: "alice".into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_no_replica_acknowledged_is_refused_and_taken_back() {
    let master = RedisServer::start();
    let connection = kubedav_kit::redis::connect(&master.url(0))
        .unwrap()
        .with_replica_acks(1);
    let store = RedisLocks::new(connection, "test:", HOUR);

    // The master alone: a failover could lose what it holds.
    let refused = store.lock(lock("/doc.odt")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable);
    assert!(
        refused.message().contains("replica"),
        "the refusal does not say why: {}",
        refused.message()
    );
    assert_eq!(
        locks_on(&store, "/doc.odt").await,
        0,
        "a refused lock lingers in Redis"
    );

    // A replica joins: locks are granted, and unlocked, once it has them.
    let replica = RedisServer::start_replica_of(master.port());
    let granted = kubedav_testkit::eventually(Duration::from_secs(15), || async {
        store.lock(lock("/doc.odt")).await.is_ok()
    })
    .await;
    assert!(granted, "no lock granted with a replica acknowledging");
    let token = store
        .discover(DiscoverRequest {
            path: "/doc.odt".into(),
            depth: 0,
        })
        .await
        .unwrap()
        .resources[0]
        .locks[0]
        .token
        .clone();
    // Answered only once the replica had it.
    let mut on_replica = kubedav_kit::redis::connect(&replica.url(0)).unwrap();
    let kind: String = redis::cmd("TYPE")
        .arg(format!("test:locks:lock:{token}"))
        .query_async(&mut on_replica)
        .await
        .unwrap();
    assert_ne!(kind, "none", "a lock was granted that the replica lacks");
    store
        .unlock(UnlockRequest {
            token,
            path: "/doc.odt".into(),
            principal: "alice".into(),
        })
        .await
        .unwrap();
    assert_eq!(locks_on(&store, "/doc.odt").await, 0);
}
