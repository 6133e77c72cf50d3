//! WebDAV's own pieces (RFC 4918): its [`method`]s, its request [`headers`], the bodies
//! it parses ([`xmldom`]; a PROPFIND's, remembered by [`bodymemo`], read as a
//! [`propfind`]), its [`properties`] (names and the live ones), the [`multistatus`] it
//! answers with and the rest of the [`xml`] it writes, the `If` header ([`ifheader`])
//! and what the locks service is asked around writes ([`locking`]), what sync clients
//! add ([`sync`]), and settings for particular clients' habits ([`quirks`]). May import
//! `http`, `request` and the state.

pub mod bodymemo;
pub mod headers;
pub mod ifheader;
pub mod locking;
pub mod method;
pub mod multistatus;
pub mod properties;
pub mod propfind;
pub mod quirks;
pub mod sync;
pub mod xml;
pub mod xmldom;
