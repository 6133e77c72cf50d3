//! The trash and the versions over WebDAV (docs/trash-and-versions.md, "Over WebDAV"):
//! `{base}/.kubedav/trash/` ([`trash`]) and `{base}/.kubedav/versions{path}`
//! ([`versions`]).
//!
//! Their requests are decided here, by the places they stand for ([`Asker`]), not by
//! `access::check`, which knows only paths of the tree: a trash item by the collection
//! it was deleted from, a version by its file. What the principal may not see answers
//! exactly as an absent item or version does (404), and listings leave it out.

mod trash;
mod versions;

use crate::Gateway;
use crate::access::Viewer;
use crate::dav::headers::{Depth, depth};
use crate::dav::method::DavMethod;
use crate::dav::multistatus::{self, LiveContext, MULTISTATUS_CLOSE, Prefixes, write_response};
use crate::dav::propfind::Propfind;
use crate::http::errors::{HttpError, HttpResult};
use crate::request::Principal;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use kubedav_api::fileio::FileInfo;
use kubedav_api::path::{RESERVED_AREA, VolumePath};
use kubedav_api::pb::fileio::v1::DeadProperty;

/// Nextcloud's namespace, whose trash properties existing tools read.
pub(super) const NEXTCLOUD: &str = "http://nextcloud.org/ns";

/// The two areas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// `{base}/.kubedav/trash/`.
    Trash,
    /// `{base}/.kubedav/versions{path}`.
    Versions,
}

impl Place {
    /// Its name below `{base}/.kubedav/`.
    fn name(self) -> &'static str {
        match self {
            Place::Trash => "trash",
            Place::Versions => "versions",
        }
    }

    /// The methods it answers.
    fn allow(self) -> &'static str {
        match self {
            Place::Trash => "OPTIONS, PROPFIND, MOVE, DELETE",
            Place::Versions => "OPTIONS, PROPFIND, GET, HEAD, COPY",
        }
    }
}

/// Which area the raw URL path `path` is in, when it is in one and this gateway reaches
/// a fileio that may keep things.
pub(crate) fn place(gateway: &Gateway, path: &str) -> Option<Place> {
    gateway.keep.as_ref()?;
    let rest = path
        .strip_prefix(gateway.config.base_path.as_str())?
        .strip_prefix('/')?
        .strip_prefix(RESERVED_AREA)?
        .strip_prefix('/')?;
    match rest.split('/').next()? {
        "trash" => Some(Place::Trash),
        "versions" => Some(Place::Versions),
        _ => None,
    }
}

/// Answers a request in `place`.
pub(crate) async fn answer(gateway: &Gateway, request: Request, place: Place) -> HttpResult {
    let method = DavMethod::of(request.method());
    if method == Some(DavMethod::Options) {
        let mut response = super::options::options();
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(place.allow()));
        return Ok(response);
    }
    let answered = match (place, method) {
        (Place::Trash, Some(method)) => trash::answer(gateway, request, method).await,
        (Place::Versions, Some(method)) => versions::answer(gateway, request, method).await,
        (_, None) => None,
    };
    answered.unwrap_or_else(|| {
        let mut response = HttpError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("the {} area answers {} only", place.name(), place.allow()),
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(place.allow()));
        Ok(response)
    })
}

/// The URL prefix of `place`: `{base}/.kubedav/trash` or `{base}/.kubedav/versions`, as a
/// base path that decodes what lies below it and writes hrefs below it.
fn area(gateway: &Gateway, place: Place) -> crate::http::paths::BasePath {
    let prefix = format!(
        "{}/{RESERVED_AREA}/{}",
        gateway.config.base_path.as_str(),
        place.name()
    );
    crate::http::paths::BasePath::mounted(&prefix, VolumePath::root())
}

/// Who asks, as the trash and the versions decide it.
pub(super) struct Asker {
    pub(super) principal: Principal,
    /// Under a policy, the principal as it sees it.
    pub(super) viewer: Option<Viewer>,
    /// Whether the principal may write at all: not an anonymous reader
    /// (`--anonymous-read`), not one of `--read-only-users`. (A credential that may only
    /// read, of a user who may write, lists the trash but changes nothing: the edge
    /// refuses its writes.)
    writer: bool,
}

impl Asker {
    /// The asker of `request`.
    fn of(gateway: &Gateway, request: &Request) -> Self {
        let principal = Principal::of(request);
        let viewer = crate::access::viewer_of(gateway, &principal);
        let writer = gateway.auth.is_none()
            || (!principal.name().is_empty() && !gateway.config.read_only_users.contains(principal.name()));
        Self {
            principal,
            viewer,
            writer,
        }
    }

    /// Whether the credential reaches `path` (a path-scoped one reaches its prefix and
    /// what lies beneath it).
    fn reaches(&self, path: &VolumePath) -> bool {
        crate::access::scope::reach(path, self.principal.path_prefix(), false).is_ok()
    }

    /// Whether the asker may read the file at `path` (and so its versions).
    fn reads(&self, path: &VolumePath) -> bool {
        self.reaches(path)
            && self
                .viewer
                .as_ref()
                .is_none_or(|viewer| viewer.access(path).permission() >= kubedav_policy::Permission::Read)
    }

    /// Whether the asker may see (and restore and purge) what was deleted from
    /// `origin`: the credential reaches it, and the asker may write the collection it
    /// was in, whoever deleted it.
    fn sees_deleted(&self, origin: &VolumePath) -> bool {
        let collection = origin
            .split_last()
            .map_or_else(VolumePath::root, |(collection, _)| collection);
        self.writer
            && self.reaches(origin)
            && self
                .viewer
                .as_ref()
                .is_none_or(|viewer| viewer.may_write(&collection))
    }

    /// Decides `method` as if it named `target` (and `destination`) in the tree: the
    /// credential's scope at both ends, then the policy.
    fn decide(
        &self,
        method: DavMethod,
        target: &VolumePath,
        destination: Option<&VolumePath>,
    ) -> Result<(), HttpError> {
        let prefix = self.principal.path_prefix();
        crate::access::scope::reach(target, prefix, false)?;
        if let Some(destination) = destination {
            crate::access::scope::reach(destination, prefix, true)?;
        }
        match &self.viewer {
            Some(viewer) => viewer.decide_as(method, target, destination),
            None => Ok(()),
        }
    }
}

/// What a PROPFIND of an area asks: its properties, and whether members are listed
/// (Depth 1 or infinity; the areas are one level deep).
async fn propfind_of(request: Request) -> Result<(Propfind, bool), HttpError> {
    let members = depth(request.headers(), Depth::Infinity)? != Depth::Zero;
    let body = super::body::xml_body(request).await?;
    let propfind = Propfind::parse(body.as_ref()).map_err(|e| HttpError::bad_request(e.to_string()))?;
    Ok((propfind, members))
}

/// One resource of an area's listing.
struct Listed {
    /// Its href.
    href: String,
    /// Its live properties' values.
    info: FileInfo,
    /// Its name (`DAV:displayname`, and what its type is guessed from).
    name: String,
    /// Its other properties (`value` is XML content, escaped).
    properties: Vec<DeadProperty>,
}

/// The 207 of a PROPFIND that found `listed`.
fn multistatus(propfind: &Propfind, listed: &[Listed]) -> Response {
    let prefixes = Prefixes::of(propfind.echoed());
    let context = LiveContext {
        prefixes: &prefixes,
        usage: None,
        lockdiscovery: "",
        supportedlock: "",
    };
    let mut out = String::new();
    prefixes.open_multistatus(&mut out);
    for one in listed {
        write_response(
            &mut out,
            &one.href,
            &one.info,
            &one.name,
            &one.properties,
            propfind,
            &context,
        );
    }
    out.push_str(MULTISTATUS_CLOSE);
    multistatus::answer(out)
}

/// A property of `namespace` with `text` for its content.
fn text_property(namespace: &str, name: &str, text: &str) -> DeadProperty {
    DeadProperty {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        value: crate::dav::xml::escape(text).into_bytes().into(),
    }
}

/// The answer for an item or version that does not exist, or that the asker may not
/// see: the same words either way.
fn absent(what: &str) -> HttpError {
    HttpError::new(StatusCode::NOT_FOUND, format!("{what} does not exist"))
}

/// The answer when fileio keeps nothing of this kind.
fn not_kept(status: &tonic::Status, area: &str) -> HttpError {
    HttpError::new(
        StatusCode::NOT_FOUND,
        format!("there is no {area} here: {}", status.message()),
    )
}
