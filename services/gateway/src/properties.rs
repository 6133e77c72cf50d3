//! WebDAV properties: PROPFIND request forms, live properties, and the XML of a
//! multistatus `response` element.

use crate::dates::{write_http_date, write_rfc3339};
use crate::xml::escape_into;
use crate::xmldom::{Element, XmlError};
use http::StatusCode;
use kubedav_api::fileio::{FileInfo, UsageResponse};
use kubedav_api::pb::fileio::v1::{DeadProperty, PropertyName, PropertySelection, property_selection};
use std::fmt::Write;

/// The DAV: namespace.
pub const DAV: &str = "DAV:";

/// The live properties `allprop` returns: those of RFC 4918.
pub const ALLPROP_LIVE: [&str; 9] = [
    "creationdate",
    "displayname",
    "getcontentlength",
    "getcontenttype",
    "getetag",
    "getlastmodified",
    "resourcetype",
    "supportedlock",
    "lockdiscovery",
];

/// The RFC 4331 quota properties: live, but kept out of allprop (RFC 4331 section 3:
/// they can be costly), so asked for by name or with `include`.
pub const QUOTA: [&str; 2] = ["quota-available-bytes", "quota-used-bytes"];

/// A property name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Name {
    /// Namespace URI ("" for none).
    pub namespace: String,
    /// Local name.
    pub local: String,
}

impl Name {
    /// Whether this is one of kubedav's live properties.
    pub fn is_live(&self) -> bool {
        self.namespace == DAV
            && (ALLPROP_LIVE.contains(&self.local.as_str()) || QUOTA.contains(&self.local.as_str()))
    }

    fn of(element: &Element) -> Self {
        Name {
            namespace: element.namespace.clone(),
            local: element.name.clone(),
        }
    }

    #[cfg(test)]
    fn dav(local: &str) -> Self {
        Name {
            namespace: DAV.into(),
            local: local.into(),
        }
    }
}

/// What a PROPFIND asks for (RFC 4918 14.20).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Propfind {
    /// All dead properties and the allprop live ones, plus `include`d ones.
    AllProp { include: Vec<Name> },
    /// Names only.
    PropName,
    /// These properties.
    Prop(Vec<Name>),
}

impl Propfind {
    /// Interprets a PROPFIND body; `None` (no body) means allprop.
    pub fn parse(body: Option<&Element>) -> Result<Self, XmlError> {
        let Some(root) = body else {
            return Ok(Propfind::AllProp { include: Vec::new() });
        };
        if !root.is(DAV, "propfind") {
            return Err(XmlError("the root element must be DAV:propfind".into()));
        }
        let names = |e: &Element| e.elements().map(Name::of).collect::<Vec<_>>();
        if root.child(DAV, "allprop").is_some() {
            let include = root.child(DAV, "include").map(names).unwrap_or_default();
            return Ok(Propfind::AllProp { include });
        }
        if root.child(DAV, "propname").is_some() {
            return Ok(Propfind::PropName);
        }
        if let Some(prop) = root.child(DAV, "prop") {
            return Ok(Propfind::Prop(names(prop)));
        }
        Err(XmlError(
            "DAV:propfind must hold DAV:allprop, DAV:propname or DAV:prop".into(),
        ))
    }

    /// The dead properties fileio must return for this request.
    pub fn selection(&self) -> PropertySelection {
        match self {
            Propfind::AllProp { .. } => PropertySelection {
                mode: property_selection::Mode::All as i32,
                names: vec![],
            },
            Propfind::PropName => PropertySelection {
                mode: property_selection::Mode::Names as i32,
                names: vec![],
            },
            Propfind::Prop(names) => {
                let dead: Vec<PropertyName> = names
                    .iter()
                    .filter(|n| !n.is_live())
                    .map(|n| PropertyName {
                        namespace: n.namespace.clone(),
                        name: n.local.clone(),
                    })
                    .collect();
                let mode = if dead.is_empty() {
                    property_selection::Mode::None
                } else {
                    property_selection::Mode::Selected
                };
                PropertySelection {
                    mode: mode as i32,
                    names: dead,
                }
            }
        }
    }

    /// Whether answering needs the locks (DAV:lockdiscovery values).
    pub fn needs_lockdiscovery(&self) -> bool {
        match self {
            Propfind::AllProp { .. } => true,
            Propfind::PropName => false,
            Propfind::Prop(names) => names
                .iter()
                .any(|n| n.namespace == DAV && n.local == "lockdiscovery"),
        }
    }

    /// Whether answering needs the volume's usage (quota properties).
    pub fn needs_usage(&self) -> bool {
        let asks = |names: &[Name]| {
            names
                .iter()
                .any(|n| n.namespace == DAV && n.local.starts_with("quota-"))
        };
        match self {
            Propfind::AllProp { include } => asks(include),
            Propfind::PropName => false,
            Propfind::Prop(names) => asks(names),
        }
    }
}

/// What live values depend on besides the resource's metadata.
pub struct LiveContext<'a> {
    /// Space used and available, when asked for.
    pub usage: Option<&'a UsageResponse>,
    /// The `DAV:lockdiscovery` content for this resource.
    pub lockdiscovery: &'a str,
    /// The `DAV:supportedlock` content.
    pub supportedlock: &'a str,
}

/// Whether the live property `local` (DAV: namespace) applies to a resource.
pub fn live_applies(local: &str, info: &FileInfo, ctx: &LiveContext<'_>) -> bool {
    match local {
        "creationdate" | "displayname" | "getetag" | "getlastmodified" | "resourcetype" | "supportedlock"
        | "lockdiscovery" => true,
        "getcontentlength" | "getcontenttype" => !info.is_collection,
        "quota-available-bytes" | "quota-used-bytes" => info.is_collection && ctx.usage.is_some(),
        _ => false,
    }
}

/// Appends the XML content of a live property that [`live_applies`] to.
fn write_live_content(out: &mut String, local: &str, info: &FileInfo, name: &str, ctx: &LiveContext<'_>) {
    match local {
        "creationdate" => write_rfc3339(out, info.created_unix_ns),
        "displayname" => escape_into(out, name),
        "getcontentlength" => push_decimal(out, info.size),
        "getcontenttype" => escape_into(
            out,
            mime_guess::from_path(name)
                .first_raw()
                .unwrap_or("application/octet-stream"),
        ),
        "getetag" => {
            out.push_str("&quot;");
            escape_into(out, &info.etag);
            out.push_str("&quot;");
        }
        "getlastmodified" => write_http_date(out, info.modified_unix_ns),
        "resourcetype" if info.is_collection => out.push_str("<D:collection/>"),
        "supportedlock" => out.push_str(ctx.supportedlock),
        "lockdiscovery" => out.push_str(ctx.lockdiscovery),
        "quota-available-bytes" => push_decimal(out, ctx.usage.map_or(0, |u| u.available_bytes)),
        "quota-used-bytes" => push_decimal(out, ctx.usage.map_or(0, |u| u.used_bytes)),
        _ => {}
    }
}

/// The content of a live property for a resource, or `None` where it does not apply.
pub fn live_value(local: &str, info: &FileInfo, name: &str, ctx: &LiveContext<'_>) -> Option<String> {
    live_applies(local, info, ctx).then(|| {
        let mut out = String::new();
        write_live_content(&mut out, local, info, name, ctx);
        out
    })
}

fn push_decimal(out: &mut String, value: u64) {
    let _ = write!(out, "{value}");
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
    let open_at = out.len();
    if namespace == DAV {
        out.push_str("<D:");
        out.push_str(local);
    } else {
        out.push('<');
        out.push_str(local);
        out.push_str(" xmlns=\"");
        escape_into(out, namespace);
        out.push('"');
    }
    let tag_end = out.len();
    out.push('>');
    content(out);
    if out.len() == tag_end + 1 {
        out.truncate(tag_end);
        out.push_str("/>");
        return;
    }
    out.push_str("</");
    if namespace == DAV {
        out.push_str("D:");
    }
    out.push_str(local);
    out.push('>');
    debug_assert!(out.len() > open_at);
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
    let _ = write!(
        out,
        "</D:prop><D:status>HTTP/1.1 {} {}</D:status>",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    if let Some(error) = error {
        let _ = write!(out, "<D:error><D:{error}/></D:error>");
    }
    out.push_str("</D:propstat>");
}

/// One property a `DAV:prop` request names, as this resource has it.
enum Held<'a> {
    Live,
    Dead(&'a DeadProperty),
    Missing,
}

fn held<'a>(n: &Name, info: &FileInfo, dead: &'a [DeadProperty], ctx: &LiveContext<'_>) -> Held<'a> {
    if n.is_live() {
        return if live_applies(&n.local, info, ctx) {
            Held::Live
        } else {
            Held::Missing
        };
    }
    dead.iter()
        .find(|p| p.namespace == n.namespace && p.name == n.local)
        .map_or(Held::Missing, Held::Dead)
}

fn write_dead(out: &mut String, p: &DeadProperty) {
    write_element(out, &p.namespace, &p.name, |out| {
        out.push_str(&String::from_utf8_lossy(&p.value))
    });
}

fn write_live(out: &mut String, local: &str, info: &FileInfo, name: &str, ctx: &LiveContext<'_>) {
    write_element(out, DAV, local, |out| {
        write_live_content(out, local, info, name, ctx)
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
    out.push_str("<D:response><D:href>");
    escape_into(out, href);
    out.push_str("</D:href>");
    match request {
        Propfind::PropName => {
            open_propstat(out);
            for local in ALLPROP_LIVE {
                if live_applies(local, info, ctx) {
                    write_property(out, DAV, local, None);
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
                    .filter(|n| n.is_live() && !ALLPROP_LIVE.contains(&n.local.as_str()))
            };
            open_propstat(out);
            for local in ALLPROP_LIVE {
                if live_applies(local, info, ctx) {
                    write_live(out, local, info, name, ctx);
                }
            }
            for p in dead {
                write_dead(out, p);
            }
            for n in extra().filter(|n| live_applies(&n.local, info, ctx)) {
                write_live(out, &n.local, info, name, ctx);
            }
            close_propstat(out, StatusCode::OK, None);
            if extra().any(|n| !live_applies(&n.local, info, ctx)) {
                open_propstat(out);
                for n in extra().filter(|n| !live_applies(&n.local, info, ctx)) {
                    write_property(out, DAV, &n.local, None);
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
                        Held::Live => write_live(out, &n.local, info, name, ctx),
                        Held::Dead(p) => write_element(out, &n.namespace, &n.local, |out| {
                            out.push_str(&String::from_utf8_lossy(&p.value))
                        }),
                        Held::Missing => {}
                    }
                }
                close_propstat(out, StatusCode::OK, None);
            }
            if missing > 0 {
                open_propstat(out);
                for n in names {
                    if matches!(held(n, info, dead, ctx), Held::Missing) {
                        write_property(out, &n.namespace, &n.local, None);
                    }
                }
                close_propstat(out, StatusCode::NOT_FOUND, None);
            }
        }
    }
    out.push_str("</D:response>\n");
}

/// The opening of a multistatus body.
pub const MULTISTATUS_OPEN: &str =
    "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:multistatus xmlns:D=\"DAV:\">\n";
/// Its end.
pub const MULTISTATUS_CLOSE: &str = "</D:multistatus>\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xmldom::parse;

    #[test]
    fn request_forms() {
        assert_eq!(
            Propfind::parse(None).unwrap(),
            Propfind::AllProp { include: vec![] }
        );
        let body =
            parse(br#"<propfind xmlns="DAV:"><allprop/><include><quota-used-bytes/></include></propfind>"#)
                .unwrap();
        let request = Propfind::parse(Some(&body)).unwrap();
        assert_eq!(
            request,
            Propfind::AllProp {
                include: vec![Name::dav("quota-used-bytes")]
            }
        );
        assert!(request.needs_usage());
        let body = parse(br#"<D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>"#).unwrap();
        assert_eq!(Propfind::parse(Some(&body)).unwrap(), Propfind::PropName);
        let body = parse(
            br#"<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/><x:y xmlns:x="urn:x"/></D:prop></D:propfind>"#,
        )
        .unwrap();
        let request = Propfind::parse(Some(&body)).unwrap();
        let selection = request.selection();
        assert_eq!(
            selection.names,
            vec![PropertyName {
                namespace: "urn:x".into(),
                name: "y".into()
            }]
        );
        for bad in [
            &br#"<propfind xmlns="urn:other"><allprop/></propfind>"#[..],
            br#"<propfind xmlns="DAV:"/>"#,
        ] {
            assert!(Propfind::parse(Some(&parse(bad).unwrap())).is_err());
        }
    }

    #[test]
    fn responses_escape_and_declare_namespaces() {
        let info = FileInfo {
            path: "a&b".into(),
            size: 3,
            etag: "e1".into(),
            ..Default::default()
        };
        let ctx = LiveContext {
            usage: None,
            lockdiscovery: "",
            supportedlock: "",
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
        let mut out = String::from(MULTISTATUS_OPEN);
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
