//! [`Link`]: one public link as it is kept, a record of the `links` area.

use crate::kept::within;
use kubedav_api::path::VolumePath;
use kubedav_policy::LinkCap;
use serde::{Deserialize, Serialize};

/// What a link lets anyone holding it do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// Read: GET, HEAD, PROPFIND (list and download).
    Read,
    /// A drop box: PUT and MKCOL of new names only; nothing is listed, read or
    /// overwritten (a PUT of a name already there is stored under a new name).
    Upload,
    /// Read and write, as a policy's `write` allows.
    Write,
}

impl LinkKind {
    /// Reads the API's `"read"`, `"upload"` or `"write"`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "read" => Some(LinkKind::Read),
            "upload" => Some(LinkKind::Upload),
            "write" => Some(LinkKind::Write),
            _ => None,
        }
    }

    /// The API's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Read => "read",
            LinkKind::Upload => "upload",
            LinkKind::Write => "write",
        }
    }

    /// Whether a `links:` cap of `cap` allows it.
    pub fn allowed_by(self, cap: LinkCap) -> bool {
        let needed = match self {
            LinkKind::Read => LinkCap::Read,
            LinkKind::Upload => LinkCap::Upload,
            LinkKind::Write => LinkCap::Write,
        };
        // Upload links add files without reading them; a read cap does not allow them,
        // nor does an upload cap allow reading ones: write allows both.
        match (needed, cap) {
            (_, LinkCap::Off) => false,
            (LinkCap::Read, LinkCap::Upload) => false,
            (needed, cap) => needed <= cap,
        }
    }
}

/// One link as stored: no token and no password, only their hashes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// Its id (the record's key and the API's `{id}`); not the token.
    pub id: String,
    /// SHA-256 of the token, hex: how a request's token finds it.
    pub token_hash: String,
    /// The path it opens (a volume path, without the leading `/`).
    pub path: String,
    /// What it allows.
    pub permission: LinkKind,
    /// The user id of whoever made it.
    pub creator: String,
    /// The groups the creator's credential claimed when it was made.
    #[serde(default)]
    pub creator_groups: Vec<String>,
    /// When it was made, in seconds since the epoch.
    pub created: i64,
    /// When it stops working, in seconds since the epoch.
    #[serde(default)]
    pub expires_at: Option<i64>,
    /// Most uses (downloads and uploads) it allows.
    #[serde(default)]
    pub max_uses: Option<u64>,
    /// Most bytes its uploads may add, all together.
    pub max_bytes: u64,
    /// The password's SHA-512 crypt hash, if it has one.
    #[serde(default)]
    pub password: Option<String>,
    /// Whether the path was a collection when it was published.
    #[serde(default)]
    pub collection: bool,
}

/// A link read back and checked.
#[derive(Debug)]
pub struct LinkEntry {
    /// The link as stored.
    pub link: Link,
    /// Its path.
    pub path: VolumePath,
}

impl LinkEntry {
    /// Checks a stored link; `None` when its path or hash does not parse.
    pub fn new(link: Link) -> Option<Self> {
        let path = VolumePath::parse(&link.path).ok()?;
        let hash_ok = link.token_hash.len() == 64 && link.token_hash.bytes().all(|b| b.is_ascii_hexdigit());
        hash_ok.then_some(Self { link, path })
    }

    /// Whether it has stopped working by `now` (seconds since the epoch).
    pub fn expired(&self, now: i64) -> bool {
        self.link.expires_at.is_some_and(|at| at <= now)
    }

    /// Whether `path` is the link's path or lies beneath it.
    pub fn covers(&self, path: &VolumePath) -> bool {
        within(path, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_allows_what_it_names_and_no_more() {
        use LinkCap::*;
        let allowed = |kind: LinkKind| [Off, Read, Upload, Write].map(|cap| kind.allowed_by(cap));
        assert_eq!(allowed(LinkKind::Read), [false, true, false, true]);
        assert_eq!(allowed(LinkKind::Upload), [false, false, true, true]);
        assert_eq!(allowed(LinkKind::Write), [false, false, false, true]);
    }
}
