//! Streaming atomic writes.
//!
//! The body goes to a temporary file in the target's own directory (so the final rename
//! never crosses a filesystem), named with the reserved prefix so no client can see or
//! touch it. When the body ended cleanly with the declared size, the file is fdatasync'ed,
//! renamed over the target and the directory fsync'ed (with `--durability none`, neither:
//! see [`Durability`]). Any other ending (a body error, a
//! size mismatch, a dropped request, a full disk) removes the temporary file: readers see
//! the old content or the new, never a mix, and concurrent writers each commit whole.

use crate::errors::{Op, io_status};
use crate::metadata::{etag, file_info, is_dir, stat_at, stat_fd};
use crate::volume::Durability;
use bytes::Bytes;
use kubedav_api::fileio::{FileInfo, WriteHeader};
use kubedav_api::path::{TEMPORARY_PREFIX, VolumePath};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use std::fs::File;
use std::io::Write;
use tonic::Status;

/// An upload in progress: the temporary file and where it will go.
pub struct Upload {
    dir: OwnedFd,
    /// Where the temporary file is when not in `dir`: an upload's own folder
    /// ([`Upload::adopt`]), whose file is never removed here.
    adopted_from: Option<OwnedFd>,
    temp_name: String,
    file: File,
    path: VolumePath,
    name: String,
    written: u64,
    /// How far the body has been handed to the disk (`start_writeback`).
    handed_to_disk: u64,
    committed: bool,
    /// The checksums the write computes while the body streams, if it asked for any.
    digester: Option<crate::digest::Digester>,
    durability: Durability,
    /// Keeps the file this upload replaces as a version, when set.
    keeper: Option<crate::keep::volume::Keeper>,
}

/// How much of a body is written before its writeback is started.
const WRITEBACK_WINDOW: u64 = 1 << 20;

/// Starts writing `length` bytes of `file` from `offset` to the disk without waiting
/// for them (`sync_file_range`): an `fdatasync` later waits for less. Advisory.
pub(crate) fn start_writeback(file: &std::fs::File, offset: u64, length: u64) {
    // SAFETY: a plain system call on a file descriptor the caller owns.
    let _ = unsafe {
        libc::sync_file_range(
            std::os::fd::AsRawFd::as_raw_fd(file),
            offset as libc::off64_t,
            length as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        )
    };
}

/// What a commit did.
pub struct Committed {
    /// Metadata of the new content.
    pub info: FileInfo,
    /// Whether the target did not exist before.
    pub created: bool,
    /// The checksums kept with the new content.
    pub checksums: Vec<kubedav_api::checksums::Checksum>,
}

/// Refuses a write to `name` in `dir` (`path`) that would replace a collection, or a
/// symlink that leaves the root.
pub fn refuse_collection(
    volume: &crate::Volume,
    dir: &OwnedFd,
    name: &str,
    path: &VolumePath,
) -> Result<(), Status> {
    match stat_at(dir, name, path) {
        Ok(stx) if is_dir(&stx) => Err(Status::failed_precondition(format!(
            "{path} is a collection; a file cannot replace it"
        ))),
        Ok(stx) => volume.refuse_escaping_symlink(&stx, path),
        Err(status) if status.code() == tonic::Code::NotFound => Ok(()),
        Err(status) => Err(status),
    }
}

/// Reserves `size` bytes for the body of `path` in `file` (`fallocate` keeping the
/// size), so a volume without room refuses the upload before a byte of it is sent rather
/// than after most of it. A file system that cannot reserve skips this: a full disk then
/// shows while writing, with the same answer.
pub fn reserve(file: &impl rustix::fd::AsFd, size: u64, path: &VolumePath) -> Result<(), Status> {
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, size) {
        Ok(()) => Ok(()),
        Err(e @ (rustix::io::Errno::NOSPC | rustix::io::Errno::DQUOT | rustix::io::Errno::FBIG)) => {
            let status = io_status(e, Op::Write, path);
            Err(Status::resource_exhausted(format!(
                "{}: there is no room for the {size} bytes of {path}",
                status.message(),
            )))
        }
        Err(_) => Ok(()),
    }
}

impl Upload {
    /// Opens the target's parent (which must exist) and creates the temporary file, with
    /// room reserved for `expected_size` bytes when the size is declared.
    pub fn begin(
        volume: &crate::Volume,
        path: VolumePath,
        expected_size: Option<u64>,
    ) -> Result<Self, Status> {
        let (dir, name) = volume.open_parent(&path)?;
        let name = name.to_owned();
        refuse_collection(volume, &dir, &name, &path)?;
        let upload = Self::create_in(dir, name, path, volume.durability())?;
        if let Some(size) = expected_size.filter(|&size| size > 0) {
            upload.reserve(size)?;
        }
        Ok(upload)
    }

    /// Reserves `size` bytes for the body ([`reserve`]).
    fn reserve(&self, size: u64) -> Result<(), Status> {
        reserve(&self.file, size, &self.path)
    }

    /// Creates the temporary file for `name` in the open directory `dir`; its commit
    /// waits for what `durability` says.
    pub fn create_in(
        dir: OwnedFd,
        name: String,
        path: VolumePath,
        durability: Durability,
    ) -> Result<Self, Status> {
        for _ in 0..16 {
            let temp_name = format!("{TEMPORARY_PREFIX}{:016x}", fastrand::u64(..));
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW;
            match rustix::fs::openat(&dir, temp_name.as_str(), flags, Mode::from_raw_mode(0o644)) {
                Ok(fd) => {
                    // Held until the upload ends or its process dies: tells a starting
                    // fileio that this file is not an orphan (`orphans.rs`). A file
                    // system without flock just loses that protection.
                    let _ = rustix::fs::flock(&fd, rustix::fs::FlockOperation::NonBlockingLockExclusive);
                    return Ok(Self {
                        dir,
                        adopted_from: None,
                        temp_name,
                        file: File::from(fd),
                        path,
                        name,
                        written: 0,
                        handed_to_disk: 0,
                        committed: false,
                        digester: None,
                        durability,
                        keeper: None,
                    });
                }
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(io_status(e, Op::Create, &path)),
            }
        }
        Err(Status::internal("could not pick a unique temporary file name"))
    }

    /// The finished bytes of an upload that arrived in many requests
    /// ([`crate::uploads`]): `file`, of `written` bytes, named `temp_name` in the folder
    /// `from`, to be committed as `name` in `dir` (the target's parent) like a body that
    /// arrived at once. It stays where it is if the commit is refused.
    #[allow(clippy::too_many_arguments)]
    pub fn adopt(
        dir: OwnedFd,
        name: String,
        path: VolumePath,
        from: OwnedFd,
        temp_name: String,
        file: File,
        written: u64,
        durability: Durability,
    ) -> Self {
        Self {
            dir,
            adopted_from: Some(from),
            temp_name,
            file,
            path,
            name,
            written,
            handed_to_disk: written,
            committed: false,
            digester: None,
            durability,
            keeper: None,
        }
    }

    /// Keeps the file this upload replaces as a version (when `keeper` keeps versions).
    pub fn keep_replaced(&mut self, keeper: Option<crate::keep::volume::Keeper>) {
        self.keeper = keeper;
    }

    /// Fills the temporary file with the content and dead properties of `source`
    /// (`copy_file_range` where the filesystem allows it).
    pub fn copy_from(&mut self, source: &mut File) -> Result<(), Status> {
        self.written = std::io::copy(source, &mut self.file).map_err(|e| self.write_error(e))?;
        let raw = crate::props::read_raw(&*source, &self.path)?;
        crate::props::write_raw(&self.file, &raw, &self.path)
    }

    /// Computes these checksums over the body as it is written.
    pub fn digest_with(&mut self, digester: Option<crate::digest::Digester>) {
        self.digester = digester;
    }

    /// Appends chunks to the temporary file.
    pub fn write_chunks(&mut self, chunks: &[Bytes]) -> Result<(), Status> {
        for chunk in chunks {
            if let Some(digester) = &mut self.digester {
                digester.update(chunk);
            }
            self.file.write_all(chunk).map_err(|e| self.write_error(e))?;
            self.written += chunk.len() as u64;
        }
        if self.durability == Durability::Fsync && self.written - self.handed_to_disk >= WRITEBACK_WINDOW {
            self.start_writeback();
        }
        Ok(())
    }

    /// Starts writing what the body has so far to the disk without waiting for it
    /// (`sync_file_range`), so the disk works while the rest of the body arrives and the
    /// `fdatasync` at commit waits for the last window only, not the whole body (a 10 MiB
    /// PUT: 23.8 → 19.5 ms, docs/benchmarks.md). Waiting here for the earlier windows, to
    /// hold fewer dirty pages, cost 2 ms of those and is left to the kernel's own dirty
    /// page throttling. Advisory: a file system that does not support it loses only the
    /// head start.
    fn start_writeback(&mut self) {
        let (offset, length) = (self.handed_to_disk, self.written - self.handed_to_disk);
        start_writeback(&self.file, offset, length);
        self.handed_to_disk = self.written;
    }

    fn write_error(&self, e: std::io::Error) -> Status {
        match e.raw_os_error() {
            Some(code) => io_status(rustix::io::Errno::from_raw_os_error(code), Op::Write, &self.path),
            None => Status::internal(format!("writing {} failed: {e}", self.path)),
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Makes the upload durable and visible under its target name, if `header`'s
    /// conditions still hold and the body has the checksums it names.
    /// With `keep_properties`, a replaced file's dead properties move to the new content
    /// (a PUT changes the body, not the resource's properties). The checksums computed
    /// are kept with the content, named by its etag (`kubedav_api::checksums`), and the
    /// modification time is the header's when it sets one.
    pub fn commit(mut self, header: &WriteHeader, keep_properties: bool) -> Result<Committed, Status> {
        if let Some(expected) = header.expected_size
            && expected != self.written
        {
            return Err(Status::cancelled(format!(
                "the body had {} bytes but {expected} were declared; nothing was written",
                self.written
            )));
        }
        let checksums = match self.digester.take() {
            Some(digester) => digester.finish(self.path.as_str())?,
            None => Vec::new(),
        };
        if let Some(modified) = header.modified_unix_ns {
            crate::props::set_modified(&self.file, modified, &self.path)?;
        }
        self.durability
            .sync_data(&self.file)
            .map_err(|e| self.write_error(e))?;
        // From the check of what is there to the rename, no other commit to this path.
        let serialized = crate::serial::lock(&self.path);
        let existing = match stat_at(&self.dir, &self.name, &self.path) {
            Ok(stx) => Some(stx),
            Err(status) if status.code() == tonic::Code::NotFound => None,
            Err(status) => return Err(status),
        };
        if let Some(wanted) = &header.if_match {
            match &existing {
                Some(stx) if &etag(stx) == wanted => {}
                _ => {
                    return Err(Status::aborted(format!(
                        "{} changed: its etag is no longer {wanted}",
                        self.path
                    )));
                }
            }
        }
        if existing.as_ref().is_some_and(is_dir) {
            return Err(Status::failed_precondition(format!(
                "{} is a collection; a file cannot replace it",
                self.path
            )));
        }
        let mut kept = Vec::new();
        if keep_properties
            && existing
                .as_ref()
                .is_some_and(|stx| !crate::metadata::is_symlink(stx))
        {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            if let Ok(old) = rustix::fs::openat(&self.dir, self.name.as_str(), flags, Mode::empty()) {
                kept = crate::props::read_raw(&old, &self.path)?;
            }
        }
        let stored = (!checksums.is_empty()).then(|| kubedav_api::checksums::Stored {
            etag: String::new(),
            sums: checksums.clone(),
        });
        if !kept.is_empty() || stored.is_some() {
            let stored = match stored {
                Some(mut stored) => {
                    stored.etag = etag(&stat_fd(&self.file, &self.path)?);
                    Some(stored)
                }
                None => None,
            };
            let raw = crate::props::with_checksums(&kept, stored.as_ref(), &self.path)?;
            if !raw.is_empty() {
                crate::props::write_raw(&self.file, &raw, &self.path)?;
            }
        }
        let flags = if header.create_only {
            RenameFlags::NOREPLACE
        } else {
            RenameFlags::empty()
        };
        if let (Some(keeper), Some(old), false) = (&self.keeper, &existing, header.create_only)
            && !crate::metadata::is_symlink(old)
        {
            keeper.keep_version(&self.dir, &self.name, &self.path)?;
        }
        rustix::fs::renameat_with(
            self.adopted_from.as_ref().unwrap_or(&self.dir),
            self.temp_name.as_str(),
            &self.dir,
            self.name.as_str(),
            flags,
        )
        .map_err(|e| io_status(e, Op::Create, &self.path))?;
        drop(serialized);
        self.committed = true;
        // The rename is durable once the directory is.
        self.durability.sync_dir(&self.dir, &self.path)?;
        let stx = stat_fd(&self.file, &self.path)?;
        Ok(Committed {
            info: file_info(&self.path, &stx),
            created: existing.is_none(),
            checksums,
        })
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if !self.committed
            && self.adopted_from.is_none()
            && let Err(e) = rustix::fs::unlinkat(&self.dir, self.temp_name.as_str(), AtFlags::empty())
        {
            tracing::warn!(path = %self.path, error = %e, "could not remove an aborted upload's temporary file");
        }
    }
}
