//! The trash in a bucket: `{prefix}.kubedav/trash/{root}/.kubedav/{id}/` holds `entry`
//! (the file's object, or the collection's keys below `entry/`), `props/` (a
//! collection's property indexes), `properties` (the resource's own dead properties),
//! `versions/` (the mirror of its versions), then `journal.json` and `item.json`.

use super::{BucketKeeper, name_after};
use crate::keep::{ItemRecord, TrashItem, made_at};
use crate::objects::find::{Found, find, require_parent};
use crate::objects::keys::Keys;
use crate::objects::properties::{self, Index};
use crate::objects::tree::{copy_members, delete_markers, delete_objects, delete_under};
use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::path::{RESERVED_AREA, VolumePath};
use kubedav_api::pb::fileio::v1::Failure;
use serde::{Deserialize, Serialize};
use tonic::Status;

/// The record of an item, written last: an item without one is not whole.
pub(super) const RECORD: &str = "item.json";
/// The keys an item was copied from, while they are being deleted.
pub(super) const JOURNAL: &str = "journal.json";
/// Written only if absent by the replica that purges the item.
const CLAIM: &str = "purging";
/// The file, or the collection's keys below `entry/`.
const ENTRY: &str = "entry";
/// A collection's property indexes.
const PROPS: &str = "props/";
/// The resource's own dead properties.
const PROPERTIES: &str = "properties";
/// The mirror of its versions.
const VERSIONS: &str = "versions/";
/// How many copies a trash or a restore keeps in flight.
const CONCURRENT_COPIES: usize = 16;
/// How long a claim, or an item without its record, may stay before another replica
/// takes it over: its maker stopped halfway.
pub(super) const STALE_NS: i64 = 3600 * 1_000_000_000;

/// What an item was copied from, kept until the originals are deleted.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Journal {
    /// Each key copied, and the ETag it had then.
    keys: Vec<(String, String)>,
    /// The entry of the resource's properties: its parent collection, and its name there.
    index: (String, String),
}

fn json<T: Serialize>(value: &T) -> Result<Bytes, Status> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| Status::internal(format!("a trash record: {e}")))
}

impl BucketKeeper {
    /// Moves what `found` says `path` is into a new trash item of its quota root: copies
    /// first, the record last, then the deletion of the originals. The item's id and
    /// what could not be deleted; `None` when the trash is off.
    pub async fn trash(
        &self,
        path: &VolumePath,
        found: &Found,
        by: &str,
    ) -> Result<Option<(String, Vec<Failure>)>, Status> {
        if !self.keeping.trashes() {
            return Ok(None);
        }
        if path.is_root() {
            return Err(Status::permission_denied("the root collection cannot be deleted"));
        }
        let root = (self.keeping.root_of)(path);
        let (id, now) = self.keeping.new_name(16);
        let item = self.item(&root, &id);
        let mut copied = Vec::new();
        let (etag, bytes) = match found {
            Found::File(object) => {
                self.s3.copy(&object.key, &format!("{item}{ENTRY}")).await?;
                copied.push((object.key.clone(), object.etag.clone()));
                (object.etag.clone(), object.size)
            }
            Found::Collection => {
                let entry = format!("{item}{ENTRY}/");
                copied.extend(self.copy_tree(&self.keys.children(path), &entry).await?);
                let props = format!("{item}{PROPS}");
                copied.extend(self.copy_tree(&self.keys.indexes_below(path), &props).await?);
                (String::new(), 0)
            }
            Found::Missing => return Err(Status::not_found(format!("{path} does not exist"))),
        };
        copied.extend(
            self.copy_tree(&self.mirror(path), &format!("{item}{VERSIONS}"))
                .await?,
        );
        let (parent, name) = Keys::index_entry(path, found.is_collection());
        let own = properties::load(&self.s3, &self.keys, &parent).await?.get(&name);
        if !own.is_empty() {
            self.s3
                .put(&format!("{item}{PROPERTIES}"), Index::encode_one(own))
                .await?;
        }
        let journal = Journal {
            keys: copied,
            index: (parent.as_str().to_owned(), name),
        };
        self.s3.put(&format!("{item}{JOURNAL}"), json(&journal)?).await?;
        let record = ItemRecord {
            path: path.as_str().to_owned(),
            collection: found.is_collection(),
            deleted_unix_ns: now,
            by: by.to_owned(),
            bytes,
            etag,
        };
        self.s3.put(&format!("{item}{RECORD}"), json(&record)?).await?;
        let failures = self.finish(&item, journal, false).await?;
        Ok(Some((id, failures)))
    }

    /// Copies every key below `from` to the same place below `to` (a marker is made
    /// anew); the keys copied and their ETags. Any failure fails the whole.
    async fn copy_tree(&self, from: &str, to: &str) -> Result<Vec<(String, String)>, Status> {
        let mut copied = Vec::new();
        let mut token = None;
        loop {
            let page = self.s3.list_all(from, token.as_deref()).await?;
            let results: Vec<Result<(String, String), Status>> = futures_util::stream::iter(page.objects)
                .map(|object| async move {
                    let target = format!("{to}{}", &object.key[from.len()..]);
                    if object.key.ends_with('/') {
                        self.s3.put(&target, Bytes::new()).await?;
                    } else {
                        self.s3.copy(&object.key, &target).await?;
                    }
                    Ok((object.key, object.etag))
                })
                .buffer_unordered(CONCURRENT_COPIES)
                .collect()
                .await;
            for result in results {
                copied.push(result?);
            }
            match page.next {
                Some(next) => token = Some(next),
                None => return Ok(copied),
            }
        }
    }

    /// Deletes the originals `journal` names (with `verify`, only those still as they
    /// were copied: after a crash, whatever was written there since stays), then the
    /// resource's properties entry and the journal; what could not be deleted.
    async fn finish(&self, item: &str, journal: Journal, verify: bool) -> Result<Vec<Failure>, Status> {
        let mut keys = Vec::with_capacity(journal.keys.len());
        for (key, etag) in journal.keys {
            let unchanged = !verify || self.s3.head(&key).await?.is_some_and(|now| now.etag == etag);
            if unchanged {
                keys.push(key);
            }
        }
        let (markers, objects): (Vec<String>, Vec<String>) =
            keys.into_iter().partition(|key| key.ends_with('/'));
        let mut failures = delete_objects(&self.s3, &self.keys, objects).await;
        failures.extend(delete_markers(&self.s3, &self.keys, markers).await);
        if !failures.is_empty() {
            return Ok(failures);
        }
        let (parent, name) = journal.index;
        properties::remove_entry(&self.s3, &self.keys, &VolumePath::parse(&parent)?, &name).await?;
        self.s3.delete(&format!("{item}{JOURNAL}")).await?;
        Ok(failures)
    }

    /// Finishes the deletion an item's journal names, if it has one left (its maker
    /// stopped halfway).
    pub(super) async fn finish_journal(&self, item: &str) -> Result<(), Status> {
        let Some((data, _)) = self.s3.get_versioned(&format!("{item}{JOURNAL}")).await? else {
            return Ok(());
        };
        let journal: Journal = serde_json::from_slice(&data)
            .map_err(|e| Status::data_loss(format!("the trash journal {item}{JOURNAL}: {e}")))?;
        let failures = self.finish(item, journal, true).await?;
        match failures.first() {
            None => Ok(()),
            Some(failure) => Err(Status::unavailable(format!(
                "what {item} was copied from could not all be deleted: {}",
                failure.message
            ))),
        }
    }

    /// The record of trash item `id` of `root`, if it is whole.
    pub async fn record(&self, root: &VolumePath, id: &str) -> Result<Option<ItemRecord>, Status> {
        if made_at(id).is_none() {
            return Ok(None);
        }
        let key = format!("{}{RECORD}", self.item(root, id));
        let Some((data, _)) = self.s3.get_versioned(&key).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&data)
            .map(Some)
            .map_err(|e| Status::data_loss(format!("the trash record {key}: {e}")))
    }

    /// The whole items of `root`, oldest first.
    pub async fn list_trash(&self, root: &VolumePath) -> Result<Vec<TrashItem>, Status> {
        let items = self.items(root);
        let mut ids = Vec::new();
        let mut from = None;
        loop {
            let page = self.s3.list(&items, from.as_deref()).await?;
            ids.extend(
                page.prefixes
                    .iter()
                    .filter_map(|prefix| name_after(prefix, &items))
                    .filter(|id| made_at(id).is_some())
                    .map(str::to_owned),
            );
            match page.next {
                Some(next) => from = Some(next),
                None => break,
            }
        }
        let records: Vec<Result<Option<TrashItem>, Status>> = futures_util::stream::iter(ids)
            .map(|id| async move {
                Ok(self.record(root, &id).await?.map(|record| TrashItem {
                    id,
                    root: root.clone(),
                    record,
                }))
            })
            .buffered(CONCURRENT_COPIES)
            .collect()
            .await;
        let mut found = Vec::new();
        for record in records {
            match record {
                Ok(item) => found.extend(item),
                // One damaged record hides its item, not everyone's trash.
                Err(status) if status.code() == tonic::Code::DataLoss => {
                    tracing::warn!(target: "kubedav", "a trash item is not listed: {}", status.message());
                }
                Err(status) => return Err(status),
            }
        }
        Ok(found)
    }

    /// The quota roots at or beneath `within` that have trash items (or had).
    pub async fn trash_roots(&self, within: &VolumePath) -> Result<Vec<VolumePath>, Status> {
        let top = format!("{}trash/", self.area());
        let start = if within.is_root() {
            top.clone()
        } else {
            format!("{top}{}/", within.as_str())
        };
        let mut roots = Vec::new();
        let mut pending = vec![start];
        while let Some(prefix) = pending.pop() {
            let mut from = None;
            loop {
                let page = self.s3.list(&prefix, from.as_deref()).await?;
                for child in &page.prefixes {
                    match name_after(child, &prefix) {
                        Some(RESERVED_AREA) => {
                            let root = prefix[top.len()..].trim_end_matches('/');
                            roots.extend(VolumePath::parse(root).ok());
                        }
                        Some(name) if !kubedav_api::path::is_reserved_name(name) => {
                            pending.push(child.clone())
                        }
                        _ => {}
                    }
                }
                match page.next {
                    Some(next) => from = Some(next),
                    None => break,
                }
            }
        }
        Ok(roots)
    }

    /// Puts trash item `id` of `root` back at `destination`, with its properties and
    /// versions; what is there is replaced only with `overwrite` (a file becomes a
    /// version, a collection goes to the trash). Whether `destination` was free.
    pub async fn restore(
        &self,
        root: &VolumePath,
        id: &str,
        destination: &VolumePath,
        overwrite: bool,
        by: &str,
    ) -> Result<bool, Status> {
        if destination.is_root() {
            return Err(Status::permission_denied(
                "the root collection cannot be replaced",
            ));
        }
        let item = self.item(root, id);
        let record = self
            .record(root, id)
            .await?
            .ok_or_else(|| Status::not_found(format!("no trash item {id}")))?;
        self.finish_journal(&item).await?;
        require_parent(&self.s3, &self.keys, destination).await?;
        let existing = find(&self.s3, &self.keys, destination).await?;
        let existed = !matches!(existing, Found::Missing);
        if existed && !overwrite {
            return Err(Status::already_exists(format!("{destination} exists")));
        }
        self.dispose_replaced(destination, &existing, record.collection, by)
            .await?;
        let restored_etag = if record.collection {
            self.s3
                .put(&self.keys.children(destination), Bytes::new())
                .await?;
            let left_out = crate::left_out::LeftOut::default();
            let entry = format!("{item}{ENTRY}/");
            let failures = copy_members(
                &self.s3,
                &self.keys,
                &entry,
                &self.keys.children(destination),
                &left_out,
            )
            .await?;
            let props = format!("{item}{PROPS}");
            let more = copy_members(
                &self.s3,
                &self.keys,
                &props,
                &self.keys.indexes_below(destination),
                &left_out,
            )
            .await?;
            if let Some(failure) = failures.iter().chain(&more).next() {
                return Err(Status::unavailable(format!(
                    "{destination} was not restored whole ({}); the item stays in the trash",
                    failure.message
                )));
            }
            String::new()
        } else {
            self.s3
                .copy(&format!("{item}{ENTRY}"), &self.keys.object(destination))
                .await?
        };
        if let Some((data, _)) = self.s3.get_versioned(&format!("{item}{PROPERTIES}")).await? {
            let mut own = Index::decode_one(&data, &item)?;
            crate::props::rebind_checksums(&mut own, &record.etag, &restored_etag);
            let (parent, name) = Keys::index_entry(destination, record.collection);
            properties::put_entry(&self.s3, &self.keys, &parent, &name, own).await?;
        }
        let left_out = crate::left_out::LeftOut::default();
        copy_members(
            &self.s3,
            &self.keys,
            &format!("{item}{VERSIONS}"),
            &self.mirror(destination),
            &left_out,
        )
        .await?;
        self.remove_item(&item).await?;
        Ok(!existed)
    }

    /// What a restore, COPY or MOVE replaces at `path` (`existing`) with a file or, when
    /// `by_collection`, a collection: a file becomes a version (and goes, unless a file
    /// takes its key), a collection goes to the trash; without them, both are deleted.
    pub async fn dispose_replaced(
        &self,
        path: &VolumePath,
        existing: &Found,
        by_collection: bool,
        by: &str,
    ) -> Result<(), Status> {
        match existing {
            Found::Missing => Ok(()),
            Found::File(object) => {
                self.keep_version(path, object).await?;
                if by_collection {
                    self.s3.delete(&object.key).await?;
                    let (parent, name) = Keys::index_entry(path, false);
                    properties::remove_entry(&self.s3, &self.keys, &parent, &name).await?;
                }
                Ok(())
            }
            Found::Collection => {
                let failures = match self.trash(path, existing, by).await? {
                    Some((_, failures)) => failures,
                    None => {
                        self.forget_versions(path).await?;
                        crate::objects::tree::remove(&self.s3, &self.keys, path, existing).await?
                    }
                };
                match failures.first() {
                    None => Ok(()),
                    Some(failure) => Err(Status::new(
                        tonic::Code::from_i32(failure.code),
                        format!("{path} could not be replaced: {}", failure.message),
                    )),
                }
            }
        }
    }

    /// Removes trash item `id` of `root` for good, once: the replica whose claim is
    /// written first removes it, and takes over a claim an hour old. NOT_FOUND when
    /// there is none.
    pub async fn purge(&self, root: &VolumePath, id: &str) -> Result<(), Status> {
        let item = self.item(root, id);
        if made_at(id).is_none() || self.s3.head(&format!("{item}{RECORD}")).await?.is_none() {
            return Err(Status::not_found(format!("no trash item {id}")));
        }
        if !self.claim(&item).await? {
            return Ok(());
        }
        self.remove_item(&item).await
    }

    /// Claims `item` for its removal: `false` when another replica claimed it lately,
    /// or removed it already.
    pub(super) async fn claim(&self, item: &str) -> Result<bool, Status> {
        let claim = format!("{item}{CLAIM}");
        match self.s3.put_if(&claim, Bytes::new(), Some("")).await {
            // Claimed after another replica removed it all: nothing is left to remove.
            Ok(_) if self.s3.head(&format!("{item}{RECORD}")).await?.is_none() => {
                self.s3.delete(&claim).await?;
                Ok(false)
            }
            Ok(_) => Ok(true),
            Err(status) if status.code() == tonic::Code::Aborted => {
                // The S3 server's time against this host's: a claim is about processes
                // alive now, not about the age of what is kept.
                let now = kubedav_kit::clock::unix_nanos(&kubedav_kit::clock::system());
                // Gone meanwhile: its claimant removed the item, claim included.
                let claimed = self.s3.head(&claim).await?.map(|object| object.modified_unix_ns);
                Ok(claimed.is_some_and(|claimed| now - claimed > STALE_NS))
            }
            Err(status) => Err(status),
        }
    }

    /// Removes everything of `item`, its record first (it is then no longer listed).
    pub(super) async fn remove_item(&self, item: &str) -> Result<(), Status> {
        self.s3.delete(&format!("{item}{RECORD}")).await?;
        let failures = delete_under(&self.s3, &self.keys, item).await?;
        match failures.first() {
            None => Ok(()),
            Some(failure) => Err(Status::unavailable(format!(
                "{item} was not removed whole ({}); the retention removes the rest",
                failure.message
            ))),
        }
    }
}
