//! Resource metadata from `statx(2)`, and strong ETags.

use crate::errors::{Op, io_status};
use kubedav_api::fileio::FileInfo;
use kubedav_api::path::VolumePath;
use rustix::fd::AsFd;
use rustix::fs::{AtFlags, FileType, Statx, StatxFlags};
use tonic::Status;

/// What every `statx` of fileio asks for.
pub const WANTED: StatxFlags = StatxFlags::BASIC_STATS.union(StatxFlags::BTIME);

/// `statx` of an open descriptor.
pub fn stat_fd(fd: impl AsFd, path: &VolumePath) -> Result<Statx, Status> {
    rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, WANTED).map_err(|e| io_status(e, Op::Other, path))
}

/// `statx` of a name in an open directory, without following a final symlink.
pub fn stat_at(dir: impl AsFd, name: &str, path: &VolumePath) -> Result<Statx, Status> {
    rustix::fs::statx(dir, name, AtFlags::SYMLINK_NOFOLLOW, WANTED)
        .map_err(|e| io_status(e, Op::Resolve, path))
}

/// Whether a statx result is a directory.
pub fn is_dir(stx: &Statx) -> bool {
    FileType::from_raw_mode(stx.stx_mode.into()) == FileType::Directory
}

/// Whether a statx result is a symbolic link.
pub fn is_symlink(stx: &Statx) -> bool {
    FileType::from_raw_mode(stx.stx_mode.into()) == FileType::Symlink
}

fn nanos(ts: &rustix::fs::StatxTimestamp) -> i64 {
    ts.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(i64::from(ts.tv_nsec))
}

/// The strong entity tag: inode, size and modification time in nanoseconds, in hex.
/// Every committed write is a new inode (atomic rename), so two versions never share one.
pub fn etag(stx: &Statx) -> String {
    let mut out = String::with_capacity(40);
    push_hex(&mut out, stx.stx_ino);
    out.push('-');
    push_hex(&mut out, stx.stx_size);
    out.push('-');
    push_hex(&mut out, nanos(&stx.stx_mtime) as u64);
    out
}

/// `value` in lower-case hex, without leading zeros (as `{:x}` writes it).
fn push_hex(out: &mut String, value: u64) {
    let digits = (64 - value.leading_zeros()).div_ceil(4).max(1);
    for place in (0..digits).rev() {
        out.push(char::from(
            b"0123456789abcdef"[(value >> (place * 4) & 15) as usize],
        ));
    }
}

/// The contract's metadata for a statx result.
pub fn file_info(path: &VolumePath, stx: &Statx) -> FileInfo {
    let is_collection = is_dir(stx);
    let created = if stx.stx_mask & StatxFlags::BTIME.bits() != 0 {
        &stx.stx_btime
    } else {
        &stx.stx_ctime
    };
    FileInfo {
        path: path.as_str().to_owned(),
        is_collection,
        size: if is_collection { 0 } else { stx.stx_size },
        modified_unix_ns: nanos(&stx.stx_mtime),
        created_unix_ns: nanos(created),
        etag: etag(stx),
        validator: String::new(),
    }
}

/// [`file_info`] as `Stat` and `Read` answer it: for a file, with its validator
/// ([`crate::cache::validity::validator`]); `before` is a moment before the `statx`.
pub fn validated_file_info(path: &VolumePath, stx: &Statx, before: std::time::SystemTime) -> FileInfo {
    let mut info = file_info(path, stx);
    if !info.is_collection {
        info.validator = crate::cache::validity::validator(stx, before);
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_as_format_writes_it() {
        for value in [0u64, 1, 15, 16, 0xabc, u64::MAX, 1 << 63, 0x18ea63bb4bde35ee] {
            let mut out = String::new();
            push_hex(&mut out, value);
            assert_eq!(out, format!("{value:x}"));
        }
    }
}
