//! fileio's end of the incoming area: a write that names a file there is admitted before
//! its bytes, and the file is landed after them.

use crate::keep::Keeping;
use crate::volume::Volume;
use crate::write::{Upload, refuse_collection, reserve};
use kubedav_api::fileio::{INCOMING_FOLDER, is_incoming_name};
use kubedav_api::path::VolumePath;
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, RenameFlags, StatxFlags};
use std::fs::File;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};
use tonic::Status;

/// Where fileio moves an incoming file before it checks it: `.kubedav/` + this, a folder
/// no gateway mounts.
const LANDING_FOLDER: &str = "landing";

/// How often fileio looks for files of the incoming area that no gateway will land.
pub const SWEEP_EVERY: Duration = Duration::from_secs(15 * 60);

/// How long a file no writer holds must have been unchanged before the sweep takes it
/// for abandoned (its gateway died while writing it, or before removing it).
pub const ABANDONED_AFTER: Duration = Duration::from_secs(3600);

/// The incoming area of a volume, and the folder its files are landed from.
#[derive(Debug)]
pub struct Landings {
    incoming: OwnedFd,
    landing: OwnedFd,
    /// The owner the files this process makes there get: fileio's user, or the one an
    /// NFS export squashes every user to.
    owner: u32,
}

impl Landings {
    /// Makes (if need be) and opens `.kubedav/incoming` and `.kubedav/landing`.
    pub fn open(volume: &Volume) -> Result<Self, Status> {
        let folder = |name: &str| {
            volume
                .reserved_folder(name, true)?
                .ok_or_else(|| Status::internal(format!("the folder {name} of kubedav's area was not made")))
        };
        let incoming = folder(INCOMING_FOLDER)?;
        let owner = owner_of_new_files(&incoming)?;
        Ok(Self {
            incoming,
            landing: folder(LANDING_FOLDER)?,
            owner,
        })
    }

    /// Checks, before its bytes are written, a write of `size` bytes to `path` from the
    /// incoming file `name`: the parent exists (else FAILED_PRECONDITION), no collection
    /// is in the way, and the volume has room, reserved on the file. A full volume first
    /// loses the oldest things `keeping` keeps, when `may_purge`.
    pub fn admit(
        &self,
        volume: &Volume,
        keeping: Option<&Keeping>,
        path: &VolumePath,
        name: &str,
        size: u64,
        may_purge: bool,
    ) -> Result<(), Status> {
        if !is_incoming_name(name) {
            return Err(Status::invalid_argument(format!(
                "{name:?} is not a file name of the incoming area (32 lowercase hex digits and .part)"
            )));
        }
        let (dir, last) = volume.open_parent(path)?;
        refuse_collection(volume, &dir, last, path)?;
        let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = rustix::fs::openat(&self.incoming, name, flags, Mode::empty())
            .map_err(|e| misbehaving(name, &format!("cannot be opened ({e})")))?;
        crate::keep::space::with_room(volume, keeping, path, Some(size), may_purge, || {
            reserve(&file, size, path)
        })
    }

    /// Lands the incoming file `name` as `path`, once its writer has closed it: the upload
    /// to commit, and the file's name in the landing folder, which must be kept until
    /// the commit and removes the file when dropped (a landed file is no longer there).
    pub fn land(
        &self,
        volume: &Volume,
        path: VolumePath,
        name: &str,
        size: u64,
    ) -> Result<(Upload, Landed), Status> {
        move_to_landing(&self.incoming, &self.landing, name)
            .map_err(|e| misbehaving(name, &format!("cannot be moved to land ({e})")))?;
        let landed = Landed {
            dir: duplicate(&self.landing)?,
            name: name.to_owned(),
        };
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = rustix::fs::openat(&self.landing, name, flags, Mode::empty())
            .map_err(|e| misbehaving(name, &format!("cannot be opened ({e})")))?;
        let stx = rustix::fs::statx(&file, "", AtFlags::EMPTY_PATH, StatxFlags::BASIC_STATS)
            .map_err(|e| misbehaving(name, &format!("cannot be examined ({e})")))?;
        if FileType::from_raw_mode(stx.stx_mode.into()) != FileType::RegularFile {
            return Err(misbehaving(name, "is not a regular file"));
        }
        if stx.stx_nlink != 1 {
            return Err(misbehaving(
                name,
                &format!("has {} links, not one", stx.stx_nlink),
            ));
        }
        if stx.stx_uid != self.owner {
            return Err(misbehaving(
                name,
                &format!("belongs to user {}, not fileio's", stx.stx_uid),
            ));
        }
        if stx.stx_size != size {
            return Err(misbehaving(
                name,
                &format!("has {} bytes, not the {size} declared", stx.stx_size),
            ));
        }
        // A file system without flock (or NFS without a lock manager) cannot tell, and
        // loses this check, as it loses the orphan sweep's.
        if rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive)
            == Err(rustix::io::Errno::WOULDBLOCK)
        {
            return Err(misbehaving(name, "is still held by a writer"));
        }
        rustix::fs::fchmod(&file, Mode::from_raw_mode(0o644))
            .map_err(|e| misbehaving(name, &format!("cannot be given mode 0644 ({e})")))?;
        forget_kubedav_attributes(&file).map_err(|why| misbehaving(name, &why))?;
        let (dir, last) = volume.open_parent(&path)?;
        let last = last.to_owned();
        let upload = Upload::adopt(
            dir,
            last,
            path,
            duplicate(&self.landing)?,
            name.to_owned(),
            File::from(file),
            size,
            volume.durability(),
        );
        Ok((upload, landed))
    }
}

/// An incoming file in the landing folder, removed when this is dropped unless it was
/// committed (then its name is gone already).
pub struct Landed {
    dir: OwnedFd,
    name: String,
}

impl Drop for Landed {
    fn drop(&mut self) {
        let removed = match rustix::fs::unlinkat(&self.dir, self.name.as_str(), AtFlags::empty()) {
            // A folder a gateway handed over (if empty; else it stays, as it holds
            // nothing that lands).
            Err(rustix::io::Errno::ISDIR) => {
                rustix::fs::unlinkat(&self.dir, self.name.as_str(), AtFlags::REMOVEDIR)
            }
            other => other,
        };
        match removed {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => {
                tracing::warn!(name = %self.name, error = %e, "could not remove an incoming file that did not land")
            }
        }
    }
}

/// Moves `name` from `incoming` to `landing`, never over a file there. NFS and CephFS
/// refuse rename flags (EINVAL): there the file is linked into `landing` (which fails if
/// the name is taken) and its incoming name removed; the link count is checked after.
fn move_to_landing(incoming: &OwnedFd, landing: &OwnedFd, name: &str) -> rustix::io::Result<()> {
    match rustix::fs::renameat_with(incoming, name, landing, name, RenameFlags::NOREPLACE) {
        Err(rustix::io::Errno::INVAL) => {
            rustix::fs::linkat(incoming, name, landing, name, AtFlags::empty())?;
            rustix::fs::unlinkat(incoming, name, AtFlags::empty())
        }
        moved => moved,
    }
}

/// The owner a file this process makes in `dir` gets, read from a file made and removed
/// there: fileio's user on most volumes, the squashed user on an NFS export that maps
/// every user to one (`all_squash`, an EFS access point), where a gateway's files get
/// that owner too.
fn owner_of_new_files(dir: &OwnedFd) -> Result<u32, Status> {
    let name = format!("{:032x}.probe", fastrand::u128(..));
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let made = rustix::fs::openat(dir, name.as_str(), flags, Mode::from_raw_mode(0o600))
        .and_then(|file| rustix::fs::statx(&file, "", AtFlags::EMPTY_PATH, StatxFlags::BASIC_STATS));
    let _ = rustix::fs::unlinkat(dir, name.as_str(), AtFlags::empty());
    made.map(|stx| stx.stx_uid)
        .map_err(|e| Status::internal(format!("cannot make a file in the incoming area: {e}")))
}

/// Removes the attributes kubedav keeps with a file (`user.kubedav.*`: dead properties,
/// checksums, trash records) from one a gateway handed over: only fileio sets them.
fn forget_kubedav_attributes(file: &OwnedFd) -> Result<(), String> {
    let mut names = vec![0u8; 4096];
    let listed = match rustix::fs::flistxattr(file, &mut names) {
        Ok(listed) => listed,
        // A file system without extended attributes holds none.
        Err(rustix::io::Errno::NOTSUP) => return Ok(()),
        Err(e) => return Err(format!("has attributes that cannot be listed ({e})")),
    };
    for attribute in names[..listed].split(|&b| b == 0) {
        if attribute.starts_with(b"user.kubedav.") {
            let attribute =
                std::str::from_utf8(attribute).map_err(|_| "has an unreadable attribute name".to_owned())?;
            rustix::fs::fremovexattr(file, attribute)
                .map_err(|e| format!("has the attribute {attribute}, which cannot be removed ({e})"))?;
        }
    }
    Ok(())
}

fn duplicate(dir: &OwnedFd) -> Result<OwnedFd, Status> {
    rustix::io::fcntl_dupfd_cloexec(dir, 0)
        .map_err(|e| Status::internal(format!("cannot duplicate the landing folder's descriptor: {e}")))
}

/// A refusal of a file the gateway should not have handed over: the gateway
/// misbehaves, not the client.
fn misbehaving(name: &str, why: &str) -> Status {
    Status::internal(format!(
        "the gateway's incoming file {name} {why}; it is not landed (is --fileio-incoming the \
         incoming area of the volume this fileio serves?)"
    ))
}

/// Removes the files of the incoming area and the landing folder that no writer holds
/// and that nothing changed since `unchanged_since`; returns how many went.
pub fn sweep(landings: &Landings, unchanged_since: SystemTime) -> usize {
    [&landings.incoming, &landings.landing]
        .into_iter()
        .map(|dir| crate::orphans::sweep_folder(dir, unchanged_since))
        .sum()
}

/// Runs [`sweep`] now and every [`SWEEP_EVERY`] on a thread of its own, for as long as
/// `landings` lives.
pub fn keep_swept(landings: &Arc<Landings>) {
    let landings: Weak<Landings> = Arc::downgrade(landings);
    let _ = std::thread::Builder::new()
        .name("incoming-sweep".into())
        .spawn(move || {
            loop {
                let Some(held) = landings.upgrade() else { return };
                let removed = sweep(&held, SystemTime::now() - ABANDONED_AFTER);
                drop(held);
                if removed > 0 {
                    tracing::warn!(
                        target: "kubedav",
                        removed,
                        "removed files of the incoming area that no gateway landed"
                    );
                }
                std::thread::sleep(SWEEP_EVERY);
            }
        });
}
