//! Whether io_uring may be used here. Container runtimes' default seccomp profiles (and
//! Kubernetes' RuntimeDefault) usually refuse `io_uring_setup`, and some kernels turn it
//! off (`kernel.io_uring_disabled`). fileio probes once at start, reports the answer in
//! the log and in `kubedav_fileio_io_uring_available`, and uses the blocking-pool path
//! where io_uring is refused. docs/deploy.md says how to allow it.

use prometheus::{IntGauge, register_int_gauge};
use std::sync::LazyLock;

static AVAILABLE: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge!(
        "kubedav_fileio_io_uring_available",
        "1 when io_uring may be used; 0 when seccomp or the kernel refuse it (the fallback runs)."
    )
    .expect("metric registers once")
});

/// Probes io_uring by setting up (and closing) a one-entry ring. `Err` says why it cannot
/// be used.
pub fn probe() -> Result<(), String> {
    let mut params = rustix::io_uring::io_uring_params::default();
    // SAFETY: a valid params struct; the returned descriptor is owned and closed on drop.
    match unsafe { rustix::io_uring::io_uring_setup(1, &mut params) } {
        Ok(_ring) => Ok(()),
        Err(rustix::io::Errno::PERM) | Err(rustix::io::Errno::ACCESS) => {
            Err("io_uring_setup is refused (a seccomp profile, or kernel.io_uring_disabled)".into())
        }
        Err(rustix::io::Errno::NOSYS) => Err("the kernel has no io_uring".into()),
        Err(e) => Err(format!("io_uring_setup failed: {e}")),
    }
}

/// Probes, logs and records whether io_uring is available; returns it.
pub fn detect() -> bool {
    let available = match probe() {
        Ok(()) => {
            tracing::info!(target: "kubedav", "io_uring available");
            true
        }
        Err(reason) => {
            tracing::info!(target: "kubedav", "io_uring unavailable ({reason}): using the blocking-pool fallback");
            false
        }
    };
    AVAILABLE.set(i64::from(available));
    available
}
