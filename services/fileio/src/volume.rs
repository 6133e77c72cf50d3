//! The served root and path resolution beneath it.
//!
//! Every lookup goes through `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`
//! relative to a descriptor of the root: the kernel refuses `..` above the root, absolute
//! symlinks and symlinks whose target leaves the root (EXDEV), atomically with the lookup,
//! so there is no check-then-use race and no `canonicalize` round trip.

use crate::errors::{Op, io_status};
use kubedav_api::path::{RESERVED_AREA, VolumePath};
use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::path::Path;
use tonic::Status;

/// What a change to the volume waits for before it is answered (`--durability`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// The file's data is `fdatasync`ed before its rename, and the directory `fsync`ed
    /// after it (and after every MKCOL, DELETE, COPY and MOVE): a change that was
    /// answered survives a crash or a power loss. The default.
    #[default]
    Fsync,
    /// Nothing is waited for: the kernel writes back when it will, as nginx and Apache
    /// leave it. Writes stay atomic (a reader sees the old or the new content), but a
    /// crash soon after an answered change may lose it, or, on file systems that do not
    /// order a rename after its file's data (ext4 does, with `auto_da_alloc`), leave the
    /// file empty.
    None,
}

impl Durability {
    /// Makes the data of `file` durable (`fdatasync`), unless nothing is to be waited for.
    pub fn sync_data(self, file: &std::fs::File) -> std::io::Result<()> {
        match self {
            Durability::Fsync => file.sync_data(),
            Durability::None => Ok(()),
        }
    }

    /// Makes the names in the open directory `dir` durable (after a create, rename or
    /// remove), unless nothing is to be waited for.
    pub fn sync_dir(self, dir: &OwnedFd, path: &VolumePath) -> Result<(), Status> {
        match self {
            Durability::Fsync => rustix::fs::fsync(dir).map_err(|e| io_status(e, Op::Other, path)),
            Durability::None => Ok(()),
        }
    }
}

/// An open volume root.
#[derive(Debug)]
pub struct Volume {
    root: OwnedFd,
    durability: Durability,
}

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// How kubedav's own folders are opened: beneath the root, no symlink followed.
const RESERVED: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_SYMLINKS);

/// A failure in kubedav's own area: 507 when the volume is full, else internal.
pub fn reserved_failed(what: &str, path: &str, error: rustix::io::Errno) -> Status {
    match error {
        rustix::io::Errno::NOSPC | rustix::io::Errno::DQUOT => {
            Status::resource_exhausted(format!("the volume is full: cannot {what} {path}"))
        }
        // A read-only volume refuses a DELETE into the trash as it refuses any write.
        rustix::io::Errno::ROFS => {
            Status::permission_denied(format!("the volume is read-only: cannot {what} {path}"))
        }
        _ => Status::internal(format!("cannot {what} {path}: {error}")),
    }
}

impl Volume {
    /// Opens `root`, which must be an existing directory. Fails with a message naming the
    /// problem if it is not, or if this kernel lacks `openat2` (Linux < 5.6, or a seccomp
    /// profile that blocks it).
    pub fn open(root: &Path) -> Result<Self, String> {
        let root_fd = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot open the root directory {}: {e}", root.display()))?;
        let volume = Self {
            root: root_fd,
            durability: Durability::default(),
        };
        volume
            .open_beneath(&VolumePath::root(), OFlags::PATH)
            .map_err(|e| {
                if e.code() == tonic::Code::Internal {
                    format!(
                        "openat2(RESOLVE_BENEATH) does not work here ({}); kubedav needs Linux 5.6 or later",
                        e.message()
                    )
                } else {
                    e.message().to_owned()
                }
            })?;
        Ok(volume)
    }

    /// Sets what changes wait for (fsync by default).
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// What changes wait for.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The root directory's descriptor.
    pub fn root_fd(&self) -> &OwnedFd {
        &self.root
    }

    /// Opens `path` beneath the root with `flags` (`O_CLOEXEC` is added). Symlinks are
    /// followed only while they stay beneath the root.
    pub fn open_beneath(&self, path: &VolumePath, flags: OFlags) -> Result<OwnedFd, Status> {
        let raw = if path.is_root() { "." } else { path.as_str() };
        let mut attempts = 0;
        loop {
            match rustix::fs::openat2(&self.root, raw, flags | OFlags::CLOEXEC, Mode::empty(), RESOLVE) {
                Ok(fd) => return Ok(fd),
                // openat2 asks for a retry when a concurrent rename raced the lookup.
                Err(rustix::io::Errno::AGAIN) if attempts < 8 => attempts += 1,
                Err(e) => return Err(io_status(e, Op::Resolve, path)),
            }
        }
    }

    /// Opens the parent collection of `path` for directory operations (read, fsync) and
    /// returns it with the last name. The root has no parent.
    pub fn open_parent<'p>(&self, path: &'p VolumePath) -> Result<(OwnedFd, &'p str), Status> {
        let (parent, name) = path.split_last().ok_or_else(|| {
            Status::failed_precondition("the root collection cannot be replaced or removed")
        })?;
        let fd = self
            .open_beneath(&parent, OFlags::RDONLY | OFlags::DIRECTORY)
            .map_err(|status| match status.code() {
                tonic::Code::NotFound => {
                    Status::failed_precondition(format!("parent collection {parent} does not exist"))
                }
                _ => status,
            })?;
        Ok((fd, name))
    }

    /// Opens the folder `relative` of kubedav's own area (`.kubedav/` at the root: records,
    /// trash, versions), making it and its parents when `create`; `None` when it is not
    /// there and not made. Opened beneath the root without following any symlink.
    pub fn reserved_folder(&self, relative: &str, create: bool) -> Result<Option<OwnedFd>, Status> {
        let path = if relative.is_empty() {
            RESERVED_AREA.to_owned()
        } else {
            format!("{RESERVED_AREA}/{relative}")
        };
        let open = || {
            rustix::fs::openat2(
                &self.root,
                path.as_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
                RESERVED,
            )
        };
        match open() {
            Ok(fd) => return Ok(Some(fd)),
            Err(rustix::io::Errno::NOENT) if create => {}
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(reserved_failed("open", &path, e)),
        }
        let mut made = String::new();
        for segment in path.split('/') {
            if !made.is_empty() {
                made.push('/');
            }
            made.push_str(segment);
            match rustix::fs::mkdirat(&self.root, made.as_str(), Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(reserved_failed("make", &made, e)),
            }
        }
        open().map(Some).map_err(|e| reserved_failed("open", &path, e))
    }

    /// Refuses a name that is a symlink resolving outside the root (or nowhere): such a
    /// name is hidden from listings and unreadable, so it may not be replaced or deleted
    /// either. Any other name passes.
    pub fn refuse_escaping_symlink(&self, stx: &rustix::fs::Statx, path: &VolumePath) -> Result<(), Status> {
        if !crate::metadata::is_symlink(stx) {
            return Ok(());
        }
        match self.open_beneath(path, OFlags::PATH) {
            Ok(_) => Ok(()),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(()),
            Err(status) => Err(status),
        }
    }
}
