//! What a COPY leaves out under a policy: what the principal may not read beneath its
//! source. Refusing such a COPY whole would tell the principal that something it may
//! not read is inside; copying it whole would hand it over.

use super::Viewer;
use crate::Gateway;
use crate::http::errors::HttpError;
use futures_util::StreamExt;
use kubedav_api::fileio::ListRequest;
use kubedav_api::path::VolumePath;
use kubedav_policy::Permission;

/// The paths beneath `source` that a depth-infinity copy of it by `viewer` leaves out
/// ([`kubedav_api::fileio::CopyRequest::leave_out`]): those the policy names and the
/// viewer may not read, and, where the homes lie beneath `source`, every home the viewer
/// may not read (one listing of the homes' parent names them). When the source is
/// shared with the viewer, what the share's creator may not read is left out as well.
pub async fn left_out_of_copy(
    gateway: &Gateway,
    viewer: &Viewer,
    source: &VolumePath,
) -> Result<Vec<String>, HttpError> {
    // A source shared with the viewer: what its creators may not read is left out too.
    let creators = viewer.received.creators_covering(&viewer.policy, source);
    let mut left_out: Vec<String> = Vec::new();
    let mut homes_in = None;
    for subject in std::iter::once(&viewer.subject).chain(&creators) {
        let unreadable = viewer.policy.unreadable_below(subject, source);
        for path in unreadable.paths {
            if !left_out.iter().any(|l| l == path.as_str()) {
                left_out.push(path.as_str().to_owned());
            }
        }
        homes_in = homes_in.or(unreadable.homes_in);
    }
    let Some(homes) = homes_in else {
        return Ok(left_out);
    };
    let listed = gateway
        .fileio
        .list(ListRequest {
            path: homes.as_str().to_owned(),
            depth: kubedav_api::fileio::Depth::One as i32,
            max_entries: 0,
            properties: None,
        })
        .await;
    let mut batches = match listed {
        Ok(batches) => batches,
        Err(status) if status.code() == tonic::Code::NotFound => return Ok(left_out),
        Err(status) => return Err(status.into()),
    };
    while let Some(batch) = batches.next().await {
        for entry in batch?.entries {
            let Some(info) = entry.info else { continue };
            let Ok(home) = VolumePath::parse(&info.path) else {
                continue;
            };
            let readable = viewer.access(&home).permission() >= Permission::Read
                && creators
                    .iter()
                    .all(|creator| viewer.policy.access(creator, &home).permission() >= Permission::Read);
            if home != homes && !readable && !left_out.iter().any(|l| l == home.as_str()) {
                left_out.push(home.as_str().to_owned());
            }
        }
    }
    Ok(left_out)
}
