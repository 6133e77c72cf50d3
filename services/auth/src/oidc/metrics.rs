//! The metrics of the identity provider's use: whether it answers, how old its keys
//! are, and how often they were fetched.

use kubedav_metrics::{CounterFamily, Gauge};
use std::sync::LazyLock;

/// `kubedav_auth_idp_up`: 1 while the last fetch from the identity provider succeeded.
pub(crate) static IDP_UP: LazyLock<Gauge> = LazyLock::new(|| {
    kubedav_metrics::gauge(
        "kubedav_auth_idp_up",
        "1 while the identity provider's last fetch (discovery, JWKS) succeeded, else 0.",
    )
});

/// `kubedav_auth_jwks_age_seconds`: age of the keys in use (-1: none yet).
pub(crate) static JWKS_AGE: LazyLock<Gauge> = LazyLock::new(|| {
    kubedav_metrics::gauge(
        "kubedav_auth_jwks_age_seconds",
        "Seconds since the JWKS in use was fetched (-1 before the first fetch), at the last refresh.",
    )
});

/// `kubedav_auth_jwks_fetches_total{result}`.
pub(crate) static JWKS_FETCHES: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_auth_jwks_fetches_total",
        "Fetches of the identity provider's discovery document and JWKS, by result (ok, error).",
        &["result"],
    )
});

/// Makes the series that only move on trouble exist from the start.
pub(crate) fn register() {
    LazyLock::force(&IDP_UP);
    JWKS_AGE.set(-1);
    for result in ["ok", "error"] {
        JWKS_FETCHES.with_label_values(&[result]);
    }
}
