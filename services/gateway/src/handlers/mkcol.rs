//! MKCOL: create a collection (RFC 4918 9.3).

use super::guard::{Asking, Change, guard_write};
use crate::Gateway;
use crate::http::errors::{HttpError, HttpResult};
use crate::http::paths::request_path;
use axum::extract::Request;
use axum::response::IntoResponse;
use http::{StatusCode, header};
use kubedav_api::fileio::MkdirRequest;
use tonic::Code;

/// 201 when created; 405 if something exists there; 409 if the parent is missing;
/// 415 when a body is sent (no MKCOL body format is supported).
pub(super) async fn mkcol(gateway: &Gateway, request: Request) -> HttpResult {
    let target = request_path(&gateway.base_path(), &request)?;
    if has_body(request.headers()) {
        return Err(HttpError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "MKCOL with a request body is not supported; send it without one",
        ));
    }
    if target.path.is_root() {
        return Err(HttpError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "the root collection already exists",
        ));
    }
    let targets = crate::dav::locking::member(&target.path, false);
    let change = Change::of(targets);
    guard_write(gateway, Asking::of(&request), &target.path, change).await?;
    match gateway
        .fileio
        .mkdir(MkdirRequest {
            path: target.path.as_str().to_owned(),
        })
        .await
    {
        Ok(_) => Ok(StatusCode::CREATED.into_response()),
        Err(status) => Err(match status.code() {
            Code::AlreadyExists => HttpError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{} already exists", target.path),
            ),
            Code::FailedPrecondition | Code::NotFound => HttpError::new(
                StatusCode::CONFLICT,
                format!(
                    "the parent of {} does not exist or is not a collection; create it first",
                    target.path
                ),
            ),
            _ => status.into(),
        }),
    }
}

/// Whether a request carries a body (a non-zero Content-Length, or chunked encoding).
fn has_body(headers: &http::HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
}
