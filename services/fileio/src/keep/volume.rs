//! Trash and versions on a volume: every step is a rename (or a hard link) within the
//! volume's filesystem, so keeping costs the same whatever the size.
//!
//! * **Trash** (`.kubedav/trash/{root}/.kubedav/{id}/`): `item.json` is written and
//!   synced first, then the entry is renamed in as `entry`, then the mirror of its
//!   versions as `versions`. A crash between leaves an item without an entry (never
//!   listed) or the versions at their old mirror.
//! * **Versions** (`.kubedav/versions/{path}/.kubedav/{id}`): the file about to be
//!   replaced is hard-linked there, and the link synced, before the new content is
//!   renamed over it: a reader sees the old or the new file, and a crash between leaves
//!   one version too many. A version is the old inode, dead properties and checksums
//!   included.

use super::{ItemRecord, Keeping, TrashItem, Version, made_at, mirror, trash_folder, versions_folder};
use crate::errors::{Op, io_status};
use crate::metadata::{is_dir, stat_at};
use crate::volume::{Volume, reserved_failed};
use kubedav_api::path::VolumePath;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use std::io::Write;
use std::sync::Arc;
use tonic::Status;

/// What a change keeps of what it removes or replaces, and who makes the change.
#[derive(Clone)]
pub struct Keeper {
    /// The volume.
    pub volume: Arc<Volume>,
    /// What is kept.
    pub keeping: Arc<Keeping>,
    /// Who changes it (recorded with trash items).
    pub by: String,
}

impl Keeper {
    /// Moves `name` in `parent` (at `path`, described by `stx`) to the trash; see [`trash`].
    pub fn trash(
        &self,
        parent: &OwnedFd,
        name: &str,
        path: &VolumePath,
        stx: &rustix::fs::Statx,
    ) -> Result<Option<TrashItem>, Status> {
        if !self.keeping.trashes() {
            return Ok(None);
        }
        trash(&self.volume, &self.keeping, parent, name, path, stx, &self.by)
    }

    /// Keeps the file `name` in `dir` as a version of `path` before it is replaced, when
    /// versions are kept.
    pub fn keep_version(&self, dir: &OwnedFd, name: &str, path: &VolumePath) -> Result<(), Status> {
        if !self.keeping.versions() {
            return Ok(());
        }
        keep_version(&self.volume, &self.keeping, dir, name, path)
    }

    /// Disposes of `name` in `dir`, what was at `path` (`stx`) before a COPY or MOVE
    /// replaced it: a file becomes a version of `path`, a collection goes to the trash,
    /// each where that is kept; whatever is not kept is removed. Members that could not
    /// be removed are returned.
    pub fn dispose_replaced(
        &self,
        dir: &OwnedFd,
        name: &str,
        path: &VolumePath,
        stx: &rustix::fs::Statx,
    ) -> Result<Vec<kubedav_api::pb::fileio::v1::Failure>, Status> {
        if is_dir(stx) {
            if self.trash(dir, name, path, stx)?.is_some() {
                return Ok(Vec::new());
            }
            self.forget_versions(path)?;
        } else if !crate::metadata::is_symlink(stx) {
            self.keep_version(dir, name, path)?;
        }
        crate::tree::remove_entry(dir, name, path, stx)
    }

    /// Removes the versions of `path` and of everything beneath it, when what is there is
    /// removed without going to the trash: nothing that later takes the name inherits them.
    pub fn forget_versions(&self, path: &VolumePath) -> Result<(), Status> {
        remove_tree_at(&self.volume, &mirror(path))
    }

    /// Moves the versions of `from` to `to` after a move, when versions are kept.
    pub fn move_versions(&self, from: &VolumePath, to: &VolumePath) -> Result<(), Status> {
        if !self.keeping.versions() && !self.keeping.trashes() {
            return Ok(());
        }
        move_versions(&self.volume, from, to)
    }
}

/// The record of a trash item, in its folder.
const RECORD: &str = "item.json";
/// The deleted file or collection, in its item's folder.
const ENTRY: &str = "entry";
/// The mirror of its versions, in its item's folder.
const VERSIONS: &str = "versions";

/// Moves `name` in `parent` (the resource at `path`, described by `stx`) into a new trash
/// item, with its versions. `Ok(None)` when it cannot be renamed there (another
/// filesystem mounted inside the volume): the caller then deletes it as before.
pub fn trash(
    volume: &Volume,
    keeping: &Keeping,
    parent: &OwnedFd,
    name: &str,
    path: &VolumePath,
    stx: &rustix::fs::Statx,
    by: &str,
) -> Result<Option<TrashItem>, Status> {
    let root = (keeping.root_of)(path);
    let (id, now) = keeping.new_name(16);
    let folder = format!("{}/{id}", trash_folder(&root));
    let item = volume.reserved_folder(&folder, true)?.expect("made");
    let record = ItemRecord {
        path: path.as_str().to_owned(),
        collection: is_dir(stx),
        deleted_unix_ns: now,
        by: by.to_owned(),
        bytes: if is_dir(stx) { 0 } else { stx.stx_size },
    };
    let json = serde_json::to_vec(&record).map_err(|e| Status::internal(format!("trash record: {e}")))?;
    write_file(volume, &item, RECORD, &json, &folder)?;
    match rustix::fs::renameat_with(parent, name, &item, ENTRY, RenameFlags::NOREPLACE) {
        Ok(()) => {}
        Err(rustix::io::Errno::XDEV) => {
            tracing::warn!(target: "kubedav", %path, "on another filesystem than the trash: deleted, not kept");
            remove_tree_at(volume, &folder)?;
            return Ok(None);
        }
        Err(e) => {
            remove_tree_at(volume, &folder)?;
            return Err(io_status(e, Op::Other, path));
        }
    }
    volume.durability().sync_dir(parent, path)?;
    let versions = mirror(path);
    if let Some(area) = volume.reserved_folder("", false)? {
        match rustix::fs::renameat(&area, versions.as_str(), &item, VERSIONS) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => {
                tracing::warn!(target: "kubedav", %path, error = %e, "its versions stay behind in the trash")
            }
        }
    }
    volume.durability().sync_dir(&item, path)?;
    Ok(Some(TrashItem { id, root, record }))
}

/// Keeps the file `name` in `dir` (at `path`) as a version, just before new content is
/// renamed over it; then drops the oldest versions past `versions_max`.
pub fn keep_version(
    volume: &Volume,
    keeping: &Keeping,
    dir: &OwnedFd,
    name: &str,
    path: &VolumePath,
) -> Result<(), Status> {
    let folder = versions_folder(path);
    let versions = volume.reserved_folder(&folder, true)?.expect("made");
    let (id, _) = keeping.new_name(8);
    match rustix::fs::linkat(dir, name, &versions, id.as_str(), AtFlags::empty()) {
        Ok(()) => {}
        Err(rustix::io::Errno::XDEV) => return Ok(()),
        Err(e) => return Err(reserved_failed("keep a version of", path.as_str(), e)),
    }
    volume.durability().sync_dir(&versions, path)?;
    let names = kept_names(&versions, &folder)?;
    let excess = names.len().saturating_sub(keeping.versions_max as usize);
    for old in &names[..excess] {
        remove_file(&versions, old, &folder)?;
    }
    Ok(())
}

/// Moves the versions of `from` and of everything beneath it to `to`, after `from` was
/// moved there; merged with those `to` already has (a file moved over a file).
pub fn move_versions(volume: &Volume, from: &VolumePath, to: &VolumePath) -> Result<(), Status> {
    let Some(area) = volume.reserved_folder("", false)? else {
        return Ok(());
    };
    let (source, destination) = (mirror(from), mirror(to));
    if let Some((parent, _)) = destination.rsplit_once('/') {
        volume.reserved_folder(parent, true)?;
    }
    match rustix::fs::renameat_with(
        &area,
        source.as_str(),
        &area,
        destination.as_str(),
        RenameFlags::NOREPLACE,
    ) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(rustix::io::Errno::EXIST) => {
            let (Some(from_dir), Some(to_dir)) = (
                volume.reserved_folder(&source, false)?,
                volume.reserved_folder(&destination, false)?,
            ) else {
                return Ok(());
            };
            merge(&from_dir, &to_dir, &source)?;
            remove_empty(&area, &source);
            Ok(())
        }
        Err(e) => Err(reserved_failed("move the versions of", from.as_str(), e)),
    }
}

/// The trash items of `root`, oldest first; items a crash left without an entry are
/// left out.
pub fn list_trash(volume: &Volume, root: &VolumePath) -> Result<Vec<TrashItem>, Status> {
    let folder = trash_folder(root);
    let Some(dir) = volume.reserved_folder(&folder, false)? else {
        return Ok(Vec::new());
    };
    let mut items = Vec::new();
    for id in kept_names(&dir, &folder)? {
        if let Some(record) = read_item(volume, root, &id)? {
            items.push(TrashItem {
                id,
                root: root.clone(),
                record,
            });
        }
    }
    Ok(items)
}

/// The record of trash item `id` of `root`, if it is whole.
pub fn read_item(volume: &Volume, root: &VolumePath, id: &str) -> Result<Option<ItemRecord>, Status> {
    if made_at(id).is_none() {
        return Ok(None);
    }
    let folder = format!("{}/{id}", trash_folder(root));
    let Some(item) = volume.reserved_folder(&folder, false)? else {
        return Ok(None);
    };
    if rustix::fs::statat(&item, ENTRY, AtFlags::SYMLINK_NOFOLLOW).is_err() {
        return Ok(None);
    }
    let Some(json) = read_file(&item, RECORD, &folder)? else {
        return Ok(None);
    };
    Ok(serde_json::from_slice(&json).ok())
}

/// Restores trash item `id` of `root` to `destination`: refused with ALREADY_EXISTS when
/// the name is taken, unless `overwrite`; then a file there becomes a version and a
/// collection goes to the trash (by `by`). Its versions come back with it. Whether the
/// destination was free.
pub fn restore(
    volume: &Volume,
    keeping: &Keeping,
    root: &VolumePath,
    id: &str,
    destination: &VolumePath,
    overwrite: bool,
    by: &str,
) -> Result<bool, Status> {
    let not_found = || Status::not_found(format!("no trash item {id}"));
    if read_item(volume, root, id)?.is_none() {
        return Err(not_found());
    }
    let folder = format!("{}/{id}", trash_folder(root));
    let item = volume.reserved_folder(&folder, false)?.ok_or_else(not_found)?;
    let (parent, name) = volume.open_parent(destination)?;
    let serialized = crate::serial::lock(destination);
    let existing = match stat_at(&parent, name, destination) {
        Ok(stx) => Some(stx),
        Err(status) if status.code() == tonic::Code::NotFound => None,
        Err(status) => return Err(status),
    };
    let mut flags = RenameFlags::NOREPLACE;
    if let Some(stx) = &existing {
        if !overwrite {
            return Err(Status::already_exists(format!("{destination} exists")));
        }
        volume.refuse_escaping_symlink(stx, destination)?;
        if is_dir(stx) {
            if trash(volume, keeping, &parent, name, destination, stx, by)?.is_none() {
                crate::tree::remove_entry(&parent, name, destination, stx)?;
            }
        } else {
            if keeping.versions() {
                keep_version(volume, keeping, &parent, name, destination)?;
            }
            flags = RenameFlags::empty();
        }
    }
    rustix::fs::renameat_with(&item, ENTRY, &parent, name, flags)
        .map_err(|e| io_status(e, Op::Create, destination))?;
    drop(serialized);
    volume.durability().sync_dir(&parent, destination)?;
    if let Some(area) = volume.reserved_folder("", false)?
        && rustix::fs::statat(&item, VERSIONS, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    {
        let target = mirror(destination);
        if let Some((up, _)) = target.rsplit_once('/') {
            volume.reserved_folder(up, true)?;
        }
        match rustix::fs::renameat_with(&item, VERSIONS, &area, target.as_str(), RenameFlags::NOREPLACE) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => {
                if let (Some(from), Some(to)) = (
                    volume.reserved_folder(&format!("{folder}/{VERSIONS}"), false)?,
                    volume.reserved_folder(&target, false)?,
                ) {
                    merge(&from, &to, &folder)?;
                }
            }
            Err(e) => {
                tracing::warn!(target: "kubedav", %destination, error = %e, "its versions stay in the trash")
            }
        }
    }
    remove_tree_at(volume, &folder)?;
    Ok(existing.is_none())
}

/// Removes trash item `id` of `root` for good. NOT_FOUND when there is none.
pub fn purge(volume: &Volume, root: &VolumePath, id: &str) -> Result<(), Status> {
    if made_at(id).is_none()
        || volume
            .reserved_folder(&format!("{}/{id}", trash_folder(root)), false)?
            .is_none()
    {
        return Err(Status::not_found(format!("no trash item {id}")));
    }
    remove_tree_at(volume, &format!("{}/{id}", trash_folder(root)))
}

/// The versions of the file at `path`, oldest first.
pub fn list_versions(volume: &Volume, path: &VolumePath) -> Result<Vec<Version>, Status> {
    let folder = versions_folder(path);
    let Some(dir) = volume.reserved_folder(&folder, false)? else {
        return Ok(Vec::new());
    };
    let mut versions = Vec::new();
    for id in kept_names(&dir, &folder)? {
        let Ok(stx) = rustix::fs::statx(
            &dir,
            id.as_str(),
            AtFlags::SYMLINK_NOFOLLOW,
            rustix::fs::StatxFlags::SIZE,
        ) else {
            continue;
        };
        versions.push(Version {
            replaced_unix_ns: made_at(&id).unwrap_or_default(),
            id,
            bytes: stx.stx_size,
        });
    }
    Ok(versions)
}

/// Opens version `id` of the file at `path` for reading. NOT_FOUND when there is none.
pub fn open_version(volume: &Volume, path: &VolumePath, id: &str) -> Result<OwnedFd, Status> {
    let not_found = || Status::not_found(format!("{path} has no version {id}"));
    if made_at(id).is_none() {
        return Err(not_found());
    }
    let folder = versions_folder(path);
    let dir = volume.reserved_folder(&folder, false)?.ok_or_else(not_found)?;
    rustix::fs::openat(
        &dir,
        id,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::NOENT => not_found(),
        e => reserved_failed("open", &format!("{folder}/{id}"), e),
    })
}

/// The names in `dir` that have the shape of a kept thing's, sorted (oldest first).
fn kept_names(dir: &OwnedFd, folder: &str) -> Result<Vec<String>, Status> {
    let entries = rustix::fs::Dir::read_from(dir).map_err(|e| reserved_failed("list", folder, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| reserved_failed("list", folder, e))?;
        let name = entry.file_name().to_string_lossy();
        if made_at(&name).is_some() {
            names.push(name.into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// Moves everything in `from` into `to`; where a name is taken in both by a folder, their
/// contents are merged in turn. What cannot move stays in `from`.
fn merge(from: &OwnedFd, to: &OwnedFd, folder: &str) -> Result<(), Status> {
    let entries = rustix::fs::Dir::read_from(from).map_err(|e| reserved_failed("list", folder, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| reserved_failed("list", folder, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != "." && name != ".." {
            names.push(name);
        }
    }
    for name in names {
        match rustix::fs::renameat_with(from, name.as_str(), to, name.as_str(), RenameFlags::NOREPLACE) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => {
                let open = |dir: &OwnedFd| {
                    rustix::fs::openat(
                        dir,
                        name.as_str(),
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                };
                if let (Ok(inner_from), Ok(inner_to)) = (open(from), open(to)) {
                    merge(&inner_from, &inner_to, folder)?;
                    remove_empty(from, &name);
                }
            }
            Err(e) => return Err(reserved_failed("move", &format!("{folder}/{name}"), e)),
        }
    }
    Ok(())
}

/// Removes the folder `name` of `dir` if it is empty.
fn remove_empty(dir: impl AsFd, name: &str) {
    let _ = rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR);
}

/// Removes the folder `relative` of kubedav's area with everything in it.
fn remove_tree_at(volume: &Volume, relative: &str) -> Result<(), Status> {
    let Some((up, name)) = relative.rsplit_once('/') else {
        return Err(Status::internal(format!("{relative} is not removable")));
    };
    let Some(parent) = volume.reserved_folder(up, false)? else {
        return Ok(());
    };
    let path = VolumePath::root();
    match stat_at(&parent, name, &path) {
        Ok(stx) => {
            let failures = crate::tree::remove_entry(&parent, name, &path, &stx)?;
            if !failures.is_empty() {
                return Err(Status::internal(format!("{relative} could not be removed whole")));
            }
            volume.durability().sync_dir(&parent, &path)
        }
        Err(status) if status.code() == tonic::Code::NotFound => Ok(()),
        Err(status) => Err(status),
    }
}

fn remove_file(dir: &OwnedFd, name: &str, folder: &str) -> Result<(), Status> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(reserved_failed("remove", &format!("{folder}/{name}"), e)),
    }
}

/// Writes `data` as the file `name` of `dir` (a temporary file, synced, renamed).
fn write_file(volume: &Volume, dir: &OwnedFd, name: &str, data: &[u8], folder: &str) -> Result<(), Status> {
    let temp = format!(".tmp-{name}");
    let fd = rustix::fs::openat(
        dir,
        temp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| reserved_failed("write", &format!("{folder}/{name}"), e))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(data)
        .map_err(|e| Status::internal(format!("cannot write {folder}/{name}: {e}")))?;
    volume
        .durability()
        .sync_data(&file)
        .map_err(|e| Status::internal(format!("cannot sync {folder}/{name}: {e}")))?;
    rustix::fs::renameat(dir, temp.as_str(), dir, name)
        .map_err(|e| reserved_failed("write", &format!("{folder}/{name}"), e))
}

/// The file `name` of `dir`, if there is one.
fn read_file(dir: &OwnedFd, name: &str, folder: &str) -> Result<Option<Vec<u8>>, Status> {
    use std::io::Read;
    let fd = match rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(reserved_failed("read", &format!("{folder}/{name}"), e)),
    };
    let mut data = Vec::new();
    std::fs::File::from(fd)
        .take(64 << 10)
        .read_to_end(&mut data)
        .map_err(|e| Status::internal(format!("cannot read {folder}/{name}: {e}")))?;
    Ok(Some(data))
}

/// What one retention pass removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retained {
    /// Trash items older than the trash's retention.
    pub items: u64,
    /// Versions older than the versions' retention.
    pub versions: u64,
}

/// Where purged items are removed: an item is claimed by renaming it here under a new
/// name of this moment (one replica's rename wins), then removed by that replica alone;
/// what a crash left here over an hour ago is removed by the next pass.
const PURGING: &str = "trash/.kubedav-purging";

/// Removes the trash items and versions older than `keeping` keeps them, on `keeping`'s
/// clock. Safe with several replicas on one volume: each item is claimed by one rename.
pub fn retain(volume: &Volume, keeping: &Keeping) -> Result<Retained, Status> {
    let now = kubedav_kit::clock::unix_nanos(&keeping.clock);
    let before = |keep_for: std::time::Duration| {
        now.saturating_sub(i64::try_from(keep_for.as_nanos()).unwrap_or(i64::MAX))
    };
    let mut retained = Retained::default();
    if let Some(trash_for) = keeping.trash_for {
        let oldest_kept = before(trash_for);
        finish_purges(volume, before(std::time::Duration::from_secs(3600)))?;
        for folder in kept_folders(volume, "trash")? {
            let Some(dir) = volume.reserved_folder(&folder, false)? else {
                continue;
            };
            for id in kept_names(&dir, &folder)? {
                if made_at(&id).is_some_and(|made| made < oldest_kept)
                    && let Some(claimed) = claim(volume, keeping, &dir, &id, &folder)?
                {
                    remove_tree_at(volume, &format!("{PURGING}/{claimed}"))?;
                    retained.items += 1;
                }
            }
        }
    }
    if keeping.versions() {
        let oldest_kept = before(keeping.versions_for);
        for folder in kept_folders(volume, "versions")? {
            let Some(dir) = volume.reserved_folder(&folder, false)? else {
                continue;
            };
            for id in kept_names(&dir, &folder)? {
                if made_at(&id).is_some_and(|made| made < oldest_kept) {
                    remove_file(&dir, &id, &folder)?;
                    retained.versions += 1;
                }
            }
        }
    }
    Ok(retained)
}

/// Runs [`retain`] every `keeping.retain_every` (jittered) on a thread of its own, until
/// the volume is dropped.
pub fn retain_in_background(volume: std::sync::Weak<Volume>, keeping: Arc<Keeping>) {
    let spawned = std::thread::Builder::new()
        .name("retention".into())
        .spawn(move || {
            loop {
                let jitter = keeping.retain_every.mul_f64(fastrand::f64() / 10.0);
                std::thread::sleep(keeping.retain_every + jitter);
                let Some(volume) = volume.upgrade() else { return };
                match retain(&volume, &keeping) {
                    Ok(retained) if retained != Retained::default() => {
                        crate::metrics::purged("age", retained.items + retained.versions);
                        tracing::info!(
                            target: "kubedav",
                            items = retained.items,
                            versions = retained.versions,
                            "retention: removed the trash items and versions past their time"
                        )
                    }
                    Ok(_) => {}
                    Err(status) => {
                        tracing::warn!(target: "kubedav", "retention failed: {}", status.message())
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(target: "kubedav", "no retention: cannot start its thread: {e}");
    }
}

/// Claims trash item `id` of the items folder `dir` for its removal: its name in
/// [`PURGING`], or `None` when another replica claimed it first.
fn claim(
    volume: &Volume,
    keeping: &Keeping,
    dir: &OwnedFd,
    id: &str,
    folder: &str,
) -> Result<Option<String>, Status> {
    let purging = volume.reserved_folder(PURGING, true)?.expect("made");
    let (claimed, _) = keeping.new_name(16);
    match rustix::fs::renameat_with(dir, id, &purging, claimed.as_str(), RenameFlags::NOREPLACE) {
        Ok(()) => Ok(Some(claimed)),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(reserved_failed("claim", &format!("{folder}/{id}"), e)),
    }
}

/// Removes what a replica claimed in [`PURGING`] before `stale` (nanoseconds) and did
/// not remove: it stopped halfway.
fn finish_purges(volume: &Volume, stale: i64) -> Result<(), Status> {
    let Some(dir) = volume.reserved_folder(PURGING, false)? else {
        return Ok(());
    };
    for name in kept_names(&dir, PURGING)? {
        if made_at(&name).is_some_and(|claimed| claimed < stale) {
            remove_tree_at(volume, &format!("{PURGING}/{name}"))?;
        }
    }
    Ok(())
}

/// Every folder under `top` (`trash` or `versions`, in kubedav's area) named by the
/// reserved name: the items of a quota root, or the versions of a file. A mirror's other
/// folders are path segments, walked in turn; the reserved folders are not walked into.
fn kept_folders(volume: &Volume, top: &str) -> Result<Vec<String>, Status> {
    let reserved = kubedav_api::path::RESERVED_AREA;
    let mut found = Vec::new();
    let mut pending = vec![top.to_owned()];
    while let Some(folder) = pending.pop() {
        let Some(dir) = volume.reserved_folder(&folder, false)? else {
            continue;
        };
        let entries = rustix::fs::Dir::read_from(&dir).map_err(|e| reserved_failed("list", &folder, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| reserved_failed("list", &folder, e))?;
            let name = entry.file_name().to_string_lossy();
            let is_dir = match entry.file_type() {
                rustix::fs::FileType::Directory => true,
                rustix::fs::FileType::Unknown => {
                    rustix::fs::statat(&dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|stat| {
                        rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory
                    })
                }
                _ => false,
            };
            // `.kubedav-purging` holds claimed items; no path segment starts so.
            if !is_dir
                || name == "."
                || name == ".."
                || kubedav_api::path::is_reserved_name(&name) && name != reserved
            {
                continue;
            }
            let path = format!("{folder}/{name}");
            if name == reserved {
                found.push(path);
            } else {
                pending.push(path);
            }
        }
    }
    Ok(found)
}

/// Something kept, as the quotas count it: the path it counts at (a trash item: its
/// quota root; a version: its file), when it was kept, its bytes, and where it is.
#[derive(Clone, Debug)]
pub struct KeptThing {
    /// The path whose quota roots it counts against.
    pub counts_at: VolumePath,
    /// When it was kept (deleted or replaced), nanoseconds since the epoch.
    pub kept_unix_ns: i64,
    /// Its bytes (a trash item: all of its files, its versions included).
    pub bytes: u64,
    /// Its folder in kubedav's area, and its name there.
    folder: String,
    name: String,
    /// A trash item (else a version).
    item: bool,
}

/// Everything kept beneath `within` (the whole volume for the root): trash items of the
/// quota roots at or beneath it, and versions of files at or beneath it.
pub fn kept_things(volume: &Volume, within: &VolumePath) -> Result<Vec<KeptThing>, Status> {
    let reserved = kubedav_api::path::RESERVED_AREA;
    let beneath = |top: &str| {
        if within.is_root() {
            top.to_owned()
        } else {
            format!("{top}/{}", within.as_str())
        }
    };
    let counts_at = |folder: &str, top: &str| {
        let inner = folder
            .strip_prefix(top)
            .and_then(|rest| rest.strip_suffix(reserved))
            .map(|rest| rest.trim_matches('/'))
            .unwrap_or_default();
        VolumePath::parse(inner).unwrap_or_else(|_| VolumePath::root())
    };
    let mut things = Vec::new();
    for folder in kept_folders(volume, &beneath("trash"))? {
        let Some(dir) = volume.reserved_folder(&folder, false)? else {
            continue;
        };
        let root = counts_at(&folder, "trash");
        for id in kept_names(&dir, &folder)? {
            // Its files (the entry and its versions), as the quotas counted them: the
            // item's record is kubedav's.
            let bytes = volume
                .reserved_folder(&format!("{folder}/{id}"), false)?
                .map_or(0, |item| {
                    let record = rustix::fs::statx(
                        &item,
                        RECORD,
                        AtFlags::SYMLINK_NOFOLLOW,
                        rustix::fs::StatxFlags::SIZE,
                    )
                    .map_or(0, |stx| stx.stx_size);
                    tree_bytes(&item).saturating_sub(record)
                });
            things.push(KeptThing {
                counts_at: root.clone(),
                kept_unix_ns: made_at(&id).unwrap_or_default(),
                bytes,
                folder: folder.clone(),
                name: id,
                item: true,
            });
        }
    }
    for folder in kept_folders(volume, &beneath("versions"))? {
        let Some(dir) = volume.reserved_folder(&folder, false)? else {
            continue;
        };
        let file = counts_at(&folder, "versions");
        for id in kept_names(&dir, &folder)? {
            let Ok(stx) = rustix::fs::statx(
                &dir,
                id.as_str(),
                AtFlags::SYMLINK_NOFOLLOW,
                rustix::fs::StatxFlags::SIZE,
            ) else {
                continue;
            };
            things.push(KeptThing {
                counts_at: file.clone(),
                kept_unix_ns: made_at(&id).unwrap_or_default(),
                bytes: stx.stx_size,
                folder: folder.clone(),
                name: id,
                item: false,
            });
        }
    }
    Ok(things)
}

/// Removes the oldest things kept beneath `within` until `need` bytes are freed or
/// nothing is left; the bytes freed. A trash item is claimed first, as the retention
/// does, so two replicas never both count one.
pub fn make_room(volume: &Volume, keeping: &Keeping, within: &VolumePath, need: u64) -> Result<u64, Status> {
    let mut things = kept_things(volume, within)?;
    things.sort_by_key(|thing| thing.kept_unix_ns);
    let mut freed = 0u64;
    for thing in things {
        if freed >= need {
            break;
        }
        let Some(dir) = volume.reserved_folder(&thing.folder, false)? else {
            continue;
        };
        if thing.item {
            let Some(claimed) = claim(volume, keeping, &dir, &thing.name, &thing.folder)? else {
                continue;
            };
            remove_tree_at(volume, &format!("{PURGING}/{claimed}"))?;
        } else {
            match rustix::fs::unlinkat(&dir, thing.name.as_str(), AtFlags::empty()) {
                Ok(()) => {}
                Err(rustix::io::Errno::NOENT) => continue,
                Err(e) => {
                    return Err(reserved_failed(
                        "remove",
                        &format!("{}/{}", thing.folder, thing.name),
                        e,
                    ));
                }
            }
        }
        freed = freed.saturating_add(thing.bytes);
    }
    Ok(freed)
}

/// The bytes of every file beneath the open folder `dir` (symlinks not followed).
fn tree_bytes(dir: &OwnedFd) -> u64 {
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        return 0;
    };
    let mut total = 0u64;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        let Ok(stx) = rustix::fs::statx(
            dir,
            name,
            AtFlags::SYMLINK_NOFOLLOW,
            rustix::fs::StatxFlags::SIZE | rustix::fs::StatxFlags::TYPE,
        ) else {
            continue;
        };
        if is_dir(&stx) {
            if let Ok(inner) = rustix::fs::openat(
                dir,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                total = total.saturating_add(tree_bytes(&inner));
            }
        } else if !crate::metadata::is_symlink(&stx) {
            total = total.saturating_add(stx.stx_size);
        }
    }
    total
}
