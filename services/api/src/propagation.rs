//! W3C trace context across gRPC hops.
//!
//! The client side injects the current `tracing` span's OpenTelemetry context into the
//! request metadata ([`TraceContextInjector`]); the server side extracts it and makes it
//! the parent of the RPC's span ([`server_span`]). The propagator is the global one, set
//! by `kubedav-kit` at start-up (W3C `traceparent`/`tracestate`).

use opentelemetry::propagation::{Extractor, Injector};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// A tonic interceptor that writes the current span's trace context into the metadata.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceContextInjector;

impl tonic::service::Interceptor for TraceContextInjector {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let context = tracing::Span::current().context();
        opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.inject_context(&context, &mut MetadataInjector(request.metadata_mut()))
        });
        Ok(request)
    }
}

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            tonic::metadata::MetadataValue::try_from(value.as_str()),
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

/// The span for one incoming gRPC request, child of the caller's trace context if the
/// request carried one. Use as tonic's `Server::trace_fn`.
pub fn server_span(request: &http::Request<()>) -> tracing::Span {
    let path = request.uri().path();
    let (service, method) = path.trim_start_matches('/').split_once('/').unwrap_or((path, ""));
    let span = tracing::info_span!(
        "grpc.server",
        otel.name = %path.trim_start_matches('/'),
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = %service,
        rpc.method = %method,
    );
    let parent = extract_context(request.headers());
    // A failure here only means no OpenTelemetry layer is installed.
    let _ = span.set_parent(parent);
    span
}

/// The OpenTelemetry context carried by a set of HTTP headers (`traceparent`), or an
/// empty context.
pub fn extract_context(headers: &http::HeaderMap) -> opentelemetry::Context {
    opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&HeaderExtractor(headers)))
}
