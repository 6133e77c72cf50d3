//! A link's password: Basic with any user name over WebDAV; in a browser, a page that
//! asks for it and a cookie for the link that follows (HttpOnly, `SameSite=Lax`, its
//! path the link's, signed with the password's hash, so every gateway checks it and a
//! new password or the link's end voids it).
//!
//! Wrong passwords are throttled as logins are (`kubedav_kit::throttle`): per client
//! address (the guesser waits, whichever links it tries), and per link, which once
//! guessed at is *guarded*: it refuses, without crypt work, the addresses that failed
//! on it, and only them. Whoever holds the password, from anywhere else, still opens
//! it. An accepted password is remembered for a minute per address and link, so a
//! WebDAV client's every request does not pay the crypt work again.

use super::{LinkEntry, metrics};
use crate::Gateway;
use crate::http::errors::HttpError;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, KeyInit, Mac};
use http::{HeaderValue, Method, StatusCode, header};
use kubedav_kit::throttle::{FailedPairs, Throttle, address_key};
use sha2::Sha256;
use std::time::{Duration, Instant};

/// The cookie a browser gets once it gave a link's password.
pub const COOKIE: &str = "kubedav-link";

/// How long the cookie opens the link.
const COOKIE_SECONDS: i64 = 12 * 3600;

/// Wrong passwords from one address before it is locked out (then 1 s, doubling).
const FAILURES_PER_ADDRESS: u32 = 10;

/// Wrong passwords on one link, from anywhere, before it is guarded.
const FAILURES_PER_LINK: u32 = 10;

/// How long an accepted password is remembered per address and link.
const REMEMBERED: Duration = Duration::from_secs(60);

/// The gateway's memory of link passwords: failures, lockouts and accepted ones.
pub struct Guard {
    addresses: Throttle,
    links: Throttle,
    failed: FailedPairs,
    /// Accepted credentials, by a keyed hash ([`remembered_key`]): SipHash under this
    /// process's random keys, which no client can search for a collision offline.
    accepted: quick_cache::sync::Cache<u64, Instant>,
    keys: std::collections::hash_map::RandomState,
}

impl Default for Guard {
    fn default() -> Self {
        Self {
            addresses: Throttle::new(FAILURES_PER_ADDRESS, Duration::from_secs(1)),
            links: Throttle::new(FAILURES_PER_LINK, Duration::from_secs(1)),
            failed: FailedPairs::default(),
            accepted: quick_cache::sync::Cache::new(100_000),
            keys: std::collections::hash_map::RandomState::new(),
        }
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard").finish_non_exhaustive()
    }
}

/// What the password check needs of a request, read before anything is awaited (a
/// request's body cannot be shared across an await).
struct Asked {
    cookie: Option<String>,
    address: String,
    /// A `POST` to the link's folder: the password page's unlock, with its password.
    page_unlock: Option<Result<String, Box<Response>>>,
    basic_password: Option<String>,
    /// The key its Basic credentials are remembered under once accepted.
    remembered: Option<u64>,
    navigation: bool,
    https: bool,
}

impl Asked {
    fn of(gateway: &Gateway, request: &Request, prefix: &str) -> Self {
        let headers = request.headers();
        let page_unlock = (request.method() == Method::POST && request.uri().path() == format!("{prefix}/"))
            .then(|| {
                crate::api::csrf::check(request)?;
                Ok(headers
                    .get("x-kubedav-link-password")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned())
            });
        let basic_password = match crate::edge::auth::credentials(headers) {
            Some(Ok(crate::edge::auth::Credentials::Basic { password, .. })) => Some(password),
            _ => None,
        };
        Self {
            remembered: None,
            cookie: crate::api::sign_in::cookie(headers, COOKIE).map(str::to_owned),
            address: request
                .extensions()
                .get::<crate::request::ClientIp>()
                .map(|ip| address_key(&ip.0.to_string()))
                .unwrap_or_default(),
            page_unlock,
            basic_password,
            navigation: is_navigation(request),
            https: crate::edge::client::forwarded_https(request)
                || gateway
                    .config
                    .sign_in
                    .as_ref()
                    .is_some_and(|s| s.public_url.starts_with("https://")),
        }
    }
}

/// Lets the request go on if it opens the link (`Ok`); otherwise the answer: a password
/// page or a Basic challenge, a refusal, or the page's unlock (`POST` to the link).
pub fn unlock<'a>(
    gateway: &'a Gateway,
    request: &Request,
    entry: &'a LinkEntry,
    hash: &'a str,
    prefix: &'a str,
) -> impl Future<Output = Result<(), Response>> + Send + use<'a> {
    use futures_util::future::Either;
    // Basic credentials this address gave for this link a moment ago: nothing decoded,
    // nothing checked again.
    let remembered = remembered_key(&gateway.link_guard, entry, request);
    if remembered.is_some_and(|key| {
        gateway
            .link_guard
            .accepted
            .get(&key)
            .is_some_and(|at| at.elapsed() < REMEMBERED)
    }) {
        return Either::Left(std::future::ready(Ok(())));
    }
    let mut asked = Asked::of(gateway, request, prefix);
    asked.remembered = remembered;
    Either::Right(opens(gateway, asked, entry, hash, prefix))
}

/// The key a request's Basic credentials for `entry` are remembered under: a keyed
/// hash of the link, the `Authorization` header and the client's address.
fn remembered_key(guard: &Guard, entry: &LinkEntry, request: &Request) -> Option<u64> {
    use std::hash::{BuildHasher, Hash, Hasher};
    let authorization = request.headers().get(header::AUTHORIZATION)?;
    let client = request.extensions().get::<crate::request::ClientIp>()?.0;
    let mut hasher = guard.keys.build_hasher();
    entry.link.id.hash(&mut hasher);
    authorization.as_bytes().hash(&mut hasher);
    client.hash(&mut hasher);
    Some(hasher.finish())
}

async fn opens(
    gateway: &Gateway,
    asked: Asked,
    entry: &LinkEntry,
    hash: &str,
    prefix: &str,
) -> Result<(), Response> {
    let now = gateway.links.as_ref().map_or(0, |links| links.now());
    if asked
        .cookie
        .as_deref()
        .is_some_and(|value| cookie_opens(value, entry, hash, now))
    {
        return Ok(());
    }
    if let Some(unlock) = asked.page_unlock {
        let password = unlock.map_err(|refused| *refused)?;
        // The page's own call: a refusal without a challenge, which would make the
        // browser ask in a dialog of its own.
        check(gateway, entry, hash, &password, &asked.address, None)
            .await
            .map_err(|mut refused| {
                if refused.status() == StatusCode::UNAUTHORIZED {
                    *refused.status_mut() = StatusCode::FORBIDDEN;
                    refused.headers_mut().remove(header::WWW_AUTHENTICATE);
                }
                refused
            })?;
        return Err(with_cookie(entry, hash, prefix, now, asked.https));
    }
    match asked.basic_password {
        Some(password) => check(gateway, entry, hash, &password, &asked.address, asked.remembered).await,
        None if asked.navigation => {
            metrics::request("password_asked");
            Err(page(prefix))
        }
        None => {
            metrics::request("password_asked");
            Err(challenge(
                "this link needs its password: Basic, with any user name",
            ))
        }
    }
}

/// Checks `password` from `address` on `entry`; once accepted, it is remembered under
/// `remember` for a minute.
async fn check(
    gateway: &Gateway,
    entry: &LinkEntry,
    hash: &str,
    password: &str,
    address: &str,
    remember: Option<u64>,
) -> Result<(), Response> {
    let guard = &gateway.link_guard;
    let id = entry.link.id.as_str();
    if let Some(left) = guard.addresses.locked(address) {
        return Err(locked_out(left));
    }
    if guard.links.locked(id).is_some() && guard.failed.has_failed(id, address) {
        return Err(locked_out(Duration::from_secs(60)));
    }

    let (hash, given) = (hash.to_owned(), password.to_owned());
    let right = tokio::task::spawn_blocking(move || {
        use sha_crypt::PasswordVerifier;
        sha_crypt::ShaCrypt::default()
            .verify_password(given.as_bytes(), hash.as_str())
            .is_ok()
    })
    .await
    .unwrap_or(false);
    if right {
        guard.failed.succeeded(id, address);
        if let Some(key) = remember {
            guard.accepted.insert(key, Instant::now());
        }
        return Ok(());
    }
    guard.addresses.failure(address);
    guard.links.failure(id);
    guard.failed.failed(id, address);
    metrics::request("password_refused");
    Err(challenge("wrong password for this link"))
}

/// 204 with the link's cookie: the password page's unlock succeeded.
fn with_cookie(entry: &LinkEntry, hash: &str, prefix: &str, now: i64, secure: bool) -> Response {
    let expiry = now + COOKIE_SECONDS;
    let cookie = format!(
        "{COOKIE}={expiry}.{}; Path={prefix}/; Max-Age={COOKIE_SECONDS}; HttpOnly; SameSite=Lax{}",
        tag(entry, hash, expiry),
        if secure { "; Secure" } else { "" }
    );
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Whether the cookie's value opens `entry` at `now`.
fn cookie_opens(value: &str, entry: &LinkEntry, hash: &str, now: i64) -> bool {
    let Some((expiry, given)) = value.split_once('.') else {
        return false;
    };
    let Ok(expiry) = expiry.parse::<i64>() else {
        return false;
    };
    let expected = tag(entry, hash, expiry);
    expiry > now && subtle_eq(expected.as_bytes(), given.as_bytes())
}

/// The cookie's tag: HMAC-SHA256 keyed by the password's hash over the link and expiry.
fn tag(entry: &LinkEntry, hash: &str, expiry: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(hash.as_bytes()).expect("any key length");
    mac.update(format!("{}.{expiry}", entry.link.id).as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Equal bytes, compared in time that does not depend on where they differ.
fn subtle_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether a browser navigates here (it then gets the password page).
fn is_navigation(request: &Request) -> bool {
    request.method() == Method::GET
        && (request
            .headers()
            .get("sec-fetch-mode")
            .is_some_and(|m| m.as_bytes() == b"navigate")
            || request
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|accept| accept.contains("text/html")))
}

/// 401 with a Basic challenge for the link.
fn challenge(message: &str) -> Response {
    let mut response = HttpError::new(StatusCode::UNAUTHORIZED, message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"kubedav link\", charset=\"UTF-8\""),
    );
    response
}

/// 429 for an address locked out.
fn locked_out(left: Duration) -> Response {
    metrics::request("locked_out");
    let seconds = left.as_secs().max(1);
    let mut response = HttpError::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!("too many wrong passwords from your address: try again in {seconds} s"),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// The page that asks a browser for the link's password (401, no challenge, so the
/// browser shows the page rather than its own prompt).
fn page(prefix: &str) -> Response {
    let prefix = crate::dav::xml::escape(prefix);
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>This link needs a password</title>\n\
         <link rel=\"stylesheet\" href=\"{prefix}/.kubedav-ui/app.css\">\n\
         <script src=\"{prefix}/.kubedav-ui/link.js\" defer></script>\n</head>\n<body>\n\
         <h1>This link needs a password</h1>\n\
         <form id=\"unlock\" data-href=\"{prefix}/\"><label>Password \
         <input type=\"password\" name=\"password\" autocomplete=\"current-password\" required autofocus></label> \
         <button type=\"submit\">Open</button></form>\n<p id=\"status\" role=\"status\"></p>\n</body>\n</html>\n"
    );
    crate::handlers::listing::page(StatusCode::UNAUTHORIZED, html)
}
