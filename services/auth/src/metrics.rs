//! The auth service's metrics of every credential kind: verifications by kind and
//! result, app passwords made and revoked, browser sign-ins and accounts suspended. (The identity provider's own are in
//! `oidc::metrics`.)

use kubedav_metrics::{Counter, CounterFamily};
use std::sync::LazyLock;

/// `kubedav_auth_verifications_total{kind, result}`: every credential checked, by kind
/// (`password`, `bearer`, `app_password`, `session`) and result (`hit`: a kept verification,
/// `miss`: checked in full and good, `refused`, and for bearer tokens the reason).
pub(crate) static VERIFICATIONS: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_auth_verifications_total",
        "Credentials verified, by kind (password, bearer, app_password, session) and result (hit, miss, or why it was refused).",
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

/// `kubedav_auth_sign_ins_total{result}`: browser sign-ins through the identity
/// provider, by result (`started`, `completed`, `refused`, `signed_out`).
pub(crate) static SIGN_INS: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_auth_sign_ins_total",
        "Browser sign-ins through the identity provider, by result (started, completed, refused, signed_out).",
        &["result"],
    )
});

/// `kubedav_auth_accounts_suspended_total`: identity provider accounts whose refresh
/// token the provider refused (disabled, deleted, grant revoked).
pub(crate) static ACCOUNTS_SUSPENDED: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter(
        "kubedav_auth_accounts_suspended_total",
        "Identity provider accounts suspended because the provider refused their refresh token (disabled, deleted or revoked).",
    )
});

/// The series of good verifications, looked up once (a labelled lookup hashes and
/// locks): `[kind][cached]`, kinds as [`KINDS`].
static GOOD: LazyLock<[[Counter; 2]; 4]> = LazyLock::new(|| {
    KINDS.map(|kind| {
        [
            VERIFICATIONS.with_label_values(&[kind, "miss"]),
            VERIFICATIONS.with_label_values(&[kind, "hit"]),
        ]
    })
});

/// The credential kinds, as the metric's `kind` label spells them.
const KINDS: [&str; 4] = ["password", "bearer", "app_password", "session"];

/// Counts a good verification of a principal of `kind` (`password`, `bearer`,
/// `app-password`), `cached` or checked in full.
pub(crate) fn count_good(kind: &str, cached: bool) {
    let index = match kind {
        "bearer" => 1,
        "app-password" => 2,
        "session" => 3,
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
    for result in ["started", "completed", "refused", "signed_out"] {
        SIGN_INS.with_label_values(&[result]);
    }
    LazyLock::force(&ACCOUNTS_SUSPENDED);
}
