//! What the gateway asks the locks service before and after writes, and the XML of
//! locks (RFC 4918 14.1 activelock).

use crate::Gateway;
use crate::access::Viewer;
use crate::dav::xml::escape;
use crate::http::errors::HttpError;
use crate::http::paths::BasePath;
use crate::request::Principal;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, header};
use kubedav_api::fileio::StatRequest;
use kubedav_api::locks::{
    ActiveLock, CheckWriteRequest, LockDepth, Locks, ReleaseRequest, Scope, WriteTarget,
    check_write_response::Outcome, condition,
};
use kubedav_api::path::VolumePath;
use std::collections::HashMap;
use std::fmt::Write;

/// Most resources an If header may name (each with an etag condition costs a Stat).
pub const MAX_IF_RESOURCES: usize = 32;

/// The `DAV:supportedlock` content: exclusive and shared write locks.
pub const SUPPORTED_LOCK: &str = "<D:lockentry><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry><D:lockentry><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>";

/// A resource a request will modify.
pub fn target(path: &VolumePath, recursive: bool) -> WriteTarget {
    WriteTarget {
        path: path.as_str().to_owned(),
        recursive,
    }
}

/// The parent collection of `path` as a write target (its membership changes), if any.
pub fn parent(path: &VolumePath) -> Option<WriteTarget> {
    path.split_last().map(|(parent, _)| target(&parent, false))
}

/// A resource that is created, replaced or removed, and the membership of its
/// collection, which changes with it: what DELETE, MKCOL, COPY, MOVE and PUT modify.
pub fn member(path: &VolumePath, recursive: bool) -> Vec<WriteTarget> {
    std::iter::once(target(path, recursive))
        .chain(parent(path))
        .collect()
}

/// The request's parsed If header (empty when absent); 400 when malformed. Its resource
/// tags are read below the gateway's `base` path.
pub fn if_header(
    base: &BasePath,
    headers: &HeaderMap,
) -> Result<Vec<kubedav_api::locks::TaggedLists>, HttpError> {
    let Some(value) = headers.get(crate::dav::headers::names::IF) else {
        return Ok(Vec::new());
    };
    let value = value
        .to_str()
        .map_err(|_| HttpError::bad_request("the If header is not ASCII"))?;
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let parsed = crate::dav::ifheader::parse(value, host, base)
        .map_err(|e| HttpError::bad_request(format!("the If header is malformed: {e}")))?;
    if parsed.len() > MAX_IF_RESOURCES {
        return Err(HttpError::bad_request(format!(
            "the If header names more than {MAX_IF_RESOURCES} resources"
        )));
    }
    Ok(parsed)
}

/// Asks the locks service whether the request may modify `targets`: 412 when its If
/// header does not hold, 423 with `DAV:lock-token-submitted` when a lock is in the way,
/// 503 when the lock state cannot be read (never a write on an unknown lock state).
pub async fn check_write(
    gateway: &Gateway,
    headers: &HeaderMap,
    principal: &Principal,
    viewer: Option<&Viewer>,
    request_path: &VolumePath,
    targets: Vec<WriteTarget>,
) -> Result<(), HttpError> {
    let reply = ask(gateway, headers, principal, viewer, request_path, targets).await?;
    match reply.outcome() {
        Outcome::Allowed => Ok(()),
        Outcome::PreconditionFailed => Err(precondition_failed()),
        Outcome::Locked => Err(HttpError::respond(locked(
            &gateway.base_path(),
            "lock-token-submitted",
            &reply.conflicts,
        ))),
    }
}

/// [`check_write`] for a write that creates `path` when it does not exist (PUT): a new
/// member changes its collection, so a depth-0 lock on the collection needs its token
/// too (RFC 4918 7.5), while replacing an existing member does not. When only such a
/// lock is in the way and `path` exists, the write may replace it, and the answer is
/// the etag it must still have when the write commits (so a member removed meanwhile is
/// not created again past the lock).
pub async fn check_create(
    gateway: &Gateway,
    headers: &HeaderMap,
    principal: &Principal,
    viewer: Option<&Viewer>,
    path: &VolumePath,
) -> Result<Option<String>, HttpError> {
    let parent_target = parent(path);
    let targets = member(path, false);
    let reply = ask(gateway, headers, principal, viewer, path, targets).await?;
    match reply.outcome() {
        Outcome::Allowed => return Ok(None),
        Outcome::PreconditionFailed => return Err(precondition_failed()),
        Outcome::Locked => {}
    }
    let membership_only = parent_target.is_some_and(|collection| {
        reply
            .conflicts
            .iter()
            .all(|l| l.root == collection.path && l.depth == LockDepth::Zero as i32)
    });
    if membership_only {
        match gateway
            .fileio
            .stat(StatRequest {
                path: path.as_str().to_owned(),
            })
            .await
        {
            Ok(info) => return Ok(Some(info.etag)),
            Err(status) if status.code() == tonic::Code::NotFound => {}
            Err(status) => return Err(status.into()),
        }
    }
    Err(HttpError::respond(locked(
        &gateway.base_path(),
        "lock-token-submitted",
        &reply.conflicts,
    )))
}

fn precondition_failed() -> HttpError {
    HttpError::new(
        StatusCode::PRECONDITION_FAILED,
        "the If header's conditions do not hold for the current state of the resource",
    )
}

/// The locks service's decision on a write to `targets`, given the request's If header.
async fn ask(
    gateway: &Gateway,
    headers: &HeaderMap,
    principal: &Principal,
    viewer: Option<&Viewer>,
    request_path: &VolumePath,
    targets: Vec<WriteTarget>,
) -> Result<kubedav_api::locks::CheckWriteResponse, HttpError> {
    let mut if_header = if_header(&gateway.base_path(), headers)?;
    if let Some(viewer) = viewer {
        hide_unseen_tags(&mut if_header, viewer);
    }
    let mut etags = HashMap::new();
    let has_etags = if_header
        .iter()
        .flat_map(|t| &t.lists)
        .flat_map(|l| &l.conditions)
        .any(|c| matches!(c.kind, Some(condition::Kind::Etag(_))));
    if has_etags {
        for tagged in &if_header {
            let path = if tagged.untagged {
                request_path.as_str().to_owned()
            } else {
                tagged.path.clone()
            };
            if etags.contains_key(&path) || path == UNSEEN_TAG {
                continue;
            }
            if let Ok(info) = gateway.fileio.stat(StatRequest { path: path.clone() }).await {
                etags.insert(path, format!("\"{}\"", info.etag));
            }
        }
    }
    let request = CheckWriteRequest {
        targets,
        if_header,
        etags,
        principal: principal.name().to_owned(),
        request_path: request_path.as_str().to_owned(),
        // Asked for by the gateway's cache of the locks service's answers, if any.
        report_free_root: false,
    };
    let span = tracing::info_span!("locks.check_write", targets = request.targets.len() as i64);
    tracing::Instrument::instrument(gateway.locks.check_write(request), span)
        .await
        .map_err(HttpError::from)
}

/// Where an If header's tag that names a path hidden from the principal points instead:
/// a reserved name, which no resource, lock or etag can have. The tag's conditions are
/// then evaluated as for a resource that does not exist, whatever is at the path it
/// named, so an If header cannot test another user's locks or files.
const UNSEEN_TAG: &str = ".kubedav-unseen";

/// Points the tags of `if_header` that name paths `viewer` may not see at
/// [`UNSEEN_TAG`].
fn hide_unseen_tags(if_header: &mut [kubedav_api::locks::TaggedLists], viewer: &Viewer) {
    for tagged in if_header.iter_mut().filter(|tagged| !tagged.untagged) {
        let seen = VolumePath::parse(&tagged.path).is_ok_and(|path| viewer.sees(&path));
        if !seen {
            UNSEEN_TAG.clone_into(&mut tagged.path);
        }
    }
}

/// A 423 Locked response naming the lock roots (below `base`) in a precondition element.
pub fn locked(base: &BasePath, condition: &str, conflicts: &[ActiveLock]) -> Response {
    let mut roots: Vec<String> = conflicts
        .iter()
        .map(|l| base.href(&VolumePath::parse(&l.root).unwrap_or_default(), l.collection))
        .collect();
    roots.sort();
    roots.dedup();
    let hrefs: String = roots
        .iter()
        .map(|h| format!("<D:href>{}</D:href>", escape(h)))
        .collect();
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:error xmlns:D=\"DAV:\"><D:{condition}>{hrefs}</D:{condition}></D:error>\n"
    );
    (
        StatusCode::LOCKED,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        body,
    )
        .into_response()
}

/// Drops the locks of a resource that no longer exists (after DELETE, or a MOVE's
/// source). A failure is logged: the locks would block nothing but a re-created path.
pub async fn release(locks: &dyn Locks, path: &VolumePath) {
    if let Err(status) = locks
        .release(ReleaseRequest {
            path: path.as_str().to_owned(),
        })
        .await
    {
        tracing::warn!(%path, message = status.message(), "could not release the locks of a removed resource");
    }
}

/// The `DAV:activelock` element of a lock, its root below `base`.
pub fn activelock(base: &BasePath, lock: &ActiveLock) -> String {
    let mut out = String::from("<D:activelock><D:locktype><D:write/></D:locktype><D:lockscope>");
    out.push_str(if lock.scope == Scope::Shared as i32 {
        "<D:shared/>"
    } else {
        "<D:exclusive/>"
    });
    out.push_str("</D:lockscope><D:depth>");
    out.push_str(if lock.depth == LockDepth::Infinity as i32 {
        "infinity"
    } else {
        "0"
    });
    out.push_str("</D:depth>");
    if !lock.owner_xml.is_empty() {
        let _ = write!(
            out,
            "<D:owner>{}</D:owner>",
            String::from_utf8_lossy(&lock.owner_xml)
        );
    }
    let _ = write!(
        out,
        "<D:timeout>Second-{}</D:timeout><D:locktoken><D:href>{}</D:href></D:locktoken><D:lockroot><D:href>{}</D:href></D:lockroot></D:activelock>",
        lock.timeout_seconds,
        escape(&lock.token),
        escape(&base.href(
            &VolumePath::parse(&lock.root).unwrap_or_default(),
            lock.collection
        )),
    );
    out
}

/// Whether `lock` applies to `path` (rooted there, or depth infinity above it).
pub fn applies(lock: &ActiveLock, path: &VolumePath) -> bool {
    let root = VolumePath::parse(&lock.root).unwrap_or_default();
    *path == root || (lock.depth == LockDepth::Infinity as i32 && path.starts_with(&root))
}
