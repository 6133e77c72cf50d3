//! Authentication at the edge: Basic (RFC 7617) and Bearer (RFC 6750).
//!
//! With auth configured, every request needs valid credentials, except that anonymous
//! read-only access (GET, HEAD, OPTIONS, PROPFIND) can be allowed. The auth service
//! verifies them, whatever their kind, and answers with the principal they stand for;
//! users listed as read-only, and credentials scoped to reading, may only read. The
//! principal travels with the request as a [`Principal`] and becomes the owner of the
//! locks it takes. A 401 offers Basic and, with an identity provider, Bearer. The admin
//! endpoints live on their own port and never ask for credentials.

use crate::Gateway;
use crate::http::errors::HttpError;
use crate::request::Principal;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use http::{HeaderValue, Method, StatusCode, header};
use kubedav_api::auth::{VerifyRequest, VerifyResponse, verify_response::Outcome};

fn is_read(method: &Method) -> bool {
    crate::dav::method::DavMethod::of(method).is_some_and(|m| m.is_read())
}

/// A 401 with `message`, offering Basic and, when bearer tokens are accepted, Bearer
/// (with RFC 6750's `invalid_token` when `token_refused`).
fn challenge(gateway: &Gateway, message: &str, token_refused: bool) -> Response {
    let mut response = HttpError::new(StatusCode::UNAUTHORIZED, message).into_response();
    let realm = gateway.config.auth_realm.replace(['"', '\\'], "");
    let basic = format!("Basic realm=\"{realm}\", charset=\"UTF-8\"");
    if let Ok(value) = HeaderValue::from_str(&basic) {
        response.headers_mut().append(header::WWW_AUTHENTICATE, value);
    }
    if gateway.config.bearer_tokens {
        let bearer = if token_refused {
            let description: String = message.chars().filter(|c| *c != '"' && *c != '\\').collect();
            format!("Bearer realm=\"{realm}\", error=\"invalid_token\", error_description=\"{description}\"")
        } else {
            format!("Bearer realm=\"{realm}\"")
        };
        if let Ok(value) = HeaderValue::from_str(&bearer) {
            response.headers_mut().append(header::WWW_AUTHENTICATE, value);
        }
    }
    response
}

/// The credentials of an `Authorization` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    /// `Basic`: a user name and a password (an htpasswd password or an app password).
    Basic {
        /// The user name.
        user: String,
        /// The password.
        password: String,
    },
    /// `Bearer`: a token from the identity provider.
    Bearer(String),
    /// The session cookie of a browser signed in through the identity provider (only
    /// without an `Authorization` header).
    Session(String),
}

/// The credentials of the `Authorization` header; `None` without one.
pub fn credentials(headers: &http::HeaderMap) -> Option<Result<Credentials, &'static str>> {
    let value = headers.get(header::AUTHORIZATION)?;
    Some((|| {
        let value = value
            .to_str()
            .map_err(|_| "the Authorization header is not ASCII")?;
        let (scheme, rest) = value
            .trim()
            .split_once(' ')
            .ok_or("the Authorization header is malformed")?;
        if scheme.eq_ignore_ascii_case("bearer") {
            let token = rest.trim();
            if token.is_empty() || token.contains(' ') {
                return Err("the bearer token is malformed");
            }
            return Ok(Credentials::Bearer(token.to_owned()));
        }
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err("only Basic and Bearer authentication are supported");
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .map_err(|_| "the Basic credentials are not valid base64")?;
        let decoded = String::from_utf8(decoded).map_err(|_| "the Basic credentials are not UTF-8")?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or("the Basic credentials lack a ':'")?;
        Ok(Credentials::Basic {
            user: user.to_owned(),
            password: password.to_owned(),
        })
    })())
}

/// The authentication step of every request: `next` runs the rest when the request may
/// proceed (its principal attached), otherwise the answer is a challenge or an error.
pub fn authenticate<'a, F: Future<Output = Response> + Send + 'a>(
    gateway: &'a Gateway,
    request: Request,
    next: impl FnOnce(Request) -> F + Send + 'a,
) -> futures_util::future::Either<F, futures_util::future::BoxFuture<'a, Response>> {
    use futures_util::future::Either;
    let Some(auth) = &gateway.auth else {
        return Either::Left(next(request));
    };
    let read = is_read(request.method());
    let ready = |answer: Response| {
        Either::Right(Box::pin(std::future::ready(answer)) as futures_util::future::BoxFuture<'a, Response>)
    };
    // A credential accepted a moment ago: no call to the auth service (edge::verdicts),
    // and nothing of it parsed. A session cookie counts only without an Authorization
    // header.
    let headers = request.headers();
    let authorization = headers.get(header::AUTHORIZATION);
    let session = match authorization {
        None if gateway.config.sign_in.is_some() => {
            crate::api::sign_in::cookie(headers, crate::api::sign_in::session_cookie(gateway))
        }
        _ => None,
    };
    let client = request
        .extensions()
        .get::<crate::request::ClientIp>()
        .map(|a| a.0);
    let remembered = match (authorization, session) {
        (Some(value), _) => Some(gateway.verdicts.key(client, false, value.as_bytes())),
        (None, Some(session)) => Some(gateway.verdicts.key(client, true, session.as_bytes())),
        (None, None) => None,
    };
    if let Some(key) = &remembered
        && !public_api(gateway, &request)
        && let Some(principal) = gateway.verdicts.get(key)
    {
        if session.is_some()
            && let Err(refused) = crate::api::csrf::check(&request)
        {
            return ready(*refused);
        }
        return match admitted(gateway, &principal, read) {
            Ok(()) => {
                let mut request = request;
                request.extensions_mut().insert(principal);
                Either::Left(next(request))
            }
            Err(refused) => ready(*refused),
        };
    }
    let found = credentials(request.headers())
        .or_else(|| session.map(|session| Ok(Credentials::Session(session.to_owned()))));
    let credentials = match found {
        None if gateway.config.anonymous_read && read => return Either::Left(next(request)),
        None if public_api(gateway, &request) => return Either::Left(next(request)),
        None if navigation(gateway, &request) => return ready(to_sign_in(gateway, &request, false)),
        None => return ready(challenge(gateway, "credentials are required", false)),
        Some(Ok(Credentials::Session(_))) if public_api(gateway, &request) => {
            return Either::Left(next(request));
        }
        // A browser sends the cookie whichever page asks: a change needs the proof
        // that kubedav's own page asked (api::csrf), on WebDAV paths as on the API.
        Some(Ok(Credentials::Session(_))) if let Err(refused) = crate::api::csrf::check(&request) => {
            return ready(*refused);
        }
        Some(Err(problem)) => return ready(challenge(gateway, problem, false)),
        Some(Ok(Credentials::Bearer(_))) if !gateway.config.bearer_tokens => {
            return ready(challenge(
                gateway,
                "bearer tokens are not accepted here: no identity provider is configured; use Basic",
                false,
            ));
        }
        Some(Ok(credentials)) => credentials,
    };
    Either::Right(Box::pin(verified(
        gateway,
        &**auth,
        request,
        read,
        (credentials, remembered),
        next,
    )))
}

/// Whether `principal` may make a request that reads (`read`) or writes: writes need a
/// user not listed as read-only and a credential not scoped to reading.
pub(crate) fn admitted(gateway: &Gateway, principal: &Principal, read: bool) -> Result<(), Box<Response>> {
    if read {
        return Ok(());
    }
    let user = principal.name();
    if gateway.config.read_only_users.contains(user) {
        return Err(Box::new(
            HttpError::new(StatusCode::FORBIDDEN, format!("{user} has read-only access")).into_response(),
        ));
    }
    if principal.read_only() {
        return Err(Box::new(
            HttpError::new(
                StatusCode::FORBIDDEN,
                "this credential may only read; use one that may write",
            )
            .into_response(),
        ));
    }
    Ok(())
}

/// Whether the request is for a part of the API that needs no credentials (the
/// sign-in's start, the provider's callback, sign-out).
fn public_api(gateway: &Gateway, request: &Request) -> bool {
    crate::api::api_path(gateway, request.uri().path()).is_some_and(crate::api::sign_in::is_public)
}

/// Whether the request is a browser's navigation to a page that the browser sign-in
/// should answer: a GET the browser says is a navigation (`Sec-Fetch-Mode: navigate`),
/// not for the API (whose password sign-in asks for Basic).
fn navigation(gateway: &Gateway, request: &Request) -> bool {
    gateway.config.sign_in.is_some()
        && request.method() == Method::GET
        && request
            .headers()
            .get("sec-fetch-mode")
            .is_some_and(|mode| mode.as_bytes() == b"navigate")
        && crate::api::api_path(gateway, request.uri().path()).is_none()
}

/// A 303 to the browser sign-in that comes back to this request's page; `ended`: the
/// session cookie is cleared too.
fn to_sign_in(gateway: &Gateway, request: &Request, ended: bool) -> Response {
    let here = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let mut response = crate::api::sign_in::see_other(&crate::api::sign_in::sign_in_location(gateway, here));
    if ended {
        let cookie = crate::api::sign_in::ended_session(gateway, request);
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// The auth service's check of `credentials`, in its span.
fn verification<'a>(
    auth: &'a dyn kubedav_api::auth::Auth,
    credentials: Credentials,
    client_address: String,
) -> impl Future<Output = Result<VerifyResponse, tonic::Status>> + 'a {
    let (span, request) = match credentials {
        Credentials::Basic { user, password } => (
            tracing::info_span!("auth.verify", user = %user, kind = "basic"),
            VerifyRequest {
                user,
                password,
                client_address,
                ..Default::default()
            },
        ),
        Credentials::Bearer(token) => (
            tracing::info_span!("auth.verify", kind = "bearer"),
            VerifyRequest {
                client_address,
                bearer_token: token,
                ..Default::default()
            },
        ),
        Credentials::Session(session) => (
            tracing::info_span!("auth.verify", kind = "session"),
            VerifyRequest {
                client_address,
                session,
                ..Default::default()
            },
        ),
    };
    tracing::Instrument::instrument(auth.verify(request), span)
}

/// The rest of [`authenticate`] for a request with credentials: checked by the auth
/// service, then `next`.
async fn verified<F: Future<Output = Response>>(
    gateway: &Gateway,
    auth: &dyn kubedav_api::auth::Auth,
    mut request: Request,
    read: bool,
    (credentials, remembered): (Credentials, Option<crate::edge::verdicts::Key>),
    next: impl FnOnce(Request) -> F,
) -> Response {
    let client_address = request
        .extensions()
        .get::<crate::request::ClientIp>()
        .map(|a| a.0.to_string())
        .unwrap_or_default();
    let bearer = matches!(credentials, Credentials::Bearer(_));
    let session = matches!(credentials, Credentials::Session(_));
    let verdict = verification(auth, credentials, client_address).await;
    match verdict {
        Ok(reply) => match reply.outcome() {
            Outcome::Allowed => {
                let Some(principal) = reply.principal else {
                    return HttpError::new(
                        StatusCode::BAD_GATEWAY,
                        "the auth service allowed the credentials without naming a principal; run the same kubedav version everywhere",
                    )
                    .into_response();
                };
                let principal = Principal::verified(principal);
                if let Some(key) = remembered {
                    gateway.verdicts.keep(key, &principal);
                }
                if let Err(refused) = admitted(gateway, &principal, read) {
                    return *refused;
                }
                request.extensions_mut().insert(principal);
                next(request).await
            }
            Outcome::Denied if session && navigation(gateway, &request) => {
                to_sign_in(gateway, &request, true)
            }
            Outcome::Denied => {
                let reason = if reply.reason.is_empty() {
                    "the user name or password is wrong"
                } else {
                    reply.reason.as_str()
                };
                let mut response = challenge(gateway, reason, bearer);
                if session {
                    let cookie = crate::api::sign_in::ended_session(gateway, &request);
                    response.headers_mut().append(header::SET_COOKIE, cookie);
                }
                response
            }
            Outcome::Throttled => {
                let mut response = HttpError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many failed logins; wait before trying again",
                )
                .into_response();
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(reply.retry_after_seconds.max(1)),
                );
                response
            }
        },
        // Never let a request through when its credentials could not be checked.
        Err(status) => match status.code() {
            tonic::Code::ResourceExhausted => {
                HttpError::new(StatusCode::SERVICE_UNAVAILABLE, status.message()).into_response()
            }
            _ => HttpError::from(status).into_response(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert(header::AUTHORIZATION, value.parse().unwrap());
        headers
    }

    fn basic(user: &str, password: &str) -> Option<Result<Credentials, &'static str>> {
        Some(Ok(Credentials::Basic {
            user: user.into(),
            password: password.into(),
        }))
    }

    #[test]
    fn parses_basic_and_bearer_credentials() {
        assert_eq!(credentials(&http::HeaderMap::new()), None);
        assert_eq!(
            credentials(&with("Basic YWxpY2U6czNjcjp0")),
            basic("alice", "s3cr:t")
        );
        assert_eq!(credentials(&with("basic   Ym9iOg==")), basic("bob", ""));
        assert_eq!(
            credentials(&with("Bearer eyJh.eyJz.c2ln")),
            Some(Ok(Credentials::Bearer("eyJh.eyJz.c2ln".into())))
        );
        assert_eq!(
            credentials(&with("bearer  t0k ")),
            Some(Ok(Credentials::Bearer("t0k".into())))
        );
        for bad in [
            "Bearer",
            "Bearer a b",
            "Digest x",
            "Basic !!!",
            "Basic",
            "Basic Ym9i",
        ] {
            assert!(matches!(credentials(&with(bad)), Some(Err(_))), "{bad}");
        }
    }
}
