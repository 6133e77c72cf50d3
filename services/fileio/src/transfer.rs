//! COPY and MOVE (RFC 4918 9.8, 9.9) within the volume.

use crate::errors::{Op, io_status};
use crate::keep::volume::Keeper;
use crate::left_out::LeftOut;
use crate::listing::visible_names;
use crate::metadata::{is_dir, is_symlink, stat_at};
use crate::tree::{failure, remove_entry};
use crate::volume::Durability;
use crate::write::Upload;
use crate::{Volume, props};
use kubedav_api::fileio::{Depth, TransferResponse};
use kubedav_api::path::TEMPORARY_PREFIX;
use kubedav_api::path::VolumePath;
use kubedav_api::pb::fileio::v1::Failure;
use rustix::fd::OwnedFd;
use rustix::fs::{FlockOperation, Mode, OFlags, RenameFlags, Statx};
use std::fs::File;
use tonic::Status;

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// PERMISSION_DENIED when `source` and `destination` are one resource or one contains
/// the other (RFC 4918 9.8.5, 9.9.4: 403).
pub(crate) fn refuse_overlap(source: &VolumePath, destination: &VolumePath) -> Result<(), Status> {
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

/// The destination's parent and name, and what exists there now (an existing one only
/// with `overwrite`, RFC 4918 9.8.4; it is replaced as the last step, never removed
/// first).
struct Destination {
    dir: OwnedFd,
    name: String,
    existed: bool,
}

fn prepare_destination(
    volume: &Volume,
    destination: &VolumePath,
    overwrite: bool,
) -> Result<(Destination, Option<Statx>), Status> {
    let (dir, name) = volume.open_parent(destination)?;
    let name = name.to_owned();
    let existing = match stat_at(&dir, &name, destination) {
        Ok(stx) => Some(stx),
        Err(status) if status.code() == tonic::Code::NotFound => None,
        Err(status) => return Err(status),
    };
    if let Some(stx) = &existing {
        volume.refuse_escaping_symlink(stx, destination)?;
        if !overwrite {
            return Err(Status::already_exists(format!(
                "{destination} exists and Overwrite is F"
            )));
        }
    }
    Ok((
        Destination {
            dir,
            name,
            existed: existing.is_some(),
        },
        existing,
    ))
}

/// Copies `source` to `destination`: a file with its content and dead properties; a
/// collection with its dead properties and, with depth infinity, all its members but
/// those `left_out`.
///
/// A failed copy leaves the destination as it was. A file replacing a file is written to
/// a temporary file and renamed over it. Anything else is built under a hidden name
/// beside the destination ([`Staged`]) and swapped in as the last step
/// (`RENAME_EXCHANGE`); the old destination is removed only then. If any member fails,
/// the staged copy is removed, the failures are reported, and the destination is
/// untouched.
pub fn copy(
    volume: &Volume,
    source: &VolumePath,
    destination: &VolumePath,
    depth: Depth,
    overwrite: bool,
    left_out: &LeftOut,
    keeper: Option<&Keeper>,
) -> Result<TransferResponse, Status> {
    refuse_overlap(source, destination)?;
    if depth == Depth::One {
        return Err(Status::invalid_argument("COPY takes Depth 0 or infinity, not 1"));
    }
    let (source_fd, source_stx) = open_source(volume, source)?;
    let (dest, existing) = prepare_destination(volume, destination, overwrite)?;
    let file_over_file_or_nothing = !is_dir(&source_stx) && existing.as_ref().is_none_or(|e| !is_dir(e));
    if file_over_file_or_nothing {
        // Its commit is serialized with every other commit to the destination.
        copy_file(
            File::from(source_fd),
            &dest.dir,
            &dest.name,
            destination,
            volume.durability(),
            keeper,
        )?;
    } else {
        let staged = Staged::create(&dest.dir, destination, is_dir(&source_stx))?;
        let mut failures = Vec::new();
        if !is_dir(&source_stx) {
            copy_file(
                File::from(source_fd),
                &dest.dir,
                &staged.name,
                destination,
                volume.durability(),
                None,
            )?;
        } else {
            props::write_raw(
                staged.lock_fd()?,
                &props::read_raw(&source_fd, source)?,
                destination,
            )?;
            if depth == Depth::Infinity {
                let target = rustix::fs::openat(&dest.dir, staged.name.as_str(), DIR_FLAGS, Mode::empty())
                    .map_err(|e| io_status(e, Op::Other, destination))?;
                copy_tree(
                    Tree {
                        source: source_fd,
                        target,
                        source_path: source.clone(),
                        target_path: destination.clone(),
                    },
                    left_out,
                    &mut failures,
                    volume.durability(),
                );
            }
        }
        if !failures.is_empty() {
            return Ok(TransferResponse {
                created: false,
                failures,
            });
        }
        staged.swap_in(&dest.name, existing.as_ref(), keeper)?;
    }
    volume.durability().sync_dir(&dest.dir, destination)?;
    Ok(TransferResponse {
        created: !dest.existed,
        failures: Vec::new(),
    })
}

/// A copy being built under a hidden name (the reserved prefix) in the destination's
/// directory. A collection's staged directory is `flock`ed while it is built, so the
/// sweep at start (`orphans.rs`) removes it only when its process died. Dropped before
/// [`Staged::swap_in`], it is removed.
struct Staged<'a> {
    dir: &'a OwnedFd,
    name: String,
    path: &'a VolumePath,
    /// The staged directory, opened and locked (collections only).
    locked: Option<OwnedFd>,
    swapped: bool,
}

impl<'a> Staged<'a> {
    /// Picks a free hidden name; for a collection, makes and locks the directory.
    fn create(dir: &'a OwnedFd, path: &'a VolumePath, collection: bool) -> Result<Self, Status> {
        for _ in 0..16 {
            let name = format!("{TEMPORARY_PREFIX}copy-{:016x}", fastrand::u64(..));
            if !collection {
                if stat_at(dir, &name, path).is_err() {
                    return Ok(Self::named(dir, name, path, None));
                }
                continue;
            }
            match rustix::fs::mkdirat(dir, name.as_str(), Mode::from_raw_mode(0o755)) {
                Ok(()) => {
                    let mut staged = Self::named(dir, name, path, None);
                    let fd = rustix::fs::openat(dir, staged.name.as_str(), DIR_FLAGS, Mode::empty())
                        .map_err(|e| io_status(e, Op::Create, path))?;
                    let _ = rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive);
                    staged.locked = Some(fd);
                    return Ok(staged);
                }
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(io_status(e, Op::Create, path)),
            }
        }
        Err(Status::internal(
            "could not pick a unique temporary name for the copy",
        ))
    }

    fn named(dir: &'a OwnedFd, name: String, path: &'a VolumePath, locked: Option<OwnedFd>) -> Self {
        Self {
            dir,
            name,
            path,
            locked,
            swapped: false,
        }
    }

    /// The staged directory.
    fn lock_fd(&self) -> Result<&OwnedFd, Status> {
        self.locked
            .as_ref()
            .ok_or_else(|| Status::internal("a staged file has no directory"))
    }

    /// Puts the staged copy at `name`. An existing resource there (`existing`) is
    /// exchanged with it in one step and then removed; readers see the old or the new
    /// resource, never neither. Where the file system cannot exchange, the old one is
    /// first renamed aside, and renamed back if the copy cannot take its place.
    fn swap_in(
        mut self,
        name: &str,
        existing: Option<&Statx>,
        keeper: Option<&Keeper>,
    ) -> Result<(), Status> {
        let path = self.path;
        let _serialized = crate::serial::lock(path);
        let Some(old) = existing else {
            rustix::fs::renameat_with(
                self.dir,
                self.name.as_str(),
                self.dir,
                name,
                RenameFlags::NOREPLACE,
            )
            .map_err(|e| io_status(e, Op::Create, path))?;
            self.swapped = true;
            return Ok(());
        };
        match rustix::fs::renameat_with(
            self.dir,
            self.name.as_str(),
            self.dir,
            name,
            RenameFlags::EXCHANGE,
        ) {
            Ok(()) => {}
            Err(rustix::io::Errno::INVAL) => {
                let aside = format!("{TEMPORARY_PREFIX}old-{:016x}", fastrand::u64(..));
                rustix::fs::renameat(self.dir, name, self.dir, aside.as_str())
                    .map_err(|e| io_status(e, Op::Create, path))?;
                if let Err(e) = rustix::fs::renameat(self.dir, self.name.as_str(), self.dir, name) {
                    let _ = rustix::fs::renameat(self.dir, aside.as_str(), self.dir, name);
                    return Err(io_status(e, Op::Create, path));
                }
                self.name = aside;
            }
            Err(e) => return Err(io_status(e, Op::Create, path)),
        }
        // The old resource now has the hidden name: kept (as a version or in the trash),
        // or removed by this guard.
        if let Some(keeper) = keeper {
            let failures = keeper.dispose_replaced(self.dir, &self.name, path, old)?;
            self.swapped = true;
            if !failures.is_empty() {
                tracing::warn!(%path, "parts of the replaced resource could not be removed");
            }
            return Ok(());
        }
        self.swapped = false;
        self.remove(old);
        self.swapped = true;
        Ok(())
    }

    /// Removes what is at the hidden name; what cannot be removed is left for the sweep
    /// at the next start.
    fn remove(&self, stx: &Statx) {
        match remove_entry(self.dir, &self.name, self.path, stx) {
            Ok(failures) if failures.is_empty() => {}
            Ok(failures) => tracing::warn!(
                path = %self.path,
                left = failures.len(),
                "a replaced or abandoned copy could not be removed whole; the rest goes at the next start"
            ),
            Err(status) => {
                tracing::warn!(path = %self.path, error = %status.message(), "a replaced or abandoned copy could not be removed")
            }
        }
    }
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        if !self.swapped
            && let Ok(stx) = stat_at(self.dir, &self.name, self.path)
        {
            self.remove(&stx);
        }
    }
}

fn copy_file(
    mut source: File,
    dir: &OwnedFd,
    name: &str,
    path: &VolumePath,
    durability: Durability,
    keeper: Option<&Keeper>,
) -> Result<(), Status> {
    let dir = rustix::io::fcntl_dupfd_cloexec(dir, 0).map_err(|e| io_status(e, Op::Other, path))?;
    let mut upload = Upload::create_in(dir, name.to_owned(), path.clone(), durability)?;
    upload.keep_replaced(keeper.cloned());
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

/// A collection being copied: the open source and target directories and their paths.
struct Tree {
    source: OwnedFd,
    target: OwnedFd,
    source_path: VolumePath,
    target_path: VolumePath,
}

/// Copies the members of the open directory `source` into the open directory `target`,
/// depth first, without following symlinks (they are copied as symlinks), and without
/// what is `left_out` (relative to the copy's source, `tree.source_path`).
fn copy_tree(tree: Tree, left_out: &LeftOut, failures: &mut Vec<Failure>, durability: Durability) {
    let copy_root = tree.source_path.clone();
    let relative = |path: &VolumePath| -> String {
        match copy_root.is_root() {
            true => path.as_str().to_owned(),
            false => path.as_str()[copy_root.as_str().len() + 1..].to_owned(),
        }
    };
    let mut stack = vec![(tree.source, tree.target, tree.source_path, tree.target_path)];
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
            if left_out.covers(&relative(&from)) {
                continue;
            }
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
                    copy_file(File::from(fd), &target, &name, &to, durability, None)?;
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
    keeper: Option<&Keeper>,
) -> Result<TransferResponse, Status> {
    refuse_overlap(source, destination)?;
    let (source_dir, source_name) = volume.open_parent(source).map_err(|status| match status.code() {
        tonic::Code::FailedPrecondition => Status::not_found(format!("{source} does not exist")),
        _ => status,
    })?;
    let source_stx = stat_at(&source_dir, source_name, source)?;
    volume.refuse_escaping_symlink(&source_stx, source)?;
    let (dest, existing) = prepare_destination(volume, destination, overwrite)?;
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
                failures = match keeper {
                    Some(keeper) => keeper.dispose_replaced(&source_dir, source_name, destination, old)?,
                    None => remove_entry(&source_dir, source_name, source, old)?,
                };
            }
        }
        Err(rustix::io::Errno::XDEV) => {
            let copied = copy(
                volume,
                source,
                destination,
                Depth::Infinity,
                overwrite,
                &LeftOut::default(),
                keeper,
            )?;
            if !copied.failures.is_empty() {
                return Ok(copied);
            }
            failures = remove_entry(&source_dir, source_name, source, &source_stx)?;
        }
        Err(rustix::io::Errno::INVAL) if existing.is_some() => {
            // No RENAME_EXCHANGE on this filesystem: the old destination goes aside
            // first, and comes back if the source cannot take its place.
            let old = existing.as_ref().expect("checked");
            let aside = format!("{TEMPORARY_PREFIX}old-{:016x}", fastrand::u64(..));
            rustix::fs::renameat(&dest.dir, dest.name.as_str(), &dest.dir, aside.as_str())
                .map_err(|e| io_status(e, Op::Create, destination))?;
            if let Err(e) = rustix::fs::renameat(&source_dir, source_name, &dest.dir, dest.name.as_str()) {
                let _ = rustix::fs::renameat(&dest.dir, aside.as_str(), &dest.dir, dest.name.as_str());
                return Err(io_status(e, Op::Create, destination));
            }
            failures = match keeper {
                Some(keeper) => keeper.dispose_replaced(&dest.dir, &aside, destination, old)?,
                None => remove_entry(&dest.dir, &aside, destination, old)?,
            };
        }
        Err(e) => return Err(io_status(e, Op::Create, destination)),
    }
    volume.durability().sync_dir(&source_dir, source)?;
    volume.durability().sync_dir(&dest.dir, destination)?;
    if let Some(keeper) = keeper {
        keeper.move_versions(source, destination)?;
    }
    Ok(TransferResponse {
        created: !dest.existed,
        failures,
    })
}
