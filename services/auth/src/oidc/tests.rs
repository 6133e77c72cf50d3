//! Bearer tokens against a key set held in memory: the good ones, and every classic
//! attack refused for its own reason.

use super::bearer::{BearerVerifier, Claims, Refusal};
use super::fetch::Fetcher;
use super::keys::{Clock, Freshness, KeySet};
use base64::Engine;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ISSUER: &str = "https://idp.example/realms/files";
const KEYS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/keys/");

fn file(name: &str) -> Vec<u8> {
    std::fs::read(format!("{KEYS}{name}")).unwrap()
}

fn jwk(name: &str) -> Value {
    serde_json::from_slice(&file(&format!("{name}.jwk.json"))).unwrap()
}

/// A clock the test moves.
fn clock() -> (Clock, Arc<Mutex<Instant>>) {
    let now = Arc::new(Mutex::new(Instant::now()));
    let read = now.clone();
    (Arc::new(move || *read.lock().unwrap()), now)
}

fn verifier_with(clock: Clock, keys: &[&str]) -> BearerVerifier {
    let freshness = Freshness {
        max_age: Duration::from_secs(3600),
        ..Freshness::default()
    };
    let set = Arc::new(KeySet::new(ISSUER, Fetcher::new(None).unwrap(), freshness, clock));
    let jwks: JwkSet =
        serde_json::from_value(json!({ "keys": keys.iter().map(|k| jwk(k)).collect::<Vec<_>>() })).unwrap();
    set.install(&jwks);
    BearerVerifier::new(
        set,
        Claims {
            audience: "kubedav".into(),
            username_claim: "sub".into(),
            groups_claim: "groups".into(),
            user_prefix: "oidc-".into(),
            leeway: Duration::from_secs(60),
        },
    )
}

fn verifier() -> BearerVerifier {
    verifier_with(clock().0, &["rsa-a", "ec-a"])
}

fn now() -> i64 {
    jsonwebtoken::get_current_timestamp() as i64
}

fn claims() -> Value {
    json!({
        "iss": ISSUER, "aud": "kubedav", "sub": "u-1234", "exp": now() + 300, "iat": now(),
        "name": "Alice Liddell", "groups": ["team", "admins"],
    })
}

fn signed(alg: Algorithm, kid: &str, key_file: &str, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    let key = match alg {
        Algorithm::ES256 => EncodingKey::from_ec_pem(&file(key_file)).unwrap(),
        _ => EncodingKey::from_rsa_pem(&file(key_file)).unwrap(),
    };
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

fn rs256(claims: &Value) -> String {
    signed(Algorithm::RS256, "rsa-a", "rsa-a.pem", claims)
}

fn with(change: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Value {
    let mut claims = claims();
    change(claims.as_object_mut().unwrap());
    claims
}

fn refusal(token: &str) -> Refusal {
    verifier()
        .verify_with_keys_held(token)
        .expect_err("the token must be refused")
}

/// A token from parts written by hand: header and claims as JSON, and a signature.
fn forged(header: &Value, claims: &Value, signature: &[u8]) -> String {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    format!(
        "{}.{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes()),
        b64(signature)
    )
}

#[test]
fn a_good_token_stands_for_its_user_with_the_prefix_and_its_groups() {
    let claims = claims();
    let verified = verifier().verify_with_keys_held(&rs256(&claims)).unwrap();
    let principal = verified.principal;
    assert_eq!(principal.user, "oidc-u-1234");
    assert_eq!(principal.display_name, "Alice Liddell");
    assert_eq!(principal.groups, ["team", "admins"]);
    assert_eq!(principal.kind, "bearer");
    assert!(!principal.read_only);
    assert_eq!(verified.expires_at as i64, claims["exp"].as_i64().unwrap());
    // An EC key of the set verifies its own tokens, and an audience list naming kubedav passes.
    let ec = signed(
        Algorithm::ES256,
        "ec-a",
        "ec-a.pem",
        &with(|c| {
            c.insert("aud".into(), json!(["account", "kubedav"]));
        }),
    );
    assert_eq!(
        verifier().verify_with_keys_held(&ec).unwrap().principal.user,
        "oidc-u-1234"
    );
}

#[test]
fn alg_none_is_refused() {
    let header = json!({"alg": "none", "typ": "JWT", "kid": "rsa-a"});
    assert_eq!(refusal(&forged(&header, &claims(), b"")), Refusal::Algorithm);
    assert_eq!(
        refusal(&format!(
            "{}.",
            forged(&header, &claims(), b"").trim_end_matches('.')
        )),
        Refusal::Algorithm
    );
}

#[test]
fn an_hmac_made_with_the_public_key_is_refused() {
    // The classic forgery: HS256 with the provider's public key (which anyone can
    // fetch) as the HMAC secret, naming the RSA key.
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("rsa-a".into());
    for secret in [file("rsa-a.pub.pem"), file("rsa-a.jwk.json")] {
        let token = jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(&secret)).unwrap();
        assert_eq!(refusal(&token), Refusal::Algorithm);
    }
}

#[test]
fn an_algorithm_the_key_does_not_allow_is_refused() {
    // The RSA key is published for RS256 only; the EC key cannot verify RSA signatures.
    assert_eq!(
        refusal(&signed(Algorithm::PS256, "rsa-a", "rsa-a.pem", &claims())),
        Refusal::Algorithm
    );
    assert_eq!(
        refusal(&signed(Algorithm::RS256, "ec-a", "rsa-a.pem", &claims())),
        Refusal::Algorithm
    );
}

#[test]
fn a_foreign_issuer_or_none_is_refused() {
    let foreign = with(|c| {
        c.insert("iss".into(), json!("https://evil.example/realms/files"));
    });
    assert_eq!(refusal(&rs256(&foreign)), Refusal::Issuer);
    let none = with(|c| {
        c.remove("iss");
    });
    assert_eq!(refusal(&rs256(&none)), Refusal::Issuer);
}

#[test]
fn a_wrong_audience_or_none_is_refused() {
    let other = with(|c| {
        c.insert("aud".into(), json!("account"));
    });
    assert_eq!(refusal(&rs256(&other)), Refusal::Audience);
    let none = with(|c| {
        c.remove("aud");
    });
    assert_eq!(refusal(&rs256(&none)), Refusal::Audience);
}

#[test]
fn expired_and_early_tokens_are_refused_beyond_the_leeway() {
    let expired = with(|c| {
        c.insert("exp".into(), json!(now() - 3600));
    });
    assert_eq!(refusal(&rs256(&expired)), Refusal::Expired);
    let within_leeway = with(|c| {
        c.insert("exp".into(), json!(now() - 20));
    });
    assert!(verifier().verify_with_keys_held(&rs256(&within_leeway)).is_ok());
    let early = with(|c| {
        c.insert("nbf".into(), json!(now() + 3600));
    });
    assert_eq!(refusal(&rs256(&early)), Refusal::NotYetValid);
    let no_expiry = with(|c| {
        c.remove("exp");
    });
    assert_eq!(refusal(&rs256(&no_expiry)), Refusal::Malformed);
}

#[test]
fn an_unknown_key_id_is_refused() {
    assert_eq!(
        refusal(&signed(Algorithm::RS256, "rsa-b", "rsa-b.pem", &claims())),
        Refusal::UnknownKey
    );
}

#[test]
fn a_signature_by_another_key_is_refused() {
    // Signed with key b, naming key a.
    assert_eq!(
        refusal(&signed(Algorithm::RS256, "rsa-a", "rsa-b.pem", &claims())),
        Refusal::Signature
    );
    // Claims changed after signing.
    let token = rs256(&claims());
    let mut parts: Vec<&str> = token.split('.').collect();
    let admin = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
        with(|c| {
            c.insert("sub".into(), json!("someone-else"));
        })
        .to_string(),
    );
    parts[1] = &admin;
    assert_eq!(refusal(&parts.join(".")), Refusal::Signature);
}

#[test]
fn oversized_and_malformed_tokens_are_refused() {
    let huge = with(|c| {
        c.insert("padding".into(), json!("x".repeat(20_000)));
    });
    assert_eq!(refusal(&rs256(&huge)), Refusal::TooLong);
    for bad in [
        "",
        "abc",
        "a.b",
        "a.b.c.d",
        "!!!.e30.sig",
        "e30.e30.sig",
        "bm90IGpzb24.e30.sig",
    ] {
        let why = refusal(bad);
        assert!(
            matches!(why, Refusal::Malformed | Refusal::Algorithm),
            "{bad}: {why:?}"
        );
    }
    assert_eq!(refusal("bm90IGpzb24.e30.sig"), Refusal::Malformed);
    let kid_not_a_string = json!({"alg": "RS256", "kid": 7});
    assert_eq!(
        refusal(&forged(&kid_not_a_string, &claims(), b"x")),
        Refusal::Malformed
    );
}

#[test]
fn a_user_claim_that_cannot_be_a_user_id_is_refused() {
    for sub in [
        json!(null),
        json!(""),
        json!("a/b"),
        json!("a:b"),
        json!("a\u{7}"),
        json!("x".repeat(300)),
    ] {
        let claims = with(|c| {
            c.insert("sub".into(), sub.clone());
        });
        assert_eq!(refusal(&rs256(&claims)), Refusal::User, "{sub}");
    }
    let numeric = with(|c| {
        c.insert("sub".into(), json!(42));
    });
    assert_eq!(
        verifier()
            .verify_with_keys_held(&rs256(&numeric))
            .unwrap()
            .principal
            .user,
        "oidc-42"
    );
}

#[test]
fn keys_older_than_the_bound_verify_nothing() {
    let (clock, now) = clock();
    let verifier = verifier_with(clock, &["rsa-a"]);
    let token = rs256(&claims());
    assert!(verifier.verify_with_keys_held(&token).is_ok());
    *now.lock().unwrap() += Duration::from_secs(3599);
    assert!(verifier.verify_with_keys_held(&token).is_ok(), "within the bound");
    *now.lock().unwrap() += Duration::from_secs(2);
    assert_eq!(
        verifier.verify_with_keys_held(&token).err(),
        Some(Refusal::KeysUnavailable)
    );
}

#[test]
fn symmetric_and_encryption_keys_are_never_used() {
    let set: JwkSet = serde_json::from_value(json!({"keys": [
        {"kty": "oct", "kid": "shared", "k": "c2VjcmV0", "alg": "HS256"},
        {"kty": "RSA", "kid": "enc", "use": "enc", "n": jwk("rsa-a")["n"], "e": "AQAB"},
    ]}))
    .unwrap();
    for jwk in &set.keys {
        assert!(
            super::keys::verification_key(jwk).is_none(),
            "{:?}",
            jwk.common.key_id
        );
    }
}

/// Tokens naming unknown keys fetch the provider's keys at most once per `min_refresh`,
/// however many arrive: each costs the sender nothing more than a refusal.
#[tokio::test]
async fn unknown_key_ids_fetch_the_keys_at_most_once_per_bound() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // A provider that takes each connection and closes it: every fetch fails, and each
    // one is a connection counted here.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    let (clock, now) = clock();
    let freshness = Freshness {
        min_refresh: Duration::from_secs(10),
        ..Freshness::default()
    };
    let set = KeySet::new(&issuer, Fetcher::new(None).unwrap(), freshness, clock);
    assert!(!set.refresh_on_demand().await);
    let after_one = connections.load(Ordering::SeqCst);
    assert!(after_one >= 1, "the first unknown key fetched nothing");
    for _ in 0..20 {
        assert!(!set.refresh_on_demand().await);
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        after_one,
        "unknown keys fetched again within the bound"
    );
    *now.lock().unwrap() += Duration::from_secs(10);
    assert!(!set.refresh_on_demand().await);
    assert!(
        connections.load(Ordering::SeqCst) > after_one,
        "no fetch once the bound had passed"
    );
}
