//! Shares: a user who manages a path grants `read` or `write` on it to another user or
//! to a group (issue 53). The access check ([`crate::access`]) adds what a share gives
//! to what the policy gives; this module keeps the shares.
//!
//! * **Where they live.** Each share is a record (`shares/by-id/{id}`) with the data, in
//!   the volume or the bucket, so every pod's restart and a Redis flush keep them. A
//!   change also writes a new random `shares/stamp`.
//! * **How a gateway knows them.** It holds every share in memory ([`ShareTable`]) and
//!   reads the stamp every [`CHECK_EVERY`]; when the stamp differs it lists the records
//!   and reads the new ones. A share is never edited, only made or ended, so a listing
//!   is all a change costs. A share made or ended here is in this gateway's table at
//!   once; the others see it within [`CHECK_EVERY`] and a read.
//! * **Failing closed.** A table is trusted for [`TRUSTED_FOR`] after the check that
//!   confirmed it began. Past that (the records cannot be read) nothing a share alone
//!   gives is allowed: the request gets 503. So a share ended anywhere is refused
//!   everywhere within [`TRUSTED_FOR`].
//! * **Moves and deletes end the shares of what they take away** ([`Shares::end_beneath`]):
//!   the shared path's records are removed first, and the move or delete waits
//!   [`TRUSTED_FOR`] before it runs, so no gateway still honours a share once something
//!   else can take the old name.

pub mod record;
pub mod table;

pub use record::{Share, ShareEntry, Shared};
pub use table::ShareTable;

use arc_swap::ArcSwap;
use kubedav_api::path::VolumePath;
use kubedav_api::records::{Area, Records};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};
use tonic::Status;

/// The time as shares read it (expiry, creation): the system's, or a test's.
pub type WallClock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// How often a gateway reads the stamp.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);

/// How long a table is trusted after the check that confirmed it began.
pub const TRUSTED_FOR: Duration = Duration::from_secs(1);

/// Most shares one user may make.
pub const MAX_PER_CREATOR: usize = 1000;

/// The records area.
const RECORDS: Area = Area("shares");

/// The folder of the shares' records.
const FOLDER: &str = "by-id";

/// The record rewritten on every change.
const STAMP: &str = "stamp";

/// Every share, kept fresh from the records.
pub struct Shares {
    records: Arc<dyn Records>,
    table: ArcSwap<ShareTable>,
    /// When the last check that succeeded began; `None` before the first.
    confirmed: Mutex<Option<Instant>>,
    /// The stamp the table was read under (`Some(None)`: there was none; `None`: not
    /// read yet); held while the table changes, so a check and a change never
    /// interleave.
    stamp: tokio::sync::Mutex<Option<Option<bytes::Bytes>>>,
    clock: WallClock,
}

impl std::fmt::Debug for Shares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shares")
            .field("count", &self.table.load().len())
            .finish_non_exhaustive()
    }
}

impl Shares {
    /// Shares kept in `records`, on `clock`.
    pub fn new(records: Arc<dyn Records>, clock: WallClock) -> Arc<Self> {
        metrics::active(0);
        Arc::new(Self {
            records,
            table: ArcSwap::default(),
            confirmed: Mutex::new(None),
            stamp: tokio::sync::Mutex::new(None),
            clock,
        })
    }

    /// Checks the records every [`CHECK_EVERY`] while the shares are in use, in a task
    /// of the current tokio runtime (outside one, nothing checks them: every share
    /// stays unconfirmed).
    pub fn keep_checked(self: &Arc<Self>) {
        let shares: Weak<Self> = Arc::downgrade(self);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let mut every = tokio::time::interval(CHECK_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(shares) = shares.upgrade() else { return };
                if let Err(status) = shares.check().await {
                    tracing::warn!(target: "kubedav", "shares cannot be read: {}", status.message());
                }
            }
        });
    }

    /// Seconds since the epoch.
    pub fn now(&self) -> i64 {
        (self.clock)()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    }

    /// The table, if it was confirmed within [`TRUSTED_FOR`].
    pub fn trusted(&self) -> Option<Arc<ShareTable>> {
        let confirmed = *self.confirmed.lock().unwrap_or_else(|e| e.into_inner());
        confirmed
            .is_some_and(|at| at.elapsed() < TRUSTED_FOR)
            .then(|| self.table.load_full())
    }

    /// The table as it is, trusted or not (what an API call lists, after a check).
    pub fn table(&self) -> Arc<ShareTable> {
        self.table.load_full()
    }

    /// Reads the stamp and, when it changed, the shares made or ended since.
    pub async fn check(&self) -> Result<(), Status> {
        self.check_since(None).await
    }

    /// Checks the records unless a check that began at or after `since` confirmed the
    /// table (requests waiting for a check at the same time share one).
    async fn check_since(&self, since: Option<Instant>) -> Result<(), Status> {
        let mut known = self.stamp.lock().await;
        let confirmed = *self.confirmed.lock().unwrap_or_else(|e| e.into_inner());
        if since.is_some_and(|since| confirmed.is_some_and(|at| at >= since)) {
            return Ok(());
        }
        let began = Instant::now();
        let stamp = self.records.get(RECORDS.get(STAMP)).await?;
        let stamp = stamp.found.then_some(stamp.data);
        if known.as_ref() == Some(&stamp) {
            self.confirm(began);
            return Ok(());
        }
        let names = self.records.list(RECORDS.list(FOLDER)).await?.names;
        let table = self.table.load_full();
        let mut entries = Vec::with_capacity(names.len());
        for name in names {
            if let Some(kept) = table.get(&name) {
                entries.push(kept.clone());
                continue;
            }
            let key = format!("{FOLDER}/{name}");
            let record = self.records.get(RECORDS.get(&key)).await?;
            let parsed = record
                .found
                .then(|| serde_json::from_slice::<Share>(&record.data).ok())
                .flatten()
                .filter(|share| share.id == name)
                .and_then(ShareEntry::new);
            match parsed {
                Some(entry) => entries.push(Arc::new(entry)),
                None if record.found => {
                    tracing::warn!(target: "kubedav", "the share record {key} cannot be read as a share: ignored")
                }
                None => {}
            }
        }
        self.store(ShareTable::new(entries));
        *known = Some(stamp);
        self.confirm(began);
        drop(known);
        self.sweep().await;
        Ok(())
    }

    /// Makes `share`: its record, then a new stamp.
    pub async fn create(&self, share: Share) -> Result<Arc<ShareEntry>, Status> {
        let entry =
            Arc::new(ShareEntry::new(share.clone()).ok_or_else(|| Status::invalid_argument("not a share"))?);
        let _known = self.stamp.lock().await;
        let made = self
            .table
            .load()
            .iter()
            .filter(|e| e.share.creator == share.creator)
            .count();
        if made >= MAX_PER_CREATOR {
            return Err(Status::resource_exhausted(format!(
                "you have made {MAX_PER_CREATOR} shares, the most one user may: end some first"
            )));
        }
        let data = serde_json::to_vec(&share).map_err(|e| Status::internal(e.to_string()))?;
        self.records
            .put(RECORDS.put(&format!("{FOLDER}/{}", share.id), data))
            .await?;
        self.restamp().await?;
        self.store(self.table.load().with(entry.clone()));
        tracing::info!(
            target: kubedav_kit::telemetry::AUDIT,
            user = share.creator,
            share = share.id,
            path = %entry.path,
            to = share.to,
            permission = share.permission.as_str(),
            "share made"
        );
        Ok(entry)
    }

    /// Ends the shares `ids` (by `by`, for the audit line): their records, then a new
    /// stamp.
    pub async fn end(&self, ids: &[String], by: &str, why: &str) -> Result<(), Status> {
        let _known = self.stamp.lock().await;
        for id in ids {
            self.records
                .delete(RECORDS.delete(&format!("{FOLDER}/{id}")))
                .await?;
            tracing::info!(target: kubedav_kit::telemetry::AUDIT, user = by, share = id, why, "share ended");
        }
        self.restamp().await?;
        self.store(self.table.load().without(ids));
        Ok(())
    }

    /// Ends every share of `path` or of a path beneath it, as `path` is moved or
    /// deleted by `by`; `true` when there were some, and the caller then waits
    /// [`TRUSTED_FOR`] before the move or delete, so that no gateway honours them once
    /// the name is free.
    pub async fn end_beneath(&self, path: &VolumePath, by: &str) -> Result<bool, Status> {
        // The shares as the records hold them now, not as this gateway last read them.
        self.check_since(Some(Instant::now())).await?;
        let ids: Vec<String> = self
            .table
            .load()
            .iter()
            .filter(|entry| record::within(&entry.path, path))
            .map(|entry| entry.share.id.clone())
            .collect();
        if ids.is_empty() {
            return Ok(false);
        }
        self.end(&ids, by, "its path was moved or deleted").await?;
        Ok(true)
    }

    /// Removes the records of shares that have expired.
    async fn sweep(&self) {
        let now = self.now();
        let expired: Vec<String> = self
            .table
            .load()
            .iter()
            .filter(|entry| entry.expired(now))
            .map(|entry| entry.share.id.clone())
            .collect();
        if !expired.is_empty()
            && let Err(status) = self.end(&expired, "", "it expired").await
        {
            tracing::warn!(target: "kubedav", "expired shares cannot be removed: {}", status.message());
        }
    }

    /// Writes a new random stamp, which tells every gateway to read the shares again.
    /// Leaves the known stamp as it was: another gateway's change may have come
    /// between, and this gateway's next check then reads it.
    async fn restamp(&self) -> Result<(), Status> {
        let mut stamp = [0u8; 16];
        getrandom::fill(&mut stamp).map_err(|e| Status::internal(format!("no randomness: {e}")))?;
        self.records.put(RECORDS.put(STAMP, stamp.to_vec())).await?;
        Ok(())
    }

    fn store(&self, table: ShareTable) {
        metrics::active(table.len());
        self.table.store(Arc::new(table));
    }

    fn confirm(&self, began: Instant) {
        *self.confirmed.lock().unwrap_or_else(|e| e.into_inner()) = Some(began);
    }
}

/// A new share id: 16 random bytes, hex.
pub fn new_id() -> Result<String, Status> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| Status::internal(format!("no randomness: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

mod metrics {
    use kubedav_metrics::Gauge;
    use std::sync::LazyLock;

    static ACTIVE: LazyLock<Gauge> = LazyLock::new(|| {
        kubedav_metrics::gauge(
            "kubedav_shares_active",
            "Shares this gateway knows of, expired ones not yet swept included.",
        )
    });

    /// Sets the number of shares.
    pub(super) fn active(count: usize) {
        ACTIVE.set(count as i64);
    }
}

/// Ends the shares of `path` and of what lies beneath it before `path` is moved or
/// deleted by `by`, and waits until no gateway honours them any more.
pub async fn end_before_removing(
    gateway: &crate::Gateway,
    path: &VolumePath,
    by: &str,
) -> Result<(), crate::http::errors::HttpError> {
    let Some(shares) = &gateway.shares else {
        return Ok(());
    };
    if shares.end_beneath(path, by).await? {
        tokio::time::sleep(TRUSTED_FOR).await;
    }
    Ok(())
}
