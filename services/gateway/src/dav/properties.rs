//! WebDAV properties: PROPFIND request forms, live properties, and the XML of a
//! multistatus `response` element.

use crate::dav::xml::escape_into;
use crate::dav::xmldom::{Element, Namespace, XmlError};
use crate::http::dates::{write_http_date, write_rfc3339};
use http::StatusCode;
use kubedav_api::fileio::{FileInfo, UsageResponse};
use kubedav_api::pb::fileio::v1::{DeadProperty, PropertyName, PropertySelection, property_selection};
use std::fmt::Write;
use std::sync::Arc;

/// The DAV: namespace.
pub const DAV: &str = "DAV:";

/// A live property: one kubedav computes from the resource, in the DAV: namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Live {
    /// `DAV:creationdate`, RFC 3339.
    CreationDate,
    /// `DAV:displayname`: the last segment of the path.
    DisplayName,
    /// `DAV:getcontentlength` (files only).
    GetContentLength,
    /// `DAV:getcontenttype`, guessed from the extension (files only).
    GetContentType,
    /// `DAV:getetag`, strong.
    GetEtag,
    /// `DAV:getlastmodified`, an HTTP date.
    GetLastModified,
    /// `DAV:resourcetype`.
    ResourceType,
    /// `DAV:supportedlock`.
    SupportedLock,
    /// `DAV:lockdiscovery`.
    LockDiscovery,
    /// `DAV:quota-available-bytes` (RFC 4331; collections only).
    QuotaAvailableBytes,
    /// `DAV:quota-used-bytes` (RFC 4331; collections only).
    QuotaUsedBytes,
}

impl Live {
    /// Every live property: those `allprop` returns first, then the quota ones.
    pub const ALL: [Live; 11] = [
        Live::CreationDate,
        Live::DisplayName,
        Live::GetContentLength,
        Live::GetContentType,
        Live::GetEtag,
        Live::GetLastModified,
        Live::ResourceType,
        Live::SupportedLock,
        Live::LockDiscovery,
        Live::QuotaAvailableBytes,
        Live::QuotaUsedBytes,
    ];

    /// The live properties `allprop` returns: those of RFC 4918. The RFC 4331 quota
    /// properties are live but kept out of allprop (RFC 4331 section 3: they can be
    /// costly), so they are asked for by name or with `include`.
    pub const ALLPROP: &'static [Live] = Live::ALL.split_at(9).0;

    /// The local name (in DAV:).
    pub fn local_name(self) -> &'static str {
        self.spelling().0
    }

    /// The local name and the element's opening and closing tags, all static.
    fn spelling(self) -> (&'static str, &'static str, &'static str) {
        macro_rules! spelled {
            ($local:literal) => {
                (
                    $local,
                    concat!("<D:", $local, ">"),
                    concat!("</D:", $local, ">"),
                )
            };
        }
        match self {
            Live::CreationDate => spelled!("creationdate"),
            Live::DisplayName => spelled!("displayname"),
            Live::GetContentLength => spelled!("getcontentlength"),
            Live::GetContentType => spelled!("getcontenttype"),
            Live::GetEtag => spelled!("getetag"),
            Live::GetLastModified => spelled!("getlastmodified"),
            Live::ResourceType => spelled!("resourcetype"),
            Live::SupportedLock => spelled!("supportedlock"),
            Live::LockDiscovery => spelled!("lockdiscovery"),
            Live::QuotaAvailableBytes => spelled!("quota-available-bytes"),
            Live::QuotaUsedBytes => spelled!("quota-used-bytes"),
        }
    }

    /// The live property `name` is, if it is one.
    pub fn of(name: &Name) -> Option<Live> {
        if &*name.namespace != DAV {
            return None;
        }
        Live::ALL.into_iter().find(|live| live.local_name() == name.local)
    }

    /// Whether `allprop` returns it.
    pub fn in_allprop(self) -> bool {
        !matches!(self, Live::QuotaAvailableBytes | Live::QuotaUsedBytes)
    }

    /// Whether it applies to a resource.
    pub fn applies(self, info: &FileInfo, ctx: &LiveContext<'_>) -> bool {
        match self {
            Live::GetContentLength | Live::GetContentType => !info.is_collection,
            Live::QuotaAvailableBytes | Live::QuotaUsedBytes => info.is_collection && ctx.usage.is_some(),
            _ => true,
        }
    }

    /// Appends its XML content for a resource it [`applies`](Live::applies) to.
    fn write_content(self, out: &mut String, info: &FileInfo, name: &str, ctx: &LiveContext<'_>) {
        match self {
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

    /// Writes the element with its content for a resource, or an empty element.
    fn write(self, out: &mut String, info: &FileInfo, name: &str, ctx: &LiveContext<'_>) {
        let (_, open, close) = self.spelling();
        out.push_str(open);
        let content_at = out.len();
        self.write_content(out, info, name, ctx);
        if out.len() == content_at {
            out.truncate(content_at - 1);
            out.push_str("/>");
        } else {
            out.push_str(close);
        }
    }
}

/// A property name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Name {
    /// Namespace URI ("" for none), shared with the other names of its request.
    pub namespace: Namespace,
    /// Local name.
    pub local: String,
}

impl Name {
    /// Whether this is one of kubedav's live properties.
    pub fn is_live(&self) -> bool {
        Live::of(self).is_some()
    }

    /// The name of an element of a request body.
    pub fn of(element: &Element) -> Self {
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

/// Most properties one PROPFIND may name.
pub const MAX_PROPFIND_NAMES: usize = 512;
/// Most bytes the local names one PROPFIND names may total. Each is written back twice
/// per resource (in the answer, or in its 404 propstat), so this bounds what a request
/// can add to each `response` element, however large its body: at most
/// 2 × 8 KiB of names, plus a short prefix and tags per name.
pub const MAX_PROPFIND_NAME_BYTES: usize = 8 * 1024;

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
        if root.child(DAV, "allprop").is_some() {
            let include = match root.child(DAV, "include") {
                Some(include) => asked(include)?,
                None => Vec::new(),
            };
            return Ok(Propfind::AllProp { include });
        }
        if root.child(DAV, "propname").is_some() {
            return Ok(Propfind::PropName);
        }
        if let Some(prop) = root.child(DAV, "prop") {
            return Ok(Propfind::Prop(asked(prop)?));
        }
        Err(XmlError(
            "DAV:propfind must hold DAV:allprop, DAV:propname or DAV:prop".into(),
        ))
    }

    /// The prefixes of the names this request echoes.
    pub fn prefixes(&self) -> Prefixes {
        match self {
            Propfind::AllProp { include } => Prefixes::of(include),
            Propfind::PropName => Prefixes::default(),
            Propfind::Prop(names) => Prefixes::of(names),
        }
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
                let mut dead: Vec<PropertyName> = names
                    .iter()
                    .filter(|n| !n.is_live())
                    .map(|n| PropertyName {
                        namespace: n.namespace.to_string(),
                        name: n.local.clone(),
                    })
                    .collect();
                // oc:checksums is presented from what fileio keeps (`dav::sync`).
                if names
                    .iter()
                    .any(|n| crate::dav::sync::is_owncloud_checksums(&n.namespace, &n.local))
                {
                    dead.push(kubedav_api::checksums::checksums_property_name());
                }
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
                .any(|n| &*n.namespace == DAV && n.local == "lockdiscovery"),
        }
    }

    /// Whether answering needs the volume's usage (quota properties).
    pub fn needs_usage(&self) -> bool {
        let asks = |names: &[Name]| {
            names
                .iter()
                .any(|n| &*n.namespace == DAV && n.local.starts_with("quota-"))
        };
        match self {
            Propfind::AllProp { include } => asks(include),
            Propfind::PropName => false,
            Propfind::Prop(names) => asks(names),
        }
    }
}

/// The property names a `DAV:prop` or `DAV:include` of a PROPFIND asks for, within
/// [`MAX_PROPFIND_NAMES`] and [`MAX_PROPFIND_NAME_BYTES`].
fn asked(parent: &Element) -> Result<Vec<Name>, XmlError> {
    let mut names = Vec::new();
    let mut bytes = 0;
    for element in parent.elements() {
        bytes += element.name.len();
        if names.len() == MAX_PROPFIND_NAMES || bytes > MAX_PROPFIND_NAME_BYTES {
            return Err(XmlError(format!(
                "a PROPFIND may name at most {MAX_PROPFIND_NAMES} properties of at most \
                 {MAX_PROPFIND_NAME_BYTES} bytes of names in all; ask for fewer, or use allprop"
            )));
        }
        names.push(Name::of(element));
    }
    Ok(names)
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

/// `value` in decimal, without the formatting machinery (a size per PROPFIND entry).
fn push_decimal(out: &mut String, value: u64) {
    out.push_str(itoa::Buffer::new().format(value));
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
    if status == StatusCode::OK {
        out.push_str("</D:prop><D:status>HTTP/1.1 200 OK</D:status>");
    } else {
        let _ = write!(
            out,
            "</D:prop><D:status>HTTP/1.1 {} {}</D:status>",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
    }
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
        return if live.applies(info, ctx) {
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
    out.push_str("<D:response><D:href>");
    escape_into(out, href);
    out.push_str("</D:href>");
    match request {
        Propfind::PropName => {
            open_propstat(out);
            for &live in Live::ALLPROP {
                if live.applies(info, ctx) {
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
                if live.applies(info, ctx) {
                    live.write(out, info, name, ctx);
                }
            }
            for p in dead {
                write_dead(out, p);
            }
            for live in extra().filter(|live| live.applies(info, ctx)) {
                live.write(out, info, name, ctx);
            }
            close_propstat(out, StatusCode::OK, None);
            if extra().any(|live| !live.applies(info, ctx)) {
                open_propstat(out);
                for live in extra().filter(|live| !live.applies(info, ctx)) {
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
                        Held::Live(live) => live.write(out, info, name, ctx),
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
    out.push_str("</D:response>\n");
}

/// The end of a multistatus body (its opening: [`Prefixes::open_multistatus`]).
pub const MULTISTATUS_CLOSE: &str = "</D:multistatus>\n";

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn decimals_as_display_writes_them() {
        for value in [0u64, 7, 10, 1_234_567, u64::MAX] {
            let mut out = String::from("x");
            push_decimal(&mut out, value);
            assert_eq!(out, format!("x{value}"));
        }
    }

    #[test]
    fn live_names_round_trip() {
        for live in Live::ALL {
            let name = Name::dav(live.local_name());
            assert_eq!(Live::of(&name), Some(live));
            assert_eq!(live.in_allprop(), !live.local_name().starts_with("quota-"));
            assert_eq!(Live::ALLPROP.contains(&live), live.in_allprop());
        }
        let foreign = Name {
            namespace: "urn:x".into(),
            local: "getetag".into(),
        };
        assert_eq!(Live::of(&foreign), None, "only in the DAV: namespace");
    }

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
        let prefixes = request.prefixes();
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
        let prefixes = request.prefixes();
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
