//! WebDAV properties: PROPFIND request forms, live properties, and the XML of a
//! multistatus `response` element.

use crate::dates::{http_date, rfc3339};
use crate::xml::escape;
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

/// The content of a live property for a resource, or `None` where it does not apply.
pub fn live_value(local: &str, info: &FileInfo, name: &str, ctx: &LiveContext<'_>) -> Option<String> {
    Some(match local {
        "creationdate" => rfc3339(info.created_unix_ns),
        "displayname" => escape(name),
        "getcontentlength" if !info.is_collection => info.size.to_string(),
        "getcontenttype" if !info.is_collection => escape(
            mime_guess::from_path(name)
                .first_raw()
                .unwrap_or("application/octet-stream"),
        ),
        "getetag" => format!("&quot;{}&quot;", escape(&info.etag)),
        "getlastmodified" => http_date(info.modified_unix_ns),
        "resourcetype" => {
            if info.is_collection {
                "<D:collection/>".into()
            } else {
                String::new()
            }
        }
        "supportedlock" => ctx.supportedlock.to_owned(),
        "lockdiscovery" => ctx.lockdiscovery.to_owned(),
        "quota-available-bytes" if info.is_collection => ctx.usage?.available_bytes.to_string(),
        "quota-used-bytes" if info.is_collection => ctx.usage?.used_bytes.to_string(),
        _ => return None,
    })
}

/// Writes `<name>content</name>` (or an empty element), declaring the namespace.
pub fn write_property(out: &mut String, namespace: &str, local: &str, content: Option<&str>) {
    if namespace == DAV {
        match content {
            Some(c) if !c.is_empty() => {
                let _ = write!(out, "<D:{local}>{c}</D:{local}>");
            }
            _ => {
                let _ = write!(out, "<D:{local}/>");
            }
        }
    } else {
        let ns = escape(namespace);
        match content {
            Some(c) if !c.is_empty() => {
                let _ = write!(out, "<{local} xmlns=\"{ns}\">{c}</{local}>");
            }
            _ => {
                let _ = write!(out, "<{local} xmlns=\"{ns}\"/>");
            }
        }
    }
}

/// Writes one `propstat` with the properties already rendered in `props`.
pub fn write_propstat(out: &mut String, props: &str, status: StatusCode, error: Option<&str>) {
    let _ = write!(
        out,
        "<D:propstat><D:prop>{props}</D:prop><D:status>HTTP/1.1 {} {}</D:status>",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    if let Some(error) = error {
        let _ = write!(out, "<D:error><D:{error}/></D:error>");
    }
    out.push_str("</D:propstat>");
}

/// Writes the `response` element of one resource for a PROPFIND.
pub fn write_response(
    out: &mut String,
    href: &str,
    info: &FileInfo,
    name: &str,
    dead: &[DeadProperty],
    request: &Propfind,
    ctx: &LiveContext<'_>,
) {
    let _ = write!(out, "<D:response><D:href>{}</D:href>", escape(href));
    let mut found = String::new();
    let mut missing = String::new();
    match request {
        Propfind::PropName => {
            for local in ALLPROP_LIVE {
                if live_value(local, info, name, ctx).is_some() {
                    write_property(&mut found, DAV, local, None);
                }
            }
            for p in dead {
                write_property(&mut found, &p.namespace, &p.name, None);
            }
        }
        Propfind::AllProp { include } => {
            for local in ALLPROP_LIVE {
                if let Some(value) = live_value(local, info, name, ctx) {
                    write_property(&mut found, DAV, local, Some(&value));
                }
            }
            for p in dead {
                write_property(
                    &mut found,
                    &p.namespace,
                    &p.name,
                    Some(&String::from_utf8_lossy(&p.value)),
                );
            }
            for n in include
                .iter()
                .filter(|n| n.is_live() && !ALLPROP_LIVE.contains(&n.local.as_str()))
            {
                match live_value(&n.local, info, name, ctx) {
                    Some(value) => write_property(&mut found, DAV, &n.local, Some(&value)),
                    None => write_property(&mut missing, DAV, &n.local, None),
                }
            }
        }
        Propfind::Prop(names) => {
            for n in names {
                let value = if n.is_live() {
                    live_value(&n.local, info, name, ctx)
                } else {
                    dead.iter()
                        .find(|p| p.namespace == n.namespace && p.name == n.local)
                        .map(|p| String::from_utf8_lossy(&p.value).into_owned())
                };
                match value {
                    Some(value) => write_property(&mut found, &n.namespace, &n.local, Some(&value)),
                    None => write_property(&mut missing, &n.namespace, &n.local, None),
                }
            }
        }
    }
    if !found.is_empty() || missing.is_empty() {
        write_propstat(out, &found, StatusCode::OK, None);
    }
    if !missing.is_empty() {
        write_propstat(out, &missing, StatusCode::NOT_FOUND, None);
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
