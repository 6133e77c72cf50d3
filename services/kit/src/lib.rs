//! Process plumbing every kubedav target shares, whatever it serves: telemetry
//! ([`telemetry`]), the admin HTTP server with `/metrics`, `/healthz` and `/readyz`
//! ([`admin`]), listeners ([`listen`]), Redis connections ([`redis`]), the registry of fileio replicas ([`registry`]) and shutdown
//! signals ([`shutdown`]). Calls between processes are `kubedav-remote`'s business.

pub mod admin;
pub mod listen;
pub mod redis;
pub mod registry;
pub mod shutdown;
pub mod telemetry;
