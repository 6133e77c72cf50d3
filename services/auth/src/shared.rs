//! The shared verification cache: successful verifications kept in Redis, so that the
//! auth replicas of a deployment crypt-verify a credential once per TTL across the fleet
//! instead of once per replica.
//!
//! An entry's key is an HMAC-SHA256, under a secret the replicas share (a Kubernetes
//! Secret), of the user, the password and the stored hash the password matched. Redis
//! never holds a password, nor anything that can be attacked offline without the secret,
//! and an entry stops matching as soon as the user's hash changes in the users file.
//! Failures are never shared. When Redis cannot be reached the core verifies locally.

use hmac::{Hmac, KeyInit, Mac};
use kubedav_kit::redis::Redis;
use sha2::Sha256;
use std::fmt::Write;
use std::time::Duration;
use tracing::Instrument;

/// How long a lookup or a store may take before the core verifies locally instead: a
/// crypt verification costs a few milliseconds, so waiting much longer does not pay.
pub const TIMEOUT: Duration = Duration::from_millis(250);

/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 16;

/// Successful verifications shared through Redis.
pub struct SharedCache {
    connection: Redis,
    secret: Vec<u8>,
    prefix: String,
    ttl: Duration,
}

impl SharedCache {
    /// A cache on `connection` with keys under `prefix` followed by `auth:`, entries
    /// living `ttl`, keyed under `secret` (at least [`MIN_SECRET_BYTES`] bytes, the same
    /// on every replica).
    pub fn new(connection: Redis, secret: &[u8], prefix: &str, ttl: Duration) -> Result<Self, String> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "the shared auth cache secret has {} bytes; give at least {MIN_SECRET_BYTES} random bytes, \
                 the same on every auth replica (e.g. `openssl rand -hex 32`)",
                secret.len()
            ));
        }
        Ok(Self {
            connection,
            secret: secret.to_vec(),
            prefix: format!("{prefix}auth:"),
            ttl: ttl.max(Duration::from_millis(1)),
        })
    }

    /// The Redis key for a verification of `password` for `user` against `stored`.
    pub fn key(&self, user: &str, password: &str, stored: &str) -> String {
        let mut mac =
            <Hmac<Sha256> as KeyInit>::new_from_slice(&self.secret).expect("HMAC takes any key size");
        for part in [user, password, stored] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        let mut key = self.prefix.clone();
        for byte in mac.finalize().into_bytes() {
            let _ = write!(key, "{byte:02x}");
        }
        key
    }

    /// Whether another replica (or this one) verified this key within the TTL.
    pub async fn contains(&self, key: &str) -> redis::RedisResult<bool> {
        let mut connection = self.connection.clone();
        within_timeout(redis::cmd("EXISTS").arg(key).query_async::<bool>(&mut connection))
            .instrument(kubedav_kit::redis::span("EXISTS", "shared auth cache lookup"))
            .await
    }

    /// Records a successful verification for the TTL.
    pub async fn insert(&self, key: &str) -> redis::RedisResult<()> {
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("SET");
        command.arg(key).arg(1).arg("PX").arg(self.ttl.as_millis() as u64);
        within_timeout(command.query_async::<()>(&mut connection))
            .instrument(kubedav_kit::redis::span("SET", "shared auth cache store"))
            .await
    }
}

async fn within_timeout<T>(call: impl Future<Output = redis::RedisResult<T>>) -> redis::RedisResult<T> {
    tokio::time::timeout(TIMEOUT, call).await.unwrap_or_else(|_| {
        Err(redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the shared auth cache did not answer in time",
        )))
    })
}
