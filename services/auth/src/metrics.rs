//! The auth service's metrics of every credential kind: verifications by kind and
//! result, and app passwords made and revoked. (The identity provider's own are in
//! `oidc::metrics`.)

use kubedav_metrics::CounterFamily;
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

/// Makes every series exist from the start (at 0), for rates and alerts.
pub(crate) fn register() {
    for kind in ["password", "bearer", "app_password"] {
        for result in ["hit", "miss", "refused"] {
            VERIFICATIONS.with_label_values(&[kind, result]);
        }
    }
    for event in ["created", "revoked"] {
        APP_PASSWORDS.with_label_values(&[event]);
    }
}
