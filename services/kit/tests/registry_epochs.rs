//! The replicas' registry across what can lose its registrations, on real Redis servers:
//! after `FLUSHALL` and after a Sentinel failover a new epoch begins, every replica
//! registers anew (and answers no change until gateways have seen it again), and a
//! gateway serves nothing kept until the epoch has run a registration's lifetime. A
//! renewal that no replica of Redis acknowledged does not count.

use kubedav_kit::redis::connect;
use kubedav_kit::registry::{Registry, Standing, TTL, View};
use kubedav_testkit::RedisServer;
use kubedav_testkit::sentinel::SentinelGroup;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Waits (at most `within`) until `check` holds for what `receiver` shows.
async fn until<T: Clone + std::fmt::Debug>(
    receiver: &mut watch::Receiver<T>,
    within: Duration,
    what: &str,
    check: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        let current = receiver.borrow_and_update().clone();
        if check(&current) {
            return current;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "never within {within:?}: {what}; last {current:?}"
        );
        // Freshness changes without waking followers: look again at least every 50 ms.
        let _ = tokio::time::timeout(left.min(Duration::from_millis(50)), receiver.changed()).await;
    }
}

/// One replica registered and one gateway following, on `redis`.
fn replica_and_gateway(
    redis: kubedav_kit::redis::Redis,
) -> (
    kubedav_kit::registry::Registration,
    watch::Receiver<Standing>,
    watch::Receiver<View>,
) {
    let registry = Registry::on(redis, "test:", "fileio");
    let registration = registry.keep_registered(async { Some("10.0.0.1:9000".to_owned()) });
    let standing = registration.standing();
    (registration, standing, registry.follow())
}

/// After a loss: the replica registered anew (a later generation, not answering changes
/// at first), and the gateway's view is of a new epoch that settles a registration's
/// lifetime after it began, and shows the replica again once it has.
async fn both_begin_anew(
    standing: &mut watch::Receiver<Standing>,
    view: &mut watch::Receiver<View>,
    generation: u64,
    epoch: u64,
    lost_at: Instant,
) {
    let anew = until(standing, TTL * 3, "the replica registers anew", |s| {
        s.generation > generation
    })
    .await;
    assert!(
        anew.open_from > Instant::now() - Duration::from_millis(200),
        "the replica answered changes at once in the new epoch"
    );
    let seen = until(view, TTL * 3, "the gateway sees a new epoch", |v| v.epoch > epoch).await;
    assert!(
        seen.settled_from >= lost_at + TTL - Duration::from_millis(200),
        "the new epoch was relied on {:?} after the loss, before a registration's lifetime",
        seen.settled_from - lost_at
    );
    let settled = until(view, TTL * 3, "the new epoch settles", |v| {
        v.fresh_at(Instant::now()) && !v.addresses.is_empty()
    })
    .await;
    assert_eq!(settled.addresses, ["10.0.0.1:9000"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_and_a_failover_each_begin_a_new_epoch() {
    let mut group = SentinelGroup::start();
    let redis = connect(&group.url(0)).expect("a Sentinel URL");
    let (registration, mut standing, mut view) = replica_and_gateway(redis.clone());
    let opened = until(&mut standing, TTL * 2, "the replica's registration opens", |s| {
        s.open_at(Instant::now())
    })
    .await;
    let first = until(&mut view, TTL * 2, "the gateway sees the replica", |v| {
        v.fresh_at(Instant::now()) && !v.addresses.is_empty()
    })
    .await;
    assert_eq!(first.epoch, 1);

    // FLUSHALL: every registration gone at once.
    let flushed_at = Instant::now();
    let () = redis::cmd("FLUSHALL")
        .query_async(&mut redis.clone())
        .await
        .unwrap();
    both_begin_anew(&mut standing, &mut view, opened.generation, 1, flushed_at).await;

    // The epoch alone begun anew (as a quick failover to a replica that has every
    // registration does): the replica's registration survived, yet gateways may have
    // read the registry without it.
    let generation = standing.borrow().generation;
    let epoch = view.borrow().epoch;
    let lost_at = Instant::now();
    let () = redis::cmd("DEL")
        .arg("test:registry:epoch")
        .query_async(&mut redis.clone())
        .await
        .unwrap();
    both_begin_anew(&mut standing, &mut view, generation, epoch, lost_at).await;

    // A failover the Sentinels are asked for: quick, and the promoted replica has every
    // registration (each was acknowledged by a replica), yet gateways may have read the
    // registry without them: the epoch is new.
    for fail in [SentinelGroup::hand_over, SentinelGroup::kill_master] {
        until(&mut view, TTL * 3, "the epoch settled", |v| {
            v.fresh_at(Instant::now())
        })
        .await;
        let generation = standing.borrow().generation;
        let epoch = view.borrow().epoch;
        let failed_at = Instant::now();
        let took = tokio::task::block_in_place(|| fail(&mut group));
        eprintln!("failover in {took:?}");
        both_begin_anew(&mut standing, &mut view, generation, epoch, failed_at).await;
    }
    registration.leave().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_no_replica_acknowledged_does_not_count() {
    let redis = RedisServer::start();
    let connection = connect(&redis.url(0)).unwrap().with_replica_acks(1);
    let (registration, mut standing, _view) = replica_and_gateway(connection);
    // The master alone: its writes may be lost to a failover, so none counts. Two
    // renewals made (the member's expiry moved), the first one's answer was read.
    let mut direct = connect(&redis.url(0)).unwrap();
    let mut scores = Vec::new();
    let deadline = Instant::now() + TTL * 3;
    while scores.len() < 2 {
        assert!(Instant::now() < deadline, "the replica never tried to register");
        let score: Option<u64> = redis::cmd("ZSCORE")
            .arg("test:fileio:replicas")
            .arg("10.0.0.1:9000")
            .query_async(&mut direct)
            .await
            .unwrap();
        if score.is_some() && scores.last() != Some(&score) {
            scores.push(score);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        standing.borrow().generation,
        0,
        "a renewal no replica acknowledged counted"
    );
    // A replica joins: renewals are acknowledged, and the registration opens.
    let _replica = RedisServer::start_replica_of(redis.port());
    until(
        &mut standing,
        Duration::from_secs(15),
        "the registration opens",
        |s| s.open_at(Instant::now()),
    )
    .await;
    registration.leave().await;
}
