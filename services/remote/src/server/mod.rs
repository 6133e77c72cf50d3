//! The server adapters: each exposes any implementation of a port as its gRPC service.

mod auth;
mod fileio;
mod keep;
mod locks;
mod markdown;
mod records;
mod uploads;

pub use auth::AuthGrpc;
pub use fileio::{FileIoGrpc, FileIoService};
pub use keep::KeepGrpc;
pub use locks::LocksGrpc;
pub use markdown::MarkdownGrpc;
pub use records::RecordsGrpc;
pub use uploads::UploadsGrpc;

/// The registry a lease holder says it follows ([`kubedav_lease::FOLLOWED_REGISTRY`]), if
/// any.
fn followed_registry<T>(request: &tonic::Request<T>) -> Option<String> {
    let value = request.metadata().get(kubedav_lease::FOLLOWED_REGISTRY)?;
    value.to_str().ok().map(str::to_owned)
}
