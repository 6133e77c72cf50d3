//! Shares end to end (issue 53): two gateways over one storage, in both run modes and
//! on both backends, as replicas run. alice shares a folder of her home with bob
//! through one gateway; bob reads and writes it through the other; a group share
//! reaches a member the policy adds later; a revocation is refused through both
//! gateways within a second, and so is a public link's; and the shares outlive a
//! restart of every process and a Redis `FLUSHALL`. (What a share gives and what it never gives, method by method, is
//! `services/gateway/tests/shares.rs`, in process.)

#[macro_use]
mod common;

use common::fleet::Fleet;
use common::tools::run;
use common::{BACKEND, Backend, Mode, client, users_file};
use kubedav_testkit::RedisServer;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const POLICY: &str = "homes: /home/{user}\ngroups:\n  staff: [carol]\n";

/// Two gateways over one storage with the users and the policy of these tests.
async fn fleet(mode: Mode, redis: &RedisServer, dir: &Path) -> Fleet {
    let users = users_file(
        dir,
        &[("alice", "pw"), ("bob", "pw"), ("carol", "pw"), ("dave", "pw")],
    );
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let envs: Vec<(String, String)> = vec![
        ("KUBEDAV_LOCK_STORE".into(), redis.url(0)),
        ("KUBEDAV_USERS_FILE".into(), users.display().to_string()),
        ("KUBEDAV_POLICY".into(), policy.display().to_string()),
    ];
    common::fleet::fleet(mode, envs, dir).await
}

async fn send(at: &str, user: &str, method: &str, path: &str, body: &str) -> StatusCode {
    client()
        .request(method.parse().unwrap(), format!("{at}{path}"))
        .basic_auth(user, Some("pw"))
        .header("depth", "0")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
        .status()
}

/// A call to the shares API: status and JSON answer.
async fn api(at: &str, user: &str, method: &str, rest: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut request = client()
        .request(method.parse().unwrap(), format!("{at}/.kubedav/shares{rest}"))
        .basic_auth(user, Some("pw"))
        .header("x-kubedav-request", "1");
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// How long until `check` holds, polled every 10 ms for at most `bound`; `None` if it
/// never did.
async fn time_until<F, Fut>(bound: Duration, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while started.elapsed() <= bound {
        if check().await {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

async fn bob_gets_it_through_either_gateway_and_loses_it_within_a_second(mode: Mode) {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut fleet = fleet(mode, &redis, dir.path()).await;
    let [a, b] = fleet.gateways.clone();
    assert_eq!(
        send(&a, "alice", "MKCOL", "/home/alice/project/", "").await,
        StatusCode::CREATED
    );
    assert_eq!(
        send(&a, "alice", "PUT", "/home/alice/project/plan.txt", "the plan").await,
        StatusCode::CREATED
    );
    assert_eq!(
        send(&b, "bob", "GET", "/home/alice/project/plan.txt", "").await,
        StatusCode::NOT_FOUND
    );

    let (made, share) = api(
        &a,
        "alice",
        "POST",
        "",
        Some(json!({"path": "/home/alice/project", "to": "user:bob", "permission": "write"})),
    )
    .await;
    assert_eq!(made, StatusCode::CREATED, "{share}");
    // Through a at once; through b once it has read the stamp.
    assert_eq!(
        send(&a, "bob", "GET", "/home/alice/project/plan.txt", "").await,
        StatusCode::OK
    );
    let granted = time_until(Duration::from_secs(2), || async {
        send(&b, "bob", "GET", "/home/alice/project/plan.txt", "").await == StatusCode::OK
    })
    .await;
    assert!(granted.is_some(), "gateway b never honoured the share");
    assert_eq!(
        send(&b, "bob", "PUT", "/home/alice/project/notes.txt", "bob's").await,
        StatusCode::CREATED
    );
    let (_, bobs) = api(&b, "bob", "GET", "", None).await;
    assert_eq!(bobs["received"][0]["href"], "/home/alice/project/", "{bobs}");

    // A group share reaches a member the policy names only afterwards.
    let (made, _) = api(
        &a,
        "alice",
        "POST",
        "",
        Some(json!({"path": "/home/alice/project", "to": "group:staff", "permission": "read"})),
    )
    .await;
    assert_eq!(made, StatusCode::CREATED);
    assert_eq!(
        send(&b, "dave", "GET", "/home/alice/project/plan.txt", "").await,
        StatusCode::NOT_FOUND
    );
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY.replace("[carol]", "[carol, dave]")).unwrap();
    let joined = time_until(Duration::from_secs(4), || async {
        send(&b, "dave", "GET", "/home/alice/project/plan.txt", "").await == StatusCode::OK
    })
    .await;
    assert!(joined.is_some(), "dave never got the group's share");

    // Durable: every process restarted, Redis flushed, and the shares and a link with
    // a password still hold.
    let kept_link = client()
        .post(format!("{a}/.kubedav/links"))
        .basic_auth("alice", Some("pw"))
        .header("x-kubedav-request", "1")
        .json(&json!({"path": "/home/alice/project", "permission": "read", "password": "kept-password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(kept_link.status(), StatusCode::CREATED);
    let kept_link: Value = kept_link.json().await.unwrap();
    let kept_link = kept_link["url"].as_str().unwrap().to_owned();
    run("redis-cli", &["-u", &redis.url(0), "FLUSHALL"], None).await;
    for process in &mut fleet.processes {
        process.restart().await;
    }
    for gateway in [&a, &b] {
        let opened = client()
            .get(format!("{gateway}{kept_link}plan.txt"))
            .basic_auth("anyone", Some("kept-password"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            opened.status(),
            StatusCode::OK,
            "the link through {gateway} after the restart"
        );
    }
    for (gateway, user) in [(&a, "bob"), (&b, "bob"), (&a, "dave")] {
        let kept = time_until(Duration::from_secs(2), || async {
            send(gateway, user, "GET", "/home/alice/project/plan.txt", "").await == StatusCode::OK
        })
        .await;
        assert!(
            kept.is_some(),
            "{user} lost the share through {gateway} after the restart"
        );
    }

    // Revoked through a: refused through a at once, through b within a second.
    let id = share["id"].as_str().unwrap();
    let revoked_at = Instant::now();
    let (revoked, _) = api(&a, "alice", "DELETE", &format!("/{id}"), None).await;
    assert_eq!(revoked, StatusCode::NO_CONTENT);
    assert_eq!(
        send(&a, "bob", "GET", "/home/alice/project/plan.txt", "").await,
        StatusCode::NOT_FOUND
    );
    let refused = time_until(Duration::from_secs(2), || async {
        send(&b, "bob", "GET", "/home/alice/project/plan.txt", "").await == StatusCode::NOT_FOUND
    })
    .await
    .map(|_| revoked_at.elapsed());
    println!("figure: a revocation through gateway a was refused through gateway b after {refused:?}");
    assert!(
        refused.is_some_and(|after| after < Duration::from_secs(1)),
        "gateway b still honoured the revoked share: {refused:?}"
    );
    // The group's share is another share: dave keeps it.
    assert_eq!(
        send(&b, "dave", "GET", "/home/alice/project/plan.txt", "").await,
        StatusCode::OK
    );

    // A public link made through a opens through b; revoked through a, b refuses it
    // within a second too.
    let made = client()
        .post(format!("{a}/.kubedav/links"))
        .basic_auth("alice", Some("pw"))
        .header("x-kubedav-request", "1")
        .json(&json!({"path": "/home/alice/project", "permission": "read"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    let made: Value = made.json().await.unwrap();
    let through_b = format!("{b}{}plan.txt", made["url"].as_str().unwrap());
    let anyone = |url: String| async move { client().get(url).send().await.unwrap().status() };
    let opened = time_until(Duration::from_secs(2), || async {
        anyone(through_b.clone()).await == StatusCode::OK
    })
    .await;
    assert!(opened.is_some(), "gateway b never opened the link");
    let revoked_at = Instant::now();
    let revoked = client()
        .delete(format!("{a}/.kubedav/links/{}", made["id"].as_str().unwrap()))
        .basic_auth("alice", Some("pw"))
        .header("x-kubedav-request", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
    let refused = time_until(Duration::from_secs(2), || async {
        anyone(through_b.clone()).await == StatusCode::NOT_FOUND
    })
    .await
    .map(|_| revoked_at.elapsed());
    println!("figure: a link revoked through gateway a was refused through gateway b after {refused:?}");
    assert!(
        refused.is_some_and(|after| after < Duration::from_secs(1)),
        "gateway b still opened the revoked link: {refused:?}"
    );
}

/// The file manager's shares in headless Chromium (`tests/clients/browser_shares.py`):
/// alice shares a folder from her home's page; bob finds it under "Shared with me",
/// follows it, and may then write in it (screenshots kept).
async fn shared_in_the_file_manager(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("alice", "pw"), ("bob", "pw")]);
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let envs = [("KUBEDAV_POLICY", policy.to_str().unwrap())];
    let server = common::Server::start_auth(mode, Some(&users), &[], &[], &envs).await;
    let at = server.url("");
    let at = at.trim_end_matches('/');
    assert_eq!(
        send(at, "alice", "MKCOL", "/home/alice/project/", "").await,
        StatusCode::CREATED
    );
    assert_eq!(
        send(at, "alice", "PUT", "/home/alice/project/plan.txt", "the plan").await,
        StatusCode::CREATED
    );
    let python = common::tools::tool("KUBEDAV_BROWSER_PYTHON", "need-browser.sh");
    let shots = std::env::var("KUBEDAV_SCREENSHOTS").map_or_else(|_| dir.path().to_owned(), Into::into);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/browser_shares.py");
    let output = run(&python, &[script, at, shots.to_str().unwrap(), "pw"], None).await;
    assert!(output.contains("shares view ok"), "{output}");
    assert!(shots.join("shares-made.png").exists() && shots.join("shares-received.png").exists());
    assert_eq!(
        send(at, "bob", "PUT", "/home/alice/project/from-bob.txt", "bob's").await,
        StatusCode::CREATED,
        "the share made in the browser lets bob write"
    );
}

in_both_modes!(
    bob_gets_it_through_either_gateway_and_loses_it_within_a_second,
    shared_in_the_file_manager
);
on_s3!(bob_gets_it_through_either_gateway_and_loses_it_within_a_second);
