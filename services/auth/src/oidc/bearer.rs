//! [`BearerVerifier`]: `Authorization: Bearer` JWTs checked against the identity
//! provider's keys, and the principal they stand for.
//!
//! A token is refused, with a reason counted in
//! `kubedav_auth_verifications_total{kind="bearer"}`, when:
//! * it is longer than [`MAX_TOKEN_BYTES`] or is not a JWS of three base64url parts;
//! * its `alg` is `none`, symmetric (an HMAC made with the provider's public key as the
//!   secret is the classic forgery), or not one the key it names may verify;
//! * it names a key id the provider does not publish (after one fetch, rate-limited);
//! * its signature does not verify, or its `iss`, `aud`, `exp` or `nbf` is wrong (with
//!   a leeway for clocks that differ a little);
//! * its user claim is missing or cannot be a user id (a path segment, no `:`).
//!
//! Nothing is fetched per token except that one rate-limited refetch, and a token is
//! checked in microseconds: a flood of bogus tokens costs their signature checks.

use super::keys::{KeySet, Lookup};
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use kubedav_api::auth::Principal;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Longest bearer token accepted, in bytes: far above a provider's token with a few
/// hundred groups, far below the gateway's header limit.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Most groups taken from one token; the rest are ignored (and logged).
pub const MAX_GROUPS: usize = 256;

/// Longest user id made from a claim, in bytes.
pub const MAX_USER_BYTES: usize = 200;

/// How tokens map to principals.
#[derive(Clone, Debug)]
pub struct Claims {
    /// The `aud` a token must carry (`--oidc-audience`).
    pub audience: String,
    /// The claim that names the user (`--oidc-username-claim`, `sub` by default).
    pub username_claim: String,
    /// The claim that lists the user's groups (`--oidc-groups-claim`).
    pub groups_claim: String,
    /// Put before every user id from the provider (`--oidc-user-prefix`), so that no
    /// provider's user can be an htpasswd user of the same name.
    pub user_prefix: String,
    /// Tolerated clock difference for `exp` and `nbf`.
    pub leeway: Duration,
}

/// Why a token was refused. Its [`Refusal::label`] is the metric's `result`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Longer than [`MAX_TOKEN_BYTES`].
    TooLong,
    /// Not a JWS kubedav can read.
    Malformed,
    /// `alg` is `none`, symmetric, unknown, or not one its key may verify.
    Algorithm,
    /// Names a key the provider does not publish.
    UnknownKey,
    /// No keys to check with: the provider was never reached, or its keys are too old.
    KeysUnavailable,
    /// The signature does not verify.
    Signature,
    /// Another issuer.
    Issuer,
    /// Not meant for kubedav.
    Audience,
    /// Expired.
    Expired,
    /// Not valid yet.
    NotYetValid,
    /// No usable user claim.
    User,
}

impl Refusal {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::TooLong => "too_long",
            Refusal::Malformed => "malformed",
            Refusal::Algorithm => "algorithm",
            Refusal::UnknownKey => "unknown_key",
            Refusal::KeysUnavailable => "keys_unavailable",
            Refusal::Signature => "signature",
            Refusal::Issuer => "issuer",
            Refusal::Audience => "audience",
            Refusal::Expired => "expired",
            Refusal::NotYetValid => "not_yet_valid",
            Refusal::User => "user_claim",
        }
    }

    /// What the client is told (RFC 6750's `error_description`).
    pub fn message(self) -> &'static str {
        match self {
            Refusal::TooLong => "the bearer token is too long",
            Refusal::Malformed => "the bearer token is not a JWT",
            Refusal::Algorithm => {
                "the bearer token is not signed with an algorithm the identity provider's keys allow"
            }
            Refusal::UnknownKey => {
                "the bearer token names a signing key the identity provider does not publish"
            }
            Refusal::KeysUnavailable => {
                "bearer tokens cannot be checked now: the identity provider has not been reached; use a password or an app password, or try later"
            }
            Refusal::Signature => "the bearer token's signature is not valid",
            Refusal::Issuer => "the bearer token comes from another issuer",
            Refusal::Audience => "the bearer token is not meant for this service",
            Refusal::Expired => "the bearer token has expired; get a new one",
            Refusal::NotYetValid => "the bearer token is not valid yet",
            Refusal::User => "the bearer token does not name a user kubedav can serve",
        }
    }

    /// Every reason, for the metric's series.
    pub const ALL: [Refusal; 11] = [
        Refusal::TooLong,
        Refusal::Malformed,
        Refusal::Algorithm,
        Refusal::UnknownKey,
        Refusal::KeysUnavailable,
        Refusal::Signature,
        Refusal::Issuer,
        Refusal::Audience,
        Refusal::Expired,
        Refusal::NotYetValid,
        Refusal::User,
    ];
}

/// A verified token: who it stands for, and until when (seconds since the epoch).
#[derive(Clone, Debug)]
pub struct Verified {
    /// The principal.
    pub principal: Principal,
    /// The token's `exp`.
    pub expires_at: u64,
    /// The generation of the keys it was verified with.
    pub keys_generation: Option<u64>,
    /// Its `nonce` claim (an ID token's), if any.
    pub nonce: Option<String>,
}

/// Checks bearer tokens. See the module docs.
pub struct BearerVerifier {
    keys: Arc<KeySet>,
    claims: Claims,
    validations: HashMap<Algorithm, Validation>,
}

/// Algorithms a token may be signed with: asymmetric only.
const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

impl BearerVerifier {
    /// A verifier of tokens signed by `keys`' issuer for `claims.audience`.
    pub fn new(keys: Arc<KeySet>, claims: Claims) -> Self {
        let validations = ASYMMETRIC
            .iter()
            .map(|&alg| {
                let mut validation = Validation::new(alg);
                validation.set_issuer(&[keys.issuer(), &format!("{}/", keys.issuer())]);
                validation.set_audience(&[&claims.audience]);
                validation.set_required_spec_claims(&["exp", "iss", "aud"]);
                validation.validate_nbf = true;
                validation.leeway = claims.leeway.as_secs();
                (alg, validation)
            })
            .collect();
        Self {
            keys,
            claims,
            validations,
        }
    }

    /// The key set, for readiness and sign-in.
    pub fn keys(&self) -> &Arc<KeySet> {
        &self.keys
    }

    /// Verifies `token`, fetching the provider's keys again once (rate-limited) when it
    /// names a key the set does not hold.
    pub async fn verify(&self, token: &str) -> Result<Verified, Refusal> {
        match self.verify_with_keys_held(token) {
            Err(Refusal::UnknownKey) if self.keys.refresh_on_demand().await => {
                self.verify_with_keys_held(token)
            }
            other => other,
        }
    }

    /// Verifies `token` against the keys held now, fetching nothing.
    pub fn verify_with_keys_held(&self, token: &str) -> Result<Verified, Refusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::TooLong);
        }
        let header = header_of(token)?;
        let alg = header
            .get("alg")
            .and_then(Value::as_str)
            .and_then(|name| name.parse::<Algorithm>().ok())
            .filter(|alg| ASYMMETRIC.contains(alg))
            .ok_or(Refusal::Algorithm)?;
        let kid = match header.get("kid") {
            None | Some(Value::Null) => None,
            Some(Value::String(kid)) => Some(kid.as_str()),
            Some(_) => return Err(Refusal::Malformed),
        };
        let key = match self.keys.lookup(kid) {
            Lookup::Found(key) => key,
            Lookup::Unknown => return Err(Refusal::UnknownKey),
            Lookup::Unavailable => return Err(Refusal::KeysUnavailable),
        };
        if !key.algorithms.contains(&alg) {
            return Err(Refusal::Algorithm);
        }
        // An RSA signature is as long as the key's modulus: any other length is refused
        // before the key is prepared for a check (what most of a bogus token's cost is).
        if let jsonwebtoken::DecodingKeyKind::RsaModulusExponent { n, .. } = key.key.kind() {
            let modulus = n.iter().skip_while(|b| **b == 0).count();
            let signature = token.rsplit('.').next().map_or(0, |s| s.len() * 3 / 4);
            if signature != modulus {
                return Err(Refusal::Signature);
            }
        }
        let validation = self.validations.get(&alg).ok_or(Refusal::Algorithm)?;
        let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key.key, validation)
            .map_err(|e| match e.kind() {
                ErrorKind::InvalidSignature => Refusal::Signature,
                ErrorKind::ExpiredSignature => Refusal::Expired,
                ErrorKind::ImmatureSignature => Refusal::NotYetValid,
                ErrorKind::InvalidIssuer => Refusal::Issuer,
                ErrorKind::InvalidAudience => Refusal::Audience,
                ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => Refusal::Algorithm,
                ErrorKind::MissingRequiredClaim(claim) if claim == "iss" => Refusal::Issuer,
                ErrorKind::MissingRequiredClaim(claim) if claim == "aud" => Refusal::Audience,
                _ => Refusal::Malformed,
            })?;
        let claims = data.claims;
        let expires_at = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        Ok(Verified {
            principal: self.principal_of(&claims)?,
            expires_at,
            keys_generation: self.keys.generation(),
            nonce: claims.get("nonce").and_then(Value::as_str).map(str::to_owned),
        })
    }

    /// The principal the verified `claims` stand for.
    pub fn principal_of(&self, claims: &serde_json::Map<String, Value>) -> Result<Principal, Refusal> {
        let id = match claims.get(&self.claims.username_claim) {
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            Some(Value::Number(id)) => id.to_string(),
            _ => return Err(Refusal::User),
        };
        let user = format!("{}{id}", self.claims.user_prefix);
        if !valid_user_id(&user) {
            return Err(Refusal::User);
        }
        let display_name = ["name", "preferred_username"]
            .iter()
            .find_map(|claim| claims.get(*claim).and_then(Value::as_str))
            .filter(|name| {
                !name.is_empty() && name.len() <= MAX_USER_BYTES && !name.chars().any(char::is_control)
            })
            .unwrap_or(&user)
            .to_owned();
        let groups = groups_of(claims.get(&self.claims.groups_claim), &user);
        Ok(Principal {
            user,
            display_name,
            groups,
            read_only: false,
            path_prefix: String::new(),
            kind: "bearer".to_owned(),
            credential_id: String::new(),
        })
    }
}

/// The JOSE header of `token`, refused unless the token is three base64url parts.
fn header_of(token: &str) -> Result<serde_json::Map<String, Value>, Refusal> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::Malformed);
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| Refusal::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| Refusal::Malformed)
}

/// The groups a claim lists: an array of strings or one string; others are ignored.
fn groups_of(claim: Option<&Value>, user: &str) -> Vec<String> {
    let named: Vec<&str> = match claim {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        Some(Value::String(one)) => vec![one.as_str()],
        _ => Vec::new(),
    };
    if named.len() > MAX_GROUPS {
        tracing::warn!(
            user,
            groups = named.len(),
            "a token lists more than {MAX_GROUPS} groups; the rest are ignored"
        );
    }
    named
        .into_iter()
        .filter(|g| !g.is_empty() && g.len() <= 256 && !g.chars().any(char::is_control))
        .take(MAX_GROUPS)
        .map(str::to_owned)
        .collect()
}

/// Whether `user` can be a user id: a name a home can have (one path segment, not
/// reserved), at most [`MAX_USER_BYTES`], and without `:`, which Basic credentials
/// cannot carry in a user name (app passwords are sent with the user id).
pub fn valid_user_id(user: &str) -> bool {
    !user.is_empty()
        && user.len() <= MAX_USER_BYTES
        && !user.contains(':')
        && kubedav_api::path::VolumePath::parse(user).is_ok_and(|p| p.as_str() == user && !user.contains('/'))
}
