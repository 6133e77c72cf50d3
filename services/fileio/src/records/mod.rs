//! The [`Records`] port on fileio's two backends: on a volume, files under `.kubedav/`
//! at its root ([`VolumeRecords`]); in a bucket, objects under the prefix's `.kubedav/`
//! ([`BucketRecords`]). No WebDAV path reaches either: the name is reserved at every
//! depth (`kubedav_api::path::RESERVED_AREA`), and listings leave a folder of that name
//! out.
//!
//! [`Records`]: kubedav_api::records::Records

mod bucket;
mod volume;

pub use bucket::BucketRecords;
pub use volume::VolumeRecords;

use kubedav_api::records::MAX_RECORD_BYTES;
use tonic::Status;

/// Refuses a record larger than [`MAX_RECORD_BYTES`].
fn check_size(data: &[u8]) -> Result<(), Status> {
    if data.len() > MAX_RECORD_BYTES {
        return Err(Status::invalid_argument(format!(
            "a record holds at most {MAX_RECORD_BYTES} bytes, this one {}",
            data.len()
        )));
    }
    Ok(())
}
