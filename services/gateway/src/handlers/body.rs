//! The XML bodies of PROPFIND, PROPPATCH and LOCK, read within [`MAX_XML_BODY`] and
//! parsed ([`xml_body`]); large ones on the blocking pool, one per core at a time
//! ([`off_worker`]).

use crate::dav::xmldom::{Element, XmlError};
use crate::http::errors::HttpError;
use axum::extract::Request;
use http::{StatusCode, header};

/// Largest XML request body (PROPFIND, PROPPATCH, LOCK).
pub(super) const MAX_XML_BODY: usize = 1 << 20;

/// Largest XML body parsed on an async worker; larger ones are parsed on the blocking
/// pool, so a worker is never held for more than about a tenth of a millisecond
/// (parsing is linear, a few hundred MB/s) while other requests wait for it.
pub(super) const PARSE_ON_WORKER_BYTES: usize = 32 * 1024;

/// Large bodies parsed at once: one per core, so a flood of them queues (holding only
/// their bytes) instead of building that many trees side by side.
static LARGE_PARSES: std::sync::LazyLock<tokio::sync::Semaphore> = std::sync::LazyLock::new(|| {
    tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(1, usize::from))
});

/// Runs a CPU-bound parse of a large body on the blocking pool, at most one per core at
/// a time.
pub(super) async fn off_worker<T: Send + 'static>(
    parse: impl FnOnce() -> Result<T, XmlError> + Send + 'static,
) -> Result<T, XmlError> {
    let _turn = LARGE_PARSES
        .acquire()
        .await
        .map_err(|_| XmlError("the parser is shutting down".into()))?;
    tokio::task::spawn_blocking(parse)
        .await
        .unwrap_or_else(|e| Err(XmlError(format!("the parser failed: {e}"))))
}

/// The request's XML body, parsed; `None` when there is none. 413 past
/// [`MAX_XML_BODY`], 400 with the reason when it is not acceptable XML.
pub(super) async fn xml_body(request: Request) -> Result<Option<Element>, HttpError> {
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
pub(super) async fn xml_bytes(request: Request) -> Result<Option<bytes::Bytes>, HttpError> {
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
