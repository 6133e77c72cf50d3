//! The backends of one service as the gateway sees them: one gRPC channel per pod (or
//! one for an IP address), with calls spread round-robin. The list is replaced as the
//! service's name resolves to other pods ([`super::channel`]); each channel
//! reconnects by itself, with backoff, after its pod goes away.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use tonic::transport::Channel;

/// The channels calls to one service may take.
#[derive(Debug)]
pub struct Backends {
    channels: RwLock<Arc<[Channel]>>,
    next: AtomicUsize,
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
            channels: RwLock::new(channels.into()),
            next: AtomicUsize::new(0),
        })
    }

    /// Replaces the channels (calls under way finish on the old ones); an empty list is
    /// ignored.
    pub fn replace(&self, channels: Vec<Channel>) {
        if channels.is_empty() {
            return;
        }
        *self.channels.write().unwrap_or_else(|e| e.into_inner()) = channels.into();
    }

    /// How many channels calls are spread over.
    pub fn len(&self) -> usize {
        self.channels.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether there is no channel (never: see [`Backends::new`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The channel for the next call.
    pub fn pick(&self) -> Channel {
        let channels = self.channels.read().unwrap_or_else(|e| e.into_inner());
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        channels[turn % channels.len()].clone()
    }
}
