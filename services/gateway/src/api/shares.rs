//! `{base}/.kubedav/shares`: users sharing what they manage with another user or a
//! group ([`crate::shares`] keeps them; [`crate::access::shared`] honours them).
//!
//! * `POST` with JSON `{"path", "to": "user:ID" | "group:NAME", "permission": "read" |
//!   "write", "expires_at"?: RFC 3339}`: 201 with the share. Needs `manage` on the path
//!   under the policy (a home's owner; others where a rule grants it).
//! * `GET`: `{"made": [...], "received": [...]}`, the shares the caller made and those
//!   made to it or its groups that are in force. An administrator's `GET ?all` lists
//!   every share as `{"all": [...]}`.
//! * `DELETE {id}`: 204; by its creator or an administrator. Every gateway refuses it
//!   within a second.

use super::{error, json, refused, time};
use crate::Gateway;
use crate::kept::Table;
use crate::request::Principal;
use crate::shares::{Share, ShareEntry, Shared, Shares};
use axum::extract::Request;
use axum::response::Response;
use http::{Method, StatusCode};
use kubedav_api::path::VolumePath;
use kubedav_policy::{Access, Grantee, Permission, Policy, Subject};
use serde_json::Value;
use std::sync::Arc;

/// What a `POST` carries.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    path: String,
    to: String,
    permission: String,
    #[serde(default)]
    expires_at: Option<String>,
}

/// The shape of a `POST`'s body, for the error that says it was not that.
const EXPECTED: &str = "{\"path\": \"/a/path\", \"to\": \"user:ID\" or \"group:NAME\", \"permission\": \"read\" or \"write\", \"expires_at\": RFC 3339 time or absent}";

/// Answers a call to `shares/{rest}`.
pub async fn answer(gateway: &Gateway, request: Request, principal: Principal, rest: &str) -> Response {
    let (shares, policy) = match (&gateway.shares, &gateway.policy) {
        (Some(shares), Some(policy)) => (shares, policy.current()),
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                "this server has no shares: they need an access policy (--policy), where homes and rules say who manages what",
            );
        }
    };
    if principal.kind() == "app-password" {
        return error(
            StatusCode::FORBIDDEN,
            "an app password cannot manage shares: sign in with your password, the identity provider or a bearer token",
        );
    }
    let subject = policy.subject(principal.name(), principal.groups());
    let method = request.method().clone();
    let all = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "all"));
    match (method, rest) {
        (Method::GET, "") if all => list_all(gateway, shares, &subject).await,
        (Method::GET, "") => list(gateway, shares, &policy, &subject).await,
        (Method::POST, "") => create(gateway, shares, &policy, &subject, &principal, request).await,
        (Method::DELETE, id) if !id.is_empty() && !id.contains('/') => revoke(shares, &subject, id).await,
        (Method::GET | Method::POST | Method::DELETE, _) => error(
            StatusCode::NOT_FOUND,
            "no such share API: GET or POST shares, DELETE shares/{id}",
        ),
        _ => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "use GET or POST shares, or DELETE shares/{id}",
        ),
    }
}

/// `POST shares`.
async fn create(
    gateway: &Gateway,
    shares: &Shares,
    policy: &Policy,
    subject: &Subject,
    principal: &Principal,
    request: Request,
) -> Response {
    if principal.read_only() {
        return error(StatusCode::FORBIDDEN, "you may only read, so you may not share");
    }
    let create: Create = match super::json_body(request, EXPECTED).await {
        Ok(create) => create,
        Err(refused) => return refused,
    };
    let Some(path) = volume_path(&create.path) else {
        return error(
            StatusCode::BAD_REQUEST,
            &format!(
                "path {:?} is not a path on this server: give it as /a/path",
                create.path
            ),
        );
    };
    let to = match Grantee::parse(&create.to) {
        Some(Grantee::Anyone) | None => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "to {:?}: share with \"user:ID\" or \"group:NAME\"; for anyone, publish a link",
                    create.to
                ),
            );
        }
        Some(Grantee::User(user)) if user == subject.user() => {
            return error(StatusCode::BAD_REQUEST, "you cannot share with yourself");
        }
        Some(to) => to,
    };
    let Some(permission) = Shared::parse(&create.permission) else {
        return error(
            StatusCode::BAD_REQUEST,
            &format!("permission {:?}: give \"read\" or \"write\"", create.permission),
        );
    };
    let expires_at = match expiry(create.expires_at.as_deref(), shares.now()) {
        Ok(at) => at,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    // Sharing needs manage under the policy alone (shares never give it); what the
    // caller cannot see, with its shares, answers as absent.
    let by_policy = policy.access(subject, &path);
    let received = crate::access::Received::new(shares.table().received(subject, shares.now()));
    match received.access(policy, &path, by_policy).0 {
        _ if by_policy == Access::Granted(Permission::Manage) => {}
        Access::Hidden => return error(StatusCode::NOT_FOUND, &format!("{path} does not exist")),
        _ => {
            return error(
                StatusCode::FORBIDDEN,
                &format!(
                    "you may not share {path}: sharing needs manage there (your home is yours to share)"
                ),
            );
        }
    }
    let collection = match super::is_collection(gateway, &path).await {
        Ok(collection) => collection,
        Err(refused) => return *refused,
    };
    let id = match crate::kept::new_id() {
        Ok(id) => id,
        Err(status) => return refused(status),
    };
    let share = Share {
        id,
        path: path.as_str().to_owned(),
        to: to.to_string(),
        permission,
        creator: subject.user().to_owned(),
        creator_groups: principal.groups().to_vec(),
        created: shares.now(),
        expires_at,
        collection,
    };
    let Some(entry) = ShareEntry::new(share) else {
        return error(StatusCode::BAD_REQUEST, "not a share");
    };
    match shares.create(entry, crate::shares::MAX_PER_CREATOR).await {
        Ok(entry) => {
            tracing::info!(
                target: kubedav_kit::telemetry::AUDIT,
                user = entry.share.creator,
                share = entry.share.id,
                path = %entry.path,
                to = entry.share.to,
                permission = entry.share.permission.as_str(),
                "share made"
            );
            json(StatusCode::CREATED, &shown(gateway, &entry))
        }
        Err(status) => refused(status),
    }
}

/// `GET shares`: the caller's, made and received.
async fn list(gateway: &Gateway, shares: &Shares, policy: &Policy, subject: &Subject) -> Response {
    if let Err(status) = shares.check().await {
        return refused(status);
    }
    let table = shares.table();
    let mut made: Vec<&Arc<ShareEntry>> = table
        .iter()
        .filter(|entry| entry.share.creator == subject.user())
        .collect();
    made.sort_by_key(|entry| (entry.share.created, entry.share.id.clone()));
    let received = table.received(subject, shares.now());
    let viewer = crate::access::Received::new(received.clone());
    let mut received: Vec<&Arc<ShareEntry>> = received
        .iter()
        .filter(|entry| {
            // In force: the share still gives what it says on its own path.
            let by_policy = policy.access(subject, &entry.path);
            viewer.access(policy, &entry.path, by_policy).1.is_some()
        })
        .collect();
    received.sort_by(|a, b| a.path.cmp(&b.path));
    json(
        StatusCode::OK,
        &serde_json::json!({
            "made": made.iter().map(|entry| shown(gateway, entry)).collect::<Vec<_>>(),
            "received": received.iter().map(|entry| shown(gateway, entry)).collect::<Vec<_>>(),
        }),
    )
}

/// `GET shares?all`: every share, for an administrator.
async fn list_all(gateway: &Gateway, shares: &Shares, subject: &Subject) -> Response {
    if !subject.is_admin() {
        return error(
            StatusCode::FORBIDDEN,
            "only an administrator (the policy's admins:) lists every share",
        );
    }
    if let Err(status) = shares.check().await {
        return refused(status);
    }
    let table = shares.table();
    let mut all: Vec<&Arc<ShareEntry>> = table.iter().collect();
    all.sort_by_key(|entry| (entry.share.created, entry.share.id.clone()));
    json(
        StatusCode::OK,
        &serde_json::json!({ "all": all.iter().map(|entry| shown(gateway, entry)).collect::<Vec<_>>() }),
    )
}

/// `DELETE shares/{id}`.
async fn revoke(shares: &Shares, subject: &Subject, id: &str) -> Response {
    if let Err(status) = shares.check().await {
        return refused(status);
    }
    let mine = shares
        .table()
        .get(id)
        .is_some_and(|entry| entry.share.creator == subject.user() || subject.is_admin());
    if !mine {
        return error(StatusCode::NOT_FOUND, &format!("you have no share {id}"));
    }
    match shares.end(&[id.to_owned()], subject.user(), "revoked").await {
        Ok(()) => json(StatusCode::NO_CONTENT, &Value::Null),
        Err(status) => refused(status),
    }
}

/// A share as the API shows it.
fn shown(gateway: &Gateway, entry: &ShareEntry) -> Value {
    let share = &entry.share;
    serde_json::json!({
        "id": share.id,
        "path": entry.path.to_string(),
        "href": gateway.config.base_path.href(&entry.path, share.collection),
        "collection": share.collection,
        "to": share.to,
        "permission": share.permission.as_str(),
        "creator": share.creator,
        "created": time(share.created),
        "expires_at": share.expires_at.map(time),
    })
}

/// The volume path `text` names (`/a/path`, with or without a trailing `/`).
fn volume_path(text: &str) -> Option<VolumePath> {
    let trimmed = text.trim().trim_matches('/');
    VolumePath::parse(trimmed).ok()
}

/// An optional RFC 3339 expiry, which must be to come.
pub(crate) fn expiry(text: Option<&str>, now: i64) -> Result<Option<i64>, String> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let at: jiff::Timestamp = text
        .parse()
        .map_err(|e| format!("expires_at {text:?} is not an RFC 3339 time: {e}"))?;
    if at.as_second() <= now {
        return Err("expires_at is in the past: give a time to come".to_owned());
    }
    Ok(Some(at.as_second()))
}
