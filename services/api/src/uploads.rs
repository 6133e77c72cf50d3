//! The uploads port: [`Uploads`], files that arrive in many requests (TUS 1.0, Nextcloud
//! chunking), kept by fileio with the data until they land through
//! [`crate::fileio::FileIo::write`] with `from_upload` (see
//! `proto/kubedav/uploads/v1/uploads.proto` and docs/uploads.md). The gRPC adapters are
//! `kubedav_remote::client::RemoteUploads` and `kubedav_remote::server::UploadsGrpc`.

use crate::BoxStream;
use crate::pb::uploads::v1 as pb;
use bytes::Bytes;
use tonic::Status;

pub use pb::{
    AbortUploadRequest, AbortUploadResponse, AppendHeader, Chunk, ChunkReceived, CreateUploadRequest,
    GetUploadRequest, ListUploadsRequest, ListUploadsResponse, Upload,
};

/// The id of an upload: 32 lowercase hex digits.
pub fn is_upload_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The id of `owner`'s upload named `name` (a Nextcloud upload folder): the first 16
/// bytes of SHA-256 over both, in hex. The gateway finds a named upload by it, and
/// fileio creates it under it.
pub fn named_id(owner: &str, name: &str) -> String {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    for part in ["kubedav named upload", owner, name] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    crate::checksums::to_hex(&hasher.finalize()[..16])
}

/// The offset an append's FAILED_PRECONDITION says the upload is at ("offset N").
pub fn offset_in(status: &Status) -> Option<u64> {
    let message = status.message();
    let at = message.find("offset ")? + "offset ".len();
    let digits: String = message[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Uploads in progress.
#[async_trait::async_trait]
pub trait Uploads: Send + Sync + 'static {
    /// Starts an upload.
    async fn create(&self, request: CreateUploadRequest) -> Result<Upload, Status>;
    /// An upload's state.
    async fn get(&self, request: GetUploadRequest) -> Result<Upload, Status>;
    /// Adds `data` at the upload's offset; a body that breaks off ends `data` with an
    /// error item, and what arrived before it is kept unless the header names a checksum.
    async fn append(&self, header: AppendHeader, data: BoxStream<Bytes>) -> Result<Upload, Status>;
    /// Ends an upload without landing it.
    async fn abort(&self, request: AbortUploadRequest) -> Result<AbortUploadResponse, Status>;
    /// The owner's unfinished uploads.
    async fn list(&self, request: ListUploadsRequest) -> Result<ListUploadsResponse, Status>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_offsets_are_read_back() {
        assert!(is_upload_id("0123456789abcdef0123456789abcdef"));
        assert!(!is_upload_id("0123456789ABCDEF0123456789abcdef"));
        assert!(!is_upload_id("../../etc"));
        let status = Status::failed_precondition("the upload is at offset 1234, not 99");
        assert_eq!(offset_in(&status), Some(1234));
        assert_eq!(offset_in(&Status::failed_precondition("no number")), None);
        let id = named_id("alice", "rclone-chunked-upload-1");
        assert!(is_upload_id(&id));
        assert_eq!(id, named_id("alice", "rclone-chunked-upload-1"));
        assert_ne!(id, named_id("bob", "rclone-chunked-upload-1"));
        assert_ne!(named_id("ab", "c"), named_id("a", "bc"));
    }
}
