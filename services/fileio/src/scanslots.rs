//! How many directory scans run at once.
//!
//! A listing runs on tokio's blocking pool. Without a bound, 64 clients listing at once
//! meant 64 threads doing `statx` on 2 cores, preempting each other; the scans now take
//! one of a few slots (twice the cores) before they get a thread, and the rest wait as
//! cheap async tasks. A scan gives its slot up whenever it waits for its reader, so slow
//! clients cannot hold every slot and stall everyone's listings.

use kubedav_api::pb::fileio::v1::ListResponse;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tonic::Status;

/// The slots scans share.
#[derive(Clone, Debug)]
pub struct ScanSlots(Arc<Semaphore>);

impl ScanSlots {
    /// Twice the cores this process may use, at least 2.
    pub fn for_this_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self::new((2 * cores).max(2))
    }

    /// `slots` scans at once.
    pub fn new(slots: usize) -> Self {
        Self(Arc::new(Semaphore::new(slots)))
    }

    /// Waits for a slot; the returned outlet holds it and sends the scan's batches.
    pub async fn enter(&self, out: mpsc::Sender<Result<ListResponse, Status>>) -> Outlet {
        let slot = self.0.clone().acquire_owned().await.ok();
        Outlet {
            slots: self.0.clone(),
            slot,
            out,
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

/// Where a scan on the blocking pool sends its batches, holding a slot while it works.
pub struct Outlet {
    slots: Arc<Semaphore>,
    slot: Option<OwnedSemaphorePermit>,
    out: mpsc::Sender<Result<ListResponse, Status>>,
    runtime: tokio::runtime::Handle,
}

impl Outlet {
    /// Sends `item`, giving the slot up while the reader is slow and taking one again
    /// before the scan goes on. False when the reader has gone away. Blocks: call it
    /// only from the blocking pool.
    pub fn send(&mut self, item: Result<ListResponse, Status>) -> bool {
        let item = match self.out.try_send(item) {
            Ok(()) => return true,
            Err(mpsc::error::TrySendError::Closed(_)) => return false,
            Err(mpsc::error::TrySendError::Full(item)) => item,
        };
        self.slot = None;
        if self.out.blocking_send(item).is_err() {
            return false;
        }
        self.slot = self.runtime.block_on(self.slots.clone().acquire_owned()).ok();
        true
    }

    /// Whether a slot is held (for tests).
    #[cfg(test)]
    fn holds_slot(&self) -> bool {
        self.slot.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch() -> Result<ListResponse, Status> {
        Ok(ListResponse { entries: Vec::new() })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scan_waiting_for_its_reader_lets_another_scan_run() {
        let slots = ScanSlots::new(1);
        let (tx, mut slow_reader) = mpsc::channel(1);
        let mut stalled = slots.enter(tx).await;
        assert!(stalled.holds_slot());
        let writer = tokio::task::spawn_blocking(move || {
            assert!(stalled.send(batch()), "fits the channel");
            assert!(stalled.send(batch()), "sent once the reader reads");
            stalled
        });
        // The first scan is now blocked on its full channel: a second one gets the slot.
        let (tx, _reader) = mpsc::channel(1);
        let other = tokio::time::timeout(std::time::Duration::from_secs(10), slots.enter(tx))
            .await
            .expect("the waiting scan gave its slot up");
        assert!(other.holds_slot());
        drop(other);
        slow_reader.recv().await.expect("a batch").expect("not an error");
        let stalled = writer.await.unwrap();
        assert!(stalled.holds_slot(), "it takes a slot again before going on");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scan_whose_reader_left_stops() {
        let slots = ScanSlots::new(1);
        let (tx, reader) = mpsc::channel(1);
        let mut outlet = slots.enter(tx).await;
        drop(reader);
        assert!(
            !tokio::task::spawn_blocking(move || outlet.send(batch()))
                .await
                .unwrap()
        );
    }
}
