//! Where a gateway's kept copies of files live: [`CopyStore`].
//!
//! A kept copy over 64 KiB is written to a file once, mapped, and sent with `sendfile`
//! on every hit, like any mapping of this module. Which kind of file matters: `sendfile`
//! from shmem (a memfd, or tmpfs) cost about 58 µs of CPU per MiB in a C loop over a
//! loopback socket on this project's machine (Linux 6.18), and from an ext4 file about
//! 38 µs, since the page cache of a disk filesystem sends in larger folios and by a
//! shorter path (docs/benchmarks.md, "2026-11-26 (3)"). So a gateway keeps its copies
//! in unnamed files (`O_TMPFILE`) in a directory on a disk-backed filesystem when it
//! has one, and in sealed memfds otherwise.
//!
//! An unnamed file has no path: only this process's descriptor reaches it, and this
//! module never truncates it, so its mapping is as safe to read as a sealed memfd's. Its
//! space is freed when its last mapping goes. Its pages are page cache, so under memory
//! pressure the kernel may write them out and evict them; a later hit then reads them
//! back from the disk, where a memfd's would have stayed in memory (or been swapped).

use super::Mapping;
use bytes::Bytes;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;

/// Where kept copies of files are written before they are mapped.
#[derive(Clone, Debug, Default)]
pub enum CopyStore {
    /// Sealed memfds: memory nothing can change.
    #[default]
    Memory,
    /// Unnamed files in this directory, on a disk-backed filesystem.
    Directory(Arc<OwnedFd>),
}

/// `statfs` magic numbers of the filesystems that are memory already: a copy there
/// costs what a memfd costs, without the seals.
const MEMORY_FILESYSTEMS: [i64; 2] = [
    0x0102_1994, // tmpfs
    0x8584_58f6, // ramfs
];

impl CopyStore {
    /// The store for `dir`, and why when it is memory: a directory on tmpfs or ramfs,
    /// one that cannot be opened, or one whose filesystem refuses unnamed files (such
    /// as overlayfs before Linux 6.6) keeps copies in memory.
    pub fn in_directory(dir: &Path) -> (Self, Option<String>) {
        match Self::usable_directory(dir) {
            Ok(store) => (store, None),
            Err(why) => (Self::Memory, Some(why)),
        }
    }

    /// [`Self::Directory`] of `dir`, or why it cannot be one.
    fn usable_directory(dir: &Path) -> Result<Self, String> {
        use rustix::fs::{Mode, OFlags};
        let shown = dir.display();
        let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(dir, flags, Mode::empty())
            .map_err(|e| format!("{shown} cannot be opened: {e}"))?;
        let stat = rustix::fs::fstatfs(&fd).map_err(|e| format!("{shown}: statfs failed: {e}"))?;
        // `f_type`'s integer type differs between architectures.
        #[allow(clippy::unnecessary_cast)]
        if MEMORY_FILESYSTEMS.contains(&(stat.f_type as i64)) {
            return Err(format!("{shown} is in memory (tmpfs or ramfs)"));
        }
        unnamed_file_in(&fd).map_err(|e| format!("{shown} refuses unnamed files (O_TMPFILE): {e}"))?;
        Ok(Self::Directory(Arc::new(fd)))
    }

    /// A copy of `data` mapped read-only, which a [`super::locate`]-aware connection
    /// sends with `sendfile`; safe for anyone to read, since nothing can truncate it.
    /// A directory that fails (full, say) leaves the copy to a memfd. `None` if that
    /// fails too, or `data` is empty: the caller keeps `data` as it is then.
    pub fn copy(&self, data: &[u8]) -> Option<Bytes> {
        if data.is_empty() {
            return None;
        }
        if let Self::Directory(dir) = self {
            let written = unnamed_file_in(dir).and_then(|mut file| {
                file.write_all(data)?;
                Ok(file)
            });
            if let Some(bytes) = written.ok().and_then(|file| mapped_whole(file, data.len())) {
                return Some(bytes);
            }
        }
        sealed_memfd(data)
    }
}

/// A new unnamed file in the directory `dir`, open for reading and writing.
fn unnamed_file_in(dir: &OwnedFd) -> std::io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        dir,
        ".",
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::RUSR | Mode::WUSR,
    )?;
    Ok(File::from(fd))
}

/// `data` (not empty) in a sealed memfd (a file in memory that can no longer shrink,
/// grow or change), mapped read-only.
fn sealed_memfd(data: &[u8]) -> Option<Bytes> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd =
        rustix::fs::memfd_create("kubedav-kept", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).ok()?;
    let mut file = File::from(fd);
    file.write_all(data).ok()?;
    let seals = SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE | SealFlags::SEAL;
    rustix::fs::fcntl_add_seals(&file, seals).ok()?;
    mapped_whole(file, data.len())
}

/// The first `len` bytes of `file`, mapped and registered for [`super::locate`].
fn mapped_whole(file: File, len: usize) -> Option<Bytes> {
    let (mapping, _) = Mapping::of(&Arc::new(file), 0, len)?;
    Some(Bytes::from_owner(mapping.register(len, 0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locate;

    fn data() -> Vec<u8> {
        (0..100_000u32).map(|i| (i % 253) as u8).collect()
    }

    /// Whether `fd` is a file with no name: its /proc link says "(deleted)", and the
    /// directory holds no file.
    fn has_no_name(fd: i32, dir: &Path) -> bool {
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        let text = link.to_string_lossy();
        text.ends_with("(deleted)") && std::fs::read_dir(dir).unwrap().next().is_none()
    }

    #[test]
    fn a_copy_in_a_directory_reads_back_is_found_and_leaves_no_file_behind() {
        // The source tree is on a disk filesystem wherever this project builds.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let (store, why_memory) = CopyStore::in_directory(dir.path());
        assert!(
            matches!(store, CopyStore::Directory(_)),
            "unnamed files in the source tree: {why_memory:?}"
        );
        let data = data();
        let copy = store.copy(&data).expect("written and mapped");
        assert_eq!(&copy[..], &data[..]);
        let span = locate(copy[10..].as_ptr()).expect("inside the mapping");
        assert_eq!((span.offset, span.available), (10, 99_990));
        assert!(
            has_no_name(span.fd, dir.path()),
            "an unnamed file, not a file in the directory"
        );
        assert!(store.copy(&[]).is_none());
    }

    #[test]
    fn a_directory_in_memory_or_missing_keeps_copies_in_memfds() {
        if Path::new("/dev/shm").is_dir() {
            let (store, why) = CopyStore::in_directory(Path::new("/dev/shm"));
            assert!(matches!(store, CopyStore::Memory), "/dev/shm is tmpfs");
            assert!(why.unwrap().contains("tmpfs"));
        }
        let (store, why) = CopyStore::in_directory(Path::new("/no/such/dir"));
        assert!(matches!(store, CopyStore::Memory));
        assert!(why.unwrap().contains("/no/such/dir cannot be opened"));
        let data = data();
        let copy = store.copy(&data).expect("a memfd");
        assert_eq!(&copy[..], &data[..]);
        let span = locate(copy.as_ptr()).expect("inside the mapping");
        let link = std::fs::read_link(format!("/proc/self/fd/{}", span.fd)).unwrap();
        assert!(
            link.to_string_lossy().starts_with("/memfd:kubedav-kept"),
            "{link:?}"
        );
    }
}
