//! The backends of one service as the gateway sees them: one gRPC channel per pod (or
//! one for an IP address), with calls spread round-robin. The list is replaced as the
//! service's name resolves to other pods ([`super::channel`]) or as its registered
//! replicas change ([`super::registered`]); each channel reconnects by itself, with
//! backoff, after its pod goes away. A channel may carry a check of whether its pod is
//! answering now: calls skip the ones that are not, while any is.
//!
//! On a connection thread (`kubedav_kit::connection_thread`), a call to a pod goes over a
//! channel of that thread's own, opened on first use with the same endpoint and the same
//! connector (so the same backoff and accepting check) as the shared one: its I/O then
//! runs on the thread that makes the call instead of waking the shared runtime's workers
//! (docs/benchmarks.md, "2026-12-07").

use super::Dialed;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, Weak};
use tonic::transport::Channel;

/// Whether a backend is answering now (a replica whose lease holds).
pub type Usable = Arc<dyn Fn() -> bool + Send + Sync>;

/// A connection thread drops its channels to pods no longer called once every so many
/// calls (and whenever it opens one), so their connections close and stop reconnecting.
const PRUNE_EVERY: u32 = 1024;

thread_local! {
    /// This thread's own channels.
    static THREAD_OWN: RefCell<ThreadChannels> = RefCell::default();
}

/// A connection thread's own channels, by the id of the shared channel they stand in
/// for, each with a weak reference that lapses once no list of backends holds that pod.
#[derive(Default)]
struct ThreadChannels {
    channels: HashMap<u64, (Weak<()>, Channel)>,
    picks: u32,
}

impl ThreadChannels {
    fn prune(&mut self) {
        self.channels.retain(|_, (held, _)| held.strong_count() > 0);
    }
}

/// One channel, the check of its pod, if any, and how to open another to the same pod.
#[derive(Clone)]
struct Backend {
    channel: Channel,
    usable: Option<Usable>,
    redial: Option<super::Redial>,
}

impl Backend {
    /// The channel a call made on this thread takes.
    fn channel_here(&self) -> Channel {
        match &self.redial {
            Some(redial) if kubedav_kit::connection_thread::is_marked() => {
                THREAD_OWN.with_borrow_mut(|own| {
                    own.picks = own.picks.wrapping_add(1);
                    if own.picks % PRUNE_EVERY == 0 {
                        own.prune();
                    }
                    if let Some((_, channel)) = own.channels.get(&redial.id) {
                        return channel.clone();
                    }
                    own.prune();
                    let channel = redial.open();
                    own.channels.insert(redial.id, (redial.held(), channel.clone()));
                    channel
                })
            }
            _ => self.channel.clone(),
        }
    }

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
        Self::of(unchecked(channels))
    }

    /// Calls are spread over `channels`, which must not be empty, each checked before
    /// each call.
    pub fn dialed(channels: Vec<Dialed>) -> Arc<Self> {
        Self::of(checked(channels))
    }

    /// Calls spread over `backends`.
    fn of(backends: Arc<[Backend]>) -> Arc<Self> {
        assert!(!backends.is_empty(), "a service needs at least one backend");
        Arc::new(Self {
            channels: RwLock::new(backends),
            next: AtomicUsize::new(0),
        })
    }

    /// Replaces the channels with ones whose pods are checked before each call (calls
    /// under way finish on the old ones); an empty list is ignored.
    pub fn replace_checked(&self, channels: Vec<Dialed>) {
        if channels.is_empty() {
            return;
        }
        *self.channels.write().unwrap_or_else(|e| e.into_inner()) = checked(channels);
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
    /// the next one in turn if none is (on a connection thread, that thread's own channel
    /// to the same pod).
    pub fn pick(&self) -> Channel {
        let channels = self.channels.read().unwrap_or_else(|e| e.into_inner());
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        let count = channels.len();
        (0..count)
            .map(|i| &channels[(turn + i) % count])
            .find(|backend| backend.usable())
            .unwrap_or(&channels[turn % count])
            .channel_here()
    }
}

/// Backends whose pods are checked before each call, and which a connection thread can
/// dial again.
fn checked(channels: Vec<Dialed>) -> Arc<[Backend]> {
    channels
        .into_iter()
        .map(|dialed| Backend {
            channel: dialed.channel,
            usable: Some(dialed.usable),
            redial: Some(dialed.redial),
        })
        .collect()
}

/// Backends always called, over their shared channels.
fn unchecked(channels: Vec<Channel>) -> Arc<[Backend]> {
    channels
        .into_iter()
        .map(|channel| Backend {
            channel,
            usable: None,
            redial: None,
        })
        .collect()
}

/// How many channels of its own the current thread keeps.
#[cfg(test)]
pub(super) fn thread_channels() -> usize {
    THREAD_OWN.with_borrow(|own| own.channels.len())
}
