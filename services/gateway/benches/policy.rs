//! What `--policy` adds to a request (`make bench`; docs/benchmarks.md): a whole request
//! through the gateway's service in this process (authentication with a cached
//! verification, the policy's check, the handler, the volume), as alice, with no policy
//! and with policies of 10 and 10,000 rules. GET 1 KiB and PROPFIND Depth 0 of a file in
//! the public space; PROPFIND Depth 1 of 1,000 files, half of them hidden from alice by
//! rules of their own under the policies. And what shares add (issue 53): GET 1 KiB
//! under 10 rules with no shares, with 1,000 shares made to others, and through a
//! share bob made to alice among them.
//!
//! In process and one request at a time, so the figure is the request's own work,
//! without the network or a noisy neighbour's share of the machine.

use axum::body::Body;
use criterion::{Criterion, criterion_group, criterion_main};
use http::Request;
use http_body_util::BodyExt;
use kubedav_api::auth::Auth;
use kubedav_gateway::app::HttpService;
use kubedav_gateway::request::ClientIp;
use kubedav_gateway::{Gateway, GatewayConfig, Ports};
use std::sync::Arc;
use std::time::Duration;

const MEMBERS: usize = 1000;
const AUTHORIZATION: &str = "Basic YWxpY2U6cHc="; // alice:pw

fn policy(rules: usize) -> String {
    let mut yaml = String::from("homes: /home/{user}\ngroups:\n");
    for g in 0..50 {
        yaml.push_str(&format!("  g{g}: [u{g}, v{g}]\n"));
    }
    yaml.push_str("rules:\n  - path: /public\n    grant: {\"*\": read}\n");
    for n in 0..rules.saturating_sub(1) {
        yaml.push_str(&format!(
            "  - path: /projects/p{n}\n    grant: {{\"group:g{}\": write, \"user:w{n}\": read}}\n",
            n % 50
        ));
    }
    for n in (1..MEMBERS).step_by(2) {
        yaml.push_str(&format!(
            "  - path: /public/many/f{n}.txt\n    grant: {{\"user:bob\": read}}\n"
        ));
    }
    yaml
}

struct Setup {
    service: HttpService,
    _root: tempfile::TempDir,
    _users: tempfile::TempDir,
}

/// Shares bob made of `/home/bob/s{n}`, each to another user; with `to_alice`, one more
/// of `/home/bob/shared` to alice.
fn shares(
    records: &dyn kubedav_api::records::Records,
    count: usize,
    to_alice: bool,
    runtime: &tokio::runtime::Runtime,
) {
    let area = kubedav_api::records::Area("shares");
    let share = |id: String, path: String, to: String| {
        serde_json::json!({
            "id": id, "path": path, "to": to, "permission": "read", "creator": "bob",
            "created": 0, "collection": true,
        })
    };
    let mut made: Vec<serde_json::Value> = (0..count)
        .map(|n| share(format!("s{n}"), format!("home/bob/s{n}"), format!("user:x{n}")))
        .collect();
    if to_alice {
        made.push(share(
            "alice".into(),
            "home/bob/shared".into(),
            "user:alice".into(),
        ));
    }
    runtime.block_on(async {
        for share in made {
            let key = format!("by-id/{}", share["id"].as_str().unwrap());
            records
                .put(area.put(&key, share.to_string().into_bytes()))
                .await
                .unwrap();
        }
        records.put(area.put("stamp", b"bench".to_vec())).await.unwrap();
    });
}

fn setup(rules: Option<usize>) -> Setup {
    setup_with(rules, None)
}

/// With `shares`: that many shares made to others, and whether one is to alice.
fn setup_with(rules: Option<usize>, with_shares: Option<(usize, bool)>) -> Setup {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("public/many")).unwrap();
    std::fs::create_dir_all(root.path().join("home/bob/shared")).unwrap();
    std::fs::write(root.path().join("public/1k.bin"), vec![7u8; 1024]).unwrap();
    std::fs::write(root.path().join("home/bob/shared/1k.bin"), vec![7u8; 1024]).unwrap();
    for n in 0..MEMBERS {
        std::fs::write(root.path().join(format!("public/many/f{n}.txt")), "x").unwrap();
    }
    let users = tempfile::tempdir().unwrap();
    let file = users.path().join("users");
    std::fs::write(
        &file,
        format!("alice:{}\n", kubedav_auth::passwd::sha512_crypt("pw").unwrap()),
    )
    .unwrap();
    let auth = kubedav_auth::AuthCore::new(kubedav_auth::AuthConfig {
        users_file: Some(file),
        oidc: None,
        allow_plaintext: false,
        cache_ttl: Duration::from_secs(3600),
        cache_capacity: 1000,
        workers: 1,
        queue: 64,
        max_failures_per_user: 0,
        max_failures_per_address: 0,
        lockout: Duration::from_secs(1),
    })
    .unwrap();
    let mut config = GatewayConfig::default();
    if let Some(rules) = rules {
        let policy = kubedav_policy::Policy::from_yaml(&policy(rules)).unwrap();
        for named in policy.named_paths() {
            // The files the rules hide exist already, as files.
            let path = root.path().join(named.as_str());
            if !path.exists() {
                std::fs::create_dir_all(path).unwrap();
            }
        }
        config.policy = Some(Arc::new(policy));
    }
    let fileio = kubedav_fileio::LocalFileIo::open(root.path()).unwrap();
    let records = Arc::new(fileio.records()) as Arc<dyn kubedav_api::records::Records>;
    if let Some((count, to_alice)) = with_shares {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        shares(&*records, count, to_alice, &runtime);
    }
    let ports = Ports {
        fileio: Arc::new(fileio),
        locks: Arc::new(kubedav_locks::MemoryLocks::new(Duration::from_secs(3600))),
        auth: Some(Arc::new(auth) as Arc<dyn Auth>),
        markdown: None,
        records: Some(records),
        keep: None,
        uploads: None,
        readiness: None,
    };
    Setup {
        service: Gateway::new(ports, config).service(),
        _root: root,
        _users: users,
    }
}

async fn request(service: &HttpService, method: &str, path: &str, depth: Option<&str>) -> usize {
    let mut builder = Request::builder()
        .method(method)
        .uri(format!("http://dav.test{path}"))
        .header("host", "dav.test")
        .header("authorization", AUTHORIZATION);
    if let Some(depth) = depth {
        builder = builder.header("depth", depth);
    }
    let mut request = builder.body(Body::empty()).unwrap();
    request
        .extensions_mut()
        .insert(ClientIp("192.0.2.1".parse().unwrap()));
    let response = service.answer(request).await.unwrap();
    assert!(
        response.status().is_success(),
        "{method} {path}: {}",
        response.status()
    );
    response.into_body().collect().await.unwrap().to_bytes().len()
}

fn requests(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let setups = [
        ("no policy", None),
        ("10 rules", Some(10)),
        ("10,000 rules", Some(10_000)),
    ];
    let cases = [
        ("GET 1 KiB", "GET", "/public/1k.bin", None),
        ("PROPFIND Depth 0", "PROPFIND", "/public/1k.bin", Some("0")),
        (
            "PROPFIND Depth 1, 1,000 files",
            "PROPFIND",
            "/public/many/",
            Some("1"),
        ),
    ];
    for (case, method, path, depth) in cases {
        let mut group = c.benchmark_group(case);
        for (name, rules) in setups {
            let setup = setup(rules);
            // The first request verifies the password; the rest find it cached.
            runtime.block_on(request(&setup.service, method, path, depth));
            group.bench_function(name, |b| {
                b.iter(|| runtime.block_on(request(&setup.service, method, path, depth)))
            });
        }
        group.finish();
    }
    let mut group = c.benchmark_group("GET 1 KiB, 10 rules");
    let shared = [
        ("no shares", None, "/public/1k.bin"),
        ("1,000 shares to others", Some((1000, false)), "/public/1k.bin"),
        (
            "through a share, among 1,000",
            Some((1000, true)),
            "/home/bob/shared/1k.bin",
        ),
    ];
    for (name, with_shares, path) in shared {
        // The gateway's task that reads the shares runs on this runtime.
        let _entered = runtime.enter();
        let setup = setup_with(Some(10), with_shares);
        runtime.block_on(async {
            // The first request verifies the password and waits for the shares' first read.
            for _ in 0..200 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                if request_status(&setup.service, "GET", path).await.is_success() {
                    break;
                }
            }
        });
        group.bench_function(name, |b| {
            b.iter(|| runtime.block_on(request(&setup.service, "GET", path, None)))
        });
    }
    group.finish();
}

async fn request_status(service: &HttpService, method: &str, path: &str) -> http::StatusCode {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://dav.test{path}"))
        .header("host", "dav.test")
        .header("authorization", AUTHORIZATION)
        .body(Body::empty())
        .unwrap();
    request
        .extensions_mut()
        .insert(ClientIp("192.0.2.1".parse().unwrap()));
    service.answer(request).await.unwrap().status()
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = requests
}
criterion_main!(benches);
