//! fileio's own Prometheus metrics (registered in the default registry).

use prometheus::{IntCounter, register_int_counter};
use std::sync::LazyLock;

static READ_BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "kubedav_fileio_read_bytes_total",
        "File bytes read from the volume."
    )
    .expect("metric registers once")
});
static WRITTEN_BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "kubedav_fileio_written_bytes_total",
        "File bytes written to the volume (before commit)."
    )
    .expect("metric registers once")
});
static SCANS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("kubedav_fileio_scans_total", "Collection listings started.")
        .expect("metric registers once")
});

/// Counts bytes read.
pub fn read_bytes(n: u64) {
    READ_BYTES.inc_by(n);
}

/// Counts bytes written.
pub fn written_bytes(n: u64) {
    WRITTEN_BYTES.inc_by(n);
}

/// The listings counter.
pub fn scans() -> &'static IntCounter {
    &SCANS
}
