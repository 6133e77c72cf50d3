//! How fast one client address may change things through links: [`WRITES_PER_MINUTE`]
//! requests that write, per gateway, counted in one-minute windows. Past it: 429 with
//! `Retry-After`. Reads are not counted (a link's downloads are bounded by its
//! `max_uses`, and cost the owner nothing).

use crate::Gateway;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use std::time::{Duration, Instant};

/// Writes through links one address may make in a minute, per gateway.
pub const WRITES_PER_MINUTE: u32 = 120;

/// The window.
const WINDOW: Duration = Duration::from_secs(60);

/// Each address's window: when it began and the writes in it.
pub struct WriteRate(quick_cache::sync::Cache<String, (Instant, u32)>);

impl Default for WriteRate {
    fn default() -> Self {
        Self(quick_cache::sync::Cache::new(100_000))
    }
}

impl std::fmt::Debug for WriteRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteRate").finish_non_exhaustive()
    }
}

/// Counts a write from the request's address; the 429 when it is one too many.
pub fn admit(gateway: &Gateway, request: &Request) -> Result<(), Box<Response>> {
    let address = request
        .extensions()
        .get::<crate::request::ClientIp>()
        .map(|ip| kubedav_kit::throttle::address_key(&ip.0.to_string()))
        .unwrap_or_default();
    let now = Instant::now();
    let (began, count) = match gateway.link_rate.0.get(&address) {
        Some((began, count)) if now.duration_since(began) < WINDOW => (began, count + 1),
        _ => (now, 1),
    };
    gateway.link_rate.0.insert(address, (began, count));
    if count <= WRITES_PER_MINUTE {
        return Ok(());
    }
    let wait = WINDOW.saturating_sub(now.duration_since(began)).as_secs().max(1);
    let mut response = crate::http::errors::HttpError::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!("too many changes through links from your address: try again in {wait} s"),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(wait));
    Err(Box::new(response))
}
