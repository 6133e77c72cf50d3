//! Observing gRPC calls on both ends of a hop.
//!
//! * **Client** ([`ObservedChannel`]): every call gets a client span named
//!   `package.Service/Method` with the OpenTelemetry RPC attributes (`rpc.system`,
//!   `rpc.service`, `rpc.method`, `server.address`, `server.port`, and
//!   `rpc.grpc.status_code` once it ends). The span's W3C trace context and the request's
//!   id ([`REQUEST_ID`]) travel in the call's metadata.
//! * **Server** ([`ServerLayer`]): every incoming call gets a server span that continues
//!   the caller's trace context and records the caller's request id, with the same
//!   attributes (`server.address` is the `:authority` the caller addressed).
//! * **Metrics** on both ends, in the style of go-grpc-prometheus:
//!   `kubedav_grpc_{client,server}_started_total`, `..._handled_total` (with the gRPC
//!   status `grpc_code`) and `..._handling_seconds`, labelled `grpc_service` and
//!   `grpc_method` (not `service`, which Kubernetes scrapes add). A call is handled when its last response
//!   message and status have arrived, so a streaming call is timed to its end. Labels are
//!   bounded: methods outside kubedav's, health's and reflection's protos count as
//!   `other`.

use crate::backends::Backends;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use opentelemetry::propagation::{Extractor, Injector};
use prometheus::{
    Histogram, HistogramVec, IntCounter, IntCounterVec, register_histogram_vec, register_int_counter_vec,
};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;
use tonic::transport::Channel;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

tokio::task_local! {
    /// The id of the HTTP request being served (its `x-request-id`). The gateway sets it
    /// around each request; gRPC calls made inside carry it to the services.
    pub static REQUEST_ID: Arc<str>;
}

/// The metadata key that carries the request id between processes.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

const BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The call metrics of one end of a hop.
struct EndMetrics {
    started: IntCounterVec,
    handled: IntCounterVec,
    handling: HistogramVec,
    /// The children of every known method and of `other`, looked up by label once: a
    /// call then costs no label hashing and no allocation.
    methods: OnceLock<HashMap<&'static str, MethodMetrics>>,
}

/// One method's metric children on one end.
struct MethodMetrics {
    service: &'static str,
    method: &'static str,
    started: IntCounter,
    handling: Histogram,
    /// By `tonic::Code` value; made when a code first happens.
    handled: [OnceLock<IntCounter>; 17],
}

/// The path under which calls to unknown methods are counted.
const OTHER_PATH: &str = "/other/other";

impl EndMetrics {
    fn register(end: &str) -> Self {
        let started = register_int_counter_vec!(
            format!("kubedav_grpc_{end}_started_total"),
            format!("gRPC calls started on the {end} side, by service and method."),
            &["grpc_service", "grpc_method"]
        )
        .expect("metric registers once");
        let handled = register_int_counter_vec!(
            format!("kubedav_grpc_{end}_handled_total"),
            format!("gRPC calls completed on the {end} side, by service, method and status code."),
            &["grpc_service", "grpc_method", "grpc_code"]
        )
        .expect("metric registers once");
        let handling = register_histogram_vec!(
            format!("kubedav_grpc_{end}_handling_seconds"),
            format!("Time from a gRPC call's start to its status on the {end} side."),
            &["grpc_service", "grpc_method"],
            BUCKETS.to_vec()
        )
        .expect("metric registers once");
        Self {
            started,
            handled,
            handling,
            methods: OnceLock::new(),
        }
    }

    /// The children of the method at `path` (`other` for an unknown one).
    fn of(&self, path: &str) -> &MethodMetrics {
        let methods = self.methods.get_or_init(|| {
            KNOWN
                .iter()
                .map(String::as_str)
                .chain([OTHER_PATH])
                .map(|path| {
                    let (service, method) = labels(path);
                    let metrics = MethodMetrics {
                        service,
                        method,
                        started: self.started.with_label_values(&[service, method]),
                        handling: self.handling.with_label_values(&[service, method]),
                        handled: [const { OnceLock::new() }; 17],
                    };
                    (path, metrics)
                })
                .collect()
        });
        methods.get(path).unwrap_or_else(|| &methods[OTHER_PATH])
    }
}

impl MethodMetrics {
    fn handled(&self, metrics: &EndMetrics, code: tonic::Code) -> &IntCounter {
        self.handled[(code as usize).min(16)].get_or_init(|| {
            metrics
                .handled
                .with_label_values(&[self.service, self.method, code_name(code)])
        })
    }
}

static CLIENT: LazyLock<EndMetrics> = LazyLock::new(|| EndMetrics::register("client"));
static SERVER: LazyLock<EndMetrics> = LazyLock::new(|| EndMetrics::register("server"));

/// Every method kubedav serves or calls, as `/package.Service/Method`.
static KNOWN: LazyLock<HashSet<String>> = LazyLock::new(|| {
    use prost::Message;
    let mut known: HashSet<String> = [
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    if let Ok(files) = prost_types::FileDescriptorSet::decode(crate::FILE_DESCRIPTOR_SET) {
        for file in files.file {
            for service in &file.service {
                for method in &service.method {
                    known.insert(format!(
                        "/{}.{}/{}",
                        file.package(),
                        service.name(),
                        method.name()
                    ));
                }
            }
        }
    }
    known
});

/// The bounded `(service, method)` labels of a call path.
fn labels(path: &str) -> (&'static str, &'static str) {
    if let Some(known) = KNOWN.get(path)
        && let Some((service, method)) = known.trim_start_matches('/').split_once('/')
    {
        return (service, method);
    }
    ("other", "other")
}

/// Starts the series of every known method at zero on the `end` side, so that rates and
/// alerts answer before the first call.
fn register_known(metrics: &'static EndMetrics) {
    for path in KNOWN.iter() {
        metrics.of(path).handled(metrics, tonic::Code::Ok);
    }
}

/// Registers the client metrics with their known series at zero (the gateway calls it).
pub fn register_client_metrics() {
    register_known(&CLIENT);
}

/// Registers the server metrics with their known series at zero (each service calls it).
pub fn register_server_metrics() {
    register_known(&SERVER);
}

/// The name a gRPC code has in metrics (as go-grpc-prometheus spells it).
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "Canceled",
        Unknown => "Unknown",
        InvalidArgument => "InvalidArgument",
        DeadlineExceeded => "DeadlineExceeded",
        NotFound => "NotFound",
        AlreadyExists => "AlreadyExists",
        PermissionDenied => "PermissionDenied",
        ResourceExhausted => "ResourceExhausted",
        FailedPrecondition => "FailedPrecondition",
        Aborted => "Aborted",
        OutOfRange => "OutOfRange",
        Unimplemented => "Unimplemented",
        Internal => "Internal",
        Unavailable => "Unavailable",
        DataLoss => "DataLoss",
        Unauthenticated => "Unauthenticated",
    }
}

/// The gRPC status in a header or trailer map, if it has one.
fn status_in(headers: &http::HeaderMap) -> Option<tonic::Code> {
    headers
        .get("grpc-status")
        .map(|value| tonic::Code::from_bytes(value.as_bytes()))
}

/// What is left to record when a call ends.
struct Completion {
    metrics: &'static EndMetrics,
    method: &'static MethodMetrics,
    started: Instant,
    span: tracing::Span,
    /// Whether a non-OK status marks the span as an error (always on the client side;
    /// on the server side only for the codes that mean the server failed).
    client: bool,
}

impl Completion {
    fn start(metrics: &'static EndMetrics, path: &str, span: tracing::Span, client: bool) -> Self {
        let method = metrics.of(path);
        method.started.inc();
        Self {
            metrics,
            method,
            started: Instant::now(),
            span,
            client,
        }
    }

    fn finish(self, code: tonic::Code) {
        self.method.handled(self.metrics, code).inc();
        self.method.handling.observe(self.started.elapsed().as_secs_f64());
        self.span.record("rpc.grpc.status_code", code as i64);
        let failed = match code {
            tonic::Code::Ok => false,
            tonic::Code::Unknown
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Unimplemented
            | tonic::Code::Internal
            | tonic::Code::Unavailable
            | tonic::Code::DataLoss => true,
            _ => self.client,
        };
        if failed {
            self.span.record("otel.status_code", "ERROR");
        }
    }
}

/// A response body that records its call's completion when the status arrives (in the
/// trailers, or in the headers of a trailers-only response), or `Canceled` if it is
/// dropped before. While it is polled its span is entered, so the work of a streaming
/// response is part of its call.
pub struct ObservedBody<B> {
    inner: B,
    completion: Option<Completion>,
}

impl<B> ObservedBody<B> {
    fn new(inner: B, completion: Completion, headers: &http::HeaderMap) -> Self {
        let mut body = Self {
            inner,
            completion: Some(completion),
        };
        if let Some(code) = status_in(headers) {
            body.finish(code);
        }
        body
    }

    fn finish(&mut self, code: tonic::Code) {
        if let Some(completion) = self.completion.take() {
            completion.finish(code);
        }
    }
}

impl<B> Drop for ObservedBody<B> {
    fn drop(&mut self) {
        self.finish(tonic::Code::Cancelled);
    }
}

impl<B> Body for ObservedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let span = self.completion.as_ref().map(|c| c.span.clone());
        let _entered = span.as_ref().map(|span| span.enter());
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(status_in) {
                    self.finish(code);
                }
            }
            Poll::Ready(Some(Err(_))) => self.finish(tonic::Code::Unavailable),
            // A stream that ends without a status is a broken call.
            Poll::Ready(None) => self.finish(tonic::Code::Unknown),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A gRPC channel whose calls are observed: the client end of [the module](self). Each
/// call takes the next of the service's [`Backends`].
#[derive(Debug)]
pub struct ObservedChannel {
    backends: Arc<Backends>,
    /// `Bearer <the shared token>`, sent with every call when set.
    token: Option<http::HeaderValue>,
    /// The channel `poll_ready` chose for the next call.
    picked: Option<Channel>,
    address: Arc<str>,
    port: i64,
}

impl Clone for ObservedChannel {
    fn clone(&self) -> Self {
        Self {
            backends: self.backends.clone(),
            token: self.token.clone(),
            picked: None,
            address: self.address.clone(),
            port: self.port,
        }
    }
}

impl ObservedChannel {
    /// Observes the calls on `channel`, which was made for `url` (`http://host:port`): the
    /// host and port become the spans' `server.address` and `server.port`.
    pub fn new(channel: Channel, url: &str) -> Self {
        Self::balanced(Backends::single(channel), url)
    }

    /// Observes the calls spread over `backends`, made for `url`.
    pub fn balanced(backends: Arc<Backends>, url: &str) -> Self {
        let uri: Option<http::Uri> = url.parse().ok();
        let address = uri
            .as_ref()
            .and_then(|u| u.host())
            .unwrap_or(url)
            .trim_matches(['[', ']'])
            .into();
        let port = uri.and_then(|u| u.port_u16()).map_or(-1, i64::from);
        Self {
            backends,
            token: None,
            picked: None,
            address,
            port,
        }
    }

    /// Sends `token` (the services' `--grpc-token`) with every call; `None` or an empty
    /// token sends none.
    pub fn with_token(mut self, token: Option<&str>) -> Result<Self, String> {
        self.token = match token.filter(|t| !t.is_empty()) {
            Some(token) => {
                let mut value = http::HeaderValue::try_from(format!("Bearer {token}"))
                    .map_err(|_| "the gRPC token must be printable ASCII".to_owned())?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        Ok(self)
    }
}

impl tower_service::Service<http::Request<tonic::body::Body>> for ObservedChannel {
    type Response = http::Response<ObservedBody<tonic::body::Body>>;
    /// A [`tonic::Status`] (UNAVAILABLE) in a box, which the generated clients pass on
    /// as the call's status.
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let backends = &self.backends;
        self.picked
            .get_or_insert_with(|| backends.pick())
            .poll_ready(cx)
            .map_err(connection_failed)
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> Self::Future {
        let path = request.uri().path().to_owned();
        let (service, method) = path
            .trim_start_matches('/')
            .split_once('/')
            .unwrap_or((&path, ""));
        let span = tracing::info_span!(
            "grpc.client",
            otel.name = %path.trim_start_matches('/'),
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            rpc.system = "grpc",
            rpc.service = %service,
            rpc.method = %method,
            server.address = %self.address,
            server.port = self.port,
            rpc.grpc.status_code = tracing::field::Empty,
        );
        let context = span.context();
        opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.inject_context(&context, &mut HeaderInjector(request.headers_mut()))
        });
        if let Ok(Ok(id)) = REQUEST_ID.try_with(|id| http::HeaderValue::from_str(id)) {
            request.headers_mut().insert(REQUEST_ID_HEADER, id);
        }
        if let Some(token) = &self.token {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, token.clone());
        }
        let completion = Completion::start(&CLIENT, &path, span.clone(), true);
        let call = match self.picked.take() {
            Some(mut channel) => channel.call(request),
            // Called without poll_ready (tower's contract forbids it): the channel's
            // own buffer then refuses the call.
            None => self.backends.pick().call(request),
        };
        Box::pin(
            async move {
                match call.await {
                    Ok(response) => {
                        let (parts, body) = response.into_parts();
                        let body = ObservedBody::new(body, completion, &parts.headers);
                        Ok(http::Response::from_parts(parts, body))
                    }
                    Err(e) => {
                        completion.finish(tonic::Code::Unavailable);
                        Err(connection_failed(e))
                    }
                }
            }
            .instrument(span),
        )
    }
}

/// The status of a call the channel failed, as tonic reads it (a refused connection
/// is UNAVAILABLE, a request timeout CANCELLED), except that a connection broken while
/// the call was on it (the service stopped or restarted), which tonic calls UNKNOWN (a
/// 500 at the gateway), is UNAVAILABLE too: a 503 with Retry-After.
fn connection_failed(error: tonic::transport::Error) -> Box<dyn std::error::Error + Send + Sync> {
    let status = tonic::Status::from_error(Box::new(error));
    if status.code() != tonic::Code::Unknown {
        return Box::new(status);
    }
    use std::error::Error as _;
    let cause = status
        .source()
        .and_then(|error| error.source())
        .map(|cause| format!(": {cause}"))
        .unwrap_or_default();
    Box::new(tonic::Status::unavailable(format!(
        "the connection to the service broke ({}{cause}); retry shortly",
        status.message()
    )))
}

/// The server end of [the module](self), as a tower layer for `tonic`'s `Server::layer`.
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
        let completion = Completion::start(&SERVER, request.uri().path(), span.clone(), false);
        let call = {
            let _entered = span.enter();
            self.inner.call(request)
        };
        Box::pin(
            async move {
                let response = call.await?;
                let (parts, body) = response.into_parts();
                let body = ObservedBody::new(body, completion, &parts.headers);
                Ok(http::Response::from_parts(parts, body))
            }
            .instrument(span),
        )
    }
}

/// The span of one incoming call: a child of the caller's trace context, carrying the
/// caller's request id.
fn server_span(request: &http::Request<tonic::body::Body>) -> tracing::Span {
    let path = request.uri().path();
    let (service, method) = path.trim_start_matches('/').split_once('/').unwrap_or((path, ""));
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
    let span = tracing::info_span!(
        "grpc.server",
        otel.name = %path.trim_start_matches('/'),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        rpc.system = "grpc",
        rpc.service = %service,
        rpc.method = %method,
        server.address = %address,
        server.port = port,
        rpc.grpc.status_code = tracing::field::Empty,
        request_id = %request_id,
    );
    // A failure here only means no OpenTelemetry layer is installed.
    let _ = span.set_parent(extract_context(request.headers()));
    span
}

struct HeaderInjector<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::try_from(value),
        ) {
            self.0.insert(key, value);
        }
    }
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The OpenTelemetry context carried by a set of HTTP headers (`traceparent`), or an
/// empty context. The propagator is the global one (W3C trace context, set by
/// `kubedav-kit` at start-up).
pub fn extract_context(headers: &http::HeaderMap) -> opentelemetry::Context {
    opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&HeaderExtractor(headers)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_methods_are_labelled_and_others_pooled() {
        assert_eq!(
            labels("/kubedav.fileio.v1.FileIo/List"),
            ("kubedav.fileio.v1.FileIo", "List")
        );
        assert_eq!(labels("/grpc.health.v1.Health/Check").1, "Check");
        assert_eq!(
            labels("/kubedav.fileio.v1.FileIo/NoSuchMethod-1"),
            ("other", "other")
        );
        assert_eq!(labels("/x/y/z"), ("other", "other"));
    }

    #[test]
    fn the_status_comes_from_headers_or_trailers() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(status_in(&headers), None);
        headers.insert("grpc-status", http::HeaderValue::from_static("14"));
        assert_eq!(status_in(&headers), Some(tonic::Code::Unavailable));
        assert_eq!(code_name(tonic::Code::Unavailable), "Unavailable");
        assert_eq!(code_name(tonic::Code::Ok), "OK");
    }
}
