//! The HTTP server loop: HTTP/1.1 and h2c on one port, request-head limits, and graceful
//! shutdown (in-flight requests finish; no new connections are accepted).

use crate::GatewayConfig;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpListener;

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
    let graceful = GracefulShutdown::new();
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
                let app = app.clone();
                let service = TowerToHyperService::new(tower::service_fn(move |mut request: http::Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(crate::auth::ClientAddr(peer));
                    tower::ServiceExt::oneshot(app.clone(), request)
                }));
                let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                let connection = graceful.watch(connection.into_owned());
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!("connection ended with an error: {e}");
                    }
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
