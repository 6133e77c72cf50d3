//! What a path names in the bucket: a file (its object), a collection (a marker or any
//! key below it), or nothing.

use super::keys::Keys;
use crate::s3::{ObjectInfo, S3Client};
use kubedav_api::fileio::FileInfo;
use kubedav_api::path::VolumePath;
use tonic::Status;

/// What a path names.
#[derive(Clone, Debug)]
pub enum Found {
    /// A file: its object.
    File(ObjectInfo),
    /// A collection (a marker, or keys below it).
    Collection,
    /// Nothing.
    Missing,
}

impl Found {
    /// The metadata of what was found at `path` (`None` for [`Found::Missing`]).
    pub fn info(&self, path: &VolumePath) -> Option<FileInfo> {
        match self {
            Found::File(object) => Some(validated_file_info(path, object)),
            Found::Collection => Some(collection_info(path)),
            Found::Missing => None,
        }
    }

    /// As [`Found::info`], with a collection's etag from its members
    /// ([`listed_collection_info`]: one listing request for a collection).
    pub async fn describe(
        &self,
        s3: &S3Client,
        keys: &Keys,
        path: &VolumePath,
    ) -> Result<Option<FileInfo>, Status> {
        match self {
            Found::Collection => {
                let page = s3.list_members(&keys.children(path)).await?;
                Ok(Some(listed_collection_info(path, &page)))
            }
            other => Ok(other.info(path)),
        }
    }

    /// Whether it is a collection.
    pub fn is_collection(&self) -> bool {
        matches!(self, Found::Collection)
    }
}

/// What `path` names: the object first (one HEAD), then anything below it (a listing
/// of one key). The root is always a collection.
pub async fn find(s3: &S3Client, keys: &Keys, path: &VolumePath) -> Result<Found, Status> {
    if path.is_root() {
        return Ok(Found::Collection);
    }
    if let Some(object) = s3.head(&keys.object(path)).await? {
        return Ok(Found::File(object));
    }
    collection(s3, keys, path).await
}

/// [`Found::Collection`] if `path` is one, else [`Found::Missing`] (also for a file).
pub async fn collection(s3: &S3Client, keys: &Keys, path: &VolumePath) -> Result<Found, Status> {
    if path.is_root() {
        return Ok(Found::Collection);
    }
    Ok(match s3.first_under(&keys.children(path)).await? {
        Some(_) => Found::Collection,
        None => Found::Missing,
    })
}

/// FAILED_PRECONDITION unless the parent of `path` is a collection (RFC 4918 9.7.1:
/// 409 Conflict).
pub async fn require_parent(s3: &S3Client, keys: &Keys, path: &VolumePath) -> Result<(), Status> {
    let Some((parent, _)) = path.split_last() else {
        return Ok(());
    };
    match collection(s3, keys, &parent).await? {
        Found::Collection => Ok(()),
        _ => Err(Status::failed_precondition(format!(
            "the parent collection {parent} does not exist"
        ))),
    }
}

/// Whole seconds: HEAD answers carry no finer time than that and listings do, so every
/// time kubedav reports from a bucket is cut to the second and the two always agree.
fn seconds(unix_ns: i64) -> i64 {
    unix_ns - unix_ns.rem_euclid(1_000_000_000)
}

/// Gives a listed file the modification time a client gave it, when its collection's
/// index records one for this very content (`kubedav_api::checksums::recorded_modified`).
pub fn apply_recorded_time(info: &mut FileInfo, properties: &[kubedav_api::pb::fileio::v1::DeadProperty]) {
    if let Some(modified) = kubedav_api::checksums::recorded_modified(properties, &info.etag) {
        info.modified_unix_ns = seconds(modified);
        info.created_unix_ns = info.modified_unix_ns;
    }
}

/// The metadata of the file `path`, stored as `object`.
pub fn file_info(path: &VolumePath, object: &ObjectInfo) -> FileInfo {
    let modified = seconds(object.modified_unix_ns);
    FileInfo {
        path: path.as_str().to_owned(),
        is_collection: false,
        size: object.size,
        modified_unix_ns: modified,
        created_unix_ns: modified,
        etag: object.etag.clone(),
        validator: String::new(),
    }
}

/// [`file_info`] as `Stat` and `Read` answer it, with the object's ETag as its
/// validator: an object's bytes change only with its ETag.
pub fn validated_file_info(path: &VolumePath, object: &ObjectInfo) -> FileInfo {
    FileInfo {
        validator: object.etag.clone(),
        ..file_info(path, object)
    }
}

/// The metadata of the collection `path` whose first page of members is `page`: as
/// [`collection_info`], with an etag that changes whenever a member in that page is
/// added, removed or replaced (a hash of their keys and etags), so a sync client polling
/// the collection sees a change there. Beyond the first 1,000 members a change shows in
/// the members' own etags only.
pub fn listed_collection_info(path: &VolumePath, page: &crate::s3::ListPage) -> FileInfo {
    use md5::Digest;
    let mut hash = md5::Md5::new();
    for object in &page.objects {
        hash.update(object.key.as_bytes());
        hash.update([0]);
        hash.update(object.etag.as_bytes());
        hash.update([0]);
    }
    for prefix in &page.prefixes {
        hash.update(prefix.as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    FileInfo {
        etag: format!("c{}", kubedav_api::checksums::to_hex(&digest[..8])),
        ..collection_info(path)
    }
}

/// The metadata of the collection `path`. A bucket keeps no time for a collection that
/// a listing could give for every member at once (a marker's time comes only from a
/// request of its own, and a collection another tool made has no marker), so every
/// collection reports the epoch, at every depth alike (docs/architecture.md).
pub fn collection_info(path: &VolumePath) -> FileInfo {
    FileInfo {
        path: path.as_str().to_owned(),
        is_collection: true,
        size: 0,
        modified_unix_ns: 0,
        created_unix_ns: 0,
        etag: "c0".to_owned(),
        validator: String::new(),
    }
}
