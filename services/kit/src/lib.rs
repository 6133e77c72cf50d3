//! Process plumbing every kubedav target shares, whatever it serves: telemetry
//! ([`telemetry`]), the admin HTTP server with `/metrics`, `/healthz` and `/readyz`
//! ([`admin`]), listeners ([`listen`]), Redis connections ([`redis`]), the registry of fileio replicas ([`registry`]), shutdown
//! signals ([`shutdown`]), the wall clock time-based rules read ([`clock`]), which thread serves client connections ([`connection_thread`]), TLS for the HTTPS clients kubedav runs ([`tls`]), failed-login
//! throttling ([`throttle`]), error messages with their causes ([`errors`]) and work that
//! finishes once begun ([`finish`]). Calls between processes are `kubedav-remote`'s
//! business.

#![forbid(unsafe_code)]

pub mod admin;
pub mod clock;
pub mod connection_thread;
pub mod errors;
pub mod finish;
pub mod listen;
pub mod redis;
pub mod registry;
pub mod shutdown;
pub mod telemetry;
pub mod throttle;
pub mod tls;

/// Sets `kubedav_build_info{version, commit} 1`, the series dashboards list namespaces and
/// jobs by (every target exports it) and that says which build a pod runs.
pub fn register_build_info(version: &str, commit: &str) {
    static BUILD_INFO: std::sync::OnceLock<kubedav_metrics::GaugeFamily> = std::sync::OnceLock::new();
    BUILD_INFO
        .get_or_init(|| {
            kubedav_metrics::GaugeFamily::new(
                "kubedav_build_info",
                "Always 1: the version and commit of the running build.",
                &["version", "commit"],
            )
        })
        .with_label_values(&[version, commit])
        .set(1);
}
