//! The request pipeline every request passes before its method's handler, and the
//! connections it arrives on: [`server`] (connections, their limits and watchdog),
//! [`client`] (who the client is), [`observe`] (request id, span, metrics, access log,
//! with [`counting`] bodies), [`sendfile`] (large file bodies sent from the page cache), [`framing`] (requests HTTP/1.1 says to refuse) and
//! [`auth`] (authentication, with [`verdicts`], the credentials accepted a moment ago),
//! and around it all [`cors`] (CORS, compression). May import `http`,
//! `dav::method`, `request` and the state.

pub mod auth;
pub mod client;
pub mod cors;
pub mod counting;
pub mod framing;
pub mod observe;
#[allow(unsafe_code)] // sendmsg and sendfile on the connection's socket
pub mod sendfile;
pub mod server;
pub mod threads;
pub mod verdicts;
