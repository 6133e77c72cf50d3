//! The fileio port: [`FileIo`], the volume as the gateway sees it. The gRPC adapters
//! are `kubedav_remote::client::RemoteFileIo` and `kubedav_remote::server::FileIoGrpc`.

use crate::BoxStream;
use crate::pb::fileio::v1 as pb;
use bytes::Bytes;
use tonic::Status;

pub use pb::{
    CopyRequest, DeleteRequest, DeleteResponse, Depth, FileInfo, FromUpload, ListEntry, ListRequest,
    ListResponse, MkdirRequest, MkdirResponse, MoveRequest, PatchPropertiesRequest, PatchPropertiesResponse,
    ReadChunk, ReadHeader, ReadRequest, StatRequest, TransferResponse, UsageRequest, UsageResponse,
    WriteHeader, WriteResponse,
};

/// An open read: the header (metadata and resolved ranges) and the data that follows.
pub struct ReadReply {
    /// Metadata of the file and the ranges `chunks` will carry, in order.
    pub header: ReadHeader,
    /// The data, range by range: from fileio's `read`, in chunks of at most
    /// [`crate::MAX_CHUNK_BYTES`]; a read to send may give mappings of up to 8 MiB, and
    /// the gateway's cache answers each range of a kept file as one chunk.
    pub chunks: BoxStream<ReadChunk>,
}

/// The volume, as the gateway sees it. Implemented by fileio's core (local) and by
/// `RemoteFileIo` (over gRPC). See `proto/kubedav/fileio/v1/fileio.proto` for the
/// meaning of each call and its error codes.
///
/// A wrapper (quota, leases, the gateway's cache) writes out every method, those with
/// a default too, under `#[deny(clippy::missing_trait_methods)]`: a default left in
/// place would answer for the wrapper and silently bypass what it wraps.
#[async_trait::async_trait]
pub trait FileIo: Send + Sync + 'static {
    /// Metadata of one resource.
    async fn stat(&self, request: StatRequest) -> Result<FileInfo, Status>;
    /// A resource and its members, in batches.
    async fn list(&self, request: ListRequest) -> Result<BoxStream<ListResponse>, Status>;
    /// A streaming read of whole file or byte ranges.
    async fn read(&self, request: ReadRequest) -> Result<ReadReply, Status>;
    /// A read whose data the caller hands straight to a connection that sends mapped
    /// bytes with `sendfile(2)`, never reading them itself: the chunks of a file of
    /// more than `map_above` bytes may then be mappings of the file
    /// (`kubedav_zerocopy::map_resident` says why the caller must not read them: a file
    /// truncated in place behind kubedav's back would raise `SIGBUS`). Where nothing can
    /// be mapped (over gRPC, on object storage) it is [`FileIo::read`], as by default.
    async fn read_to_send(&self, request: ReadRequest, map_above: u64) -> Result<ReadReply, Status> {
        let _ = map_above;
        self.read(request).await
    }
    /// A streaming atomic write.
    async fn write(&self, header: WriteHeader, body: BoxStream<Bytes>) -> Result<WriteResponse, Status>;
    /// Delete a resource (recursively for a collection).
    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status>;
    /// Create a collection.
    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status>;
    /// Copy a resource.
    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status>;
    /// Move a resource.
    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status>;
    /// Set and remove dead properties.
    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status>;
    /// Space used and available.
    async fn usage(&self, request: UsageRequest) -> Result<UsageResponse, Status>;
    /// Which copy of the resource at `path` this port would answer a Depth 0 listing
    /// from now, if it keeps one: the same number later means the same copy, so what was
    /// made of a listing answered from it still holds; any change to the resource
    /// (announced, or older than the freshness bound) replaces the copy and its number.
    /// `None`, as by default: nothing is kept, or not now.
    fn kept_copy(&self, path: &str) -> Option<u64> {
        let _ = path;
        None
    }
}

/// Files a gateway opens itself, from its own mount of fileio's volume
/// (`--fileio-volume`), to send with `sendfile` once fileio names the version opened.
/// Implemented by fileio's `direct::VolumeReader`; used by the gateway's `DirectIo`
/// (docs/architecture.md, "Large files from the gateway's mount").
pub trait MountedVolume: Send + Sync + 'static {
    /// The file `request` asks for, opened on the mount to be sent, or `None` when
    /// fileio should answer instead (a version, a small file, one changed in the last
    /// moments, one the mount cannot open, one whose page cache the kernel would not
    /// report to this process as it does not own it). Blocking: call it on the blocking
    /// pool.
    fn open_to_send(&self, request: &ReadRequest, map_above: u64) -> Option<OpenedFile>;
}

/// The folder of kubedav's area on fileio's volume where a gateway that mounts it
/// writes large bodies itself (`--fileio-incoming`): `.kubedav/` + this.
pub const INCOMING_FOLDER: &str = "incoming";

/// Whether `name` is a file name of the incoming area: 32 lowercase hex digits (128
/// random bits) and `.part`. Nothing else is ever landed.
pub fn is_incoming_name(name: &str) -> bool {
    name.strip_suffix(".part")
        .is_some_and(|stem| stem.len() == 32 && stem.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The incoming area of fileio's volume, mounted read-write in a gateway
/// (`--fileio-incoming`): the gateway writes a large PUT's body into a new file there,
/// and fileio lands it (`WriteHeader.incoming`), so the bytes never cross gRPC.
/// Implemented by fileio's `incoming::IncomingFolder`; used by the gateway's `DirectIo`
/// (docs/architecture.md, "Large uploads into the gateway's mount").
pub trait IncomingArea: Send + Sync + 'static {
    /// A new, empty file of a fresh name ([`is_incoming_name`]). Blocking: call it on
    /// the blocking pool.
    fn create(&self) -> Result<Box<dyn IncomingFile>, Status>;
}

/// A file of the incoming area being written. Its name is removed when it is dropped,
/// whatever happened to it (a landed file is no longer there).
pub trait IncomingFile: Send + 'static {
    /// The file's name in the area.
    fn name(&self) -> &str;
    /// Appends `chunks`. Blocking: call it on the blocking pool.
    fn write_chunks(&mut self, chunks: &[Bytes]) -> Result<(), Status>;
    /// Closes the file, so that fileio finds no writer holding it; its name stays. Fails
    /// if the file system reports then that a write failed (NFS does).
    fn close(&mut self) -> Result<(), Status>;
}

/// A file opened by a [`MountedVolume`], with the validator of the version opened
/// (never empty).
pub struct OpenedFile {
    /// What `Stat` must name ([`same_version`]) for this reply to be sent.
    pub validator: String,
    /// The header as the mount shows it, and chunks that are mappings of the file.
    pub reply: ReadReply,
}

impl OpenedFile {
    /// The size of the file opened.
    pub fn size(&self) -> u64 {
        self.reply.header.info.as_ref().map_or(0, |info| info.size)
    }
}

/// Whether two validators (`FileInfo.validator`: `<device major>.<device minor>.<the
/// version>`, as fileio makes them) name the same version of a file as seen through two
/// mounts of one shared filesystem: the same inode, birth time and change time, whatever
/// device number each mount was given (NFS and CephFS number each mount of their own,
/// per node). A file with the same inode and times holds the same bytes, on that
/// filesystem or on a snapshot of it; another filesystem would have to give another
/// file the same inode number and both times to the nanosecond. Empty validators name
/// nothing.
pub fn same_version(a: &str, b: &str) -> bool {
    fn beyond_device(validator: &str) -> Option<&str> {
        let mut parts = validator.splitn(3, '.');
        let (_major, _minor) = (parts.next()?, parts.next()?);
        parts.next().filter(|rest| !rest.is_empty())
    }
    matches!((beyond_device(a), beyond_device(b)), (Some(a), Some(b)) if a == b)
}
