//! A credential's scope: an app password limited to a path reaches that path and what
//! lies beneath it, and nothing else, with or without a policy. Everything outside is
//! answered as absent (404), and what would be created outside is refused (403); a
//! COPY or MOVE is held to it at both ends.

use crate::Gateway;
use crate::dav::method::DavMethod;
use crate::http::errors::HttpError;
use crate::request::Principal;
use axum::extract::Request;
use http::StatusCode;
use kubedav_api::path::VolumePath;

/// Checks `request` against its credential's path, if it has one.
pub fn check(gateway: &Gateway, method: DavMethod, request: &Request) -> Result<(), HttpError> {
    // Borrowed, not cloned: every request passes here, and most have no scope.
    let prefix = request
        .extensions()
        .get::<Principal>()
        .map_or("", Principal::path_prefix);
    if prefix.is_empty() || method == DavMethod::Options {
        return Ok(());
    }
    let target = crate::http::paths::request_path(&gateway.base_path(), request)?.path;
    let creates = matches!(method, DavMethod::Put | DavMethod::Mkcol | DavMethod::Lock);
    reach(&target, prefix, creates)?;
    if matches!(method, DavMethod::Copy | DavMethod::Move) {
        let destination = crate::dav::headers::destination(&gateway.base_path(), request.headers())?.path;
        reach(&destination, prefix, true)?;
    }
    Ok(())
}

/// Whether `path` is within `prefix` ("" reaches everything); the answer when not:
/// 404 as for an absent path, or 403 for one to be created (`creates`).
pub(crate) fn reach(path: &VolumePath, prefix: &str, creates: bool) -> Result<(), HttpError> {
    let inside = prefix.is_empty()
        || path.as_str() == prefix
        || path
            .as_str()
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'));
    match (inside, creates) {
        (true, _) => Ok(()),
        (false, false) => Err(HttpError::new(
            StatusCode::NOT_FOUND,
            format!("{path} does not exist"),
        )),
        (false, true) => Err(HttpError::new(
            StatusCode::FORBIDDEN,
            format!("{path} cannot be created with this credential: it reaches only /{prefix}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_reaches_its_path_and_below_only() {
        let path = |p: &str| VolumePath::parse(p).unwrap();
        assert!(reach(&path("team"), "team", false).is_ok());
        assert!(reach(&path("team/a/b.txt"), "team", true).is_ok());
        for outside in ["", "teamwork", "tea", "home/team", "other/team/x"] {
            assert_eq!(
                reach(&path(outside), "team", false).unwrap_err().status,
                StatusCode::NOT_FOUND,
                "{outside}"
            );
            assert_eq!(
                reach(&path(outside), "team", true).unwrap_err().status,
                StatusCode::FORBIDDEN,
                "{outside}"
            );
        }
    }
}
