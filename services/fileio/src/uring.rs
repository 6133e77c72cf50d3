//! Whether io_uring may be used here. Container runtimes' default seccomp profiles (and
//! Kubernetes' RuntimeDefault) usually refuse `io_uring_setup`, and some kernels turn it
//! off (`kernel.io_uring_disabled`). fileio probes once at start, reports the answer in
//! the log and in `kubedav_fileio_io_uring_available`, and uses the blocking-pool path
//! where io_uring is refused. docs/deploy.md says how to allow it.
use kubedav_metrics::Gauge;
use std::sync::LazyLock;

static AVAILABLE: LazyLock<Gauge> = LazyLock::new(|| {
    kubedav_metrics::gauge(
        "kubedav_fileio_io_uring_available",
        "1 when io_uring may be used; 0 when seccomp or the kernel refuse it (the fallback runs).",
    )
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

/// Whether listings batch their `statx` calls through io_uring: the probe's answer, unless
/// turned off with [`set_scans_enabled`].
static SCANS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turns the io_uring scan path on (only if the probe found io_uring usable) or off.
pub fn set_scans_enabled(enabled: bool) {
    SCANS.store(
        enabled && AVAILABLE.get() == 1,
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// Whether listings use io_uring now.
pub fn scans_enabled() -> bool {
    SCANS.load(std::sync::atomic::Ordering::Relaxed)
}

thread_local! {
    /// One ring per blocking-pool thread, made on its first listing and kept with it.
    static RING: std::cell::RefCell<Option<io_uring::IoUring>> = const { std::cell::RefCell::new(None) };
}

/// The most names one submission carries (the ring's size).
pub const RING_ENTRIES: usize = 256;

/// `statx` of up to [`RING_ENTRIES`] names of the open directory `dir` in one io_uring
/// submission, not following final symlinks; one result per name, in order. `None` when
/// io_uring cannot be used here (the caller stats one by one).
pub fn statx_batch(
    dir: rustix::fd::BorrowedFd<'_>,
    names: &[String],
    mask: rustix::fs::StatxFlags,
) -> Option<Vec<Result<rustix::fs::Statx, rustix::io::Errno>>> {
    use rustix::fd::AsRawFd;
    use rustix::fs::Statx;
    assert!(names.len() <= RING_ENTRIES, "a batch fits the ring");
    RING.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = io_uring::IoUring::new(RING_ENTRIES as u32).ok();
        }
        let ring = cell.as_mut()?;
        // The names, NUL-terminated, and the result buffers: both stay put until every
        // submitted request has completed.
        let mut arena = Vec::with_capacity(names.iter().map(|n| n.len() + 1).sum());
        let mut starts = Vec::with_capacity(names.len());
        for name in names {
            starts.push(arena.len());
            arena.extend_from_slice(name.as_bytes());
            arena.push(0);
        }
        // SAFETY: Statx is plain data (integers); all zeroes is a valid value.
        let mut buffers: Vec<Statx> = vec![unsafe { std::mem::zeroed() }; names.len()];
        let mut results: Vec<Option<Result<Statx, rustix::io::Errno>>> = vec![None; names.len()];
        {
            let mut queue = ring.submission();
            for (i, start) in starts.iter().enumerate() {
                let entry = io_uring::opcode::Statx::new(
                    io_uring::types::Fd(dir.as_raw_fd()),
                    arena[*start..].as_ptr().cast(),
                    (&mut buffers[i] as *mut Statx).cast(),
                )
                .flags(libc::AT_SYMLINK_NOFOLLOW)
                .mask(mask.bits())
                .build()
                .user_data(i as u64);
                // SAFETY: the name and the buffer outlive the request: this function
                // waits for every completion before returning (or leaks both on failure).
                if unsafe { queue.push(&entry) }.is_err() {
                    unreachable!("the ring has room for RING_ENTRIES requests");
                }
            }
        }
        let mut done = 0;
        while done < names.len() {
            match ring.submit_and_wait(names.len() - done) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) || e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => {
                    // Requests may still be in flight: the kernel may yet write the
                    // buffers, so they (and the ring) are leaked, never freed.
                    tracing::warn!("io_uring scan failed ({e}); listing without io_uring from now on");
                    set_scans_enabled(false);
                    std::mem::forget(arena);
                    std::mem::forget(buffers);
                    std::mem::forget(cell.take());
                    return None;
                }
            }
            for completion in ring.completion() {
                let i = completion.user_data() as usize;
                results[i] = Some(if completion.result() < 0 {
                    Err(rustix::io::Errno::from_raw_os_error(-completion.result()))
                } else {
                    Ok(buffers[i])
                });
                done += 1;
            }
        }
        Some(
            results
                .into_iter()
                .map(|r| r.expect("every request completed"))
                .collect(),
        )
    })
}
