//! What is kept on a volume, over time and under pressure: the retention
//! ([`retain`], every 10 minutes on a thread of its own) removes trash items and versions
//! past their days; [`make_room`] removes the oldest when a quota root is full; and
//! [`kept_things`] is what the quotas count. Several replicas on one volume claim each
//! trash item by one rename before removing it, so each is removed once.

use super::volume::{RECORD, kept_names, remove_file, remove_tree_at};
use super::{Keeping, made_at};
use crate::metadata::is_dir;
use crate::metrics::KeptFigures;
use crate::volume::{Volume, reserved_failed};
use kubedav_api::path::VolumePath;
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use std::collections::BTreeMap;
use std::sync::Arc;
use tonic::Status;

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
                // Counted by the replica whose unlink removed it.
                if made_at(&id).is_some_and(|made| made < oldest_kept) && remove_file(&dir, &id, &folder)? {
                    retained.versions += 1;
                }
            }
        }
    }
    Ok(retained)
}

/// What is kept beneath each quota root: trash items by their root, versions by their
/// file's root.
pub fn figures(volume: &Volume, keeping: &Keeping) -> Result<BTreeMap<String, KeptFigures>, Status> {
    let mut by_root: BTreeMap<String, KeptFigures> = BTreeMap::new();
    for thing in kept_things(volume, &VolumePath::root())? {
        let root = if thing.item {
            thing.counts_at.clone()
        } else {
            (keeping.root_of)(&thing.counts_at)
        };
        let figures = by_root.entry(root.as_str().to_owned()).or_default();
        if thing.item {
            figures.items += 1;
            figures.item_bytes += thing.bytes;
        } else {
            figures.versions += 1;
            figures.version_bytes += thing.bytes;
        }
    }
    Ok(by_root)
}

/// Counts and logs what one retention pass removed, or why it failed.
pub fn report(pass: Result<Retained, Status>) {
    match pass {
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
        Err(status) => tracing::warn!(target: "kubedav", "retention failed: {}", status.message()),
    }
}

/// Runs [`retain`] every `keeping.retain_every` (jittered) on a thread of its own, until
/// the volume is dropped.
pub fn retain_in_background(volume: std::sync::Weak<Volume>, keeping: Arc<Keeping>) {
    if keeping.retain_every.is_zero() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("retention".into())
        .spawn(move || {
            let mut first = true;
            loop {
                // At once as the replica starts (claims a crash left are finished), then
                // every period.
                if !std::mem::take(&mut first) {
                    let jitter = keeping.retain_every.mul_f64(fastrand::f64() / 10.0);
                    std::thread::sleep(keeping.retain_every + jitter);
                }
                let Some(volume) = volume.upgrade() else { return };
                report(retain(&volume, &keeping));
                match figures(&volume, &keeping) {
                    Ok(by_root) => crate::metrics::kept(&by_root),
                    Err(status) => {
                        tracing::warn!(target: "kubedav", "counting what is kept failed: {}", status.message())
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
    let beneath = |top: &str| beneath(top, within);
    let mut things = Vec::new();
    for folder in kept_folders(volume, &beneath("trash"))? {
        let Some(dir) = volume.reserved_folder(&folder, false)? else {
            continue;
        };
        let root = kept_path(&folder, "trash");
        for id in kept_names(&dir, &folder)? {
            let bytes = item_bytes(volume, &dir, &id, &folder)?;
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
        let file = kept_path(&folder, "versions");
        for version in super::volume::versions_in(&dir, &folder)? {
            things.push(KeptThing {
                counts_at: file.clone(),
                kept_unix_ns: version.replaced_unix_ns,
                bytes: version.bytes,
                folder: folder.clone(),
                name: version.id,
                item: false,
            });
        }
    }
    Ok(things)
}

/// The bytes of trash item `id` of the items folder `items` (at `folder`): its files
/// (the entry and its versions), as the quotas counted them; an item's record in the
/// folder shape is kubedav's.
fn item_bytes(volume: &Volume, items: &OwnedFd, id: &str, folder: &str) -> Result<u64, Status> {
    if super::flat::is_flat_id(id) {
        // The entry itself (never a symlink: one cannot carry the mark).
        return Ok(match super::flat::stat(items, id, folder)? {
            Some(stx) if is_dir(&stx) => volume
                .reserved_folder(&format!("{folder}/{id}"), false)?
                .map_or(0, |item| tree_bytes(&item)),
            Some(stx) => stx.stx_size,
            None => 0,
        });
    }
    let Some(item) = volume.reserved_folder(&format!("{folder}/{id}"), false)? else {
        return Ok(0);
    };
    let record = rustix::fs::statx(
        &item,
        RECORD,
        AtFlags::SYMLINK_NOFOLLOW,
        rustix::fs::StatxFlags::SIZE,
    )
    .map_or(0, |stx| stx.stx_size);
    Ok(tree_bytes(&item).saturating_sub(record))
}

/// The quota roots at or beneath `within` that hold trash items (or did).
pub fn trash_roots(volume: &Volume, within: &VolumePath) -> Result<Vec<VolumePath>, Status> {
    Ok(kept_folders(volume, &beneath("trash", within))?
        .iter()
        .map(|folder| kept_path(folder, "trash"))
        .collect())
}

/// The mirror of `within` under `top` (`trash` or `versions`).
fn beneath(top: &str, within: &VolumePath) -> String {
    if within.is_root() {
        top.to_owned()
    } else {
        format!("{top}/{}", within.as_str())
    }
}

/// The path a kept folder under `top` is of (`trash/a/b/.kubedav`: the root `a/b`).
fn kept_path(folder: &str, top: &str) -> VolumePath {
    let inner = folder
        .strip_prefix(top)
        .and_then(|rest| rest.strip_suffix(kubedav_api::path::RESERVED_AREA))
        .map(|rest| rest.trim_matches('/'))
        .unwrap_or_default();
    VolumePath::parse(inner).unwrap_or_else(|_| VolumePath::root())
}

/// Removes the oldest things kept beneath `within` until `need` bytes are freed or
/// nothing is left; the bytes freed and how many things went. A trash item is claimed
/// first, as the retention does, so two replicas never both count one.
pub fn make_room(
    volume: &Volume,
    keeping: &Keeping,
    within: &VolumePath,
    need: u64,
) -> Result<(u64, u64), Status> {
    let mut things = kept_things(volume, within)?;
    things.sort_by_key(|thing| thing.kept_unix_ns);
    let (mut freed, mut removed) = (0u64, 0u64);
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
        removed += 1;
    }
    Ok((freed, removed))
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
