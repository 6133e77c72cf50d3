//! The wall clock kubedav's time-based rules read (expiry, retention, creation times):
//! the system's in production, one a test moves in its tests.

use std::sync::Arc;
use std::time::SystemTime;

/// The time as expiry and retention read it: the system's ([`system`]), or a test's.
pub type WallClock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// The system's clock.
pub fn system() -> WallClock {
    Arc::new(SystemTime::now)
}

/// Seconds since the Unix epoch by `clock` (0 before it).
pub fn unix_seconds(clock: &WallClock) -> i64 {
    clock()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Nanoseconds since the Unix epoch by `clock` (0 before it).
pub fn unix_nanos(clock: &WallClock) -> i64 {
    clock()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}
