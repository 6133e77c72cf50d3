//! An `upload` link, a drop box: files and folders go in, nothing comes out. A PUT of a
//! name already there is stored under the next free name (`report (2).pdf`), never over
//! the first; a MKCOL of a folder already there answers as if made; nothing is listed
//! (a PROPFIND of the link's folder itself, Depth 0, is what clients mount with) and
//! nothing is read. A browser opening the link gets the file manager's upload page.

use super::LinkEntry;
use crate::Gateway;
use crate::http::errors::HttpError;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use kubedav_api::fileio::StatRequest;
use kubedav_api::path::VolumePath;

/// Most names tried for one upload before it is refused.
const MOST_NAMES: u32 = 100;

/// Holds a request through an upload link to what a drop box allows: `Ok(None)` lets
/// it go on (a PUT perhaps renamed), `Ok(Some(answer))` answers it here.
pub async fn admit(
    gateway: &Gateway,
    request: &mut Request,
    entry: &LinkEntry,
) -> Result<Option<Response>, HttpError> {
    let base = gateway.base_path();
    let target = crate::http::paths::request_path(&base, request)?.path;
    let method = request.method().clone();
    match method.as_str() {
        "OPTIONS" => Ok(None),
        "PROPFIND" => {
            let depth_zero = request
                .headers()
                .get("depth")
                .is_some_and(|d| d.as_bytes() == b"0");
            if depth_zero && target == entry.path {
                Ok(None)
            } else {
                Err(refused("it lists nothing"))
            }
        }
        "GET" | "HEAD" if target == entry.path && wants_page(request) => {
            Ok(Some(upload_page(gateway, entry)))
        }
        "GET" | "HEAD" => Err(refused("nothing in it can be read")),
        "MKCOL" => match exists(gateway, &target).await? {
            true => Ok(Some(StatusCode::CREATED.into_response())),
            false => Ok(None),
        },
        "PUT" => {
            let free = free_name(gateway, &target).await?;
            if free != target {
                let href = base.href(&free, false);
                *request.uri_mut() = href
                    .parse()
                    .map_err(|_| HttpError::bad_request("the upload's name cannot be written in a URL"))?;
            }
            // Two uploads racing for one free name: the second is refused, never stored over.
            request
                .headers_mut()
                .insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
            Ok(None)
        }
        _ => Err(refused("it only takes new files and folders")),
    }
}

/// `target`, or the first of `name (2).ext`, `name (3).ext`, ... that is not there.
async fn free_name(gateway: &Gateway, target: &VolumePath) -> Result<VolumePath, HttpError> {
    if !exists(gateway, target).await? {
        return Ok(target.clone());
    }
    let Some((parent, name)) = target.split_last() else {
        return Err(refused("its folder itself cannot be replaced"));
    };
    let (stem, extension) = match name.rfind('.') {
        Some(at) if at > 0 => (&name[..at], &name[at..]),
        _ => (name, ""),
    };
    for n in 2..=MOST_NAMES {
        let candidate = parent
            .join(&format!("{stem} ({n}){extension}"))
            .map_err(|e| HttpError::bad_request(format!("no free name for the upload: {e}")))?;
        if !exists(gateway, &candidate).await? {
            return Ok(candidate);
        }
    }
    Err(HttpError::new(
        StatusCode::CONFLICT,
        format!("{MOST_NAMES} uploads already have this name: give the file another"),
    ))
}

/// Whether something is at `path`.
async fn exists(gateway: &Gateway, path: &VolumePath) -> Result<bool, HttpError> {
    match gateway
        .fileio
        .stat(StatRequest {
            path: path.as_str().to_owned(),
        })
        .await
    {
        Ok(_) => Ok(true),
        Err(status) if status.code() == tonic::Code::NotFound => Ok(false),
        Err(status) => Err(status.into()),
    }
}

/// Whether a browser asks for a page.
fn wants_page(request: &Request) -> bool {
    request.method() == Method::GET
        && request
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| accept.contains("text/html"))
}

/// The file manager's page of the drop box: no members, only the upload controls.
fn upload_page(gateway: &Gateway, entry: &LinkEntry) -> Response {
    let offers = crate::handlers::listing::Offers {
        write: true,
        ..Default::default()
    };
    let html = crate::handlers::listing::render(&gateway.base_path(), &entry.path, Vec::new(), offers)
        .replacen("<body ", "<body data-drop-box=\"true\" ", 1);
    crate::handlers::listing::page(StatusCode::OK, html)
}

/// 403 for what a drop box does not do.
fn refused(why: &str) -> HttpError {
    super::metrics::request("refused");
    HttpError::new(
        StatusCode::FORBIDDEN,
        format!("this link only accepts uploads: {why}"),
    )
}
