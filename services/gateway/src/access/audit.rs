//! Audit lines (`--audit-log`, log target [`kubedav_kit::telemetry::AUDIT`]): one per
//! request decided under the policy.

use super::PathDecision;
use crate::dav::method::DavMethod;
use crate::http::errors::HttpError;
use kubedav_policy::{Access, Subject};

/// One audit line (`--audit-log`): who, what, where (and to where), whether it was
/// allowed, what the paths are to the principal, and the rule, home or share that
/// decided that. Only in the log: answers never say which rule refused.
pub(super) fn line(
    subject: &Subject,
    method: DavMethod,
    target: &PathDecision<'_>,
    destination: Option<&PathDecision<'_>>,
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
        path = %target.path,
        decision = if decided.is_ok() { "allowed" } else { "refused" },
        status = decided.as_ref().err().map(|refused| refused.status.as_u16()),
        access = access(target.access),
        by = %target.by_policy.by,
        share = target.share.as_ref().map(|entry| entry.share.id.as_str()),
        destination = destination.map(|d| tracing::field::display(d.path)),
        destination_access = destination.map(|d| access(d.access)),
        destination_by = destination.map(|d| tracing::field::display(&d.by_policy.by)),
        destination_share = destination.and_then(|d| d.share.as_ref()).map(|entry| entry.share.id.as_str()),
        "audit"
    );
}
