//! Audit lines (`--audit-log`, log target [`kubedav_kit::telemetry::AUDIT`]): one per
//! request decided under the policy.

use crate::dav::method::DavMethod;
use crate::http::errors::HttpError;
use kubedav_api::path::VolumePath;
use kubedav_policy::{Access, Decided, Subject};

/// One audit line (`--audit-log`): who, what, where (and to where), whether it was
/// allowed, what the paths are to the principal, and the rule or home that decided
/// that. Only in the log: answers never say which rule refused.
pub(super) fn line(
    subject: &Subject,
    method: DavMethod,
    (path, target): (&VolumePath, &Decided<'_>),
    destination: Option<(&VolumePath, &Decided<'_>)>,
    decided: &Result<(), HttpError>,
) {
    let access = |access: Access| match access {
        Access::Hidden => "hidden",
        Access::Passable => "passable",
        Access::Granted(permission) => permission.as_str(),
    };
    tracing::info!(
        target: kubedav_kit::telemetry::AUDIT,
        user = subject.user(),
        admin = subject.is_admin(),
        method = method.name(),
        path = %path,
        decision = if decided.is_ok() { "allowed" } else { "refused" },
        status = decided.as_ref().err().map(|refused| refused.status.as_u16()),
        access = access(target.access),
        by = %target.by,
        destination = destination.map(|(path, _)| tracing::field::display(path)),
        destination_access = destination.map(|(_, decided)| access(decided.access)),
        destination_by = destination.map(|(_, decided)| tracing::field::display(&decided.by)),
        "audit"
    );
}
