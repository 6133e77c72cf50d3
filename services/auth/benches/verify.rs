//! The cost of one cold SHA-512 crypt verification against one cached verification,
//! and of bearer tokens: a good one verified in full, one answered from the cache, and
//! the bogus tokens an unauthenticated attacker can send (a forged signature naming a
//! real key, which costs a signature check; a malformed token; an unknown key id),
//! through the auth core (`make bench` runs it; figures in docs/benchmarks.md).

use criterion::{Criterion, criterion_group, criterion_main};
use kubedav_api::auth::{Auth, VerifyRequest};
use kubedav_auth::{AuthConfig, AuthCore};
use std::time::Duration;

fn core(dir: &std::path::Path, cache_ttl: Duration) -> AuthCore {
    let path = dir.join("users");
    let hash = kubedav_auth::passwd::sha512_crypt("bench-password").unwrap();
    std::fs::write(&path, format!("bench:{hash}\n")).unwrap();
    AuthCore::new(AuthConfig {
        users_file: Some(path),
        oidc: None,
        allow_plaintext: false,
        cache_ttl,
        cache_capacity: 1000,
        workers: 1,
        queue: 64,
        max_failures_per_user: 0,
        max_failures_per_address: 0,
        lockout: Duration::from_secs(1),
    })
    .unwrap()
}

fn request() -> VerifyRequest {
    VerifyRequest {
        user: "bench".into(),
        password: "bench-password".into(),
        client_address: "127.0.0.1".into(),
        ..Default::default()
    }
}

fn verify(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cold = runtime.block_on(async { core(dir.path(), Duration::ZERO) });
    c.bench_function("sha512-crypt verification, cold (no cache)", |b| {
        b.iter(|| runtime.block_on(cold.verify(request())).unwrap())
    });
    let cached = runtime.block_on(async { core(dir.path(), Duration::from_secs(600)) });
    runtime.block_on(cached.verify(request())).unwrap();
    c.bench_function("verification answered from the cache", |b| {
        b.iter(|| runtime.block_on(cached.verify(request())).unwrap())
    });
}

const ISSUER: &str = "https://idp.example";
const KEYS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/keys/");

/// An auth core accepting tokens of the test key `rsa-a`, caching for `cache_ttl`.
fn bearer_core(dir: &std::path::Path, cache_ttl: Duration) -> AuthCore {
    use kubedav_auth::oidc::{OidcConfig, bearer::Claims, keys::Freshness};
    let path = dir.join("users");
    std::fs::write(&path, "nobody:$6$x$y\n").unwrap();
    let core = AuthCore::new(AuthConfig {
        users_file: Some(path),
        oidc: Some(OidcConfig {
            issuer: ISSUER.into(),
            claims: Claims {
                audience: "kubedav".into(),
                username_claim: "sub".into(),
                groups_claim: "groups".into(),
                user_prefix: "oidc-".into(),
                leeway: Duration::from_secs(60),
            },
            // One refetch for an unknown key id in the whole run.
            freshness: Freshness {
                min_refresh: Duration::from_secs(3600),
                ..Freshness::default()
            },
            ca_file: None,
            sign_in: None,
        }),
        allow_plaintext: false,
        cache_ttl,
        cache_capacity: 1000,
        workers: 1,
        queue: 64,
        max_failures_per_user: 0,
        max_failures_per_address: 0,
        lockout: Duration::from_secs(1),
    })
    .unwrap();
    let jwk = std::fs::read_to_string(format!("{KEYS}rsa-a.jwk.json")).unwrap();
    let set = serde_json::from_str(&format!("{{\"keys\":[{jwk}]}}")).unwrap();
    core.identity_provider().unwrap().bearer.keys().install(&set);
    core
}

fn token(kid: &str, key: &str) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some(kid.into());
    let now = jsonwebtoken::get_current_timestamp();
    let claims = serde_json::json!({
        "iss": ISSUER, "aud": "kubedav", "sub": "u-1", "exp": now + 3600, "iat": now,
        "name": "Bench", "groups": ["a", "b"],
    });
    let key =
        jsonwebtoken::EncodingKey::from_rsa_pem(&std::fs::read(format!("{KEYS}{key}")).unwrap()).unwrap();
    jsonwebtoken::encode(&header, &claims, &key).unwrap()
}

fn bearer(token: &str) -> VerifyRequest {
    VerifyRequest {
        bearer_token: token.to_owned(),
        client_address: "127.0.0.1".into(),
        ..Default::default()
    }
}

fn bearer_tokens(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let good = token("rsa-a", "rsa-a.pem");
    let cold = runtime.block_on(async { bearer_core(dir.path(), Duration::ZERO) });
    c.bench_function("bearer token (RS256), verified in full (no cache)", |b| {
        b.iter(|| runtime.block_on(cold.verify(bearer(&good))).unwrap())
    });
    let cached = runtime.block_on(async { bearer_core(dir.path(), Duration::from_secs(600)) });
    runtime.block_on(cached.verify(bearer(&good))).unwrap();
    c.bench_function("bearer token answered from the cache", |b| {
        b.iter(|| runtime.block_on(cached.verify(bearer(&good))).unwrap())
    });
    // Signed by another key but naming the real one: a full signature check, refused.
    let forged = token("rsa-a", "rsa-b.pem");
    c.bench_function("bogus bearer token: forged signature naming a real key", |b| {
        b.iter(|| runtime.block_on(cached.verify(bearer(&forged))).unwrap())
    });
    c.bench_function("bogus bearer token: malformed", |b| {
        b.iter(|| {
            runtime
                .block_on(cached.verify(bearer("eyJhbGciOiJSUzI1NiJ9.e30.c2ln")))
                .unwrap()
        })
    });
    // An unknown key id: one fetch per --oidc-jwks-min-refresh-seconds at most (the
    // provider here does not answer), then refused at once.
    let unknown = token("nope", "rsa-b.pem");
    runtime.block_on(cached.verify(bearer(&unknown))).unwrap();
    c.bench_function("bogus bearer token: unknown key id (refetch rate-limited)", |b| {
        b.iter(|| runtime.block_on(cached.verify(bearer(&unknown))).unwrap())
    });
}

criterion_group!(benches, verify, bearer_tokens);
criterion_main!(benches);
