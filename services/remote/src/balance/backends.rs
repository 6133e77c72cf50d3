//! The backends of one service as the gateway sees them: one gRPC channel per pod (or
//! one for an IP address), with calls spread round-robin. The list is replaced as the
//! service's name resolves to other pods ([`super::channel`]) or as its registered
//! replicas change ([`super::registered`]); each channel reconnects by itself, with
//! backoff, after its pod goes away. A channel may carry a check of whether its pod is
//! answering now: calls skip the ones that are not, while any is.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use tonic::transport::Channel;

/// Whether a backend is answering now (a replica whose lease holds).
pub type Usable = Arc<dyn Fn() -> bool + Send + Sync>;

/// One channel, and the check of its pod, if any.
#[derive(Clone)]
struct Backend {
    channel: Channel,
    usable: Option<Usable>,
}

impl Backend {
    fn usable(&self) -> bool {
        self.usable.as_ref().is_none_or(|usable| usable())
    }
}

/// The channels calls to one service may take.
pub struct Backends {
    channels: RwLock<Arc<[Backend]>>,
    next: AtomicUsize,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends").field("len", &self.len()).finish()
    }
}

impl Backends {
    /// Calls go to `channel` alone.
    pub fn single(channel: Channel) -> Arc<Self> {
        Self::new(vec![channel])
    }

    /// Calls are spread over `channels`, which must not be empty.
    pub fn new(channels: Vec<Channel>) -> Arc<Self> {
        assert!(!channels.is_empty(), "a service needs at least one backend");
        Arc::new(Self {
            channels: RwLock::new(unchecked(channels)),
            next: AtomicUsize::new(0),
        })
    }

    /// Replaces the channels (calls under way finish on the old ones); an empty list is
    /// ignored.
    pub fn replace(&self, channels: Vec<Channel>) {
        if channels.is_empty() {
            return;
        }
        *self.channels.write().unwrap_or_else(|e| e.into_inner()) = unchecked(channels);
    }

    /// Replaces the channels with ones whose pods are checked before each call; an empty
    /// list is ignored.
    pub fn replace_checked(&self, channels: Vec<(Channel, Usable)>) {
        if channels.is_empty() {
            return;
        }
        let backends: Arc<[Backend]> = channels
            .into_iter()
            .map(|(channel, usable)| Backend {
                channel,
                usable: Some(usable),
            })
            .collect();
        *self.channels.write().unwrap_or_else(|e| e.into_inner()) = backends;
    }

    /// How many channels calls are spread over.
    pub fn len(&self) -> usize {
        self.channels.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether there is no channel (never: see [`Backends::new`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The channel for the next call: the next one in turn whose pod is answering, or
    /// the next one in turn if none is.
    pub fn pick(&self) -> Channel {
        let channels = self.channels.read().unwrap_or_else(|e| e.into_inner());
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        let count = channels.len();
        (0..count)
            .map(|i| &channels[(turn + i) % count])
            .find(|backend| backend.usable())
            .unwrap_or(&channels[turn % count])
            .channel
            .clone()
    }
}

fn unchecked(channels: Vec<Channel>) -> Arc<[Backend]> {
    channels
        .into_iter()
        .map(|channel| Backend {
            channel,
            usable: None,
        })
        .collect()
}
