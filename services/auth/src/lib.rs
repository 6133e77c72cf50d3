//! kubedav's auth service core: verifies every credential a request carries and answers
//! with the principal it stands for. Basic credentials are checked against an
//! htpasswd-style users file ([`users`]), with crypt work on a bounded pool off the async
//! workers ([`pool`]), failed logins throttled per user and per address ([`throttle`]),
//! and the file reloaded when it changes ([`AuthCore::watch`]). Bearer JWTs are checked
//! against the operator's OpenID provider's keys ([`oidc`]). Successful verifications
//! are cached under a keyed hash of the credential; replicas may share password
//! verifications through Redis ([`shared`]).

#![forbid(unsafe_code)]

pub mod app_passwords;
pub mod apr1;
mod metrics;
pub mod oidc;
pub mod passwd;
pub mod pool;
pub mod secret_key;
pub mod shared;
pub mod sign_in;
pub use kubedav_kit::throttle;
pub mod users;
pub mod verifier;

pub use verifier::{AuthConfig, AuthCore};
