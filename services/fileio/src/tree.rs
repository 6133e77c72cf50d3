//! Changing collections: creating one ([`mkdir`]) and removing a tree ([`delete`],
//! [`remove_entry`]), each member's failure reported on its own.

use crate::Volume;
use crate::errors::{Op, io_status};
use crate::keep::TrashItem;
use crate::keep::volume::Keeper;
use crate::metadata::{file_info, is_dir, stat_at};
use kubedav_api::fileio::FileInfo;
use kubedav_api::path::VolumePath;
use kubedav_api::pb::fileio::v1::Failure;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, Dir, Mode, OFlags};
use tonic::Status;

/// Creates the collection `path`; its parent must exist.
pub fn mkdir(volume: &Volume, path: &VolumePath) -> Result<FileInfo, Status> {
    if path.is_root() {
        return Err(Status::already_exists("the root collection already exists"));
    }
    let (dir, name) = volume.open_parent(path)?;
    rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755))
        .map_err(|e| io_status(e, Op::Create, path))?;
    volume.durability().sync_dir(&dir, path)?;
    Ok(file_info(path, &stat_at(&dir, name, path)?))
}

/// One directory being emptied by [`delete`].
struct Frame {
    fd: OwnedFd,
    entries: Dir,
    /// Its name in its parent (a hidden name may differ from `path`'s last name).
    name: String,
    path: VolumePath,
    failed: bool,
}

/// Deletes `path`, and everything below it if it is a collection. Members that cannot be
/// deleted are returned (their ancestors stay, and are not reported, as RFC 4918 9.6.1
/// asks); the walk never follows a symlink.
pub fn delete(
    volume: &Volume,
    path: &VolumePath,
    if_match: Option<&str>,
    keeper: Option<&Keeper>,
) -> Result<(Vec<Failure>, Option<TrashItem>), Status> {
    if path.is_root() {
        return Err(Status::permission_denied("the root collection cannot be deleted"));
    }
    let (parent, name) = volume.open_parent(path).map_err(|status| match status.code() {
        tonic::Code::FailedPrecondition => Status::not_found(format!("{path} does not exist")),
        _ => status,
    })?;
    // A file's check and unlink are one step for other commits to it (`serial.rs`); a
    // tree's removal is long and is not serialized.
    let mut serialized = Some(crate::serial::lock(path));
    let stx = stat_at(&parent, name, path)?;
    volume.refuse_escaping_symlink(&stx, path)?;
    if let Some(wanted) = if_match
        && crate::metadata::etag(&stx) != wanted
    {
        return Err(Status::aborted(format!(
            "{path} changed: its etag is no longer {wanted}"
        )));
    }
    if let Some(keeper) = keeper
        && let Some(item) = keeper.trash(&parent, name, path, &stx)?
    {
        return Ok((Vec::new(), Some(item)));
    }
    if is_dir(&stx) {
        serialized = None;
    }
    let failures = remove_entry(&parent, name, path, &stx)?;
    drop(serialized);
    volume.durability().sync_dir(&parent, path)?;
    if let Some(keeper) = keeper
        && failures.is_empty()
    {
        keeper.forget_versions(path)?;
    }
    Ok((failures, None))
}

/// Removes `name` from the open directory `parent`: a file (or symlink) is unlinked, a
/// directory emptied and removed. Members that could not be removed are returned, and
/// keep their ancestors.
pub fn remove_entry(
    parent: &OwnedFd,
    name: &str,
    path: &VolumePath,
    stx: &rustix::fs::Statx,
) -> Result<Vec<Failure>, Status> {
    if !is_dir(stx) {
        rustix::fs::unlinkat(parent, name, AtFlags::empty()).map_err(|e| io_status(e, Op::Other, path))?;
        return Ok(Vec::new());
    }
    let mut failures = Vec::new();
    let mut stack = vec![open_frame(parent, name, path.clone())?];
    while let Some(top) = stack.last_mut() {
        match top.entries.next() {
            Some(Ok(entry)) => {
                let Ok(entry_name) = entry.file_name().to_str() else {
                    top.failed = true;
                    continue;
                };
                if entry_name == "." || entry_name == ".." {
                    continue;
                }
                let entry_name = entry_name.to_owned();
                let member = top.path.join(&entry_name).unwrap_or_else(|_| top.path.clone());
                let member_is_dir = stat_at(&top.fd, &entry_name, &member)
                    .map(|s| is_dir(&s))
                    .unwrap_or(false);
                if member_is_dir {
                    match open_frame(&top.fd, &entry_name, member.clone()) {
                        Ok(frame) => stack.push(frame),
                        Err(status) => {
                            top.failed = true;
                            failures.push(failure(&member, &status));
                        }
                    }
                } else if let Err(e) = rustix::fs::unlinkat(&top.fd, entry_name.as_str(), AtFlags::empty()) {
                    top.failed = true;
                    failures.push(failure(&member, &io_status(e, Op::Other, &member)));
                }
            }
            Some(Err(e)) => {
                top.failed = true;
                let status = io_status(e, Op::Other, &top.path);
                failures.push(failure(&top.path.clone(), &status));
                // Skip the rest of this directory.
                let done = stack.pop().expect("frame exists");
                if let Some(parent) = stack.last_mut() {
                    parent.failed = true;
                }
                drop(done);
            }
            None => {
                let done = stack.pop().expect("frame exists");
                let parent_fd = match stack.last() {
                    Some(frame) => frame.fd.as_fd(),
                    None => parent.as_fd(),
                };
                if done.failed {
                    if let Some(frame) = stack.last_mut() {
                        frame.failed = true;
                    }
                    continue;
                }
                if let Err(e) = rustix::fs::unlinkat(parent_fd, done.name.as_str(), AtFlags::REMOVEDIR) {
                    failures.push(failure(&done.path, &io_status(e, Op::Other, &done.path)));
                    if let Some(frame) = stack.last_mut() {
                        frame.failed = true;
                    }
                }
            }
        }
    }
    Ok(failures)
}

fn open_frame(parent: &OwnedFd, name: &str, path: VolumePath) -> Result<Frame, Status> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd =
        rustix::fs::openat(parent, name, flags, Mode::empty()).map_err(|e| io_status(e, Op::Other, &path))?;
    let entries = Dir::read_from(&fd).map_err(|e| io_status(e, Op::Other, &path))?;
    Ok(Frame {
        fd,
        entries,
        name: name.to_owned(),
        path,
        failed: false,
    })
}

/// A member of a tree operation that failed, as the reply names it.
pub fn failure(path: &VolumePath, status: &Status) -> Failure {
    Failure {
        path: path.as_str().to_owned(),
        code: status.code() as i32,
        message: status.message().to_owned(),
    }
}
