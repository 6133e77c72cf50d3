//! MKCOL, DELETE, COPY and MOVE in a bucket. S3 has no rename and no transaction, so
//! every change that moves data copies first and deletes after: a MOVE cut short by a
//! crash leaves the whole source and part of the destination, never neither
//! (docs/architecture.md lists what each crash leaves).

use super::find::{Found, collection_info, find, require_parent};
use super::kept::BucketKeeper;
use super::keys::Keys;
use super::properties;
use crate::left_out::LeftOut;
use crate::s3::S3Client;
use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::fileio::{Depth, FileInfo, TransferResponse};
use kubedav_api::path::VolumePath;
use kubedav_api::pb::fileio::v1::Failure;
use tonic::Status;

/// How many S3 requests a tree operation keeps in flight.
const CONCURRENT_REQUESTS: usize = 16;

/// Creates the collection `path`: its marker object.
pub async fn mkdir(s3: &S3Client, keys: &Keys, path: &VolumePath) -> Result<FileInfo, Status> {
    if path.is_root() {
        return Err(Status::already_exists("the root collection already exists"));
    }
    let (parent, existing) = tokio::join!(require_parent(s3, keys, path), find(s3, keys, path));
    parent?;
    if !matches!(existing?, Found::Missing) {
        return Err(Status::already_exists(format!("{path} exists")));
    }
    match s3.put_if(&keys.children(path), Bytes::new(), Some("")).await {
        Ok(_) => {}
        Err(status) if status.code() == tonic::Code::Aborted => {
            return Err(Status::already_exists(format!("{path} exists")));
        }
        Err(status) => return Err(status),
    }
    Ok(collection_info(path))
}

/// Deletes `path`: a file's object, or every key of a collection and its marker last;
/// then its dead properties. The members that could not be deleted are reported.
pub async fn delete(
    s3: &S3Client,
    keys: &Keys,
    path: &VolumePath,
    if_match: Option<&str>,
    keeper: Option<(&BucketKeeper, &str)>,
) -> Result<(Vec<Failure>, String), Status> {
    if path.is_root() {
        return Err(Status::permission_denied("the root collection cannot be deleted"));
    }
    let found = find(s3, keys, path).await?;
    let info = found
        .describe(s3, keys, path)
        .await?
        .ok_or_else(|| Status::not_found(format!("{path} does not exist")))?;
    if let Some(wanted) = if_match
        && wanted != info.etag
    {
        return Err(Status::aborted(format!(
            "{path} changed: its etag is no longer {wanted}"
        )));
    }
    if let Some((keeper, by)) = keeper
        && let Some((id, failures)) = keeper.trash(path, &found, by).await?
    {
        return Ok((failures, id));
    }
    let failures = remove(s3, keys, path, &found).await?;
    if failures.is_empty() {
        let (parent, name) = Keys::index_entry(path, found.is_collection());
        properties::remove_entry(s3, keys, &parent, &name).await?;
        if let Some((keeper, _)) = keeper {
            keeper.forget_versions(path).await?;
        }
    }
    Ok((failures, String::new()))
}

/// Removes what `found` says `path` is, without touching its parent's property index.
pub(super) async fn remove(
    s3: &S3Client,
    keys: &Keys,
    path: &VolumePath,
    found: &Found,
) -> Result<Vec<Failure>, Status> {
    if !found.is_collection() {
        s3.delete(&keys.object(path)).await?;
        return Ok(Vec::new());
    }
    let children = keys.children(path);
    // The members, then their property indexes, then the marker: a DELETE cut short
    // leaves a collection (its marker) with what was not deleted yet.
    let mut failures = delete_under(s3, keys, &children).await?;
    if failures.is_empty() {
        failures = delete_under(s3, keys, &keys.indexes_below(path)).await?;
    }
    if failures.is_empty() {
        s3.delete(&children).await?;
    }
    Ok(failures)
}

/// Deletes every key below `prefix` but `prefix` itself (a marker); the keys that could
/// not be deleted.
///
/// The objects go first, page by page, then the markers of the collections, the deepest
/// first, one depth at a time. An S3 server that keeps a bucket as directories
/// (versitygw's posix backend, MinIO's fs mode) removes a directory with its marker only
/// when it is empty: a marker deleted while a member's deletion was still in flight left
/// its directory behind, and a file copied onto the name next was refused with 409
/// ExistingObjectIsDirectory (seen once in the conformance suite under load).
pub(super) async fn delete_under(s3: &S3Client, keys: &Keys, prefix: &str) -> Result<Vec<Failure>, Status> {
    let mut failures = Vec::new();
    let mut markers = Vec::new();
    let mut from = None;
    loop {
        let page = s3.list_all(prefix, from.as_deref()).await?;
        let (found, objects): (Vec<String>, Vec<String>) = page
            .objects
            .into_iter()
            .map(|object| object.key)
            .filter(|key| key != prefix)
            .partition(|key| key.ends_with('/'));
        markers.extend(found);
        failures.extend(delete_objects(s3, keys, objects).await);
        match page.next {
            Some(next) => from = Some(next),
            None => break,
        }
    }
    failures.extend(delete_markers(s3, keys, markers).await);
    Ok(failures)
}

/// Deletes the objects `keys_to_delete` ([`CONCURRENT_REQUESTS`] at a time); the failures.
pub(super) async fn delete_objects(s3: &S3Client, keys: &Keys, keys_to_delete: Vec<String>) -> Vec<Failure> {
    for_each(
        keys_to_delete.into_iter(),
        |key| async move { s3.delete(&key).await.map_err(|s| (key, s)) },
        keys,
    )
    .await
}

/// Deletes the collection markers `markers`, the deepest first, one depth at a time
/// (see [`delete_under`]); the failures.
pub(super) async fn delete_markers(s3: &S3Client, keys: &Keys, mut markers: Vec<String>) -> Vec<Failure> {
    let mut failures = Vec::new();
    let depth = |key: &String| key.matches('/').count();
    markers.sort_by_key(|key| std::cmp::Reverse(depth(key)));
    for level in markers.chunk_by(|a, b| depth(a) == depth(b)) {
        failures.extend(delete_objects(s3, keys, level.to_vec()).await);
    }
    failures
}

/// Runs `request` for every key, [`CONCURRENT_REQUESTS`] at a time; the failures.
async fn for_each<F, Fut>(items: impl Iterator<Item = String>, request: F, keys: &Keys) -> Vec<Failure>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), (String, Status)>>,
{
    futures_util::stream::iter(items.map(request))
        .buffer_unordered(CONCURRENT_REQUESTS)
        .filter_map(|result| async move { result.err() })
        .map(|(key, status)| Failure {
            path: key
                .strip_prefix(keys.prefix())
                .unwrap_or(&key)
                .trim_end_matches('/')
                .to_owned(),
            code: status.code() as i32,
            message: status.message().to_owned(),
        })
        .collect()
        .await
}

/// COPY: `source` to `destination`, a collection with all its members at depth
/// infinity; dead properties follow. An existing destination is deleted first
/// (RFC 4918 9.8.4), but only with `overwrite`.
pub async fn copy(
    s3: &S3Client,
    keys: &Keys,
    source: &VolumePath,
    destination: &VolumePath,
    depth: Depth,
    (overwrite, keeper): (bool, Option<(&BucketKeeper, &str)>),
    left_out: &LeftOut,
) -> Result<TransferResponse, Status> {
    crate::transfer::refuse_overlap(source, destination)?;
    if depth == Depth::One {
        return Err(Status::invalid_argument("COPY takes Depth 0 or infinity, not 1"));
    }
    let (found, existed) = prepare(s3, keys, source, destination, (overwrite, keeper)).await?;
    let members = (depth == Depth::Infinity).then_some(left_out);
    let failures = duplicate(s3, keys, source, destination, &found, members).await?;
    Ok(TransferResponse {
        created: !existed,
        failures,
    })
}

/// MOVE: a copy of everything, then the deletion of the source, only once every member
/// was copied.
pub async fn rename(
    s3: &S3Client,
    keys: &Keys,
    source: &VolumePath,
    destination: &VolumePath,
    (overwrite, keeper): (bool, Option<(&BucketKeeper, &str)>),
) -> Result<TransferResponse, Status> {
    crate::transfer::refuse_overlap(source, destination)?;
    let (found, existed) = prepare(s3, keys, source, destination, (overwrite, keeper)).await?;
    let failures = duplicate(s3, keys, source, destination, &found, Some(&LeftOut::default())).await?;
    if !failures.is_empty() {
        return Ok(TransferResponse {
            created: false,
            failures,
        });
    }
    let failures = remove(s3, keys, source, &found).await?;
    if failures.is_empty() {
        let (parent, name) = Keys::index_entry(source, found.is_collection());
        properties::remove_entry(s3, keys, &parent, &name).await?;
        if let Some((keeper, _)) = keeper {
            keeper.move_versions(source, destination).await?;
        }
    }
    Ok(TransferResponse {
        created: !existed,
        failures,
    })
}

/// The source (which must exist) and whether the destination existed (deleted now,
/// which only `overwrite` allows). FAILED_PRECONDITION without the destination's parent.
async fn prepare(
    s3: &S3Client,
    keys: &Keys,
    source: &VolumePath,
    destination: &VolumePath,
    (overwrite, keeper): (bool, Option<(&BucketKeeper, &str)>),
) -> Result<(Found, bool), Status> {
    let (found, parent, existing) = tokio::join!(
        find(s3, keys, source),
        require_parent(s3, keys, destination),
        find(s3, keys, destination)
    );
    let found = found?;
    if matches!(found, Found::Missing) {
        return Err(Status::not_found(format!("{source} does not exist")));
    }
    parent?;
    let existing = existing?;
    if matches!(existing, Found::Missing) {
        return Ok((found, false));
    }
    if !overwrite {
        return Err(Status::already_exists(format!(
            "{destination} exists and Overwrite is F"
        )));
    }
    // What is kept of the replaced: a file as a version, a collection in the trash.
    if let Some((keeper, by)) = keeper {
        keeper
            .dispose_replaced(destination, &existing, found.is_collection(), by)
            .await?;
        return Ok((found, true));
    }
    // A file over a file is replaced by the copy itself; anything else goes first.
    if found.is_collection() || existing.is_collection() {
        let failures = remove(s3, keys, destination, &existing).await?;
        if let Some(failure) = failures.first() {
            return Err(Status::new(
                tonic::Code::from_i32(failure.code),
                format!("{destination} could not be replaced: {}", failure.message),
            ));
        }
    }
    // The copy's own properties replace those of a destination of its kind (same entry
    // name); one of the other kind has its entry under the other name, which goes now.
    if existing.is_collection() != found.is_collection() {
        let (parent, name) = Keys::index_entry(destination, existing.is_collection());
        properties::remove_entry(s3, keys, &parent, &name).await?;
    }
    Ok((found, true))
}

/// Copies `source` (as `found`) to `destination` inside the bucket, a collection's
/// members too when `members` says which to leave out, and the source's dead
/// properties; the members that failed.
async fn duplicate(
    s3: &S3Client,
    keys: &Keys,
    source: &VolumePath,
    destination: &VolumePath,
    found: &Found,
    members: Option<&LeftOut>,
) -> Result<Vec<Failure>, Status> {
    let mut failures = Vec::new();
    if found.is_collection() {
        let (from, to) = (keys.children(source), keys.children(destination));
        s3.put(&to, Bytes::new()).await?;
        if let Some(left_out) = members {
            failures = copy_members(s3, keys, &from, &to, left_out).await?;
            if failures.is_empty() {
                let (from, to) = (keys.indexes_below(source), keys.indexes_below(destination));
                failures = copy_members(s3, keys, &from, &to, left_out).await?;
            }
            if failures.is_empty() {
                forget_left_out(s3, keys, destination, left_out).await?;
            }
        }
    } else {
        s3.copy(&keys.object(source), &keys.object(destination)).await?;
    }
    let (from_parent, from_name) = Keys::index_entry(source, found.is_collection());
    let (to_parent, to_name) = Keys::index_entry(destination, found.is_collection());
    let own = properties::load(s3, keys, &from_parent).await?.get(&from_name);
    properties::put_entry(s3, keys, &to_parent, &to_name, own).await?;
    Ok(failures)
}

/// Drops from the copy's property indexes the entries of the members left out: the
/// indexes were copied whole, and a left-out member's dead properties must not reach
/// the copy (where a member of the same name made later would show them).
async fn forget_left_out(
    s3: &S3Client,
    keys: &Keys,
    destination: &VolumePath,
    left_out: &LeftOut,
) -> Result<(), Status> {
    for relative in left_out.paths() {
        let copied = VolumePath::from_segments(destination.segments().chain(relative.split('/')))
            .map_err(Status::from)?;
        for is_collection in [true, false] {
            let (parent, name) = Keys::index_entry(&copied, is_collection);
            properties::remove_entry(s3, keys, &parent, &name).await?;
        }
    }
    Ok(())
}

/// Copies every key below `from` to the same place below `to`, but those `left_out`
/// covers: a collection's members, or its property indexes (their entries are names,
/// valid wherever the collection goes); the keys that failed.
pub(super) async fn copy_members(
    s3: &S3Client,
    keys: &Keys,
    from: &str,
    to: &str,
    left_out: &LeftOut,
) -> Result<Vec<Failure>, Status> {
    let mut failures = Vec::new();
    let mut token = None;
    loop {
        let page = s3.list_all(from, token.as_deref()).await?;
        let copies: Vec<String> = page
            .objects
            .into_iter()
            .map(|object| object.key)
            .filter(|key| key != from && !left_out.covers(&key[from.len()..]))
            .collect();
        let copy_one = |key: String| async move {
            let target = format!("{to}{}", &key[from.len()..]);
            // A marker is made anew: some servers refuse to copy one.
            let copied = if key.ends_with('/') {
                s3.put(&target, Bytes::new()).await
            } else {
                s3.copy(&key, &target).await
            };
            copied.map(|_| ()).map_err(|status| (key, status))
        };
        failures.extend(for_each(copies.into_iter(), copy_one, keys).await);
        match page.next {
            Some(next) => token = Some(next),
            None => return Ok(failures),
        }
    }
}
