//! The browser's sign-in through the identity provider, under `{base}/.kubedav/`:
//!
//! * `GET sign-in?return_to={path}`: starts it (the auth service makes the request and
//!   a sealed flow, kept here in the `kubedav-sign-in` cookie for ten minutes) and sends
//!   the browser to the provider's login page.
//! * `GET callback?code&state`: the provider sends the browser back here; the auth
//!   service checks the flow, exchanges the code and opens a session, kept in the
//!   `kubedav-session` cookie (`HttpOnly`, `SameSite=Lax`, `Secure` over TLS, as long as
//!   the session), and the browser goes back to where it was.
//! * `POST sign-out` (with the CSRF proof): ends the session on every replica, clears
//!   the cookie and answers `{"redirect": url}`: the provider's end-session page when it
//!   has one.
//! * `GET sign-in/password`: for the users file's users, asks the browser for Basic
//!   credentials, then goes back.
//!
//! The first two need no credentials; everything else under `.kubedav/` does.

use super::{error, json};
use crate::Gateway;
use crate::http::errors::HttpError;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use kubedav_api::auth::{BeginSignInRequest, FinishSignInRequest, SignOutRequest};

/// The session cookie, where browsers reach kubedav over plain HTTP or under a path.
pub const SESSION_COOKIE: &str = "kubedav-session";

/// The session cookie where browsers reach kubedav over HTTPS at the root: a `__Host-`
/// cookie, which only this host can set (a sibling subdomain cannot plant one).
pub const HOST_SESSION_COOKIE: &str = "__Host-kubedav-session";

/// The session cookie's name on this gateway.
pub fn session_cookie(gateway: &Gateway) -> &'static str {
    let https = gateway
        .config
        .sign_in
        .as_ref()
        .is_some_and(|s| s.public_url.starts_with("https://"));
    if https && gateway.config.base_path.is_root() {
        HOST_SESSION_COOKIE
    } else {
        SESSION_COOKIE
    }
}

/// Longest path kept to return to after sign-in; a longer one returns to the root.
pub const MAX_RETURN_BYTES: usize = 1024;

/// The cookie of a sign-in in progress.
pub const FLOW_COOKIE: &str = "kubedav-sign-in";

/// Whether `api` (what follows `{base}/.kubedav/`) is answered without credentials.
pub fn is_public(api: &str) -> bool {
    matches!(api, "sign-in" | "callback" | "sign-out")
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'h>(headers: &'h http::HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.trim_matches('"'))
        .filter(|value| !value.is_empty())
}

/// Where the provider sends browsers back.
fn redirect_uri(gateway: &Gateway, public_url: &str) -> String {
    format!(
        "{public_url}{}/.kubedav/callback",
        gateway.config.base_path.as_str()
    )
}

/// The path of the file manager's root.
fn home(gateway: &Gateway) -> String {
    format!("{}/", gateway.config.base_path.as_str())
}

/// A `Set-Cookie` value for `name`: `value` for `max_age` seconds (0 clears it), on
/// the gateway's base path.
fn set_cookie(
    gateway: &Gateway,
    request: &Request,
    name: &str,
    value: &str,
    max_age: u32,
    path: &str,
) -> HeaderValue {
    let public_https = gateway
        .config
        .sign_in
        .as_ref()
        .is_some_and(|s| s.public_url.starts_with("https://"));
    let secure = if public_https || crate::edge::client::forwarded_https(request) {
        "; Secure"
    } else {
        ""
    };
    let path = if path.is_empty() { "/" } else { path };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("kubedav-invalid=; Max-Age=0"))
}

/// The `Set-Cookie` that ends the session cookie (signed out, or a session that ended).
pub(crate) fn ended_session(gateway: &Gateway, request: &Request) -> HeaderValue {
    let path = gateway.config.base_path.as_str();
    set_cookie(gateway, request, session_cookie(gateway), "", 0, path)
}

/// A query parameter of the request, decoded.
pub(crate) fn query_param(request: &Request, name: &str) -> Option<String> {
    url::form_urlencoded::parse(request.uri().query().unwrap_or("").as_bytes())
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.into_owned())
}

/// A 303 to `location`.
pub(crate) fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A path below the base path to return to after sign-in: `given` if it is one, else
/// the root (never another site: no open redirect).
pub fn return_path(gateway: &Gateway, given: Option<&str>) -> String {
    let base = gateway.config.base_path.as_str();
    given
        .filter(|p| p.len() <= MAX_RETURN_BYTES)
        .filter(|p| p.starts_with('/') && !p.starts_with("//") && !p.contains('\\'))
        .filter(|p| {
            p.strip_prefix(base)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
        .filter(|p| !p.chars().any(|c| c.is_control()))
        .map(str::to_owned)
        .unwrap_or_else(|| home(gateway))
}

/// The address that starts a sign-in and comes back to `path`.
pub fn sign_in_location(gateway: &Gateway, path_and_query: &str) -> String {
    let return_to: String = url::form_urlencoded::byte_serialize(path_and_query.as_bytes()).collect();
    format!(
        "{}/.kubedav/sign-in?return_to={return_to}",
        gateway.config.base_path.as_str()
    )
}

/// A page saying the sign-in failed, with a way to start again.
fn failed(gateway: &Gateway, status: StatusCode, why: &str) -> Response {
    let escaped = why
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    let again = sign_in_location(gateway, &home(gateway));
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sign-in failed</title></head>\
         <body><h1>Sign-in failed</h1><p id=\"problem\">{escaped}</p><p><a id=\"again\" href=\"{again}\">Sign in again</a></p></body></html>"
    );
    let mut response = (status, page).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The page for a sign-in the auth service refused or could not make.
fn refused(gateway: &Gateway, status: &tonic::Status) -> Response {
    use tonic::Code;
    let code = match status.code() {
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        other => crate::http::errors::http_status(other),
    };
    match status.code() {
        Code::Internal | Code::Unknown | Code::DataLoss => {
            tracing::error!(message = status.message(), "sign-in failed");
            failed(gateway, code, "internal error; the server log has the details")
        }
        // The provider or the storage cannot be reached: what failed, and where, is for
        // the log, not for whoever calls the callback.
        Code::Unavailable | Code::DeadlineExceeded => {
            tracing::warn!(message = status.message(), "sign-in failed");
            failed(
                gateway,
                code,
                "the identity provider cannot be reached now; try again shortly",
            )
        }
        _ => failed(gateway, code, status.message()),
    }
}

/// Answers the public sign-in calls (`api` as [`is_public`] says).
pub async fn answer(gateway: &Gateway, request: Request, api: &str) -> Response {
    let (Some(settings), Some(auth)) = (&gateway.config.sign_in, &gateway.auth) else {
        return error(
            StatusCode::NOT_FOUND,
            "browser sign-in is not configured here: give the gateway --public-url and --oidc-issuer",
        );
    };
    match (api, request.method().clone()) {
        ("sign-in", http::Method::GET) => {
            let return_to = return_path(gateway, query_param(&request, "return_to").as_deref());
            let started = auth
                .begin_sign_in(BeginSignInRequest {
                    redirect_uri: redirect_uri(gateway, &settings.public_url),
                    return_to,
                })
                .await;
            match started {
                Ok(started) => {
                    let mut response = see_other(&started.authorization_url);
                    let path = format!("{}/.kubedav", gateway.config.base_path.as_str());
                    let cookie = set_cookie(
                        gateway,
                        &request,
                        FLOW_COOKIE,
                        &started.flow,
                        started.max_age_seconds,
                        &path,
                    );
                    response.headers_mut().append(header::SET_COOKIE, cookie);
                    response
                }
                Err(status) => refused(gateway, &status),
            }
        }
        ("callback", http::Method::GET) => callback(gateway, auth.as_ref(), settings, request).await,
        ("sign-out", http::Method::POST) => {
            if let Err(refused) = super::csrf::check(&request) {
                return *refused;
            }
            let session = cookie(request.headers(), session_cookie(gateway))
                .unwrap_or("")
                .to_owned();
            let client = request
                .extensions()
                .get::<crate::request::ClientIp>()
                .map(|a| a.0);
            gateway
                .verdicts
                .forget(&gateway.verdicts.key(client, true, session.as_bytes()));
            let post_logout = format!("{}{}", settings.public_url, home(gateway));
            let ended = if session.is_empty() {
                Ok(Default::default())
            } else {
                auth.sign_out(SignOutRequest {
                    session,
                    post_logout_redirect_uri: post_logout,
                })
                .await
            };
            match ended {
                Ok(ended) => {
                    let redirect = if ended.end_session_url.is_empty() {
                        home(gateway)
                    } else {
                        ended.end_session_url
                    };
                    let mut response = json(StatusCode::OK, &serde_json::json!({ "redirect": redirect }));
                    let cookie = ended_session(gateway, &request);
                    response.headers_mut().append(header::SET_COOKIE, cookie);
                    response
                }
                Err(status) => HttpError::from(status).into_response(),
            }
        }
        _ => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "sign-in and callback answer GET, sign-out answers POST",
        ),
    }
}

/// The provider's answer: a session, or a page that says why not.
async fn callback(
    gateway: &Gateway,
    auth: &dyn kubedav_api::auth::Auth,
    settings: &crate::state::SignInSettings,
    request: Request,
) -> Response {
    let path = format!("{}/.kubedav", gateway.config.base_path.as_str());
    let clear_flow = set_cookie(gateway, &request, FLOW_COOKIE, "", 0, &path);
    if let Some(problem) = query_param(&request, "error") {
        // Only an OAuth error code is shown: the description is whatever the link's
        // author wrote, and this is kubedav's page.
        let code = if !problem.is_empty()
            && problem.len() <= 64
            && problem.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        {
            problem
        } else {
            "an unknown error".to_owned()
        };
        let mut response = failed(
            gateway,
            StatusCode::FORBIDDEN,
            &format!("the identity provider did not sign you in ({code})"),
        );
        response.headers_mut().append(header::SET_COOKIE, clear_flow);
        return response;
    }
    let Some(flow) = cookie(request.headers(), FLOW_COOKIE) else {
        return failed(
            gateway,
            StatusCode::BAD_REQUEST,
            "this browser did not start a sign-in here, or took longer than ten minutes (are cookies on?)",
        );
    };
    let finished = auth
        .finish_sign_in(FinishSignInRequest {
            flow: flow.to_owned(),
            code: query_param(&request, "code").unwrap_or_default(),
            state: query_param(&request, "state").unwrap_or_default(),
            redirect_uri: redirect_uri(gateway, &settings.public_url),
            client_address: request
                .extensions()
                .get::<crate::request::ClientIp>()
                .map(|a| a.0.to_string())
                .unwrap_or_default(),
        })
        .await;
    let mut response = match finished {
        Ok(signed_in) => {
            let mut response = see_other(&return_path(gateway, Some(&signed_in.return_to)));
            let cookie = set_cookie(
                gateway,
                &request,
                session_cookie(gateway),
                &signed_in.session,
                signed_in.max_age_seconds,
                gateway.config.base_path.as_str(),
            );
            response.headers_mut().append(header::SET_COOKIE, cookie);
            response
        }
        Err(status) => refused(gateway, &status),
    };
    response.headers_mut().append(header::SET_COOKIE, clear_flow);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_cookie_among_others() {
        let mut headers = http::HeaderMap::new();
        headers.append(header::COOKIE, "a=1; kubedav-session=abc.def".parse().unwrap());
        headers.append(header::COOKIE, "kubedav-sign-in=\"x.y\"".parse().unwrap());
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("abc.def"));
        assert_eq!(cookie(&headers, FLOW_COOKIE), Some("x.y"));
        assert_eq!(cookie(&headers, "kubedav"), None);
    }
}
