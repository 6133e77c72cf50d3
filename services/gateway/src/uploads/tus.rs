//! TUS 1.0 (<https://tus.io/protocols/resumable-upload>) at `{base}/.kubedav/uploads/`,
//! with the extensions `creation`, `creation-with-upload`, `termination`, `expiration`
//! and `checksum`. An upload is created by POST with `Upload-Length` and the target
//! path under the `path` key of `Upload-Metadata` (a PUT there must be allowed), lives
//! at `{base}/.kubedav/uploads/{id}` (HEAD, PATCH, DELETE), and lands as a PUT of its
//! target when its last byte arrived (docs/uploads.md).

use super::checks::{parent_exists, room_for};
use super::{Asking, Landing, land, may_put, number, owner_of, refused_for_good};
use crate::Gateway;
use crate::http::errors::{HttpError, HttpResult};
use crate::request::Principal;
use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use kubedav_api::path::VolumePath;
use kubedav_api::uploads::{
    AbortUploadRequest, AppendHeader, CreateUploadRequest, GetUploadRequest, Upload, is_upload_id, offset_in,
};
use std::collections::HashMap;
use tonic::Code;

/// The protocol version spoken.
const VERSION: &str = "1.0.0";
/// The extensions supported.
const EXTENSIONS: &str = "creation,creation-with-upload,termination,expiration,checksum";
/// The checksum algorithms `Upload-Checksum` may name.
const CHECKSUMS: &str = "sha1,sha256,sha512,md5";
/// The largest upload that may be declared: S3's largest object, 5 TiB.
pub const MAX_SIZE: u64 = 5 << 40;
/// The content type of a PATCH's (and a creation-with-upload's) body.
const OFFSET_STREAM: &str = "application/offset+octet-stream";
/// Longest `Upload-Metadata` accepted.
const MAX_METADATA_BYTES: usize = 4096;
/// TUS's status for a chunk whose checksum does not match.
const CHECKSUM_MISMATCH: u16 = 460;

/// Answers a TUS request; `rest` is what follows `{base}/.kubedav/uploads` ("" or
/// "/{id}").
pub async fn answer(gateway: &Gateway, request: Request, rest: &str) -> Response {
    let method = effective_method(&request);
    let (parts, body) = request.into_parts();
    let request = Asking::from_parts(parts, ());
    let answered = if method == Method::OPTIONS {
        Ok(options())
    } else if request
        .headers()
        .get("tus-resumable")
        .is_none_or(|v| v.as_bytes() != VERSION.as_bytes())
    {
        Err(HttpError::respond(with_version(
            HttpError::new(
                StatusCode::PRECONDITION_FAILED,
                "this is a TUS endpoint: send Tus-Resumable: 1.0.0 (docs/uploads.md)",
            )
            .into_response(),
        )))
    } else {
        match (rest, method) {
            ("" | "/", Method::POST) => create(gateway, request, body).await,
            (id, method) if is_upload_id(id.trim_start_matches('/')) => {
                let id = id.trim_start_matches('/').to_owned();
                match method {
                    Method::HEAD => head(gateway, request, id).await,
                    Method::PATCH => patch(gateway, request, body, id).await,
                    Method::DELETE => terminate(gateway, request, id).await,
                    _ => Err(not_allowed("HEAD, PATCH, DELETE, OPTIONS")),
                }
            }
            ("" | "/", _) => Err(not_allowed("POST, OPTIONS")),
            _ => Err(absent()),
        }
    };
    let mut response = answered.unwrap_or_else(IntoResponse::into_response);
    response
        .headers_mut()
        .insert("tus-resumable", HeaderValue::from_static(VERSION));
    response
}

/// The method, or the one `X-HTTP-Method-Override` names on a POST (for clients behind
/// proxies that pass only GET and POST).
fn effective_method(request: &Request) -> Method {
    let overridden = request
        .headers()
        .get("x-http-method-override")
        .and_then(|v| Method::from_bytes(v.as_bytes()).ok());
    match overridden {
        Some(method) if request.method() == Method::POST => method,
        _ => request.method().clone(),
    }
}

fn options() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert("tus-version", HeaderValue::from_static(VERSION));
    headers.insert("tus-extension", HeaderValue::from_static(EXTENSIONS));
    headers.insert("tus-max-size", HeaderValue::from(MAX_SIZE));
    headers.insert("tus-checksum-algorithm", HeaderValue::from_static(CHECKSUMS));
    response
}

fn with_version(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert("tus-version", HeaderValue::from_static(VERSION));
    response
}

fn not_allowed(allow: &'static str) -> HttpError {
    let mut response =
        HttpError::new(StatusCode::METHOD_NOT_ALLOWED, format!("use {allow} here")).into_response();
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    HttpError::respond(response)
}

/// What an anonymous client of a gateway with authentication gets for a new upload.
fn signed_out() -> HttpError {
    HttpError::new(StatusCode::UNAUTHORIZED, "sign in to upload")
}

/// What every unknown, expired or foreign upload answers.
fn absent() -> HttpError {
    HttpError::new(
        StatusCode::NOT_FOUND,
        "no such upload: it finished, was cancelled, expired, or is not yours; start a new one",
    )
}

/// POST: creates an upload (201, `Location`), and with a body, takes its first bytes.
async fn create(gateway: &Gateway, request: Asking, body: Body) -> HttpResult {
    let uploads = gateway.uploads.clone().ok_or_else(absent)?;
    let headers = request.headers();
    let length = match headers.get("upload-length") {
        Some(value) => number(value, "Upload-Length")?,
        None if headers.contains_key("upload-defer-length") => {
            return Err(HttpError::bad_request(
                "this server needs the length up front: send Upload-Length, not Upload-Defer-Length",
            ));
        }
        None => return Err(HttpError::bad_request("send the upload's size in Upload-Length")),
    };
    if length > MAX_SIZE {
        return Err(HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("an upload may be at most {MAX_SIZE} bytes (Tus-Max-Size)"),
        ));
    }
    let metadata = metadata(headers)?;
    let target = target(metadata.get("path"))?;
    // Everything a creation with bytes could get wrong is refused before anything is
    // made: nothing is left behind that the client could not find again.
    let with_body = has_body(headers);
    if with_body {
        content_type(headers)?;
        checksum(headers)?;
        if let Some(value) = headers.get(header::CONTENT_LENGTH)
            && number(value, "Content-Length")? > length
        {
            return Err(HttpError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("these bytes go past the upload's length of {length}; none of them was kept"),
            ));
        }
    }
    may_put(gateway, &request, &target).await?;
    parent_exists(gateway, &target).await?;
    let principal = Principal::of(&request);
    let owner = owner_of(gateway, &principal).ok_or_else(signed_out)?;
    room_for(gateway, &uploads, &owner, &target, length).await?;
    let upload = uploads
        .create(CreateUploadRequest {
            owner,
            target: target.as_str().to_owned(),
            length: Some(length),
            metadata,
            name: String::new(),
        })
        .await
        .map_err(|status| match status.code() {
            Code::Unimplemented => HttpError::new(
                StatusCode::NOT_IMPLEMENTED,
                "this server's storage does not keep uploads in many requests yet; send the file with one PUT",
            ),
            _ => status.into(),
        })?;
    let location = format!(
        "{}/{}/uploads/{}",
        gateway.base_path().as_str().trim_end_matches('/'),
        kubedav_api::path::RESERVED_AREA,
        upload.id
    );
    let answered = if with_body {
        append(gateway, &request, body, &upload.id, &upload.owner, upload.length).await
    } else if length == 0 {
        // An empty file is complete at once: the client sends nothing more.
        land_upload(gateway, &request, &upload, &target).await
    } else {
        let mut response = StatusCode::CREATED.into_response();
        state_headers(response.headers_mut(), &upload);
        Ok(response)
    };
    let mut response = match answered {
        Ok(response) => response,
        Err(refused) => {
            // Its client has no Location to come back to: nothing of it is kept.
            let _ = uploads
                .abort(AbortUploadRequest {
                    id: upload.id.clone(),
                    owner: upload.owner.clone(),
                })
                .await;
            return Err(refused);
        }
    };
    *response.status_mut() = StatusCode::CREATED;
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// HEAD: the upload's offset and length. An upload whose bytes all arrived but that did
/// not land (fileio or the gateway failed at that moment) lands now.
async fn head(gateway: &Gateway, request: Asking, id: String) -> HttpResult {
    let uploads = gateway.uploads.clone().ok_or_else(absent)?;
    let owner = owner_of(gateway, &Principal::of(&request)).ok_or_else(absent)?;
    let upload = uploads
        .get(GetUploadRequest { id, owner })
        .await
        .map_err(|status| status_error(status, None))?;
    if upload.length == Some(upload.offset) {
        let target = target(Some(&upload.target))?;
        let landed = land_upload(gateway, &request, &upload, &target).await?;
        return Ok(head_answer(landed));
    }
    let mut response = StatusCode::OK.into_response();
    state_headers(response.headers_mut(), &upload);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

fn head_answer(mut landed: Response) -> Response {
    *landed.status_mut() = StatusCode::OK;
    landed
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    landed
}

/// PATCH: bytes at the upload's offset (204, the new `Upload-Offset`); the last byte
/// lands it.
async fn patch(gateway: &Gateway, request: Asking, body: Body, id: String) -> HttpResult {
    content_type(request.headers())?;
    let owner = owner_of(gateway, &Principal::of(&request)).ok_or_else(absent)?;
    // No state read before the append: fileio checks the offset and the length, and
    // answers with the state after it (one call per PATCH, not two).
    let mut response = append(gateway, &request, body, &id, &owner, None).await?;
    *response.status_mut() = StatusCode::NO_CONTENT;
    Ok(response)
}

/// Appends the request's body to upload `id` at the request's `Upload-Offset` (0 for a
/// creation), and lands the upload when it is complete: the answer carries the new
/// offset, its status is the caller's to set. A `length` known already refuses a body
/// declared longer before reading it; fileio refuses bytes past it in any case.
async fn append(
    gateway: &Gateway,
    request: &Asking,
    body: Body,
    id: &str,
    owner: &str,
    length: Option<u64>,
) -> HttpResult {
    let uploads = gateway.uploads.clone().ok_or_else(absent)?;
    let headers = request.headers();
    let offset = match headers.get("upload-offset") {
        Some(value) => number(value, "Upload-Offset")?,
        None if request.method() == Method::POST => 0,
        None => {
            return Err(HttpError::bad_request(
                "send the offset of these bytes in Upload-Offset",
            ));
        }
    };
    let checksum = checksum(headers)?;
    let declared = match headers.get(header::CONTENT_LENGTH) {
        Some(value) => Some(number(value, "Content-Length")?),
        None => None,
    };
    if let (Some(declared), Some(length)) = (declared, length)
        && offset.saturating_add(declared) > length
    {
        return Err(HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("these bytes go past the upload's length of {length}; none of them was kept"),
        ));
    }
    let limit = gateway.config.max_body_bytes;
    let data = crate::handlers::put::limited_body(body, limit);
    let appended = uploads
        .append(
            AppendHeader {
                id: id.to_owned(),
                owner: owner.to_owned(),
                offset,
                checksum,
                length: None,
                chunk: None,
                bytes: declared,
            },
            data,
        )
        .await
        .map_err(|status| status_error(status, limit))?;
    if appended.length == Some(appended.offset) {
        let target = target(Some(&appended.target))?;
        return land_upload(gateway, request, &appended, &target).await;
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    state_headers(response.headers_mut(), &appended);
    Ok(response)
}

/// Lands the complete `upload` at `target`: its state's answer when it landed, the
/// PUT's refusal otherwise (then the upload is removed if it can never land).
async fn land_upload(gateway: &Gateway, asking: &Asking, upload: &Upload, target: &VolumePath) -> HttpResult {
    let length = upload.offset;
    let landing = Landing {
        id: upload.id.clone(),
        owner: upload.owner.clone(),
        length,
    };
    let landed = land(gateway, asking, target, landing, &[]).await;
    if landed.status().is_success() {
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        headers.insert("upload-offset", HeaderValue::from(length));
        headers.insert("upload-length", HeaderValue::from(length));
        for name in [header::ETAG, header::LAST_MODIFIED] {
            if let Some(value) = landed.headers().get(&name) {
                headers.insert(name, value.clone());
            }
        }
        return Ok(response);
    }
    if refused_for_good(landed.status())
        && let Some(uploads) = &gateway.uploads
    {
        let _ = uploads
            .abort(AbortUploadRequest {
                id: upload.id.clone(),
                owner: upload.owner.clone(),
            })
            .await;
    }
    Err(HttpError::respond(landed))
}

/// DELETE: ends the upload; its bytes are removed (204).
async fn terminate(gateway: &Gateway, request: Asking, id: String) -> HttpResult {
    let uploads = gateway.uploads.clone().ok_or_else(absent)?;
    let owner = owner_of(gateway, &Principal::of(&request)).ok_or_else(absent)?;
    uploads
        .abort(AbortUploadRequest { id, owner })
        .await
        .map_err(|status| status_error(status, None))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `Upload-Offset`, `Upload-Length` and `Upload-Expires` of `upload`.
fn state_headers(headers: &mut HeaderMap, upload: &Upload) {
    headers.insert("upload-offset", HeaderValue::from(upload.offset));
    if let Some(length) = upload.length {
        headers.insert("upload-length", HeaderValue::from(length));
    }
    if let Ok(value) = HeaderValue::from_str(&crate::http::dates::http_date(upload.expires_unix_ns)) {
        headers.insert("upload-expires", value);
    }
}

/// The answer to a refused call of the uploads port.
fn status_error(status: tonic::Status, limit: Option<u64>) -> HttpError {
    match status.code() {
        Code::NotFound => absent(),
        Code::FailedPrecondition => {
            let mut response = HttpError::new(StatusCode::CONFLICT, status.message()).into_response();
            if let Some(offset) = offset_in(&status) {
                response
                    .headers_mut()
                    .insert("upload-offset", HeaderValue::from(offset));
            }
            HttpError::respond(response)
        }
        Code::Aborted => HttpError::new(StatusCode::LOCKED, status.message()),
        Code::OutOfRange if status.message().contains("length") => {
            HttpError::new(StatusCode::PAYLOAD_TOO_LARGE, status.message())
        }
        Code::OutOfRange => HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "one request may carry at most {} bytes; send the rest in another PATCH",
                limit.unwrap_or(0)
            ),
        ),
        Code::InvalidArgument if status.message().contains("checksum is") => HttpError::new(
            StatusCode::from_u16(CHECKSUM_MISMATCH).unwrap_or(StatusCode::BAD_REQUEST),
            "the bytes do not have the checksum Upload-Checksum names; none of them was kept, send them again",
        ),
        _ => status.into(),
    }
}

/// Whether the request has a body to read.
fn has_body(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_LENGTH)
        .is_some_and(|v| v.as_bytes() != b"0")
        || headers.contains_key(header::TRANSFER_ENCODING)
}

/// Refuses a body of another type than `application/offset+octet-stream` (415).
fn content_type(headers: &HeaderMap) -> Result<(), HttpError> {
    let given = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    if given.as_deref() == Some(OFFSET_STREAM) {
        Ok(())
    } else {
        Err(HttpError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("send an upload's bytes as Content-Type: {OFFSET_STREAM}"),
        ))
    }
}

/// `Upload-Metadata`: comma-separated keys, each with its base64 value or none.
fn metadata(headers: &HeaderMap) -> Result<HashMap<String, String>, HttpError> {
    let mut pairs = HashMap::new();
    let Some(value) = headers.get("upload-metadata") else {
        return Ok(pairs);
    };
    if value.len() > MAX_METADATA_BYTES {
        return Err(HttpError::bad_request(format!(
            "Upload-Metadata is longer than {MAX_METADATA_BYTES} bytes"
        )));
    }
    let text = value
        .to_str()
        .map_err(|_| HttpError::bad_request("Upload-Metadata is not ASCII"))?;
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, encoded) = pair.split_once(' ').unwrap_or((pair, ""));
        let bad = || {
            HttpError::bad_request(format!(
                "the Upload-Metadata value of {key:?} is not base64 of UTF-8"
            ))
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| bad())?;
        pairs.insert(key.to_owned(), String::from_utf8(decoded).map_err(|_| bad())?);
    }
    Ok(pairs)
}

/// The target path `Upload-Metadata` names under `path`: a path below the base path,
/// with or without its leading slash, not percent-encoded.
fn target(path: Option<&String>) -> Result<VolumePath, HttpError> {
    let path = path.ok_or_else(|| {
        HttpError::bad_request(
            "name the file to write in Upload-Metadata, under the key path (docs/uploads.md)",
        )
    })?;
    let trimmed = path.trim_start_matches('/');
    let target = VolumePath::parse(trimmed).map_err(|e| {
        HttpError::bad_request(format!("the upload's path {path:?} is not a valid path: {e}"))
    })?;
    if target.is_root() || path.ends_with('/') {
        return Err(HttpError::bad_request(
            "the upload's path names a collection; name a file",
        ));
    }
    Ok(target)
}

/// `Upload-Checksum: {algorithm} {base64}` as a checksum to verify; 400 for an
/// algorithm not in `Tus-Checksum-Algorithm`.
fn checksum(headers: &HeaderMap) -> Result<Option<kubedav_api::checksums::Checksum>, HttpError> {
    let Some(value) = headers.get("upload-checksum") else {
        return Ok(None);
    };
    let bad = || {
        HttpError::bad_request(format!(
            "Upload-Checksum must be one of {CHECKSUMS} and a base64 value"
        ))
    };
    let text = value.to_str().map_err(|_| bad())?;
    let (algorithm, encoded) = text.trim().split_once(' ').ok_or_else(bad)?;
    let algorithm = match algorithm.to_ascii_lowercase().as_str() {
        "sha1" => "SHA1",
        "sha256" => "SHA256",
        "sha512" => "SHA512",
        "md5" => "MD5",
        _ => return Err(bad()),
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| bad())?;
    let expected = kubedav_api::checksums::Algorithm::from_name(algorithm).map_or(0, |a| a.value_len());
    if raw.len() != expected {
        return Err(HttpError::bad_request(format!(
            "Upload-Checksum's {algorithm} value must be {expected} bytes, in base64"
        )));
    }
    Ok(Some(kubedav_api::checksums::Checksum {
        algorithm: algorithm.to_owned(),
        hex: kubedav_api::checksums::to_hex(&raw),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_and_checksums_are_read_as_tus_sends_them() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "upload-metadata",
            HeaderValue::from_static("path L2FsaWNlL2EudHh0,filename YS50eHQ=,empty"),
        );
        let pairs = metadata(&headers).unwrap();
        assert_eq!(pairs["path"], "/alice/a.txt");
        assert_eq!(pairs["filename"], "a.txt");
        assert_eq!(pairs["empty"], "");
        assert_eq!(target(pairs.get("path")).unwrap().as_str(), "alice/a.txt");
        assert!(target(None).is_err());
        assert!(target(Some(&"/a/../../etc".to_owned())).is_err());
        headers.insert(
            "upload-checksum",
            HeaderValue::from_static("sha1 Kq5sNclPz7QV2+lfQIuc6R7oRu0="),
        );
        let sum = checksum(&headers).unwrap().unwrap();
        assert_eq!(sum.algorithm, "SHA1");
        assert_eq!(sum.hex, "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed");
        headers.insert("upload-checksum", HeaderValue::from_static("crc32 AAAA"));
        assert_eq!(checksum(&headers).unwrap_err().status, StatusCode::BAD_REQUEST);
    }
}
