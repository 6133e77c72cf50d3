//! Per-request observability: the request id, the server span and the RED metrics.
//!
//! * `x-request-id`: a sane incoming value is kept, otherwise one is generated; either
//!   way it is echoed on the response and recorded on the span.
//! * The span follows OpenTelemetry's HTTP semantic conventions and is a child of an
//!   incoming W3C `traceparent`.
//! * Metrics carry only bounded labels: the method (unknown ones as `OTHER`), the status
//!   code and its class. Request and response body bytes are counted as they stream. The
//!   duration histogram keeps a sampled request's trace id as its bucket's exemplar.

use crate::edge::counting::CountingBody;
use axum::extract::Request;
use axum::response::Response;
use futures_util::FutureExt;
use http::HeaderValue;
use http_body::Body as _;
use kubedav_metrics::{Counter, CounterFamily, Gauge, TracedHistogram, TracedHistogramFamily};
use std::sync::{LazyLock, OnceLock};
use std::time::Instant;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The request id header, the one the gRPC hops carry too. A `HeaderName`, not the
/// name's text: a lookup or insert by text parses and classifies the name each time.
pub const REQUEST_ID: http::HeaderName =
    http::HeaderName::from_static(kubedav_kit::telemetry::propagation::REQUEST_ID_HEADER);

/// W3C trace context's header.
const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");

static REQUESTS: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_http_requests_total",
        "HTTP requests answered, by method, status code and status class (1xx ... 5xx).",
        &["method", "code", "status_class"],
    )
});
static DURATION: LazyLock<TracedHistogramFamily> = LazyLock::new(|| {
    TracedHistogramFamily::new(
        "kubedav_http_request_duration_seconds",
        "Time to the response head, by method (exemplars: the trace ids of sampled requests).",
        &["method"],
        &[
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ],
    )
});
static BYTES_IN: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_http_request_body_bytes_total",
        "Request body bytes received, by method.",
        &["method"],
    )
});
static BYTES_OUT: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_http_response_body_bytes_total",
        "Response body bytes sent, by method.",
        &["method"],
    )
});
static IN_FLIGHT: LazyLock<Gauge> = LazyLock::new(|| {
    kubedav_metrics::gauge("kubedav_http_requests_in_flight", "HTTP requests being handled.")
});

const KNOWN_METHODS: [&str; 14] = [
    "GET",
    "HEAD",
    "PUT",
    "POST",
    "DELETE",
    "OPTIONS",
    "PATCH",
    "MKCOL",
    "PROPFIND",
    "PROPPATCH",
    "COPY",
    "MOVE",
    "LOCK",
    "UNLOCK",
];
const OTHER: usize = KNOWN_METHODS.len();
const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The index of a method's label: a known method's place, or [`OTHER`].
fn method_index(method: &http::Method) -> usize {
    // A match, not a search of KNOWN_METHODS: one comparison of lengths and bytes.
    match method.as_str() {
        "GET" => 0,
        "HEAD" => 1,
        "PUT" => 2,
        "POST" => 3,
        "DELETE" => 4,
        "OPTIONS" => 5,
        "PATCH" => 6,
        "MKCOL" => 7,
        "PROPFIND" => 8,
        "PROPPATCH" => 9,
        "COPY" => 10,
        "MOVE" => 11,
        "LOCK" => 12,
        "UNLOCK" => 13,
        _ => OTHER,
    }
}

fn method_label(index: usize) -> &'static str {
    KNOWN_METHODS.get(index).copied().unwrap_or("OTHER")
}

/// One method's metric children, looked up by label once and then kept: the label
/// lookup (hashing, a lock) would otherwise be paid four times per request. A child is
/// made when its method (and status code) is first seen, so /metrics shows only series
/// that happened. Codes are 100 to 599 (anything else counts as 599's class under the
/// code "other"): a bounded set, of which the gateway answers a few dozen.
struct MethodMetrics {
    duration: TracedHistogram,
    bytes_in: Counter,
    bytes_out: Counter,
    by_code: [OnceLock<Counter>; CODES],
}

/// Status codes 100..=599, and one slot for anything else.
const CODES: usize = 501;

static BY_METHOD: [OnceLock<MethodMetrics>; OTHER + 1] = [const { OnceLock::new() }; OTHER + 1];

fn metrics_of(index: usize) -> &'static MethodMetrics {
    BY_METHOD[index].get_or_init(|| {
        let label = method_label(index);
        MethodMetrics {
            duration: DURATION.with_label_values(&[label]),
            bytes_in: BYTES_IN.with_label_values(&[label]),
            bytes_out: BYTES_OUT.with_label_values(&[label]),
            by_code: [const { OnceLock::new() }; CODES],
        }
    })
}

impl MethodMetrics {
    fn requests(&self, index: usize, status: http::StatusCode) -> &Counter {
        let code = status.as_u16();
        let known = (100..=599).contains(&code);
        let slot = if known { usize::from(code - 100) } else { CODES - 1 };
        self.by_code[slot].get_or_init(|| {
            let class = usize::from((code / 100).clamp(1, 5)) - 1;
            let code_label = if known {
                code.to_string()
            } else {
                "other".to_owned()
            };
            REQUESTS.with_label_values(&[method_label(index), &code_label, STATUS_CLASSES[class]])
        })
    }
}

/// A kept incoming request id: 1 to 128 visible ASCII characters.
fn acceptable_id(value: &HeaderValue) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty() && bytes.len() <= 128 && bytes.iter().all(|b| b.is_ascii_graphic())
}

/// A new request id: 128 random bits as 32 lowercase hex digits.
fn generated_id() -> HeaderValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut bits = fastrand::u128(..);
    let mut digits = [0u8; 32];
    for digit in digits.iter_mut().rev() {
        *digit = HEX[(bits & 0xf) as usize];
        bits >>= 4;
    }
    HeaderValue::from_bytes(&digits).expect("hex is a valid header")
}

/// The request's server span, or none when nothing would read it: no trace export, no
/// JSON logs with an incoming `traceparent` to continue, and no debug lines here
/// (`kubedav_kit::telemetry::span_wanted`). Its request id reaches log lines through
/// the task's `REQUEST_ID` either way.
fn request_span(request: &Request, method: &'static str, id: &HeaderValue) -> tracing::Span {
    let continues = request.headers().contains_key(TRACEPARENT);
    if !kubedav_kit::telemetry::span_wanted(continues) && !tracing::enabled!(tracing::Level::DEBUG) {
        return tracing::Span::none();
    }
    tracing::info_span!(
        "http.request",
        otel.name = method,
        otel.kind = "server",
        http.request.method = method,
        url.path = %crate::links::redacted(request.uri().path()),
        request_id = id.to_str().unwrap_or_default(),
        client.address = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
    )
}

/// The middleware: its request-side work is done when called, in the request's scope
/// and span, together with `next`'s own (the layers inside are plain functions too);
/// what it returns awaits the answer and then records it. It does not keep the request
/// for the answer's whole life, as an `async fn` would: that place would be copied with
/// every request's future (docs/benchmarks.md, "2026-11-27").
pub fn observe<F: std::future::Future<Output = Response>>(
    request: Request,
    next: impl FnOnce(Request) -> F,
) -> impl std::future::Future<Output = Response> {
    // A generated id is not added to the request's headers: nothing reads it there, and
    // the calls the request makes take it from the task-local scope below.
    let id = match request.headers().get(&REQUEST_ID) {
        Some(value) if acceptable_id(value) => value.clone(),
        _ => generated_id(),
    };
    let index = method_index(request.method());
    let method = method_label(index);
    let metrics = metrics_of(index);
    let client = request
        .extensions()
        .get::<crate::request::ClientIp>()
        .map(|c| c.0);
    let access = tracing::enabled!(target: "kubedav::access", tracing::Level::INFO).then(|| {
        (
            request.method().clone(),
            crate::links::redacted(request.uri().path()).into_owned(),
        )
    });
    let span = request_span(&request, method, &id);
    if let Some(client) = client
        && !span.is_disabled()
    {
        span.record("client.address", tracing::field::display(client));
    }
    // Only the W3C trace context propagator is installed: without its header there is
    // nothing to extract, and the lookup is skipped.
    if !span.is_disabled() && request.headers().contains_key(TRACEPARENT) {
        let _ = span.set_parent(kubedav_kit::telemetry::propagation::extract_context(
            request.headers(),
        ));
    }
    // A request without a body (most of them) has no bytes to count, nor a wrapper to box.
    let request = if request.body().is_end_stream() {
        request
    } else {
        request.map(|body| axum::body::Body::new(CountingBody::new(body, metrics.bytes_in.clone())))
    };
    let in_flight = InFlight::begin();
    let started = Instant::now();
    let request_id: std::sync::Arc<str> = id.to_str().unwrap_or_default().into();
    let scope = &kubedav_kit::telemetry::propagation::REQUEST_ID;
    let answer = scope.sync_scope(request_id.clone(), || span.in_scope(|| next(request)));
    let answer = scope.scope(request_id.clone(), answer).instrument(span.clone());
    // `map`, not an `async move` block awaiting `answer`: such a block would keep
    // `answer` twice, as the value it captured and as the future it polls.
    answer.map(move |mut response| {
        drop(in_flight);
        let status = response.status();
        // As an i64: tracing-opentelemetry exports u64 fields as strings.
        span.record("http.response.status_code", i64::from(status.as_u16()));
        metrics.duration.observe(
            started.elapsed().as_secs_f64(),
            kubedav_kit::telemetry::propagation::sampled_trace_id(&span),
        );
        metrics.requests(index, status).inc();
        if let Some((method, path)) = access {
            let _entered = span.enter();
            scope.sync_scope(request_id, || {
                tracing::info!(
                    target: "kubedav::access",
                    method = method.as_str(),
                    path = %path,
                    client = client.map(tracing::field::display),
                    status = i64::from(status.as_u16()),
                    duration_ms = started.elapsed().as_secs_f64() * 1000.0,
                    "request"
                )
            });
        }
        response.headers_mut().insert(REQUEST_ID, id);
        response.map(|body| axum::body::Body::new(CountingBody::new(body, metrics.bytes_out.clone())))
    })
}

/// A request counted in `kubedav_http_requests_in_flight` until it is answered, or until
/// its future is dropped unanswered (the client went away while it waited).
struct InFlight;

impl InFlight {
    fn begin() -> Self {
        IN_FLIGHT.inc();
        Self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_32_hex_digits_and_differ() {
        let (a, b) = (generated_id(), generated_id());
        assert_eq!(a.len(), 32);
        assert!(
            a.as_bytes()
                .iter()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }

    #[test]
    fn every_known_method_has_its_own_label() {
        for (index, name) in KNOWN_METHODS.iter().enumerate() {
            let method = http::Method::from_bytes(name.as_bytes()).unwrap();
            assert_eq!(method_index(&method), index, "{name}");
        }
    }

    #[test]
    fn unknown_methods_share_one_label() {
        assert_eq!(method_label(method_index(&http::Method::GET)), "GET");
        assert_eq!(
            method_label(method_index(&http::Method::from_bytes(b"UNLOCK").unwrap())),
            "UNLOCK"
        );
        assert_eq!(
            method_label(method_index(&http::Method::from_bytes(b"BREW").unwrap())),
            "OTHER"
        );
    }

    #[test]
    fn a_request_is_counted_under_its_method_code_and_status_class() {
        let index = method_index(&http::Method::from_bytes(b"MKCOL").unwrap());
        let counter = REQUESTS.with_label_values(&["MKCOL", "409", "4xx"]);
        let before = counter.get();
        metrics_of(index)
            .requests(index, http::StatusCode::CONFLICT)
            .inc();
        assert_eq!(counter.get(), before + 1);
    }
}
