//! What travels with a call besides its message: the W3C trace context and the id of
//! the HTTP request it serves.

use opentelemetry::propagation::{Extractor, Injector};

/// The id of the HTTP request being served (its `x-request-id`), a task-local. The
/// gateway sets it around each request; gRPC calls made inside carry it to the services,
/// which set it around the calls they serve.
pub use kubedav_kit::telemetry::scope::REQUEST_ID;

/// The metadata key that carries the request id between processes.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

pub(super) struct HeaderInjector<'a>(pub(super) &'a mut http::HeaderMap);

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

pub(super) struct HeaderExtractor<'a>(&'a http::HeaderMap);

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
