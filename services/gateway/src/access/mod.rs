//! The access policy at the gateway (`--policy`, [`kubedav_policy`]): every request's
//! target, and a COPY's or MOVE's destination, is decided before any port is called.
//!
//! * What a principal cannot read does not exist for it. The answer for a hidden path is
//!   made here from the decision alone, never from fileio, so it is the same whether
//!   the path exists or not: 404 for a method on the path itself; for a method that
//!   would create it, 403 when its parent is visible (nothing may be written there) and
//!   409 when the parent is hidden too, as for a missing parent.
//! * A visible path without the permission a method needs gets 403, saying what the
//!   principal may do there.
//! * Paths the policy names stay put: only an administrator deletes or moves one, or
//!   replaces one with a MOVE or COPY.
//! * The decision is kept in the request ([`Viewer`]) for the handlers that list
//!   collections: they leave out the members hidden from the principal.
//! * A COPY leaves out what the principal may not read beneath its source
//!   ([`left_out_of_copy`]): refusing it whole would say something unreadable is there.
//! * Each user's home is made when they first use the service ([`homes`]).
//! * The policy can change while the gateway serves ([`LivePolicy`]); each request is
//!   decided whole under the policy it started with.
//! * With `--audit-log`, every decision leaves one line in the log ([`audit`]).
//! * Shares made to the principal add to what the policy gives ([`shared`]); the
//!   path a share names stays put for its recipients.
//!
//! Without a policy nothing here runs, and nothing changes.

mod audit;
mod copies;
pub mod homes;
mod kept;
mod live;
pub mod scope;
pub mod shared;

pub use copies::left_out_of_copy;
pub use homes::create_named_paths;
pub use kept::{TrashQuestion, viewer_of};
pub use live::LivePolicy;
pub use shared::Received;

use crate::Gateway;
use crate::dav::method::DavMethod;
use crate::http::errors::HttpError;
use crate::request::Principal;
use axum::extract::Request;
use http::StatusCode;
use kubedav_api::path::VolumePath;
use kubedav_policy::{Access, Permission, Policy, Subject};
use std::sync::Arc;

/// The principal as the policy sees it, kept in the request for the handlers that
/// filter listings.
#[derive(Clone, Debug)]
pub struct Viewer {
    policy: Arc<Policy>,
    subject: Subject,
    /// The shares made to the principal.
    received: Received,
}

/// The members of one listed collection as a viewer may see them ([`Viewer::members`]).
pub struct ListedMembers<'a> {
    by_policy: kubedav_policy::Members<'a>,
    /// The collection, when a share bears on what is in it (members are then also
    /// decided with the shares).
    shared: Option<&'a VolumePath>,
    viewer: &'a Viewer,
}

impl ListedMembers<'_> {
    /// Whether the member `name` exists for the viewer.
    pub fn sees(&self, name: &str) -> bool {
        if self.by_policy.sees(name) {
            return true;
        }
        self.shared
            .and_then(|collection| collection.join(name).ok())
            .is_some_and(|member| self.viewer.sees(&member))
    }
}

impl Viewer {
    /// The viewer of `request`, if a policy applies.
    pub fn of(request: &Request) -> Option<&Viewer> {
        request.extensions().get::<Viewer>()
    }

    /// What `path` is to the viewer, with its shares.
    pub fn access(&self, path: &VolumePath) -> Access {
        let by_policy = self.policy.access(&self.subject, path);
        self.received.access(&self.policy, path, by_policy).0
    }

    /// Whether `path` exists for the viewer.
    pub fn sees(&self, path: &VolumePath) -> bool {
        self.access(path).is_visible()
    }

    /// The members of `collection` as the viewer may see them, decided by name.
    pub fn members<'a>(&'a self, collection: &'a VolumePath) -> ListedMembers<'a> {
        ListedMembers {
            by_policy: self.policy.members(&self.subject, collection),
            shared: self.received.bears_on(collection).then_some(collection),
            viewer: self,
        }
    }

    /// Whether `path`, listed beneath `listed`, exists for the viewer: decided by name
    /// through `members` (of `listed`) when it is a direct member, else by its path.
    pub fn sees_listed(&self, members: &ListedMembers<'_>, listed: &VolumePath, path: &str) -> bool {
        let direct = path
            .rsplit_once('/')
            .map_or((listed.is_root(), path), |(parent, name)| {
                (parent == listed.as_str(), name)
            });
        match direct {
            (true, name) => members.sees(name),
            (false, _) => VolumePath::parse(path).is_ok_and(|path| self.sees(&path)),
        }
    }

    /// Whether the viewer manages `path` (may share it): under the policy alone, as
    /// shares never give manage.
    pub fn manages(&self, path: &VolumePath) -> bool {
        self.policy.access(&self.subject, path) == Access::Granted(Permission::Manage)
    }

    /// Whether the viewer may write in `collection`.
    pub fn may_write(&self, collection: &VolumePath) -> bool {
        self.access(collection).permission() >= Permission::Write
    }

    /// The quota root whose figures a PROPFIND of `path` shows the viewer: the nearest
    /// root the policy puts `path` in, if the viewer may read all of it (its usage sums
    /// everything in it). `None`: no figures.
    pub fn quota_root_shown(&self, path: &VolumePath) -> Option<VolumePath> {
        let root = self.policy.quota_roots(path).pop()?.path;
        let readable = self.policy.access(&self.subject, &root).permission() >= Permission::Read;
        let unreadable = self.policy.unreadable_below(&self.subject, &root);
        (readable && unreadable.paths.is_empty() && unreadable.homes_in.is_none()).then_some(root)
    }

    /// The nearest quota root the policy puts the resource at `path` (a wire path) in.
    pub fn quota_root_of(&self, path: &str) -> Option<VolumePath> {
        let path = VolumePath::parse(path).ok()?;
        Some(self.policy.quota_roots(&path).pop()?.path)
    }

    /// Whether the viewer may write everything beneath `path` (a depth-infinity lock).
    pub fn writes_all_below(&self, path: &VolumePath) -> bool {
        self.policy.writes_all_below(&self.subject, path)
            || self.received.writes_all_below(&self.policy, path)
    }

    /// Whether every member of `collection` is to the viewer what the collection is, so a
    /// listing of it needs no filtering.
    pub fn sees_all_of(&self, collection: &VolumePath) -> bool {
        self.policy.members_inherit(collection) && !self.received.lies_beneath(collection)
    }
}

/// What a method does to a path it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    /// Reads it, or passes through it (GET, HEAD, PROPFIND).
    Read,
    /// Reads all of it (a COPY's source): passing through is not enough.
    Copy,
    /// Changes what is there (DELETE, PROPPATCH, UNLOCK, a MOVE's source).
    Change,
    /// Creates or replaces it (PUT, MKCOL, LOCK, a COPY's or MOVE's destination).
    Create,
}

/// Why a request may not go on.
#[derive(Debug)]
pub enum Refusal {
    /// This is the answer.
    Answer(HttpError),
    /// What only a share could allow, while the gateway's shares are unconfirmed: check
    /// them ([`crate::shares::Shares::check`]) and decide again; if they still cannot be
    /// read, this is the answer (503).
    SharesUnconfirmed(HttpError),
}

impl From<HttpError> for Refusal {
    fn from(error: HttpError) -> Self {
        Refusal::Answer(error)
    }
}

/// Decides `request` under the gateway's policy; `Err` says why it may not go on. With
/// a policy, a request that may go on carries its [`Viewer`].
pub fn check(gateway: &Gateway, method: DavMethod, request: &mut Request) -> Result<(), Refusal> {
    let Some(policy) = gateway.policy.as_ref().map(LivePolicy::current) else {
        return Ok(());
    };
    if method == DavMethod::Options {
        return Ok(());
    }
    let principal = Principal::of(request);
    let subject = policy.subject(principal.name(), principal.groups());
    let received = received_by(gateway, &subject);
    let target = crate::http::paths::request_path(&gateway.base_path(), request)?;
    let destination = match method {
        DavMethod::Copy | DavMethod::Move => {
            Some(crate::dav::headers::destination(&gateway.base_path(), request.headers())?.path)
        }
        _ => None,
    };
    // Each path is decided once; the audit line reports the same decisions.
    let judge = Judge {
        policy: &policy,
        subject: &subject,
        received: &received,
    };
    let target_decided = judge.decide(&target.path);
    let destination_decided = destination.as_ref().map(|d| (d, judge.decide(d)));
    let mut decided = decide(
        &judge,
        method,
        &target_decided,
        destination_decided.as_ref().map(|(_, decided)| decided),
    );
    if decided.is_err() && received.is_unconfirmed() {
        decided = Err(shares_unconfirmed());
    }
    let unconfirmed = decided.is_err() && received.is_unconfirmed();
    if tracing::enabled!(target: kubedav_kit::telemetry::AUDIT, tracing::Level::INFO) {
        audit::line(
            &subject,
            method,
            &target_decided,
            destination_decided.as_ref().map(|(_, decided)| decided),
            &decided,
        );
    }
    if let Err(refused) = decided {
        return Err(if unconfirmed {
            Refusal::SharesUnconfirmed(refused)
        } else {
            Refusal::Answer(refused)
        });
    }
    request.extensions_mut().insert(Viewer {
        policy,
        subject,
        received,
    });
    Ok(())
}

/// What a request through a public link may do: the link's kind, within what its
/// creator may do (under a policy, `creator` is the creator as the policy sees it).
#[derive(Clone, Debug)]
pub struct LinkGrant {
    /// The link.
    pub link: Arc<crate::links::LinkEntry>,
    /// Its creator, under the policy in force.
    pub creator: Option<(Arc<Policy>, Subject)>,
}

/// Decides a request through a public link (its base path mounted on the link's path,
/// so every path it names is the link's or beneath it): what the link's kind allows,
/// and, under a policy, what its creator may do there, decided as for the creator
/// (hidden paths answer as absent). The link's own path stays put. With a policy, the
/// request carries the creator's [`Viewer`], so listings show what the creator sees.
pub fn check_link(
    gateway: &Gateway,
    method: DavMethod,
    request: &mut Request,
    grant: &LinkGrant,
) -> Result<(), HttpError> {
    if method == DavMethod::Options {
        return Ok(());
    }
    let base = gateway.base_path();
    let target = crate::http::paths::request_path(&base, request)?.path;
    let destination = match method {
        DavMethod::Copy | DavMethod::Move => {
            Some(crate::dav::headers::destination(&base, request.headers())?.path)
        }
        _ => None,
    };
    let kind = grant.link.link.permission;
    let changes = !matches!(
        method,
        DavMethod::Get | DavMethod::Head | DavMethod::Propfind | DavMethod::Copy
    ) || destination.is_some();
    if kind == crate::links::LinkKind::Read && changes {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            "this link only lets you read",
        ));
    }
    let root = &grant.link.path;
    let moves_root = matches!(method, DavMethod::Delete | DavMethod::Move) && target == *root;
    if moves_root || destination.as_ref() == Some(root) {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            "the link's own folder cannot be moved, replaced or deleted through the link",
        ));
    }
    let Some((policy, creator)) = &grant.creator else {
        return Ok(());
    };
    let received = Received::default();
    let judge = Judge {
        policy,
        subject: creator,
        received: &received,
    };
    let target_decided = judge.decide(&target);
    let destination_decided = destination.as_ref().map(|d| judge.decide(d));
    decide(&judge, method, &target_decided, destination_decided.as_ref())?;
    request.extensions_mut().insert(Viewer {
        policy: policy.clone(),
        subject: creator.clone(),
        received,
    });
    Ok(())
}

/// The shares made to `subject` that are in the gateway's table.
fn received_by(gateway: &Gateway, subject: &Subject) -> Received {
    let Some(shares) = &gateway.shares else {
        return Received::default();
    };
    match shares.trusted() {
        Some(table) => Received::new(table.received(subject, shares.now())),
        // Whether a share would have counted is known from the last table read; what
        // it would allow is refused until the shares can be read again.
        None if shares.table().received(subject, shares.now()).is_empty() => Received::default(),
        None => Received::unconfirmed(),
    }
}

/// The answer when what only a share could allow cannot be decided now.
fn shares_unconfirmed() -> HttpError {
    HttpError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "the shares cannot be read right now; try again in a moment",
    )
}

/// What one path is to the principal, and what decided it.
pub(crate) struct PathDecision<'p> {
    path: &'p VolumePath,
    /// The policy's decision, for the audit line.
    by_policy: kubedav_policy::Decided<'p>,
    /// With the shares.
    access: Access,
    /// The share that gave `access`, if one did.
    share: Option<Arc<crate::shares::ShareEntry>>,
}

/// The policy and the shares of one request's principal.
struct Judge<'a> {
    policy: &'a Policy,
    subject: &'a Subject,
    received: &'a Received,
}

impl Judge<'_> {
    /// What `path` is to the principal.
    fn access(&self, path: &VolumePath) -> Access {
        let by_policy = self.policy.access(self.subject, path);
        self.received.access(self.policy, path, by_policy).0
    }

    /// The whole decision about `path`.
    fn decide<'p>(&self, path: &'p VolumePath) -> PathDecision<'p>
    where
        Self: 'p,
    {
        let by_policy = self.policy.decide(self.subject, path);
        let (access, share) = self.received.access(self.policy, path, by_policy.access);
        PathDecision {
            path,
            by_policy,
            access,
            share: share.cloned(),
        }
    }
}

/// The decision about `method` on `target` (and a COPY's or MOVE's `destination`), each
/// with what it is to `subject`.
fn decide(
    judge: &Judge<'_>,
    method: DavMethod,
    target: &PathDecision<'_>,
    destination: Option<&PathDecision<'_>>,
) -> Result<(), HttpError> {
    let (policy, subject) = (judge.policy, judge.subject);
    let target_use = match method {
        DavMethod::Get | DavMethod::Head | DavMethod::Propfind => Use::Read,
        DavMethod::Copy => Use::Copy,
        DavMethod::Delete | DavMethod::Proppatch | DavMethod::Unlock | DavMethod::Move => Use::Change,
        DavMethod::Put | DavMethod::Mkcol | DavMethod::Lock => Use::Create,
        DavMethod::Options => unreachable!("answered above"),
    };
    allow(judge, (target.path, target.access), target_use)?;
    let moves_target = matches!(method, DavMethod::Delete | DavMethod::Move);
    if moves_target && !subject.is_admin() && policy.is_fixed(target.path) {
        return Err(fixed(target.path));
    }
    if moves_target && is_share_root(target) {
        return Err(shared_root(target.path));
    }
    if let Some(destination) = destination {
        allow(judge, (destination.path, destination.access), Use::Create)?;
        if !subject.is_admin() && policy.is_fixed(destination.path) {
            return Err(fixed(destination.path));
        }
        if is_share_root(destination) {
            return Err(shared_root(destination.path));
        }
    }
    Ok(())
}

/// Whether `decision` is of the path a share names, which the share alone lets the
/// principal change: the path stays put for its recipients, as a rule's path does.
fn is_share_root(decision: &PathDecision<'_>) -> bool {
    decision
        .share
        .as_ref()
        .is_some_and(|entry| entry.path == *decision.path)
}

/// The answer for moving, deleting or replacing the path a share names.
fn shared_root(path: &VolumePath) -> HttpError {
    HttpError::new(
        StatusCode::FORBIDDEN,
        format!(
            "{path} is shared with you; only its owner may move, replace or delete it (change what is inside it instead)"
        ),
    )
}

/// Whether `subject` may use `path`, which is `access` to it, as `what` needs; the
/// answer when not.
fn allow(judge: &Judge<'_>, (path, access): (&VolumePath, Access), what: Use) -> Result<(), HttpError> {
    let needed = match what {
        Use::Read | Use::Copy => Permission::Read,
        Use::Change | Use::Create => Permission::Write,
    };
    match access {
        Access::Hidden => Err(as_absent(judge, path, what)),
        Access::Passable if what == Use::Read => Ok(()),
        Access::Granted(permission) if permission >= needed => Ok(()),
        // A copy needs read on what it copies: a collection the principal only passes
        // through holds members it may not read, besides the ways it may take.
        Access::Passable if what == Use::Copy => Err(HttpError::new(
            StatusCode::FORBIDDEN,
            format!("{path} is only a way to what you may use; copy what you may read in it"),
        )),
        Access::Passable => Err(HttpError::new(
            StatusCode::FORBIDDEN,
            format!("{path} is only a way to what you may use; nothing may be changed in it"),
        )),
        Access::Granted(_) => Err(HttpError::new(
            StatusCode::FORBIDDEN,
            format!("you may only read {path}"),
        )),
    }
}

/// The answer for a hidden path: what the method gives where nothing is.
fn as_absent(judge: &Judge<'_>, path: &VolumePath, what: Use) -> HttpError {
    if what != Use::Create {
        return HttpError::new(StatusCode::NOT_FOUND, format!("{path} does not exist"));
    }
    let parent_visible = path
        .split_last()
        .is_some_and(|(parent, _)| judge.access(&parent).is_visible());
    if parent_visible {
        HttpError::new(
            StatusCode::FORBIDDEN,
            format!("{path} cannot be created: you may not write there"),
        )
    } else {
        HttpError::new(
            StatusCode::CONFLICT,
            format!("the parent of {path} does not exist or is not a collection; create it first"),
        )
    }
}

/// The answer for moving, deleting or replacing a path the policy names.
fn fixed(path: &VolumePath) -> HttpError {
    HttpError::new(
        StatusCode::FORBIDDEN,
        format!(
            "{path} is named by the access policy (or holds a path it names); only an administrator may move, replace or delete it"
        ),
    )
}
