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
