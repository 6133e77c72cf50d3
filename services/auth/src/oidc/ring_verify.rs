//! Signature checks of bearer and ID tokens with ring, plugged into jsonwebtoken as its
//! crypto provider's verifier (signing and key utilities stay RustCrypto's, which only
//! the tests use).
//!
//! Why: a token with a forged RS256 signature cost 210 to 270 µs of CPU with the `rsa`
//! crate, and any unauthenticated client can send one; ring checks the same signature in
//! a fraction of that (docs/benchmarks.md, "Bogus bearer tokens"). ring is already in
//! the build, under rustls.

use jsonwebtoken::crypto::{CryptoProvider, JwtVerifier};
use jsonwebtoken::errors::{ErrorKind, Result};
use jsonwebtoken::signature::{Error, Verifier};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind};
use ring::signature as sig;
use std::sync::LazyLock;

/// The provider: ring verifies, RustCrypto signs (tests) and reads keys.
static PROVIDER: LazyLock<CryptoProvider> = LazyLock::new(|| {
    let rust_crypto = &jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER;
    CryptoProvider {
        signer_factory: rust_crypto.signer_factory,
        verifier_factory: ring_verifier,
        key_utils: rust_crypto.key_utils.clone(),
    }
});

/// Makes ring jsonwebtoken's verifier for the whole process; true when it is (false if
/// a provider was chosen before, e.g. by a test that signed a token first).
pub fn install() -> bool {
    LazyLock::force(&PROVIDER).install_default().is_ok()
}

/// One signature check: a key and ring's algorithm for it.
struct RingVerifier {
    algorithm: Algorithm,
    check: Check,
    key: DecodingKey,
}

enum Check {
    Rsa(&'static sig::RsaParameters),
    Other(&'static dyn sig::VerificationAlgorithm),
}

fn ring_verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    let (family, check) = match algorithm {
        Algorithm::RS256 => (AlgorithmFamily::Rsa, Check::Rsa(&sig::RSA_PKCS1_2048_8192_SHA256)),
        Algorithm::RS384 => (AlgorithmFamily::Rsa, Check::Rsa(&sig::RSA_PKCS1_2048_8192_SHA384)),
        Algorithm::RS512 => (AlgorithmFamily::Rsa, Check::Rsa(&sig::RSA_PKCS1_2048_8192_SHA512)),
        Algorithm::PS256 => (AlgorithmFamily::Rsa, Check::Rsa(&sig::RSA_PSS_2048_8192_SHA256)),
        Algorithm::PS384 => (AlgorithmFamily::Rsa, Check::Rsa(&sig::RSA_PSS_2048_8192_SHA384)),
        Algorithm::PS512 => (AlgorithmFamily::Rsa, Check::Rsa(&sig::RSA_PSS_2048_8192_SHA512)),
        Algorithm::ES256 => (AlgorithmFamily::Ec, Check::Other(&sig::ECDSA_P256_SHA256_FIXED)),
        Algorithm::ES384 => (AlgorithmFamily::Ec, Check::Other(&sig::ECDSA_P384_SHA384_FIXED)),
        Algorithm::EdDSA => (AlgorithmFamily::Ed, Check::Other(&sig::ED25519)),
        // HMAC is never accepted from a provider (bearer.rs refuses it by name first).
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    if key.family() != family {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    Ok(Box::new(RingVerifier {
        algorithm: *algorithm,
        check,
        key: key.clone(),
    }))
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, message: &[u8], signature: &Vec<u8>) -> std::result::Result<(), Error> {
        let checked = match (&self.check, self.key.kind()) {
            (Check::Rsa(parameters), DecodingKeyKind::RsaModulusExponent { n, e }) => {
                sig::RsaPublicKeyComponents { n, e }.verify(parameters, message, signature)
            }
            (Check::Rsa(parameters), DecodingKeyKind::SecretOrDer(der)) => {
                sig::UnparsedPublicKey::new(*parameters, der).verify(message, signature)
            }
            (Check::Other(algorithm), DecodingKeyKind::SecretOrDer(bytes)) => {
                sig::UnparsedPublicKey::new(*algorithm, bytes).verify(message, signature)
            }
            (Check::Other(_), DecodingKeyKind::RsaModulusExponent { .. }) => Err(ring::error::Unspecified),
        };
        checked.map_err(|_| Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::jwk::Jwk;
    use jsonwebtoken::{EncodingKey, Header};

    fn key(name: &str) -> String {
        std::fs::read_to_string(format!("{}/tests/keys/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    /// Signs `message` with RustCrypto and checks it with ring, as a JWKS key.
    fn round_trip(alg: Algorithm, private: EncodingKey, jwk: &str) {
        let token =
            jsonwebtoken::encode(&Header::new(alg), &serde_json::json!({"sub": "x"}), &private).unwrap();
        let (message, signature) = token.rsplit_once('.').unwrap();
        let mut signature =
            base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, signature).unwrap();
        let public = DecodingKey::from_jwk(&serde_json::from_str::<Jwk>(jwk).unwrap()).unwrap();
        let verifier = ring_verifier(&alg, &public).unwrap();
        assert!(verifier.verify(message.as_bytes(), &signature).is_ok(), "{alg:?}");
        assert!(
            verifier
                .verify(format!("{message}x").as_bytes(), &signature)
                .is_err(),
            "{alg:?}"
        );
        signature[7] ^= 1;
        assert!(
            verifier.verify(message.as_bytes(), &signature).is_err(),
            "{alg:?}"
        );
    }

    #[test]
    fn ring_checks_what_the_provider_signs_and_nothing_else() {
        for alg in [Algorithm::RS256, Algorithm::RS512, Algorithm::PS256] {
            round_trip(
                alg,
                EncodingKey::from_rsa_pem(key("rsa-a.pem").as_bytes()).unwrap(),
                &key("rsa-a.jwk.json"),
            );
        }
        round_trip(
            Algorithm::ES256,
            EncodingKey::from_ec_pem(key("ec-a.pem").as_bytes()).unwrap(),
            &key("ec-a.jwk.json"),
        );
        // A key of one family never checks another family's algorithm, nor HMAC.
        let rsa =
            DecodingKey::from_jwk(&serde_json::from_str::<Jwk>(&key("rsa-a.jwk.json")).unwrap()).unwrap();
        assert!(ring_verifier(&Algorithm::ES256, &rsa).is_err());
        assert!(ring_verifier(&Algorithm::HS256, &rsa).is_err());
    }
}
