//! Versions in a bucket: the object about to be replaced is copied to
//! `{prefix}.kubedav/versions/{path}/.kubedav/{id}` first (one CopyObject), and the
//! oldest past `--versions-max` go; a MOVE takes them along (a copy of each, then the
//! deletion). A version keeps the bytes and the modification time of the replaced
//! content; its dead properties stay with the file.

use super::{BucketKeeper, name_after};
use crate::keep::{Version, made_at};
use crate::objects::find::{Found, find, require_parent};
use crate::objects::tree::{copy_members, delete_objects, delete_under};
use crate::s3::ObjectInfo;
use kubedav_api::fileio::ReadReply;
use kubedav_api::path::VolumePath;
use kubedav_api::pb::fileio::v1::ByteRangeSpec;
use tonic::Status;

impl BucketKeeper {
    /// Keeps `object`, the file at `path` about to be replaced, as a version (when
    /// versions are kept), then drops the oldest past the most kept.
    pub async fn keep_version(&self, path: &VolumePath, object: &ObjectInfo) -> Result<(), Status> {
        if !self.keeping.versions() {
            return Ok(());
        }
        self.copy_version(path, object).await?;
        self.prune_versions(path).await
    }

    /// Copies `object`, the file at `path`, into its versions.
    async fn copy_version(&self, path: &VolumePath, object: &ObjectInfo) -> Result<(), Status> {
        let (id, _) = self.keeping.new_name(8);
        match self
            .s3
            .copy(&object.key, &format!("{}{id}", self.versions(path)))
            .await
        {
            Ok(_) => Ok(()),
            // Replaced or removed meanwhile: nothing of it to keep.
            Err(status) if status.code() == tonic::Code::NotFound => Ok(()),
            Err(status) => Err(status),
        }
    }

    /// Drops the oldest versions of `path` past the most kept.
    async fn prune_versions(&self, path: &VolumePath) -> Result<(), Status> {
        let folder = self.versions(path);
        let versions = self.list_versions(path).await?;
        let excess = versions.len().saturating_sub(self.keeping.versions_max as usize);
        if excess > 0 {
            let old = versions[..excess]
                .iter()
                .map(|v| format!("{folder}{}", v.id))
                .collect();
            let failures = delete_objects(&self.s3, &self.keys, old).await;
            crate::metrics::purged("count", (excess - failures.len()) as u64);
        }
        Ok(())
    }

    /// The versions of the file at `path`, oldest first.
    pub async fn list_versions(&self, path: &VolumePath) -> Result<Vec<Version>, Status> {
        let folder = self.versions(path);
        let mut versions = Vec::new();
        let mut from = None;
        loop {
            let page = self.s3.list(&folder, from.as_deref()).await?;
            versions.extend(page.objects.iter().filter_map(|object| {
                let id = name_after(&object.key, &folder)?;
                Some(Version {
                    id: id.to_owned(),
                    replaced_unix_ns: made_at(id)?,
                    bytes: object.size,
                })
            }));
            match page.next {
                Some(next) => from = Some(next),
                None => break,
            }
        }
        versions.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(versions)
    }

    /// A read of version `id` of the file at `path`; NOT_FOUND when there is none.
    pub async fn read_version(
        &self,
        path: &VolumePath,
        id: &str,
        ranges: &[ByteRangeSpec],
    ) -> Result<ReadReply, Status> {
        let missing = || Status::not_found(format!("{path} has no version {id}"));
        if made_at(id).is_none() {
            return Err(missing());
        }
        crate::objects::read::read_object(&self.s3, &format!("{}{id}", self.versions(path)), path, ranges)
            .await?
            .ok_or_else(missing)
    }

    /// Makes version `id` the content of `path` (its parent must exist), keeping the
    /// content it replaces as a version; whether `path` was free.
    pub async fn restore_version(&self, path: &VolumePath, id: &str) -> Result<bool, Status> {
        let key = format!("{}{id}", self.versions(path));
        if made_at(id).is_none() || self.s3.head(&key).await?.is_none() {
            return Err(Status::not_found(format!("{path} has no version {id}")));
        }
        require_parent(&self.s3, &self.keys, path).await?;
        // The current content is kept before it is replaced, and the oldest versions
        // dropped only after: the one restored may be the oldest.
        let created = match find(&self.s3, &self.keys, path).await? {
            Found::File(current) => {
                self.copy_version(path, &current).await?;
                false
            }
            Found::Collection => {
                return Err(Status::failed_precondition(format!(
                    "{path} is a collection now; a version of a file cannot replace it"
                )));
            }
            Found::Missing => true,
        };
        self.s3.copy(&key, &self.keys.object(path)).await?;
        self.prune_versions(path).await?;
        Ok(created)
    }

    /// Moves the versions of `from` and of everything beneath it to `to`, after `from`
    /// was moved there; merged with those `to` has.
    pub async fn move_versions(&self, from: &VolumePath, to: &VolumePath) -> Result<(), Status> {
        let (source, target) = (self.mirror(from), self.mirror(to));
        if self.s3.first_under(&source).await?.is_none() {
            return Ok(());
        }
        let left_out = crate::left_out::LeftOut::default();
        let failures = copy_members(&self.s3, &self.keys, &source, &target, &left_out).await?;
        if let Some(failure) = failures.first() {
            return Err(Status::unavailable(format!(
                "the versions of {from} could not all follow it to {to}: {}",
                failure.message
            )));
        }
        delete_under(&self.s3, &self.keys, &source).await?;
        Ok(())
    }

    /// Removes the versions of `path` and of everything beneath it (what was there went
    /// without the trash: nothing that takes the name later inherits them).
    pub async fn forget_versions(&self, path: &VolumePath) -> Result<(), Status> {
        delete_under(&self.s3, &self.keys, &self.mirror(path)).await?;
        Ok(())
    }
}
