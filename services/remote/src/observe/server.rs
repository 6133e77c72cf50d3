//! The server end: [`ServerLayer`].

use super::body::{Completion, ObservedBody};
use super::metrics::SERVER;
use bytes::Bytes;
use http_body::Body;
use kubedav_kit::telemetry::propagation::{REQUEST_ID, REQUEST_ID_HEADER, extract_context};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The server end of [the module](super), as a tower layer for `tonic`'s `Server::layer`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerLayer;

impl<S> tower_layer::Layer<S> for ServerLayer {
    type Service = ObservedServer<S>;

    fn layer(&self, inner: S) -> ObservedServer<S> {
        ObservedServer { inner }
    }
}

/// A gRPC server (tonic's routes) whose calls are observed.
#[derive(Clone, Debug)]
pub struct ObservedServer<S> {
    inner: S,
}

impl<S, B> tower_service::Service<http::Request<tonic::body::Body>> for ObservedServer<S>
where
    S: tower_service::Service<http::Request<tonic::body::Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Body<Data = Bytes> + Unpin,
{
    type Response = http::Response<ObservedBody<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let span = server_span(&request);
        let request_id: Option<std::sync::Arc<str>> = request
            .headers()
            .get(REQUEST_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|id| !id.is_empty())
            .map(Into::into);
        let completion = Completion::start(&SERVER, request.uri().path(), span.clone(), false);
        let call = {
            let _entered = span.enter();
            self.inner.call(request)
        };
        let call = async move {
            let response = call.await?;
            let (parts, body) = response.into_parts();
            let body = ObservedBody::new(body, completion, &parts.headers);
            Ok(http::Response::from_parts(parts, body))
        }
        .instrument(span);
        match request_id {
            Some(id) => Box::pin(REQUEST_ID.scope(id, call)),
            None => Box::pin(call),
        }
    }
}

/// The span of one incoming call: a child of the caller's trace context, carrying the
/// caller's request id. None when nothing would read it ([`super::span_wanted`]: it
/// continues a trace when the caller sent a `traceparent`).
fn server_span(request: &http::Request<tonic::body::Body>) -> tracing::Span {
    let continues = request.headers().contains_key("traceparent");
    if !super::span_wanted(continues) && !tracing::enabled!(tracing::Level::DEBUG) {
        return tracing::Span::none();
    }
    let authority = request
        .uri()
        .authority()
        .map(|a| (a.host().to_owned(), a.port_u16().map_or(-1, i64::from)));
    let (address, port) = authority.unwrap_or_default();
    let request_id = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let span = rpc_span!(
        "grpc.server",
        "server",
        request.uri().path(),
        address,
        port,
        request_id = request_id,
    );
    // A failure here only means no OpenTelemetry layer is installed.
    let _ = span.set_parent(extract_context(request.headers()));
    span
}
