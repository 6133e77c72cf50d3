//! kubedav's gateway: the public HTTP/WebDAV edge.
//!
//! It speaks HTTP to clients and reaches the volume only through the
//! [`FileIo`](kubedav_api::fileio::FileIo) port, so the same code serves both run modes:
//! with fileio's core in the same process (`--target=all`) or over gRPC
//! (`--target=gateway`).

pub mod access;
pub mod api;
pub mod app;
pub mod cache;
pub mod dav;
pub mod direct;
pub mod edge;
pub mod handlers;
pub mod http;
pub mod kept;
pub mod links;
pub mod request;
pub mod shares;
mod state;
pub mod uploads;

pub use request::SENDFILE_ABOVE;
pub use state::{Gateway, GatewayConfig, Ports, SignInSettings};
