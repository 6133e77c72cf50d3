//! The composition root: the HTTP application ([`Gateway::router`]) and the way every
//! request takes through the layers ([`edge`]). The only module that knows them all.

use crate::Gateway;
use crate::edge::{auth, framing, observe};
use crate::handlers;
use std::sync::Arc;

impl Gateway {
    /// The HTTP application: every method on every path, with request ids, tracing and
    /// metrics; listings compressed when the client accepts it, and CORS for the
    /// configured origins.
    pub fn router(self: &Arc<Self>) -> axum::Router {
        handlers::propfind::register_metrics();
        let app = axum::Router::new().fallback(edge).with_state(self.clone());
        crate::edge::cors::allow_origins(app, &self.config.cors_origins)
    }
}

/// Every request's way through the gateway: request id, span and metrics (`observe`),
/// framing checks (`framing::guard`), authentication, then the method's handler; then a
/// listing is compressed if the client accepts it (`cors::compress_listing`). Plain
/// nested calls rather than three `axum::middleware::from_fn` layers, each of which
/// cloned the inner service and boxed a future per request (docs/benchmarks.md).
async fn edge(
    axum::extract::State(gateway): axum::extract::State<Arc<Gateway>>,
    request: axum::extract::Request,
) -> axum::response::Response {
    let accept_encoding = request.headers().get(http::header::ACCEPT_ENCODING).cloned();
    let response = observe::observe(request, |request| {
        framing::guard(&gateway, request, |request| {
            auth::authenticate(&gateway, request, |request| {
                handlers::dispatch(axum::extract::State(gateway.clone()), request)
            })
        })
    })
    .await;
    crate::edge::cors::compress_listing(accept_encoding, response).await
}
