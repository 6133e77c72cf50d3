//! PUT: streaming atomic upload (RFC 9110 9.3.4, RFC 4918 9.7).

use super::guard::{Asking, Change, guard_write};
use crate::Gateway;
use crate::dav::sync::{self, UploadChecks};
use crate::http::conditional::{single_if_match, validator_headers};
use crate::http::errors::{HttpError, HttpResult};
use crate::http::paths::request_path;
use axum::extract::Request;
use axum::response::IntoResponse;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, StatusCode, header};
use kubedav_api::checksums::Algorithm;
use kubedav_api::fileio::WriteHeader;
use tonic::{Code, Status};

/// 201 for a new file, 204 for a replaced one; 409 when the parent collection is
/// missing; 412 when a precondition fails; 413 past the body limit; 400 when the body
/// does not have the checksum `OC-Checksum` or `Content-Digest` names (nothing is
/// written). `X-OC-Mtime` sets the file's modification time ([`sync`]).
pub(super) async fn put(gateway: &Gateway, request: Request) -> HttpResult {
    let target = request_path(&gateway.base_path(), &request)?;
    if target.path.is_root() || target.trailing_slash {
        return Err(HttpError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "PUT cannot write a collection; use MKCOL to create one",
        ));
    }
    crate::dav::quirks::refuse_macos_metadata(gateway.config.refuse_macos_metadata, &target.path)?;
    let headers = request.headers();
    if headers.contains_key(header::CONTENT_RANGE) {
        return Err(HttpError::bad_request(
            "PUT with Content-Range (partial update) is not supported",
        ));
    }
    // Finder streams its uploads chunked and says their length in X-Expected-Entity-Length
    // (docs/clients.md): taken as the declared size, so a quota or a full volume refuses
    // the upload before a byte is stored, and a body of another length is refused.
    // An upload in many requests landing here (crate::uploads): its length is declared,
    // its bytes are fileio's, and the body limit was the limit of each of its requests.
    let landing = request.extensions().get::<crate::uploads::Landing>().cloned();
    let length = headers
        .get(header::CONTENT_LENGTH)
        .or_else(|| headers.get("x-expected-entity-length"));
    let declared = match length {
        _ if landing.is_some() => landing.as_ref().map(|landing| landing.length),
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| {
                    HttpError::bad_request("Content-Length (or X-Expected-Entity-Length) is not a number")
                })?,
        ),
        None => None,
    };
    let limit = gateway.config.max_body_bytes.filter(|_| landing.is_none());
    if let (Some(declared), Some(limit)) = (declared, limit)
        && declared > limit
    {
        return Err(too_large(limit));
    }
    let checks = UploadChecks::of(headers)?;
    let modified = sync::oc_mtime(headers)?;
    let must_still_be = guard_write(gateway, Asking::of(&request), &target.path, Change::create()).await?;
    let wanted_digest = sync::wanted_digest(headers, sync::WANT_REPR_DIGEST);
    let write = WriteHeader {
        path: target.path.as_str().to_owned(),
        expected_size: declared,
        if_match: single_if_match(headers).or(must_still_be),
        create_only: headers
            .get(header::IF_NONE_MATCH)
            .is_some_and(|v| v.as_bytes() == b"*"),
        modified_unix_ns: modified,
        checksums: checks.expected.clone(),
        // A landing computes only what it checks and what the operator asks of every
        // write: its bytes arrived before, and any other algorithm would read them all
        // again (the SHA-1 a Nextcloud client checks is carried over its chunks).
        compute: checks
            .compute
            .iter()
            .copied()
            .filter(|_| landing.is_none())
            .chain(gateway.config.upload_digests.iter().map(|a| a.name()))
            .map(str::to_owned)
            .collect(),
        // Through a public link: an anonymous writer never purges the owner's trash.
        no_purge: crate::request::Principal::of(&request).kind() == "link",
        from_upload: landing.map(|landing| kubedav_api::fileio::FromUpload {
            id: landing.id,
            owner: landing.owner,
        }),
        // Named by the port that writes the body into fileio's incoming area, if any.
        incoming: String::new(),
    };
    let body = limited_body(request.into_body(), limit);
    match gateway.fileio.write(write, body).await {
        Ok(reply) => {
            let status = if reply.created {
                StatusCode::CREATED
            } else {
                StatusCode::NO_CONTENT
            };
            let mut response = status.into_response();
            let headers = response.headers_mut();
            if let Some(info) = &reply.info {
                validator_headers(headers, &info.etag, info.modified_unix_ns);
                // rclone and the ownCloud clients set the time again with PROPPATCH
                // unless told it was kept; a backend that cannot keep it does not say so.
                if modified.is_some_and(|m| m == info.modified_unix_ns) {
                    headers.insert("x-oc-mtime", HeaderValue::from_static("accepted"));
                }
            }
            if checks.owncloud
                && let Some(value) = sync::owncloud_header(&reply.checksums)
            {
                insert(headers, "oc-checksum", value);
            }
            if checks.digest {
                let algorithms: Vec<Algorithm> = match wanted_digest {
                    Some(algorithm) => vec![algorithm],
                    None => Algorithm::ALL.to_vec(),
                };
                if let Some(value) = sync::repr_digest(&reply.checksums, &algorithms) {
                    insert(headers, "repr-digest", value);
                }
            }
            Ok(response)
        }
        Err(status) => Err(match status.code() {
            Code::OutOfRange => too_large(limit.unwrap_or(0)),
            Code::AlreadyExists | Code::Aborted => HttpError::new(
                StatusCode::PRECONDITION_FAILED,
                format!("{}; nothing was written", status.message()),
            ),
            Code::FailedPrecondition => HttpError::new(
                StatusCode::CONFLICT,
                format!(
                    "{}; create the parent collection with MKCOL first",
                    status.message()
                ),
            ),
            _ => status.into(),
        }),
    }
}

fn insert(headers: &mut http::HeaderMap, name: &'static str, value: String) {
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert(name, value);
    }
}

fn too_large(limit: u64) -> HttpError {
    HttpError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is larger than this server's limit of {limit} bytes"),
    )
}

/// The request body as a stream of chunks that fails with OUT_OF_RANGE past `limit`
/// bytes and with CANCELLED when the client's body breaks off.
pub(crate) fn limited_body(body: axum::body::Body, limit: Option<u64>) -> kubedav_api::BoxStream<Bytes> {
    let mut seen: u64 = 0;
    body.into_data_stream()
        .map(move |chunk| {
            let chunk = chunk.map_err(|e| Status::cancelled(format!("the request body broke off: {e}")))?;
            seen += chunk.len() as u64;
            match limit {
                Some(limit) if seen > limit => {
                    Err(Status::out_of_range("the body exceeds the server's limit"))
                }
                _ => Ok(chunk),
            }
        })
        .boxed()
}
