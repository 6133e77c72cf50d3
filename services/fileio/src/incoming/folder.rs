//! The gateway's end of the incoming area: new files to write a body into.

use bytes::Bytes;
use kubedav_api::fileio::{IncomingArea, IncomingFile};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tonic::Status;

/// How much of a body is written before its writeback is started, as fileio does for
/// the bodies it writes (`crate::write`): fileio's `fdatasync` at the landing then waits
/// for the last window only.
const WRITEBACK_WINDOW: u64 = 1 << 20;

/// The incoming area (`.kubedav/incoming` of fileio's volume) as a gateway mounts it.
pub struct IncomingFolder {
    dir: Arc<OwnedFd>,
    root: PathBuf,
    /// Whether each window of a body is handed to the disk as it is written: where the
    /// landing's commit syncs it (`--durability fsync`), so that it waits for the last
    /// window only. Otherwise it is work the kernel does later, or never for a file soon
    /// replaced.
    writeback: bool,
}

impl IncomingFolder {
    /// The folder mounted at `root`, its files handed to the disk as they are written when
    /// `writeback` (fileio syncs them at the landing); fails with a message naming the
    /// problem if it is not a directory this process can make files in.
    pub fn open(root: &Path, writeback: bool) -> Result<Self, String> {
        let dir = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot open {}: {e}", root.display()))?;
        let folder = Self {
            dir: Arc::new(dir),
            root: root.to_owned(),
            writeback,
        };
        drop(
            folder
                .create()
                .map_err(|status| format!("cannot write into {}: {}", root.display(), status.message()))?,
        );
        Ok(folder)
    }
}

impl IncomingArea for IncomingFolder {
    fn create(&self) -> Result<Box<dyn IncomingFile>, Status> {
        for _ in 0..4 {
            let name = format!("{:032x}.part", fastrand::u128(..));
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW;
            match rustix::fs::openat(&*self.dir, name.as_str(), flags, Mode::from_raw_mode(0o600)) {
                Ok(fd) => {
                    // Held while the body is written: fileio lands no file a writer holds,
                    // and its sweep removes none.
                    let _ = rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive);
                    return Ok(Box::new(StagedFile {
                        dir: self.dir.clone(),
                        name,
                        file: Some(File::from(fd)),
                        written: 0,
                        handed_to_disk: 0,
                        writeback: self.writeback,
                    }));
                }
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(failed("create a file in", &self.root, e)),
            }
        }
        Err(Status::internal("could not pick a unique incoming file name"))
    }
}

fn failed(what: &str, root: &Path, error: rustix::io::Errno) -> Status {
    let message = format!("cannot {what} the incoming area {}: {error}", root.display());
    match error {
        rustix::io::Errno::NOSPC | rustix::io::Errno::DQUOT => Status::resource_exhausted(message),
        _ => Status::internal(message),
    }
}

fn write_failed(name: &str, error: &std::io::Error) -> Status {
    match error.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => Status::resource_exhausted(format!(
            "the volume is full: cannot write the incoming file {name}"
        )),
        _ => Status::internal(format!("writing the incoming file {name} failed: {error}")),
    }
}

/// A file of the incoming area being written, removed when dropped.
struct StagedFile {
    dir: Arc<OwnedFd>,
    name: String,
    file: Option<File>,
    written: u64,
    handed_to_disk: u64,
    writeback: bool,
}

impl IncomingFile for StagedFile {
    fn name(&self) -> &str {
        &self.name
    }

    fn write_chunks(&mut self, chunks: &[Bytes]) -> Result<(), Status> {
        let Some(file) = self.file.as_mut() else {
            return Err(Status::internal("the incoming file is closed"));
        };
        for chunk in chunks {
            file.write_all(chunk).map_err(|e| write_failed(&self.name, &e))?;
            self.written += chunk.len() as u64;
        }
        if self.writeback && self.written - self.handed_to_disk >= WRITEBACK_WINDOW {
            crate::write::start_writeback(file, self.handed_to_disk, self.written - self.handed_to_disk);
            self.handed_to_disk = self.written;
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), Status> {
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        // NFS reports a failed write back at close: a file that lost bytes must not land.
        // SAFETY: the descriptor was just taken out of its owner and is closed once.
        let closed = unsafe { libc::close(std::os::fd::IntoRawFd::into_raw_fd(file)) };
        match closed {
            0 => Ok(()),
            _ => Err(write_failed(&self.name, &std::io::Error::last_os_error())),
        }
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        self.file = None;
        match rustix::fs::unlinkat(&*self.dir, self.name.as_str(), AtFlags::empty()) {
            // Landed: fileio moved it away.
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => {
                tracing::warn!(name = %self.name, error = %e, "could not remove an incoming file that did not land")
            }
        }
    }
}
