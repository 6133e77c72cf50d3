//! Leases on what a client keeps of a service's answers: `proto/kubedav/lease/v1/lease.proto`
//! states the protocol and why it is safe.
//!
//! * [`Leases`] is the service's side: it hands out leases on `Watch` streams, and
//!   [`Leases::invalidate`] announces a change to every holder and returns once each has
//!   acknowledged it or let its lease run out. A service calls it after making a change
//!   and before answering it.
//! * [`Lease`] is the holder's side ([`hold`] keeps one `Watch` stream open, reconnecting
//!   as needed): [`Lease::valid`] says whether what was kept may be served now, and
//!   [`Lease::keep`] stores an answer only if nothing was invalidated since the call that
//!   fetched it began.
//!
//! * [`ReplicaLeases`] holds a lease from every replica of a service that the registry
//!   shows ([`kubedav_kit::registry`]), and [`Leases::admit_through`] makes a replica's
//!   changes wait for its registration: a change through any replica reaches every copy.
//!
//! A holder that stops answering (paused, partitioned) delays the changes made meanwhile
//! by at most [`LEASE`]; a holder that cannot reach the service keeps nothing.
//! * [`LeasedFileIo`] is a fileio core under [`Leases`]: every change it makes is
//!   announced before it is answered. `FileIoGrpc` (kubedav-remote) serves one over
//!   gRPC; `--target=all` keeps the gateway's cache in front of one in-process.
//!
//! The protocol is not gRPC's: a holder opens its stream through whatever reaches the
//! service ([`Watch`]), a gRPC client or the core in the same process.

#![forbid(unsafe_code)]

mod holder;
mod leased;
mod replicas;
mod service;
#[cfg(test)]
mod tests;

pub use holder::{Coherence, Lease, hold};
pub use kubedav_api::lease::{Invalidation, Pong, WatchEvent, WatchRequest, watch_event};
pub use kubedav_kit::registry::{Standing, View};
pub use leased::{LeasedFileIo, LeasedKeep};
pub use replicas::{OpenAt, ReplicaLeases};
pub use service::Leases;

use futures_util::future::BoxFuture;
use kubedav_api::BoxStream;
use std::time::Duration;
use tokio::sync::mpsc;
use tonic::Status;

/// What a holder sends on its `Watch` stream.
pub struct Requests(mpsc::UnboundedReceiver<WatchRequest>);

impl From<mpsc::UnboundedReceiver<WatchRequest>> for Requests {
    fn from(requests: mpsc::UnboundedReceiver<WatchRequest>) -> Self {
        Self(requests)
    }
}

impl futures_util::Stream for Requests {
    type Item = WatchRequest;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<WatchRequest>> {
        self.0.poll_recv(cx)
    }
}

/// How long a lease lasts after the ping that renewed it. A holder that stops answering
/// delays a change by at most this, and so does a service's grace period after it
/// starts. It only has to outlast a ping's round trip (holders ping every quarter of
/// it), so it is short: a restart or a paused gateway holds changes up for half a
/// second at most.
pub const LEASE: Duration = Duration::from_millis(500);

/// The gRPC metadata a holder sends when it opens its `Watch` stream to a registered
/// replica: the key of the registry it follows (`kubedav_kit::registry::Registry::key`).
/// A registered replica gives leases only to holders that name its own registry; any
/// other holder would hold a lease from this replica alone, and not hear of changes
/// made through the others ([`Leases::watch`]).
pub const FOLLOWED_REGISTRY: &str = "kubedav-followed-registry";

/// What a holder opens its lease stream through: a port that reaches the service
/// (a gRPC client, or the leased core in this process).
pub trait Watch: Send + Sync + 'static {
    /// Opens a `Watch` stream that lives as long as `requests` does.
    fn watch(&self, requests: Requests) -> BoxFuture<'static, Result<BoxStream<WatchEvent>, Status>>;
}
