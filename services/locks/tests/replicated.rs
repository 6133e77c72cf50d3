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
    // Unlocked once the replica has it: a replica the machine starves for 250 ms gets
    // the change refused (503, to be retried), as the lock above could be.
    let unlocked = kubedav_testkit::eventually(Duration::from_secs(15), || async {
        let request = UnlockRequest {
            token: token.clone(),
            path: "/doc.odt".into(),
            principal: "alice".into(),
        };
        match store.unlock(request).await {
            Ok(_) => true,
            Err(refused) if refused.code() == tonic::Code::Unavailable => false,
            Err(other) => panic!("unlock: {other}"),
        }
    })
    .await;
    assert!(unlocked, "no unlock acknowledged with a replica");
    assert_eq!(locks_on(&store, "/doc.odt").await, 0);
}

/// A lock Redis made whose answer never came back (the server froze while it waited for
/// a replica) is refused, and taken back once Redis answers again, however long that
/// takes: it does not linger until its timeout, where the client's next LOCK or a DELETE
/// of the folder would meet it. Redis keeps it across the restart (fsynced on every write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_lock_whose_answer_was_lost_is_taken_back_once_redis_answers() {
    let mut master = RedisServer::start();
    let connection = kubedav_kit::redis::connect(&master.url(0))
        .unwrap()
        .with_replica_acks(1);
    let store = std::sync::Arc::new(RedisLocks::new(connection, "test:", HOUR));
    let locking = tokio::spawn({
        let store = store.clone();
        async move { store.lock(lock("/doc.odt")).await }
    });
    // The lock is made, and the master waits for a replica it does not have (250 ms):
    // it freezes meanwhile, so the answer never comes.
    let observer = kubedav_kit::redis::connect(&master.url(0)).unwrap();
    let made = kubedav_testkit::eventually(Duration::from_secs(5), || {
        let mut observer = observer.clone();
        async move {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("test:locks:lock:*")
                .query_async(&mut observer)
                .await
                .unwrap();
            !keys.is_empty()
        }
    })
    .await;
    assert!(made, "the lock was never made");
    master.freeze();
    let refused = locking.await.unwrap().unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{}", refused.message());

    master.restart();
    // Until the store reconnects, a discovery fails: not gone yet.
    let gone = kubedav_testkit::eventually(Duration::from_secs(10), || async {
        let request = DiscoverRequest {
            path: "/doc.odt".into(),
            depth: 0,
        };
        store
            .discover(request)
            .await
            .is_ok_and(|reply| reply.resources.iter().all(|r| r.locks.is_empty()))
    })
    .await;
    assert!(gone, "a refused lock still holds /doc.odt an hour long");
}
