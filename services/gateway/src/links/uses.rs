//! A link's uses and the bytes its uploads added, counted with the data so that every
//! replica holds the same limits.
//!
//! **What a use is:** a download (a GET of a file's content, whole or from its first
//! byte) or an upload (a PUT). Listings, HEAD, PROPFIND and a browser opening the
//! link's page are not uses.
//!
//! * **Slots**, for what a limit must hold exactly: every upload, and every download
//!   of a link with `max_uses`, first claims the next numbered record
//!   `links/uses/{id}/{n}` (holding the bytes it may add), written only if absent
//!   ([`kubedav_api::records::Area::create`]). Two replicas claiming the same number:
//!   one wins, the other reads the winner's and tries the next. A claim is refused when
//!   the slots already number `max_uses`, or their bytes and this upload's would pass
//!   `max_bytes`. An upload that then fails keeps its slot: a limit is never passed,
//!   though a failed upload counts.
//! * **Counts**, for downloads of links without `max_uses`: each gateway counts them in
//!   memory and writes its own total (`links/uses/{id}/g-{gateway}`) every few seconds,
//!   so a download costs nothing more than a GET.
//!
//! A link that ends (revoked, expired, or its folder moved or deleted, on any gateway)
//! leaves the links table of every gateway; each then removes its uses within
//! [`WRITE_COUNTS_EVERY`]. (On a volume the empty folder `links/uses/{id}` stays, and a
//! gateway stopped in between leaves them to whichever gateway saw the link leave too.)

use super::{LinkEntry, Links};
use kubedav_api::records::Records;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::{Code, Status};

/// How often a gateway writes its download counts.
pub const WRITE_COUNTS_EVERY: Duration = Duration::from_secs(5);

/// Why a use was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// `max_uses` are spent.
    Spent,
    /// The upload would pass `max_bytes`; this many bytes are left.
    Full {
        /// Bytes the link may still add.
        left: u64,
    },
}

/// The slots a link has, as far as this gateway knows.
#[derive(Debug, Default)]
struct Slots {
    /// Read from the records yet.
    loaded: bool,
    /// The next number to claim.
    next: u64,
    /// How many are taken.
    taken: u64,
    /// Their bytes.
    bytes: u64,
}

/// A link's uses, as the API shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    /// Uses: slots and counted downloads.
    pub uses: u64,
    /// Bytes its uploads added.
    pub bytes: u64,
}

/// The uses of every link.
pub struct Uses {
    records: Arc<dyn Records>,
    /// This gateway's name in its count records.
    gateway: String,
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slots>>>>,
    /// Downloads counted here since the start, by link id, and whether written.
    counts: Mutex<HashMap<String, (u64, bool)>>,
}

impl Uses {
    /// Uses kept in `records`.
    pub fn new(records: Arc<dyn Records>) -> Arc<Self> {
        let gateway = crate::kept::new_id().unwrap_or_else(|_| format!("{:016x}", fastrand::u64(..)));
        Arc::new(Self {
            records,
            gateway,
            slots: Mutex::new(HashMap::new()),
            counts: Mutex::new(HashMap::new()),
        })
    }

    /// Writes the download counts every [`WRITE_COUNTS_EVERY`], and removes the uses
    /// of the links that have left `links` since, in a task of the current tokio runtime.
    pub fn keep_writing(self: &Arc<Self>, links: Arc<Links>) {
        let uses = Arc::downgrade(self);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        links.take_left();
        runtime.spawn(async move {
            let mut every = tokio::time::interval(WRITE_COUNTS_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut retry = Vec::new();
            loop {
                every.tick().await;
                let Some(uses) = uses.upgrade() else { return };
                if let Err(status) = uses.write_counts().await {
                    tracing::warn!(target: "kubedav", "link download counts cannot be written: {}", status.message());
                }
                uses.forget_ended(&links, &mut retry).await;
            }
        });
    }

    /// Removes the uses of the links that left `links` (with those whose uses could
    /// not be removed last time, in `retry`).
    async fn forget_ended(&self, links: &Links, retry: &mut Vec<String>) {
        let mut ended = std::mem::take(retry);
        ended.extend(links.take_left());
        for id in ended {
            if let Err(status) = self.forget(&id).await {
                tracing::warn!(target: "kubedav", "the uses of ended link {id} cannot be removed: {}", status.message());
                retry.push(id);
            }
        }
    }

    /// Claims a use of `link` that adds `bytes` (0 for a download), when a limit must
    /// hold exactly: an upload, or any use of a link with `max_uses`. `Ok(Err(_))` when
    /// the link's limits refuse it.
    pub async fn claim(&self, link: &LinkEntry, bytes: u64) -> Result<Result<(), Refused>, Status> {
        let id = &link.link.id;
        let slots = self
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id.clone())
            .or_default()
            .clone();
        let mut slots = slots.lock().await;
        if !slots.loaded {
            *slots = self.load(id).await?;
        }
        loop {
            if link.link.max_uses.is_some_and(|max| slots.taken >= max) {
                return Ok(Err(Refused::Spent));
            }
            let left = link.link.max_bytes.saturating_sub(slots.bytes);
            if bytes > left {
                return Ok(Err(Refused::Full { left }));
            }
            let key = format!("uses/{id}/{}", slots.next);
            match self
                .records
                .put(super::RECORDS.create(&key, bytes.to_string().into_bytes()))
                .await
            {
                Ok(_) => {
                    slots.next += 1;
                    slots.taken += 1;
                    slots.bytes += bytes;
                    return Ok(Ok(()));
                }
                Err(status) if status.code() == Code::AlreadyExists => {
                    // Another replica took it: count it, and try the next.
                    let taken = self.records.get(super::RECORDS.get(&key)).await?;
                    slots.next += 1;
                    slots.taken += 1;
                    slots.bytes += parse_bytes(&taken.data);
                }
                Err(status) => return Err(status),
            }
        }
    }

    /// Counts a download of a link without `max_uses` (written within
    /// [`WRITE_COUNTS_EVERY`]).
    pub fn count(&self, link: &LinkEntry) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        match counts.get_mut(&link.link.id) {
            Some(count) => *count = (count.0 + 1, false),
            None => {
                counts.insert(link.link.id.clone(), (1, false));
            }
        }
    }

    /// A link's uses and bytes as the records hold them (with this gateway's counts not
    /// yet written).
    pub async fn counted(&self, id: &str) -> Result<Counted, Status> {
        let names = self
            .records
            .list(super::RECORDS.list(&format!("uses/{id}")))
            .await?
            .names;
        let mut counted = Counted::default();
        let own = format!("g-{}", self.gateway);
        for name in names {
            if name == own {
                continue;
            }
            let data = self
                .records
                .get(super::RECORDS.get(&format!("uses/{id}/{name}")))
                .await?
                .data;
            if name.starts_with("g-") {
                counted.uses += parse_bytes(&data);
            } else {
                counted.uses += 1;
                counted.bytes += parse_bytes(&data);
            }
        }
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counted.uses += counts.get(id).map_or(0, |(count, _)| *count);
        Ok(counted)
    }

    /// Removes the records of an ended link's uses.
    pub async fn forget(&self, id: &str) -> Result<(), Status> {
        let folder = format!("uses/{id}");
        for name in self.records.list(super::RECORDS.list(&folder)).await?.names {
            self.records
                .delete(super::RECORDS.delete(&format!("{folder}/{name}")))
                .await?;
        }
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
        Ok(())
    }

    /// The slots of link `id` as the records hold them.
    async fn load(&self, id: &str) -> Result<Slots, Status> {
        let names = self
            .records
            .list(super::RECORDS.list(&format!("uses/{id}")))
            .await?
            .names;
        let mut slots = Slots {
            loaded: true,
            ..Slots::default()
        };
        for name in names {
            let Ok(number) = name.parse::<u64>() else { continue };
            let data = self
                .records
                .get(super::RECORDS.get(&format!("uses/{id}/{name}")))
                .await?
                .data;
            slots.next = slots.next.max(number + 1);
            slots.taken += 1;
            slots.bytes += parse_bytes(&data);
        }
        Ok(slots)
    }

    /// Writes the counts changed since they were last written.
    async fn write_counts(&self) -> Result<(), Status> {
        let changed: Vec<(String, u64)> = self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, (_, written))| !written)
            .map(|(id, (count, _))| (id.clone(), *count))
            .collect();
        for (id, count) in changed {
            let key = format!("uses/{id}/g-{}", self.gateway);
            self.records
                .put(super::RECORDS.put(&key, count.to_string().into_bytes()))
                .await?;
            if let Some(entry) = self.counts.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&id)
                && entry.0 == count
            {
                entry.1 = true;
            }
        }
        Ok(())
    }
}

/// A number written as text (0 when it is not one).
fn parse_bytes(data: &[u8]) -> u64 {
    std::str::from_utf8(data)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}
