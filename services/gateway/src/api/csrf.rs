//! The proof a state-changing API call must carry, whatever credential came with it: a
//! browser sends the session cookie and cached Basic credentials to kubedav whichever
//! page asks, so a credential alone proves nothing about who asked.
//!
//! * The header `X-Kubedav-Request: 1`. A page of another origin cannot send a custom
//!   header without a CORS preflight, which kubedav's CORS answers only for the origins
//!   it lists; a form (even `enctype=text/plain`, which can imitate a JSON body) cannot
//!   send one at all. Scripts and kubedav's own pages send it.
//! * If the browser names the page's origin (`Origin`), it must be this service's own:
//!   the scheme and host the request came to. A same-site page on another port is
//!   another origin, and is refused.
//! * If the browser says where the request comes from (`Sec-Fetch-Site`), it must be
//!   `same-origin` or `none` (typed or bookmarked).
//!
//! Any of them missing or wrong: 403, before the call does anything.

use axum::extract::Request;
use axum::response::Response;
use http::{Method, StatusCode, header};

/// The header that marks a call as kubedav's own pages' or a script's.
pub const HEADER: &str = "x-kubedav-request";

/// Checks a call; `Err` is the 403 to answer.
pub fn check(request: &Request) -> Result<(), Box<Response>> {
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let headers = request.headers();
    let refuse = |why: &str| Err(Box::new(super::error(StatusCode::FORBIDDEN, why)));
    if headers.get(HEADER).is_none_or(|v| v.as_bytes() != b"1") {
        return refuse(
            "this call changes something, so it must carry the header X-Kubedav-Request: 1 (kubedav's pages and scripts send it; other sites' pages cannot)",
        );
    }
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        return refuse("this call comes from another site's page; make it from kubedav's own");
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let own = own_origin(request);
        if own.as_deref() != Some(origin.as_bytes()) {
            return refuse("this call comes from a page of another origin; make it from kubedav's own");
        }
    }
    Ok(())
}

/// The origin the request came to: the scheme (`https` when a trusted proxy says so in
/// `X-Forwarded-Proto`) and the `Host` it named.
fn own_origin(request: &Request) -> Option<Vec<u8>> {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|h| h.as_bytes().to_vec())
        .or_else(|| request.uri().authority().map(|a| a.as_str().as_bytes().to_vec()))?;
    let scheme: &[u8] = if crate::edge::client::forwarded_https(request) {
        b"https://"
    } else {
        b"http://"
    };
    Some([scheme, &host].concat())
}
