//! What travels with a request or a call besides its message: the W3C trace context
//! and the id of the HTTP request it serves. The gateway reads them from a client's
//! request; `kubedav-remote` carries them in a gRPC call's metadata.

use opentelemetry::propagation::{Extractor, Injector};

/// The id of the HTTP request being served (its `x-request-id`), a task-local. The
/// gateway sets it around each request; gRPC calls made inside carry it to the services,
/// which set it around the calls they serve.
pub use super::scope::REQUEST_ID;

/// The metadata key that carries the request id between processes.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Writes a context's fields into HTTP headers (gRPC metadata).
pub struct HeaderInjector<'a>(pub &'a mut http::HeaderMap);

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

/// Reads a context's fields from HTTP headers (gRPC metadata).
pub struct HeaderExtractor<'a>(pub &'a http::HeaderMap);

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
/// [`super::init`] at start-up).
pub fn extract_context(headers: &http::HeaderMap) -> opentelemetry::Context {
    opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&HeaderExtractor(headers)))
}

/// The id of `span`'s trace as 32 lowercase hex digits, when the trace is sampled (and so
/// exported): what an exemplar names, so that a dashboard can open the trace.
pub fn sampled_trace_id(span: &tracing::Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    let span = context.span();
    let span_context = span.span_context();
    (span_context.is_valid() && span_context.is_sampled()).then(|| span_context.trace_id().to_string())
}
