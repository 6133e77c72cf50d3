//! Leases on what a client keeps of a service's answers: `proto/kubedav/lease/v1/lease.proto`
//! states the protocol and why it is safe.
//!
//! * [`Leases`] is the service's side: it hands out leases on `Watch` streams, and
//!   [`Leases::invalidate`] announces a change to every holder and returns once each has
//!   acknowledged it or let its lease run out. A service calls it after making a change
//!   and before answering it.
//! * [`Lease`] is the holder's side ([`hold`] keeps one `Watch` stream open, reconnecting
//!   as needed): [`Lease::valid`] says whether what was kept may be served now, and
//!   [`Lease::keep`] stores an answer only if nothing was invalidated since the call that
//!   fetched it began.
//!
//! * [`ReplicaLeases`] holds a lease from every replica of a service that the registry
//!   shows (`kubedav_kit::registry`), and [`Leases::admit_through`] makes a replica's
//!   changes wait for its registration: a change through any replica reaches every copy.
//!
//! A holder that stops answering (paused, partitioned) delays the changes made meanwhile
//! by at most [`LEASE`]; a holder that cannot reach the service keeps nothing.

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use kubedav_api::BoxStream;
use kubedav_api::metrics::{Gauge, Histogram};
pub use kubedav_kit::registry::{Standing, View};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, RwLock};
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tonic::Status;

pub use kubedav_api::lease::{Invalidation, Pong, WatchEvent, WatchRequest, watch_event};

/// What a holder sends on its `Watch` stream.
pub struct Requests(mpsc::UnboundedReceiver<WatchRequest>);

impl From<mpsc::UnboundedReceiver<WatchRequest>> for Requests {
    fn from(requests: mpsc::UnboundedReceiver<WatchRequest>) -> Self {
        Self(requests)
    }
}

impl futures_util::Stream for Requests {
    type Item = WatchRequest;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<WatchRequest>> {
        self.0.poll_recv(cx)
    }
}

/// How long a lease lasts after the ping that renewed it. A holder that stops answering
/// delays a change by at most this, and so does a service's grace period after it
/// starts. It only has to outlast a ping's round trip (holders ping every quarter of
/// it), so it is short: a restart or a paused gateway holds changes up for half a
/// second at most.
pub const LEASE: Duration = Duration::from_millis(500);
/// The service's allowance for two clocks running at slightly different rates.
const CLOCK_MARGIN: Duration = Duration::from_millis(20);
/// A holder's first wait before it opens a stream again, doubling up to [`RETRY_MOST`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MOST: Duration = Duration::from_secs(1);
/// How often a holder asks a service that offers no lease whether it does now.
const RETRY_NOT_OFFERED: Duration = Duration::from_secs(30);
/// How many pings a holder keeps track of while their pongs are outstanding.
const MAX_OUTSTANDING_PINGS: usize = 16;
/// The longest a replica's change waits for its registration to open
/// ([`Leases::admit_through`]) before it is answered 503: a registration renewed late
/// reopens within a registry view's freshness, so this is reached only when Redis
/// stays out of reach.
const ADMISSION_WAIT: Duration = Duration::from_secs(5);

// One `Leases` per process (fileio's or the locks service's), so no label names the
// service: the scrape's job does.
static HOLDERS: LazyLock<Gauge> = LazyLock::new(|| {
    kubedav_api::metrics::gauge(
        "kubedav_lease_holders",
        "Clients (gateways) holding a lease stream on what they keep of this service's answers.",
    )
});
static WAITS: LazyLock<Histogram> = LazyLock::new(|| {
    kubedav_api::metrics::histogram(
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
    /// The replica's standing in the registry, when it is one of several.
    admission: OnceLock<watch::Receiver<Standing>>,
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

    /// Makes every change wait until this replica's registration is open
    /// (`kubedav_kit::registry::Standing`): gateways that have not yet seen it in the
    /// registry hold no lease from it and would not be told. Set once, at start.
    pub fn admit_through(&self, standing: watch::Receiver<Standing>) {
        if self.admission.set(standing).is_err() {
            tracing::warn!(service = self.service, "admission set twice; the first one stays");
        }
    }

    /// Waits until the registration (if any) lets changes be answered, for at most
    /// [`ADMISSION_WAIT`].
    async fn admitted(&self) -> Result<(), Status> {
        let Some(standing) = self.admission.get() else {
            return Ok(());
        };
        let mut standing = standing.clone();
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
    pub fn watch(self: &Arc<Self>, mut requests: BoxStream<WatchRequest>) -> BoxStream<WatchEvent> {
        let (events, mut outlet) = mpsc::unbounded_channel();
        let id = {
            let mut state = self.state();
            if state.closed {
                return futures_util::stream::empty().boxed();
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
        futures_util::stream::poll_fn(move |cx| outlet.poll_recv(cx).map(|event| event.map(Ok))).boxed()
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
    /// A replica of several ([`Leases::admit_through`]) also waits until its registration
    /// is open, before the change and again before announcing it (a registration that
    /// lapsed meanwhile reopens only once every gateway has seen it again). If it does not
    /// reopen in time the change, made, is announced anyway and answered UNAVAILABLE.
    pub async fn change<T>(
        &self,
        change: impl Future<Output = Result<T, Status>>,
        changed: impl FnOnce(&Result<T, Status>) -> Option<Invalidation>,
    ) -> Result<T, Status> {
        if Instant::now() < self.grace_until {
            let started = Instant::now();
            tokio::time::sleep_until(self.grace_until).await;
            WAITS.observe(started.elapsed().as_secs_f64());
        }
        self.admitted().await?;
        let outcome = change.await;
        if let Some(invalidation) = changed(&outcome) {
            let admitted = self.admitted().await;
            self.invalidate(invalidation).await;
            admitted?;
        }
        outcome
    }

    /// Announces a change to every holder, then waits until each has acknowledged it or
    /// its lease has run out. Called after the change is made (so nothing fetched after
    /// the announcement can predate it) and before it is answered.
    async fn invalidate(&self, mut invalidation: Invalidation) {
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
fn hold_sharing<Open, Opened>(
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
                // several replicas): ask again now and then, in case that changes.
                Err(status)
                    if matches!(
                        status.code(),
                        tonic::Code::FailedPrecondition | tonic::Code::Unimplemented
                    ) =>
                {
                    if !told_not_offered {
                        told_not_offered = true;
                        tracing::info!(
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

/// Opens a lease stream to the replica at an address (`host:port`).
pub type OpenAt =
    Arc<dyn Fn(&str, Requests) -> BoxFuture<'static, Result<BoxStream<WatchEvent>, Status>> + Send + Sync>;

/// A lease from every replica the registry shows (`kubedav_kit::registry::View`): what
/// was kept may be served only while the view is fresh and each of its replicas' leases
/// holds. A replica's announcement drops copies whichever replica they came from, since
/// copies are dropped by path. A replica joining the view holds nothing up: its lease
/// starts invalid, and when it starts, everything kept is dropped.
pub struct ReplicaLeases {
    epoch: Arc<AtomicU64>,
    view: watch::Receiver<View>,
    members: Arc<RwLock<HashMap<String, Member>>>,
}

/// The lease from one replica, and the task that keeps it.
struct Member {
    lease: Arc<Lease>,
    task: tokio::task::AbortHandle,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ReplicaLeases {
    /// Follows `view`, holding a lease from each replica through `open` and handing every
    /// invalidation to `drop_kept` (a task, for as long as this lives).
    pub fn follow(
        service: &'static str,
        view: watch::Receiver<View>,
        open: OpenAt,
        drop_kept: Arc<dyn Fn(&Invalidation) + Send + Sync>,
    ) -> Arc<Self> {
        let epoch: Arc<AtomicU64> = Arc::default();
        let members: Arc<RwLock<HashMap<String, Member>>> = Arc::default();
        let this = Arc::new(Self {
            epoch: epoch.clone(),
            view: view.clone(),
            members: members.clone(),
        });
        let members = Arc::downgrade(&members);
        let mut view = view;
        tokio::spawn(async move {
            loop {
                let addresses = view.borrow_and_update().addresses.clone();
                let Some(members) = members.upgrade() else { return };
                {
                    let mut members = members.write().unwrap_or_else(|p| p.into_inner());
                    members.retain(|address, _| addresses.contains(address));
                    for address in addresses {
                        if members.contains_key(&address) {
                            continue;
                        }
                        let open = open.clone();
                        let drop_kept = drop_kept.clone();
                        let at = address.clone();
                        let (lease, task) = hold_sharing(
                            service,
                            epoch.clone(),
                            move |requests| open(&at, requests),
                            move |invalidation| drop_kept(invalidation),
                        );
                        members.insert(address, Member { lease, task });
                    }
                }
                drop(members);
                if view.changed().await.is_err() {
                    return;
                }
            }
        });
        this
    }
}

impl ReplicaLeases {
    /// Whether the replica at `address` holds a lease with this gateway now: it answered a
    /// ping within the last lease. One that died or hangs does not.
    pub fn answering(&self, address: &str) -> bool {
        let members = self.members.read().unwrap_or_else(|p| p.into_inner());
        members.get(address).is_some_and(|member| member.lease.valid())
    }
}

impl Coherence for ReplicaLeases {
    fn valid(&self) -> bool {
        let view = self.view.borrow();
        if view.addresses.is_empty() || !view.fresh_at(Instant::now()) {
            return false;
        }
        let members = self.members.read().unwrap_or_else(|p| p.into_inner());
        view.addresses
            .iter()
            .all(|address| members.get(address).is_some_and(|member| member.lease.valid()))
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A holder connected straight to `leases` (no network), counting what it dropped.
    fn holder(leases: &Arc<Leases>, dropped: Arc<AtomicUsize>) -> Arc<Lease> {
        let leases = leases.clone();
        hold(
            "test",
            move |requests: Requests| {
                let events = leases.watch(requests.map(Ok).boxed());
                async move { Ok(events) }
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
        let events = leases.watch(
            futures_util::stream::poll_fn(move |cx| outlet.poll_recv(cx))
                .map(Ok)
                .boxed(),
        );
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
        };
        let (publish, view) = watch::channel(fresh());
        let services = HashMap::from([("a".to_owned(), a.clone()), ("b".to_owned(), b.clone())]);
        let open: OpenAt = Arc::new(move |address, requests| {
            let events = services[address].watch(requests.map(Ok).boxed());
            Box::pin(async move { Ok(events) })
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

    #[tokio::test(start_paused = true)]
    async fn a_replica_changes_nothing_until_its_registration_is_open() {
        let leases = leases().await;
        let now = Instant::now();
        let (publish, standing) = watch::channel(Standing {
            generation: 0,
            open_from: now,
            open_until: now,
        });
        leases.admit_through(standing);
        // Never opened: refused after the longest wait, the change not made.
        let made = std::sync::atomic::AtomicBool::new(false);
        let refused = leases
            .change(
                async {
                    made.store(true, Ordering::SeqCst);
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
}
