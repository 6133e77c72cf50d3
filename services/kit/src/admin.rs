//! The admin HTTP server every target runs: `/metrics` (Prometheus text format),
//! `/healthz` (the process is alive) and `/readyz` (its dependencies answer).

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A readiness probe: `Ok` when the target can serve, `Err(reason)` otherwise.
pub type ReadinessCheck =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// `ready`, except that once shutdown was requested the answer is "draining": load
/// balancers and Kubernetes stop sending new work while in-flight requests finish.
pub fn draining(ready: ReadinessCheck, shutdown: crate::shutdown::Shutdown) -> ReadinessCheck {
    Arc::new(move || {
        if shutdown.is_requested() {
            return Box::pin(async { Err("draining: finishing in-flight requests before exit".to_owned()) });
        }
        ready()
    })
}

/// Runs `main` (a server that returns once it has drained after `shutdown`) beside the
/// admin server on `listener`, which keeps answering, `/readyz` with "draining", until
/// `main` has returned.
pub async fn serve_beside(
    listener: tokio::net::TcpListener,
    ready: ReadinessCheck,
    shutdown: crate::shutdown::Shutdown,
    main: impl Future<Output = Result<(), String>>,
) -> Result<(), String> {
    let (finished, finished_rx) = tokio::sync::oneshot::channel::<()>();
    let main = async move {
        let result = main.await;
        let _ = finished.send(());
        result
    };
    let admin = serve(listener, draining(ready, shutdown), async move {
        let _ = finished_rx.await;
    });
    tokio::try_join!(main, admin)?;
    Ok(())
}

/// The admin router.
pub fn router(ready: ReadinessCheck) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.clone();
                async move {
                    match ready().await {
                        Ok(()) => (StatusCode::OK, "ready\n".to_owned()),
                        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n")),
                    }
                }
            }),
        )
}

async fn metrics() -> impl IntoResponse {
    let families = prometheus::gather();
    let mut body = String::new();
    match prometheus::TextEncoder::new().encode_utf8(&families, &mut body) {
        Ok(()) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)],
            body,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode metrics: {e}\n"),
        )
            .into_response(),
    }
}

/// Serves the admin router on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    ready: ReadinessCheck,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    axum::serve(listener, router(ready))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| format!("admin server failed: {e}"))
}
