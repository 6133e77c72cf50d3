//! WebDAV properties as kubedav knows them: a property's [`Name`], and the live ones,
//! computed from the resource ([`Live`]). What a PROPFIND asks for is [`super::propfind`];
//! how properties are written, [`super::multistatus`].

use crate::dav::xmldom::{Element, Namespace};
use kubedav_api::fileio::FileInfo;

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

    /// The element's opening and closing tags (`<D:getetag>`, `</D:getetag>`).
    pub fn tags(self) -> (&'static str, &'static str) {
        let (_, open, close) = self.spelling();
        (open, close)
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

    /// Whether it applies to a resource, when the volume's usage is known (`usage`) or
    /// not.
    pub fn applies(self, info: &FileInfo, usage: bool) -> bool {
        match self {
            Live::GetContentLength | Live::GetContentType => !info.is_collection,
            Live::QuotaAvailableBytes | Live::QuotaUsedBytes => info.is_collection && usage,
            _ => true,
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

    /// A name in DAV:.
    #[cfg(test)]
    pub(crate) fn dav(local: &str) -> Self {
        Name {
            namespace: DAV.into(),
            local: local.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
