//! What passes between the gateway's layers with a request, so that no layer reaches
//! into another for it.
//!
//! The edge puts into a request's extensions the client's address ([`ClientIp`],
//! `edge::server`), whether its connection sends file data from the page cache
//! ([`Sendfile`], `edge::server`) and who makes it ([`Principal`], `edge::auth`); the
//! later layers and the handlers read them here. A PROPFIND handler leaves the answer it
//! rendered to the answers cache as a [`KeptAnswer`] (`cache::answers`). Imports nothing
//! else of the gateway.

mod principal;

pub use principal::Principal;

use bytes::Bytes;
use kubedav_api::path::VolumePath;
use std::net::IpAddr;

/// The client's address as the gateway uses it: for throttling, logs and spans
/// (`edge::client` says how it is found behind trusted proxies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

/// Marks a request whose TCP peer is a trusted proxy (`--trusted-proxies`): its
/// `X-Forwarded-Proto` is believed (`edge::client::forwarded_https`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FromTrustedProxy;

/// Files larger than this are sent with sendfile: below it, copying the bytes costs less
/// than mapping the file, checking its pages and unmapping it. (In one process, the
/// gateway keeps copies of files up to this size.)
pub const SENDFILE_ABOVE: u64 = 64 * 1024;

/// Marks a request that arrived over HTTP/1 on an `edge::sendfile::SendfileStream`: its
/// response may carry mapped chunks of files over [`SENDFILE_ABOVE`].
#[derive(Clone, Copy, Debug)]
pub struct Sendfile;

/// A rendered PROPFIND Depth 0 answer and what it was rendered from, for the answers
/// cache to answer again while that holds (`cache::answers`).
pub struct KeptAnswer {
    /// The resource, as the request's path decoded.
    pub path: VolumePath,
    /// The number of the fileio port's kept copy the answer was rendered from.
    pub copy: u64,
    /// Whether the answer shows `DAV:lockdiscovery` (then it holds only while no lock
    /// applies to the resource, as when it was rendered).
    pub shows_locks: bool,
    /// The multistatus body.
    pub body: Bytes,
}
