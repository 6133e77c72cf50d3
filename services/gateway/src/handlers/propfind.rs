//! PROPFIND (RFC 4918 9.1): one fileio List call answers any depth and size.

use super::body::{PARSE_ON_WORKER_BYTES, off_worker, xml_bytes};
use crate::Gateway;
use crate::dav::headers::{Depth, depth};
use crate::dav::locking::SUPPORTED_LOCK;
use crate::dav::multistatus::{self, LiveContext, MULTISTATUS_CLOSE, Prefixes, write_response};
use crate::dav::propfind::Propfind;
use crate::http::errors::{HttpError, HttpResult};
use crate::http::paths::{BasePath, RequestPath, request_path};
use crate::request::KeptAnswer;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use http::StatusCode;
use kubedav_api::fileio::{ListEntry, ListRequest, UsageRequest, UsageResponse};
use kubedav_api::locks::{ActiveLock, DiscoverRequest};
use kubedav_api::path::VolumePath;
use kubedav_metrics::Counter;
use std::sync::LazyLock;

/// PROPFINDs answered with empty lockdiscovery because the locks service (or its store)
/// could not be reached.
static LOCKDISCOVERY_UNAVAILABLE: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter(
        "kubedav_gateway_lockdiscovery_unavailable_total",
        "PROPFINDs answered with empty lockdiscovery because the locks could not be read.",
    )
});

/// 207 with one response per resource; 403 `DAV:propfind-finite-depth` for Depth
/// infinity on a collection unless enabled (on a file it is Depth 0); 404 for a missing
/// resource. A Depth 0 answer rendered before is answered again while it holds
/// (`cache::answers`).
pub(crate) async fn propfind(gateway: &Gateway, request: Request) -> HttpResult {
    let mut depth = depth(request.headers(), Depth::Infinity)?;
    let viewer = crate::access::Viewer::of(&request).cloned();
    if depth == Depth::Zero {
        let raw_path = request.uri().path().to_owned();
        let body = xml_bytes(request).await?;
        if let Some(answer) = kept_answer(gateway, &raw_path, body.as_ref()).await {
            return Ok(answer);
        }
        let target = gateway.base_path().decode(&raw_path)?;
        return render(gateway, target, depth, body, Some(&raw_path), viewer).await;
    }
    let target = request_path(&gateway.base_path(), &request)?;
    if depth == Depth::Infinity && !gateway.config.propfind_infinity {
        // Refused for collections only, as Apache mod_dav does: a file's infinite depth
        // is itself, and clients that send no Depth header (webdav4, for one) ask a
        // file's properties that way.
        let target_is_file = gateway
            .fileio
            .stat(kubedav_api::fileio::StatRequest {
                path: target.path.as_str().to_owned(),
            })
            .await
            .is_ok_and(|info| !info.is_collection);
        if !target_is_file {
            return Ok(finite_depth());
        }
        depth = Depth::Zero;
    }
    let body = xml_bytes(request).await?;
    render(gateway, target, depth, body, None, viewer).await
}

/// The answer kept for a Depth 0 request with this path (as it came) and body, if it
/// still holds: the fileio port answers from the copy it was rendered from, and no lock
/// applies if it shows lock discovery.
async fn kept_answer(gateway: &Gateway, raw_path: &str, body: Option<&Bytes>) -> Option<Response> {
    let request_body = body.map_or(&[][..], |body| &body[..]);
    let Some(kept) = gateway.answers.get(raw_path, request_body) else {
        return gateway.answers.count(None);
    };
    let holds = gateway.fileio.kept_copy(kept.path.as_str()) == Some(kept.copy)
        && (!kept.shows_locks || discover(gateway, &kept.path, Depth::Zero).await.is_empty());
    if !holds {
        gateway.answers.forget(raw_path, request_body);
    }
    gateway
        .answers
        .count(holds.then(|| multistatus::answer(kept.body.clone())))
}

/// Lists `target` to `depth` and renders the 207; a Depth 0 answer is kept for requests
/// with path `keep_as` (as it came) and this body when it can be answered again
/// (`cache::answers`). Under a policy, members hidden from `viewer` are left out.
async fn render(
    gateway: &Gateway,
    target: RequestPath,
    depth: Depth,
    body: Option<Bytes>,
    keep_as: Option<&str>,
    viewer: Option<crate::access::Viewer>,
) -> HttpResult {
    // Read before listing: the listing is then answered from this copy or a later one,
    // and an answer is kept only under the copy it may have been rendered from.
    let copy = keep_as.and_then(|_| gateway.fileio.kept_copy(target.path.as_str()));
    let propfind = match &body {
        Some(bytes) if bytes.len() > PARSE_ON_WORKER_BYTES => {
            let bytes = bytes.clone();
            off_worker(move || Propfind::parse(Some(&crate::dav::xmldom::parse(&bytes)?))).await
        }
        // Clients repeat the same few bodies: a body met before is not parsed again.
        Some(bytes) => crate::dav::bodymemo::propfind(bytes, |bytes| {
            Propfind::parse(Some(&crate::dav::xmldom::parse(bytes)?))
        }),
        None => Propfind::parse(None),
    }
    .map_err(|e| HttpError::bad_request(e.to_string()))?;
    let list = ListRequest {
        path: target.path.as_str().to_owned(),
        depth: match depth {
            Depth::Zero => kubedav_api::fileio::Depth::Zero,
            Depth::One => kubedav_api::fileio::Depth::One,
            Depth::Infinity => kubedav_api::fileio::Depth::Infinity,
        } as i32,
        max_entries: if depth == Depth::Infinity {
            gateway.config.propfind_max_entries
        } else {
            0
        },
        properties: Some(propfind.selection()),
    };
    let mut batches = match gateway.fileio.list(list).await {
        Ok(batches) => batches,
        Err(status) if status.code() == tonic::Code::OutOfRange => return Ok(finite_depth()),
        Err(status) => return Err(status.into()),
    };
    // Under a policy, the figures are those of the policy's quota root holding the
    // target, shown only to who may read all of that root (its usage sums what is in
    // it), and only for the entries in that same root.
    let usage_root = viewer
        .as_ref()
        .map(|viewer| viewer.quota_root_shown(&target.path));
    let usage = if propfind.needs_usage() && !matches!(usage_root, Some(None)) {
        gateway
            .fileio
            .usage(UsageRequest {
                path: target.path.as_str().to_owned(),
            })
            .await
            .ok()
    } else {
        None
    };
    let locks = if propfind.needs_lockdiscovery() {
        discover(gateway, &target.path, depth).await
    } else {
        Vec::new()
    };
    let mut render = Render {
        prefixes: Prefixes::of(propfind.echoed()),
        propfind,
        usage,
        usage_within: usage_root.flatten().zip(viewer.clone()),
        locks,
        base: gateway.base_path().clone(),
        link: String::new(),
        hide_below: gateway
            .config
            .hide_dotfiles
            .then(|| target.path.as_str().to_owned()),
        shown_target: false,
        hidden_from: viewer
            .filter(|viewer| depth != Depth::Zero && !viewer.sees_all_of(&target.path))
            .map(|viewer| (viewer, target.path.clone())),
    };
    // The first batch decides the status: an error, or a file addressed as a collection,
    // answers before anything is sent.
    let first = match batches.next().await {
        Some(Ok(batch)) => batch,
        Some(Err(status)) if status.code() == tonic::Code::OutOfRange => return Ok(finite_depth()),
        Some(Err(status)) => return Err(status.into()),
        None => {
            return Err(HttpError::new(
                StatusCode::BAD_GATEWAY,
                "fileio sent an empty listing",
            ));
        }
    };
    if let Some(info) = first.entries.first().and_then(|e| e.info.as_ref())
        && target.trailing_slash
        && !info.is_collection
    {
        return Err(HttpError::new(
            StatusCode::NOT_FOUND,
            format!("{} is a file, not a collection", target.path),
        ));
    }
    let mut out = String::with_capacity(first.entries.len() * 768 + 128);
    render.prefixes.open_multistatus(&mut out);
    render.batch(&mut out, first.entries);
    if depth != Depth::One {
        // Depth 0 is one entry, sent with its length. An infinite listing can still end
        // in "too many entries" (403): buffered, so that answer is never a truncated 207.
        while let Some(batch) = batches.next().await {
            match batch {
                Ok(batch) => render.batch(&mut out, batch.entries),
                Err(status) if status.code() == tonic::Code::OutOfRange => return Ok(finite_depth()),
                Err(status) => return Err(status.into()),
            }
        }
        out.push_str(MULTISTATUS_CLOSE);
        let out = Bytes::from(out);
        if let (Some(raw_path), Some(copy)) = (keep_as, copy)
            && !render.propfind.needs_usage()
            && render.locks.is_empty()
        {
            let answer = KeptAnswer {
                shows_locks: render.propfind.needs_lockdiscovery(),
                path: target.path,
                copy,
                body: out.clone(),
            };
            gateway.answers.keep(raw_path, body.unwrap_or_default(), answer);
        }
        return Ok(multistatus::answer(out));
    }
    // Depth 1 streams batch by batch: memory stays at one batch however large the
    // collection. A failure after the first batch aborts the body (the client sees an
    // incomplete response, never a well-formed partial one).
    let rest = batches.map(move |batch| {
        let batch = batch.map_err(|status| std::io::Error::other(status.message().to_owned()))?;
        let mut out = String::with_capacity(batch.entries.len() * 768);
        render.batch(&mut out, batch.entries);
        Ok::<_, std::io::Error>(Bytes::from(out))
    });
    let body = futures_util::stream::iter([Ok(Bytes::from(out))])
        .chain(rest)
        .chain(futures_util::stream::iter([Ok(Bytes::from_static(
            MULTISTATUS_CLOSE.as_bytes(),
        ))]));
    Ok(multistatus::answer_stream(axum::body::Body::from_stream(body)))
}

/// What each listed entry's `response` element is written from.
struct Render {
    propfind: Propfind,
    /// The namespace prefixes of the names the request echoes.
    prefixes: Prefixes,
    usage: Option<UsageResponse>,
    /// Under a policy: the quota root `usage` is of, and the viewer, whose policy says
    /// which entries lie in that root (the others show no quota figures).
    usage_within: Option<(VolumePath, crate::access::Viewer)>,
    locks: Vec<ActiveLock>,
    /// The gateway's base path, which every href starts with.
    base: BasePath,
    /// The current entry's href (reused).
    link: String,
    /// With `--hide-dotfiles`, the listed path: members with a `.` segment below it are
    /// left out.
    hide_below: Option<String>,
    /// Whether the first entry (the target itself, always shown) was written.
    shown_target: bool,
    /// Under a policy, when rules lie beneath the listed path: its viewer and the path.
    /// Members hidden from the viewer are left out; the path itself passed its check.
    hidden_from: Option<(crate::access::Viewer, VolumePath)>,
}

impl Render {
    /// Appends the `response` elements of a batch of entries.
    fn batch(&mut self, out: &mut String, entries: Vec<ListEntry>) {
        let hidden_from = self.hidden_from.take();
        let members = hidden_from
            .as_ref()
            .map(|(viewer, listed)| viewer.members(listed));
        for mut entry in entries {
            let Some(info) = entry.info else { continue };
            if let (Some((viewer, listed)), Some(members)) = (&hidden_from, &members)
                && info.path != listed.as_str()
                && !viewer.sees_listed(members, listed, &info.path)
            {
                continue;
            }
            if let Some(target) = &self.hide_below {
                if self.shown_target && crate::dav::quirks::hidden_below(target, &info.path) {
                    continue;
                }
                self.shown_target = true;
            }
            crate::dav::sync::present(&mut entry.properties, &info);
            self.link.clear();
            self.base
                .write_wire_href(&mut self.link, &info.path, info.is_collection);
            let name = kubedav_api::path::last_name(&info.path);
            let discovery: String = if self.locks.is_empty() {
                String::new()
            } else {
                let path = VolumePath::parse(&info.path).unwrap_or_default();
                self.locks
                    .iter()
                    .filter(|l| crate::dav::locking::applies(l, &path))
                    .map(|lock| crate::dav::locking::activelock(&self.base, lock))
                    .collect()
            };
            let usage = match &self.usage_within {
                Some((root, viewer)) if self.usage.is_some() => self
                    .usage
                    .as_ref()
                    .filter(|_| viewer.quota_root_of(&info.path).as_ref() == Some(root)),
                _ => self.usage.as_ref(),
            };
            let ctx = LiveContext {
                prefixes: &self.prefixes,
                usage,
                lockdiscovery: &discovery,
                supportedlock: SUPPORTED_LOCK,
            };
            write_response(
                out,
                &self.link,
                &info,
                name,
                &entry.properties,
                &self.propfind,
                &ctx,
            );
        }
        self.hidden_from = hidden_from;
    }
}

/// Registers this module's metrics, so they are exported (at 0) before anything happens.
pub(crate) fn register_metrics() {
    LazyLock::force(&LOCKDISCOVERY_UNAVAILABLE);
}

/// The locks that may apply to the listed resources: one locks call for the whole
/// PROPFIND. Without the locks service the listing goes on with empty lockdiscovery.
async fn discover(gateway: &Gateway, path: &VolumePath, depth: Depth) -> Vec<ActiveLock> {
    let depth = match depth {
        Depth::Zero => 0,
        Depth::One => 1,
        Depth::Infinity => 2,
    };
    match gateway
        .locks
        .discover(DiscoverRequest {
            path: path.as_str().to_owned(),
            depth,
        })
        .await
    {
        Ok(reply) => {
            let mut locks: Vec<ActiveLock> = reply.resources.into_iter().flat_map(|r| r.locks).collect();
            locks.sort_by(|a, b| a.token.cmp(&b.token));
            locks.dedup_by(|a, b| a.token == b.token);
            locks
        }
        Err(status) => {
            LOCKDISCOVERY_UNAVAILABLE.inc();
            tracing::warn!(
                message = status.message(),
                "locks unavailable: PROPFIND answers with empty lockdiscovery"
            );
            Vec::new()
        }
    }
}

fn finite_depth() -> Response {
    crate::dav::xml::dav_error(
        StatusCode::FORBIDDEN,
        "propfind-finite-depth",
        "PROPFIND with Depth: infinity is disabled on this server; use Depth 0 or 1",
    )
}
