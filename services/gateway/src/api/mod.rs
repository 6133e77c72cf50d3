//! kubedav's own HTTP APIs, under `{base}/.kubedav/` (a name no WebDAV path can take):
//! app passwords ([`app_passwords`]), the page that manages them ([`account`]), shares
//! ([`shares`]), public links ([`links`]; what they open is served by
//! [`crate::links::serve`], under `{base}/.kubedav/s/`), and the browser's sign-in
//! through the identity provider ([`sign_in`]).
//! Every state-changing call must prove it comes from kubedav's own pages or from a
//! script, never from another site's page riding on the browser's credentials
//! ([`csrf`]).
//!
//! Answers are JSON, errors too (`{"error": "what was wrong"}`), but the account page's
//! HTML.

pub mod account;
pub mod app_passwords;
pub mod csrf;
pub mod links;
pub mod shares;
pub mod sign_in;

use crate::Gateway;
use crate::request::Principal;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use kubedav_api::path::RESERVED_AREA;

/// Largest JSON body an API call accepts.
pub const MAX_BODY_BYTES: usize = 4096;

/// The API path of `path` (what follows `{base}/.kubedav/`), if it names the API. A
/// gateway without authentication has none: there, `.kubedav` is only a reserved name
/// (400), as everywhere else in the tree.
pub fn api_path<'p>(gateway: &Gateway, path: &'p str) -> Option<&'p str> {
    gateway.auth.as_ref()?;
    let rest = path.strip_prefix(gateway.config.base_path.as_str())?;
    let rest = rest.strip_prefix('/')?.strip_prefix(RESERVED_AREA)?;
    match rest {
        "" => Some(""),
        _ => rest.strip_prefix('/'),
    }
}

/// Answers an API call (`api` is what follows `{base}/.kubedav/`).
pub async fn answer(gateway: &Gateway, request: Request, api: String) -> Response {
    if sign_in::is_public(&api) {
        return sign_in::answer(gateway, request, &api).await;
    }
    let principal = Principal::of(&request);
    if principal.name().is_empty() {
        return error(StatusCode::UNAUTHORIZED, "sign in to use kubedav's API");
    }
    if let Err(refused) = csrf::check(&request) {
        return *refused;
    }
    let mut parts = api.splitn(2, '/');
    match (parts.next(), parts.next()) {
        (Some("app-passwords"), rest) => {
            app_passwords::answer(gateway, request, principal, rest.unwrap_or("")).await
        }
        (Some("shares"), rest) => shares::answer(gateway, request, principal, rest.unwrap_or("")).await,
        (Some("links"), rest) => links::answer(gateway, request, principal, rest.unwrap_or("")).await,
        (Some("account"), None) if request.method() == http::Method::GET => {
            app_passwords::page(gateway, principal).await
        }
        // The users file's users in a browser that signs in through the provider: the
        // Basic credentials asked for on the way here are the sign-in.
        (Some("sign-in"), Some("password")) if request.method() == http::Method::GET => {
            let given = sign_in::query_param(&request, "return_to");
            sign_in::see_other(&sign_in::return_path(gateway, given.as_deref()))
        }
        _ => error(
            StatusCode::NOT_FOUND,
            "no such API: see docs/clients.md, \"App passwords\"",
        ),
    }
}

/// A JSON answer.
pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Response {
    let mut response = (status, value.to_string()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The answer for a failed call to a service: its code's status, its message.
pub(crate) fn refused(status: tonic::Status) -> Response {
    error(crate::http::errors::http_status(status.code()), status.message())
}

/// Whether what is at `path` (which the caller may see) is a collection; 404 when
/// nothing is there.
pub(crate) async fn is_collection(
    gateway: &Gateway,
    path: &kubedav_api::path::VolumePath,
) -> Result<bool, Box<Response>> {
    let stat = gateway
        .fileio
        .stat(kubedav_api::fileio::StatRequest {
            path: path.as_str().to_owned(),
        })
        .await;
    match stat {
        Ok(info) => Ok(info.is_collection),
        Err(status) if status.code() == tonic::Code::NotFound => Err(Box::new(error(
            StatusCode::NOT_FOUND,
            &format!("{path} does not exist"),
        ))),
        Err(status) => Err(Box::new(refused(status))),
    }
}

/// RFC 3339 text of seconds since the epoch.
pub(crate) fn time(seconds: i64) -> String {
    jiff::Timestamp::from_second(seconds).map_or_else(|_| seconds.to_string(), |t| t.to_string())
}

/// A JSON error: `{"error": message}`.
pub(crate) fn error(status: StatusCode, message: &str) -> Response {
    json(status, &serde_json::json!({ "error": message }))
}

/// The JSON body of a call, or the 4xx that says what is wrong with it (`expected`
/// shows the shape it should have).
pub(crate) async fn json_body<T: serde::de::DeserializeOwned>(
    request: Request,
    expected: &str,
) -> Result<T, Response> {
    let json_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json_type {
        return Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the body as JSON (Content-Type: application/json)",
        ));
    }
    let bytes = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the body is over {MAX_BODY_BYTES} bytes"),
            )
        })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            &format!("the body is not the JSON expected ({e}): {expected}"),
        )
    })
}
