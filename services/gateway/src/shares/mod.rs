//! Shares: a user who manages a path grants `read` or `write` on it to another user or
//! to a group (issue 53). The access check ([`crate::access`]) adds what a share gives
//! to what the policy gives; this module keeps the shares, as records kept fresh on
//! every gateway ([`crate::kept`]: `shares/by-id/{id}`, read within a quarter second of
//! a change, trusted for a second).
//!
//! * **Failing closed.** Past the trust window (the records cannot be read), what a
//!   share alone would allow makes the gateway read them at once, and gets 503 if it
//!   cannot.
//! * **Moves and deletes end the shares of what they take away**
//!   ([`end_before_removing`]): the shared path's records are removed first, and the
//!   move or delete waits the trust window before it runs, so no gateway still honours
//!   a share once something else can take the old name.

pub mod record;
pub mod table;

pub use crate::kept::WallClock;
pub use record::{Share, ShareEntry, Shared};
pub use table::ShareTable;

use crate::kept::{Item, Kept};
use kubedav_api::path::VolumePath;
use kubedav_api::records::Area;
use std::sync::Arc;

/// Every share, kept fresh from the records.
pub type Shares = Kept<ShareEntry, ShareTable>;

/// Most shares one user may make.
pub const MAX_PER_CREATOR: usize = 1000;

/// The records area.
const RECORDS: Area = Area("shares");

/// The shares kept in `records`, on `clock`.
pub fn kept(records: Arc<dyn kubedav_api::records::Records>, clock: WallClock) -> Arc<Shares> {
    Shares::new(records, RECORDS, clock, metrics::active)
}

impl Item for ShareEntry {
    type Stored = Share;
    const KIND: &'static str = "share";

    fn new(stored: Share) -> Option<Self> {
        ShareEntry::new(stored)
    }

    fn stored(&self) -> &Share {
        &self.share
    }

    fn id(&self) -> &str {
        &self.share.id
    }

    fn path(&self) -> &VolumePath {
        &self.path
    }

    fn creator(&self) -> &str {
        &self.share.creator
    }

    fn expired(&self, now: i64) -> bool {
        ShareEntry::expired(self, now)
    }
}

/// Ends the shares and links of `path` and of what lies beneath it before `path` is
/// moved or deleted by `by`, and waits until no gateway honours them any more.
pub async fn end_before_removing(
    gateway: &crate::Gateway,
    path: &VolumePath,
    by: &str,
) -> Result<(), crate::http::errors::HttpError> {
    let shares = crate::kept::end_before_removing(gateway.shares.as_ref(), path, by).await?;
    let links = crate::links::end_beneath(gateway, path, by).await?;
    if shares || links {
        tokio::time::sleep(crate::kept::TRUSTED_FOR).await;
    }
    Ok(())
}

/// Exports the shares' gauge at zero, for a gateway that keeps no shares (no policy).
pub fn register_metrics() {
    metrics::active(0);
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
