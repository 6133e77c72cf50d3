//! Fuzzes what an unauthenticated client's credentials go through before any secret is
//! looked at: the `Authorization` header as the gateway reads it (Basic or Bearer, or a
//! refusal), an app password's shape, and a bearer token checked against a provider's
//! key (the tests' RSA key), and a sign-in's sealed flow as the callback's cookie brings
//! it: any bytes give credentials or a refusal, never a panic, and no token or flow the
//! fuzzer makes is ever accepted.

use kubedav_auth::app_passwords::secret::{LENGTH, id_of, is_id};
use kubedav_auth::oidc::bearer::{BearerVerifier, Claims};
use kubedav_auth::oidc::fetch::Fetcher;
use kubedav_auth::oidc::keys::{Freshness, KeySet, system_clock};
use kubedav_auth::sign_in::flow::Flow;
use kubedav_gateway::edge::auth::{Credentials, credentials};
use std::sync::{Arc, LazyLock};

static VERIFIER: LazyLock<BearerVerifier> = LazyLock::new(|| {
    let keys = KeySet::new(
        "https://idp.example",
        Fetcher::new(None).expect("a client"),
        Freshness::default(),
        system_clock(),
    );
    let jwk = include_str!("../../auth/tests/keys/rsa-a.jwk.json");
    keys.install(&serde_json::from_str(&format!("{{\"keys\":[{jwk}]}}")).expect("a JWKS"));
    BearerVerifier::new(
        Arc::new(keys),
        Claims {
            audience: "kubedav".into(),
            username_claim: "sub".into(),
            groups_claim: "groups".into(),
            user_prefix: "oidc-".into(),
            leeway: std::time::Duration::from_secs(60),
        },
    )
});

/// Checks one input: returns when every property holds, panics naming the one that
/// does not.
pub fn check(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Some(id) = id_of(text) {
            assert_eq!(text.len(), LENGTH);
            assert!(is_id(id), "{id:?}");
        }
        assert!(
            Flow::open(text, &[7; 32], 0).is_err(),
            "a made-up sign-in flow was accepted: {text:?}"
        );
        assert!(
            VERIFIER.verify_with_keys_held(text).is_err(),
            "a made-up token was accepted: {text:?}"
        );
    }
    let Ok(value) = http::HeaderValue::from_bytes(data) else {
        return;
    };
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::AUTHORIZATION, value);
    match credentials(&headers) {
        Some(Ok(Credentials::Bearer(token))) => assert!(!token.is_empty() && !token.contains(' ')),
        Some(Ok(Credentials::Basic { user, password })) => {
            assert!(!user.contains(':'));
            let _ = id_of(&password);
        }
        Some(Ok(Credentials::Session(_))) => unreachable!("the header never gives a session"),
        Some(Err(_)) => {}
        None => unreachable!("the header is there"),
    }
}
