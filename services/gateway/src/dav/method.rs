//! [`DavMethod`]: the methods this gateway serves. Dispatch and the `Allow` header both
//! derive from it, so a method is added in one place.

use http::HeaderValue;
use std::sync::LazyLock;

/// A method the gateway serves (RFC 9110 9.3, RFC 4918 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DavMethod {
    /// OPTIONS: the capabilities (`DAV`, `Allow`).
    Options,
    /// GET: a file, or a collection as a page (or Markdown).
    Get,
    /// HEAD: GET without the body.
    Head,
    /// PUT: write a file.
    Put,
    /// DELETE: remove a resource or a tree.
    Delete,
    /// MKCOL: create a collection.
    Mkcol,
    /// PROPFIND: read properties.
    Propfind,
    /// PROPPATCH: set and remove dead properties.
    Proppatch,
    /// COPY: copy a resource or a tree.
    Copy,
    /// MOVE: move a resource or a tree.
    Move,
    /// LOCK: take or refresh a write lock.
    Lock,
    /// UNLOCK: release a lock.
    Unlock,
}

impl DavMethod {
    /// Every method, in the order `Allow` lists them.
    pub const ALL: [Self; 12] = [
        Self::Options,
        Self::Get,
        Self::Head,
        Self::Put,
        Self::Delete,
        Self::Mkcol,
        Self::Propfind,
        Self::Proppatch,
        Self::Copy,
        Self::Move,
        Self::Lock,
        Self::Unlock,
    ];

    /// The method's token on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Self::Options => "OPTIONS",
            Self::Get => "GET",
            Self::Head => "HEAD",
            Self::Put => "PUT",
            Self::Delete => "DELETE",
            Self::Mkcol => "MKCOL",
            Self::Propfind => "PROPFIND",
            Self::Proppatch => "PROPPATCH",
            Self::Copy => "COPY",
            Self::Move => "MOVE",
            Self::Lock => "LOCK",
            Self::Unlock => "UNLOCK",
        }
    }

    /// The served method `method` is, if it is one (method tokens are case-sensitive).
    pub fn of(method: &http::Method) -> Option<Self> {
        let name = method.as_str();
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether the method only reads, so read-only and anonymous users may use it.
    pub fn is_read(self) -> bool {
        matches!(self, Self::Options | Self::Get | Self::Head | Self::Propfind)
    }
}

/// The `Allow` header's value: every method of [`DavMethod::ALL`].
pub fn allow() -> HeaderValue {
    static ALLOW: LazyLock<HeaderValue> = LazyLock::new(|| {
        let names: Vec<&str> = DavMethod::ALL.iter().map(|m| m.name()).collect();
        HeaderValue::from_str(&names.join(", ")).expect("method names are tokens")
    });
    ALLOW.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_parses_back_and_is_allowed() {
        let allow = allow();
        let listed: Vec<&str> = allow.to_str().unwrap().split(", ").collect();
        for method in DavMethod::ALL {
            let wire = http::Method::from_bytes(method.name().as_bytes()).unwrap();
            assert_eq!(DavMethod::of(&wire), Some(method));
            assert!(listed.contains(&method.name()));
        }
        assert_eq!(listed.len(), DavMethod::ALL.len());
        assert_eq!(DavMethod::of(&http::Method::POST), None);
        assert_eq!(
            DavMethod::of(&http::Method::from_bytes(b"propfind").unwrap()),
            None
        );
    }
}
