//! Trash and versions on a volume: every step is a rename (or a hard link) within the
//! volume's filesystem, so keeping costs the same whatever the size.
//!
//! * **Trash** (`.kubedav/trash/{root}/.kubedav/{id}`): flat where it can be (`flat.rs`:
//!   the entry itself, marked with its record, renamed in, the items folder synced).
//!   Otherwise (versions to take along, no mark possible) in a folder: the item's folder is
//!   made with its record in an extended attribute (`item.json` beside it where the
//!   attribute does not fit), then the entry is renamed in as `entry`, then the mirror of
//!   its versions as `versions`, and the item's folder synced. A crash between leaves an
//!   item without an entry (never listed) or the versions at their old mirror.
//! * **Versions** (`.kubedav/versions/{path}/.kubedav/{id}`): the file about to be
//!   replaced is hard-linked there before the new content is renamed over it: a reader
//!   sees the old or the new file, and a crash between leaves one version too many. A
//!   version is the old inode, dead properties and checksums included.
//!
//! **One sync a change, as without keeping.** Every step above is a change of names
//! (mkdir, an attribute, link, rename), none of a file's data. A journaling file system
//! (ext4, XFS) commits such changes in the order they were made, and an `fsync` commits
//! every change made before it: the sync that makes a DELETE's rename durable (of the
//! item's folder) or a PUT's (of the file's folder) makes every earlier step durable with
//! it. So keeping adds no sync and no wait to the request (docs/trash-and-versions.md,
//! "What a kept change costs"). On a file system without that order, a crash could at
//! worst undo the last steps: a deleted file back in its place, a version not kept;
//! nothing kept is ever half there.

use super::{ItemRecord, Keeping, TrashItem, Version, flat, made_at, mirror, trash_folder, versions_folder};
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

    /// Moves the versions of `from` to `to` after a move.
    pub fn move_versions(&self, from: &VolumePath, to: &VolumePath) -> Result<(), Status> {
        move_versions(&self.volume, from, to)
    }
}

/// The record of a trash item, in its folder, where its folder's attribute could not
/// hold it.
pub(super) const RECORD: &str = "item.json";
/// The extended attribute of an item's folder that holds its record (JSON).
const RECORD_ATTRIBUTE: &str = "user.kubedav.item";
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
    // The root's items folder exists after its first item: one open.
    let items = volume.reserved_folder(&trash_folder(&root), true)?.expect("made");
    let versions = mirror(path);
    // The flat shape (`flat.rs`) where the entry has no versions to take along and can
    // carry its mark: one rename, one sync of the items folder.
    if volume.reserved_folder(&versions, false)?.is_none() && flat::mark(parent, name, path.as_str(), by) {
        let (id, _) = keeping.new_name(flat::ID_RANDOM_HEX);
        return match rustix::fs::renameat_with(parent, name, &items, id.as_str(), RenameFlags::NOREPLACE) {
            Ok(()) => {
                // The one sync: the mark and the rename out of `parent` were made before it.
                volume.durability().sync_dir(&items, path)?;
                let record = flat::described(&id, stx, path.as_str().to_owned(), by.to_owned());
                Ok(Some(TrashItem { id, root, record }))
            }
            Err(rustix::io::Errno::XDEV) => {
                flat::unmark(parent, name);
                tracing::warn!(target: "kubedav", %path, "on another filesystem than the trash: deleted, not kept");
                Ok(None)
            }
            Err(e) => {
                flat::unmark(parent, name);
                Err(io_status(e, Op::Other, path))
            }
        };
    }
    // The folder shape: the item's own folder made and opened in the items folder.
    let (id, _) = keeping.new_name(16);
    let folder = format!("{}/{id}", trash_folder(&root));
    rustix::fs::mkdirat(&items, id.as_str(), Mode::from_raw_mode(0o700))
        .map_err(|e| reserved_failed("make", &folder, e))?;
    let item = rustix::fs::openat(
        &items,
        id.as_str(),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| reserved_failed("open", &folder, e))?;
    let record = flat::described(&id, stx, path.as_str().to_owned(), by.to_owned());
    let json = serde_json::to_vec(&record).map_err(|e| Status::internal(format!("trash record: {e}")))?;
    write_record(volume, &item, &json, &folder)?;
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
    if let Some(area) = volume.reserved_folder("", false)? {
        match rustix::fs::renameat(&area, versions.as_str(), &item, VERSIONS) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => {
                tracing::warn!(target: "kubedav", %path, error = %e, "its versions stay behind in the trash")
            }
        }
    }
    // The one sync: the rename out of `parent`, the item's folder and its record were
    // all made before it (see the module's documentation).
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
    // Not synced here: the caller's sync of the file's folder, after the rename over it,
    // makes the link durable with it (see the module's documentation).
    let names = kept_names(&versions, &folder)?;
    let excess = names.len().saturating_sub(keeping.versions_max as usize);
    let mut removed = 0;
    for old in &names[..excess] {
        removed += u64::from(remove_file(&versions, old, &folder)?);
    }
    crate::metrics::purged("count", removed);
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
    Ok(find_item(volume, root, id)?.map(|found| found.record))
}

/// A trash item found: its record, and where its entry is.
struct Found {
    record: ItemRecord,
    /// The items folder of its root.
    items: OwnedFd,
    /// Its own folder, in the folder shape; `None` in the flat shape (the entry is `id`
    /// in `items`).
    folder: Option<OwnedFd>,
}

/// Trash item `id` of `root`, in either shape (told by its id), if it is whole. A flat
/// item whose mark a crash lost (only on a file system without a journal; `flat.rs`) is
/// found with the record its entry tells, as deleted from `{root}/{id}`.
fn find_item(volume: &Volume, root: &VolumePath, id: &str) -> Result<Option<Found>, Status> {
    if made_at(id).is_none() {
        return Ok(None);
    }
    let items_folder = trash_folder(root);
    let Some(items) = volume.reserved_folder(&items_folder, false)? else {
        return Ok(None);
    };
    if flat::is_flat_id(id) {
        let Some(stx) = flat::stat(&items, id, &items_folder)? else {
            return Ok(None);
        };
        if let Some(record) = flat::record(&items, id, &stx, &items_folder)? {
            return Ok(Some(Found {
                record,
                items,
                folder: None,
            }));
        }
        // No mark: lost to a crash, or `id` went meanwhile.
        return Ok(flat::stat(&items, id, &items_folder)?.map(|stx| lost_mark(root, id, &stx, items)));
    }
    let folder = format!("{items_folder}/{id}");
    let Some(item) = volume.reserved_folder(&folder, false)? else {
        return Ok(None);
    };
    if rustix::fs::statat(&item, ENTRY, AtFlags::SYMLINK_NOFOLLOW).is_err() {
        return Ok(None);
    }
    let Some(json) = read_record(&item, &folder)? else {
        return Ok(None);
    };
    Ok(serde_json::from_slice(&json).ok().map(|record| Found {
        record,
        items,
        folder: Some(item),
    }))
}

/// A flat item without its mark, as found: restored by default into its root, named by
/// its id.
fn lost_mark(root: &VolumePath, id: &str, stx: &rustix::fs::Statx, items: OwnedFd) -> Found {
    let path = if root.is_root() {
        id.to_owned()
    } else {
        format!("{}/{id}", root.as_str())
    };
    Found {
        record: flat::described(id, stx, path, String::new()),
        items,
        folder: None,
    }
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
    if destination.is_root() {
        return Err(Status::permission_denied(
            "the root collection cannot be replaced",
        ));
    }
    let found = find_item(volume, root, id)?.ok_or_else(not_found)?;
    let folder = format!("{}/{id}", trash_folder(root));
    let (entry_dir, entry_name) = match &found.folder {
        Some(item) => (item, ENTRY),
        None => (&found.items, id),
    };
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
    rustix::fs::renameat_with(entry_dir, entry_name, &parent, name, flags)
        .map_err(|e| io_status(e, Op::Create, destination))?;
    if found.folder.is_none() {
        flat::unmark(&parent, name);
    }
    drop(serialized);
    volume.durability().sync_dir(&parent, destination)?;
    let Some(item) = &found.folder else {
        return Ok(existing.is_none());
    };
    if let Some(area) = volume.reserved_folder("", false)?
        && rustix::fs::statat(item, VERSIONS, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    {
        let target = mirror(destination);
        if let Some((up, _)) = target.rsplit_once('/') {
            volume.reserved_folder(up, true)?;
        }
        match rustix::fs::renameat_with(item, VERSIONS, &area, target.as_str(), RenameFlags::NOREPLACE) {
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
    let items_folder = trash_folder(root);
    let exists = match volume.reserved_folder(&items_folder, false)? {
        Some(items) if made_at(id).is_some() => flat::stat(&items, id, &items_folder)?.is_some(),
        _ => false,
    };
    if !exists {
        return Err(Status::not_found(format!("no trash item {id}")));
    }
    remove_tree_at(volume, &format!("{}/{id}", trash_folder(root)))
}

/// The versions of the file at `path`, oldest first.
pub fn list_versions(volume: &Volume, path: &VolumePath) -> Result<Vec<Version>, Status> {
    let folder = versions_folder(path);
    match volume.reserved_folder(&folder, false)? {
        Some(dir) => versions_in(&dir, &folder),
        None => Ok(Vec::new()),
    }
}

/// The versions in the open versions folder `dir` (named `folder`), oldest first.
pub(super) fn versions_in(dir: &OwnedFd, folder: &str) -> Result<Vec<Version>, Status> {
    let mut versions = Vec::new();
    for id in kept_names(dir, folder)? {
        let Ok(stx) = rustix::fs::statx(
            dir,
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
pub(super) fn kept_names(dir: &OwnedFd, folder: &str) -> Result<Vec<String>, Status> {
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
pub(super) fn remove_tree_at(volume: &Volume, relative: &str) -> Result<(), Status> {
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

/// Removes the file `name` of `dir`; true when this call removed it, false when it was
/// gone already (another replica's retention, say).
pub(super) fn remove_file(dir: &OwnedFd, name: &str, folder: &str) -> Result<bool, Status> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::NOENT) => Ok(false),
        Err(e) => Err(reserved_failed("remove", &format!("{folder}/{name}"), e)),
    }
}

/// Writes a trash item's record on its new folder `item`: as the folder's extended
/// attribute [`RECORD_ATTRIBUTE`], a change of metadata that the item's one sync makes
/// durable; where the file system refuses it (no extended attributes, or no room for a
/// record with a long path), as the file [`RECORD`], synced on its own.
fn write_record(volume: &Volume, item: &OwnedFd, json: &[u8], folder: &str) -> Result<(), Status> {
    use rustix::io::Errno;
    match rustix::fs::fsetxattr(item, RECORD_ATTRIBUTE, json, rustix::fs::XattrFlags::CREATE) {
        Ok(()) => Ok(()),
        Err(Errno::NOTSUP | Errno::NOSPC | Errno::TOOBIG | Errno::RANGE) => {
            write_new_file(volume, item, RECORD, json, folder)
        }
        Err(e) => Err(reserved_failed("write the record of", folder, e)),
    }
}

/// The record of the trash item whose folder is `item`: its attribute, else its file.
fn read_record(item: &OwnedFd, folder: &str) -> Result<Option<Vec<u8>>, Status> {
    use rustix::io::Errno;
    let mut buffer = vec![0u8; 4096];
    loop {
        match rustix::fs::fgetxattr(item, RECORD_ATTRIBUTE, &mut buffer[..]) {
            Ok(n) => {
                buffer.truncate(n);
                return Ok(Some(buffer));
            }
            Err(Errno::RANGE) if buffer.len() < 64 << 10 => buffer.resize(64 << 10, 0),
            Err(Errno::NODATA | Errno::NOTSUP) => return read_file(item, RECORD, folder),
            Err(e) => return Err(reserved_failed("read the record of", folder, e)),
        }
    }
}

/// Writes `data` as the new file `name` of the new folder `dir` and syncs it, in place:
/// an item whose `entry` is not in yet is never listed, so no reader can meet the
/// record half written, and no temporary file and rename are needed.
fn write_new_file(
    volume: &Volume,
    dir: &OwnedFd,
    name: &str,
    data: &[u8],
    folder: &str,
) -> Result<(), Status> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| reserved_failed("write", &format!("{folder}/{name}"), e))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(data)
        .map_err(|e| Status::internal(format!("cannot write {folder}/{name}: {e}")))?;
    volume
        .durability()
        .sync_data(&file)
        .map_err(|e| Status::internal(format!("cannot sync {folder}/{name}: {e}")))
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
