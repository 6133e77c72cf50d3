//! The HTTP method handlers, and the dispatcher that picks one.

pub mod agent_listing;
mod copymove;
mod delete;
mod get;
mod guard;
pub mod listing;
mod lock;
mod markdown;
mod mkcol;
mod options;
pub(crate) mod propfind;
mod proppatch;
mod put;

use crate::Gateway;
use crate::dav::method::DavMethod;
use crate::http::errors::{HttpError, HttpResult};
use crate::http::paths::{BasePath, DecodeError, RequestPath};
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use futures_util::future::Either;
use http::{StatusCode, header};
use std::future::Future;
use std::pin::Pin;

/// Routes a request to its method's handler; 405 with `Allow` for any other method.
///
/// The choice is made when called, and what is returned only runs the handler: an
/// `async fn` here would keep the request's place beside the handler's future for the
/// request's whole life.
pub fn dispatch<'a>(gateway: &'a Gateway, request: Request) -> impl Future<Output = Response> + Send + 'a {
    let answered = |response| Either::Left(std::future::ready(response));
    let Some(method) = DavMethod::of(request.method()) else {
        let mut response = HttpError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {} is not supported", request.method()),
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, crate::dav::method::allow());
        return answered(response);
    };
    if matches!(method, DavMethod::Get | DavMethod::Head)
        && let Some(asset) = get::asset(
            &gateway.config.base_path,
            request.uri().path(),
            method == DavMethod::Head,
        )
    {
        return answered(asset);
    }
    // Each handler's future is boxed: inline, the largest of them (LOCK's, 2 KiB) would
    // size every request's future, and the layers around it copy that as each starts
    // (`memmove` was a tenth of a PROPFIND Depth 0's user time; docs/benchmarks.md).
    let handler: Pin<Box<dyn Future<Output = HttpResult> + Send + 'a>> = match method {
        DavMethod::Get => Box::pin(get::get(gateway, request, false)),
        DavMethod::Head => Box::pin(get::get(gateway, request, true)),
        DavMethod::Put => Box::pin(put::put(gateway, request)),
        DavMethod::Delete => Box::pin(delete::delete(gateway, request)),
        DavMethod::Mkcol => Box::pin(mkcol::mkcol(gateway, request)),
        DavMethod::Options => return answered(options::options()),
        DavMethod::Propfind => Box::pin(propfind::propfind(gateway, request)),
        DavMethod::Proppatch => Box::pin(proppatch::proppatch(gateway, request)),
        DavMethod::Copy => Box::pin(copymove::copy_or_move(gateway, request, false)),
        DavMethod::Move => Box::pin(copymove::copy_or_move(gateway, request, true)),
        DavMethod::Lock => Box::pin(lock::lock(gateway, request)),
        DavMethod::Unlock => Box::pin(lock::unlock(gateway, request)),
    };
    Either::Right(handler.map(|result| result.unwrap_or_else(IntoResponse::into_response)))
}

/// The decoded path of a request below the gateway's base path, or the 400/404/414
/// that explains why it is refused.
pub fn request_path(gateway: &Gateway, request: &Request) -> Result<RequestPath, HttpError> {
    decode_path(gateway, request.uri().path())
}

/// A request's path decoded below the gateway's base path, or the 400/404/414 that
/// explains why it is refused.
pub fn decode_path(gateway: &Gateway, raw_path: &str) -> Result<RequestPath, HttpError> {
    gateway.config.base_path.decode(raw_path).map_err(|e| match e {
        DecodeError::TooLong => HttpError::new(StatusCode::URI_TOO_LONG, e.to_string()),
        DecodeError::Invalid(inner) => HttpError::bad_request(format!("invalid request path: {inner}")),
        DecodeError::OutsideBase(_) => HttpError::new(StatusCode::NOT_FOUND, e.to_string()),
    })
}

/// The single strong etag of an `If-Match` header, to be re-checked by fileio at commit
/// time (closing the gap between the gateway's check and the write).
pub fn single_if_match(headers: &http::HeaderMap) -> Option<String> {
    let value = headers.get(header::IF_MATCH)?.to_str().ok()?;
    let mut tags = crate::http::conditional::entity_tags(value);
    match (tags.next(), tags.next()) {
        (Some((false, tag)), None) => Some(tag.to_owned()),
        _ => None,
    }
}

/// Whether a request carries a body (a non-zero Content-Length, or chunked encoding).
pub fn has_body(headers: &http::HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
}

/// Adds `ETag` and `Last-Modified` for a representation.
pub fn validator_headers(headers: &mut http::HeaderMap, etag: &str, modified_unix_ns: i64) {
    // Built by hand, not with `format!`, whose formatting machinery and growing buffer
    // were 3 % of a 1 MiB GET's user time; a value made from a `String` keeps its bytes.
    let mut quoted = String::with_capacity(etag.len() + 2);
    quoted.push('"');
    quoted.push_str(etag);
    quoted.push('"');
    if let Ok(value) = header::HeaderValue::try_from(quoted) {
        headers.insert(header::ETAG, value);
    }
    if let Ok(value) = header::HeaderValue::try_from(crate::http::dates::http_date(modified_unix_ns)) {
        headers.insert(header::LAST_MODIFIED, value);
    }
}

/// Largest XML request body (PROPFIND, PROPPATCH, LOCK).
pub const MAX_XML_BODY: usize = 1 << 20;

/// Largest XML body parsed on an async worker; larger ones are parsed on the blocking
/// pool, so a worker is never held for more than about a tenth of a millisecond
/// (parsing is linear, a few hundred MB/s) while other requests wait for it.
pub const PARSE_ON_WORKER_BYTES: usize = 32 * 1024;

/// Large bodies parsed at once: one per core, so a flood of them queues (holding only
/// their bytes) instead of building that many trees side by side.
static LARGE_PARSES: std::sync::LazyLock<tokio::sync::Semaphore> = std::sync::LazyLock::new(|| {
    tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(1, usize::from))
});

/// Runs a CPU-bound parse of a large body on the blocking pool, at most one per core at
/// a time.
pub async fn off_worker<T: Send + 'static>(
    parse: impl FnOnce() -> Result<T, crate::dav::xmldom::XmlError> + Send + 'static,
) -> Result<T, crate::dav::xmldom::XmlError> {
    let _turn = LARGE_PARSES
        .acquire()
        .await
        .map_err(|_| crate::dav::xmldom::XmlError("the parser is shutting down".into()))?;
    tokio::task::spawn_blocking(parse)
        .await
        .unwrap_or_else(|e| Err(crate::dav::xmldom::XmlError(format!("the parser failed: {e}"))))
}

/// The request's XML body, parsed; `None` when there is none. 413 past
/// [`MAX_XML_BODY`], 400 with the reason when it is not acceptable XML.
pub async fn xml_body(request: Request) -> Result<Option<crate::dav::xmldom::Element>, HttpError> {
    let parsed = match xml_bytes(request).await? {
        Some(bytes) if bytes.len() > PARSE_ON_WORKER_BYTES => {
            off_worker(move || crate::dav::xmldom::parse(&bytes)).await
        }
        Some(bytes) => crate::dav::xmldom::parse(&bytes),
        None => return Ok(None),
    };
    parsed
        .map(Some)
        .map_err(|e| HttpError::bad_request(e.to_string()))
}

/// The request's body as read for [`xml_body`], unparsed; `None` when it is empty or
/// blank. 413 past [`MAX_XML_BODY`].
pub async fn xml_bytes(request: Request) -> Result<Option<bytes::Bytes>, HttpError> {
    let too_large = || {
        HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("XML bodies are limited to {MAX_XML_BODY} bytes"),
        )
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_XML_BODY as u64) {
        return Err(too_large());
    }
    use http_body_util::BodyExt;
    let collected = http_body_util::Limited::new(request.into_body(), MAX_XML_BODY)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                too_large()
            } else {
                HttpError::bad_request(format!("the request body broke off: {e}"))
            }
        })?;
    let bytes = collected.to_bytes();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    Ok(Some(bytes))
}

/// A 207 Multi-Status response with this XML body.
pub fn multistatus(body: impl Into<bytes::Bytes>) -> axum::response::Response {
    let mut response = Response::new(axum::body::Body::from(body.into()));
    *response.status_mut() = StatusCode::MULTI_STATUS;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/xml; charset=utf-8"),
    );
    response
}

/// A 207 Multi-Status whose XML body streams from `body`.
pub fn multistatus_stream(body: axum::body::Body) -> axum::response::Response {
    (
        StatusCode::MULTI_STATUS,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        body,
    )
        .into_response()
}

/// A 207 listing the members of a tree operation that failed (RFC 4918 9.6.1, 9.8.5).
pub fn failures(
    base: &BasePath,
    failures: &[kubedav_api::pb::fileio::v1::Failure],
) -> axum::response::Response {
    let responses: Vec<_> = failures
        .iter()
        .map(|f| {
            let path = kubedav_api::path::VolumePath::parse(&f.path).unwrap_or_default();
            (
                base.href(&path, false),
                crate::http::errors::http_status(tonic::Code::from(f.code)),
                f.message.clone(),
            )
        })
        .collect();
    multistatus(crate::dav::xml::multistatus(&responses))
}
