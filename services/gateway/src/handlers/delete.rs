//! DELETE: remove a resource, a collection with all its members (RFC 4918 9.6).

use super::guard::{Asking, Change, guard_write};
use crate::Gateway;
use crate::http::conditional::single_if_match;
use crate::http::errors::{HttpError, HttpResult};
use crate::http::paths::request_path;
use axum::extract::Request;
use axum::response::IntoResponse;
use http::StatusCode;
use kubedav_api::fileio::DeleteRequest;

/// 204 when everything went; 207 listing the members that could not be deleted.
pub(super) async fn delete(gateway: &Gateway, request: Request) -> HttpResult {
    let target = request_path(&gateway.base_path(), &request)?;
    if target.path.is_root() {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            "the root collection cannot be deleted",
        ));
    }
    let targets = crate::dav::locking::member(&target.path, true);
    let change = Change::of(targets).conditional();
    guard_write(gateway, Asking::of(&request), &target.path, change).await?;
    let by = crate::request::Principal::of(&request);
    crate::shares::end_before_removing(gateway, &target.path, by.name()).await?;
    let delete = DeleteRequest {
        path: target.path.as_str().to_owned(),
        if_match: single_if_match(request.headers()),
        by: by.name().to_owned(),
    };
    let (fileio, locks, path) = (gateway.fileio.clone(), gateway.locks.clone(), target.path.clone());
    // Once asked, the delete and the release of its locks finish even if the client
    // leaves: locks left on a removed path would refuse whatever is made there.
    let reply = kubedav_kit::finish::to_the_end(async move {
        let reply = fileio.delete(delete).await?;
        if reply.failures.is_empty() {
            crate::dav::locking::release(locks.as_ref(), &path).await;
        }
        Ok::<_, tonic::Status>(reply)
    })
    .await?;
    if reply.failures.is_empty() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(crate::dav::multistatus::failures(
        &gateway.base_path(),
        &reply.failures,
    ))
}
