//! The auth service's metrics of every credential kind: verifications by kind and
//! result, and app passwords made and revoked. (The identity provider's own are in
//! `oidc::metrics`.)

use kubedav_metrics::{Counter, CounterFamily};
use std::sync::LazyLock;

/// `kubedav_auth_verifications_total{kind, result}`: every credential checked, by kind
/// (`password`, `bearer`, `app_password`) and result (`hit`: a kept verification,
/// `miss`: checked in full and good, `refused`, and for bearer tokens the reason).
pub(crate) static VERIFICATIONS: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_auth_verifications_total",
        "Credentials verified, by kind (password, bearer, app_password) and result (hit, miss, or why it was refused).",
        &["kind", "result"],
    )
});

/// `kubedav_auth_app_passwords_total{event}`: app passwords `created` and `revoked`.
pub(crate) static APP_PASSWORDS: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_auth_app_passwords_total",
        "App passwords made and revoked, by event (created, revoked).",
        &["event"],
    )
});

/// The series of good verifications, looked up once (a labelled lookup hashes and
/// locks): `[kind][cached]`, kinds as [`KINDS`].
static GOOD: LazyLock<[[Counter; 2]; 3]> = LazyLock::new(|| {
    KINDS.map(|kind| {
        [
            VERIFICATIONS.with_label_values(&[kind, "miss"]),
            VERIFICATIONS.with_label_values(&[kind, "hit"]),
        ]
    })
});

/// The credential kinds, as the metric's `kind` label spells them.
const KINDS: [&str; 3] = ["password", "bearer", "app_password"];

/// Counts a good verification of a principal of `kind` (`password`, `bearer`,
/// `app-password`), `cached` or checked in full.
pub(crate) fn count_good(kind: &str, cached: bool) {
    let index = match kind {
        "bearer" => 1,
        "app-password" => 2,
        _ => 0,
    };
    GOOD[index][usize::from(cached)].inc();
}

/// Makes every series exist from the start (at 0), for rates and alerts.
pub(crate) fn register() {
    LazyLock::force(&GOOD);
    for kind in KINDS {
        for result in ["hit", "miss", "refused"] {
            VERIFICATIONS.with_label_values(&[kind, result]);
        }
    }
    for event in ["created", "revoked"] {
        APP_PASSWORDS.with_label_values(&[event]);
    }
}
