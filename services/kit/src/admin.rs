//! The admin HTTP server every target runs: `/metrics` (OpenMetrics or Prometheus text),
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

/// Something that does not stop the target from serving but that `/readyz` reports
/// while it lasts: its trouble now, or `None`.
pub type Note = Arc<dyn Fn() -> Option<String> + Send + Sync>;

static NOTES: std::sync::Mutex<Vec<(&'static str, Note)>> = std::sync::Mutex::new(Vec::new());

/// Makes `/readyz` report `note`'s trouble under `name` while there is some, in a line
/// `degraded: {name}: {trouble}` after `ready` (the answer stays 200: the target still
/// serves). The identity provider is one: passwords work while it is down.
pub fn note_while(name: &'static str, note: Note) {
    NOTES.lock().unwrap_or_else(|p| p.into_inner()).push((name, note));
}

/// The lines of the notes in trouble now.
fn degraded() -> String {
    let notes = NOTES.lock().unwrap_or_else(|p| p.into_inner()).clone();
    notes
        .iter()
        .filter_map(|(name, note)| note().map(|trouble| format!("degraded: {name}: {trouble}\n")))
        .collect()
}

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
                        Ok(()) => (StatusCode::OK, format!("ready\n{}", degraded())),
                        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n")),
                    }
                }
            }),
        )
}

/// The registry, in the OpenMetrics format (with exemplars) when the scraper's `Accept`
/// asks for it, as Prometheus does, else in the Prometheus text format 0.0.4.
async fn metrics(headers: axum::http::HeaderMap) -> impl IntoResponse {
    use kubedav_metrics::{OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE, encode, wants_openmetrics};
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(wants_openmetrics);
    let content_type = if openmetrics {
        OPENMETRICS_CONTENT_TYPE
    } else {
        TEXT_CONTENT_TYPE
    };
    match encode(openmetrics) {
        Ok(body) => (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response(),
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
