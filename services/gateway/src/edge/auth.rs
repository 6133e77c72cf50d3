//! Basic authentication at the edge (RFC 7617).
//!
//! With auth configured, every request needs valid credentials, except that anonymous
//! read-only access (GET, HEAD, OPTIONS, PROPFIND) can be allowed. Users listed as
//! read-only may only read. The authenticated user travels with the request as a
//! [`Principal`] and becomes the owner of the locks it takes. The admin endpoints live on
//! their own port and never ask for credentials.

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

fn challenge(gateway: &Gateway, message: &str) -> Response {
    let mut response = HttpError::new(StatusCode::UNAUTHORIZED, message).into_response();
    let value = format!(
        "Basic realm=\"{}\", charset=\"UTF-8\"",
        gateway.config.auth_realm.replace('"', "")
    );
    if let Ok(value) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The user and password of a Basic `Authorization` header; `None` without one.
pub fn basic_credentials(headers: &http::HeaderMap) -> Option<Result<(String, String), &'static str>> {
    let value = headers.get(header::AUTHORIZATION)?;
    Some((|| {
        let value = value
            .to_str()
            .map_err(|_| "the Authorization header is not ASCII")?;
        let (scheme, encoded) = value
            .trim()
            .split_once(' ')
            .ok_or("the Authorization header is malformed")?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err("only Basic authentication is supported");
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| "the Basic credentials are not valid base64")?;
        let decoded = String::from_utf8(decoded).map_err(|_| "the Basic credentials are not UTF-8")?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or("the Basic credentials lack a ':'")?;
        Ok((user.to_owned(), password.to_owned()))
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
    let (user, password) = match basic_credentials(request.headers()) {
        None if gateway.config.anonymous_read && read => return Either::Left(next(request)),
        None => {
            let answer = challenge(gateway, "credentials are required");
            return Either::Right(Box::pin(std::future::ready(answer)));
        }
        Some(Err(problem)) => {
            let answer = challenge(gateway, problem);
            return Either::Right(Box::pin(std::future::ready(answer)));
        }
        Some(Ok(pair)) => pair,
    };
    Either::Right(Box::pin(verified(
        gateway, &**auth, request, read, user, password, next,
    )))
}

/// The auth service's check of `user`'s password, in its span, and the principal the
/// request gets if it passes: made before the call, which takes the user's name, so that
/// name is copied once. Apart from [`verified`], where `user`, borrowed, would keep its
/// place in the future across the call.
fn verification<'a>(
    auth: &'a dyn kubedav_api::auth::Auth,
    user: String,
    password: String,
    client_address: String,
) -> (
    Principal,
    impl Future<Output = Result<VerifyResponse, tonic::Status>> + 'a,
) {
    let principal = Principal::new(&user);
    let span = tracing::info_span!("auth.verify", user = %user);
    let request = VerifyRequest {
        user,
        password,
        client_address,
    };
    let call = tracing::Instrument::instrument(auth.verify(request), span);
    (principal, call)
}

/// The rest of [`authenticate`] for a request with credentials: checked by the auth
/// service, then `next`.
async fn verified<F: Future<Output = Response>>(
    gateway: &Gateway,
    auth: &dyn kubedav_api::auth::Auth,
    mut request: Request,
    read: bool,
    user: String,
    password: String,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let client_address = request
        .extensions()
        .get::<crate::request::ClientIp>()
        .map(|a| a.0.to_string())
        .unwrap_or_default();
    let (principal, verify) = verification(auth, user, password, client_address);
    let verdict = verify.await;
    match verdict {
        Ok(reply) => match reply.outcome() {
            Outcome::Allowed => {
                let user = principal.name();
                if !read && gateway.config.read_only_users.contains(user) {
                    return HttpError::new(StatusCode::FORBIDDEN, format!("{user} has read-only access"))
                        .into_response();
                }
                request.extensions_mut().insert(principal);
                next(request).await
            }
            Outcome::Denied => challenge(gateway, "the user name or password is wrong"),
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

    #[test]
    fn parses_basic_credentials() {
        assert_eq!(basic_credentials(&http::HeaderMap::new()), None);
        assert_eq!(
            basic_credentials(&with("Basic YWxpY2U6czNjcjp0")),
            Some(Ok(("alice".into(), "s3cr:t".into())))
        );
        assert_eq!(
            basic_credentials(&with("basic   Ym9iOg==")),
            Some(Ok(("bob".into(), String::new())))
        );
        for bad in ["Bearer x", "Basic !!!", "Basic", "Basic Ym9i"] {
            assert!(matches!(basic_credentials(&with(bad)), Some(Err(_))), "{bad}");
        }
    }
}
