//! DELETE: remove a resource, a collection with all its members (RFC 4918 9.6).

use super::{current_validators, has_preconditions, request_path, single_if_match};
use crate::Gateway;
use crate::conditional::{Outcome, evaluate};
use crate::errors::{HttpError, HttpResult};
use axum::extract::Request;
use axum::response::IntoResponse;
use http::StatusCode;
use kubedav_api::fileio::DeleteRequest;

/// 204 when everything went; 207 listing the members that could not be deleted.
pub async fn delete(gateway: &Gateway, request: Request) -> HttpResult {
    let target = request_path(&request)?;
    if target.path.is_root() {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            "the root collection cannot be deleted",
        ));
    }
    if has_preconditions(request.headers()) {
        let current = current_validators(gateway, &target.path).await?;
        if evaluate(request.headers(), current.as_ref(), false) != Outcome::Proceed {
            return Err(HttpError::new(
                StatusCode::PRECONDITION_FAILED,
                "a precondition header did not hold",
            ));
        }
    }
    let targets = std::iter::once(crate::locking::target(&target.path, true))
        .chain(crate::locking::parent(&target.path))
        .collect();
    if let Err(response) = crate::locking::check_write(
        gateway,
        request.headers(),
        crate::auth::principal(&request),
        &target.path,
        targets,
    )
    .await
    {
        return Ok(response);
    }
    let reply = gateway
        .fileio
        .delete(DeleteRequest {
            path: target.path.as_str().to_owned(),
            if_match: single_if_match(request.headers()),
        })
        .await?;
    if reply.failures.is_empty() {
        crate::locking::release(gateway, &target.path).await;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(super::failures(&reply.failures))
}
