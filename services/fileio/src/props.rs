//! Dead properties, stored with the resource they belong to.
//!
//! All dead properties of a resource live in one extended attribute,
//! `user.kubedav.props`, as a small length-prefixed encoding. Being part of the inode,
//! they follow a rename (MOVE) and go with an unlink (DELETE) atomically, and a change is
//! one `fsetxattr`, so a PROPPATCH is all or nothing. COPY and a PUT that replaces a file
//! carry them over explicitly.
//!
//! The filesystem bounds their size: ext4 keeps all extended attributes of a file in
//! about 4 KiB, XFS and tmpfs allow 64 KiB per attribute. Past that a PROPPATCH fails with
//! RESOURCE_EXHAUSTED (507) and nothing changes.

use crate::errors::{Op, io_status};
use kubedav_api::fileio::PatchPropertiesRequest;
use kubedav_api::path::VolumePath;
use kubedav_api::pb::fileio::v1::{DeadProperty, property_operation};
use rustix::fd::AsFd;
use rustix::fs::XattrFlags;
use rustix::io::Errno;
use tonic::Status;

/// The extended attribute holding a resource's dead properties.
pub const XATTR: &str = "user.kubedav.props";
const FORMAT: u8 = 1;

/// Encodes properties: a format byte, then per property the namespace and name (u16
/// length each) and the value (u32 length), little endian.
pub fn encode(props: &[DeadProperty]) -> Vec<u8> {
    let mut out = vec![FORMAT];
    for p in props {
        out.extend_from_slice(&(p.namespace.len() as u16).to_le_bytes());
        out.extend_from_slice(p.namespace.as_bytes());
        out.extend_from_slice(&(p.name.len() as u16).to_le_bytes());
        out.extend_from_slice(p.name.as_bytes());
        out.extend_from_slice(&(p.value.len() as u32).to_le_bytes());
        out.extend_from_slice(&p.value);
    }
    out
}

/// The attribute value for `props`: empty (no attribute) when there are none.
pub fn encode_or_empty(props: &[DeadProperty]) -> Vec<u8> {
    if props.is_empty() {
        Vec::new()
    } else {
        encode(props)
    }
}

/// Decodes what [`encode`] wrote; `None` if the bytes are not in that format.
pub fn decode(mut bytes: &[u8]) -> Option<Vec<DeadProperty>> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (bytes.get(..n)?, bytes.get(n..)?);
        *bytes = tail;
        Some(head)
    }
    fn text(bytes: &mut &[u8]) -> Option<String> {
        let len = u16::from_le_bytes(take(bytes, 2)?.try_into().ok()?) as usize;
        String::from_utf8(take(bytes, len)?.to_vec()).ok()
    }
    if take(&mut bytes, 1)? != [FORMAT] {
        return None;
    }
    let mut props = Vec::new();
    while !bytes.is_empty() {
        let namespace = text(&mut bytes)?;
        let name = text(&mut bytes)?;
        let len = u32::from_le_bytes(take(&mut bytes, 4)?.try_into().ok()?) as usize;
        let value = bytes::Bytes::copy_from_slice(take(&mut bytes, len)?);
        props.push(DeadProperty {
            namespace,
            name,
            value,
        });
    }
    Some(props)
}

/// Decodes a raw attribute as read: empty bytes are no properties; `None` if the bytes
/// are not in [`encode`]'s format.
pub fn decode_or_empty(raw: &[u8]) -> Option<Vec<DeadProperty>> {
    if raw.is_empty() {
        Some(Vec::new())
    } else {
        decode(raw)
    }
}

/// The raw attribute of an open resource (empty when it has none, or when the
/// filesystem has no extended attributes).
pub fn read_raw(fd: impl AsFd, path: &VolumePath) -> Result<Vec<u8>, Status> {
    let mut small = [0u8; 4096];
    match rustix::fs::fgetxattr(&fd, XATTR, &mut small[..]) {
        Ok(n) => return Ok(small[..n].to_vec()),
        Err(Errno::NODATA | Errno::NOTSUP) => return Ok(Vec::new()),
        Err(Errno::RANGE) => {}
        Err(e) => return Err(io_status(e, Op::Other, path)),
    }
    let size = rustix::fs::fgetxattr_query(&fd, XATTR).map_err(|e| io_status(e, Op::Other, path))?;
    let mut big = vec![0u8; size];
    let n = rustix::fs::fgetxattr(&fd, XATTR, &mut big[..]).map_err(|e| io_status(e, Op::Other, path))?;
    big.truncate(n);
    Ok(big)
}

/// `getxattrat(2)`'s number (Linux 6.13; the generic table, shared by these targets).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SYS_GETXATTRAT: libc::c_long = 464;

/// Whether this kernel has `getxattrat(2)`; cleared on the first ENOSYS.
static HAS_GETXATTRAT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// The raw attribute of the member `name` of the open directory `dir`, in one
/// `getxattrat(2)` call: the member is neither opened nor followed if it is a symlink
/// (a symlink's own attributes hold no dead properties). `None` when the kernel lacks
/// the call (before Linux 6.13): the caller then opens the member and uses [`read_raw`].
pub fn read_raw_at(dir: impl AsFd, name: &str, path: &VolumePath) -> Option<Result<Vec<u8>, Status>> {
    use std::sync::atomic::Ordering;
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) || !HAS_GETXATTRAT.load(Ordering::Relaxed)
    {
        return None;
    }
    // The C strings on the stack: a directory entry's name is at most 255 bytes, never NUL.
    let mut c_name = [0u8; 256];
    if name.len() >= c_name.len() || name.as_bytes().contains(&0) {
        return Some(Err(Status::invalid_argument(format!(
            "{path}: the name is not a valid file name"
        ))));
    }
    c_name[..name.len()].copy_from_slice(name.as_bytes());
    const C_XATTR: &[u8] = b"user.kubedav.props\0";
    let mut small = [0u8; 4096];
    match getxattrat(dir.as_fd(), &c_name, C_XATTR, &mut small) {
        Ok(n) => Some(Ok(small[..n].to_vec())),
        Err(Errno::NODATA | Errno::NOTSUP) => Some(Ok(Vec::new())),
        Err(Errno::NOSYS) => {
            HAS_GETXATTRAT.store(false, Ordering::Relaxed);
            None
        }
        // Larger than the stack buffer (rare: the filesystem allows up to 64 KiB).
        Err(Errno::RANGE) => {
            let mut big = vec![0u8; 65536];
            Some(match getxattrat(dir.as_fd(), &c_name, C_XATTR, &mut big) {
                Ok(n) => {
                    big.truncate(n);
                    Ok(big)
                }
                Err(e) => Err(io_status(e, Op::Other, path)),
            })
        }
        Err(e) => Some(Err(io_status(e, Op::Other, path))),
    }
}

/// `getxattrat(dir, name, AT_SYMLINK_NOFOLLOW, attribute, {value, size})`; both names are
/// NUL-terminated.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn getxattrat(
    dir: rustix::fd::BorrowedFd<'_>,
    name: &[u8],
    attribute: &[u8],
    value: &mut [u8],
) -> Result<usize, Errno> {
    use rustix::fd::AsRawFd;
    /// The kernel's `struct xattr_args` (its first version, 16 bytes).
    #[repr(C)]
    struct XattrArgs {
        value: u64,
        size: u32,
        flags: u32,
    }
    let args = XattrArgs {
        value: value.as_mut_ptr() as u64,
        size: u32::try_from(value.len()).unwrap_or(u32::MAX),
        flags: 0,
    };
    // SAFETY: both names are NUL-terminated and live across the call; `args` points at a
    // writable buffer of `size` bytes, and its size is passed as the kernel expects.
    let n = unsafe {
        libc::syscall(
            SYS_GETXATTRAT,
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            attribute.as_ptr(),
            &args as *const XattrArgs,
            std::mem::size_of::<XattrArgs>(),
        )
    };
    if n < 0 {
        Err(Errno::from_raw_os_error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    } else {
        Ok(n as usize)
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn getxattrat(_: rustix::fd::BorrowedFd<'_>, _: &[u8], _: &[u8], _: &mut [u8]) -> Result<usize, Errno> {
    Err(Errno::NOSYS)
}

/// The dead properties of an open resource.
pub fn read(fd: impl AsFd, path: &VolumePath) -> Result<Vec<DeadProperty>, Status> {
    decode_or_empty(&read_raw(fd, path)?)
        .ok_or_else(|| Status::data_loss(format!("the dead properties of {path} are unreadable")))
}

/// Replaces the raw attribute of an open resource (removes it when `raw` is empty).
pub fn write_raw(fd: impl AsFd, raw: &[u8], path: &VolumePath) -> Result<(), Status> {
    let result = if raw.is_empty() {
        match rustix::fs::fremovexattr(&fd, XATTR) {
            Err(Errno::NODATA) => Ok(()),
            other => other,
        }
    } else {
        rustix::fs::fsetxattr(&fd, XATTR, raw, XattrFlags::empty())
    };
    result.map_err(|e| match e {
        Errno::NOSPC | Errno::TOOBIG | Errno::RANGE => Status::resource_exhausted(format!(
            "the dead properties of {path} are larger than the volume stores per resource \
             (about 4 KiB on ext4, 64 KiB on XFS); nothing was changed"
        )),
        Errno::NOTSUP => Status::failed_precondition(
            "the volume does not support extended attributes, where kubedav keeps dead properties",
        ),
        other => io_status(other, Op::Other, path),
    })
}

/// Refuses, with INVALID_ARGUMENT, a PROPPATCH that touches properties in fileio's own
/// namespace (`kubedav_api::checksums::RESERVED_NAMESPACE`). Checked before [`apply`].
pub fn check(request: &PatchPropertiesRequest) -> Result<(), Status> {
    let reserved = request.operations.iter().any(|op| match &op.op {
        Some(property_operation::Op::Set(p)) => kubedav_api::checksums::is_reserved(&p.namespace),
        Some(property_operation::Op::Remove(n)) => kubedav_api::checksums::is_reserved(&n.namespace),
        None => false,
    });
    if reserved {
        return Err(Status::invalid_argument(format!(
            "properties in {} are kubedav's own and cannot be changed",
            kubedav_api::checksums::RESERVED_NAMESPACE
        )));
    }
    Ok(())
}

/// Applies a PROPPATCH's operations in order to `props`.
pub fn apply(props: &mut Vec<DeadProperty>, request: &PatchPropertiesRequest) {
    for op in &request.operations {
        match &op.op {
            Some(property_operation::Op::Set(set)) => {
                props.retain(|p| !(p.namespace == set.namespace && p.name == set.name));
                props.push(set.clone());
            }
            Some(property_operation::Op::Remove(name)) => {
                props.retain(|p| !(p.namespace == name.namespace && p.name == name.name));
            }
            None => {}
        }
    }
}

/// The raw attribute `raw` with its reserved checksums replaced by `stored` (or removed,
/// when `None`): what a new version of a file keeps of the old one's properties.
pub fn with_checksums(
    raw: &[u8],
    stored: Option<&kubedav_api::checksums::Stored>,
    path: &VolumePath,
) -> Result<Vec<u8>, Status> {
    let Some(mut props) = decode_or_empty(raw) else {
        if stored.is_none() {
            // Not ours to judge: carried over as it is, as before checksums existed.
            return Ok(raw.to_vec());
        }
        return Err(Status::data_loss(format!(
            "the dead properties of {path} are unreadable"
        )));
    };
    props.retain(|p| !kubedav_api::checksums::is_reserved(&p.namespace));
    props.extend(stored.map(kubedav_api::checksums::Stored::to_property));
    Ok(encode_or_empty(&props))
}

/// Sets the modification time of an open resource, leaving its access time.
pub fn set_modified(fd: impl AsFd, unix_ns: i64, path: &VolumePath) -> Result<(), Status> {
    set_mtime(
        fd,
        rustix::fs::Timespec {
            tv_sec: unix_ns.div_euclid(1_000_000_000),
            tv_nsec: unix_ns.rem_euclid(1_000_000_000) as _,
        },
        path,
    )
}

/// Sets the modification time of an open directory to now: a member of it changed in
/// place (its properties or its time), and the collection's etag, which includes that
/// time, must change with it for clients that poll the collection.
pub fn touch(dir: impl AsFd, path: &VolumePath) -> Result<(), Status> {
    let now = rustix::fs::Timespec {
        tv_sec: 0,
        tv_nsec: rustix::fs::UTIME_NOW,
    };
    set_mtime(dir, now, path)
}

/// `futimens` with the modification time `mtime` and the access time left as it is.
fn set_mtime(fd: impl AsFd, mtime: rustix::fs::Timespec, path: &VolumePath) -> Result<(), Status> {
    let times = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        last_modification: mtime,
    };
    rustix::fs::futimens(fd, &times).map_err(|e| io_status(e, Op::Other, path))
}

/// Moves stored checksums that name the etag `before` to `after` (the content did not
/// change, only its modification time).
pub fn rebind_checksums(props: &mut [DeadProperty], before: &str, after: &str) {
    use kubedav_api::checksums::Stored;
    if let Some(stored) = Stored::find(props)
        && stored.etag == before
        && let Some(slot) = props
            .iter_mut()
            .find(|p| kubedav_api::checksums::is_reserved(&p.namespace))
    {
        *slot = Stored {
            etag: after.to_owned(),
            sums: stored.sums,
        }
        .to_property();
    }
}

pub use kubedav_api::properties::select;

#[cfg(test)]
mod tests {
    use super::*;

    fn prop(ns: &str, name: &str, value: &str) -> DeadProperty {
        DeadProperty {
            namespace: ns.into(),
            name: name.into(),
            value: bytes::Bytes::from(value.to_owned()),
        }
    }

    #[test]
    fn round_trips_and_rejects_garbage() {
        let props = vec![
            prop("http://ex/", "a", "<x xmlns=\"\">1</x>"),
            prop("", "empty-ns", ""),
            prop("u", "é", "ü"),
        ];
        assert_eq!(decode(&encode(&props)).unwrap(), props);
        assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
        assert!(decode(&[2, 0]).is_none());
        let mut cut = encode(&props);
        cut.pop();
        assert!(decode(&cut).is_none());
    }

    #[test]
    fn set_replaces_and_remove_deletes() {
        use kubedav_api::pb::fileio::v1::{PropertyName, PropertyOperation};
        let mut props = vec![prop("n", "a", "1"), prop("n", "b", "2")];
        let request = PatchPropertiesRequest {
            path: String::new(),
            operations: vec![
                PropertyOperation {
                    op: Some(property_operation::Op::Set(prop("n", "a", "3"))),
                },
                PropertyOperation {
                    op: Some(property_operation::Op::Remove(PropertyName {
                        namespace: "n".into(),
                        name: "b".into(),
                    })),
                },
                PropertyOperation {
                    op: Some(property_operation::Op::Remove(PropertyName {
                        namespace: "n".into(),
                        name: "zz".into(),
                    })),
                },
            ],
            modified_unix_ns: None,
        };
        apply(&mut props, &request);
        assert_eq!(props, vec![prop("n", "a", "3")]);
    }
}
