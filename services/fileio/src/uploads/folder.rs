//! The files of an upload's folder on a volume: reading and replacing its state, its
//! bytes and the chunks kept aside, listing and removing them.

use super::{Record, not_found};
use crate::digest::Digester;
use crate::errors::{Op, io_status};
use crate::volume::reserved_failed;
use kubedav_api::path::VolumePath;
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use tonic::Status;

pub(super) const DATA: &str = "data";
pub(super) const STATE: &str = "state.json";
pub(super) const STATE_NEW: &str = "state.json.new";
/// Where a chunk that does not go into `data` at once is received.
pub(super) const CHUNK_NEW: &str = "chunk.new";
/// Largest state file read back: 10,000 chunks of 20-digit keys and lengths fit.
pub(super) const MAX_STATE_BYTES: u64 = 1024 * 1024;
/// Bytes an append gathers before handing them to the blocking pool in one write.
pub(super) const BATCH_BYTES: usize = 1024 * 1024;

/// The names in `folder`, but `.` and `..`.
pub(super) fn names(folder: &OwnedFd) -> Vec<String> {
    let Ok(entries) = rustix::fs::Dir::read_from(folder) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str().ok().map(str::to_owned))
        .filter(|name| name != "." && name != "..")
        .collect()
}

pub(super) fn open_folder(parent: &OwnedFd, name: &str) -> Result<OwnedFd, Status> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(parent, name, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {
            Err(not_found())
        }
        Err(e) => Err(reserved_failed("open", "an upload's folder", e)),
    }
}

/// Whether the folder `name` in `parent` was last changed more than `age` ago (by the
/// file system's clock).
pub(super) fn older_than(parent: &OwnedFd, name: &str, age: std::time::Duration) -> bool {
    let Ok(stx) = rustix::fs::statx(
        parent,
        name,
        AtFlags::SYMLINK_NOFOLLOW,
        rustix::fs::StatxFlags::MTIME,
    ) else {
        return false;
    };
    let changed = std::time::UNIX_EPOCH + std::time::Duration::from_secs(stx.stx_mtime.tv_sec.max(0) as u64);
    std::time::SystemTime::now()
        .duration_since(changed)
        .is_ok_and(|since| since > age)
}

/// Whether a request holds upload `id` right now.
pub(super) fn busy(owners: &OwnedFd, id: &str) -> bool {
    let Ok(folder) = open_folder(owners, id) else {
        return false;
    };
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(data) = rustix::fs::openat(&folder, DATA, flags, Mode::empty()) else {
        return false;
    };
    rustix::fs::flock(&data, FlockOperation::NonBlockingLockExclusive) == Err(rustix::io::Errno::WOULDBLOCK)
}

pub(super) fn read_record(folder: &OwnedFd) -> Result<Record, Status> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(folder, STATE, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Err(not_found()),
        Err(e) => return Err(reserved_failed("read", "an upload's state", e)),
    };
    let mut text = Vec::new();
    File::from(fd)
        .take(MAX_STATE_BYTES)
        .read_to_end(&mut text)
        .map_err(|e| Status::internal(format!("cannot read an upload's state: {e}")))?;
    serde_json::from_slice(&text).map_err(|e| Status::internal(format!("an upload's state is damaged: {e}")))
}

/// Replaces the state with `record`: written beside it, synced, renamed over it; the
/// rename synced too when the state is `new`.
pub(super) fn write_record(
    folder: &OwnedFd,
    record: &Record,
    durability: crate::volume::Durability,
    new: bool,
) -> Result<(), Status> {
    let text = serde_json::to_vec(record).map_err(|e| Status::internal(e.to_string()))?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(folder, STATE_NEW, flags, Mode::from_raw_mode(0o600))
        .map_err(|e| reserved_failed("write", "an upload's state", e))?;
    let mut file = File::from(fd);
    file.write_all(&text).map_err(|e| io_error(e, &record.target))?;
    durability
        .sync_data(&file)
        .map_err(|e| io_error(e, &record.target))?;
    rustix::fs::renameat(folder, STATE_NEW, folder, STATE)
        .map_err(|e| reserved_failed("replace", "an upload's state", e))?;
    // A new state must outlive a crash. An update need not: if the rename is lost, the
    // older state says less was received, and the client sends that part again (a HEAD
    // tells it). That saves a directory sync per request (a tenth of a TUS upload's
    // throughput here: docs/benchmarks.md).
    match new {
        true => durability.sync_dir(folder, &VolumePath::root()),
        false => Ok(()),
    }
}

/// Removes upload `id` (its bytes, its state, its folder), whatever is left of it.
pub(super) fn remove(owners: &OwnedFd, id: &str) {
    if let Ok(folder) = open_folder(owners, id) {
        // Its bytes, its state, and any chunk kept aside.
        for name in names(&folder) {
            let _ = rustix::fs::unlinkat(&folder, name.as_str(), AtFlags::empty());
        }
    }
    if let Err(e) = rustix::fs::unlinkat(owners, id, AtFlags::REMOVEDIR)
        && e != rustix::io::Errno::NOENT
    {
        tracing::warn!(id, error = %e, "could not remove an upload's folder");
    }
}

/// Feeds the first `length` bytes of `data` to `digester`.
pub(super) fn read_through(
    data: &File,
    length: u64,
    digester: &mut Digester,
    path: &VolumePath,
) -> Result<(), Status> {
    let mut buffer = vec![0u8; BATCH_BYTES];
    let mut at = 0u64;
    while at < length {
        let want = usize::try_from(length - at).map_or(buffer.len(), |left| left.min(buffer.len()));
        let read = data
            .read_at(&mut buffer[..want], at)
            .map_err(|e| io_error(e, path.as_str()))?;
        if read == 0 {
            return Err(Status::internal(format!(
                "the upload for {path} is shorter than its state says"
            )));
        }
        digester.update(&buffer[..read]);
        at += read as u64;
    }
    Ok(())
}

/// Copies the first `length` bytes of `from` into `to` at `at`.
pub(super) fn copy_into(from: &File, length: u64, to: &File, at: u64, target: &str) -> Result<(), Status> {
    let mut buffer = vec![0u8; BATCH_BYTES.min(usize::try_from(length).unwrap_or(BATCH_BYTES))];
    let mut done = 0u64;
    while done < length {
        let want = usize::try_from(length - done).map_or(buffer.len(), |left| left.min(buffer.len()));
        let read = from
            .read_at(&mut buffer[..want], done)
            .map_err(|e| io_error(e, target))?;
        if read == 0 {
            return Err(Status::internal(
                "a chunk kept aside is shorter than its state says",
            ));
        }
        to.write_all_at(&buffer[..read], at + done)
            .map_err(|e| io_error(e, target))?;
        done += read as u64;
    }
    Ok(())
}

pub(super) fn io_error(e: std::io::Error, target: &str) -> Status {
    let path = VolumePath::parse(target).unwrap_or_else(|_| VolumePath::root());
    match e.raw_os_error() {
        Some(code) => io_status(rustix::io::Errno::from_raw_os_error(code), Op::Write, &path),
        None => Status::internal(format!("writing an upload for {target} failed: {e}")),
    }
}

pub(super) fn aside_name(key: u64) -> String {
    format!("chunk.{key}")
}
