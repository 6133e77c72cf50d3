//! The HTTP server loop: HTTP/1.1 and h2c on one port, request-head limits, bounds on
//! connections (in all and per client address), an idle watchdog on every connection,
//! and graceful shutdown (in-flight requests finish; no new connections are accepted).
//! Connections are accepted here and served on the connection threads (`edge::threads`).
//!
//! hyper can bound the time to a complete request head only on connections it already
//! knows to be HTTP/1 (with a timer armed for every request), and never closes an idle
//! HTTP/2 connection. So hyper's bound is off, and each connection has a watchdog of
//! its own, whatever its protocol: while no request is in flight
//! (from its complete head until its response body has been sent), a connection that has
//! not started one within `--header-read-timeout-seconds` is closed. That is the same
//! bound for a socket that never speaks, one that sent only an HTTP/2 preface or a
//! few bytes of a head, and an idle keep-alive connection of either protocol.

use crate::GatewayConfig;
use crate::app::HttpService;
use crate::edge::client::limit_key;
use crate::edge::sendfile::SendfileStream;
use crate::edge::threads::ConnectionThreads;
use crate::request::{ClientIp, Sendfile};
use futures_util::FutureExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

/// How long shutdown waits for in-flight requests.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection asked to close because it was idle has to finish closing.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// hyper's limit on a request's header fields when none is set (431 past it). Setting
/// one, even the same, makes hyper initialise an array of that many fields per request
/// instead of leaving it uninitialised: 1.5 % of a PROPFIND Depth 0's user time.
const HYPER_MAX_HEADERS: usize = 100;

/// Serves `app` on `listener` until `shutdown` resolves, then drains.
pub async fn serve(
    listener: TcpListener,
    app: HttpService,
    config: &GatewayConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // The connection's watchdog bounds the time to a complete head already. hyper's
        // own bound would arm and cancel a timer for every request (3 to 4 % of a
        // PROPFIND Depth 0's user time, docs/benchmarks.md).
        .header_read_timeout(None)
        .max_buf_size(config.max_header_bytes.max(8192))
        .keep_alive(true);
    if config.max_headers != HYPER_MAX_HEADERS {
        builder.http1().max_headers(config.max_headers);
    }
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(config.max_header_bytes as u32)
        // A peer that stops answering pings is gone, even with a request in flight.
        .keep_alive_interval(Some(config.header_read_timeout))
        .keep_alive_timeout(Duration::from_secs(20));
    metrics::register();
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let per_address = PerAddress::new(config.max_connections_per_address);
    let (stop, stopping) = watch::channel(false);
    let threads = ConnectionThreads::start(config.http_threads)?;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        // Out of descriptors and the like: back off briefly rather than spin.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    metrics::connection_refused("total");
                    tokio::spawn(refuse(stream, Refusal::Total(config.max_connections)));
                    continue;
                };
                // Trusted proxies carry many clients' connections: only the total bound
                // applies to them.
                let address_slot = if config.trusted_proxies.contains(peer.ip()) {
                    None
                } else {
                    match per_address.take(peer.ip()) {
                        Some(slot) => Some(slot),
                        None => {
                            metrics::connection_refused("per_address");
                            tokio::spawn(refuse(stream, Refusal::PerAddress(config.max_connections_per_address)));
                            continue;
                        }
                    }
                };
                let activity = Arc::new(Activity::new());
                let service = {
                    let (app, activity, trusted) = (app.clone(), activity.clone(), config.trusted_proxies.clone());
                    TowerToHyperService::new(tower::service_fn(move |mut request: http::Request<hyper::body::Incoming>| {
                        let in_flight = activity.begin();
                        let (client, via_proxy) = trusted.resolve(peer.ip(), request.headers());
                        request.extensions_mut().insert(ClientIp(client));
                        if via_proxy {
                            request.extensions_mut().insert(crate::request::FromTrustedProxy);
                        }
                        if request.version() <= http::Version::HTTP_11 {
                            request.extensions_mut().insert(Sendfile);
                        }
                        // The application's own future, mapped: not `oneshot` (the
                        // application is always ready) awaited in an `async` block, which
                        // would keep that future twice in hyper's state for the request.
                        app.answer(request).map(move |answer| {
                            answer.map(|response| response.map(|body| Tracked { body, _in_flight: in_flight }))
                        })
                    }))
                };
                let (builder, idle, mut stopping) = (builder.clone(), config.header_read_timeout, stopping.clone());
                threads.serve(stream, move |stream| {
                    // Counted here, so that a connection its thread could not take is
                    // never counted as open.
                    metrics::connection_opened();
                    // Made before the connection's future, and boxed: that future then
                    // holds neither the builder nor a second copy of the connection (a
                    // future keeps what it was given apart from what it moves it into).
                    // It held 6 KiB per idle connection (docs/benchmarks.md, "2026-12-05
                    // (2), what an idle keep-alive connection holds").
                    let connection = Box::pin(
                        builder
                            .serve_connection_with_upgrades(TokioIo::new(SendfileStream::new(stream)), service)
                            .into_owned(),
                    );
                    async move {
                        watch_connection(connection, &activity, idle, &mut stopping).await;
                        metrics::connection_closed();
                        drop((slot, address_slot));
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    let _ = stop.send(true);
    // Every connection holds one of the slots: all of them free means all closed.
    let all = u32::try_from(config.max_connections).unwrap_or(u32::MAX);
    tokio::select! {
        _ = slots.acquire_many(all) => tracing::info!(target: "kubedav", "HTTP connections drained"),
        _ = tokio::time::sleep(DRAIN_TIMEOUT) => tracing::warn!("drain timed out after {DRAIN_TIMEOUT:?}; closing the remaining connections"),
    }
    drop(threads);
    Ok(())
}

/// Drives one connection until it ends, closing it gracefully when it has been idle
/// (no request in flight) for `idle`, or when shutdown begins; a connection that does
/// not finish closing within [`CLOSE_GRACE`] (shutdown: [`DRAIN_TIMEOUT`]) is dropped.
async fn watch_connection<C>(
    mut connection: Pin<Box<C>>,
    activity: &Activity,
    idle: Duration,
    stopping: &mut watch::Receiver<bool>,
) where
    C: Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>> + GracefulConnection,
{
    let mut deadline = Instant::now() + idle;
    let mut closing = false;
    loop {
        tokio::select! {
            ended = connection.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!("connection ended with an error: {e}");
                }
                return;
            }
            _ = tokio::time::sleep_until(deadline) => {
                if closing {
                    metrics::connection_timed_out();
                    return;
                }
                match activity.idle_until(idle) {
                    Some(until) if until > Instant::now() => deadline = until,
                    Some(_) => {
                        // An idle connection closes at once; one stuck in a request head
                        // gets a second to do so before it is dropped.
                        connection.as_mut().close_gracefully();
                        closing = true;
                        deadline = Instant::now() + CLOSE_GRACE.min(idle);
                    }
                    None => deadline = Instant::now() + idle,
                }
            }
            _ = stopping.wait_for(|stop| *stop), if !closing => {
                connection.as_mut().close_gracefully();
                closing = true;
                deadline = Instant::now() + DRAIN_TIMEOUT;
            }
        }
    }
}

/// A connection that can be asked to finish its in-flight requests and close.
trait GracefulConnection {
    /// Stops taking new requests (HTTP/2: GOAWAY) and closes once idle.
    fn close_gracefully(self: Pin<&mut Self>);
}

impl<I, S, E> GracefulConnection for auto::UpgradeableConnection<'_, I, S, E>
where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: http_body::Body + Send + 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, S::ResBody>,
{
    fn close_gracefully(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// What a connection is doing: requests in flight, and since when it has had none.
struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds from `started` to the end of the last request.
    idle_since_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
        }
    }

    /// A request's head arrived; it is in flight until the guard drops.
    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// When the connection will have been idle for `idle`; `None` while a request is in
    /// flight.
    fn idle_until(&self, idle: Duration) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = Duration::from_millis(self.idle_since_ms.load(Ordering::Relaxed));
        Some(self.started + since + idle)
    }
}

/// A request in flight on its connection.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        let now = activity.started.elapsed().as_millis() as u64;
        activity.idle_since_ms.fetch_max(now, Ordering::Relaxed);
        activity.in_flight.fetch_sub(1, Ordering::Release);
    }
}

/// A response body that keeps its request in flight until it has been sent (or dropped).
struct Tracked {
    body: axum::body::Body,
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Connections held per client address (IPv6: per /64).
struct PerAddress {
    limit: usize,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerAddress {
    fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            held: Arc::default(),
        }
    }

    /// A slot for one more connection from `ip`, unless it holds its limit.
    fn take(&self, ip: IpAddr) -> Option<AddressSlot> {
        let key = limit_key(ip);
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let count = held.entry(key).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            key,
            held: self.held.clone(),
        })
    }
}

/// One connection's place in its address's count.
struct AddressSlot {
    key: IpAddr,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = held.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// Why a connection is refused at once.
enum Refusal {
    /// --max-connections are open.
    Total(usize),
    /// Its address holds --max-connections-per-address.
    PerAddress(usize),
}

/// Answers a connection past the limit with 503 and Retry-After, then closes it. What
/// the client sent is read (for at most a second) before closing, so that the close
/// does not turn into a reset that destroys the answer.
async fn refuse(mut stream: TcpStream, why: Refusal) {
    let retry = crate::http::errors::RETRY_AFTER_SECONDS;
    let (status, body) = match why {
        Refusal::Total(limit) => (
            "503 Service Unavailable",
            format!("the server holds its limit of {limit} connections; retry in {retry} s\n"),
        ),
        Refusal::PerAddress(limit) => (
            "429 Too Many Requests",
            format!(
                "your address holds {limit} connections, the most this server keeps open for one \
                 client; reuse one of them (keep-alive) or close some, then retry in {retry} s\n"
            ),
        ),
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\nRetry-After: {retry}\r\nConnection: close\r\n\
         Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(answer.as_bytes()).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

mod metrics {
    use kubedav_metrics::{Counter, CounterFamily, Gauge};
    use std::sync::LazyLock;

    static OPEN: LazyLock<Gauge> =
        LazyLock::new(|| kubedav_metrics::gauge("kubedav_http_connections", "Client connections held open."));
    static REFUSED: LazyLock<CounterFamily> = LazyLock::new(|| {
        CounterFamily::new(
            "kubedav_http_connections_refused_total",
            "Client connections refused at once, by limit: total (--max-connections were \
             open; 503) or per_address (the client's address held \
             --max-connections-per-address; 429).",
            &["limit"],
        )
    });
    static TIMED_OUT: LazyLock<Counter> = LazyLock::new(|| {
        kubedav_metrics::counter(
            "kubedav_http_connections_dropped_total",
            "Connections dropped because they did not close within the idle timeout after \
             being asked to.",
        )
    });

    /// Starts every series at zero.
    pub(super) fn register() {
        LazyLock::force(&OPEN);
        REFUSED.with_label_values(&["total"]);
        REFUSED.with_label_values(&["per_address"]);
        LazyLock::force(&TIMED_OUT);
    }

    pub(super) fn connection_opened() {
        OPEN.inc();
    }

    pub(super) fn connection_closed() {
        OPEN.dec();
    }

    pub(super) fn connection_refused(limit: &str) {
        REFUSED.with_label_values(&[limit]).inc();
    }

    pub(super) fn connection_timed_out() {
        TIMED_OUT.inc();
    }
}
