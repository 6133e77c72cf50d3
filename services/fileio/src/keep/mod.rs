//! Trash and versions (issue 54; docs/trash-and-versions.md): what a delete removes goes
//! to a trash item, what an overwrite replaces becomes a version of its path, and both
//! are kept in kubedav's own area of the volume or bucket, per quota root.
//!
//! This module holds what both backends share: the settings ([`Keeping`]), the names of
//! items and versions, and an item's record. [`volume`] does it with renames; [`local`]
//! serves it as the [`kubedav_api::keep::Keep`] port.

pub mod flat;
pub mod local;
pub mod retain;
pub mod space;
pub mod volume;

use kubedav_api::path::VolumePath;
use kubedav_kit::clock::WallClock;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The quota root a path belongs to (its trash and versions are counted there): the
/// innermost quota root of the policy, or the whole tree (`""`).
pub type RootOf = Arc<dyn Fn(&VolumePath) -> VolumePath + Send + Sync>;

/// What is kept of deleted and replaced content, and for how long.
#[derive(Clone)]
pub struct Keeping {
    /// How long trash items are kept; `None`: no trash (a delete deletes).
    pub trash_for: Option<Duration>,
    /// Most versions kept per file; 0: no versions (an overwrite replaces).
    pub versions_max: u32,
    /// How long versions are kept.
    pub versions_for: Duration,
    /// How often the retention runs (each replica, jittered by up to a tenth); zero:
    /// never by itself (a test runs it).
    pub retain_every: Duration,
    /// The time items and versions are stamped with and aged by.
    pub clock: WallClock,
    /// The quota root of a path.
    pub root_of: RootOf,
}

impl std::fmt::Debug for Keeping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeping")
            .field("trash_for", &self.trash_for)
            .field("versions_max", &self.versions_max)
            .field("versions_for", &self.versions_for)
            .field("retain_every", &self.retain_every)
            .finish_non_exhaustive()
    }
}

impl Keeping {
    /// Trash for 30 days and 10 versions for 30 days (the defaults of
    /// `--trash-retention-days`, `--versions-max`, `--versions-retention-days`), on the
    /// system clock, every path in the whole tree's root.
    pub fn defaults() -> Self {
        Self {
            trash_for: Some(Duration::from_secs(30 * 86_400)),
            versions_max: 10,
            versions_for: Duration::from_secs(30 * 86_400),
            retain_every: Duration::from_secs(600),
            clock: kubedav_kit::clock::system(),
            root_of: Arc::new(|_| VolumePath::root()),
        }
    }

    /// Whether deletes go to the trash.
    pub fn trashes(&self) -> bool {
        self.trash_for.is_some()
    }

    /// Whether overwrites keep versions.
    pub fn versions(&self) -> bool {
        self.versions_max > 0
    }

    /// A new name for something kept now: the time in nanoseconds (20 digits, so names
    /// sort by age), a dash and `random_hex` digits of randomness.
    pub(crate) fn new_name(&self, random_hex: usize) -> (String, i64) {
        let now = kubedav_kit::clock::unix_nanos(&self.clock);
        // Unique, not secret: nothing is reached by guessing one.
        let random: String = (0..random_hex)
            .map(|_| char::from_digit(fastrand::u32(..16), 16).unwrap_or('0'))
            .collect();
        (format!("{now:020}-{random}"), now)
    }
}

/// When a kept thing was made, from its name (see [`Keeping::new_name`]).
pub fn made_at(name: &str) -> Option<i64> {
    let (time, random) = name.split_once('-')?;
    (time.len() == 20 && !random.is_empty() && random.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| time.parse().ok())
        .flatten()
}

/// A trash item's record (`item.json`), as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemRecord {
    /// Where it was deleted from.
    pub path: String,
    /// Whether it is a collection.
    pub collection: bool,
    /// When it was deleted, nanoseconds since the epoch.
    pub deleted_unix_ns: i64,
    /// Who deleted it (for admins and the audit; never decides anything).
    pub by: String,
    /// Its size when it is a file.
    pub bytes: u64,
    /// On a bucket, the deleted file's ETag: its checksums are bound to it, and are
    /// bound anew to the restored copy's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub etag: String,
}

/// A trash item as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrashItem {
    /// Its id: unique, and sorting by deletion time.
    pub id: String,
    /// The quota root it belongs to.
    pub root: VolumePath,
    /// What it was.
    pub record: ItemRecord,
}

/// A version of a file as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// Its id: unique among the file's versions, sorting by age.
    pub id: String,
    /// When it was replaced, nanoseconds since the epoch.
    pub replaced_unix_ns: i64,
    /// Its size.
    pub bytes: u64,
}

/// The folder (in kubedav's area) holding the versions of the file at `path`: the
/// reserved name `.kubedav` in the path's mirror under `versions/`, which no member of a
/// collection can be called, so a collection's mirror holds its members' versions.
pub fn versions_folder(path: &VolumePath) -> String {
    format!("{}/{}", mirror(path), kubedav_api::path::RESERVED_AREA)
}

/// The mirror of `path` under `versions/`: where the versions of it and of everything
/// beneath it are.
pub fn mirror(path: &VolumePath) -> String {
    if path.is_root() {
        "versions".to_owned()
    } else {
        format!("versions/{}", path.as_str())
    }
}

/// The folder (in kubedav's area) holding the trash items of quota root `root`.
pub fn trash_folder(root: &VolumePath) -> String {
    let area = kubedav_api::path::RESERVED_AREA;
    if root.is_root() {
        format!("trash/{area}")
    } else {
        format!("trash/{}/{area}", root.as_str())
    }
}

impl From<TrashItem> for kubedav_api::keep::TrashItem {
    fn from(item: TrashItem) -> Self {
        Self {
            id: item.id,
            root: item.root.as_str().to_owned(),
            path: item.record.path,
            collection: item.record.collection,
            deleted_unix_ns: item.record.deleted_unix_ns,
            by: item.record.by,
            bytes: item.record.bytes,
        }
    }
}

impl From<Version> for kubedav_api::keep::Version {
    fn from(version: Version) -> Self {
        Self {
            id: version.id,
            replaced_unix_ns: version.replaced_unix_ns,
            bytes: version.bytes,
        }
    }
}

/// The reason a purge asked for through the keep port is counted under.
pub fn purge_reason(asked: &str) -> &'static str {
    if asked == "admin" { "admin" } else { "user" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_time_and_say_when() {
        let mut keeping = Keeping::defaults();
        keeping.clock = Arc::new(|| std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
        let (name, at) = keeping.new_name(16);
        assert_eq!(at, 1_800_000_000_000_000_000);
        assert_eq!(made_at(&name), Some(at));
        assert_eq!(name.len(), 20 + 1 + 16);
        assert!(made_at(&name).is_some());
        for bad in [
            "",
            "x",
            "00000000000000000001-",
            "1-ab",
            "00000000000000000001-zz",
            "../x",
        ] {
            assert!(made_at(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn folders_mirror_paths_beside_their_members() {
        let path = VolumePath::parse("a/b.txt").unwrap();
        assert_eq!(versions_folder(&path), "versions/a/b.txt/.kubedav");
        assert_eq!(mirror(&VolumePath::root()), "versions");
        assert_eq!(trash_folder(&VolumePath::root()), "trash/.kubedav");
        assert_eq!(
            trash_folder(&VolumePath::parse("home/alice").unwrap()),
            "trash/home/alice/.kubedav"
        );
    }
}
