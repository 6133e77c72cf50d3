//! [`Lease`]: the holder's side of the lease protocol, and [`hold`], the task that
//! keeps its stream.

use crate::{LEASE, Requests};
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::lease::{Invalidation, WatchEvent, WatchRequest, watch_event};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::Status;

/// A holder's first wait before it opens a stream again, doubling up to [`RETRY_MOST`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MOST: Duration = Duration::from_secs(1);
/// How often a holder asks a service that offers no lease whether it does now.
const RETRY_NOT_OFFERED: Duration = Duration::from_secs(30);
/// How many pings a holder keeps track of while their pongs are outstanding.
const MAX_OUTSTANDING_PINGS: usize = 16;

/// What a cache keeps copies under: a [`Lease`] from one service, or [`ReplicaLeases`]
/// from each of its replicas.
pub trait Coherence: Send + Sync {
    /// Whether what was kept may be served now.
    fn valid(&self) -> bool;
    /// Read before a call whose answer may be kept, then given to `keep`.
    fn epoch(&self) -> u64;
}

impl dyn Coherence + '_ {
    /// Keeps an answer fetched by a call that began at `epoch`: `insert` stores it, and
    /// `undo` removes it again if an invalidation slipped in meanwhile (an invalidation
    /// bumps the epoch before it drops anything, so one of the two always catches it).
    pub fn keep(&self, epoch: u64, insert: impl FnOnce(), undo: impl FnOnce()) {
        if !self.valid() || self.epoch() != epoch {
            return;
        }
        insert();
        if self.epoch() != epoch {
            undo();
        }
    }
}

/// The holder's side of a lease, shared by the cache that uses it and the task that
/// keeps its stream ([`hold`]).
pub struct Lease {
    base: Instant,
    /// End of the lease in nanoseconds after `base`; 0 while there is none.
    deadline: AtomicU64,
    /// Bumped on every invalidation and whenever the lease (re)starts: an answer is kept
    /// only if this did not move while it was fetched. Shared by the leases from the
    /// replicas of one service ([`ReplicaLeases`]).
    epoch: Arc<AtomicU64>,
}

impl Lease {
    fn sharing(epoch: Arc<AtomicU64>) -> Self {
        Self {
            base: Instant::now(),
            deadline: AtomicU64::new(0),
            epoch,
        }
    }

    fn nanos(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_nanos() as u64
    }

    /// Whether what was kept may be served now.
    pub fn valid(&self) -> bool {
        let deadline = self.deadline.load(Ordering::SeqCst);
        deadline != 0 && self.nanos(Instant::now()) < deadline
    }

    /// Read before a call whose answer may be kept, then given to [`Lease::keep`].
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// See [`Coherence`]'s `keep`.
    pub fn keep(&self, epoch: u64, insert: impl FnOnce(), undo: impl FnOnce()) {
        (self as &dyn Coherence).keep(epoch, insert, undo)
    }

    fn bump(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }
}

impl Coherence for Lease {
    fn valid(&self) -> bool {
        Lease::valid(self)
    }

    fn epoch(&self) -> u64 {
        Lease::epoch(self)
    }
}

/// Holds a lease on a service's answers for as long as the returned [`Lease`] lives:
/// keeps a `Watch` stream open through `open` (reconnecting with backoff), pings,
/// and hands every invalidation to `drop_kept` before acknowledging it. On every new
/// stream and whenever one ends, `drop_kept` is told to drop everything.
pub fn hold<Open, Opened>(
    service: &'static str,
    open: Open,
    drop_kept: impl Fn(&Invalidation) + Send + Sync + 'static,
) -> Arc<Lease>
where
    Open: Fn(Requests) -> Opened + Send + 'static,
    Opened: Future<Output = Result<BoxStream<WatchEvent>, Status>> + Send,
{
    hold_sharing(service, Arc::default(), open, drop_kept).0
}

/// [`hold`], with the epoch shared with other leases, and the task's handle to end it.
pub(crate) fn hold_sharing<Open, Opened>(
    service: &'static str,
    epoch: Arc<AtomicU64>,
    open: Open,
    drop_kept: impl Fn(&Invalidation) + Send + Sync + 'static,
) -> (Arc<Lease>, tokio::task::AbortHandle)
where
    Open: Fn(Requests) -> Opened + Send + 'static,
    Opened: Future<Output = Result<BoxStream<WatchEvent>, Status>> + Send,
{
    let lease = Arc::new(Lease::sharing(epoch));
    let weak = Arc::downgrade(&lease);
    let task = tokio::spawn(async move {
        let mut backoff = RETRY_FIRST;
        let mut told_not_offered = false;
        loop {
            let Some(lease) = weak.upgrade() else { return };
            let (requests, outlet) = mpsc::unbounded_channel::<WatchRequest>();
            let stream = Requests(outlet);
            let opened = Instant::now();
            let pause = match open(stream).await {
                Ok(events) => {
                    tracing::debug!(service, "lease stream open");
                    run(&lease, events, requests, &drop_kept).await;
                    tracing::debug!(service, "lease stream ended");
                    if opened.elapsed() > LEASE {
                        backoff = RETRY_FIRST;
                    }
                    backoff
                }
                // The service keeps its answers to itself (a lock store shared by
                // several replicas that do not register), or it is a registered
                // replica and this holder does not follow the registry: ask again now
                // and then, in case that changes. Every answer costs a call meanwhile,
                // so the reason is worth a warning.
                Err(status)
                    if matches!(
                        status.code(),
                        tonic::Code::FailedPrecondition | tonic::Code::Unimplemented
                    ) =>
                {
                    if !told_not_offered {
                        told_not_offered = true;
                        tracing::warn!(
                            service,
                            reason = status.message(),
                            "no lease offered: every answer is fetched"
                        );
                    }
                    RETRY_NOT_OFFERED
                }
                Err(status) => {
                    tracing::debug!(service, code = ?status.code(), "lease stream failed");
                    backoff
                }
            };
            lease.deadline.store(0, Ordering::SeqCst);
            lease.bump();
            drop_kept(&Invalidation::everything());
            drop(lease);
            tokio::time::sleep(pause.mul_f64(0.8 + fastrand::f64() * 0.4)).await;
            backoff = (backoff * 2).min(RETRY_MOST);
        }
    });
    (lease, task.abort_handle())
}

/// One stream: pings every quarter lease, pongs extend the lease, invalidations are
/// handled and acknowledged in order. Returns when the stream ends.
async fn run(
    lease: &Lease,
    mut events: BoxStream<WatchEvent>,
    requests: mpsc::UnboundedSender<WatchRequest>,
    drop_kept: &(impl Fn(&Invalidation) + Send + Sync),
) {
    let mut ticker = tokio::time::interval(LEASE / 4);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut outstanding: VecDeque<(u64, Instant)> = VecDeque::new();
    let mut next_ping = 1u64;
    let mut acknowledged = 0u64;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                if outstanding.len() == MAX_OUTSTANDING_PINGS {
                    outstanding.pop_front();
                }
                outstanding.push_back((next_ping, Instant::now()));
                if requests.send(WatchRequest { ping: next_ping, acknowledged }).is_err() {
                    return;
                }
                next_ping += 1;
            }
            event = events.next() => match event.and_then(Result::ok).and_then(|e| e.event) {
                Some(watch_event::Event::Pong(pong)) => {
                    let Some(position) = outstanding.iter().position(|(id, _)| *id == pong.ping) else {
                        continue;
                    };
                    let sent = outstanding[position].1;
                    outstanding.drain(..=position);
                    let until = lease.nanos(sent + Duration::from_millis(pong.lease_millis));
                    if !lease.valid() {
                        // Answers fetched while there was no lease are not kept, and
                        // nothing kept before it is served: changes made meanwhile did
                        // not wait for this holder (with several replicas, copies are
                        // kept under the other leases too).
                        lease.bump();
                        drop_kept(&Invalidation::everything());
                    }
                    lease.deadline.fetch_max(until, Ordering::SeqCst);
                }
                Some(watch_event::Event::Invalidation(invalidation)) => {
                    lease.bump();
                    drop_kept(&invalidation);
                    acknowledged = invalidation.sequence;
                    if requests.send(WatchRequest { ping: 0, acknowledged }).is_err() {
                        return;
                    }
                }
                None => return,
            },
        }
    }
}
