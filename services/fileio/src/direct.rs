//! Large files sent from fileio's volume where a gateway mounts it too: the zero-copy
//! path of large GET bodies in microservices mode (`--fileio-volume`).
//!
//! In one process a large GET goes from the page cache to the client's socket with
//! `sendfile` (`kubedav_zerocopy`). Across processes the bytes otherwise cross fileio's
//! gRPC stream: read into memory, framed, sent over TCP, received and sent again, four
//! copies of every byte. A gateway that mounts the same volume (read only is enough)
//! opens the file itself with a [`VolumeReader`] (the `MountedVolume` port) and sends it
//! with `sendfile`, once fileio has named that very version of the file: fileio's
//! `Stat` answers the validator of the file it holds (`crate::cache::validity`: the
//! inode's identity and its birth and change times, once settled), and the gateway
//! sends from its own descriptor only when that descriptor's validator names the same
//! version (`kubedav_api::fileio::same_version`, which leaves out the device number each
//! mount is given). So what is sent is what kubedav answers for the path, within the
//! gateway's freshness bound (the `Stat` may come from the gateway's kept answers).
//! Everything else (small files, versions, a file changed in the last moments, one the
//! gateway's user does not own, a mount that shows another filesystem) goes to fileio
//! as before.
//!
//! Nothing here writes, and nothing here decides what a principal may read: the gateway
//! has made that decision for the path before it asks, as for any read.

use crate::metadata;
use crate::volume::Volume;
use futures_util::StreamExt;
use kubedav_api::fileio::{MountedVolume, OpenedFile, ReadHeader, ReadReply, ReadRequest};
use kubedav_api::path::VolumePath;
use rustix::fs::OFlags;
use std::path::Path;
use std::sync::Arc;

/// Read-only access to fileio's volume, mounted in a gateway as well.
pub struct VolumeReader {
    volume: Volume,
}

impl VolumeReader {
    /// Reads beneath `root`, the directory where fileio's volume is mounted here; fails
    /// with a message naming the problem if it is not a directory this process can open.
    pub fn open(root: &Path) -> Result<Self, String> {
        Ok(Self {
            volume: Volume::open(root)?,
        })
    }
}

impl MountedVolume for VolumeReader {
    /// The file `request` asks for, opened here to be sent with `sendfile`, or `None`
    /// when fileio should answer instead: a version, anything that is not a file larger
    /// than `map_above` bytes on this mount, a file whose change time has not settled
    /// (no validator yet), or one whose pages the kernel would not report as cached to
    /// this process (`kubedav_zerocopy::residency_is_reported`). Errors become `None`
    /// too: fileio answers them as it always does.
    fn open_to_send(&self, request: &ReadRequest, map_above: u64) -> Option<OpenedFile> {
        if !request.version.is_empty() {
            return None;
        }
        let path = VolumePath::parse(&request.path).ok()?;
        let read_began = std::time::SystemTime::now();
        let fd = self
            .volume
            .open_beneath(&path, OFlags::RDONLY | OFlags::NONBLOCK)
            .ok()?;
        let stx = metadata::stat_fd(&fd, &path).ok()?;
        let info = metadata::validated_file_info(&path, &stx, read_began);
        if info.is_collection
            || info.size <= map_above
            || info.validator.is_empty()
            || !kubedav_zerocopy::residency_is_reported(stx.stx_uid)
        {
            return None;
        }
        let ranges = kubedav_api::ranges::resolve_ranges(&request.ranges, info.size);
        let chunks =
            crate::read::ChunkStream::new(Arc::new(std::fs::File::from(fd)), ranges.clone(), None, |_| {})
                .mapping(Some(kubedav_zerocopy::FileVersion::of(&stx)))
                .boxed();
        Some(OpenedFile {
            validator: info.validator.clone(),
            reply: ReadReply {
                header: ReadHeader {
                    info: Some(info),
                    ranges,
                },
                chunks,
            },
        })
    }
}
