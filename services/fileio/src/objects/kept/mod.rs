//! Trash and versions in a bucket (docs/trash-and-versions.md, "Operations on S3").
//! S3 has no rename: what is kept is copied into kubedav's area of the prefix
//! (`{prefix}.kubedav/`, the same names as on a volume) with server-side copies, and
//! the original deleted after. The order keeps a tree whole in one place or the other:
//!
//! * **Trash** ([`trash`]): every key of the resource, its property indexes and its
//!   versions are copied into `trash/{root}/.kubedav/{id}/` (`entry`, `props/`,
//!   `versions/`, its own properties in `properties`); then a journal of the copied keys
//!   and their ETags, then `item.json`, and only then are the originals deleted. A crash
//!   before `item.json` leaves the tree in place and a partial copy, removed by the
//!   retention an hour later; a crash after leaves a journal that the retention
//!   finishes, deleting only the keys whose ETags it copied.
//! * **Versions** ([`versions`]): the object about to be replaced is copied to
//!   `versions/{path}/.kubedav/{id}` just before the new one is written.
//! * **Retention** ([`retain`]) runs on each replica, and a purge claims its item with
//!   an object written only if absent, so each item is purged once.

pub mod port;
pub mod retain;
pub mod trash;
pub mod versions;

use super::keys::Keys;
use crate::keep::{Keeping, mirror, trash_folder, versions_folder};
use crate::s3::S3Client;
use kubedav_api::path::{RESERVED_AREA, VolumePath};
use std::sync::Arc;

/// What a bucket keeps, and where.
#[derive(Clone)]
pub struct BucketKeeper {
    /// The bucket.
    pub s3: S3Client,
    /// The served prefix's keys.
    pub keys: Keys,
    /// What is kept.
    pub keeping: Arc<Keeping>,
}

impl std::fmt::Debug for BucketKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketKeeper")
            .field("keys", &self.keys)
            .field("keeping", &self.keeping)
            .finish_non_exhaustive()
    }
}

impl BucketKeeper {
    /// kubedav's area of the prefix: `{prefix}.kubedav/`.
    fn area(&self) -> String {
        format!("{}{RESERVED_AREA}/", self.keys.prefix())
    }

    /// The prefix of the trash items of quota root `root`.
    fn items(&self, root: &VolumePath) -> String {
        format!("{}{}/", self.area(), trash_folder(root))
    }

    /// The prefix of trash item `id` of `root`.
    fn item(&self, root: &VolumePath, id: &str) -> String {
        format!("{}{id}/", self.items(root))
    }

    /// The prefix of the versions of the file at `path`.
    fn versions(&self, path: &VolumePath) -> String {
        format!("{}{}/", self.area(), versions_folder(path))
    }

    /// The prefix of the versions of `path` and of everything beneath it.
    fn mirror(&self, path: &VolumePath) -> String {
        format!("{}{}/", self.area(), mirror(path))
    }
}

/// The name of a kept thing: what follows `prefix` in `key`, up to the next `/`.
fn name_after<'k>(key: &'k str, prefix: &str) -> Option<&'k str> {
    key.strip_prefix(prefix)?
        .split('/')
        .next()
        .filter(|name| !name.is_empty())
}
