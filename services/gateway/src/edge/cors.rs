//! CORS for browser clients on other origins (`--cors-origins`), with tower-http's
//! `CorsLayer`, and HTTP compression of listings with its `CompressionLayer`.
//!
//! tower-http's layer answers every OPTIONS itself, but WebDAV clients send OPTIONS to
//! learn the `DAV` classes and `Allow`. So only a true preflight (OPTIONS with
//! `Access-Control-Request-Method`) from a listed origin goes to the layer, which answers
//! it without credentials; every other OPTIONS, and a preflight from any other origin,
//! takes the ordinary way (authentication included). Other requests go through the layer,
//! which adds `Access-Control-Allow-Origin` and the exposed headers for listed origins
//! only.

use axum::Router;
use axum::extract::Request;
use http::{HeaderName, HeaderValue, Method, header};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{Predicate, SizeAbove};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The request headers a WebDAV page may send.
const ALLOWED_HEADERS: [&str; 22] = [
    "authorization",
    "content-type",
    "depth",
    "destination",
    "overwrite",
    "if",
    "lock-token",
    "timeout",
    "range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "if-range",
    "x-oc-mtime",
    "oc-checksum",
    "content-digest",
    "repr-digest",
    "want-repr-digest",
    "accept",
    "x-requested-with",
    "x-expected-entity-length",
];

/// The response headers a page may read.
const EXPOSED_HEADERS: [&str; 12] = [
    "etag",
    "last-modified",
    "dav",
    "lock-token",
    "location",
    "content-range",
    "accept-ranges",
    "content-length",
    "repr-digest",
    "oc-checksum",
    "x-oc-mtime",
    "x-request-id",
];

/// Every method the gateway serves.
fn methods() -> Vec<Method> {
    [
        "GET",
        "HEAD",
        "PUT",
        "DELETE",
        "OPTIONS",
        "PROPFIND",
        "PROPPATCH",
        "MKCOL",
        "COPY",
        "MOVE",
        "LOCK",
        "UNLOCK",
    ]
    .into_iter()
    .filter_map(|m| Method::from_bytes(m.as_bytes()).ok())
    .collect()
}

/// `app` with CORS for `origins` (unchanged when there are none).
pub fn allow_origins(app: Router, origins: &[HeaderValue]) -> Router {
    if origins.is_empty() {
        return app;
    }
    let names = |list: &[&'static str]| {
        list.iter()
            .map(|h| HeaderName::from_static(h))
            .collect::<Vec<_>>()
    };
    let layer = CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins.iter().cloned()))
        .allow_methods(methods())
        .allow_headers(names(&ALLOWED_HEADERS))
        .expose_headers(names(&EXPOSED_HEADERS))
        .allow_credentials(true)
        .max_age(Duration::from_secs(600));
    let with_cors = app.clone().layer(layer);
    let origins: Arc<[HeaderValue]> = origins.into();
    Router::new().fallback_service(tower::service_fn(move |request: Request| {
        let route = if takes_the_layer(&request, &origins) {
            with_cors.clone()
        } else {
            app.clone()
        };
        route.oneshot(request)
    }))
}

/// Whether a request goes through the CORS layer: any but OPTIONS, and OPTIONS only as
/// a preflight from a listed origin.
fn takes_the_layer(request: &Request, origins: &[HeaderValue]) -> bool {
    if request.method() != Method::OPTIONS {
        return true;
    }
    let preflight = request
        .headers()
        .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let listed = request
        .headers()
        .get(header::ORIGIN)
        .is_some_and(|origin| origins.contains(origin));
    preflight && listed
}

/// Compression (gzip or brotli, as `accept_encoding` accepts) of multistatus and HTML
/// listing answers above 1 KiB, with tower-http's `CompressionLayer`. Answers with an
/// `ETag` are left as they are: a file's strong etag names its bytes, which another
/// coding would change.
///
/// Only an answer the layer would compress goes through it; the others return as they
/// came, as the layer would return them. Wrapped around every answer, the layer's body
/// type (5,824 bytes, for its encoders' state) was moved several times per request:
/// memory copies of 7 % of a PROPFIND Depth 0's user time (docs/benchmarks.md).
///
/// A plain function: the layer's future is ready at once around an answer already made,
/// so it is polled here once rather than awaited by every request's future.
pub fn compress_listing(
    accept_encoding: Option<HeaderValue>,
    response: axum::response::Response,
) -> axum::response::Response {
    let headers = response.headers();
    let compressible = !headers.contains_key(header::CONTENT_ENCODING)
        && !headers.contains_key(header::CONTENT_RANGE)
        && Listings.should_compress(&response);
    if !compressible {
        return response;
    }
    let mut request = http::Request::new(());
    if let Some(accept) = accept_encoding {
        request.headers_mut().insert(header::ACCEPT_ENCODING, accept);
    }
    let mut answer = Some(response);
    let answered = tower::service_fn(move |_: http::Request<()>| {
        std::future::ready(Ok::<_, std::convert::Infallible>(
            answer.take().expect("one request per answer"),
        ))
    });
    let compressing = tower::Layer::layer(
        &CompressionLayer::new()
            .quality(tower_http::CompressionLevel::Fastest)
            .compress_when(Listings),
        answered,
    );
    let compressed = futures_util::FutureExt::now_or_never(compressing.oneshot(request))
        .expect("the compression layer answers at once when its inner service does");
    match compressed {
        Ok(response) => response.map(axum::body::Body::new),
        Err(never) => match never {},
    }
}

/// The [`compress_listing`] predicate.
#[derive(Clone, Copy, Debug, Default)]
pub struct Listings;

impl Predicate for Listings {
    fn should_compress<B: http_body::Body>(&self, response: &http::Response<B>) -> bool {
        let headers = response.headers();
        let listing = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| {
                t.starts_with("application/xml") || t.starts_with("text/xml") || t.starts_with("text/html")
            });
        listing && !headers.contains_key(header::ETAG) && SizeAbove::new(1024).should_compress(response)
    }
}
