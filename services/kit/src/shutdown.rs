//! Shutdown signals.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::watch;

/// A shutdown signal shared by every server of a process: resolves on SIGTERM or
/// SIGINT (Ctrl-C).
#[derive(Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
    /// Set before the watchers are told: [`Shutdown::is_requested`], asked on every
    /// request, reads it without the channel's lock.
    requested: Arc<AtomicBool>,
}

impl Shutdown {
    /// Installs the signal handlers. Call once, inside the runtime, before announcing
    /// any port: the handlers are in place when this returns, so a SIGTERM that arrives
    /// right after start drains like any other instead of killing the process.
    pub fn install() -> Self {
        let (tx, rx) = watch::channel(false);
        let requested = Arc::new(AtomicBool::new(false));
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        let int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
        let (mut term, mut int) = match (term, int) {
            (Ok(term), Ok(int)) => (term, int),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!("cannot install the SIGTERM and SIGINT handlers: {e}");
                return Self { rx, requested };
            }
        };
        let flag = requested.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => tracing::info!(target: "kubedav", "SIGTERM received, shutting down"),
                _ = int.recv() => tracing::info!(target: "kubedav", "SIGINT received, shutting down"),
            }
            flag.store(true, Ordering::SeqCst);
            let _ = tx.send(true);
        });
        Self { rx, requested }
    }

    /// Whether shutdown was requested (the process is draining).
    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Resolves once shutdown was requested.
    pub async fn requested(mut self) {
        let _ = self.rx.wait_for(|stop| *stop).await;
    }
}
