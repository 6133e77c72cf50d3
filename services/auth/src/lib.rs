//! kubedav's auth service core: verifies Basic credentials against an htpasswd-style
//! users file ([`users`]), with successful verifications cached under a keyed hash of user
//! and password, crypt work on a bounded pool off the async workers ([`pool`]), failed
//! logins throttled per user and per address ([`throttle`]), and the file reloaded when it
//! changes ([`AuthCore::watch`]). Replicas may share successful verifications through
//! Redis ([`shared`]).

#![forbid(unsafe_code)]

pub mod apr1;
pub mod passwd;
pub mod pool;
pub mod shared;
pub mod throttle;
pub mod users;
pub mod verifier;

pub use verifier::{AuthConfig, AuthCore};
