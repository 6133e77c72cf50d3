//! [`ReplicaLeases`]: a lease from every replica of a service that the registry shows.

use crate::Requests;
use crate::holder::{Coherence, Lease, hold_sharing};
use futures_util::future::BoxFuture;
use kubedav_api::BoxStream;
use kubedav_api::lease::{Invalidation, WatchEvent};
use kubedav_kit::registry::View;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::Status;

/// Opens a lease stream to the replica at an address (`host:port`).
pub type OpenAt =
    Arc<dyn Fn(&str, Requests) -> BoxFuture<'static, Result<BoxStream<WatchEvent>, Status>> + Send + Sync>;

/// A lease from every replica the registry shows (`kubedav_kit::registry::View`): what
/// was kept may be served only while the view is fresh and each of its replicas' leases
/// holds. A replica's announcement drops copies whichever replica they came from, since
/// copies are dropped by path. A replica joining the view holds nothing up: its lease
/// starts invalid, and when it starts, everything kept is dropped. A new registry epoch
/// (a Redis failover, or its data lost) drops everything when it is seen and again when
/// it settles (`View::settled_from`), and nothing is served in between: a replica whose
/// registration was lost may have answered changes meanwhile without this gateway's
/// lease.
pub struct ReplicaLeases {
    epoch: Arc<AtomicU64>,
    view: watch::Receiver<View>,
    members: Arc<RwLock<HashMap<String, Member>>>,
}

/// The lease from one replica, and the task that keeps it.
struct Member {
    lease: Arc<Lease>,
    task: tokio::task::AbortHandle,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ReplicaLeases {
    /// Follows `view`, holding a lease from each replica through `open` and handing every
    /// invalidation to `drop_kept` (a task, for as long as this lives).
    pub fn follow(
        service: &'static str,
        view: watch::Receiver<View>,
        open: OpenAt,
        drop_kept: Arc<dyn Fn(&Invalidation) + Send + Sync>,
    ) -> Arc<Self> {
        let epoch: Arc<AtomicU64> = Arc::default();
        let members: Arc<RwLock<HashMap<String, Member>>> = Arc::default();
        let this = Arc::new(Self {
            epoch: epoch.clone(),
            view: view.clone(),
            members: members.clone(),
        });
        let members = Arc::downgrade(&members);
        let mut view = view;
        tokio::spawn(async move {
            let mut seen_epoch = 0;
            // When a new registry epoch settles: what was fetched before may have been
            // changed by a replica this gateway did not know of, so it is dropped then.
            let mut settles: Option<Instant> = None;
            loop {
                let (addresses, registry_epoch, settled_from) = {
                    let view = view.borrow_and_update();
                    (view.addresses.clone(), view.epoch, view.settled_from)
                };
                if registry_epoch != seen_epoch {
                    if seen_epoch != 0 {
                        drop_everything(&epoch, &*drop_kept);
                    }
                    seen_epoch = registry_epoch;
                    settles = (settled_from > Instant::now()).then_some(settled_from);
                }
                let Some(members) = members.upgrade() else { return };
                {
                    let mut members = members.write().unwrap_or_else(|p| p.into_inner());
                    // A replica that left the view may have made a change whose
                    // announcement this gateway will now never hear (its registration
                    // lapsed between the change and the announcement, which then waits
                    // for a registration that may never reopen): what was kept is
                    // dropped before the replica is let go, and `valid` says no until it
                    // is (the view no longer names it, the members still do).
                    if members.keys().any(|address| !addresses.contains(address)) {
                        drop_everything(&epoch, &*drop_kept);
                    }
                    members.retain(|address, _| addresses.contains(address));
                    for address in addresses {
                        if members.contains_key(&address) {
                            continue;
                        }
                        let open = open.clone();
                        let drop_kept = drop_kept.clone();
                        let at = address.clone();
                        let (lease, task) = hold_sharing(
                            service,
                            epoch.clone(),
                            move |requests| open(&at, requests),
                            move |invalidation| drop_kept(invalidation),
                        );
                        members.insert(address, Member { lease, task });
                    }
                }
                drop(members);
                let settled = async {
                    match settles {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    changed = view.changed() => if changed.is_err() {
                        return;
                    },
                    _ = settled => {
                        settles = None;
                        drop_everything(&epoch, &*drop_kept);
                    }
                }
            }
        });
        this
    }
}

/// Makes every copy kept so far unusable and drops them all.
fn drop_everything(epoch: &AtomicU64, drop_kept: &(dyn Fn(&Invalidation) + Send + Sync)) {
    epoch.fetch_add(1, Ordering::SeqCst);
    drop_kept(&Invalidation::everything());
}

impl ReplicaLeases {
    /// Whether the replica at `address` holds a lease with this gateway now: it answered a
    /// ping within the last lease. One that died or hangs does not.
    pub fn answering(&self, address: &str) -> bool {
        let members = self.members.read().unwrap_or_else(|p| p.into_inner());
        members.get(address).is_some_and(|member| member.lease.valid())
    }
}

impl Coherence for ReplicaLeases {
    fn valid(&self) -> bool {
        let view = self.view.borrow();
        if view.addresses.is_empty() || !view.fresh_at(Instant::now()) {
            return false;
        }
        let members = self.members.read().unwrap_or_else(|p| p.into_inner());
        // A member the view no longer names may still have to be dropped from (above).
        members.len() == view.addresses.len()
            && view
                .addresses
                .iter()
                .all(|address| members.get(address).is_some_and(|member| member.lease.valid()))
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }
}
