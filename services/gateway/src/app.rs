//! The composition root: the HTTP application ([`Gateway::service`]) and the way every
//! request takes through the layers ([`edge`]). The only module that knows them all.

use crate::Gateway;
use crate::edge::{auth, framing, observe};
use crate::handlers;
use axum::response::Response;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

impl Gateway {
    /// The HTTP application: every method on every path, with request ids, tracing and
    /// metrics; listings compressed when the client accepts it, and CORS for the
    /// configured origins. `edge::server::serve` runs it; tests call it directly.
    pub fn service(self: &Arc<Self>) -> HttpService {
        handlers::propfind::register_metrics();
        let edge = HttpService::Edge(self.clone());
        if self.config.cors_origins.is_empty() {
            return edge;
        }
        let app = axum::Router::new().fallback_service(edge);
        HttpService::WithCors(crate::edge::cors::allow_origins(app, &self.config.cors_origins))
    }
}

/// The gateway as a tower service ([`Gateway::service`]).
///
/// Without CORS a request goes straight to [`edge`]: an axum `Router` holding only a
/// fallback would add its routing, a clone of the route and a second boxed future to
/// every request, and do nothing else (docs/benchmarks.md, "2026-11-26 (4)").
#[derive(Clone)]
pub enum HttpService {
    /// Every request to [`edge`].
    Edge(Arc<Gateway>),
    /// Through tower-http's CORS layer first (`edge::cors`).
    WithCors(axum::Router),
}

/// What [`HttpService`] answers with: a boxed future, so that hyper's connection task
/// holds a pointer, not the request's whole state machine (which it would otherwise
/// copy as it starts each request).
pub type Answer = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl<B> tower::Service<http::Request<B>> for HttpService
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Answer {
        self.answer(request)
    }
}

impl HttpService {
    /// What [`tower::Service::call`] does, through a shared reference: the service is
    /// always ready, so a connection calls this without cloning it or polling readiness.
    pub fn answer<B>(&self, request: http::Request<B>) -> Answer
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<axum::BoxError>,
    {
        let request = request.map(axum::body::Body::new);
        match self {
            // Not `async move { Ok(edge(..).await) }`: that block would keep a second
            // copy of the request's place beside edge's own, and the box is filled by
            // copying the whole future.
            Self::Edge(gateway) => Box::pin(edge(gateway.clone(), request)),
            Self::WithCors(router) => Box::pin(tower::ServiceExt::oneshot(router.clone(), request)),
        }
    }
}

/// Every request's way through the gateway: request id, span and metrics (`observe`),
/// framing checks (`framing::guard`), authentication, then the method's handler; then a
/// listing is compressed if the client accepts it (`cors::compress_listing`). Plain
/// nested calls rather than three `axum::middleware::from_fn` layers, each of which
/// cloned the inner service and boxed a future per request (docs/benchmarks.md).
async fn edge(gateway: Arc<Gateway>, request: axum::extract::Request) -> Result<Response, Infallible> {
    let accept_encoding = request.headers().get(http::header::ACCEPT_ENCODING).cloned();
    let response = observe::observe(request, |request| {
        framing::guard(&gateway, request, |request| {
            // A public link's URL authenticates by the link, not by a user's credentials.
            if crate::links::serve::is_link_request(&gateway, request.uri().path()) {
                let link: std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send + '_>> =
                    Box::pin(crate::links::serve::serve(&gateway, request));
                return futures_util::future::Either::Left(link);
            }
            futures_util::future::Either::Right(auth::authenticate(&gateway, request, |request| {
                handlers::dispatch(&gateway, request)
            }))
        })
    })
    .await;
    Ok(crate::edge::cors::compress_listing(accept_encoding, response))
}
