//! [`SecretKey`]: the one secret the auth service derives its keys from (`--secret-key`,
//! or a secret made once and kept with the data), and the keys it derives for each use:
//! app passwords' hashes, session tokens, sign-in flows, refresh tokens at rest. A key
//! is derived as HMAC-SHA-256(secret, purpose), so no two uses share a key.

use hmac::{Hmac, KeyInit, Mac};
use kubedav_api::records::{Area, Records};
use sha2::Sha256;
use std::sync::Arc;
use tonic::Status;

/// The record that keeps the secret made when none was given: (area, key).
pub const KEPT_SECRET: (&str, &str) = ("keys", "secret");

/// The secret, known once given or read (made on first need when neither). Cheap to
/// clone.
#[derive(Clone)]
pub struct SecretKey {
    records: Arc<dyn Records>,
    given: Option<Arc<Vec<u8>>>,
    kept: Arc<tokio::sync::OnceCell<Vec<u8>>>,
}

impl SecretKey {
    /// `given` (`--secret-key`), or one kept in `records` (made the first time a key is
    /// needed: all-in-one without `--secret-key`).
    pub fn new(records: Arc<dyn Records>, given: Option<Vec<u8>>) -> Self {
        Self {
            records,
            given: given.map(Arc::new),
            kept: Arc::default(),
        }
    }

    /// The key for `purpose` (a fixed text naming the use and its version).
    pub async fn derive(&self, purpose: &str) -> Result<[u8; 32], Status> {
        let secret = match &self.given {
            Some(given) => given.as_slice(),
            None => self.kept.get_or_try_init(|| self.load()).await?.as_slice(),
        };
        Ok(derive(secret, purpose))
    }

    /// The secret kept with the data, made now when there is none.
    async fn load(&self) -> Result<Vec<u8>, Status> {
        let (area, key) = KEPT_SECRET;
        let kept = self.records.get(Area(area).get(key)).await?;
        if kept.found && kept.data.len() >= 32 {
            return Ok(kept.data.to_vec());
        }
        let mut secret = vec![0u8; 48];
        getrandom::fill(&mut secret)
            .map_err(|e| Status::internal(format!("no randomness for a key: {e}")))?;
        self.records.put(Area(area).put(key, secret.clone())).await?;
        tracing::info!(target: "kubedav", "made the secret app passwords and sessions are keyed with, and kept it with the data (.kubedav/keys/); give --secret-key from a Secret to keep it apart");
        Ok(secret)
    }
}

/// HMAC-SHA-256(`secret`, `purpose`).
pub fn derive(secret: &[u8], purpose: &str) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes any key size");
    mac.update(purpose.as_bytes());
    mac.finalize().into_bytes().into()
}

/// HMAC-SHA-256(`key`, `parts` joined by NUL bytes).
pub fn mac(key: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key size");
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            mac.update(&[0]);
        }
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}
