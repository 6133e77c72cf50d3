//! Per-request observability: the request id, the server span and the RED metrics.
//!
//! * `x-request-id`: a sane incoming value is kept, otherwise one is generated; either
//!   way it is echoed on the response and recorded on the span.
//! * The span follows OpenTelemetry's HTTP semantic conventions and is a child of an
//!   incoming W3C `traceparent`.
//! * Metrics carry only bounded labels: the method (unknown ones as `OTHER`) and the
//!   status class. Request and response body bytes are counted as they stream.

use crate::counting::CountingBody;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::HeaderValue;
use prometheus::{
    HistogramVec, IntCounterVec, IntGauge, register_histogram_vec, register_int_counter_vec,
    register_int_gauge,
};
use std::sync::LazyLock;
use std::time::Instant;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The request id header.
pub const REQUEST_ID: &str = "x-request-id";

static REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "kubedav_http_requests_total",
        "HTTP requests answered.",
        &["method", "status_class"]
    )
    .expect("metric registers once")
});
static DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "kubedav_http_request_duration_seconds",
        "Time to the response head, by method.",
        &["method"],
        vec![
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0
        ]
    )
    .expect("metric registers once")
});
static BYTES_IN: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "kubedav_http_request_body_bytes_total",
        "Request body bytes received, by method.",
        &["method"]
    )
    .expect("metric registers once")
});
static BYTES_OUT: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "kubedav_http_response_body_bytes_total",
        "Response body bytes sent, by method.",
        &["method"]
    )
    .expect("metric registers once")
});
static IN_FLIGHT: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge!("kubedav_http_requests_in_flight", "HTTP requests being handled.")
        .expect("metric registers once")
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

fn method_label(method: &http::Method) -> &'static str {
    KNOWN_METHODS
        .iter()
        .find(|m| **m == method.as_str())
        .copied()
        .unwrap_or("OTHER")
}

/// A kept incoming request id: 1 to 128 visible ASCII characters.
fn acceptable_id(value: &HeaderValue) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty() && bytes.len() <= 128 && bytes.iter().all(|b| b.is_ascii_graphic())
}

/// The middleware.
pub async fn observe(mut request: Request, next: Next) -> Response {
    let id = match request.headers().get(REQUEST_ID) {
        Some(value) if acceptable_id(value) => value.clone(),
        _ => {
            let generated = HeaderValue::from_str(&format!("{:032x}", fastrand::u128(..)))
                .expect("hex is a valid header");
            request.headers_mut().insert(REQUEST_ID, generated.clone());
            generated
        }
    };
    let method = method_label(request.method());
    let access = tracing::enabled!(target: "kubedav::access", tracing::Level::INFO)
        .then(|| (request.method().clone(), request.uri().path().to_owned()));
    let span = tracing::info_span!(
        "http.request",
        otel.name = method,
        otel.kind = "server",
        http.request.method = method,
        url.path = %request.uri().path(),
        request_id = %id.to_str().unwrap_or_default(),
        http.response.status_code = tracing::field::Empty,
    );
    let _ = span.set_parent(kubedav_api::rpc::extract_context(request.headers()));
    let request = request
        .map(|body| axum::body::Body::new(CountingBody::new(body, BYTES_IN.with_label_values(&[method]))));
    IN_FLIGHT.inc();
    let started = Instant::now();
    let request_id: std::sync::Arc<str> = id.to_str().unwrap_or_default().into();
    let mut response = kubedav_api::rpc::REQUEST_ID
        .scope(request_id, next.run(request))
        .instrument(span.clone())
        .await;
    IN_FLIGHT.dec();
    let status = response.status();
    // As an i64: tracing-opentelemetry exports u64 fields as strings.
    span.record("http.response.status_code", i64::from(status.as_u16()));
    DURATION
        .with_label_values(&[method])
        .observe(started.elapsed().as_secs_f64());
    let class = match status.as_u16() / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    };
    REQUESTS.with_label_values(&[method, class]).inc();
    if let Some((method, path)) = access {
        span.in_scope(|| {
            tracing::info!(
                target: "kubedav::access",
                method = method.as_str(),
                path = %path,
                status = i64::from(status.as_u16()),
                duration_ms = started.elapsed().as_secs_f64() * 1000.0,
                "request"
            )
        });
    }
    response.headers_mut().insert(REQUEST_ID, id);
    response
        .map(|body| axum::body::Body::new(CountingBody::new(body, BYTES_OUT.with_label_values(&[method]))))
}
