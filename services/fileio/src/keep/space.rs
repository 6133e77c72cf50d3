//! A full volume makes room from what is kept (docs/trash-and-versions.md, "Retention
//! and purges"). An upload that declares its size reserves that room before its first
//! byte ([`Upload::begin`]). When the volume refuses (`ENOSPC`, or no inode left), the
//! oldest trash items and versions of the whole volume go first, whichever quota root
//! they count in, until the upload's size is freed, and the upload begins once more. A
//! full disk is the operator's, not one tenant's: the oldest kept thing goes, wherever.
//! A write through a public link never makes room (`WriteHeader.no_purge`), and a write
//! without a declared size that fills the volume is refused as before.

use super::{Keeping, retain};
use crate::volume::Volume;
use crate::write::Upload;
use kubedav_api::path::VolumePath;
use tonic::{Code, Status};

/// Begins an upload of `size` bytes (when declared) at `path`; when the volume has no
/// room, removes the oldest things `keeping` keeps (if any, and if `may_purge`) and
/// tries once more.
pub fn begin_upload(
    volume: &Volume,
    keeping: Option<&Keeping>,
    path: VolumePath,
    size: Option<u64>,
    may_purge: bool,
) -> Result<Upload, Status> {
    with_room(volume, keeping, &path, size, may_purge, || {
        Upload::begin(volume, path.clone(), size)
    })
}

/// What `reserve` gives (it reserves `size` bytes for a write to `path`); when it finds
/// no room (RESOURCE_EXHAUSTED), removes the oldest things `keeping` keeps (if any, and
/// if `may_purge`) and calls it once more.
pub fn with_room<T>(
    volume: &Volume,
    keeping: Option<&Keeping>,
    path: &VolumePath,
    size: Option<u64>,
    may_purge: bool,
    reserve: impl Fn() -> Result<T, Status>,
) -> Result<T, Status> {
    let (Some(keeping), Some(need), true) = (keeping, size, may_purge) else {
        return reserve();
    };
    let refused = match reserve() {
        Err(refused) if refused.code() == Code::ResourceExhausted => refused,
        reserved => return reserved,
    };
    let (freed, removed) = retain::make_room(volume, keeping, &VolumePath::root(), need)?;
    if removed == 0 {
        return Err(refused);
    }
    crate::metrics::purged("space", removed);
    tracing::warn!(
        target: "kubedav",
        freed,
        removed,
        "the volume was full: removed its oldest trash items and versions to make room for {path}"
    );
    reserve()
}
