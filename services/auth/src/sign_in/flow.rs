//! [`Flow`]: one browser sign-in between its start and the provider's callback: the
//! `state` that ties the callback to the browser that started it, the `nonce` the ID
//! token must carry, the PKCE verifier (RFC 7636, S256) and where to go afterwards.
//!
//! Nothing is stored for it: the gateway keeps it in a short-lived `HttpOnly` cookie,
//! sealed here with an HMAC under a key derived from the secret key, so an
//! unauthenticated client can start as many sign-ins as it likes without costing
//! kubedav any storage, and cannot make one up or change one.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// Longest a sign-in may take from its start to the callback, in seconds.
pub const MAX_AGE_SECONDS: i64 = 600;

/// Longest sealed flow accepted, in bytes (a cookie's value).
pub const MAX_SEALED_BYTES: usize = 3072;

/// A sign-in in progress.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Flow {
    /// The OAuth `state`.
    pub state: String,
    /// The OpenID `nonce`.
    pub nonce: String,
    /// The PKCE code verifier.
    pub verifier: String,
    /// The path to show after sign-in.
    pub return_to: String,
    /// The redirect URI the sign-in began with.
    pub redirect_uri: String,
    /// When it stops being accepted (seconds since the epoch).
    pub expires: i64,
}

/// Why a sealed flow was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Broken {
    /// Not a flow this service sealed (or changed since).
    Forged,
    /// Older than [`MAX_AGE_SECONDS`].
    Expired,
}

impl Flow {
    /// A new flow with fresh random values.
    pub fn new(return_to: &str, redirect_uri: &str, now: i64) -> Result<Self, String> {
        Ok(Self {
            state: random_text(24)?,
            nonce: random_text(24)?,
            verifier: random_text(48)?,
            return_to: return_to.to_owned(),
            redirect_uri: redirect_uri.to_owned(),
            expires: now + MAX_AGE_SECONDS,
        })
    }

    /// The PKCE code challenge (S256) of the verifier.
    pub fn challenge(&self) -> String {
        URL_SAFE_NO_PAD.encode(Sha256::digest(self.verifier.as_bytes()))
    }

    /// The flow as a cookie value: base64url JSON, a dot, base64url HMAC.
    pub fn seal(&self, key: &[u8; 32]) -> String {
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default());
        let mac = crate::secret_key::mac(key, &[b"flow", payload.as_bytes()]);
        format!("{payload}.{}", URL_SAFE_NO_PAD.encode(mac))
    }

    /// The flow `sealed` holds, if this service sealed it under `key` and it is not
    /// older than [`MAX_AGE_SECONDS`] at `now`.
    pub fn open(sealed: &str, key: &[u8; 32], now: i64) -> Result<Self, Broken> {
        if sealed.len() > MAX_SEALED_BYTES {
            return Err(Broken::Forged);
        }
        let (payload, mac) = sealed.split_once('.').ok_or(Broken::Forged)?;
        let given = URL_SAFE_NO_PAD.decode(mac).map_err(|_| Broken::Forged)?;
        let expected = crate::secret_key::mac(key, &[b"flow", payload.as_bytes()]);
        if !bool::from(subtle::ConstantTimeEq::ct_eq(
            given.as_slice(),
            expected.as_slice(),
        )) {
            return Err(Broken::Forged);
        }
        let json = URL_SAFE_NO_PAD.decode(payload).map_err(|_| Broken::Forged)?;
        let flow: Flow = serde_json::from_slice(&json).map_err(|_| Broken::Forged)?;
        if flow.expires <= now {
            return Err(Broken::Expired);
        }
        Ok(flow)
    }
}

/// `bytes` random bytes as base64url text.
pub fn random_text(bytes: usize) -> Result<String, String> {
    let mut random = vec![0u8; bytes];
    getrandom::fill(&mut random).map_err(|e| format!("no randomness: {e}"))?;
    Ok(URL_SAFE_NO_PAD.encode(random))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_flow_opens_only_unchanged_under_its_key_and_in_time() {
        let key = [7u8; 32];
        let flow = Flow::new("/dav/", "https://files.example/dav/.kubedav/callback", 1000).unwrap();
        let sealed = flow.seal(&key);
        assert_eq!(
            Flow::open(&sealed, &key, 1000 + MAX_AGE_SECONDS - 1),
            Ok(flow.clone())
        );
        assert_eq!(
            Flow::open(&sealed, &key, 1000 + MAX_AGE_SECONDS),
            Err(Broken::Expired)
        );
        assert_eq!(Flow::open(&sealed, &[8u8; 32], 1000), Err(Broken::Forged));
        let (payload, mac) = sealed.split_once('.').unwrap();
        let mut changed = flow.clone();
        changed.return_to = "https://evil.example/".into();
        let forged_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&changed).unwrap());
        assert_eq!(
            Flow::open(&format!("{forged_payload}.{mac}"), &key, 1000),
            Err(Broken::Forged)
        );
        assert_eq!(Flow::open(payload, &key, 1000), Err(Broken::Forged));
        assert_eq!(
            Flow::open(&"a".repeat(MAX_SEALED_BYTES + 1), &key, 1000),
            Err(Broken::Forged)
        );
    }

    #[test]
    fn the_challenge_is_rfc_7636_s256() {
        // RFC 7636, appendix B.
        let flow = Flow {
            verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into(),
            ..Flow::new("/", "/", 0).unwrap()
        };
        assert_eq!(flow.challenge(), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    }
}
