//! The one multistatus writer (RFC 4918 13): its opening with the namespace prefixes of
//! the names it echoes ([`Prefixes`]), each `response` ([`open_response`], PROPFIND's
//! whole [`write_response`]), its `propstat`s and statuses, its end
//! ([`MULTISTATUS_CLOSE`]), and the 207 that carries it ([`answer`], [`answer_stream`],
//! [`failures`]).

use crate::dav::properties::{DAV, Live, Name};
use crate::dav::propfind::Propfind;
use crate::dav::xml::{escape_into, push_decimal};
use crate::dav::xmldom::Namespace;
use crate::http::dates::{write_http_date, write_rfc3339};
use crate::http::paths::BasePath;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use kubedav_api::fileio::{FileInfo, UsageResponse};
use kubedav_api::pb::fileio::v1::DeadProperty;
use std::fmt::Write;
use std::sync::Arc;

/// The media type of a multistatus body.
const CONTENT_TYPE: &str = "application/xml; charset=utf-8";

/// A 207 Multi-Status response with this XML body.
pub fn answer(body: impl Into<bytes::Bytes>) -> Response {
    let mut response = Response::new(axum::body::Body::from(body.into()));
    *response.status_mut() = StatusCode::MULTI_STATUS;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(CONTENT_TYPE),
    );
    response
}

/// A 207 Multi-Status whose XML body streams from `body`.
pub fn answer_stream(body: axum::body::Body) -> Response {
    (
        StatusCode::MULTI_STATUS,
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        body,
    )
        .into_response()
}

/// A 207 listing the members of a tree operation that failed (RFC 4918 9.6.1, 9.8.5):
/// each one's status and fileio's reason, its href below the gateway's `base` path.
pub fn failures(base: &BasePath, failures: &[kubedav_api::pb::fileio::v1::Failure]) -> Response {
    let mut out = String::new();
    Prefixes::default().open_multistatus(&mut out);
    for failure in failures {
        let path = kubedav_api::path::VolumePath::parse(&failure.path).unwrap_or_default();
        open_response(&mut out, &base.href(&path, false));
        let status = crate::http::errors::http_status(tonic::Code::from(failure.code));
        write_status(&mut out, status);
        if !failure.message.is_empty() {
            out.push_str("<D:responsedescription>");
            escape_into(&mut out, &failure.message);
            out.push_str("</D:responsedescription>");
        }
        close_response(&mut out);
    }
    out.push_str(MULTISTATUS_CLOSE);
    answer(out)
}

/// The namespace prefixes of the names a multistatus echoes, declared once on its root
/// element (`N0`, `N1`, ...), so a name costs its local name and a short prefix in
/// every `response`, not its namespace URI again. DAV: is always `D`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prefixes(Vec<Namespace>);

impl Prefixes {
    /// The prefixes for `names`: one per distinct namespace other than DAV: and none.
    pub fn of<'a>(names: impl IntoIterator<Item = &'a Name>) -> Self {
        let mut known: Vec<Namespace> = Vec::new();
        for name in names {
            if name.namespace.is_empty() || &*name.namespace == DAV {
                continue;
            }
            if !known.iter().any(|k| same(k, &name.namespace)) {
                known.push(name.namespace.clone());
            }
        }
        Prefixes(known)
    }

    fn index(&self, namespace: &Namespace) -> Option<usize> {
        self.0.iter().position(|k| same(k, namespace))
    }

    /// Writes the opening of a multistatus body declaring these prefixes.
    pub fn open_multistatus(&self, out: &mut String) {
        out.push_str("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:multistatus xmlns:D=\"DAV:\"");
        for (i, namespace) in self.0.iter().enumerate() {
            out.push_str(" xmlns:N");
            push_decimal(out, i as u64);
            out.push_str("=\"");
            escape_into(out, namespace);
            out.push('"');
        }
        out.push_str(">\n");
    }

    /// Writes `<name>content</name>` (or an empty element) for a name of the request,
    /// with its declared prefix.
    pub fn write_property(&self, out: &mut String, name: &Name, content: impl FnOnce(&mut String)) {
        match self.index(&name.namespace) {
            Some(i) => {
                let mut tag = String::with_capacity(name.local.len() + 4);
                tag.push('N');
                tag.push_str(itoa::Buffer::new().format(i));
                tag.push(':');
                tag.push_str(&name.local);
                write_tagged(out, &tag, "", content);
            }
            None => write_element(out, &name.namespace, &name.local, content),
        }
    }
}

/// Whether two interned namespaces are the same URI (the same allocation, mostly).
fn same(a: &Namespace, b: &Namespace) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// The end of a multistatus body (its opening: [`Prefixes::open_multistatus`]).
pub const MULTISTATUS_CLOSE: &str = "</D:multistatus>\n";

/// Writes the opening of a `response` element and its `href`.
pub fn open_response(out: &mut String, href: &str) {
    out.push_str("<D:response><D:href>");
    escape_into(out, href);
    out.push_str("</D:href>");
}

/// Writes the end of a `response` element.
pub fn close_response(out: &mut String) {
    out.push_str("</D:response>\n");
}

/// Writes a `status` element.
fn write_status(out: &mut String, status: StatusCode) {
    if status == StatusCode::OK {
        out.push_str("<D:status>HTTP/1.1 200 OK</D:status>");
    } else {
        let _ = write!(
            out,
            "<D:status>HTTP/1.1 {} {}</D:status>",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
    }
}

/// What a `response` is written with besides the resource's metadata: what live values
/// depend on, and the prefixes of the names the request echoes.
pub struct LiveContext<'a> {
    /// The namespace prefixes declared on the multistatus.
    pub prefixes: &'a Prefixes,
    /// Space used and available, when asked for.
    pub usage: Option<&'a UsageResponse>,
    /// The `DAV:lockdiscovery` content for this resource.
    pub lockdiscovery: &'a str,
    /// The `DAV:supportedlock` content.
    pub supportedlock: &'a str,
}

impl LiveContext<'_> {
    /// Whether `live` applies to the resource `info`.
    fn applies(&self, live: Live, info: &FileInfo) -> bool {
        live.applies(info, self.usage.is_some())
    }
}

/// Appends the XML content of `live` for a resource it applies to.
fn write_live_content(out: &mut String, live: Live, info: &FileInfo, name: &str, ctx: &LiveContext<'_>) {
    match live {
        Live::CreationDate => write_rfc3339(out, info.created_unix_ns),
        Live::DisplayName => escape_into(out, name),
        Live::GetContentLength => push_decimal(out, info.size),
        Live::GetContentType => escape_into(out, crate::http::mediatype::of_name(name)),
        Live::GetEtag => {
            out.push_str("&quot;");
            escape_into(out, &info.etag);
            out.push_str("&quot;");
        }
        Live::GetLastModified => write_http_date(out, info.modified_unix_ns),
        Live::ResourceType if info.is_collection => out.push_str("<D:collection/>"),
        Live::ResourceType => {}
        Live::SupportedLock => out.push_str(ctx.supportedlock),
        Live::LockDiscovery => out.push_str(ctx.lockdiscovery),
        Live::QuotaAvailableBytes => push_decimal(out, ctx.usage.map_or(0, |u| u.available_bytes)),
        Live::QuotaUsedBytes => push_decimal(out, ctx.usage.map_or(0, |u| u.used_bytes)),
    }
}

/// Writes the element of `live` with its content for a resource, or an empty element.
fn write_live(out: &mut String, live: Live, info: &FileInfo, name: &str, ctx: &LiveContext<'_>) {
    let (open, close) = live.tags();
    out.push_str(open);
    let content_at = out.len();
    write_live_content(out, live, info, name, ctx);
    if out.len() == content_at {
        out.truncate(content_at - 1);
        out.push_str("/>");
    } else {
        out.push_str(close);
    }
}

/// Writes `<name>content</name>` (or an empty element), declaring the namespace.
pub fn write_property(out: &mut String, namespace: &str, local: &str, content: Option<&str>) {
    write_element(out, namespace, local, |out| {
        if let Some(content) = content {
            out.push_str(content);
        }
    });
}

/// Writes `<name>…</name>` with the content `content` appends, or `<name/>` when it
/// appends nothing; DAV: names use the `D:` prefix, others declare their namespace.
fn write_element(out: &mut String, namespace: &str, local: &str, content: impl FnOnce(&mut String)) {
    if namespace == DAV {
        let mut tag = String::with_capacity(local.len() + 2);
        tag.push_str("D:");
        tag.push_str(local);
        write_tagged(out, &tag, "", content);
    } else {
        let mut declaration = String::with_capacity(namespace.len() + 9);
        declaration.push_str(" xmlns=\"");
        escape_into(&mut declaration, namespace);
        declaration.push('"');
        write_tagged(out, local, &declaration, content);
    }
}

/// Writes `<tag attributes>…</tag>`, or `<tag attributes/>` when `content` appends
/// nothing.
fn write_tagged(out: &mut String, tag: &str, attributes: &str, content: impl FnOnce(&mut String)) {
    out.push('<');
    out.push_str(tag);
    out.push_str(attributes);
    let tag_end = out.len();
    out.push('>');
    content(out);
    if out.len() == tag_end + 1 {
        out.truncate(tag_end);
        out.push_str("/>");
        return;
    }
    out.push_str("</");
    out.push_str(tag);
    out.push('>');
}

/// Writes one `propstat` with the properties already rendered in `props`.
pub fn write_propstat(out: &mut String, props: &str, status: StatusCode, error: Option<&str>) {
    open_propstat(out);
    out.push_str(props);
    close_propstat(out, status, error);
}

fn open_propstat(out: &mut String) {
    out.push_str("<D:propstat><D:prop>");
}

fn close_propstat(out: &mut String, status: StatusCode, error: Option<&str>) {
    out.push_str("</D:prop>");
    write_status(out, status);
    if let Some(error) = error {
        let _ = write!(out, "<D:error><D:{error}/></D:error>");
    }
    out.push_str("</D:propstat>");
}

/// One property a `DAV:prop` request names, as this resource has it.
enum Held<'a> {
    Live(Live),
    Dead(&'a DeadProperty),
    Missing,
}

fn held<'a>(n: &Name, info: &FileInfo, dead: &'a [DeadProperty], ctx: &LiveContext<'_>) -> Held<'a> {
    if let Some(live) = Live::of(n) {
        return if ctx.applies(live, info) {
            Held::Live(live)
        } else {
            Held::Missing
        };
    }
    dead.iter()
        .find(|p| p.namespace == *n.namespace && p.name == n.local)
        .map_or(Held::Missing, Held::Dead)
}

fn write_dead(out: &mut String, p: &DeadProperty) {
    write_element(out, &p.namespace, &p.name, |out| {
        out.push_str(&String::from_utf8_lossy(&p.value))
    });
}

/// Writes the `response` element of one resource for a PROPFIND, straight into `out`
/// (no allocation of its own beyond `out`'s growth).
pub fn write_response(
    out: &mut String,
    href: &str,
    info: &FileInfo,
    name: &str,
    dead: &[DeadProperty],
    request: &Propfind,
    ctx: &LiveContext<'_>,
) {
    open_response(out, href);
    match request {
        Propfind::PropName => {
            open_propstat(out);
            for &live in Live::ALLPROP {
                if ctx.applies(live, info) {
                    write_property(out, DAV, live.local_name(), None);
                }
            }
            for p in dead {
                write_property(out, &p.namespace, &p.name, None);
            }
            close_propstat(out, StatusCode::OK, None);
        }
        Propfind::AllProp { include } => {
            let extra = || {
                include
                    .iter()
                    .filter_map(Live::of)
                    .filter(|live| !live.in_allprop())
            };
            open_propstat(out);
            for &live in Live::ALLPROP {
                if ctx.applies(live, info) {
                    write_live(out, live, info, name, ctx);
                }
            }
            for p in dead {
                write_dead(out, p);
            }
            for live in extra().filter(|live| ctx.applies(*live, info)) {
                write_live(out, live, info, name, ctx);
            }
            close_propstat(out, StatusCode::OK, None);
            if extra().any(|live| !ctx.applies(live, info)) {
                open_propstat(out);
                for live in extra().filter(|live| !ctx.applies(*live, info)) {
                    write_property(out, DAV, live.local_name(), None);
                }
                close_propstat(out, StatusCode::NOT_FOUND, None);
            }
        }
        Propfind::Prop(names) => {
            let missing = names
                .iter()
                .filter(|n| matches!(held(n, info, dead, ctx), Held::Missing))
                .count();
            if missing < names.len() || missing == 0 {
                open_propstat(out);
                for n in names {
                    match held(n, info, dead, ctx) {
                        Held::Live(live) => write_live(out, live, info, name, ctx),
                        Held::Dead(p) => ctx
                            .prefixes
                            .write_property(out, n, |out| out.push_str(&String::from_utf8_lossy(&p.value))),
                        Held::Missing => {}
                    }
                }
                close_propstat(out, StatusCode::OK, None);
            }
            if missing > 0 {
                open_propstat(out);
                for n in names {
                    if matches!(held(n, info, dead, ctx), Held::Missing) {
                        ctx.prefixes.write_property(out, n, |_| {});
                    }
                }
                close_propstat(out, StatusCode::NOT_FOUND, None);
            }
        }
    }
    close_response(out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dav::propfind::MAX_PROPFIND_NAMES;
    use crate::dav::xmldom::parse;

    /// The context of a resource with no locks and no usage asked for.
    fn plain(prefixes: &Prefixes) -> LiveContext<'_> {
        LiveContext {
            prefixes,
            usage: None,
            lockdiscovery: "",
            supportedlock: "",
        }
    }

    /// A namespace URI is declared once per multistatus however many names echo it,
    /// and what one PROPFIND may name is bounded, so its body cannot multiply the size
    /// of every `response`.
    #[test]
    fn echoed_names_cost_their_local_name_not_their_namespace() {
        let uri = format!("urn:{}", "u".repeat(1_000));
        let names: String = (0..500).map(|i| format!("<z:p{i}/>")).collect();
        let body =
            format!(r#"<D:propfind xmlns:D="DAV:" xmlns:z="{uri}"><D:prop>{names}</D:prop></D:propfind>"#);
        let request = Propfind::parse(Some(&parse(body.as_bytes()).unwrap())).unwrap();
        let prefixes = Prefixes::of(request.echoed());
        let ctx = plain(&prefixes);
        let mut out = String::new();
        prefixes.open_multistatus(&mut out);
        for _ in 0..10 {
            write_response(&mut out, "/f", &FileInfo::default(), "f", &[], &request, &ctx);
        }
        out.push_str(MULTISTATUS_CLOSE);
        assert_eq!(out.matches(&uri).count(), 1);
        assert!(out.len() < 10 * 12_000, "{} bytes", out.len());
        let mut one = String::new();
        prefixes.open_multistatus(&mut one);
        write_response(&mut one, "/f", &FileInfo::default(), "f", &[], &request, &ctx);
        one.push_str(MULTISTATUS_CLOSE);
        let root = parse(one.as_bytes()).expect("well-formed");
        let missing = root.child(DAV, "response").unwrap().elements().nth(1).unwrap();
        assert!(missing.child(DAV, "prop").unwrap().child(&uri, "p499").is_some());

        let too_many: String = (0..=MAX_PROPFIND_NAMES).map(|i| format!("<p{i}/>")).collect();
        let body = format!(r#"<propfind xmlns="DAV:"><prop>{too_many}</prop></propfind>"#);
        let refused = Propfind::parse(Some(&parse(body.as_bytes()).unwrap())).unwrap_err();
        assert!(refused.0.contains("at most 512 properties"), "{refused}");
        let long: String = (0..40).map(|i| format!("<p{i}{}/>", "x".repeat(250))).collect();
        let body = format!(r#"<propfind xmlns="DAV:"><prop>{long}</prop></propfind>"#);
        assert!(Propfind::parse(Some(&parse(body.as_bytes()).unwrap())).is_err());
    }

    #[test]
    fn responses_escape_and_declare_namespaces() {
        let info = FileInfo {
            path: "a&b".into(),
            size: 3,
            etag: "e1".into(),
            ..Default::default()
        };
        let dead = vec![DeadProperty {
            namespace: "urn:<x>".into(),
            name: "p".into(),
            value: "<v xmlns=\"\">1</v>".into(),
        }];
        let request = Propfind::Prop(vec![
            Name::dav("getetag"),
            Name::dav("resourcetype"),
            Name {
                namespace: "urn:<x>".into(),
                local: "p".into(),
            },
            Name::dav("nope"),
        ]);
        let mut out = String::new();
        let prefixes = Prefixes::of(request.echoed());
        let ctx = plain(&prefixes);
        prefixes.open_multistatus(&mut out);
        write_response(&mut out, "/a&b", &info, "a&b", &dead, &request, &ctx);
        out.push_str(MULTISTATUS_CLOSE);
        let root = parse(out.as_bytes()).expect("well-formed");
        let response = root.child(DAV, "response").unwrap();
        assert_eq!(response.child(DAV, "href").unwrap().text(), "/a&b");
        let stats: Vec<_> = response.elements().filter(|e| e.is(DAV, "propstat")).collect();
        assert_eq!(stats.len(), 2);
        let ok = stats[0].child(DAV, "prop").unwrap();
        assert_eq!(ok.child(DAV, "getetag").unwrap().text(), "\"e1\"");
        assert!(ok.child("urn:<x>", "p").unwrap().child("", "v").is_some());
        assert!(stats[1].child(DAV, "prop").unwrap().child(DAV, "nope").is_some());
        assert!(stats[1].child(DAV, "status").unwrap().text().contains("404"));
    }
}
