//! Deadlines of the gateway's calls to the services: a stuck service (alive, but not
//! answering: a stopped process, a full disk queue, a network partition) answers 504
//! within a bounded time, never a hung request.
//!
//! * A call with one answer must have it within the client's call timeout
//!   (`--rpc-timeout-seconds`, [`DEFAULT_CALL_TIMEOUT`] by default), which each client
//!   holds (`RemoteFileIo::with_call_timeout` and its siblings; not a process-wide
//!   setting, so clients with different deadlines live side by side); calls that walk a
//!   tree (DELETE, COPY, MOVE) get [`TREE_FACTOR`] times as long. The deadline also travels as `grpc-timeout`, so the
//!   service stops working on a call nobody waits for.
//! * A streamed answer (a read, a listing) must start, and then deliver each next
//!   message, within the deadline: a stall in the middle ends the stream with
//!   DEADLINE_EXCEEDED.
//! * An upload is stalled when the service stops taking its body (its flow-control
//!   window stays full) or does not answer once the body has ended, for longer than
//!   the deadline; a slow client never counts against it ([`WriteWatch`]).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;
use tonic::Status;

/// The deadline of a call unless the client is given another.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The shortest deadline a client takes; shorter ones are raised to it.
pub const MIN_CALL_TIMEOUT: Duration = Duration::from_millis(100);

/// How many times the call timeout a tree operation (DELETE, COPY, MOVE) may take.
pub const TREE_FACTOR: u32 = 10;

/// The error of a call to `service` that took longer than `timeout`.
pub fn exceeded(service: &str, timeout: Duration) -> Status {
    Status::deadline_exceeded(format!(
        "{service} did not answer within {:.1} s; it may be overloaded or stuck",
        timeout.as_secs_f64()
    ))
}

/// A request message carrying `timeout` as its `grpc-timeout`.
pub fn request<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

/// Runs `call` to `service` under `timeout`.
pub async fn within<T>(
    service: &str,
    timeout: Duration,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    let started = Instant::now();
    match tokio::time::timeout(timeout, call).await {
        // tonic enforces the `grpc-timeout` it sends too, and reports it as CANCELLED.
        Ok(Err(status)) if status.code() == tonic::Code::Cancelled && started.elapsed() >= timeout => {
            Err(exceeded(service, timeout))
        }
        Ok(result) => result,
        Err(_) => Err(exceeded(service, timeout)),
    }
}

/// `stream` from `service`, each message of which must come within `timeout` of the one
/// before; a stall ends the stream with DEADLINE_EXCEEDED.
pub fn each_within<T: Send + 'static>(
    service: &'static str,
    timeout: Duration,
    stream: kubedav_api::BoxStream<T>,
) -> kubedav_api::BoxStream<T> {
    use futures_util::StreamExt;
    futures_util::stream::unfold(Some(stream), move |state| async move {
        let mut stream = state?;
        match tokio::time::timeout(timeout, stream.next()).await {
            Ok(Some(item)) => Some((item, Some(stream))),
            Ok(None) => None,
            Err(_) => Some((Err(exceeded(service, timeout)), None)),
        }
    })
    .boxed()
}

/// Who an upload is waiting for.
const WAITING_FOR_CLIENT: u8 = 0;
const WAITING_FOR_SERVICE: u8 = 1;

/// Watches one upload: its body stream reports who it waits for ([`WriteWatch::waiting`]),
/// and [`WriteWatch::stalled`] resolves when the service has kept it waiting longer
/// than the deadline.
#[derive(Clone)]
pub struct WriteWatch {
    inner: Arc<WatchState>,
}

struct WatchState {
    origin: Instant,
    waiting_for: AtomicU8,
    /// Milliseconds after `origin` at which the current wait began.
    since_ms: AtomicU64,
}

impl Default for WriteWatch {
    fn default() -> Self {
        Self::new()
    }
}

impl WriteWatch {
    /// A watch of an upload that has just started (waiting for its client).
    pub fn new() -> Self {
        Self {
            inner: Arc::new(WatchState {
                origin: Instant::now(),
                waiting_for: AtomicU8::new(WAITING_FOR_CLIENT),
                since_ms: AtomicU64::new(0),
            }),
        }
    }

    /// Records who the upload waits for from now on: the client (for more body) or the
    /// service (to take what was handed over, or to answer).
    pub fn waiting(&self, for_service: bool) {
        let state = if for_service {
            WAITING_FOR_SERVICE
        } else {
            WAITING_FOR_CLIENT
        };
        if self.inner.waiting_for.swap(state, Ordering::Relaxed) != state {
            let now = self.inner.origin.elapsed().as_millis() as u64;
            self.inner.since_ms.store(now, Ordering::Relaxed);
        }
    }

    /// Records that the service took the message handed over: the wait starts again.
    pub fn progressed(&self) {
        let now = self.inner.origin.elapsed().as_millis() as u64;
        self.inner.since_ms.store(now, Ordering::Relaxed);
    }

    /// Resolves once the service has kept the upload waiting for longer than `timeout`.
    pub async fn stalled(&self, timeout: Duration) {
        let tick = (timeout / 4).max(Duration::from_millis(25));
        loop {
            tokio::time::sleep(tick).await;
            if self.inner.waiting_for.load(Ordering::Relaxed) == WAITING_FOR_SERVICE {
                let since = Duration::from_millis(self.inner.since_ms.load(Ordering::Relaxed));
                if self.inner.origin.elapsed().saturating_sub(since) > timeout {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_deadline_is_deadline_exceeded() {
        let slow = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, Status>(())
        };
        let status = within("fileio", Duration::from_secs(1), slow).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert!(status.message().contains("fileio did not answer within 1.0 s"));
        assert!(
            within("fileio", Duration::from_secs(1), async { Ok::<_, Status>(7) })
                .await
                .is_ok()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_stream_ends_with_deadline_exceeded() {
        let stream = futures_util::stream::iter([Ok(1), Ok(2)])
            .chain(futures_util::stream::pending())
            .boxed();
        let items: Vec<_> = each_within("fileio", Duration::from_secs(1), stream)
            .collect()
            .await;
        assert_eq!(items.len(), 3);
        assert_eq!(
            items[2].as_ref().unwrap_err().code(),
            tonic::Code::DeadlineExceeded
        );
    }

    #[tokio::test(start_paused = true)]
    async fn only_waiting_for_the_service_counts() {
        let watch = WriteWatch::new();
        // A slow client: never a stall.
        watch.waiting(false);
        let waited =
            tokio::time::timeout(Duration::from_secs(60), watch.stalled(Duration::from_secs(1))).await;
        assert!(waited.is_err(), "a slow client is not a stuck service");
        // The service stops taking the body.
        watch.waiting(true);
        let waited =
            tokio::time::timeout(Duration::from_secs(3), watch.stalled(Duration::from_secs(1))).await;
        assert!(waited.is_ok());
    }
}
