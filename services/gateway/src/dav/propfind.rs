//! What a PROPFIND asks for (RFC 4918 14.20): [`Propfind`], read from its body within
//! [`MAX_PROPFIND_NAMES`] and [`MAX_PROPFIND_NAME_BYTES`].

use crate::dav::properties::{DAV, Name};
use crate::dav::xmldom::{Element, XmlError};
use kubedav_api::pb::fileio::v1::{PropertyName, PropertySelection, property_selection};

/// Most properties one PROPFIND may name.
pub const MAX_PROPFIND_NAMES: usize = 512;
/// Most bytes the local names one PROPFIND names may total. Each is written back twice
/// per resource (in the answer, or in its 404 propstat), so this bounds what a request
/// can add to each `response` element, however large its body: at most
/// 2 × 8 KiB of names, plus a short prefix and tags per name.
pub const MAX_PROPFIND_NAME_BYTES: usize = 8 * 1024;

/// What a PROPFIND asks for (RFC 4918 14.20).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Propfind {
    /// All dead properties and the allprop live ones, plus `include`d ones.
    AllProp {
        /// The properties an `include` element names besides.
        include: Vec<Name>,
    },
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

    /// The names the request asks for by name, which its answer echoes.
    pub fn echoed(&self) -> &[Name] {
        match self {
            Propfind::AllProp { include } => include,
            Propfind::PropName => &[],
            Propfind::Prop(names) => names,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dav::xmldom::parse;

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
}
