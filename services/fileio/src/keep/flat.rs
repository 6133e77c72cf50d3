//! Trash items that are their entry itself: `.kubedav/trash/{root}/.kubedav/{id}` is the
//! deleted file or collection, renamed there whole, and its record (where it was, who
//! deleted it) is the extended attribute [`TRASHED_ATTRIBUTE`] of the entry. The rest of
//! a record is in the entry itself: when it was deleted (its id), whether it is a
//! collection, its size.
//!
//! This is the shape of every item that can have it; the [`super::volume`] folder shape
//! (a folder per item holding `entry`, `versions` and the record) remains for an entry
//! with versions to take along, and for one that cannot carry the attribute (a symlink,
//! a read-only file, a file system without user attributes). Why: a DELETE that makes a
//! folder per item makes a directory (an inode and a block) and syncs a new directory,
//! which a file system without a journal (ext4 without one) does by writing that folder
//! and its parent. Measured on such a volume (docs/benchmarks.md, "2026-11-28 (9)"): the
//! folder shape's syscalls cost 157–181 µs of CPU where an unlink's cost 89–95, this
//! shape's 105–111; a PUT then DELETE with the trash went from 1.11 to 1.05 times the CPU
//! of one without.

use super::ItemRecord;
use super::made_at;
use crate::metadata::is_dir;
use crate::volume::reserved_failed;
use rustix::fd::{AsRawFd, OwnedFd};
use rustix::fs::{AtFlags, XattrFlags};
use serde::{Deserialize, Serialize};
use tonic::Status;

/// The attribute of a flat item's entry that holds its record (JSON of [`Marked`]).
pub const TRASHED_ATTRIBUTE: &str = "user.kubedav.trashed";

/// What the attribute holds: what the entry itself cannot tell.
#[derive(Serialize, Deserialize)]
struct Marked {
    path: String,
    by: String,
}

/// The name by which the attribute of `name` in the open folder `dir` is reached without
/// opening it (a file may be unreadable to its owner, and a collection or a file cannot be
/// opened alike): the folder's descriptor in `/proc/self/fd`, then the name, one segment.
fn by_proc(dir: &OwnedFd, name: &str) -> String {
    format!("/proc/self/fd/{}/{name}", dir.as_raw_fd())
}

/// Marks `name` in `parent` as deleted from `path` by `by`, before it is renamed into the
/// trash. False when it cannot carry the mark (a symlink, no permission, no room for the
/// attribute, no `/proc`): it then goes to the trash in the folder shape.
pub fn mark(parent: &OwnedFd, name: &str, path: &str, by: &str) -> bool {
    let Ok(json) = serde_json::to_vec(&Marked {
        path: path.to_owned(),
        by: by.to_owned(),
    }) else {
        return false;
    };
    // Replacing: a mark a crash left on a file in place (marked, not yet renamed) is
    // stale, and is overwritten.
    rustix::fs::lsetxattr(
        by_proc(parent, name),
        TRASHED_ATTRIBUTE,
        &json,
        XattrFlags::empty(),
    )
    .is_ok()
}

/// Removes the mark of `name` in `dir`: from an entry restored (or left in place when its
/// rename failed). Best effort: a stale mark is never read outside the trash.
pub fn unmark(dir: &OwnedFd, name: &str) {
    let _ = rustix::fs::lremovexattr(by_proc(dir, name), TRASHED_ATTRIBUTE);
}

/// How many random hex digits a flat item's id has ([`super::Keeping::new_name`]); an item
/// in the folder shape has 16. The shape is told by the id, never by what the entry holds:
/// a deleted collection may hold members named `entry` or `item.json`.
pub const ID_RANDOM_HEX: usize = 18;

/// Whether `id` names a flat item.
pub fn is_flat_id(id: &str) -> bool {
    made_at(id).is_some()
        && id
            .split_once('-')
            .is_some_and(|(_, random)| random.len() == ID_RANDOM_HEX)
}

/// The record of the flat item `id` in the items folder `items` (at `folder`), described
/// by `stx`; `None` when `id` carries no mark (a crash on a file system without a journal
/// lost it) or is gone.
pub fn record(
    items: &OwnedFd,
    id: &str,
    stx: &rustix::fs::Statx,
    folder: &str,
) -> Result<Option<ItemRecord>, Status> {
    use rustix::io::Errno;
    let mut buffer = vec![0u8; 4096];
    let size = loop {
        match rustix::fs::lgetxattr(by_proc(items, id), TRASHED_ATTRIBUTE, &mut buffer[..]) {
            Ok(n) => break n,
            Err(Errno::RANGE) if buffer.len() < 64 << 10 => buffer.resize(64 << 10, 0),
            // NOENT: `id` went meanwhile (a purge, a restore), or there is no `/proc`.
            Err(Errno::NODATA | Errno::NOTSUP | Errno::PERM | Errno::NOENT) => return Ok(None),
            Err(e) => {
                return Err(reserved_failed(
                    "read the record of",
                    &format!("{folder}/{id}"),
                    e,
                ));
            }
        }
    };
    let Ok(marked) = serde_json::from_slice::<Marked>(&buffer[..size]) else {
        return Ok(None);
    };
    Ok(Some(described(id, stx, marked.path, marked.by)))
}

/// A record made of what the entry `id` (described by `stx`) tells, deleted from `path`
/// by `by`.
pub fn described(id: &str, stx: &rustix::fs::Statx, path: String, by: String) -> ItemRecord {
    ItemRecord {
        path,
        collection: is_dir(stx),
        deleted_unix_ns: made_at(id).unwrap_or_default(),
        by,
        bytes: if is_dir(stx) { 0 } else { stx.stx_size },
        etag: String::new(),
    }
}

/// Describes `id` in `items` without following a symlink.
pub fn stat(items: &OwnedFd, id: &str, folder: &str) -> Result<Option<rustix::fs::Statx>, Status> {
    match rustix::fs::statx(
        items,
        id,
        AtFlags::SYMLINK_NOFOLLOW,
        rustix::fs::StatxFlags::TYPE | rustix::fs::StatxFlags::SIZE | rustix::fs::StatxFlags::MODE,
    ) {
        Ok(stx) => Ok(Some(stx)),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(reserved_failed("read", &format!("{folder}/{id}"), e)),
    }
}
