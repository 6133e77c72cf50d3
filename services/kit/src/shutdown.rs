//! Shutdown signals.

use tokio::sync::watch;

/// A shutdown signal shared by every server of a process: resolves on SIGTERM or
/// SIGINT (Ctrl-C).
#[derive(Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

impl Shutdown {
    /// Installs the signal handlers. Call once, inside the runtime.
    pub fn install() -> Self {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(e) => {
                    tracing::error!("cannot install the SIGTERM handler: {e}");
                    return;
                }
            };
            tokio::select! {
                _ = term.recv() => tracing::info!(target: "kubedav", "SIGTERM received, shutting down"),
                _ = tokio::signal::ctrl_c() => tracing::info!(target: "kubedav", "SIGINT received, shutting down"),
            }
            let _ = tx.send(true);
        });
        Self { rx }
    }

    /// Whether shutdown was requested (the process is draining).
    pub fn is_requested(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once shutdown was requested.
    pub async fn requested(mut self) {
        let _ = self.rx.wait_for(|stop| *stop).await;
    }
}
