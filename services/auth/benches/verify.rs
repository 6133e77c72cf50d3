//! The cost of one cold SHA-512 crypt verification against one cached verification,
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

criterion_group!(benches, verify);
criterion_main!(benches);
