//! The checks every writing method passes before it changes anything: [`guard_write`].

use crate::Gateway;
use crate::access::Viewer;
use crate::dav::locking;
use crate::http::conditional::{Outcome, Validators, evaluate, precondition_failed};
use crate::http::errors::HttpError;
use crate::request::Principal;
use http::{HeaderMap, header};
use kubedav_api::locks::WriteTarget;
use kubedav_api::path::VolumePath;

/// Who asks to write, as the guard needs it: the request's headers, its principal and,
/// under a policy, its viewer. Parts of the request, not the request, so a handler's
/// future stays `Send`.
pub(super) struct Asking<'r> {
    pub(super) headers: &'r HeaderMap,
    pub(super) principal: Principal,
    pub(super) viewer: Option<&'r Viewer>,
}

impl<'r> Asking<'r> {
    /// The asking side of `request`.
    pub(super) fn of(request: &'r axum::extract::Request) -> Self {
        Self {
            headers: request.headers(),
            principal: Principal::of(request),
            viewer: Viewer::of(request),
        }
    }
}

/// What a writing request is about to change, for [`guard_write`].
pub(super) struct Change {
    what: What,
    /// Whether the request's precondition headers are evaluated too.
    conditional: bool,
}

enum What {
    /// These resources.
    Targets(Vec<WriteTarget>),
    /// The request path, created when it does not exist.
    Create,
}

impl Change {
    /// A change of `targets` ([`locking::target`], [`locking::member`]).
    pub(super) fn of(targets: Vec<WriteTarget>) -> Self {
        Self {
            what: What::Targets(targets),
            conditional: false,
        }
    }

    /// A write of the request path that creates it when it does not exist (PUT), under
    /// its precondition headers: see [`locking::check_create`].
    pub(super) fn create() -> Self {
        Self {
            what: What::Create,
            conditional: true,
        }
    }

    /// The change, with the request's precondition headers evaluated first.
    pub(super) fn conditional(self) -> Self {
        Self {
            conditional: true,
            ..self
        }
    }
}

/// The checks a writing request passes, in this order, before it changes anything:
///
/// 1. for a [`Change::conditional`] one, its precondition headers (`If-Match`,
///    `If-None-Match`, `If-Modified-Since`, `If-Unmodified-Since`) against `path`'s
///    current validators: 412 when one does not hold;
/// 2. the locks on what it changes, given its `If` header ([`locking::check_write`]):
///    412 or 423.
///
/// Only PUT and DELETE are conditional today; the other writing methods ignore those
/// headers, as they did before this guard existed. For [`Change::create`] the answer is
/// the etag the write must still find when it commits; otherwise `None`.
pub(super) async fn guard_write(
    gateway: &Gateway,
    asking: Asking<'_>,
    path: &VolumePath,
    change: Change,
) -> Result<Option<String>, HttpError> {
    let Asking {
        headers,
        principal,
        viewer,
    } = asking;
    if change.conditional && has_preconditions(headers) {
        let current = current_validators(gateway, path).await?;
        if evaluate(headers, current.as_ref(), false) != Outcome::Proceed {
            return Err(precondition_failed());
        }
    }
    match change.what {
        What::Targets(targets) => {
            locking::check_write(gateway, headers, &principal, viewer, path, targets).await?;
            Ok(None)
        }
        What::Create => locking::check_create(gateway, headers, &principal, viewer, path).await,
    }
}

/// Whether any precondition header is present (then the current validators are needed).
fn has_preconditions(headers: &HeaderMap) -> bool {
    [
        header::IF_MATCH,
        header::IF_NONE_MATCH,
        header::IF_MODIFIED_SINCE,
        header::IF_UNMODIFIED_SINCE,
    ]
    .iter()
    .any(|name| headers.contains_key(name))
}

/// The current validators of `path`, `None` if it does not exist.
async fn current_validators(gateway: &Gateway, path: &VolumePath) -> Result<Option<Validators>, HttpError> {
    match gateway
        .fileio
        .stat(kubedav_api::fileio::StatRequest {
            path: path.as_str().to_owned(),
        })
        .await
    {
        Ok(info) => Ok(Some(Validators::new(&info.etag, info.modified_unix_ns))),
        Err(status) if status.code() == tonic::Code::NotFound => Ok(None),
        Err(status) => Err(status.into()),
    }
}
