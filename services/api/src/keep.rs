//! The keep port: [`Keep`], the trash and the versions fileio keeps of what deletes and
//! overwrites removed (see `proto/kubedav/keep/v1/keep.proto` and
//! docs/trash-and-versions.md). The gRPC adapters are `kubedav_remote::client::RemoteKeep`
//! and `kubedav_remote::server::KeepGrpc`; a version's bytes are read through
//! [`crate::fileio::FileIo::read`] with its `version`.

use crate::pb::keep::v1 as pb;
use tonic::Status;

pub use pb::{
    ListTrashRequest, ListTrashResponse, ListVersionsRequest, ListVersionsResponse, PurgeTrashRequest,
    PurgeTrashResponse, RestoreResponse, RestoreTrashRequest, RestoreVersionRequest, TrashItem, Version,
};

/// The trash and the versions.
#[async_trait::async_trait]
pub trait Keep: Send + Sync + 'static {
    /// The trash items of some quota roots, oldest first.
    async fn list_trash(&self, request: ListTrashRequest) -> Result<ListTrashResponse, Status>;
    /// Puts a trash item back, with its versions.
    async fn restore_trash(&self, request: RestoreTrashRequest) -> Result<RestoreResponse, Status>;
    /// Removes a trash item for good.
    async fn purge_trash(&self, request: PurgeTrashRequest) -> Result<PurgeTrashResponse, Status>;
    /// The versions of a file, oldest first.
    async fn list_versions(&self, request: ListVersionsRequest) -> Result<ListVersionsResponse, Status>;
    /// Makes a version the file's content, keeping the replaced content as a version.
    async fn restore_version(&self, request: RestoreVersionRequest) -> Result<RestoreResponse, Status>;
}
