//! WebDAV's own pieces (RFC 4918): its [`method`]s, its request [`headers`], the
//! [`xml`] it writes and the bodies it parses ([`xmldom`], remembered by
//! [`bodymemo`]), [`properties`], the `If` header ([`ifheader`]) and what the locks
//! service is asked around writes ([`locking`]), what sync clients add ([`sync`]), and settings for
//! particular clients' habits ([`quirks`]). May import `http`, `request` and
//! the state.

pub mod bodymemo;
pub mod headers;
pub mod ifheader;
pub mod locking;
pub mod method;
pub mod properties;
pub mod quirks;
pub mod sync;
pub mod xml;
pub mod xmldom;
