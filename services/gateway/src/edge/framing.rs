//! Requests that HTTP/1.1 says must be refused, and that the HTTP layer (hyper) lets
//! through, are refused here before anything else sees them: an HTTP/1.1 request without
//! `Host` gets 400, as RFC 9112 3.2 requires. Every answer carries
//! `X-Content-Type-Options: nosniff`, and once shutdown began every HTTP/1 answer carries
//! `Connection: close` (HTTP/2 clients get GOAWAY when the port closes).
//!
//! What hyper refuses itself, with a bare 400: unparseable request lines and headers,
//! several different `Content-Length`s, a `Content-Length` that is not a number, broken
//! chunked encoding. A request with both `Content-Length` and `Transfer-Encoding` is
//! framed by the latter and its connection closed after the answer (RFC 9112 6.3), so no
//! second request can be smuggled behind it.
//!
//! A request whose body is left unread because it was refused early (507 for a full
//! volume before the upload, 403, 412, 423...) gets a *lingering close*, as Apache and
//! nginx do: the rest of its body is read and thrown away for up to [`LINGER`] and
//! [`LINGER_BYTES`], so the client, still sending, reads the answer instead of a
//! connection reset.

use crate::http::errors::HttpError;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, Version, header};
use http_body::{Body as _, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Longest time an unread request body is drained after the answer.
pub const LINGER: Duration = Duration::from_secs(5);
/// Most bytes of an unread request body drained after the answer.
pub const LINGER_BYTES: u64 = 64 << 20;

/// The middleware.
pub fn guard<F: std::future::Future<Output = Response>>(
    gateway: &crate::Gateway,
    request: Request,
    next: impl FnOnce(Request) -> F,
) -> impl std::future::Future<Output = Response> {
    use futures_util::FutureExt;
    use futures_util::future::Either;
    let http1 = request.version() <= Version::HTTP_11;
    let answer = if request.version() == Version::HTTP_11 && !request.headers().contains_key(header::HOST) {
        Either::Left(std::future::ready(refuse(
            "HTTP/1.1 requests must carry a Host header (RFC 9112, section 3.2)",
        )))
    } else if has_body(&request) {
        Either::Right(next(
            request.map(|body| axum::body::Body::new(Lingering(Some(body)))),
        ))
    } else {
        Either::Right(next(request))
    };
    // `map`, not an `async move` block awaiting `answer`, which would keep it twice.
    answer.map(move |mut response| {
        // Every answer, file or error, is taken as the type it declares: a browser never
        // sniffs a text/plain error message or an uploaded file into HTML.
        response.headers_mut().insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        if http1 && gateway.is_draining() {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    })
}

/// 400 with `message`, closing the connection: what follows on it cannot be trusted.
fn refuse(message: &str) -> Response {
    let mut response = HttpError::new(StatusCode::BAD_REQUEST, message).into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Whether the request carries a body (a declared length above 0, or chunked).
fn has_body(request: &Request) -> bool {
    let headers = request.headers();
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() != b"0")
}

/// A request body that, dropped unread, is drained in the background (see
/// [the module](self)).
struct Lingering(Option<axum::body::Body>);

impl http_body::Body for Lingering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        match self.0.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(|body| body.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.0.as_ref().map(|body| body.size_hint()).unwrap_or_default()
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let Some(mut body) = self.0.take() else { return };
        if body.is_end_stream() || body.size_hint().lower() > LINGER_BYTES {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let mut drained = 0u64;
            let _ = tokio::time::timeout(LINGER, async {
                while let Some(Ok(frame)) =
                    std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
                {
                    drained += frame.data_ref().map_or(0, |data| data.len() as u64);
                    if drained > LINGER_BYTES {
                        break;
                    }
                }
            })
            .await;
        });
    }
}
