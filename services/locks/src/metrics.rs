//! The locks service's own metrics.
use kubedav_metrics::{Counter, CounterFamily, Gauge};
use std::sync::LazyLock;

/// Locks currently held. With the Redis store every replica reports the whole fleet's
/// count (as of its last readiness probe), so aggregate it with `max`, not `sum`.
pub(crate) static ACTIVE: LazyLock<Gauge> =
    LazyLock::new(|| kubedav_metrics::gauge("kubedav_locks_active", "Locks currently held."));

/// LOCK requests and writes refused because of a lock.
pub(crate) static CONFLICTS: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter(
        "kubedav_locks_conflicts_total",
        "LOCK requests and writes refused because of a lock.",
    )
});

/// Store operations that failed because the store could not be reached, by operation.
pub(crate) static STORE_ERRORS: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_locks_store_errors_total",
        "Lock store operations that failed because the store (Redis) could not be reached.",
        &["operation"],
    )
});

/// Passes a write decision on, counting it in [`CONFLICTS`] when a lock refused it.
pub(crate) fn counted(
    response: kubedav_api::locks::CheckWriteResponse,
) -> kubedav_api::locks::CheckWriteResponse {
    if response.outcome == kubedav_api::locks::check_write_response::Outcome::Locked as i32 {
        CONFLICTS.inc();
    }
    response
}
