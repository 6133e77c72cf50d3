//! `{base}/.kubedav/versions{path}`: the versions of the file at `path` (PROPFIND,
//! Depth 1), each at `{base}/.kubedav/versions{path}/{id}`, read by GET and restored by
//! a COPY onto `{path}`. Who may read the file sees and reads its versions; who may
//! write it restores one.

use super::{Asker, Listed, Place, absent, area, multistatus, not_kept, propfind_of};
use crate::Gateway;
use crate::dav::method::DavMethod;
use crate::handlers::guard::{Asking, Change, guard_write};
use crate::http::errors::{HttpError, HttpResult};
use axum::extract::Request;
use axum::response::IntoResponse;
use futures_util::{StreamExt, TryStreamExt};
use http::StatusCode;
use kubedav_api::fileio::{FileInfo, ReadRequest, StatRequest, WriteHeader};
use kubedav_api::keep::{ListVersionsRequest, Version};
use kubedav_api::path::VolumePath;
use tonic::Code;

/// Answers `method` on the versions; `None` for a method they do not take.
pub(super) async fn answer(gateway: &Gateway, request: Request, method: DavMethod) -> Option<HttpResult> {
    Some(match method {
        DavMethod::Propfind => list(gateway, request).await,
        DavMethod::Get => read(gateway, request, false).await,
        DavMethod::Head => read(gateway, request, true).await,
        DavMethod::Copy => restore(gateway, request).await,
        _ => return None,
    })
}

/// What a request names.
enum Named {
    /// The versions of this file.
    File(VolumePath),
    /// One version of this file.
    Version(VolumePath, String),
}

/// The path below the versions' area that `request` names.
fn below(gateway: &Gateway, request: &Request) -> Result<VolumePath, HttpError> {
    Ok(area(gateway, Place::Versions).decode(request.uri().path())?.path)
}

/// What `below` names, among what the asker may read: a last segment shaped as a
/// version id beneath a file names a version, anything else a file; 404 for a path
/// that is no file the asker may read.
async fn named(gateway: &Gateway, asker: &Asker, below: VolumePath) -> Result<Named, HttpError> {
    if let Some((file, last)) = below.split_last()
        && is_version_id(last)
        && asker.reads(&file)
        && is_file(gateway, &file).await?
    {
        return Ok(Named::Version(file, last.to_owned()));
    }
    if asker.reads(&below) && is_file(gateway, &below).await? {
        return Ok(Named::File(below));
    }
    Err(absent(&format!("a file {below} with versions")))
}

/// Whether `name` has the shape of a version id: `{20 digits}-{hex}`.
fn is_version_id(name: &str) -> bool {
    name.split_once('-').is_some_and(|(time, random)| {
        time.len() == 20
            && time.bytes().all(|b| b.is_ascii_digit())
            && !random.is_empty()
            && random.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// Whether a file is at `path`.
async fn is_file(gateway: &Gateway, path: &VolumePath) -> Result<bool, HttpError> {
    match gateway
        .fileio
        .stat(StatRequest {
            path: path.as_str().to_owned(),
        })
        .await
    {
        Ok(info) => Ok(!info.is_collection),
        Err(status) if status.code() == Code::NotFound => Ok(false),
        Err(status) => Err(status.into()),
    }
}

/// The versions of `file`, oldest first.
async fn versions_of(gateway: &Gateway, file: &VolumePath) -> Result<Vec<Version>, HttpError> {
    let keep = gateway.keep.as_ref().expect("routed only with a keep port");
    Ok(keep
        .list_versions(ListVersionsRequest {
            path: file.as_str().to_owned(),
        })
        .await
        .map_err(|status| match status.code() {
            Code::FailedPrecondition => not_kept(&status, "versions"),
            _ => status.into(),
        })?
        .versions)
}

/// PROPFIND: the versions of a file (the collection, with them at Depth 1), or one
/// version, each with its size and the time it was replaced (`getlastmodified`).
async fn list(gateway: &Gateway, request: Request) -> HttpResult {
    let asker = Asker::of(gateway, &request);
    let below = below(gateway, &request)?;
    let (propfind, members) = propfind_of(request).await?;
    let named = named(gateway, &asker, below).await?;
    let base = area(gateway, Place::Versions);
    let (file, only) = match named {
        Named::File(file) => (file, None),
        Named::Version(file, id) => (file, Some(id)),
    };
    let versions = versions_of(gateway, &file).await?;
    let name = file.name().to_owned();
    let listed_version = |version: &Version| Listed {
        href: file
            .join(&version.id)
            .map_or_else(|_| String::new(), |path| base.href(&path, false)),
        info: FileInfo {
            path: version.id.clone(),
            size: version.bytes,
            modified_unix_ns: version.replaced_unix_ns,
            created_unix_ns: version.replaced_unix_ns,
            etag: version.id.clone(),
            ..Default::default()
        },
        name: name.clone(),
        properties: Vec::new(),
    };
    let listed = match only {
        Some(id) => {
            let version = versions
                .iter()
                .find(|version| version.id == id)
                .ok_or_else(|| absent(&format!("version {id} of {file}")))?;
            vec![listed_version(version)]
        }
        None => {
            let mut listed = vec![Listed {
                href: base.href(&file, true),
                info: FileInfo {
                    is_collection: true,
                    etag: versions.last().map_or_else(String::new, |v| v.id.clone()),
                    ..Default::default()
                },
                name: name.clone(),
                properties: Vec::new(),
            }];
            if members {
                listed.extend(versions.iter().map(listed_version));
            }
            listed
        }
    };
    Ok(multistatus(&propfind, &listed))
}

/// GET or HEAD of a version: its bytes, as a GET of the file serves them.
async fn read(gateway: &Gateway, request: Request, head: bool) -> HttpResult {
    let asker = Asker::of(gateway, &request);
    let below = below(gateway, &request)?;
    let (parts, _) = request.into_parts();
    match named(gateway, &asker, below).await? {
        Named::Version(file, id) => {
            super::super::get::version(gateway, &file, &id, &parts.headers, head).await
        }
        Named::File(file) => Err(HttpError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("list the versions of {file} with PROPFIND, then GET one of them"),
        )),
    }
}

/// COPY of a version onto its own file: the version becomes the content, and the
/// content it replaces a version (204). `Overwrite: F` gives 412, as the file exists.
async fn restore(gateway: &Gateway, request: Request) -> HttpResult {
    let asker = Asker::of(gateway, &request);
    let below = below(gateway, &request)?;
    let (parts, _) = request.into_parts();
    let headers = &parts.headers;
    let Named::Version(file, id) = named(gateway, &asker, below).await? else {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            "COPY one version onto its file to restore it, not the list of versions",
        ));
    };
    let destination = crate::dav::headers::destination(&gateway.base_path(), headers)?;
    if destination.path != file {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            format!(
                "a version is restored onto its own file: COPY it to {}",
                gateway.base_path().href(&file, false)
            ),
        ));
    }
    if !crate::dav::headers::overwrite(headers)? {
        return Err(HttpError::new(
            StatusCode::PRECONDITION_FAILED,
            format!("{file} exists and Overwrite is F"),
        ));
    }
    asker.decide(DavMethod::Put, &file, None)?;
    let asking = Asking {
        headers,
        principal: asker.principal.clone(),
        viewer: asker.viewer.as_ref(),
    };
    let targets = crate::dav::locking::member(&file, false);
    guard_write(gateway, asking, &file, Change::of(targets)).await?;
    // A write through the files' port, as a PUT of the version's bytes: held to the
    // quota, seen by every gateway's kept copies, and the content it replaces kept as a
    // version by the write itself.
    let missing = || absent(&format!("version {id} of {file}"));
    let reply = gateway
        .fileio
        .read(ReadRequest {
            path: file.as_str().to_owned(),
            ranges: Vec::new(),
            version: id.clone(),
        })
        .await
        .map_err(|status| match status.code() {
            Code::NotFound => missing(),
            _ => HttpError::from(status),
        })?;
    let size = reply.header.info.as_ref().map(|info| info.size);
    // Fused: the remote write polls its body once more after the end.
    let body = reply.chunks.map_ok(|chunk| chunk.data).fuse().boxed();
    let header = WriteHeader {
        path: file.as_str().to_owned(),
        expected_size: size,
        ..WriteHeader::default()
    };
    let written = gateway.fileio.write(header, body).await?;
    Ok(if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::NO_CONTENT
    }
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ids_have_their_shape() {
        assert!(is_version_id("01764329280123456789-0a1b2c3d"));
        for not in [
            "report.txt",
            "0176432928012345678-0a1b2c3d",
            "01764329280123456789-",
            "01764329280123456789-xyz",
        ] {
            assert!(!is_version_id(not), "{not}");
        }
    }
}
