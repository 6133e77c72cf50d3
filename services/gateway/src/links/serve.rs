//! A request through a public link, `{base}/.kubedav/s/{token}/{path}`: found by its
//! token's hash, unlocked by its password if it has one, held to its limits, then
//! served as any request with the base path mounted on the link's folder
//! ([`crate::http::paths::mounted`]) and decided as the link's creator
//! ([`crate::access::check_link`]).
//!
//! Every answer says `Referrer-Policy: no-referrer` (a page's links never carry the
//! token away) and `X-Robots-Tag: noindex`. A token that names no link, an expired or
//! revoked one, one whose creator no longer manages its folder and one the policy's
//! `links:` no longer allows all answer the same 404, without the token.

use super::uses::Refused;
use super::{LinkEntry, LinkKind, metrics, token_hash};
use crate::Gateway;
use crate::access::LinkGrant;
use crate::http::errors::HttpError;
use crate::http::paths::BasePath;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use std::sync::Arc;

/// Whether `path` is under a link's URL: `{base}/.kubedav/s/`.
pub fn is_link_request(gateway: &Gateway, path: &str) -> bool {
    gateway.links.is_some() && parts(gateway, path).is_some()
}

/// The token of a link URL path, and what follows it ("" or "/...").
fn parts<'p>(gateway: &Gateway, path: &'p str) -> Option<(&'p str, &'p str)> {
    let rest = path
        .strip_prefix(gateway.config.base_path.as_str())?
        .strip_prefix('/')?
        .strip_prefix(kubedav_api::path::RESERVED_AREA)?
        .strip_prefix("/s/")?;
    Some(match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    })
}

/// Answers a request through a link.
pub async fn serve(gateway: &Gateway, request: Request) -> Response {
    let mut response = answer(gateway, request).await;
    let headers = response.headers_mut();
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert("x-robots-tag", HeaderValue::from_static("noindex, nofollow"));
    response
}

async fn answer(gateway: &Gateway, mut request: Request) -> Response {
    let Some(links) = gateway.links.as_ref() else {
        return no_link();
    };
    let Some((token, rest)) = parts(gateway, request.uri().path()) else {
        return no_link();
    };
    if token.is_empty() || token.len() > 64 {
        return no_link();
    }
    let (token, folder_url) = (token.to_owned(), rest.is_empty());
    // The page's script and style sheet, before any password: the password page needs them.
    if rest.starts_with("/.kubedav-ui/") && matches!(*request.method(), Method::GET | Method::HEAD) {
        let prefix = super::prefix(&gateway.config.base_path, &token);
        if let Some(asset) =
            crate::handlers::get_asset(&prefix, request.uri().path(), request.method() == Method::HEAD)
        {
            return asset;
        }
    }
    let table = match links.trusted() {
        Some(table) => table,
        None => match links.check().await {
            Ok(()) => links.table(),
            Err(status) => {
                return HttpError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("links cannot be read right now: {}", status.message()),
                )
                .into_response();
            }
        },
    };
    let policy = gateway.policy.as_ref().map(|live| live.current());
    let Some(resolved) = resolve(gateway, &token, &table, policy) else {
        return no_link();
    };
    if resolved.entry.expired(links.now()) {
        return no_link();
    }
    if folder_url {
        // `{base}/.kubedav/s/{token}`: the folder's URL ends with a slash.
        let mut response = StatusCode::PERMANENT_REDIRECT.into_response();
        if let Ok(location) = HeaderValue::from_str(&format!("{}/", resolved.prefix)) {
            response.headers_mut().insert(header::LOCATION, location);
        }
        return response;
    }
    if let Some(hash) = &resolved.entry.link.password
        && let Err(answer) =
            super::password::unlock(gateway, &request, &resolved.entry, hash, &resolved.prefix).await
    {
        return answer;
    }
    request.extensions_mut().insert(resolved.principal.clone());
    request.extensions_mut().insert(resolved.grant.clone());
    let base = resolved.base.clone();
    crate::http::paths::mounted(base, within(gateway, request, resolved.entry.clone())).await
}

/// What a token opens, found once and kept while the links and the policy stay as they
/// were: the link, its creator's standing, its URL prefix and mounted base path, and
/// the principal its requests are made by.
pub struct Resolved {
    /// The table and the policy it was found under (their addresses): it holds while
    /// both are the ones in force.
    under: (usize, usize),
    entry: Arc<LinkEntry>,
    grant: LinkGrant,
    prefix: String,
    base: BasePath,
    principal: crate::request::Principal,
}

/// Tokens found lately, at most [`RESOLVED_KEPT`] (a token that finds nothing is not
/// kept, so guesses cannot fill it).
pub struct ResolvedLinks(quick_cache::sync::Cache<String, Arc<Resolved>>);

/// Most tokens kept resolved per gateway.
const RESOLVED_KEPT: usize = 10_000;

impl Default for ResolvedLinks {
    fn default() -> Self {
        Self(quick_cache::sync::Cache::new(RESOLVED_KEPT))
    }
}

impl std::fmt::Debug for ResolvedLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedLinks").finish_non_exhaustive()
    }
}

/// What `token` opens under `table` and `policy`, if anything.
fn resolve(
    gateway: &Gateway,
    token: &str,
    table: &Arc<super::LinkTable>,
    policy: Option<Arc<kubedav_policy::Policy>>,
) -> Option<Arc<Resolved>> {
    let under = (
        Arc::as_ptr(table) as usize,
        policy.as_ref().map_or(0, |p| Arc::as_ptr(p) as usize),
    );
    if let Some(kept) = gateway.link_resolved.0.get(token)
        && kept.under == under
    {
        return Some(kept);
    }
    let entry = table.by_token_hash(&token_hash(token))?.clone();
    let creator = standing(gateway, &entry, policy)?;
    let prefix = super::prefix(&gateway.config.base_path, token);
    let resolved = Arc::new(Resolved {
        under,
        base: BasePath::mounted(&prefix, entry.path.clone()),
        principal: crate::request::Principal::verified(kubedav_api::auth::Principal {
            user: format!("link:{}", entry.link.id),
            display_name: "a public link".to_owned(),
            kind: "link".to_owned(),
            read_only: entry.link.permission == LinkKind::Read,
            ..Default::default()
        }),
        grant: LinkGrant {
            link: entry.clone(),
            creator,
        },
        prefix,
        entry,
    });
    gateway.link_resolved.0.insert(token.to_owned(), resolved.clone());
    Some(resolved)
}

/// The request inside the link's mount: held to the link's kind and limits, then served.
async fn within(gateway: &Gateway, mut request: Request, entry: Arc<LinkEntry>) -> Response {
    if entry.link.permission == LinkKind::Upload {
        match super::drop_box::admit(gateway, &mut request, &entry).await {
            Ok(None) => {}
            Ok(Some(answer)) => return answer,
            Err(refused) => return refused.into_response(),
        }
    }
    if request.method() != Method::GET
        && request.method() != Method::HEAD
        && request.method() != Method::OPTIONS
        && request.method().as_str() != "PROPFIND"
    {
        if let Err(refused) = super::rate::admit(gateway, &request) {
            metrics::request("rate_limited");
            return *refused;
        }
        if crate::api::sign_in::cookie(request.headers(), super::password::COOKIE).is_some()
            && let Err(refused) = crate::api::csrf::check(&request)
        {
            return *refused;
        }
    }
    let is_upload = request.method() == Method::PUT;
    let is_download =
        request.method() == Method::GET && !request.uri().path().ends_with('/') && from_start(&request);
    let Some(uses) = gateway.link_uses.clone() else {
        return crate::handlers::dispatch(gateway, request).await;
    };
    let strict = is_upload || (is_download && entry.link.max_uses.is_some());
    if strict {
        let bytes = if is_upload {
            match declared_length(&request) {
                Some(bytes) => bytes,
                None => {
                    return HttpError::new(
                        StatusCode::LENGTH_REQUIRED,
                        "an upload through a link must say its length (Content-Length)",
                    )
                    .into_response();
                }
            }
        } else {
            0
        };
        match uses.claim(&entry, bytes).await {
            Ok(Ok(())) => {}
            Ok(Err(Refused::Spent)) => {
                metrics::request("spent");
                return HttpError::new(
                    StatusCode::GONE,
                    "this link has been used as many times as it may be",
                )
                .into_response();
            }
            Ok(Err(Refused::Full { left })) => {
                metrics::request("full");
                return HttpError::new(
                    StatusCode::INSUFFICIENT_STORAGE,
                    format!("this link may take {left} more bytes; the upload is {bytes}"),
                )
                .into_response();
            }
            Err(status) => return HttpError::from(status).into_response(),
        }
    }
    let root = entry.path.clone();
    let audited = tracing::enabled!(target: kubedav_kit::telemetry::AUDIT, tracing::Level::INFO)
        .then(|| (request.method().clone(), request.uri().path().to_owned()));
    let response = crate::handlers::dispatch(gateway, request).await;
    if let Some((method, path)) = audited {
        let below = path
            .find("/s/")
            .and_then(|at| path[at + 3..].find('/').map(|i| &path[at + 3 + i..]));
        tracing::info!(
            target: kubedav_kit::telemetry::AUDIT,
            link = entry.link.id,
            creator = entry.link.creator,
            method = %method,
            path = below.unwrap_or("/"),
            status = response.status().as_u16(),
            "link used"
        );
    }
    if is_download && !strict && matches!(response.status(), StatusCode::OK | StatusCode::PARTIAL_CONTENT) {
        uses.count(&entry);
    }
    metrics::request(if response.status().is_success() {
        "served"
    } else {
        "refused"
    });
    without_paths(response, &root).await
}

/// The creator of `entry` as the policy sees it, if the link still works: its creator
/// manages its folder and the `links:` cap there (or `--links`) allows its kind. `None`
/// (inner): there is no policy, and the creator is not a read-only user.
fn standing(
    gateway: &Gateway,
    entry: &LinkEntry,
    policy: Option<Arc<kubedav_policy::Policy>>,
) -> Option<Option<(Arc<kubedav_policy::Policy>, kubedav_policy::Subject)>> {
    let link = &entry.link;
    let Some(policy) = policy else {
        let allowed = link.permission.allowed_by(gateway.config.links.default_cap)
            && !gateway.config.read_only_users.contains(&link.creator);
        return allowed.then_some(None);
    };
    let creator = policy.subject(&link.creator, &link.creator_groups);
    let manages = policy.access(&creator, &entry.path)
        == kubedav_policy::Access::Granted(kubedav_policy::Permission::Manage);
    let cap = policy.link_cap_or(&entry.path, gateway.config.links.default_cap);
    (manages && link.permission.allowed_by(cap)).then_some(Some((policy, creator)))
}

/// Whether a GET reads the file from its first byte (no Range, or one from 0).
fn from_start(request: &Request) -> bool {
    request
        .headers()
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|range| range.trim_start_matches("bytes=").starts_with('0'))
}

/// The body length a request declares.
fn declared_length(request: &Request) -> Option<u64> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// An error's text with the link's folder taken out of the paths it names, so an
/// answer through a link never tells where the folder is (`/home/alice/drop/x.txt`
/// reads `/x.txt`).
async fn without_paths(response: Response, root: &kubedav_api::path::VolumePath) -> Response {
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"));
    if root.is_root() || response.status().as_u16() < 400 || !plain {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
        return HttpError::new(parts.status, "refused").into_response();
    };
    let shown = format!("{root}");
    let text = String::from_utf8_lossy(&bytes)
        .replace(&format!("{shown}/"), "/")
        .replace(&shown, "/");
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(text))
}

/// The answer for a token that opens nothing.
fn no_link() -> Response {
    metrics::request("no_link");
    HttpError::new(
        StatusCode::NOT_FOUND,
        "no such link: it may have expired or been revoked; ask whoever sent it for a new one",
    )
    .into_response()
}
