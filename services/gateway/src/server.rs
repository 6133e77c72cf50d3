//! The HTTP server loop: HTTP/1.1 and h2c on one port, request-head limits, a bound on
//! connections, and graceful shutdown (in-flight requests finish; no new connections are
//! accepted).

use crate::GatewayConfig;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// How long shutdown waits for in-flight requests.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` until `shutdown` resolves, then drains.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    config: &GatewayConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        .max_buf_size(config.max_header_bytes.max(8192))
        .max_headers(config.max_headers)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(config.max_header_bytes as u32);
    metrics::register();
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(config.max_connections));
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
                    metrics::connection_refused();
                    tokio::spawn(refuse(stream, config.max_connections));
                    continue;
                };
                let app = app.clone();
                let service = TowerToHyperService::new(tower::service_fn(move |mut request: http::Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(crate::auth::ClientAddr(peer));
                    tower::ServiceExt::oneshot(app.clone(), request)
                }));
                let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                let connection = graceful.watch(connection.into_owned());
                metrics::connection_opened();
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!("connection ended with an error: {e}");
                    }
                    metrics::connection_closed();
                    drop(slot);
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!(target: "kubedav", "HTTP connections drained"),
        _ = tokio::time::sleep(DRAIN_TIMEOUT) => tracing::warn!("drain timed out after {DRAIN_TIMEOUT:?}; closing the remaining connections"),
    }
    Ok(())
}

/// Answers a connection past the limit with 503 and Retry-After, then closes it. What
/// the client sent is read (for at most a second) before closing, so that the close
/// does not turn into a reset that destroys the answer.
async fn refuse(mut stream: TcpStream, limit: usize) {
    let body = format!(
        "the server holds its limit of {limit} connections; retry in {} s\n",
        crate::errors::RETRY_AFTER_SECONDS
    );
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: {}\r\nConnection: close\r\n\
         Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
        crate::errors::RETRY_AFTER_SECONDS,
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
    use prometheus::{IntCounter, IntGauge, register_int_counter, register_int_gauge};
    use std::sync::LazyLock;

    static OPEN: LazyLock<IntGauge> = LazyLock::new(|| {
        register_int_gauge!("kubedav_http_connections", "Client connections held open.")
            .expect("metric registers once")
    });
    static REFUSED: LazyLock<IntCounter> = LazyLock::new(|| {
        register_int_counter!(
            "kubedav_http_connections_refused_total",
            "Client connections answered 503 because --max-connections were open."
        )
        .expect("metric registers once")
    });

    /// Starts both series at zero.
    pub fn register() {
        LazyLock::force(&OPEN);
        LazyLock::force(&REFUSED);
    }

    pub fn connection_opened() {
        OPEN.inc();
    }

    pub fn connection_closed() {
        OPEN.dec();
    }

    pub fn connection_refused() {
        REFUSED.inc();
    }
}
