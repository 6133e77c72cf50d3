//! What is kept in a bucket, over time and under pressure: the retention
//! ([`BucketKeeper::retain`], every 10 minutes on each replica, jittered) finishes the
//! deletions a crash cut short, removes items left without their record for an hour,
//! and removes trash items and versions past their days; [`BucketKeeper::make_room`]
//! removes the oldest when a quota root is full; [`BucketKeeper::kept_things`] is what
//! the quotas count. All of it from one listing of the trash and one of the versions.

use super::BucketKeeper;
use super::trash::{JOURNAL, RECORD, STALE_NS};
use crate::keep::made_at;
use crate::keep::retain::Retained;
use crate::metrics::KeptFigures;
use crate::objects::tree::delete_under;
use kubedav_api::path::{RESERVED_AREA, VolumePath};
use std::collections::BTreeMap;
use tonic::Status;

/// Something kept, as the quotas count it and the retention ages it.
#[derive(Clone, Debug)]
pub struct KeptObject {
    /// The path whose quota roots it counts against (an item: its root; a version: its
    /// file).
    pub counts_at: VolumePath,
    /// When it was kept, nanoseconds since the epoch.
    pub kept_unix_ns: i64,
    /// Its bytes (an item: its entry and its versions).
    pub bytes: u64,
    what: Thing,
}

#[derive(Clone, Debug)]
enum Thing {
    /// A trash item: its prefix, whether it has its record, whether a journal is left.
    Item {
        prefix: String,
        whole: bool,
        journal: bool,
    },
    /// A version: its key.
    Version { key: String },
}

impl BucketKeeper {
    /// Everything kept beneath `within` (the whole prefix for the root): trash items of
    /// the quota roots at or beneath it, whole or not, and versions of files at or
    /// beneath it.
    pub async fn kept_things(&self, within: &VolumePath) -> Result<Vec<KeptObject>, Status> {
        let below = |top: &str| {
            if within.is_root() {
                format!("{}{top}/", self.area())
            } else {
                format!("{}{top}/{}/", self.area(), within.as_str())
            }
        };
        let trash_top = format!("{}trash/", self.area());
        let mut items: BTreeMap<(String, String), KeptObject> = BTreeMap::new();
        self.each_key(&below("trash"), |key, size| {
            let Some((root, id, rest)) = item_of(&key[trash_top.len()..]) else {
                return;
            };
            let Ok(counts_at) = VolumePath::parse(root) else {
                return;
            };
            let prefix = format!("{trash_top}{}{id}/", root_folder(root));
            let entry = items
                .entry((root.to_owned(), id.to_owned()))
                .or_insert_with(|| KeptObject {
                    counts_at,
                    kept_unix_ns: made_at(id).unwrap_or_default(),
                    bytes: 0,
                    what: Thing::Item {
                        prefix,
                        whole: false,
                        journal: false,
                    },
                });
            if let Thing::Item { whole, journal, .. } = &mut entry.what {
                *whole |= rest == RECORD;
                *journal |= rest == JOURNAL;
            }
            if rest.starts_with("entry") || rest.starts_with("versions/") {
                entry.bytes += size;
            }
        })
        .await?;
        let versions_top = format!("{}versions/", self.area());
        let mut things: Vec<KeptObject> = items.into_values().collect();
        self.each_key(&below("versions"), |key, size| {
            let Some((file, id)) = key[versions_top.len()..].rsplit_once(&format!("/{RESERVED_AREA}/"))
            else {
                return;
            };
            let (Ok(counts_at), Some(kept)) = (VolumePath::parse(file), made_at(id)) else {
                return;
            };
            things.push(KeptObject {
                counts_at,
                kept_unix_ns: kept,
                bytes: size,
                what: Thing::Version { key },
            });
        })
        .await?;
        Ok(things)
    }

    /// What `things` keep beneath each quota root: trash items (whole ones) by their
    /// root, versions by their file's root.
    fn figures(&self, things: &[KeptObject]) -> BTreeMap<String, KeptFigures> {
        let mut by_root: BTreeMap<String, KeptFigures> = BTreeMap::new();
        for thing in things {
            match &thing.what {
                Thing::Item { whole: true, .. } => {
                    let figures = by_root.entry(thing.counts_at.as_str().to_owned()).or_default();
                    figures.items += 1;
                    figures.item_bytes += thing.bytes;
                }
                Thing::Item { .. } => {}
                Thing::Version { .. } => {
                    let root = (self.keeping.root_of)(&thing.counts_at);
                    let figures = by_root.entry(root.as_str().to_owned()).or_default();
                    figures.versions += 1;
                    figures.version_bytes += thing.bytes;
                }
            }
        }
        by_root
    }

    /// Calls `each` with every key below `prefix` and its size.
    async fn each_key(&self, prefix: &str, mut each: impl FnMut(String, u64)) -> Result<(), Status> {
        let mut from = None;
        loop {
            let page = self.s3.list_all(prefix, from.as_deref()).await?;
            for object in page.objects {
                each(object.key, object.size);
            }
            match page.next {
                Some(next) => from = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// One retention pass on `keeping`'s clock: deletions a crash cut short finished,
    /// items left without a record for an hour removed, and trash items and versions
    /// past their days removed, each item by the replica that claims it.
    pub async fn retain(&self) -> Result<Retained, Status> {
        let now = kubedav_kit::clock::unix_nanos(&self.keeping.clock);
        let before = |keep_for: std::time::Duration| {
            now.saturating_sub(i64::try_from(keep_for.as_nanos()).unwrap_or(i64::MAX))
        };
        let mut retained = Retained::default();
        let things = self.kept_things(&VolumePath::root()).await?;
        // The figures of what the pass leaves.
        let mut left = Vec::with_capacity(things.len());
        for thing in things {
            match &thing.what {
                Thing::Item {
                    prefix,
                    whole,
                    journal,
                } => {
                    if *journal && *whole {
                        self.finish_journal(prefix).await?;
                    }
                    if !whole && thing.kept_unix_ns < now - STALE_NS {
                        delete_under(&self.s3, &self.keys, prefix).await?;
                    } else if *whole
                        && let Some(trash_for) = self.keeping.trash_for
                        && thing.kept_unix_ns < before(trash_for)
                        && self.claim(prefix).await?
                    {
                        self.remove_item(prefix).await?;
                        retained.items += 1;
                        continue;
                    }
                }
                Thing::Version { key } => {
                    if self.keeping.versions() && thing.kept_unix_ns < before(self.keeping.versions_for) {
                        // S3's DELETE answers alike whether the key was there, so two
                        // replicas' passes at once may both count this version.
                        self.s3.delete(key).await?;
                        retained.versions += 1;
                        continue;
                    }
                }
            }
            left.push(thing);
        }
        crate::metrics::kept(&self.figures(&left));
        Ok(retained)
    }

    /// Runs [`BucketKeeper::retain`] at once (deletions a crash cut short are finished
    /// as the replica starts), then every `keeping.retain_every` (jittered), for as long
    /// as the process runs; never with a zero period (the caller runs it).
    pub fn retain_in_background(self) {
        if self.keeping.retain_every.is_zero() {
            return;
        }
        tokio::spawn(async move {
            let mut first = true;
            loop {
                if !std::mem::take(&mut first) {
                    let jitter = self.keeping.retain_every.mul_f64(fastrand::f64() / 10.0);
                    tokio::time::sleep(self.keeping.retain_every + jitter).await;
                }
                crate::keep::retain::report(self.retain().await);
            }
        });
    }

    /// Removes the oldest things kept beneath `root` until `need` bytes are freed or
    /// nothing is left; the bytes freed and how many things went.
    pub async fn make_room(&self, root: &VolumePath, need: u64) -> Result<(u64, u64), Status> {
        let mut things: Vec<KeptObject> = self
            .kept_things(root)
            .await?
            .into_iter()
            .filter(|thing| !matches!(thing.what, Thing::Item { whole: false, .. }))
            .collect();
        things.sort_by_key(|thing| thing.kept_unix_ns);
        let (mut freed, mut removed) = (0u64, 0u64);
        for thing in things {
            if freed >= need {
                break;
            }
            match &thing.what {
                Thing::Item { prefix, .. } => {
                    if !self.claim(prefix).await? {
                        continue;
                    }
                    self.remove_item(prefix).await?;
                }
                Thing::Version { key } => self.s3.delete(key).await?,
            }
            freed = freed.saturating_add(thing.bytes);
            removed += 1;
        }
        Ok((freed, removed))
    }
}

/// The folder of a root's items below `trash/`: `.kubedav/` for the whole tree's,
/// `{root}/.kubedav/` for another.
fn root_folder(root: &str) -> String {
    if root.is_empty() {
        format!("{RESERVED_AREA}/")
    } else {
        format!("{root}/{RESERVED_AREA}/")
    }
}

/// A key below `trash/` as (root, item id, the rest): the first reserved segment ends
/// the root (no client path holds one), the item's versions mirror holds more.
fn item_of(below_trash: &str) -> Option<(&str, &str, &str)> {
    let area = format!("{RESERVED_AREA}/");
    let (root, after) = match below_trash.strip_prefix(&area) {
        Some(after) => ("", after),
        None => below_trash.split_once(&format!("/{area}"))?,
    };
    let (id, rest) = after.split_once('/')?;
    made_at(id).map(|_| (root, id, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_item() {
        let id = "01764329280123456789-0123456789abcdef";
        assert_eq!(
            item_of(&format!(".kubedav/{id}/item.json")),
            Some(("", id, "item.json"))
        );
        assert_eq!(
            item_of(&format!("home/alice/.kubedav/{id}/versions/a/.kubedav/x")),
            Some(("home/alice", id, "versions/a/.kubedav/x"))
        );
        assert_eq!(item_of(&format!(".kubedav-purging/{id}/x")), None);
        assert_eq!(item_of("home/.kubedav/not-an-id/x"), None);
    }
}
