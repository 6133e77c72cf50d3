//! COPY and MOVE (RFC 4918 9.8, 9.9) within the volume.

use crate::errors::{Op, io_status};
use crate::metadata::{is_dir, is_symlink, stat_at};
use crate::tree::{failure, remove_entry, visible_names};
use crate::write::Upload;
use crate::{Volume, props};
use kubedav_api::fileio::{Depth, TransferResponse};
use kubedav_api::path::VolumePath;
use kubedav_api::pb::fileio::v1::Failure;
use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags, RenameFlags, Statx};
use std::fs::File;
use tonic::Status;

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

fn refuse_overlap(source: &VolumePath, destination: &VolumePath) -> Result<(), Status> {
    if source == destination {
        return Err(Status::permission_denied(
            "the source and the destination are the same resource",
        ));
    }
    if destination.starts_with(source) || source.starts_with(destination) {
        return Err(Status::permission_denied(format!(
            "{source} and {destination} overlap; one contains the other"
        )));
    }
    Ok(())
}

/// The source, opened beneath the root and stat'ed (following symlinks inside the root).
fn open_source(volume: &Volume, source: &VolumePath) -> Result<(OwnedFd, Statx), Status> {
    let fd = volume.open_beneath(source, OFlags::RDONLY | OFlags::NONBLOCK)?;
    let stx = crate::metadata::stat_fd(&fd, source)?;
    Ok((fd, stx))
}

/// The destination's parent and name, and what exists there now. With `overwrite`, an
/// existing destination is removed first (RFC 4918 9.8.4); its failures are returned.
struct Destination {
    dir: OwnedFd,
    name: String,
    existed: bool,
}

fn prepare_destination(
    volume: &Volume,
    destination: &VolumePath,
    overwrite: bool,
    remove_existing: bool,
) -> Result<(Destination, Vec<Failure>, Option<Statx>), Status> {
    let (dir, name) = volume.open_parent(destination)?;
    let name = name.to_owned();
    let existing = match stat_at(&dir, &name, destination) {
        Ok(stx) => Some(stx),
        Err(status) if status.code() == tonic::Code::NotFound => None,
        Err(status) => return Err(status),
    };
    let mut failures = Vec::new();
    if let Some(stx) = &existing {
        volume.refuse_escaping_symlink(stx, destination)?;
        if !overwrite {
            return Err(Status::already_exists(format!(
                "{destination} exists and Overwrite is F"
            )));
        }
        if remove_existing {
            failures = remove_entry(&dir, &name, destination, stx)?;
        }
    }
    Ok((
        Destination {
            dir,
            name,
            existed: existing.is_some(),
        },
        failures,
        existing,
    ))
}

/// Copies `source` to `destination`: a file with its content and dead properties; a
/// collection with its dead properties and, with depth infinity, all its members.
/// Members that fail are reported and the rest go on.
pub fn copy(
    volume: &Volume,
    source: &VolumePath,
    destination: &VolumePath,
    depth: Depth,
    overwrite: bool,
) -> Result<TransferResponse, Status> {
    refuse_overlap(source, destination)?;
    if depth == Depth::One {
        return Err(Status::invalid_argument("COPY takes Depth 0 or infinity, not 1"));
    }
    let (source_fd, source_stx) = open_source(volume, source)?;
    let (dest, failures, _) = prepare_destination(volume, destination, overwrite, true)?;
    if !failures.is_empty() {
        return Ok(TransferResponse {
            created: false,
            failures,
        });
    }
    let mut failures = Vec::new();
    if !is_dir(&source_stx) {
        copy_file(File::from(source_fd), &dest.dir, &dest.name, destination)?;
    } else {
        make_collection_copy(&source_fd, &dest.dir, &dest.name, destination)?;
        if depth == Depth::Infinity {
            let target = rustix::fs::openat(&dest.dir, dest.name.as_str(), DIR_FLAGS, Mode::empty())
                .map_err(|e| io_status(e, Op::Other, destination))?;
            copy_tree(
                source_fd,
                target,
                source.clone(),
                destination.clone(),
                &mut failures,
            );
        }
    }
    rustix::fs::fsync(&dest.dir).map_err(|e| io_status(e, Op::Other, destination))?;
    Ok(TransferResponse {
        created: !dest.existed,
        failures,
    })
}

fn copy_file(mut source: File, dir: &OwnedFd, name: &str, path: &VolumePath) -> Result<(), Status> {
    let dir = rustix::io::fcntl_dupfd_cloexec(dir, 0).map_err(|e| io_status(e, Op::Other, path))?;
    let mut upload = Upload::create_in(dir, name.to_owned(), path.clone())?;
    upload.copy_from(&mut source)?;
    upload.commit(&Default::default(), false)?;
    Ok(())
}

fn make_collection_copy(
    source: &OwnedFd,
    dir: &OwnedFd,
    name: &str,
    path: &VolumePath,
) -> Result<(), Status> {
    rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)).map_err(|e| io_status(e, Op::Create, path))?;
    let raw = props::read_raw(source, path)?;
    if !raw.is_empty() {
        let created = rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty())
            .map_err(|e| io_status(e, Op::Other, path))?;
        props::write_raw(&created, &raw, path)?;
    }
    Ok(())
}

/// Copies the members of the open directory `source` into the open directory `target`,
/// depth first, without following symlinks (they are copied as symlinks).
fn copy_tree(
    source: OwnedFd,
    target: OwnedFd,
    source_path: VolumePath,
    target_path: VolumePath,
    failures: &mut Vec<Failure>,
) {
    let mut stack = vec![(source, target, source_path, target_path)];
    while let Some((source, target, source_path, target_path)) = stack.pop() {
        let names = match visible_names(&source, &source_path) {
            Ok(names) => names.collect::<Vec<_>>(),
            Err(status) => {
                failures.push(failure(&target_path, &status));
                continue;
            }
        };
        for name in names {
            let (Ok(from), Ok(to)) = (source_path.join(&name), target_path.join(&name)) else {
                continue;
            };
            let result = (|| -> Result<(), Status> {
                let stx = stat_at(&source, &name, &from)?;
                if is_symlink(&stx) {
                    let link = rustix::fs::readlinkat(&source, name.as_str(), Vec::new())
                        .map_err(|e| io_status(e, Op::Other, &from))?;
                    rustix::fs::symlinkat(link.as_c_str(), &target, name.as_str())
                        .map_err(|e| io_status(e, Op::Create, &to))?;
                } else if is_dir(&stx) {
                    let child = rustix::fs::openat(&source, name.as_str(), DIR_FLAGS, Mode::empty())
                        .map_err(|e| io_status(e, Op::Other, &from))?;
                    make_collection_copy(&child, &target, &name, &to)?;
                    let child_target = rustix::fs::openat(&target, name.as_str(), DIR_FLAGS, Mode::empty())
                        .map_err(|e| io_status(e, Op::Other, &to))?;
                    stack.push((child, child_target, from.clone(), to.clone()));
                } else if rustix::fs::FileType::from_raw_mode(stx.stx_mode.into())
                    == rustix::fs::FileType::RegularFile
                {
                    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    let fd = rustix::fs::openat(&source, name.as_str(), flags, Mode::empty())
                        .map_err(|e| io_status(e, Op::Other, &from))?;
                    copy_file(File::from(fd), &target, &name, &to)?;
                }
                Ok(())
            })();
            if let Err(status) = result {
                failures.push(failure(&to, &status));
            }
        }
    }
}

/// Moves `source` to `destination` with rename(2): the resource, its members and their
/// dead properties move at once. An existing destination (with `overwrite`) is swapped
/// out atomically (RENAME_EXCHANGE) and then removed, so readers of the destination see
/// the old or the new resource, never nothing. Across filesystems it copies, then
/// deletes the source.
pub fn rename(
    volume: &Volume,
    source: &VolumePath,
    destination: &VolumePath,
    overwrite: bool,
) -> Result<TransferResponse, Status> {
    refuse_overlap(source, destination)?;
    let (source_dir, source_name) = volume.open_parent(source).map_err(|status| match status.code() {
        tonic::Code::FailedPrecondition => Status::not_found(format!("{source} does not exist")),
        _ => status,
    })?;
    let source_stx = stat_at(&source_dir, source_name, source)?;
    volume.refuse_escaping_symlink(&source_stx, source)?;
    let (dest, _, existing) = prepare_destination(volume, destination, overwrite, false)?;
    let mut failures = Vec::new();
    let swapped = match &existing {
        Some(_) => rustix::fs::renameat_with(
            &source_dir,
            source_name,
            &dest.dir,
            dest.name.as_str(),
            RenameFlags::EXCHANGE,
        ),
        None => rustix::fs::renameat_with(
            &source_dir,
            source_name,
            &dest.dir,
            dest.name.as_str(),
            RenameFlags::NOREPLACE,
        ),
    };
    match swapped {
        Ok(()) => {
            if let Some(old) = &existing {
                // The old destination now sits at the source's name.
                failures = remove_entry(&source_dir, source_name, source, old)?;
            }
        }
        Err(rustix::io::Errno::XDEV) => {
            let copied = copy(volume, source, destination, Depth::Infinity, overwrite)?;
            if !copied.failures.is_empty() {
                return Ok(copied);
            }
            failures = remove_entry(&source_dir, source_name, source, &source_stx)?;
        }
        Err(rustix::io::Errno::INVAL) if existing.is_some() => {
            // No RENAME_EXCHANGE on this filesystem: remove, then rename.
            let old = existing.as_ref().expect("checked");
            failures = remove_entry(&dest.dir, &dest.name, destination, old)?;
            if failures.is_empty() {
                rustix::fs::renameat(&source_dir, source_name, &dest.dir, dest.name.as_str())
                    .map_err(|e| io_status(e, Op::Create, destination))?;
            }
        }
        Err(e) => return Err(io_status(e, Op::Create, destination)),
    }
    rustix::fs::fsync(&source_dir).map_err(|e| io_status(e, Op::Other, source))?;
    rustix::fs::fsync(&dest.dir).map_err(|e| io_status(e, Op::Other, destination))?;
    Ok(TransferResponse {
        created: !dest.existed,
        failures,
    })
}
