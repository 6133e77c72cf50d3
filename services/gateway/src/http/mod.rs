//! HTTP semantics that know nothing of WebDAV: [`errors`] (a status and a message the
//! client can act on), [`conditional`] requests, [`dates`], byte [`range`]s, content
//! negotiation ([`negotiate`]), [`mediatype`]s and request [`paths`]. Imports nothing
//! else of the gateway.

pub mod conditional;
pub mod dates;
pub mod errors;
pub mod mediatype;
pub mod negotiate;
pub mod paths;
pub mod range;
