//! LOCK and UNLOCK (RFC 4918 9.10, 9.11) through the locks service.

use super::body::xml_body;
use super::guard::{Asking, Change, guard_write};
use crate::Gateway;
use crate::access::Viewer;
use crate::dav::headers::{Depth, depth, lock_token, timeout};
use crate::dav::locking::{activelock, if_header, locked};
use crate::dav::properties::DAV;
use crate::http::errors::{HttpError, HttpResult};
use crate::http::paths::{BasePath, request_path};
use crate::request::Principal;
use axum::extract::Request;
use axum::response::IntoResponse;
use http::{HeaderValue, StatusCode, header};
use kubedav_api::fileio::WriteHeader;
use kubedav_api::locks::{
    ActiveLock, LockDepth, LockRequest, LockResponse, Locks, RefreshRequest, Scope, UnlockRequest, condition,
};
use std::sync::Arc;
use tonic::{Code, Status};

/// A new lock: 200 (201 when LOCK created an empty resource) with `Lock-Token` and the
/// lock's `DAV:lockdiscovery`; 423 `DAV:no-conflicting-lock` when another lock is in the
/// way. Without a body: a refresh of the lock named in the If header.
pub(super) async fn lock(gateway: &Gateway, request: Request) -> HttpResult {
    let target = request_path(&gateway.base_path(), &request)?;
    let principal = Principal::of(&request);
    let headers = request.headers().clone();
    let viewer = Viewer::of(&request).cloned();
    let timeout_seconds = timeout(&headers)?;
    let depth = depth(&headers, Depth::Infinity)?;
    if depth == Depth::One {
        return Err(HttpError::bad_request("LOCK takes Depth 0 or infinity"));
    }
    let Some(body) = xml_body(request).await? else {
        return refresh(gateway, &headers, &target.path, principal.name(), timeout_seconds).await;
    };
    if !body.is(DAV, "lockinfo") {
        return Err(HttpError::bad_request("the LOCK body must be a DAV:lockinfo"));
    }
    // A lock of all of a collection needs write on all of it: with rules beneath that
    // give the principal less, it would lock what they may not change (and meet other
    // users' locks there). What they may not change beneath is readable to them, so the
    // refusal tells them nothing they cannot see.
    if depth == Depth::Infinity
        && let Some(viewer) = &viewer
        && !viewer.writes_all_below(&target.path)
    {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            format!(
                "{} holds what you may not change, so you may not lock all of it: lock it with Depth: 0, or lock the members you may change",
                target.path
            ),
        ));
    }
    let scope = match body.child(DAV, "lockscope").and_then(|s| s.elements().next()) {
        Some(e) if e.is(DAV, "exclusive") => Scope::Exclusive,
        Some(e) if e.is(DAV, "shared") => Scope::Shared,
        _ => {
            return Err(HttpError::bad_request(
                "DAV:lockinfo needs a DAV:lockscope of DAV:exclusive or DAV:shared",
            ));
        }
    };
    if body
        .child(DAV, "locktype")
        .is_none_or(|t| t.child(DAV, "write").is_none())
    {
        return Err(HttpError::bad_request(
            "DAV:lockinfo needs a DAV:locktype of DAV:write (the only lock type)",
        ));
    }
    let owner_xml = body
        .child(DAV, "owner")
        .map(|o| o.content_xml())
        .unwrap_or_default();
    let most = gateway.config.max_lock_owner_bytes;
    if owner_xml.len() > most {
        return Err(HttpError::bad_request(format!(
            "the DAV:owner is {} bytes; this server keeps at most {most} with a lock (a name, a \
             URL or an e-mail address fits)",
            owner_xml.len()
        )));
    }
    // What is there now: a collection, a file, or nothing (then LOCK creates an empty
    // file, RFC 4918 7.3).
    let existing = match gateway
        .fileio
        .stat(kubedav_api::fileio::StatRequest {
            path: target.path.as_str().to_owned(),
        })
        .await
    {
        Ok(info) => Some(info),
        Err(status) if status.code() == Code::NotFound => None,
        Err(status) => return Err(status.into()),
    };
    // Locking an unmapped URL creates a member of its collection (RFC 4918 7.3): that
    // needs the token of a lock on the collection, as any other new member does.
    if existing.is_none() {
        crate::dav::quirks::refuse_macos_metadata(gateway.config.refuse_macos_metadata, &target.path)?;
        let membership = crate::dav::locking::parent(&target.path).into_iter().collect();
        let change = Change::of(membership);
        let asking = Asking {
            headers: &headers,
            principal: principal.clone(),
            viewer: viewer.as_ref(),
        };
        guard_write(gateway, asking, &target.path, change).await?;
    }
    let asked = LockRequest {
        path: target.path.as_str().to_owned(),
        scope: scope as i32,
        depth: if depth == Depth::Zero {
            LockDepth::Zero
        } else {
            LockDepth::Infinity
        } as i32,
        owner_xml: owner_xml.into(),
        principal: principal.name().to_owned(),
        timeout_seconds,
        collection: existing.as_ref().is_some_and(|info| info.is_collection),
    };
    let reply = lock_for_the_client(gateway.locks.clone(), asked)
        .await
        .map_err(|status| match status.code() {
            Code::ResourceExhausted => HttpError::new(StatusCode::FORBIDDEN, status.message()),
            _ => status.into(),
        })?;
    let Some(lock) = reply.lock else {
        return Ok(locked(
            &gateway.base_path(),
            "no-conflicting-lock",
            &reply.conflicts,
        ));
    };
    let created = existing.is_none();
    if created {
        let empty = WriteHeader {
            path: lock.root.clone(),
            expected_size: Some(0),
            if_match: None,
            create_only: true,
            ..Default::default()
        };
        if let Err(status) = gateway
            .fileio
            .write(empty, Box::pin(futures_util::stream::empty()))
            .await
        {
            let unlock = UnlockRequest {
                path: lock.root.clone(),
                token: lock.token.clone(),
                principal: principal.name().to_owned(),
            };
            let _ = gateway.locks.unlock(unlock).await;
            return Err(match status.code() {
                Code::FailedPrecondition => HttpError::new(
                    StatusCode::CONFLICT,
                    format!(
                        "the parent of {} does not exist; create it with MKCOL first",
                        target.path
                    ),
                ),
                _ => status.into(),
            });
        }
    }
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(lock_response(&gateway.base_path(), status, &lock, true))
}

/// Takes a lock for a client that is still waiting for it. If the client has left by the
/// time the lock is granted (the call goes on without it: `kubedav_kit::finish`), the lock
/// is given back: its token would reach no one, and it would refuse everyone else's LOCK
/// and writes until it timed out.
async fn lock_for_the_client(locks: Arc<dyn Locks>, asked: LockRequest) -> Result<LockResponse, Status> {
    let waiting = Arc::new(());
    let client = Arc::downgrade(&waiting);
    let principal = asked.principal.clone();
    let reply = kubedav_kit::finish::to_the_end(async move {
        let reply = locks.lock(asked).await;
        if client.strong_count() == 0
            && let Ok(LockResponse { lock: Some(lock), .. }) = &reply
        {
            let unlock = UnlockRequest {
                path: lock.root.clone(),
                token: lock.token.clone(),
                principal,
            };
            if let Err(status) = locks.unlock(unlock).await {
                tracing::warn!(path = %lock.root, message = status.message(), "could not give back a lock whose client left");
            }
        }
        reply
    })
    .await;
    drop(waiting);
    reply
}

fn lock_response(
    base: &BasePath,
    status: StatusCode,
    lock: &ActiveLock,
    with_token: bool,
) -> axum::response::Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:prop xmlns:D=\"DAV:\"><D:lockdiscovery>{}</D:lockdiscovery></D:prop>\n",
        activelock(base, lock)
    );
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        body,
    )
        .into_response();
    if with_token && let Ok(value) = HeaderValue::from_str(&format!("<{}>", lock.token)) {
        response
            .headers_mut()
            .insert(crate::dav::headers::names::LOCK_TOKEN, value);
    }
    response
}

/// Refreshes the lock whose token the If header carries: 200, or 412 when no token
/// there names a lock covering this resource.
async fn refresh(
    gateway: &Gateway,
    headers: &http::HeaderMap,
    path: &kubedav_api::path::VolumePath,
    principal: &str,
    timeout_seconds: u64,
) -> HttpResult {
    let tokens: Vec<String> = if_header(&gateway.base_path(), headers)?
        .into_iter()
        .flat_map(|t| t.lists)
        .flat_map(|l| l.conditions)
        .filter_map(|c| match c.kind {
            Some(condition::Kind::StateToken(token)) if !c.not => Some(token),
            _ => None,
        })
        .collect();
    if tokens.is_empty() {
        return Err(HttpError::bad_request(
            "LOCK without a body refreshes a lock: send a DAV:lockinfo body, or the lock's token in the If header",
        ));
    }
    for token in tokens {
        let request = RefreshRequest {
            path: path.as_str().to_owned(),
            token,
            timeout_seconds,
            principal: principal.to_owned(),
        };
        match gateway.locks.refresh(request).await {
            Ok(reply) => {
                if let Some(lock) = reply.lock {
                    return Ok(lock_response(&gateway.base_path(), StatusCode::OK, &lock, false));
                }
            }
            Err(status) if matches!(status.code(), Code::NotFound | Code::FailedPrecondition) => continue,
            Err(status) if status.code() == Code::PermissionDenied => {
                return Err(HttpError::new(
                    StatusCode::FORBIDDEN,
                    format!("{}; take a lock of your own", status.message()),
                ));
            }
            Err(status) => return Err(status.into()),
        }
    }
    Err(HttpError::new(
        StatusCode::PRECONDITION_FAILED,
        "no token in the If header names a lock on this resource",
    ))
}

/// 204 once released; 409 `DAV:lock-token-matches-request-uri` when the token names no
/// lock on this resource; 403 when the lock belongs to someone else.
pub(super) async fn unlock(gateway: &Gateway, request: Request) -> HttpResult {
    let target = request_path(&gateway.base_path(), &request)?;
    let token = lock_token(request.headers())?;
    let unlock = UnlockRequest {
        path: target.path.as_str().to_owned(),
        token,
        principal: Principal::of(&request).name().to_owned(),
    };
    match gateway.locks.unlock(unlock).await {
        Ok(_) => Ok(StatusCode::NO_CONTENT.into_response()),
        Err(status) if matches!(status.code(), Code::NotFound | Code::FailedPrecondition) => {
            Ok(crate::dav::xml::dav_error(
                StatusCode::CONFLICT,
                "lock-token-matches-request-uri",
                status.message(),
            ))
        }
        Err(status) => Err(status.into()),
    }
}
