//! Uploads in many requests (issue 55; docs/uploads.md): TUS 1.0 at
//! `{base}/.kubedav/uploads/` ([`tus`]), and Nextcloud chunking at
//! `{base}/remote.php/dav/uploads/{user}/` ([`nextcloud`]). fileio keeps each upload's bytes and state
//! (the [`kubedav_api::uploads::Uploads`] port); the gateway decides who may upload
//! where, and lands a finished upload as a PUT of its target ([`land`]), so every check
//! and effect of a PUT (policy, shares, locks, quota, versions, checksums, the caches)
//! applies to it as to a body that arrived at once.

mod checks;
pub mod nextcloud;
pub mod tus;

use crate::Gateway;
use crate::http::errors::HttpError;
use crate::request::Principal;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::{HeaderName, HeaderValue, Method, StatusCode};
use kubedav_api::path::{RESERVED_AREA, VolumePath};

/// What a PUT lands instead of a body: a finished upload of `length` bytes. Set on the
/// request [`land`] makes; the PUT handler reads it.
#[derive(Clone, Debug)]
pub struct Landing {
    /// The upload's id.
    pub id: String,
    /// Its owner.
    pub owner: String,
    /// Its length.
    pub length: u64,
}

/// A request without its body: who asks, and the headers it sent.
pub type Asking = http::Request<()>;

/// The name below `{base}/.kubedav/` of the uploads.
const AREA: &str = "uploads";

/// What follows `{base}/.kubedav/uploads` in `path` ("" or "/{id}"), if it names the
/// uploads.
pub fn uploads_path<'p>(gateway: &Gateway, path: &'p str) -> Option<&'p str> {
    gateway.uploads.as_ref()?;
    let rest = path.strip_prefix(gateway.config.base_path.as_str())?;
    let rest = rest.strip_prefix('/')?.strip_prefix(RESERVED_AREA)?;
    let rest = rest.strip_prefix('/')?.strip_prefix(AREA)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

/// The owner uploads of `principal` are recorded under: its name, or, on a gateway
/// without authentication, one owner for every client. `None` for the anonymous
/// principal of a gateway with authentication: it may not upload this way (its uploads
/// would be every anonymous client's).
pub fn owner_of(gateway: &Gateway, principal: &Principal) -> Option<String> {
    match principal.name() {
        "" if gateway.auth.is_some() => None,
        // Without authentication there are no users: no one else is "-".
        "" => Some("-".to_owned()),
        name => Some(name.to_owned()),
    }
}

/// A PUT of `target` as `asking` would make it, without a body: the request the access
/// checks decide and, with a [`Landing`], the one that lands an upload. It carries
/// `asking`'s principal and the `headers` named in `pass` that `asking` sent.
fn as_put(gateway: &Gateway, asking: &Asking, target: &VolumePath, pass: &[HeaderName]) -> Request {
    let uri = gateway.base_path().href(target, false);
    let mut put = Request::new(Body::empty());
    *put.method_mut() = Method::PUT;
    *put.uri_mut() = uri.parse().unwrap_or_default();
    *put.extensions_mut() = asking.extensions().clone();
    let headers = put.headers_mut();
    for name in pass.iter().chain([&http::header::HOST]) {
        if let Some(value) = asking.headers().get(name) {
            headers.insert(name.clone(), value.clone());
        }
    }
    put
}

/// Whether `asking`'s principal may PUT `target` now, decided as for a PUT of it (the
/// policy, shares and the credential's scope): `Err` is the answer such a PUT would get.
pub async fn may_put(gateway: &Gateway, asking: &Asking, target: &VolumePath) -> Result<(), HttpError> {
    let mut put = as_put(gateway, asking, target, &[]);
    let method = crate::dav::method::DavMethod::Put;
    // A new user's home is made at their first request, whichever it is.
    if let Some(home) = crate::access::homes::home_to_make(gateway, &put) {
        home.make(gateway).await;
    }
    crate::access::scope::check(gateway, method, &put)?;
    match crate::access::check(gateway, method, &mut put) {
        Ok(()) => Ok(()),
        Err(crate::access::Refusal::Answer(refused)) => Err(refused),
        Err(crate::access::Refusal::SharesUnconfirmed(refused)) => {
            let confirmed = match &gateway.shares {
                Some(shares) => shares.check().await.is_ok(),
                None => false,
            };
            if !confirmed {
                return Err(refused);
            }
            match crate::access::check(gateway, method, &mut put) {
                Ok(()) => Ok(()),
                Err(
                    crate::access::Refusal::Answer(refused)
                    | crate::access::Refusal::SharesUnconfirmed(refused),
                ) => Err(refused),
            }
        }
    }
}

/// Lands the finished upload `landing` at `target` as a PUT by `asking`'s principal,
/// with the headers of `asking` named in `pass` (checksums, a modification time,
/// preconditions): the PUT's answer. The permission is checked again here, so a share
/// revoked during the upload stops it landing.
pub async fn land(
    gateway: &Gateway,
    asking: &Asking,
    target: &VolumePath,
    landing: Landing,
    pass: &[HeaderName],
) -> Response {
    // A landing writes, whichever request made it (a HEAD may): as a write, it needs a
    // user and a credential that may write.
    if let Err(refused) = crate::edge::auth::admitted(gateway, &Principal::of(asking), false) {
        return *refused;
    }
    let mut put = as_put(gateway, asking, target, pass);
    put.extensions_mut().insert(landing);
    crate::handlers::dispatch(gateway, put).await
}

/// Whether a landing's answer says the upload can never land as it is (then it is
/// removed): any refusal but a lock the client may see released (423), a target changed
/// by another writer just before the landing (412: the next try lands over it), a wait
/// (408, 429), or a failure of the server.
pub fn refused_for_good(status: StatusCode) -> bool {
    status.is_client_error()
        && !matches!(
            status,
            StatusCode::LOCKED
                | StatusCode::PRECONDITION_FAILED
                | StatusCode::TOO_MANY_REQUESTS
                | StatusCode::REQUEST_TIMEOUT
        )
}

/// A header's value as a number of bytes.
pub(super) fn number(value: &HeaderValue, name: &str) -> Result<u64, HttpError> {
    value
        .to_str()
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| HttpError::bad_request(format!("{name} is not a number of bytes")))
}
