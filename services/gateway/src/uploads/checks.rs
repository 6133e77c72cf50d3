//! What an upload's creation checks before anything is kept, whatever protocol asks:
//! the target's parent exists, and the room there covers the upload.

use crate::Gateway;
use crate::http::errors::HttpError;
use http::StatusCode;
use kubedav_api::fileio::{StatRequest, UsageRequest};
use kubedav_api::path::VolumePath;
use tonic::Code;

/// Refuses (409) an upload whose parent collection does not exist: found out now, not
/// after its last byte.
pub(super) async fn parent_exists(gateway: &Gateway, target: &VolumePath) -> Result<(), HttpError> {
    let Some((parent, _)) = target.split_last() else {
        return Ok(());
    };
    match gateway
        .fileio
        .stat(StatRequest {
            path: parent.as_str().to_owned(),
        })
        .await
    {
        Ok(info) if info.is_collection => Ok(()),
        Ok(_) => Err(missing(&parent)),
        Err(status) if status.code() == Code::NotFound => Err(missing(&parent)),
        Err(status) => Err(status.into()),
    }
}

fn missing(parent: &VolumePath) -> HttpError {
    HttpError::new(
        StatusCode::CONFLICT,
        format!("the collection /{parent} does not exist; create it with MKCOL first"),
    )
}

/// Refuses (507) an upload larger than the room its target has (its quota root's, or
/// the storage's) less what the owner's unfinished uploads will still need: one user's
/// uploads cannot together promise more than the room there is.
pub(super) async fn room_for(
    gateway: &Gateway,
    uploads: &std::sync::Arc<dyn kubedav_api::uploads::Uploads>,
    owner: &str,
    target: &VolumePath,
    length: u64,
) -> Result<(), HttpError> {
    let unfinished = uploads
        .list(kubedav_api::uploads::ListUploadsRequest {
            owner: owner.to_owned(),
        })
        .await
        .map_err(HttpError::from)?
        .uploads;
    let promised: u64 = unfinished
        .iter()
        .map(|u| u.length.unwrap_or(u.offset).saturating_sub(u.offset))
        .sum();
    let length = length.saturating_add(promised);
    let usage = gateway
        .fileio
        .usage(UsageRequest {
            path: target
                .split_last()
                .map(|(p, _)| p.as_str().to_owned())
                .unwrap_or_default(),
        })
        .await;
    match usage {
        Ok(usage) if usage.available_bytes < length => Err(HttpError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            format!(
                "the upload needs {length} bytes but only {} are free where it would land",
                usage.available_bytes
            ),
        )),
        _ => Ok(()),
    }
}
