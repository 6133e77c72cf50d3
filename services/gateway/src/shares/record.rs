//! [`Share`]: one share as it is kept, a record of the `shares` area.

use crate::kept::within;
use kubedav_api::path::VolumePath;
use kubedav_policy::{Grantee, Permission};
use serde::{Deserialize, Serialize};

/// What a share lets its recipient do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shared {
    /// GET, HEAD, PROPFIND and COPY from it.
    Read,
    /// Everything a policy's `write` allows.
    Write,
}

impl Shared {
    /// Reads the API's `"read"` or `"write"`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "read" => Some(Shared::Read),
            "write" => Some(Shared::Write),
            _ => None,
        }
    }

    /// The policy's permission of the same name.
    pub fn permission(self) -> Permission {
        match self {
            Shared::Read => Permission::Read,
            Shared::Write => Permission::Write,
        }
    }

    /// The API's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Shared::Read => "read",
            Shared::Write => "write",
        }
    }
}

/// One share as stored: who gave what to whom, until when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// Its id (the record's key and the API's `{id}`).
    pub id: String,
    /// The shared path (a volume path, without the leading `/`).
    pub path: String,
    /// `user:ID` or `group:NAME`.
    pub to: String,
    /// What the recipient may do there.
    pub permission: Shared,
    /// The user id of whoever made it.
    pub creator: String,
    /// The groups the creator's credential claimed when it was made: what the policy
    /// takes the creator to be in, besides its own `groups:`, when it decides whether
    /// the creator still manages the path.
    #[serde(default)]
    pub creator_groups: Vec<String>,
    /// When it was made, in seconds since the epoch.
    pub created: i64,
    /// When it stops working, in seconds since the epoch.
    #[serde(default)]
    pub expires_at: Option<i64>,
    /// Whether the path was a collection when it was shared (for its link).
    #[serde(default)]
    pub collection: bool,
}

/// A share read back and checked: its path and recipient parsed once.
#[derive(Debug)]
pub struct ShareEntry {
    /// The share as stored.
    pub share: Share,
    /// Its path.
    pub path: VolumePath,
    /// Its recipient.
    pub to: Grantee,
}

impl ShareEntry {
    /// Checks a stored share; `None` when its path or recipient does not parse (a
    /// record written by something else: ignored, never honoured).
    pub fn new(share: Share) -> Option<Self> {
        let path = VolumePath::parse(&share.path).ok()?;
        let to = match Grantee::parse(&share.to)? {
            Grantee::Anyone => return None,
            to => to,
        };
        Some(Self { share, path, to })
    }

    /// Whether it has stopped working by `now` (seconds since the epoch).
    pub fn expired(&self, now: i64) -> bool {
        self.share.expires_at.is_some_and(|at| at <= now)
    }

    /// Whether `path` is the shared path or lies beneath it.
    pub fn covers(&self, path: &VolumePath) -> bool {
        within(path, &self.path)
    }

    /// Whether the shared path lies strictly beneath `path`: `path` is on the way to it.
    pub fn lies_beneath(&self, path: &VolumePath) -> bool {
        self.path != *path && within(&self.path, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, to: &str) -> Option<ShareEntry> {
        ShareEntry::new(Share {
            id: "s1".into(),
            path: path.into(),
            to: to.into(),
            permission: Shared::Read,
            creator: "alice".into(),
            creator_groups: Vec::new(),
            created: 0,
            expires_at: Some(100),
            collection: true,
        })
    }

    #[test]
    fn a_share_covers_its_path_and_what_lies_beneath() {
        let share = entry("home/alice/project", "user:bob").unwrap();
        let path = |p: &str| VolumePath::parse(p).unwrap();
        assert!(share.covers(&path("home/alice/project")));
        assert!(share.covers(&path("home/alice/project/a/b.txt")));
        for outside in [
            "home/alice/projects",
            "home/alice",
            "home",
            "",
            "home/bob/project",
        ] {
            assert!(!share.covers(&path(outside)), "{outside}");
        }
        assert!(share.lies_beneath(&path("home/alice")));
        assert!(share.lies_beneath(&path("")));
        assert!(!share.lies_beneath(&path("home/alice/project")));
        assert!(!share.lies_beneath(&path("home/alice/pro")));
        assert!(!share.expired(99) && share.expired(100));
    }

    #[test]
    fn only_users_and_groups_receive_shares() {
        assert!(entry("a", "group:staff").is_some());
        for bad in ["*", "bob", "team:x"] {
            assert!(entry("a", bad).is_none(), "{bad}");
        }
        assert!(entry("../a", "user:bob").is_none());
    }
}
