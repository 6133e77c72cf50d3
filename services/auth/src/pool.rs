//! A bounded pool for crypt work, off the async workers.
//!
//! A fixed number of threads take jobs from a queue of fixed length. When the queue is
//! full, a new job is refused at once ([`Busy`]) instead of waiting: under a flood of
//! password guesses the answer is a fast 503, and cached verifications (which never
//! enter the pool) are not held up.

use kubedav_metrics::Gauge;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, LazyLock, Mutex};

static QUEUED: LazyLock<Gauge> = LazyLock::new(|| {
    kubedav_metrics::gauge(
        "kubedav_auth_crypt_queue_depth",
        "Crypt verifications waiting for a worker.",
    )
});

type Job = Box<dyn FnOnce() + Send>;

/// The queue is full: try again shortly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

/// The pool.
pub struct CryptPool {
    jobs: SyncSender<Job>,
}

impl CryptPool {
    /// `workers` threads and room for `queue` waiting jobs.
    pub fn new(workers: usize, queue: usize) -> Self {
        let (jobs, receiver) = sync_channel::<Job>(queue);
        let receiver = Arc::new(Mutex::new(receiver));
        for n in 0..workers.max(1) {
            let receiver: Arc<Mutex<Receiver<Job>>> = receiver.clone();
            std::thread::Builder::new()
                .name(format!("kubedav-crypt-{n}"))
                .spawn(move || {
                    loop {
                        let job = match receiver.lock().unwrap_or_else(|p| p.into_inner()).recv() {
                            Ok(job) => job,
                            Err(_) => return,
                        };
                        QUEUED.dec();
                        job();
                    }
                })
                .expect("a crypt worker thread starts");
        }
        Self { jobs }
    }

    /// Runs `work` on the pool and waits for its result, or refuses at once when the
    /// queue is full.
    pub async fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Result<T, Busy> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(work());
        });
        match self.jobs.try_send(job) {
            Ok(()) => {
                QUEUED.inc();
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => return Err(Busy),
        }
        rx.await.map_err(|_| Busy)
    }
}
