//! [`Kept`]: a set of small records that users make and end (shares, links), held in
//! memory by every gateway and kept fresh from the records port.
//!
//! * **Where they live.** Each item is a record `{area}/by-id/{id}` with the data, in the
//!   volume or the bucket, so a restart of every pod and a Redis flush keep them. A
//!   change also writes a new random `{area}/stamp`.
//! * **How a gateway knows them.** It holds every item in a table ([`Table`]) and reads
//!   the stamp every [`CHECK_EVERY`]; when the stamp differs it lists the records and
//!   reads the new ones. An item is never edited, only made or ended, so a listing is
//!   all a change costs. An item made or ended here is in this gateway's table at once;
//!   the others see it within [`CHECK_EVERY`] and a read.
//! * **Failing closed.** A table is trusted for [`TRUSTED_FOR`] after the check that
//!   confirmed it began ([`Kept::trusted`]); past that, its users must check again or
//!   refuse. So an item ended anywhere stops working everywhere within [`TRUSTED_FOR`].

use arc_swap::ArcSwap;
use kubedav_api::path::VolumePath;
use kubedav_api::records::{Area, Records};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};
use tonic::Status;

/// The time as kept items read it (expiry, creation): the system's, or a test's.
pub use kubedav_kit::clock::WallClock;

/// How often a gateway reads the stamp.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);

/// How long a table is trusted after the check that confirmed it began.
pub const TRUSTED_FOR: Duration = Duration::from_secs(1);

/// The folder of the items' records.
const FOLDER: &str = "by-id";

/// The record rewritten on every change.
const STAMP: &str = "stamp";

/// One kept item, read back from its record and checked.
pub trait Item: Send + Sync + Sized + 'static {
    /// What its record holds (JSON).
    type Stored: Serialize + DeserializeOwned;
    /// What it is, for logs ("share", "link").
    const KIND: &'static str;
    /// Checks a stored item; `None` when it does not parse (a record written by
    /// something else: ignored, never honoured).
    fn new(stored: Self::Stored) -> Option<Self>;
    /// As stored.
    fn stored(&self) -> &Self::Stored;
    /// Its id, the record's key.
    fn id(&self) -> &str;
    /// Its path.
    fn path(&self) -> &VolumePath;
    /// The user id of whoever made it.
    fn creator(&self) -> &str;
    /// Whether it has stopped working by `now` (seconds since the epoch).
    fn expired(&self, now: i64) -> bool;
}

/// Every item, with whatever indexes its users need; replaced whole on a change.
pub trait Table<I>: Default + Send + Sync + 'static {
    /// A table of `items`.
    fn new(items: Vec<Arc<I>>) -> Self;
    /// The item `id`.
    fn get(&self, id: &str) -> Option<&Arc<I>>;
    /// Every item.
    fn items(&self) -> Vec<Arc<I>>;
}

/// A kept set of items of kind `I`, in a table `T`.
pub struct Kept<I: Item, T: Table<I>> {
    records: Arc<dyn Records>,
    area: Area,
    table: ArcSwap<T>,
    /// When the last check that succeeded began; `None` before the first.
    confirmed: Mutex<Option<Instant>>,
    /// The stamp the table was read under (`Some(None)`: there was none; `None`: not
    /// read yet); held while the table changes, so a check and a change never
    /// interleave.
    stamp: tokio::sync::Mutex<Option<Option<bytes::Bytes>>>,
    clock: WallClock,
    /// Told the number of items after each change.
    counted: fn(usize),
    /// The ids of items that left the table (ended here, or gone from the records at a
    /// check) since [`Kept::take_left`] last took them; `None` while nobody asks.
    left: Mutex<Option<Vec<String>>>,
    _item: std::marker::PhantomData<I>,
}

impl<I: Item, T: Table<I>> Kept<I, T> {
    /// Items kept in `records` under `area`, on `clock`; `counted` hears how many there
    /// are (a gauge).
    pub fn new(records: Arc<dyn Records>, area: Area, clock: WallClock, counted: fn(usize)) -> Arc<Self> {
        counted(0);
        Arc::new(Self {
            records,
            area,
            table: ArcSwap::default(),
            confirmed: Mutex::new(None),
            stamp: tokio::sync::Mutex::new(None),
            clock,
            counted,
            left: Mutex::new(None),
            _item: std::marker::PhantomData,
        })
    }

    /// Checks the records every [`CHECK_EVERY`] while the set is in use, in a task of the
    /// current tokio runtime (outside one, nothing checks them: the table stays
    /// unconfirmed).
    pub fn keep_checked(self: &Arc<Self>) {
        let kept: Weak<Self> = Arc::downgrade(self);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let mut every = tokio::time::interval(CHECK_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(kept) = kept.upgrade() else { return };
                if let Err(status) = kept.check().await {
                    tracing::warn!(target: "kubedav", "{}s cannot be read: {}", I::KIND, status.message());
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
    pub fn trusted(&self) -> Option<Arc<T>> {
        let confirmed = *self.confirmed.lock().unwrap_or_else(|e| e.into_inner());
        confirmed
            .is_some_and(|at| at.elapsed() < TRUSTED_FOR)
            .then(|| self.table.load_full())
    }

    /// The table as it is, trusted or not (what an API call lists, after a check).
    pub fn table(&self) -> Arc<T> {
        self.table.load_full()
    }

    /// Reads the stamp and, when it changed, the items made or ended since.
    pub async fn check(&self) -> Result<(), Status> {
        self.check_since(None).await
    }

    /// Checks the records unless a check that began at or after `since` confirmed the
    /// table (requests waiting for a check at the same time share one).
    pub async fn check_since(&self, since: Option<Instant>) -> Result<(), Status> {
        let mut known = self.stamp.lock().await;
        let confirmed = *self.confirmed.lock().unwrap_or_else(|e| e.into_inner());
        if since.is_some_and(|since| confirmed.is_some_and(|at| at >= since)) {
            return Ok(());
        }
        let began = Instant::now();
        let stamp = self.records.get(self.area.get(STAMP)).await?;
        let stamp = stamp.found.then_some(stamp.data);
        if known.as_ref() == Some(&stamp) {
            self.confirm(began);
            drop(known);
            // Items expire without a change to the records: swept at any check.
            self.sweep().await;
            return Ok(());
        }
        let names = self.records.list(self.area.list(FOLDER)).await?.names;
        let table = self.table.load_full();
        let mut items = Vec::with_capacity(names.len());
        for name in names {
            if let Some(kept) = table.get(&name) {
                items.push(kept.clone());
                continue;
            }
            let key = format!("{FOLDER}/{name}");
            let record = self.records.get(self.area.get(&key)).await?;
            let parsed = record
                .found
                .then(|| serde_json::from_slice::<I::Stored>(&record.data).ok())
                .flatten()
                .and_then(I::new)
                .filter(|item| item.id() == name);
            match parsed {
                Some(item) => items.push(Arc::new(item)),
                None if record.found => {
                    tracing::warn!(target: "kubedav", "the record {}/{key} cannot be read as a {}: ignored", self.area.0, I::KIND)
                }
                None => {}
            }
        }
        self.store(T::new(items));
        *known = Some(stamp);
        self.confirm(began);
        drop(known);
        self.sweep().await;
        Ok(())
    }

    /// Makes `item`: its record, then a new stamp; refused when its creator already
    /// made `most` (counted under the lock, so two makers cannot both pass the limit on
    /// one gateway).
    pub async fn create(&self, item: I, most: usize) -> Result<Arc<I>, Status> {
        let item = Arc::new(item);
        let _known = self.stamp.lock().await;
        let made = self
            .table
            .load()
            .items()
            .iter()
            .filter(|kept| kept.creator() == item.creator())
            .count();
        if made >= most {
            return Err(Status::resource_exhausted(format!(
                "you have made {most} {}s, the most one user may: end some first",
                I::KIND
            )));
        }
        let data = serde_json::to_vec(item.stored()).map_err(|e| Status::internal(e.to_string()))?;
        self.records
            .put(self.area.put(&format!("{FOLDER}/{}", item.id()), data))
            .await?;
        self.restamp().await?;
        let mut items = self.table.load().items();
        items.push(item.clone());
        self.store(T::new(items));
        Ok(item)
    }

    /// Ends the items `ids` (by `by`, for the audit line, because of `why`): their
    /// records, then a new stamp.
    pub async fn end(&self, ids: &[String], by: &str, why: &str) -> Result<(), Status> {
        let _known = self.stamp.lock().await;
        for id in ids {
            self.records
                .delete(self.area.delete(&format!("{FOLDER}/{id}")))
                .await?;
            tracing::info!(target: kubedav_kit::telemetry::AUDIT, user = by, kind = I::KIND, id, why, "ended");
        }
        self.restamp().await?;
        let items = self
            .table
            .load()
            .items()
            .into_iter()
            .filter(|item| !ids.iter().any(|id| id == item.id()))
            .collect();
        self.store(T::new(items));
        Ok(())
    }

    /// Ends every item of `path` or of a path beneath it, as `path` is moved or deleted
    /// by `by`; `true` when there were some, and the caller then waits
    /// [`TRUSTED_FOR`] before the move or delete, so that no gateway honours them once
    /// the name is free.
    pub async fn end_beneath(&self, path: &VolumePath, by: &str) -> Result<bool, Status> {
        // The items as the records hold them now, not as this gateway last read them.
        self.check_since(Some(Instant::now())).await?;
        let ids: Vec<String> = self
            .table
            .load()
            .items()
            .iter()
            .filter(|item| within(item.path(), path))
            .map(|item| item.id().to_owned())
            .collect();
        if ids.is_empty() {
            return Ok(false);
        }
        self.end(&ids, by, "its path was moved or deleted").await?;
        Ok(true)
    }

    /// Removes the records of items that have expired.
    async fn sweep(&self) {
        let now = self.now();
        let expired: Vec<String> = self
            .table
            .load()
            .items()
            .iter()
            .filter(|item| item.expired(now))
            .map(|item| item.id().to_owned())
            .collect();
        if !expired.is_empty()
            && let Err(status) = self.end(&expired, "", "it expired").await
        {
            tracing::warn!(target: "kubedav", "expired {}s cannot be removed: {}", I::KIND, status.message());
        }
    }

    /// Writes a new random stamp, which tells every gateway to read the items again.
    /// Leaves the known stamp as it was: another gateway's change may have come
    /// between, and this gateway's next check then reads it.
    async fn restamp(&self) -> Result<(), Status> {
        self.records
            .put(self.area.put(STAMP, random_bytes::<16>()?.to_vec()))
            .await?;
        Ok(())
    }

    /// The ids of the items that left the table since the last call (the first call
    /// starts the count): whatever else is kept for an item can then go with it.
    pub fn take_left(&self) -> Vec<String> {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        left.replace(Vec::new()).unwrap_or_default()
    }

    fn store(&self, table: T) {
        let items = table.items();
        (self.counted)(items.len());
        let old = self.table.swap(Arc::new(table));
        if let Some(left) = self.left.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            let now: std::collections::HashSet<&str> = items.iter().map(|item| item.id()).collect();
            left.extend(
                old.items()
                    .iter()
                    .filter(|item| !now.contains(item.id()))
                    .map(|item| item.id().to_owned()),
            );
        }
    }

    fn confirm(&self, began: Instant) {
        *self.confirmed.lock().unwrap_or_else(|e| e.into_inner()) = Some(began);
    }
}

/// `N` random bytes.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], Status> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| Status::internal(format!("no randomness: {e}")))?;
    Ok(bytes)
}

/// A new id: 16 random bytes, hex.
pub fn new_id() -> Result<String, Status> {
    Ok(random_bytes::<16>()?.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `path` is `root` or lies beneath it.
pub fn within(path: &VolumePath, root: &VolumePath) -> bool {
    root.is_root()
        || path.as_str() == root.as_str()
        || path
            .as_str()
            .strip_prefix(root.as_str())
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Ends the items of `kept` at `path` and beneath, before `path` is moved or deleted by
/// `by`; whether there were some (the caller then waits [`TRUSTED_FOR`]).
pub async fn end_before_removing<I: Item, T: Table<I>>(
    kept: Option<&Arc<Kept<I, T>>>,
    path: &VolumePath,
    by: &str,
) -> Result<bool, Status> {
    match kept {
        Some(kept) => kept.end_beneath(path, by).await,
        None => Ok(false),
    }
}
