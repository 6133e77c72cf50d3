//! What a principal may do, and what links may be published.

use serde::Deserialize;

/// What a principal may do to a path, each including the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Nothing: the path does not exist for the principal.
    None,
    /// GET, HEAD, PROPFIND, and COPY from it.
    Read,
    /// Creating, overwriting, deleting, moving, PROPPATCH and locking.
    Write,
    /// Write, plus sharing and publishing links.
    Manage,
}

impl Permission {
    /// The policy's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::None => "none",
            Permission::Read => "read",
            Permission::Write => "write",
            Permission::Manage => "manage",
        }
    }
}

/// The most a public link published beneath a rule may allow (`links:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkCap {
    /// No public links.
    Off,
    /// Links that read.
    Read,
    /// Links that may add files but not read them (a drop box).
    Upload,
    /// Links that read and write.
    Write,
}
