//! `{base}/.kubedav/trash/`: the trash items the asker may see (PROPFIND, Depth 1),
//! each restored by a MOVE and purged by a DELETE; a DELETE of the trash itself purges
//! every item the asker may see, or, for an administrator with `?root={path}`, every
//! item of that quota root.

use super::{
    Asker, Listed, NEXTCLOUD, Place, absent, area, multistatus, not_kept, propfind_of, text_property,
};
use crate::Gateway;
use crate::access::TrashQuestion;
use crate::dav::method::DavMethod;
use crate::handlers::guard::{Asking, Change, guard_write};
use crate::http::errors::{HttpError, HttpResult};
use crate::http::paths::BasePath;
use axum::extract::Request;
use axum::response::IntoResponse;
use http::{StatusCode, header};
use kubedav_api::fileio::FileInfo;
use kubedav_api::keep::{Keep, ListTrashRequest, PurgeTrashRequest, RestoreTrashRequest, TrashItem};
use kubedav_api::path::VolumePath;
use std::sync::Arc;
use tonic::Code;

/// Answers `method` on the trash; `None` for a method it does not take.
pub(super) async fn answer(gateway: &Gateway, request: Request, method: DavMethod) -> Option<HttpResult> {
    Some(match method {
        DavMethod::Propfind => list(gateway, request).await,
        DavMethod::Move => restore(gateway, request).await,
        DavMethod::Delete => purge(gateway, request).await,
        _ => return None,
    })
}

/// The item a request names: `None` for the trash itself.
fn item_named(gateway: &Gateway, request: &Request) -> Result<Option<String>, HttpError> {
    let below = area(gateway, Place::Trash).decode(request.uri().path())?;
    let mut segments = below.path.segments();
    match (segments.next(), segments.next()) {
        (None, _) => Ok(None),
        (Some(id), None) => Ok(Some(id.to_owned())),
        (Some(_), Some(_)) => Err(absent(&format!("trash item {}", below.path))),
    }
}

/// The keep port (the area is answered only with one).
fn keep(gateway: &Gateway) -> &Arc<dyn Keep> {
    gateway
        .keep
        .as_ref()
        .expect("the trash is routed only with a keep port")
}

/// The trash items the asker may see, oldest first.
async fn visible(gateway: &Gateway, asker: &Asker) -> Result<Vec<TrashItem>, HttpError> {
    let question = asker
        .viewer
        .as_ref()
        .map_or_else(TrashQuestion::everything, crate::access::Viewer::trash_question);
    let texts = |paths: Vec<VolumePath>| paths.iter().map(|p| p.as_str().to_owned()).collect();
    let listed = keep(gateway)
        .list_trash(ListTrashRequest {
            roots: texts(question.roots),
            beneath: texts(question.beneath),
        })
        .await
        .map_err(|status| match status.code() {
            Code::FailedPrecondition => not_kept(&status, "trash"),
            _ => status.into(),
        })?;
    Ok(listed
        .items
        .into_iter()
        .filter(|item| origin(item).is_some_and(|origin| asker.sees_deleted(&origin)))
        .collect())
}

/// Where `item` was deleted from.
fn origin(item: &TrashItem) -> Option<VolumePath> {
    VolumePath::parse(&item.path).ok()
}

/// The item `id`, if the asker may see it; 404 as for an absent one otherwise.
async fn find(gateway: &Gateway, asker: &Asker, id: &str) -> Result<(TrashItem, VolumePath), HttpError> {
    visible(gateway, asker)
        .await?
        .into_iter()
        .find(|item| item.id == id)
        .and_then(|item| origin(&item).map(|origin| (item, origin)))
        .ok_or_else(|| absent(&format!("trash item {id}")))
}

/// PROPFIND: the trash with its items (Depth 1), or one item.
async fn list(gateway: &Gateway, request: Request) -> HttpResult {
    let id = item_named(gateway, &request)?;
    let asker = Asker::of(gateway, &request);
    let (propfind, members) = propfind_of(request).await?;
    let items = visible(gateway, &asker).await?;
    let base = area(gateway, Place::Trash);
    let listed = match id {
        Some(id) => {
            let item = items
                .iter()
                .find(|item| item.id == id)
                .ok_or_else(|| absent(&format!("trash item {id}")))?;
            vec![listed(&base, item)]
        }
        None => {
            let mut listed_all = vec![Listed {
                href: base.href(&VolumePath::root(), true),
                info: FileInfo {
                    is_collection: true,
                    etag: format!("trash-{}", items.len()),
                    ..Default::default()
                },
                name: "trash".to_owned(),
                properties: Vec::new(),
            }];
            if members {
                listed_all.extend(items.iter().map(|item| listed(&base, item)));
            }
            listed_all
        }
    };
    Ok(multistatus(&propfind, &listed))
}

/// How an item is listed: a member `{id}` of the trash with Nextcloud's trash
/// properties; its name and type are the deleted resource's.
fn listed(base: &BasePath, item: &TrashItem) -> Listed {
    let name = item.path.rsplit('/').next().unwrap_or_default();
    let href =
        VolumePath::parse(&item.id).map_or_else(|_| String::new(), |id| base.href(&id, item.collection));
    let deleted_seconds = item.deleted_unix_ns.div_euclid(1_000_000_000);
    Listed {
        href,
        info: FileInfo {
            path: item.id.clone(),
            is_collection: item.collection,
            size: item.bytes,
            modified_unix_ns: item.deleted_unix_ns,
            created_unix_ns: item.deleted_unix_ns,
            etag: item.id.clone(),
            validator: String::new(),
        },
        name: name.to_owned(),
        properties: vec![
            text_property(NEXTCLOUD, "trashbin-filename", name),
            text_property(NEXTCLOUD, "trashbin-original-location", &item.path),
            text_property(NEXTCLOUD, "trashbin-deletion-time", &deleted_seconds.to_string()),
            text_property(NEXTCLOUD, "trashbin-deleted-by-id", &item.by),
        ],
    }
}

/// MOVE of an item: restores it at `Destination` (201, or 204 when it replaced what was
/// there). A taken name gives 412 unless `Overwrite: T` is sent: for a restore, an
/// absent `Overwrite` means F, so nothing is replaced unless asked for by name.
async fn restore(gateway: &Gateway, request: Request) -> HttpResult {
    let Some(id) = item_named(gateway, &request)? else {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            "the trash itself cannot be moved; MOVE one of its items to restore it",
        ));
    };
    let asker = Asker::of(gateway, &request);
    let (parts, _) = request.into_parts();
    let headers = &parts.headers;
    let destination = crate::dav::headers::destination(&gateway.base_path(), headers)?;
    if destination.path.is_root() {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            "the root collection cannot be replaced; restore the item beneath it",
        ));
    }
    crate::dav::quirks::refuse_macos_metadata(gateway.config.refuse_macos_metadata, &destination.path)?;
    let overwrite = match headers.get("overwrite") {
        None => false,
        Some(_) => crate::dav::headers::overwrite(headers)?,
    };
    let (item, origin) = find(gateway, &asker, &id).await?;
    asker.decide(DavMethod::Move, &origin, Some(&destination.path))?;
    // Restored within its own quota root, the item's bytes stay counted where they
    // were; elsewhere they would enter a root unchecked, so a MOVE (held to the
    // destination's quota) takes them there afterwards.
    if let Some(viewer) = &asker.viewer
        && viewer
            .quota_root_of(destination.path.as_str())
            .map_or(String::new(), |r| r.as_str().to_owned())
            != item.root
    {
        return Err(HttpError::new(
            StatusCode::CONFLICT,
            format!(
                "this item is counted in the quota of /{}: restore it there, then MOVE it to {}",
                item.root, destination.path
            ),
        ));
    }
    let asking = Asking {
        headers,
        principal: asker.principal.clone(),
        viewer: asker.viewer.as_ref(),
    };
    let targets = crate::dav::locking::member(&destination.path, true);
    guard_write(gateway, asking, &destination.path, Change::of(targets)).await?;
    let by = asker.principal.name().to_owned();
    if overwrite {
        crate::shares::end_before_removing(gateway, &destination.path, &by).await?;
    }
    let restored = keep(gateway)
        .restore_trash(RestoreTrashRequest {
            root: item.root,
            id,
            destination: destination.path.as_str().to_owned(),
            overwrite,
            by,
        })
        .await
        .map_err(|status| match status.code() {
            Code::AlreadyExists => HttpError::new(
                StatusCode::PRECONDITION_FAILED,
                format!(
                    "{} exists; send Overwrite: T to replace it (a replaced file becomes a version, a replaced collection goes to the trash)",
                    destination.path
                ),
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
    if !restored.created {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let mut response = StatusCode::CREATED.into_response();
    let location = gateway.base_path().href(&destination.path, item.collection);
    if let Ok(location) = header::HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// DELETE of an item purges it; of the trash, purges every item the asker may see, or
/// (an administrator, `?root={path}`) every item of that quota root. 204, or 207 naming
/// the items that could not be purged.
async fn purge(gateway: &Gateway, request: Request) -> HttpResult {
    let asker = Asker::of(gateway, &request);
    let root = crate::api::sign_in::query_param(&request, "root");
    if let Some(id) = item_named(gateway, &request)? {
        let (item, origin) = find(gateway, &asker, &id).await?;
        asker.decide(DavMethod::Delete, &origin, None)?;
        purge_one(gateway, item, "user").await?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    drop(request);
    let (items, reason) = match root {
        Some(root) => {
            let items = of_root(gateway, &asker, &root).await?;
            tracing::info!(
                target: kubedav_kit::telemetry::AUDIT,
                user = asker.principal.name(),
                admin = true,
                method = "DELETE",
                path = %format!("/.kubedav/trash/?root={root}"),
                decision = "allowed",
                items = items.len(),
                "audit"
            );
            (items, "admin")
        }
        None => {
            let mut items = Vec::new();
            for item in visible(gateway, &asker).await? {
                if origin(&item).is_some_and(|origin| asker.decide(DavMethod::Delete, &origin, None).is_ok())
                {
                    items.push(item);
                }
            }
            (items, "user")
        }
    };
    let mut failures = Vec::new();
    for item in items {
        let id = item.id.clone();
        if let Err(status) = purge_one(gateway, item, reason).await
            && status.code() != Code::NotFound
        {
            failures.push(kubedav_api::pb::fileio::v1::Failure {
                path: id,
                code: status.code() as i32,
                message: status.message().to_owned(),
            });
        }
    }
    if failures.is_empty() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(crate::dav::multistatus::failures(
        &area(gateway, Place::Trash),
        &failures,
    ))
}

/// Every item of the quota root at `root`, for an administrator emptying it; 403 for
/// anyone else.
async fn of_root(gateway: &Gateway, asker: &Asker, root: &str) -> Result<Vec<TrashItem>, HttpError> {
    if !crate::api::links::is_admin(gateway, &asker.principal) || !asker.principal.path_prefix().is_empty() {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            "only an administrator (the policy's admins:, or --admins), with a credential not limited to a path, empties a root's trash; DELETE the trash without ?root= to empty what you may see",
        ));
    }
    let root = root.trim_matches('/');
    VolumePath::parse(root).map_err(|e| HttpError::bad_request(format!("?root= is not a path: {e}")))?;
    let listed = keep(gateway)
        .list_trash(ListTrashRequest {
            roots: vec![root.to_owned()],
            beneath: Vec::new(),
        })
        .await
        .map_err(|status| match status.code() {
            Code::FailedPrecondition => not_kept(&status, "trash"),
            _ => status.into(),
        })?;
    Ok(listed.items)
}

/// Removes `item` for good, counted for `reason`.
async fn purge_one(gateway: &Gateway, item: TrashItem, reason: &str) -> Result<(), tonic::Status> {
    keep(gateway)
        .purge_trash(PurgeTrashRequest {
            root: item.root,
            id: item.id,
            reason: reason.to_owned(),
        })
        .await
        .map(|_| ())
}
