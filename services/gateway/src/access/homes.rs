//! The paths a policy names, made when it loads, and each user's home, made when they
//! first use the service.

use super::Viewer;
use crate::Gateway;
use kubedav_api::fileio::{FileIo, MkdirRequest};
use kubedav_api::path::VolumePath;
use kubedav_policy::Policy;

/// Creates every path `policy` names, with the collections on the way to it, so a
/// space exists before anyone is given `write` in it. What exists already is left.
pub async fn create_named_paths(fileio: &dyn FileIo, policy: &Policy) -> Result<(), tonic::Status> {
    for named in policy.named_paths() {
        let mut path = VolumePath::root();
        for segment in named.segments() {
            path = path.join(segment).map_err(tonic::Status::from)?;
            let made = fileio
                .mkdir(MkdirRequest {
                    path: path.as_str().to_owned(),
                })
                .await;
            match made {
                Ok(_) => {}
                Err(status) if status.code() == tonic::Code::AlreadyExists => {}
                Err(status) => return Err(status),
            }
        }
    }
    Ok(())
}

/// A home to make before a request is served: its owner's first request to this
/// gateway under the current policy ([`home_to_make`]).
pub struct HomeToMake {
    user: Box<str>,
    path: VolumePath,
}

/// The home of the request's viewer, if this gateway has not yet seen it exist under
/// the current policy.
pub fn home_to_make(gateway: &Gateway, request: &axum::extract::Request) -> Option<HomeToMake> {
    let live = gateway.policy.as_ref()?;
    if request.extensions().get::<super::LinkGrant>().is_some() {
        // A request through a link is decided as its creator's, not made by it.
        return None;
    }
    let viewer = Viewer::of(request)?;
    let user = viewer.subject.user();
    if live.home_made(user) {
        return None;
    }
    Some(HomeToMake {
        user: user.into(),
        path: viewer.policy.home(&viewer.subject)?,
    })
}

impl HomeToMake {
    /// Makes the home. A failure is logged and left: the request goes on and meets the
    /// missing home as any other missing path, and the next request tries again.
    pub async fn make(self, gateway: &Gateway) {
        let Some(live) = &gateway.policy else { return };
        let Self { user, path } = self;
        let made = gateway
            .fileio
            .mkdir(MkdirRequest {
                path: path.as_str().to_owned(),
            })
            .await;
        match made {
            Ok(_) => {
                tracing::info!(target: "kubedav", user = &*user, "made the home {path}");
                live.remember_home(&user);
            }
            Err(status) if status.code() == tonic::Code::AlreadyExists => live.remember_home(&user),
            Err(status) => tracing::warn!(
                target: "kubedav",
                user = &*user,
                "the home {path} could not be made: {}",
                status.message()
            ),
        }
    }
}
