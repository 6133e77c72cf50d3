//! COPY and MOVE (RFC 4918 9.8, 9.9).

use super::guard::{Asking, Change, guard_write};
use crate::Gateway;
use crate::access::Viewer;
use crate::dav::headers::{Depth, depth, destination, overwrite};
use crate::http::errors::{HttpError, HttpResult};
use crate::http::paths::request_path;
use axum::extract::Request;
use axum::response::IntoResponse;
use http::{StatusCode, header};
use kubedav_api::fileio::{CopyRequest, MoveRequest};
use tonic::Code;

/// 201 when the destination was created, 204 when it was replaced, 207 when members
/// failed; 412 when Overwrite is F and the destination exists; 409 without a
/// destination parent; 403 when source and destination overlap; 502 for another host.
pub(super) async fn copy_or_move(gateway: &Gateway, request: Request, is_move: bool) -> HttpResult {
    let source = request_path(&gateway.base_path(), &request)?;
    let headers = request.headers();
    let destination = destination(&gateway.base_path(), headers)?;
    crate::dav::quirks::refuse_macos_metadata(gateway.config.refuse_macos_metadata, &destination.path)?;
    let overwrite = overwrite(headers)?;
    let depth = depth(headers, Depth::Infinity)?;
    if depth == Depth::One || (is_move && depth != Depth::Infinity) {
        return Err(HttpError::bad_request(if is_move {
            "MOVE takes only Depth: infinity"
        } else {
            "COPY takes Depth 0 or infinity"
        }));
    }
    if source.path.is_root() && is_move {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            "the root collection cannot be moved",
        ));
    }
    if source.path == destination.path {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            "the source and the destination are the same resource",
        ));
    }
    let mut targets = crate::dav::locking::member(&destination.path, true);
    if is_move {
        targets.extend(crate::dav::locking::member(&source.path, true));
    }
    guard_write(gateway, Asking::of(&request), &source.path, Change::of(targets)).await?;
    let (from, to) = (
        source.path.as_str().to_owned(),
        destination.path.as_str().to_owned(),
    );
    let by = crate::request::Principal::of(&request).name().to_owned();
    let result = if is_move {
        crate::shares::end_before_removing(gateway, &source.path, &by).await?;
        let moved = MoveRequest {
            source: from,
            destination: to,
            overwrite,
            by,
        };
        let (fileio, locks, path) = (gateway.fileio.clone(), gateway.locks.clone(), source.path.clone());
        // Once asked, the move and the release of the source's locks finish even if the
        // client leaves: locks left on the old path would refuse whatever is made there.
        kubedav_kit::finish::to_the_end(async move {
            let reply = fileio.r#move(moved).await?;
            if reply.failures.is_empty() {
                crate::dav::locking::release(locks.as_ref(), &path).await;
            }
            Ok(reply)
        })
        .await
    } else {
        let leave_out = match Viewer::of(&request) {
            Some(viewer) if depth == Depth::Infinity => {
                crate::access::left_out_of_copy(gateway, viewer, &source.path).await?
            }
            _ => Vec::new(),
        };
        let depth = if depth == Depth::Zero {
            kubedav_api::fileio::Depth::Zero
        } else {
            kubedav_api::fileio::Depth::Infinity
        };
        gateway
            .fileio
            .copy(CopyRequest {
                source: from,
                destination: to,
                depth: depth as i32,
                overwrite,
                leave_out,
                by,
            })
            .await
    };
    let reply = result.map_err(|status| match status.code() {
        Code::AlreadyExists => HttpError::new(
            StatusCode::PRECONDITION_FAILED,
            format!("{} exists and Overwrite is F", destination.path),
        ),
        Code::FailedPrecondition => HttpError::new(
            StatusCode::CONFLICT,
            format!(
                "the parent of {} does not exist; create it with MKCOL first",
                destination.path
            ),
        ),
        _ => status.into(),
    })?;
    if reply.failures.is_empty() {
        let status = if reply.created {
            StatusCode::CREATED
        } else {
            StatusCode::NO_CONTENT
        };
        let mut response = status.into_response();
        if reply.created
            && let Ok(location) = header::HeaderValue::from_str(
                &gateway
                    .base_path()
                    .href(&destination.path, destination.trailing_slash),
            )
        {
            response.headers_mut().insert(header::LOCATION, location);
        }
        return Ok(response);
    }
    Ok(crate::dav::multistatus::failures(
        &gateway.base_path(),
        &reply.failures,
    ))
}
