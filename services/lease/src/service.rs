//! [`Leases`]: the service's side of the lease protocol.

use crate::LEASE;
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::lease::{Invalidation, Pong, WatchEvent, WatchRequest, watch_event};
use kubedav_kit::registry::Standing;
use kubedav_metrics::{Gauge, Histogram};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tonic::Status;

/// The service's allowance for two clocks running at slightly different rates.
pub(crate) const CLOCK_MARGIN: Duration = Duration::from_millis(20);
/// The longest a replica's change waits for its registration to open
/// ([`Leases::admit_through`]) before it is answered 503: a registration renewed late
/// reopens within a registry view's freshness, so this is reached only when Redis
/// stays out of reach.
const ADMISSION_WAIT: Duration = Duration::from_secs(5);

// One `Leases` per process (fileio's or the locks service's), so no label names the
// service: the scrape's job does.
static HOLDERS: LazyLock<Gauge> = LazyLock::new(|| {
    kubedav_metrics::gauge(
        "kubedav_lease_holders",
        "Clients (gateways) holding a lease stream on what they keep of this service's answers.",
    )
});
static WAITS: LazyLock<Histogram> = LazyLock::new(|| {
    kubedav_metrics::histogram(
        "kubedav_lease_invalidation_wait_seconds",
        "How long a change waited for every lease holder to drop what it kept (or for its \
         lease to run out, or for the grace period after start) before it was answered.",
        &[
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0, 2.5,
        ],
    )
});

/// The service's side: the lease holders and what they have acknowledged.
pub struct Leases {
    service: &'static str,
    lease: Duration,
    /// Until then no change is answered: leases granted by this service's previous
    /// process may still be in use by holders that have not noticed it is gone.
    grace_until: Instant,
    state: Mutex<State>,
    /// Woken whenever a holder acknowledges, renews or goes away.
    changed: Notify,
    /// The replica's registration, when it is one of several.
    admission: OnceLock<Admission>,
}

/// A registered replica's standing, and the registry it is registered in.
struct Admission {
    standing: watch::Receiver<Standing>,
    /// The registry's key ([`kubedav_kit::registry::Registry::key`]): a holder must name
    /// it ([`crate::FOLLOWED_REGISTRY`]) to be given a lease.
    registry: String,
}

#[derive(Default)]
struct State {
    sequence: u64,
    next_holder: u64,
    holders: HashMap<u64, Holder>,
    closed: bool,
}

struct Holder {
    /// `None` once its stream ended: it is still waited for until its lease runs out.
    events: Option<mpsc::UnboundedSender<WatchEvent>>,
    acknowledged: u64,
    /// The service's view of the lease's end: never earlier than the holder's own.
    expires: Instant,
    /// Invalidations sent and not yet acknowledged, with when they were sent.
    unacknowledged: VecDeque<(u64, Instant)>,
}

impl Holder {
    fn covered_until(&self) -> Instant {
        self.expires + CLOCK_MARGIN
    }
}

impl Leases {
    /// Leases of [`LEASE`] on the answers of `service` (its name in logs).
    pub fn new(service: &'static str) -> Arc<Self> {
        let lease = LEASE;
        HOLDERS.set(0);
        LazyLock::force(&WAITS);
        Arc::new(Self {
            service,
            lease,
            grace_until: Instant::now() + lease + CLOCK_MARGIN,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            admission: OnceLock::new(),
        })
    }

    /// Makes every change wait until this replica's registration (in the registry whose
    /// key is `registry`) is open (`kubedav_kit::registry::Standing`): gateways that have
    /// not yet seen it in the registry hold no lease from it and would not be told. From
    /// then on, leases go only to holders that follow that registry
    /// ([`crate::FOLLOWED_REGISTRY`]). Set once, at start.
    pub fn admit_through(&self, standing: watch::Receiver<Standing>, registry: &str) {
        let admission = Admission {
            standing,
            registry: registry.to_owned(),
        };
        if self.admission.set(admission).is_err() {
            tracing::warn!(service = self.service, "admission set twice; the first one stays");
        }
    }

    /// Waits until the registration (if any) lets changes be answered, for at most
    /// [`ADMISSION_WAIT`].
    async fn admitted(&self) -> Result<(), Status> {
        let Some(admission) = self.admission.get() else {
            return Ok(());
        };
        let mut standing = admission.standing.clone();
        let started = Instant::now();
        let deadline = started + ADMISSION_WAIT;
        loop {
            let now = Instant::now();
            let current = *standing.borrow_and_update();
            if current.open_at(now) {
                if now > started {
                    WAITS.observe(started.elapsed().as_secs_f64());
                }
                return Ok(());
            }
            if now >= deadline {
                return Err(Status::unavailable(format!(
                    "this {} replica's registration is not current (is Redis reachable?): \
                     try again shortly",
                    self.service
                )));
            }
            // Not open yet: until it opens. Lapsed: until it is renewed, or the deadline.
            let wake = if current.open_from > now {
                current.open_from.min(deadline)
            } else {
                deadline
            };
            tokio::select! {
                changed = standing.changed() => if changed.is_err() {
                    tokio::time::sleep_until(wake).await;
                },
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Serves one holder's `Watch` stream: pongs for its pings, then every invalidation.
    /// Ends when the holder goes away or at [`Leases::close`].
    ///
    /// `followed` is the registry the holder follows ([`crate::FOLLOWED_REGISTRY`]). A
    /// registered replica refuses a holder that does not follow its registry
    /// (FAILED_PRECONDITION): such a holder holds no lease from the other replicas, so
    /// it would not be told of changes made through them.
    pub fn watch(
        self: &Arc<Self>,
        followed: Option<&str>,
        mut requests: BoxStream<WatchRequest>,
    ) -> Result<BoxStream<WatchEvent>, Status> {
        if let Some(admission) = self.admission.get()
            && followed != Some(admission.registry.as_str())
        {
            return Err(self.unfollowed(&admission.registry, followed));
        }
        let (events, mut outlet) = mpsc::unbounded_channel();
        let id = {
            let mut state = self.state();
            if state.closed {
                return Ok(futures_util::stream::empty().boxed());
            }
            state.next_holder += 1;
            let id = state.next_holder;
            // A new holder keeps nothing yet: nothing announced before concerns it.
            let acknowledged = state.sequence;
            state.holders.insert(
                id,
                Holder {
                    events: Some(events),
                    acknowledged,
                    expires: Instant::now(),
                    unacknowledged: VecDeque::new(),
                },
            );
            HOLDERS.set(connected(&state));
            tracing::debug!(service = self.service, holder = id, "lease holder connected");
            id
        };
        let leases = self.clone();
        tokio::spawn(async move {
            while let Some(Ok(request)) = requests.next().await {
                leases.received(id, &request);
            }
            let mut state = leases.state();
            if let Some(holder) = state.holders.get_mut(&id) {
                holder.events = None;
            }
            HOLDERS.set(connected(&state));
            drop(state);
            tracing::debug!(service = leases.service, holder = id, "lease holder gone");
            leases.changed.notify_waiters();
        });
        Ok(futures_util::stream::poll_fn(move |cx| outlet.poll_recv(cx).map(|event| event.map(Ok))).boxed())
    }

    /// Why a holder that follows `followed` (or no registry) gets no lease from a replica
    /// registered in `registry`, and what to do about it.
    fn unfollowed(&self, registry: &str, followed: Option<&str>) -> Status {
        let service = self.service;
        let follows = match followed {
            None => "follows no registry".to_owned(),
            Some(other) => format!("follows the registry at the key {other}"),
        };
        tracing::debug!(
            service,
            registry,
            follows,
            "lease refused to a holder not following the registry"
        );
        Status::failed_precondition(format!(
            "this {service} replica is one of several registered in Redis under {registry}, \
             and the caller {follows}: it would not be told of changes made through the \
             other replicas, so it gets no lease and must fetch every answer. Start the \
             gateway with the replicas' --registry and --redis-prefix"
        ))
    }

    /// A holder's acknowledgement, ping, or both.
    fn received(&self, id: u64, request: &WatchRequest) {
        let now = Instant::now();
        let mut state = self.state();
        let Some(holder) = state.holders.get_mut(&id) else {
            return;
        };
        holder.acknowledged = holder.acknowledged.max(request.acknowledged);
        while holder
            .unacknowledged
            .front()
            .is_some_and(|(sequence, _)| *sequence <= holder.acknowledged)
        {
            holder.unacknowledged.pop_front();
        }
        if request.ping != 0 {
            // A holder that pings but has left an invalidation unacknowledged for a
            // whole lease is wedged: its lease is not renewed, so changes stop waiting
            // for it when the current one runs out.
            let wedged = holder
                .unacknowledged
                .front()
                .is_some_and(|(_, sent)| now.duration_since(*sent) > self.lease);
            if !wedged {
                holder.expires = holder.expires.max(now + self.lease);
                if let Some(events) = &holder.events {
                    let _ = events.send(WatchEvent {
                        event: Some(watch_event::Event::Pong(Pong {
                            ping: request.ping,
                            lease_millis: self.lease.as_millis() as u64,
                        })),
                    });
                }
            }
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// Makes a change under the leases: waits out the grace period (the first lease after
    /// the service started, during which holders of a lease from its previous process may
    /// not yet have noticed that it is gone, and this process cannot tell them), makes the
    /// change, announces what `changed` names of its outcome (nothing for `None`), and
    /// only then hands the outcome on. Waiting before the change, not after, keeps a lock
    /// granted in the grace period from losing time off its timeout.
    ///
    /// Once begun, the change and its announcement run to their end even when the caller
    /// goes away (a gRPC call cancelled by a client that left), then in a task of their
    /// own ([`kubedav_kit::finish`]): a change that goes on without its caller (a copy on the
    /// blocking pool, a script Redis already has) must still be announced, or a holder
    /// would serve what it kept from before it. A caller that goes away while the change
    /// waits to begin (the grace period, the registration) cancels it.
    ///
    /// A replica of several ([`Leases::admit_through`]) also waits until its registration
    /// is open, before the change and again before announcing it (a registration that
    /// lapsed meanwhile reopens only once every gateway has seen it again). If it does not
    /// reopen in time the change, made, is announced anyway and answered UNAVAILABLE:
    /// [`Leases::change_or_undo`] for a change that must not outlive that answer.
    pub async fn change<T, Change, Changed>(
        self: &Arc<Self>,
        change: Change,
        changed: Changed,
    ) -> Result<T, Status>
    where
        T: Send + 'static,
        Change: Future<Output = Result<T, Status>> + Send + 'static,
        Changed: FnOnce(&Result<T, Status>) -> Option<Invalidation> + Send + 'static,
    {
        self.change_or_undo(change, changed, |_| std::future::ready(None))
            .await
    }

    /// [`Leases::change`], for a change its caller could not undo after an UNAVAILABLE
    /// answer (a lock granted: its token was never told). When the change was made but
    /// the registration did not reopen in time to answer it, `undo` is given what the
    /// change made, takes it back, and names what that altered, which is announced too,
    /// before UNAVAILABLE is answered.
    pub async fn change_or_undo<T, Change, Changed, Undo, Undone>(
        self: &Arc<Self>,
        change: Change,
        changed: Changed,
        undo: Undo,
    ) -> Result<T, Status>
    where
        T: Send + 'static,
        Change: Future<Output = Result<T, Status>> + Send + 'static,
        Changed: FnOnce(&Result<T, Status>) -> Option<Invalidation> + Send + 'static,
        Undo: FnOnce(T) -> Undone + Send + 'static,
        Undone: Future<Output = Option<Invalidation>> + Send + 'static,
    {
        // A change its caller no longer waits for is not begun; one begun is finished.
        if Instant::now() < self.grace_until {
            let started = Instant::now();
            tokio::time::sleep_until(self.grace_until).await;
            WAITS.observe(started.elapsed().as_secs_f64());
        }
        self.admitted().await?;
        let leases = self.clone();
        kubedav_kit::finish::to_the_end(async move {
            let outcome = change.await;
            if let Some(invalidation) = changed(&outcome) {
                let admitted = leases.admitted().await;
                leases.invalidate(invalidation).await;
                if let Err(unanswerable) = admitted {
                    if let Ok(made) = outcome
                        && let Some(undone) = undo(made).await
                    {
                        leases.invalidate(undone).await;
                    }
                    return Err(unanswerable);
                }
            }
            outcome
        })
        .await
    }

    /// Announces a change to every holder, then waits until each has acknowledged it or
    /// its lease has run out. Called after the change is made (so nothing fetched after
    /// the announcement can predate it) and before it is answered.
    pub(crate) async fn invalidate(&self, mut invalidation: Invalidation) {
        let (sequence, mut waiting) = {
            let now = Instant::now();
            let mut state = self.state();
            state
                .holders
                .retain(|_, holder| holder.events.is_some() || holder.covered_until() > now);
            if state.holders.is_empty() {
                return;
            }
            state.sequence += 1;
            let sequence = state.sequence;
            invalidation.sequence = sequence;
            let event = WatchEvent {
                event: Some(watch_event::Event::Invalidation(invalidation)),
            };
            let mut waiting = Vec::new();
            for (id, holder) in state.holders.iter_mut() {
                if let Some(events) = &holder.events {
                    if events.send(event.clone()).is_ok() {
                        holder.unacknowledged.push_back((sequence, now));
                    } else {
                        holder.events = None;
                    }
                }
                // A holder without a current lease serves nothing it kept; it handles
                // this announcement before any pong that could renew its lease.
                if holder.covered_until() > now {
                    waiting.push(*id);
                }
            }
            (sequence, waiting)
        };
        if waiting.is_empty() {
            return;
        }
        let started = Instant::now();
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_expiry = {
                let now = Instant::now();
                let state = self.state();
                waiting.retain(|id| {
                    state
                        .holders
                        .get(id)
                        .is_some_and(|h| h.acknowledged < sequence && h.covered_until() > now)
                });
                waiting
                    .iter()
                    .filter_map(|id| state.holders.get(id))
                    .map(Holder::covered_until)
                    .min()
            };
            let Some(expiry) = next_expiry else { break };
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(expiry) => {}
            }
        }
        WAITS.observe(started.elapsed().as_secs_f64());
    }

    /// Ends every `Watch` stream and refuses new ones (the service is stopping). Changes
    /// still wait for the holders' current leases, which the holders stop using as soon
    /// as they see their stream end.
    pub fn close(&self) {
        let mut state = self.state();
        state.closed = true;
        for holder in state.holders.values_mut() {
            holder.events = None;
        }
        HOLDERS.set(0);
    }
}

fn connected(state: &State) -> i64 {
    state.holders.values().filter(|h| h.events.is_some()).count() as i64
}
