//! Requests that HTTP/1.1 says must be refused, and that the HTTP layer (hyper) lets
//! through, are refused here before anything else sees them: an HTTP/1.1 request without
//! `Host` gets 400, as RFC 9112 3.2 requires. Every answer carries
//! `X-Content-Type-Options: nosniff`.
//!
//! What hyper refuses itself, with a bare 400: unparseable request lines and headers,
//! several different `Content-Length`s, a `Content-Length` that is not a number, broken
//! chunked encoding. A request with both `Content-Length` and `Transfer-Encoding` is
//! framed by the latter and its connection closed after the answer (RFC 9112 6.3), so no
//! second request can be smuggled behind it.

use crate::errors::HttpError;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, Version, header};

/// The middleware.
pub async fn guard(request: Request, next: Next) -> Response {
    let mut response =
        if request.version() == Version::HTTP_11 && !request.headers().contains_key(header::HOST) {
            refuse("HTTP/1.1 requests must carry a Host header (RFC 9112, section 3.2)")
        } else {
            next.run(request).await
        };
    // Every answer, file or error, is taken as the type it declares: a browser never
    // sniffs a text/plain error message or an uploaded file into HTML.
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// 400 with `message`, closing the connection: what follows on it cannot be trusted.
fn refuse(message: &str) -> Response {
    let mut response = HttpError::new(StatusCode::BAD_REQUEST, message).into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
