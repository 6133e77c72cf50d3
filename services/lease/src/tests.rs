//! Both ends of the lease protocol, connected in one process (no network), on paused
//! time.

use super::*;
use crate::holder::*;
use crate::service::*;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// A holder connected straight to `leases` (no network), counting what it dropped.
fn holder(leases: &Arc<Leases>, dropped: Arc<AtomicUsize>) -> Arc<Lease> {
    let leases = leases.clone();
    hold(
        "test",
        move |requests: Requests| {
            let events = leases.watch(None, requests.map(Ok).boxed());
            async move { events }
        },
        move |invalidation| {
            if !invalidation.everything {
                dropped.fetch_add(1, Ordering::SeqCst);
            }
        },
    )
}

/// New leases, past their grace period (tests run on paused time: it passes at once).
async fn leases() -> Arc<Leases> {
    let leases = Leases::new("test");
    tokio::time::sleep(LEASE + CLOCK_MARGIN).await;
    leases
}

async fn until_valid(lease: &Lease) {
    for _ in 0..200 {
        if lease.valid() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the lease never became valid");
}

#[tokio::test(start_paused = true)]
async fn a_change_is_answered_only_after_every_holder_dropped_it() {
    let leases = leases().await;
    let dropped = Arc::new(AtomicUsize::new(0));
    let a = holder(&leases, dropped.clone());
    let b = holder(&leases, dropped.clone());
    until_valid(&a).await;
    until_valid(&b).await;
    leases.invalidate(Invalidation::paths(["x".to_owned()])).await;
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        2,
        "both holders dropped x before the change was answered"
    );
    assert!(a.valid() && b.valid(), "acknowledging keeps the lease");
}

#[tokio::test(start_paused = true)]
async fn a_new_service_answers_changes_only_after_a_lease_has_passed() {
    let leases = Leases::new("test");
    let started = Instant::now();
    let changed_at = leases
        .change(async { Ok(Instant::now()) }, |_| Some(Invalidation::everything()))
        .await
        .unwrap();
    assert!(
        changed_at.duration_since(started) >= LEASE,
        "changed while a lease of the previous process may still be in use"
    );
}

#[tokio::test(start_paused = true)]
async fn without_holders_a_change_does_not_wait() {
    let leases = leases().await;
    let started = Instant::now();
    leases.invalidate(Invalidation::everything()).await;
    assert!(started.elapsed() < Duration::from_millis(100));
}

/// A holder's stream, opened with its first ping (not yet answered): the sender of
/// its requests and the events it receives.
fn first_ping(leases: &Arc<Leases>) -> (mpsc::UnboundedSender<WatchRequest>, BoxStream<WatchEvent>) {
    let (requests, mut outlet) = mpsc::unbounded_channel();
    let events = leases
        .watch(
            None,
            futures_util::stream::poll_fn(move |cx| outlet.poll_recv(cx))
                .map(Ok)
                .boxed(),
        )
        .unwrap();
    requests
        .send(WatchRequest {
            ping: 1,
            acknowledged: 0,
        })
        .unwrap();
    (requests, events)
}

#[tokio::test(start_paused = true)]
async fn a_silent_holder_delays_a_change_until_its_lease_runs_out_and_no_longer() {
    let leases = leases().await;
    // A holder that pings once, gets its lease, then never reads or answers again.
    let (requests, mut events) = first_ping(&leases);
    let pong = events.next().await.unwrap().unwrap();
    assert!(matches!(pong.event, Some(watch_event::Event::Pong(_))));
    let started = Instant::now();
    leases.invalidate(Invalidation::paths(["x".to_owned()])).await;
    let waited = started.elapsed();
    assert!(
        waited >= LEASE - Duration::from_millis(10),
        "answered after {waited:?}, before the lease ran out"
    );
    assert!(waited <= LEASE + Duration::from_millis(100), "waited {waited:?}");
    // The holder is now known to hold no lease: the next change does not wait.
    let started = Instant::now();
    leases.invalidate(Invalidation::paths(["y".to_owned()])).await;
    assert!(started.elapsed() < Duration::from_millis(10));
    drop(requests);
}

#[tokio::test(start_paused = true)]
async fn a_holder_that_pings_but_never_acknowledges_loses_its_lease() {
    let leases = leases().await;
    let (requests, mut events) = first_ping(&leases);
    events.next().await.unwrap().unwrap();
    let pinger = tokio::spawn(async move {
        for ping in 2.. {
            tokio::time::sleep(LEASE / 4).await;
            if requests
                .send(WatchRequest {
                    ping,
                    acknowledged: 0,
                })
                .is_err()
            {
                return;
            }
        }
    });
    // Bounded by a timeout, so a regression in wedge detection fails here instead of
    // hanging the suite.
    let waited = tokio::time::timeout(
        2 * LEASE + Duration::from_millis(100),
        leases.invalidate(Invalidation::paths(["x".to_owned()])),
    )
    .await;
    assert!(
        waited.is_ok(),
        "a holder that never acknowledges held the change up past twice its lease"
    );
    pinger.abort();
}

#[tokio::test(start_paused = true)]
async fn an_answer_fetched_across_an_invalidation_is_not_kept() {
    let leases = leases().await;
    let dropped = Arc::new(AtomicUsize::new(0));
    let lease = holder(&leases, dropped);
    until_valid(&lease).await;
    let epoch = lease.epoch();
    leases.invalidate(Invalidation::paths(["x".to_owned()])).await;
    let kept = std::cell::Cell::new(false);
    lease.keep(epoch, || kept.set(true), || kept.set(false));
    assert!(!kept.get(), "an answer from before the change was kept");
    let epoch = lease.epoch();
    lease.keep(epoch, || kept.set(true), || kept.set(false));
    assert!(kept.get(), "an answer from after it was not kept");
}

/// Leases from two replicas, `a` and `b`, followed through a view the test controls.
async fn two_replicas() -> (
    Arc<Leases>,
    Arc<Leases>,
    watch::Sender<View>,
    Arc<ReplicaLeases>,
    Arc<AtomicUsize>,
) {
    let (a, b) = (leases().await, leases().await);
    let fresh = || View {
        addresses: vec!["a".to_owned(), "b".to_owned()],
        fresh_until: Some(Instant::now() + Duration::from_secs(3600)),
        epoch: 1,
        settled_from: Instant::now(),
    };
    let (publish, view) = watch::channel(fresh());
    let services = HashMap::from([("a".to_owned(), a.clone()), ("b".to_owned(), b.clone())]);
    let open: OpenAt = Arc::new(move |address, requests| {
        let events = services[address].watch(None, requests.map(Ok).boxed());
        Box::pin(async move { events })
    });
    let dropped = Arc::new(AtomicUsize::new(0));
    let counted = dropped.clone();
    let replicas = ReplicaLeases::follow(
        "test",
        view,
        open,
        Arc::new(move |invalidation: &Invalidation| {
            if !invalidation.everything {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        }),
    );
    (a, b, publish, replicas, dropped)
}

async fn until(check: impl Fn() -> bool, what: &str) {
    for _ in 0..400 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("never: {what}");
}

#[tokio::test(start_paused = true)]
async fn copies_are_kept_only_under_a_lease_from_every_replica_and_a_fresh_view() {
    let (a, b, publish, replicas, dropped) = two_replicas().await;
    until(|| replicas.valid(), "valid with both leases").await;
    // Either replica's change reaches the holder before it is answered.
    a.invalidate(Invalidation::paths(["x".to_owned()])).await;
    b.invalidate(Invalidation::paths(["y".to_owned()])).await;
    assert_eq!(dropped.load(Ordering::SeqCst), 2);
    // A stale view of the registry keeps nothing.
    publish.send_modify(|view| view.fresh_until = Some(Instant::now()));
    assert!(!replicas.valid(), "served copies under a stale view");
    publish.send_modify(|view| view.fresh_until = Some(Instant::now() + Duration::from_secs(3600)));
    assert!(replicas.valid());
    // A registered replica without a lease keeps nothing either.
    b.close();
    until(|| !replicas.valid(), "invalid once b's lease is gone").await;
    // ... until it leaves the registry.
    publish.send_modify(|view| view.addresses.retain(|a| a == "a"));
    until(|| replicas.valid(), "valid with a alone").await;
    // A replica joining keeps everything from being served until its lease holds.
    publish.send_modify(|view| view.addresses.push("c".to_owned()));
    assert!(
        !replicas.valid(),
        "served copies before holding the new replica's lease"
    );
    drop(a);
}

/// A replica can leave the registry while its lease still holds: cut off from Redis, it
/// may have made a change whose announcement waits for a registration that never comes
/// back. What was kept is dropped before the holder serves anything under the other
/// replicas' leases alone.
#[tokio::test(start_paused = true)]
async fn a_replica_leaving_the_view_under_a_live_lease_drops_everything_before_serving_again() {
    let (a, b, publish, replicas, _) = two_replicas().await;
    until(|| replicas.valid(), "valid with both leases").await;
    let kept_before = replicas.epoch();
    publish.send_modify(|view| view.addresses.retain(|a| a == "a"));
    assert!(
        !replicas.valid() || replicas.epoch() != kept_before,
        "served what was kept under b's lease once b left the view"
    );
    until(|| replicas.valid(), "valid with a alone").await;
    assert_ne!(replicas.epoch(), kept_before, "what was kept was not dropped");
    drop((a, b));
}

#[tokio::test(start_paused = true)]
async fn a_new_registry_epoch_serves_nothing_until_it_settles_and_drops_what_came_before() {
    let (a, _b, publish, replicas, _) = two_replicas().await;
    until(|| replicas.valid(), "valid with both leases").await;
    let kept_before = replicas.epoch();
    // A failover: registrations may be lost, and a replica this gateway no longer sees
    // may still answer changes until its registration lapses.
    let settles = Instant::now() + Duration::from_secs(3);
    publish.send_modify(|view| {
        view.epoch = 2;
        view.settled_from = settles;
    });
    until(
        || replicas.epoch() != kept_before,
        "copies dropped when the epoch is seen",
    )
    .await;
    assert!(!replicas.valid(), "served copies before the new epoch settled");
    // What is fetched meanwhile is dropped too once it settles.
    let fetched_meanwhile = replicas.epoch();
    tokio::time::sleep_until(settles).await;
    until(|| replicas.valid(), "valid once the epoch settled").await;
    until(
        || replicas.epoch() != fetched_meanwhile,
        "what was fetched before the epoch settled dropped",
    )
    .await;
    drop(a);
}

#[tokio::test(start_paused = true)]
async fn a_replica_changes_nothing_until_its_registration_is_open() {
    let leases = leases().await;
    let now = Instant::now();
    let (publish, standing) = watch::channel(Standing {
        generation: 0,
        open_from: now,
        open_until: now,
    });
    leases.admit_through(standing, "kubedav:test:replicas");
    // Never opened: refused after the longest wait, the change not made.
    let made = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let making = made.clone();
    let refused = leases
        .change(
            async move {
                making.store(true, Ordering::SeqCst);
                Ok(())
            },
            |_| None,
        )
        .await;
    assert_eq!(refused.unwrap_err().code(), tonic::Code::Unavailable);
    assert!(
        !made.load(Ordering::SeqCst),
        "a change was made without a registration"
    );
    // Opening later: the change waits for it, then is made.
    let opens = Instant::now() + Duration::from_secs(1);
    let opener = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        publish.send_replace(Standing {
            generation: 1,
            open_from: opens,
            open_until: opens + Duration::from_secs(3),
        });
        publish
    });
    let made_at = leases
        .change(async { Ok(Instant::now()) }, |_| None)
        .await
        .unwrap();
    assert!(made_at >= opens, "made before the registration opened");
    drop(opener.await);
}

/// A change made while the registration lapsed is answered UNAVAILABLE, and with
/// `change_or_undo` it is also taken back; answered in time, it stays.
#[tokio::test(start_paused = true)]
async fn a_change_that_cannot_be_answered_is_undone_when_asked() {
    let leases = leases().await;
    let now = Instant::now();
    let (publish, standing) = watch::channel(Standing {
        generation: 1,
        open_from: now,
        open_until: now + Duration::from_secs(1),
    });
    leases.admit_through(standing, "kubedav:test:replicas");
    let undone = Arc::new(std::sync::Mutex::new(Vec::new()));
    let change = |undone: Arc<std::sync::Mutex<Vec<u32>>>, made: u32| {
        leases.change_or_undo(
            async move {
                // Longer than the registration stays open without a renewal.
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok(made)
            },
            |_| Some(Invalidation::paths(["made".to_owned()])),
            move |made| {
                undone.lock().unwrap().push(made);
                std::future::ready(Some(Invalidation::paths(["undone".to_owned()])))
            },
        )
    };
    let refused = change(undone.clone(), 1).await;
    assert_eq!(refused.unwrap_err().code(), tonic::Code::Unavailable);
    assert_eq!(
        *undone.lock().unwrap(),
        [1],
        "the change answered UNAVAILABLE was not undone"
    );
    // Renewed: answered, and kept.
    let now = Instant::now();
    publish.send_replace(Standing {
        generation: 2,
        open_from: now,
        open_until: now + Duration::from_secs(3600),
    });
    assert_eq!(change(undone.clone(), 2).await.unwrap(), 2);
    assert_eq!(
        *undone.lock().unwrap(),
        [1],
        "a change answered in time was undone"
    );
}

#[tokio::test(start_paused = true)]
async fn a_closed_service_ends_the_streams_and_the_holders_drop_their_lease() {
    let leases = leases().await;
    let lease = holder(&leases, Arc::new(AtomicUsize::new(0)));
    until_valid(&lease).await;
    leases.close();
    for _ in 0..200 {
        if !lease.valid() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the holder kept its lease after its stream ended");
}

/// A change whose caller went away while it was being made (a cancelled gRPC call),
/// and that went on without it (as a copy on the blocking pool does), is still announced
/// once it is made.
#[tokio::test(start_paused = true)]
async fn a_change_whose_caller_went_away_is_still_announced() {
    let leases = leases().await;
    let dropped = Arc::new(AtomicUsize::new(0));
    let lease = holder(&leases, dropped.clone());
    until_valid(&lease).await;
    let (begun, has_begun) = tokio::sync::oneshot::channel();
    let (finish, finished) = tokio::sync::oneshot::channel::<()>();
    // The work itself runs on without whoever awaits it.
    let work = tokio::spawn(async move {
        let _ = finished.await;
    });
    let caller = tokio::spawn({
        let leases = leases.clone();
        async move {
            let change = async move {
                let _ = begun.send(());
                work.await.map_err(|e| tonic::Status::internal(e.to_string()))
            };
            leases
                .change(change, |_| Some(Invalidation::paths(["x".to_owned()])))
                .await
        }
    });
    has_begun.await.unwrap();
    caller.abort();
    assert!(caller.await.unwrap_err().is_cancelled());
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        0,
        "announced before the change was made"
    );
    finish.send(()).unwrap();
    for _ in 0..200 {
        if dropped.load(Ordering::SeqCst) == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("a change made after its caller went away was never announced");
}

/// A caller that goes away while its change waits for the grace period cancels it: the
/// change is never made.
#[tokio::test(start_paused = true)]
async fn a_change_whose_caller_went_away_before_it_began_is_not_made() {
    let leases = Leases::new("test");
    let made = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let caller = tokio::spawn({
        let (leases, made) = (leases.clone(), made.clone());
        async move {
            leases
                .change(
                    async move {
                        made.store(true, Ordering::SeqCst);
                        Ok(())
                    },
                    |_| None,
                )
                .await
        }
    });
    tokio::time::sleep(LEASE / 2).await;
    caller.abort();
    assert!(caller.await.unwrap_err().is_cancelled());
    tokio::time::sleep(LEASE * 2).await;
    assert!(
        !made.load(Ordering::SeqCst),
        "a change was made after its caller went away before it began"
    );
}

/// A registered replica gives a lease only to a holder that follows its registry: one that
/// follows none, or another, would not hear of changes made through the other replicas.
#[tokio::test(start_paused = true)]
async fn a_registered_replica_leases_only_to_holders_following_its_registry() {
    let leases = leases().await;
    let (_publish, standing) = watch::channel(Standing {
        generation: 1,
        open_from: Instant::now(),
        open_until: Instant::now() + Duration::from_secs(3600),
    });
    leases.admit_through(standing, "kubedav:locks:replicas");
    let open = |followed: Option<&str>| {
        let (_requests, outlet) = mpsc::unbounded_channel::<WatchRequest>();
        leases.watch(followed, Requests::from(outlet).map(Ok).boxed())
    };
    for followed in [
        None,
        Some("kubedav:fileio:replicas"),
        Some("other:locks:replicas"),
    ] {
        let Err(refused) = open(followed) else {
            panic!("a holder following {followed:?} was given a lease");
        };
        assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
        assert!(
            refused.message().contains("kubedav:locks:replicas") && refused.message().contains("--registry"),
            "the refusal names the registry and what to do: {}",
            refused.message()
        );
    }
    assert!(open(Some("kubedav:locks:replicas")).is_ok());
}
