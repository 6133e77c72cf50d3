//! Nextcloud's paths and chunked uploads (docs/uploads.md), for the clients that speak
//! them: rclone's `nextcloud` vendor and Nextcloud's own clients.
//!
//! - `{base}/remote.php/dav/files/{user}/` is the tree as `user` sees it at `{base}/`:
//!   the request is served as any other, with the base path mounted there, so hrefs and
//!   `Destination`s stay under it ([`files_alias`]).
//! - `{base}/remote.php/dav/uploads/{user}/{folder}/` is a chunked upload: MKCOL makes
//!   it (with `Destination` and `OC-Total-Length` when the client sends them, chunking
//!   v2), PUT sends a chunk, named by its number (1..10000, v2) or by its first and last
//!   byte's offsets (`START-END`, as rclone names them), in any order, `MOVE .file`
//!   with `Destination` lands the assembled file as a PUT of it, and DELETE cancels it
//!   ([`answer`]). The folder is an upload of the uploads port, named by the folder, so
//!   any gateway finds it again and it survives restarts.
//!
//! `{user}` must be the principal's own name: any other answers as an absent path.

use super::checks::{parent_exists, room_for};
use super::{Asking, Landing, land, may_put, owner_of, refused_for_good};
use crate::Gateway;
use crate::dav::headers::names;
use crate::dav::method::DavMethod;
use crate::http::errors::{HttpError, HttpResult};
use crate::http::paths::BasePath;
use crate::request::Principal;
use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderName, HeaderValue, StatusCode, header};
use kubedav_api::path::VolumePath;
use kubedav_api::uploads::{
    AbortUploadRequest, AppendHeader, Chunk, CreateUploadRequest, GetUploadRequest, named_id,
};
use tonic::Code;

/// Nextcloud's DAV root below the base path.
const DAV_ROOT: &str = "/remote.php/dav/";
/// The highest chunk number of chunking v2 (S3's highest part number).
const MAX_CHUNK_NUMBER: u64 = 10_000;
/// Longest upload folder name.
const MAX_FOLDER_BYTES: usize = 255;
/// The headers a `.file` MOVE passes to the PUT that lands it.
const LANDING_HEADERS: [HeaderName; 6] = [
    HeaderName::from_static("x-oc-mtime"),
    HeaderName::from_static("oc-checksum"),
    header::IF_MATCH,
    header::IF_NONE_MATCH,
    header::IF_UNMODIFIED_SINCE,
    names::IF,
];

/// A path below `{base}/remote.php/dav/`.
pub enum DavPath<'p> {
    /// `files/{user}/...`.
    Files {
        /// The URL path up to and with the user's segment.
        prefix: &'p str,
        /// The user's segment, percent-encoded.
        user: &'p str,
    },
    /// `uploads/{user}/...`.
    Uploads {
        /// The user's segment, percent-encoded.
        user: &'p str,
        /// What follows it: "" or "/...".
        rest: &'p str,
    },
}

/// Which Nextcloud path `path` is, if any.
pub fn dav_path<'p>(gateway: &Gateway, path: &'p str) -> Option<DavPath<'p>> {
    let base = gateway.config.base_path.as_str();
    let below = path.strip_prefix(base)?.strip_prefix(DAV_ROOT)?;
    let (area, rest) = below.split_once('/')?;
    let (user, rest) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if user.is_empty() {
        return None;
    }
    match area {
        "files" => Some(DavPath::Files {
            prefix: &path[..path.len() - rest.len()],
            user,
        }),
        "uploads" => Some(DavPath::Uploads { user, rest }),
        _ => None,
    }
}

/// Whether the principal of `asking` is `user` (percent-encoded, as in the path). On a
/// gateway without authentication everyone is.
fn is_principal(gateway: &Gateway, asking: &Principal, user: &str) -> bool {
    if gateway.auth.is_none() {
        return true;
    }
    let decoded = percent_encoding::percent_decode_str(user).decode_utf8_lossy();
    !asking.name().is_empty() && asking.name() == decoded
}

/// The base path `files/{user}` stands for: the tree at its root.
fn files_base(prefix: &str) -> BasePath {
    BasePath::mounted(prefix, VolumePath::root())
}

/// `{base}/remote.php/dav/files/{user}/...` served as `{base}/...`, for `user` alone.
pub async fn files_alias(gateway: &Gateway, request: Request, prefix: &str, user: &str) -> Response {
    if !is_principal(gateway, &Principal::of(&request), user) {
        return absent_path().into_response();
    }
    crate::http::paths::mounted(files_base(prefix), crate::handlers::dispatch(gateway, request)).await
}

/// Answers a request below `{base}/remote.php/dav/uploads/{user}`; `rest` is what
/// follows the user.
pub async fn answer(gateway: &Gateway, request: Request, user: &str, rest: &str) -> Response {
    let (parts, body) = request.into_parts();
    let asking = Asking::from_parts(parts, ());
    let principal = Principal::of(&asking);
    let Some(owner) = owner_of(gateway, &principal).filter(|_| is_principal(gateway, &principal, user))
    else {
        return absent_path().into_response();
    };
    if gateway.uploads.is_none() {
        return unkept().into_response();
    }
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    route(gateway, &asking, body, owner, &segments)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// The answer to a request for `segments` below the user's uploads.
async fn route(
    gateway: &Gateway,
    asking: &Asking,
    body: Body,
    owner: String,
    segments: &[&str],
) -> HttpResult {
    let method = DavMethod::of(asking.method());
    match (segments, method) {
        ([] | [_] | [_, _], Some(DavMethod::Options)) => Ok(crate::handlers::options_response()),
        ([], _) => Err(not_allowed("OPTIONS")),
        ([folder], method) => {
            let folder = folder_name(folder)?;
            let id = named_id(&owner, &folder);
            match method {
                Some(DavMethod::Mkcol) => make(gateway, asking, owner, folder).await,
                Some(DavMethod::Delete) => cancel(gateway, id, owner).await,
                Some(DavMethod::Propfind) => describe(gateway, asking, id, owner).await,
                _ => Err(not_allowed("MKCOL, DELETE, PROPFIND, OPTIONS")),
            }
        }
        ([folder, ".file"], Some(DavMethod::Move)) => {
            let folder = folder_name(folder)?;
            finish(gateway, asking, named_id(&owner, &folder), owner).await
        }
        ([folder, chunk], Some(DavMethod::Put)) => {
            let folder = folder_name(folder)?;
            let (chunk, size) = chunk_of(chunk)?;
            if let (Some(size), Some(sent)) = (size, header_bytes(asking, "Content-Length")?)
                && size != sent
            {
                return Err(HttpError::bad_request(format!(
                    "the chunk's name says {size} bytes, but {sent} were sent"
                )));
            }
            put_chunk(gateway, asking, body, named_id(&owner, &folder), owner, chunk).await
        }
        ([_, _], _) => Err(not_allowed("PUT, and MOVE for .file")),
        _ => Err(absent_path()),
    }
}

/// MKCOL: a new upload named by the folder (201); 405 when it exists.
async fn make(gateway: &Gateway, asking: &Asking, owner: String, folder: String) -> HttpResult {
    let uploads = gateway.uploads.clone().ok_or_else(absent_path)?;
    may_send(gateway, asking)?;
    let length = header_bytes(asking, "OC-Total-Length")?;
    if length.is_some_and(|length| length > super::tus::MAX_SIZE) {
        return Err(HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a file may be at most {} bytes", super::tus::MAX_SIZE),
        ));
    }
    let target = match asking.headers().contains_key(names::DESTINATION) {
        true => Some(target(gateway, asking)?),
        false => None,
    };
    // Without a Destination (rclone names none before its MOVE), the upload is checked
    // as if it landed in the user's home, where a policy gives one.
    let checked = target.clone().or_else(|| stand_in(gateway, asking));
    if let Some(checked) = &checked {
        may_put(gateway, asking, checked).await?;
        if target.is_some() {
            parent_exists(gateway, checked).await?;
        }
        if let Some(length) = length {
            room_for(gateway, &uploads, &owner, checked, length).await?;
        }
    }
    uploads
        .create(CreateUploadRequest {
            owner,
            target: target.map(|t| t.as_str().to_owned()).unwrap_or_default(),
            length,
            metadata: Default::default(),
            name: folder,
        })
        .await
        .map_err(|status| match status.code() {
            Code::AlreadyExists => HttpError::respond(
                not_allowed_because(
                    "this upload folder exists already: send chunks into it, or DELETE it first",
                    "DELETE, PROPFIND, OPTIONS",
                )
                .into_response(),
            ),
            _ => port_error(status),
        })?;
    Ok(StatusCode::CREATED.into_response())
}

/// Refuses a user or credential that may not write (403): chunks are bytes kept for a
/// write.
fn may_send(gateway: &Gateway, asking: &Asking) -> Result<(), HttpError> {
    crate::edge::auth::admitted(gateway, &Principal::of(asking), false)
        .map_err(|refused| HttpError::respond(*refused))
}

/// A file in the asking user's home, under a policy with homes: where an upload that
/// names no target yet is checked as landing.
fn stand_in(gateway: &Gateway, asking: &Asking) -> Option<VolumePath> {
    let policy = gateway.policy.as_ref()?.current();
    let user = Principal::of(asking).name().to_owned();
    let home = policy.home(&policy.subject(&user, &[] as &[&str]))?;
    home.join("upload").ok()
}

/// PUT of a chunk (201); all of it or nothing.
async fn put_chunk(
    gateway: &Gateway,
    asking: &Asking,
    body: Body,
    id: String,
    owner: String,
    chunk: Chunk,
) -> HttpResult {
    let uploads = gateway.uploads.clone().ok_or_else(absent_path)?;
    may_send(gateway, asking)?;
    let length = header_bytes(asking, "OC-Total-Length")?;
    let limit = gateway.config.max_body_bytes;
    uploads
        .append(
            AppendHeader {
                id,
                owner,
                offset: 0,
                checksum: None,
                length,
                chunk: Some(chunk),
                bytes: header_bytes(asking, "Content-Length")?,
            },
            crate::handlers::put::limited_body(body, limit),
        )
        .await
        .map_err(port_error)?;
    Ok(StatusCode::CREATED.into_response())
}

/// MOVE of `.file`: lands the assembled chunks as a PUT of `Destination`, with the
/// modification time, checksum and preconditions the MOVE carries (the PUT's answer).
async fn finish(gateway: &Gateway, asking: &Asking, id: String, owner: String) -> HttpResult {
    let uploads = gateway.uploads.clone().ok_or_else(absent_path)?;
    let upload = uploads
        .get(GetUploadRequest { id, owner })
        .await
        .map_err(port_error)?;
    if let Some(missing) = upload.missing_chunk {
        return Err(HttpError::new(
            StatusCode::CONFLICT,
            format!(
                "chunk {missing} has not arrived, so the chunks after it cannot be assembled; send it, then MOVE .file again"
            ),
        ));
    }
    let declared = header_bytes(asking, "OC-Total-Length")?.or(upload.length);
    if let Some(declared) = declared
        && declared != upload.offset
    {
        return Err(HttpError::new(
            StatusCode::CONFLICT,
            format!(
                "the chunks hold {} bytes, not the {declared} of the file; send the missing chunks, then MOVE .file again",
                upload.offset
            ),
        ));
    }
    let target = target(gateway, asking)?;
    let landed = land(
        gateway,
        asking,
        &target,
        Landing {
            id: upload.id.clone(),
            owner: upload.owner.clone(),
            length: upload.offset,
        },
        &LANDING_HEADERS,
    )
    .await;
    if !landed.status().is_success() && refused_for_good(landed.status()) {
        let _ = uploads
            .abort(AbortUploadRequest {
                id: upload.id,
                owner: upload.owner,
            })
            .await;
    }
    Ok(landed)
}

/// DELETE: cancels the upload (204).
async fn cancel(gateway: &Gateway, id: String, owner: String) -> HttpResult {
    let uploads = gateway.uploads.clone().ok_or_else(absent_path)?;
    uploads
        .abort(AbortUploadRequest { id, owner })
        .await
        .map_err(port_error)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// PROPFIND: the upload folder as a collection (207), so a client sees it exists; with
/// `Depth: 1` also the numbered chunks received, so a resuming client sends only the
/// others.
async fn describe(gateway: &Gateway, asking: &Asking, id: String, owner: String) -> HttpResult {
    let uploads = gateway.uploads.clone().ok_or_else(absent_path)?;
    let upload = uploads
        .get(GetUploadRequest { id, owner })
        .await
        .map_err(port_error)?;
    let folder = asking.uri().path().trim_end_matches('/');
    let modified = crate::http::dates::http_date(upload.created_unix_ns);
    let mut body =
        String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<d:multistatus xmlns:d=\"DAV:\">");
    body.push_str(&format!(
        "<d:response><d:href>{}/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype>\
         <d:getlastmodified>{modified}</d:getlastmodified></d:prop><d:status>HTTP/1.1 200 OK</d:status>\
         </d:propstat></d:response>",
        crate::dav::xml::escape(folder)
    ));
    let depth_one = asking
        .headers()
        .get(names::DEPTH)
        .is_some_and(|d| d.as_bytes() == b"1");
    for chunk in upload.chunks.iter().filter(|_| depth_one) {
        body.push_str(&format!(
            "<d:response><d:href>{}/{:05}</d:href><d:propstat><d:prop><d:resourcetype/>\
             <d:getcontentlength>{}</d:getcontentlength></d:prop><d:status>HTTP/1.1 200 OK</d:status>\
             </d:propstat></d:response>",
            crate::dav::xml::escape(folder),
            chunk.key,
            chunk.size
        ));
    }
    body.push_str("</d:multistatus>\n");
    let mut response = (StatusCode::MULTI_STATUS, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml; charset=utf-8"),
    );
    Ok(response)
}

/// An upload folder's name, decoded.
fn folder_name(raw: &str) -> Result<String, HttpError> {
    let name = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| HttpError::bad_request("the upload folder's name is not UTF-8"))?;
    if name.len() > MAX_FOLDER_BYTES || name == "." || name == ".." {
        return Err(HttpError::bad_request(format!(
            "name the upload folder with 1 to {MAX_FOLDER_BYTES} bytes"
        )));
    }
    Ok(name.into_owned())
}

/// A chunk's place from its name: a number from 1 to 10000 (chunking v2), or
/// `START-END`, its first and last byte's offsets (then also its size).
pub fn chunk_of(name: &str) -> Result<(Chunk, Option<u64>), HttpError> {
    let bad = || {
        HttpError::bad_request(format!(
            "{name:?} is not a chunk name: name chunks 1 to {MAX_CHUNK_NUMBER}, or START-END by their first and last byte's offsets"
        ))
    };
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((start, end)) = name.split_once('-') {
        if !digits(start) || !digits(end) {
            return Err(bad());
        }
        let (start, end): (u64, u64) = (start.parse().map_err(|_| bad())?, end.parse().map_err(|_| bad())?);
        if end < start {
            return Err(bad());
        }
        let size = (end - start).checked_add(1).ok_or_else(bad)?;
        let chunk = Chunk {
            key: start,
            by_offset: true,
            size: Some(size),
        };
        return Ok((chunk, Some(size)));
    }
    if !digits(name) {
        return Err(bad());
    }
    match name.parse::<u64>() {
        Ok(number @ 1..=MAX_CHUNK_NUMBER) => Ok((
            Chunk {
                key: number,
                by_offset: false,
                size: None,
            },
            None,
        )),
        _ => Err(bad()),
    }
}

/// The header `name` as a number of bytes, if sent.
fn header_bytes(asking: &Asking, name: &str) -> Result<Option<u64>, HttpError> {
    asking
        .headers()
        .get(name)
        .map(|value| super::number(value, name))
        .transpose()
}

/// The file `Destination` names: below the files alias of the asking user (as the
/// client wrote the alias), or below the base path.
fn target(gateway: &Gateway, asking: &Asking) -> Result<VolumePath, HttpError> {
    let headers = asking.headers();
    let raw = headers
        .get(names::DESTINATION)
        .and_then(|v| v.to_str().ok())
        .map(|v| match v.parse::<http::Uri>() {
            Ok(uri) => uri.path().to_owned(),
            Err(_) => v.to_owned(),
        })
        .unwrap_or_default();
    let base = match dav_path(gateway, &raw) {
        Some(DavPath::Files { prefix, user }) if is_principal(gateway, &Principal::of(asking), user) => {
            files_base(prefix)
        }
        _ => gateway.config.base_path.clone(),
    };
    let found = crate::dav::headers::destination(&base, headers)?;
    if found.path.is_root() || found.trailing_slash {
        return Err(HttpError::bad_request(
            "the Destination names a collection; name the file the chunks make",
        ));
    }
    Ok(found.path)
}

/// The answer to a refused call of the uploads port.
fn port_error(status: tonic::Status) -> HttpError {
    match status.code() {
        Code::NotFound => absent_path(),
        Code::Unimplemented => unkept(),
        Code::Aborted => HttpError::new(StatusCode::LOCKED, status.message()),
        Code::FailedPrecondition => HttpError::new(StatusCode::CONFLICT, status.message()),
        Code::OutOfRange => HttpError::new(StatusCode::PAYLOAD_TOO_LARGE, status.message()),
        Code::Cancelled => HttpError::bad_request(status.message()),
        _ => status.into(),
    }
}

/// What a server whose storage keeps no uploads answers.
fn unkept() -> HttpError {
    HttpError::new(
        StatusCode::NOT_IMPLEMENTED,
        "this server's storage does not keep uploads in many requests yet; send the file with one PUT",
    )
}

/// What any absent, foreign, expired or finished upload answers.
fn absent_path() -> HttpError {
    HttpError::new(StatusCode::NOT_FOUND, "no such file or collection")
}

fn not_allowed(allow: &'static str) -> HttpError {
    HttpError::respond(not_allowed_because("use another method here", allow).into_response())
}

fn not_allowed_because(message: &str, allow: &'static str) -> HttpError {
    let mut response = HttpError::new(StatusCode::METHOD_NOT_ALLOWED, message).into_response();
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    HttpError::respond(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_names_are_numbers_or_offsets() {
        let (numbered, size) = chunk_of("17").unwrap();
        assert_eq!((numbered.key, numbered.by_offset, size), (17, false, None));
        let (ranged, size) = chunk_of("000000010485760-000000020971519").unwrap();
        assert_eq!(
            (ranged.key, ranged.by_offset, size),
            (10_485_760, true, Some(10_485_760))
        );
        for bad in [
            "0",
            "10001",
            "-1",
            "1-",
            "5-3",
            "a",
            "",
            "1.5",
            "99999999999999999999999",
        ] {
            assert_eq!(
                chunk_of(bad).unwrap_err().status,
                StatusCode::BAD_REQUEST,
                "{bad}"
            );
        }
    }
}
