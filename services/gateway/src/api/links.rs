//! `{base}/.kubedav/links`: public links to what a user manages ([`crate::links`]).
//!
//! * `POST` with JSON `{"path", "permission": "read" | "upload" | "write", "password"?,
//!   "expires_at"?: RFC 3339, "max_uses"?, "max_bytes"?}`: 201 with the link, its `url`
//!   in this answer only (kubedav keeps only the token's hash). Needs `manage` on the
//!   path, and the policy's `links:` there (or `--links`) must allow the kind.
//! * `GET`: the links the caller made (no URL); an administrator's `GET ?all` lists
//!   every link with its uses as `{"all": [...]}`.
//! * `DELETE {id}`: 204; by its creator or an administrator. Every gateway refuses the
//!   link within a second.

use super::{error, json, refused, time};
use crate::Gateway;
use crate::links::{Link, LinkEntry, LinkKind, Links};
use crate::request::Principal;
use axum::extract::Request;
use axum::response::Response;
use http::{Method, StatusCode};
use kubedav_api::path::VolumePath;
use kubedav_policy::{Access, Permission};
use serde_json::Value;
use std::sync::Arc;

/// What a `POST` carries.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    path: String,
    permission: String,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    max_uses: Option<u64>,
    #[serde(default)]
    max_bytes: Option<u64>,
}

/// The shape of a `POST`'s body, for the error that says it was not that.
const EXPECTED: &str = "{\"path\": \"/a/path\", \"permission\": \"read\", \"upload\" or \"write\", \"password\": optional, \"expires_at\": RFC 3339 time or absent, \"max_uses\": a number or absent, \"max_bytes\": a number or absent}";

/// Longest link password, in bytes.
const MAX_PASSWORD_BYTES: usize = 256;

/// Answers a call to `links/{rest}`.
pub async fn answer(gateway: &Gateway, request: Request, principal: Principal, rest: &str) -> Response {
    let Some(links) = &gateway.links else {
        return error(
            StatusCode::NOT_FOUND,
            "this server has no public links: they need authentication and storage that keeps records",
        );
    };
    if matches!(principal.kind(), "app-password" | "link") {
        return error(
            StatusCode::FORBIDDEN,
            "an app password cannot manage links: sign in with your password, the identity provider or a bearer token",
        );
    }
    let all = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "all"));
    match (request.method().clone(), rest) {
        (Method::GET, "") if all => list_all(gateway, links, &principal).await,
        (Method::GET, "") => list_made(gateway, links, &principal).await,
        (Method::POST, "") => create(gateway, links, &principal, request).await,
        (Method::DELETE, id) if !id.is_empty() && !id.contains('/') => {
            revoke(gateway, links, &principal, id).await
        }
        (Method::GET | Method::POST | Method::DELETE, _) => error(
            StatusCode::NOT_FOUND,
            "no such link API: GET or POST links, DELETE links/{id}",
        ),
        _ => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "use GET or POST links, or DELETE links/{id}",
        ),
    }
}

/// Whether `principal` is an administrator: the policy's `admins:`, or `--admins`.
pub fn is_admin(gateway: &Gateway, principal: &Principal) -> bool {
    match &gateway.policy {
        Some(live) => live
            .current()
            .subject(principal.name(), principal.groups())
            .is_admin(),
        None => {
            !principal.name().is_empty()
                && gateway
                    .config
                    .links
                    .admins
                    .iter()
                    .any(|admin| admin == principal.name())
        }
    }
}

/// `POST links`.
async fn create(gateway: &Gateway, links: &Links, principal: &Principal, request: Request) -> Response {
    if principal.read_only() || gateway.config.read_only_users.contains(principal.name()) {
        return error(
            StatusCode::FORBIDDEN,
            "you may only read, so you may not publish links",
        );
    }
    let create: Create = match super::json_body(request, EXPECTED).await {
        Ok(create) => create,
        Err(refused) => return refused,
    };
    let Some(path) = VolumePath::parse(create.path.trim().trim_matches('/')).ok() else {
        return error(
            StatusCode::BAD_REQUEST,
            &format!(
                "path {:?} is not a path on this server: give it as /a/path",
                create.path
            ),
        );
    };
    let Some(kind) = LinkKind::parse(&create.permission) else {
        return error(
            StatusCode::BAD_REQUEST,
            &format!(
                "permission {:?}: give \"read\", \"upload\" or \"write\"",
                create.permission
            ),
        );
    };
    let now = links.now();
    let expires_at = match super::shares::expiry(create.expires_at.as_deref(), now) {
        Ok(at) => at,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    if create.max_uses == Some(0) {
        return error(
            StatusCode::BAD_REQUEST,
            "max_uses must be at least 1 (or absent: no limit)",
        );
    }
    let most = gateway.config.links.max_bytes;
    let max_bytes = match create.max_bytes {
        Some(bytes) if bytes > most => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("max_bytes may be at most {most} on this server (--link-max-bytes)"),
            );
        }
        Some(bytes) => bytes,
        None => most,
    };
    let password = match create.password.as_deref() {
        None | Some("") => None,
        Some(p) if p.len() > MAX_PASSWORD_BYTES => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("the password is over {MAX_PASSWORD_BYTES} bytes"),
            );
        }
        Some(p) => Some(p.to_owned()),
    };
    if let Err(refused) = may_publish(gateway, principal, &path, kind) {
        return *refused;
    }
    let collection = match super::is_collection(gateway, &path).await {
        Ok(collection) => collection,
        Err(refused) => return *refused,
    };
    if kind == LinkKind::Upload && !collection {
        return error(
            StatusCode::BAD_REQUEST,
            "an upload link opens a folder: give a folder's path",
        );
    }
    let hashed = match password {
        None => None,
        Some(password) => match tokio::task::spawn_blocking(move || hash_password(&password)).await {
            Ok(Ok(hash)) => Some(hash),
            _ => {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the password could not be hashed",
                );
            }
        },
    };
    let (Ok(id), Ok((token, token_hash))) = (crate::kept::new_id(), crate::links::new_token()) else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "no randomness for the link");
    };
    let link = Link {
        id,
        token_hash,
        path: path.as_str().to_owned(),
        permission: kind,
        creator: principal.name().to_owned(),
        creator_groups: principal.groups().to_vec(),
        created: now,
        expires_at,
        max_uses: create.max_uses,
        max_bytes,
        password: hashed,
        collection,
    };
    let Some(entry) = LinkEntry::new(link) else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "not a link");
    };
    match links.create(entry, crate::links::MAX_PER_CREATOR).await {
        Ok(entry) => {
            tracing::info!(
                target: kubedav_kit::telemetry::AUDIT,
                user = entry.link.creator,
                link = entry.link.id,
                path = %entry.path,
                permission = kind.as_str(),
                password = entry.link.password.is_some(),
                "link made"
            );
            let mut shown = shown(&entry, None);
            let prefix = crate::links::prefix(&gateway.config.base_path, &token);
            let public = gateway
                .config
                .sign_in
                .as_ref()
                .map_or("", |s| s.public_url.as_str());
            shown["url"] = Value::String(format!("{public}{prefix}/"));
            json(StatusCode::CREATED, &shown)
        }
        Err(status) => refused(status),
    }
}

/// Whether `principal` may publish a `kind` link at `path`; the answer when not.
fn may_publish(
    gateway: &Gateway,
    principal: &Principal,
    path: &VolumePath,
    kind: LinkKind,
) -> Result<(), Box<Response>> {
    let default = gateway.config.links.default_cap;
    let cap = match &gateway.policy {
        Some(live) => {
            let policy = live.current();
            let subject = policy.subject(principal.name(), principal.groups());
            match policy.access(&subject, path) {
                Access::Granted(Permission::Manage) => {}
                Access::Hidden => {
                    return Err(Box::new(error(
                        StatusCode::NOT_FOUND,
                        &format!("{path} does not exist"),
                    )));
                }
                _ => {
                    return Err(Box::new(error(
                        StatusCode::FORBIDDEN,
                        &format!(
                            "you may not publish {path}: a link needs manage there (your home is yours to publish)"
                        ),
                    )));
                }
            }
            policy.link_cap_or(path, default)
        }
        None => default,
    };
    if !kind.allowed_by(cap) {
        let cap = format!("{cap:?}").to_lowercase();
        return Err(Box::new(error(
            StatusCode::FORBIDDEN,
            &format!(
                "{} links may not be published at {path}: links there may be at most {cap} (the policy's links:, or --links)",
                kind.as_str()
            ),
        )));
    }
    Ok(())
}

/// `GET links`: the caller's.
async fn list_made(gateway: &Gateway, links: &Links, principal: &Principal) -> Response {
    if let Err(status) = links.check().await {
        return refused(status);
    }
    let table = links.table();
    let mut made: Vec<&Arc<LinkEntry>> = table
        .iter()
        .filter(|e| e.link.creator == principal.name())
        .collect();
    made.sort_by_key(|e| (e.link.created, e.link.id.clone()));
    let mut shown_all = Vec::with_capacity(made.len());
    for entry in made {
        shown_all.push(shown(entry, counted(gateway, &entry.link.id).await));
    }
    json(StatusCode::OK, &Value::Array(shown_all))
}

/// `GET links?all`: every link, for an administrator.
async fn list_all(gateway: &Gateway, links: &Links, principal: &Principal) -> Response {
    if !is_admin(gateway, principal) {
        return error(
            StatusCode::FORBIDDEN,
            "only an administrator (the policy's admins:, or --admins) lists every link",
        );
    }
    if let Err(status) = links.check().await {
        return refused(status);
    }
    let table = links.table();
    let mut all: Vec<&Arc<LinkEntry>> = table.iter().collect();
    all.sort_by_key(|e| (e.link.created, e.link.id.clone()));
    let mut shown_all = Vec::with_capacity(all.len());
    for entry in all {
        shown_all.push(shown(entry, counted(gateway, &entry.link.id).await));
    }
    json(StatusCode::OK, &serde_json::json!({ "all": shown_all }))
}

/// `DELETE links/{id}`.
async fn revoke(gateway: &Gateway, links: &Links, principal: &Principal, id: &str) -> Response {
    if let Err(status) = links.check().await {
        return refused(status);
    }
    let allowed = links.table().iter().any(|entry| {
        entry.link.id == id && (entry.link.creator == principal.name() || is_admin(gateway, principal))
    });
    if !allowed {
        return error(StatusCode::NOT_FOUND, &format!("you have no link {id}"));
    }
    if let Err(status) = links.end(&[id.to_owned()], principal.name(), "revoked").await {
        return refused(status);
    }
    if let Some(uses) = &gateway.link_uses
        && let Err(status) = uses.forget(id).await
    {
        tracing::warn!(target: "kubedav", "the uses of link {id} cannot be removed: {}", status.message());
    }
    json(StatusCode::NO_CONTENT, &Value::Null)
}

/// A link's uses, if they can be read.
async fn counted(gateway: &Gateway, id: &str) -> Option<crate::links::uses::Counted> {
    gateway.link_uses.as_ref()?.counted(id).await.ok()
}

/// A link as the API shows it (never its token or password).
fn shown(entry: &LinkEntry, counted: Option<crate::links::uses::Counted>) -> Value {
    let link = &entry.link;
    serde_json::json!({
        "id": link.id,
        "path": entry.path.to_string(),
        "permission": link.permission.as_str(),
        "creator": link.creator,
        "created": time(link.created),
        "expires_at": link.expires_at.map(time),
        "max_uses": link.max_uses,
        "max_bytes": link.max_bytes,
        "password": link.password.is_some(),
        "uses": counted.map(|c| c.uses),
        "bytes": counted.map(|c| c.bytes),
    })
}

/// A SHA-512 crypt hash of `password` (5,000 rounds, a random salt).
fn hash_password(password: &str) -> Result<String, String> {
    use sha_crypt::PasswordHasher;
    const ALPHABET: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let random = crate::kept::random_bytes::<16>().map_err(|e| e.message().to_owned())?;
    let salt: Vec<u8> = random.iter().map(|b| ALPHABET[usize::from(b & 63)]).collect();
    let params = sha_crypt::Params::new(5000).map_err(|e| format!("invalid rounds: {e}"))?;
    sha_crypt::ShaCrypt::from(params)
        .hash_password_with_salt(password.as_bytes(), &salt)
        .map(|hash| hash.as_str().to_owned())
        .map_err(|e| format!("hashing failed: {e}"))
}
