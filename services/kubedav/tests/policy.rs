//! `--policy` end to end, in both run modes and on both backends: the binary reads the
//! policy, creates the paths it names, and one user's home does not exist for another:
//! byte for byte and in time, for every method and several spellings, with Destination
//! and If headers naming it, and in every listing. (The methods one by one, spelled
//! every way, are `services/gateway/tests/policy.rs`, in process.)

#[macro_use]
mod common;

use common::*;
use reqwest::{Method, StatusCode};
use std::time::{Duration, Instant};

const POLICY: &str = r#"
homes: /home/{user}
admins: [root]
groups:
  staff: [alice, bob]
  readers: [carol]
rules:
  - path: /projects/apollo
    grant: {"group:staff": write, "group:readers": read}
  - path: /projects/apollo/board
    grant: {"group:staff": read, "user:root": write}
  - path: /public
    grant: {"*": read}
quota:
  homes: 64KiB
  paths: {/projects/apollo: 1MiB}
"#;

async fn start(mode: Mode) -> (Server, tempfile::TempDir) {
    start_with(mode, &[]).await
}

async fn start_with(mode: Mode, args: &[&str]) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(
        dir.path(),
        &[
            ("alice", "pw"),
            ("bob", "pw"),
            ("carol", "pw"),
            ("dave", "pw"),
            ("root", "pw"),
        ],
    );
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    // Every process gets it, as the chart mounts it: the gateway decides by it, fileio
    // holds writes to its quotas.
    let envs = [("KUBEDAV_POLICY", policy.to_str().unwrap())];
    let server = Server::start_auth(mode, Some(&users), &[], args, &envs).await;
    (server, dir)
}

async fn send(
    server: &Server,
    user: &str,
    method: &str,
    path: &str,
    depth: Option<&str>,
) -> reqwest::Response {
    let mut request = client()
        .request(Method::from_bytes(method.as_bytes()).unwrap(), server.url(path))
        .basic_auth(user, Some("pw"));
    if let Some(depth) = depth {
        request = request.header("depth", depth);
    }
    if method == "PUT" {
        request = request.body(format!("{user}'s"));
    }
    request.send().await.unwrap()
}

/// Status, the headers a client could compare, and the body with `renamed.0` written
/// `renamed.1`.
async fn seen(response: reqwest::Response, renamed: (&str, &str)) -> (StatusCode, Vec<String>, String) {
    let status = response.status();
    let mut headers: Vec<String> = response
        .headers()
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "date" | "x-request-id"))
        .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("?")))
        .collect();
    headers.sort();
    let body = response.text().await.unwrap().replace(renamed.0, renamed.1);
    (status, headers, body)
}

fn members(multistatus: &str) -> Vec<String> {
    let mut hrefs: Vec<String> = multistatus
        .split("<D:href>")
        .skip(1)
        .map(|rest| rest.split("</D:href>").next().unwrap().to_owned())
        .collect();
    hrefs[1..].sort();
    hrefs
}

/// The median time of `method` on `path`, interleaved with the same on `other` so both
/// see the same machine; (path's, other's).
async fn medians(server: &Server, method: &str, path: &str, other: &str) -> (Duration, Duration) {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        for (target, times) in [(path, &mut ours), (other, &mut theirs)] {
            let started = Instant::now();
            let _ = send(server, "alice", method, target, Some("0"))
                .await
                .bytes()
                .await;
            times.push(started.elapsed());
        }
    }
    ours.sort();
    theirs.sort();
    (ours[100], theirs[100])
}

/// alice, bob's neighbour: bob's home answers her as a home that does not exist, in
/// status, headers, body and time, and no listing shows it; carol reads the project
/// staff writes; dave sees only the public space and his own home.
async fn homes_are_absent_to_everyone_else(mode: Mode) {
    let (server, _dir) = start(mode).await;
    for named in ["home", "projects/apollo", "public"] {
        let made = send(&server, "root", "PROPFIND", &format!("/{named}/"), Some("0")).await;
        assert_eq!(
            made.status(),
            StatusCode::MULTI_STATUS,
            "/{named} was created at start"
        );
    }
    for user in ["alice", "bob"] {
        assert_eq!(
            send(&server, user, "PROPFIND", &format!("/home/{user}/"), Some("0"))
                .await
                .status(),
            StatusCode::MULTI_STATUS,
            "{user}'s home is made on their first request"
        );
    }
    assert_eq!(
        send(&server, "bob", "PUT", "/home/bob/secret.txt", None)
            .await
            .status(),
        StatusCode::CREATED
    );
    assert_eq!(
        send(&server, "bob", "PUT", "/projects/apollo/plan.txt", None)
            .await
            .status(),
        StatusCode::CREATED
    );

    for method in [
        "GET",
        "HEAD",
        "PROPFIND",
        "PROPPATCH",
        "PUT",
        "DELETE",
        "MKCOL",
        "LOCK",
        "UNLOCK",
        "COPY",
        "MOVE",
    ] {
        for (hidden, absent, renamed) in [
            // Names of the same length: the answers name them, and say their length.
            (
                "/home/bob/secret.txt",
                "/home/bob/absent.txt",
                ("/absent.txt", "/secret.txt"),
            ),
            ("/home/bob/", "/home/ann/", ("/home/ann", "/home/bob")),
            // Other spellings of the same paths.
            (
                "/home//bob/./secret.txt",
                "/home//bob/./absent.txt",
                ("/absent.txt", "/secret.txt"),
            ),
            (
                "/home/%62ob/secret.txt",
                "/home/%62ob/absent.txt",
                ("/absent.txt", "/secret.txt"),
            ),
            (
                "/home/alice/../bob/secret.txt",
                "/home/alice/../bob/absent.txt",
                ("/absent.txt", "/secret.txt"),
            ),
        ] {
            let there = seen(send(&server, "alice", method, hidden, Some("0")).await, ("", "")).await;
            let nowhere = seen(send(&server, "alice", method, absent, Some("0")).await, renamed).await;
            assert_eq!(there, nowhere, "alice {method} {hidden}");
        }
    }
    // A Destination or an If header naming bob's file answers as one naming a file
    // that is not there.
    assert_eq!(
        send(&server, "alice", "PUT", "/home/alice/mine.txt", None)
            .await
            .status(),
        StatusCode::CREATED
    );
    for (method, header) in [("COPY", "destination"), ("MOVE", "destination"), ("PUT", "if")] {
        let mut answers = Vec::new();
        for named in ["/home/bob/secret.txt", "/home/bob/absent.txt"] {
            let value = match header {
                "if" => format!("<{}> ([\"etag\"])", server.url(named)),
                _ => server.url(named),
            };
            let response = client()
                .request(
                    Method::from_bytes(method.as_bytes()).unwrap(),
                    server.url("/home/alice/mine.txt"),
                )
                .basic_auth("alice", Some("pw"))
                .header(header, value)
                .body("alice's")
                .send()
                .await
                .unwrap();
            answers.push(seen(response, ("/absent.txt", "/secret.txt")).await);
        }
        assert_eq!(
            answers[0], answers[1],
            "alice {method} with {header} naming bob's file"
        );
    }
    // A leak (a read of bob's file, a policy branch taken only for it) shows in
    // every measurement; the shared machine's noise shows in one now and then. So
    // each of three rounds may pass, and all three must fail to call it a leak.
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let (hidden, absent) = medians(&server, "GET", "/home/bob/secret.txt", "/home/bob/absent.txt").await;
        let (slower, faster) = (hidden.max(absent), hidden.min(absent));
        rounds.push((hidden, absent));
        if slower.as_secs_f64() <= faster.as_secs_f64() * 1.10 {
            break;
        }
    }
    assert!(
        rounds.len() < 3 || {
            let (hidden, absent) = rounds[2];
            hidden.max(absent).as_secs_f64() <= hidden.min(absent).as_secs_f64() * 1.10
        },
        "a hidden file's answer against an absent one's, in three rounds: {rounds:?}"
    );

    let listing = |user: &'static str, path: &'static str| {
        let server = &server;
        async move {
            let response = send(server, user, "PROPFIND", path, Some("1")).await;
            assert_eq!(response.status(), StatusCode::MULTI_STATUS, "{user} {path}");
            members(&response.text().await.unwrap())
        }
    };
    assert_eq!(
        listing("alice", "/").await,
        ["/", "/home/", "/projects/", "/public/"]
    );
    assert_eq!(listing("alice", "/home/").await, ["/home/", "/home/alice/"]);
    assert_eq!(
        listing("carol", "/projects/apollo/").await,
        ["/projects/apollo/", "/projects/apollo/plan.txt"]
    );
    assert_eq!(listing("dave", "/").await, ["/", "/home/", "/public/"]);
    assert_eq!(
        listing("root", "/home/").await,
        [
            "/home/",
            "/home/alice/",
            "/home/bob/",
            "/home/carol/",
            "/home/dave/",
            "/home/root/"
        ],
        "everyone who came has a home"
    );
    assert_eq!(
        send(&server, "carol", "PUT", "/projects/apollo/plan.txt", None)
            .await
            .status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        send(&server, "dave", "GET", "/projects/apollo/plan.txt", None)
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    // carol copies the project she reads: without the board, which is staff's.
    assert_eq!(
        send(&server, "root", "PUT", "/projects/apollo/board/minutes.txt", None)
            .await
            .status(),
        StatusCode::CREATED
    );
    let copied = client()
        .request(
            Method::from_bytes(b"COPY").unwrap(),
            server.url("/projects/apollo/"),
        )
        .basic_auth("carol", Some("pw"))
        .header("destination", server.url("/home/carol/apollo/"))
        .send()
        .await
        .unwrap();
    assert_eq!(copied.status(), StatusCode::CREATED);
    assert_eq!(
        listing("carol", "/home/carol/apollo/").await,
        ["/home/carol/apollo/", "/home/carol/apollo/plan.txt"]
    );
    assert_eq!(
        send(
            &server,
            "alice",
            "GET",
            "/projects/apollo/board/minutes.txt",
            None
        )
        .await
        .status(),
        StatusCode::OK,
        "staff read the board"
    );
    let kept = send(&server, "bob", "GET", "/home/bob/secret.txt", None).await;
    assert_eq!(
        kept.text().await.unwrap(),
        "bob's",
        "bob's file is as he wrote it"
    );
}

/// `--audit-log`: one JSON line per request names the user, method, path, decision and
/// the rule or home that decided, while the answer says none of it.
async fn each_request_leaves_an_audit_line(mode: Mode) {
    let (mut server, _dir) = start_with(mode, &["--audit-log", "--log-format", "json"]).await;
    let refused = send(&server, "alice", "GET", "/home/bob/diary.txt", None).await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    let answer = refused.text().await.unwrap();
    assert!(
        !answer.contains("home of") && !answer.contains("rule"),
        "{answer}"
    );
    let read = send(&server, "carol", "GET", "/projects/apollo/", None).await;
    assert_eq!(read.status(), StatusCode::OK);
    let gateway = match mode {
        Mode::AllInOne => "all",
        Mode::Microservices => "gateway",
    };
    let line = server
        .process(gateway)
        .logged(r#""path":"/home/bob/diary.txt""#)
        .await;
    let line: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(line["user"], "alice", "{line}");
    assert_eq!(line["method"], "GET", "{line}");
    assert_eq!(line["decision"], "refused", "{line}");
    assert_eq!(line["status"], 404, "{line}");
    assert_eq!(line["access"], "hidden", "{line}");
    assert_eq!(line["by"], "home of bob", "{line}");
    let line = server
        .process(gateway)
        .logged(r#""path":"/projects/apollo""#)
        .await;
    assert!(
        line.contains(r#""decision":"allowed""#) && line.contains("rule /projects/apollo"),
        "{line}"
    );
    assert!(
        line.contains(r#""user":"carol""#) && line.contains(r#""access":"read""#),
        "{line}"
    );
    // A MOVE out of alice's home into bob's (her first request that may go on, which
    // makes her home): refused for its destination, and the line says so.
    assert_eq!(
        send(&server, "alice", "PUT", "/home/alice/note.txt", None)
            .await
            .status(),
        StatusCode::CREATED
    );
    let moved = client()
        .request(
            Method::from_bytes(b"MOVE").unwrap(),
            server.url("/home/alice/note.txt"),
        )
        .basic_auth("alice", Some("pw"))
        .header("destination", server.url("/home/bob/note.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        moved.status(),
        StatusCode::CONFLICT,
        "as if bob's home were not there"
    );
    let line = server
        .process(gateway)
        .logged(r#""destination":"/home/bob/note.txt""#)
        .await;
    let line: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(line["method"], "MOVE", "{line}");
    assert_eq!(line["decision"], "refused", "{line}");
    assert_eq!(line["status"], 409, "{line}");
    assert_eq!(line["by"], "home of alice", "{line}");
    assert_eq!(line["destination_access"], "hidden", "{line}");
    assert_eq!(line["destination_by"], "home of bob", "{line}");
}

/// A PROPPATCH-free look at the quota figures of `path` for `user`: (available, used)
/// when shown.
async fn quota_of(server: &Server, user: &str, path: &str) -> Option<(u64, u64)> {
    let response = client()
        .request(Method::from_bytes(b"PROPFIND").unwrap(), server.url(path))
        .basic_auth(user, Some("pw"))
        .header("depth", "0")
        .body(r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:quota-available-bytes/><D:quota-used-bytes/></D:prop></D:propfind>"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::MULTI_STATUS);
    let xml = response.text().await.unwrap();
    let figure = |name: &str| -> Option<u64> {
        let open = format!("<D:{name}>");
        let start = xml.find(&open)? + open.len();
        let end = start + xml[start..].find('<')?;
        xml[start..end].parse().ok()
    };
    Some((figure("quota-available-bytes")?, figure("quota-used-bytes")?))
}

/// alice's home holds 64 KiB: writes fill it, the one that does not fit gets 507 and
/// leaves nothing, a MOVE into it is held to it too, and PROPFIND reports it: to her,
/// and to no one who may not read all of it.
async fn a_home_holds_its_quota(mode: Mode) {
    let (mut server, _dir) = start(mode).await;
    // The first count of what is stored is done (a write during it would be counted
    // twice until the next one: too much, never too little).
    let fileio = match mode {
        Mode::AllInOne => "all",
        Mode::Microservices => "fileio",
    };
    server.process(fileio).logged("quota: usage counted").await;
    let put = |path: &'static str, bytes: usize| {
        let server = &server;
        async move {
            client()
                .put(server.url(path))
                .basic_auth("alice", Some("pw"))
                .body(vec![b'a'; bytes])
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(put("/home/alice/one.bin", 40 * 1024).await, StatusCode::CREATED);
    assert_eq!(
        quota_of(&server, "alice", "/home/alice/").await,
        Some((24 * 1024, 40 * 1024))
    );
    let refused = client()
        .put(server.url("/home/alice/two.bin"))
        .basic_auth("alice", Some("pw"))
        .body(vec![b'b'; 30 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::INSUFFICIENT_STORAGE);
    let said = refused.text().await.unwrap();
    assert!(
        said.contains("home/alice") && said.contains("nothing was written"),
        "{said}"
    );
    assert_eq!(
        send(&server, "alice", "GET", "/home/alice/two.bin", None)
            .await
            .status(),
        StatusCode::NOT_FOUND,
        "nothing half-written"
    );
    // A body of undeclared length is stopped as it passes the quota, and leaves nothing.
    let chunks = futures_util::stream::iter(
        (0..8).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b'c'; 4096]))),
    );
    let streamed = client()
        .put(server.url("/home/alice/three.bin"))
        .basic_auth("alice", Some("pw"))
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), StatusCode::INSUFFICIENT_STORAGE);
    assert_eq!(
        send(&server, "alice", "GET", "/home/alice/three.bin", None)
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        put("/home/alice/small.bin", 20 * 1024).await,
        StatusCode::CREATED,
        "what fits still goes"
    );
    // Into her home from a space outside it: held to her quota as well.
    assert_eq!(
        client()
            .put(server.url("/projects/apollo/big.bin"))
            .basic_auth("alice", Some("pw"))
            .body(vec![b'd'; 16 * 1024])
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::CREATED
    );
    let moved = client()
        .request(
            Method::from_bytes(b"MOVE").unwrap(),
            server.url("/projects/apollo/big.bin"),
        )
        .basic_auth("alice", Some("pw"))
        .header("destination", server.url("/home/alice/big.bin"))
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), StatusCode::INSUFFICIENT_STORAGE);
    assert_eq!(
        send(&server, "alice", "GET", "/projects/apollo/big.bin", None)
            .await
            .status(),
        StatusCode::OK,
        "the refused move left its source"
    );
    assert_eq!(
        quota_of(&server, "alice", "/home/alice/").await,
        Some((4 * 1024, 60 * 1024))
    );
    // The project's root: carol reads it but not its board, so its sum is not hers to
    // see; bob, staff, reads all of it.
    assert_eq!(quota_of(&server, "carol", "/projects/apollo/").await, None);
    assert!(quota_of(&server, "bob", "/projects/apollo/").await.is_some());
    // Where no quota root lies, the volume's figures are not shown under a policy.
    assert_eq!(quota_of(&server, "alice", "/public/").await, None);
}

/// Replaces the policy file the way a ConfigMap's update does: the new text is written
/// beside it and renamed over it.
fn replace_policy(dir: &std::path::Path, text: &str) {
    let next = dir.join("policy.yaml.next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, dir.join("policy.yaml")).unwrap();
}

/// The status of `user`'s PROPFIND Depth 0 on `path`.
async fn propfind_status(server: &Server, user: &str, path: &str) -> StatusCode {
    send(server, user, "PROPFIND", path, Some("0")).await.status()
}

/// A changed policy is in force within 2 s, with no restart, while requests go on and
/// none of them fails; a changed file that cannot be used leaves the policy in force.
async fn a_changed_policy_is_in_force_within_two_seconds(mode: Mode) {
    let (mut server, dir) = start_with(mode, &["--log-format", "json"]).await;
    assert_eq!(
        propfind_status(&server, "carol", "/projects/apollo/").await,
        StatusCode::MULTI_STATUS
    );
    assert_eq!(
        propfind_status(&server, "dave", "/projects/apollo/").await,
        StatusCode::NOT_FOUND
    );
    let changing = std::sync::atomic::AtomicBool::new(true);
    let busy = async {
        let mut answered = 0;
        while changing.load(std::sync::atomic::Ordering::Relaxed) {
            let status = propfind_status(&server, "alice", "/projects/apollo/").await;
            assert_eq!(status, StatusCode::MULTI_STATUS, "alice, a member throughout");
            answered += 1;
        }
        answered
    };
    let change = async {
        replace_policy(dir.path(), &POLICY.replace("readers: [carol]", "readers: [dave]"));
        let changed = Instant::now();
        while propfind_status(&server, "carol", "/projects/apollo/").await != StatusCode::NOT_FOUND {
            assert!(
                changed.elapsed() < Duration::from_secs(2),
                "carol still reads the project 2 s after the policy took her out"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        changing.store(false, std::sync::atomic::Ordering::Relaxed);
    };
    let (answered, ()) = tokio::join!(busy, change);
    assert!(answered > 0);
    assert_eq!(
        propfind_status(&server, "dave", "/projects/apollo/").await,
        StatusCode::MULTI_STATUS
    );
    assert_eq!(
        propfind_status(&server, "carol", "/projects/apollo/").await,
        StatusCode::NOT_FOUND
    );

    replace_policy(
        dir.path(),
        "rules:\n  - path: /projects/apollo\n    grant: {\"group:staff\": everything}\n",
    );
    let gateway = match mode {
        Mode::AllInOne => "all",
        Mode::Microservices => "gateway",
    };
    let line = server.process(gateway).logged("cannot be used").await;
    assert!(
        line.contains("unknown variant `everything`, expected one of none, read, write, manage"),
        "the log says what to fix: {line}"
    );
    assert_eq!(
        propfind_status(&server, "dave", "/projects/apollo/").await,
        StatusCode::MULTI_STATUS,
        "the policy in force stays"
    );
}

/// A policy that cannot hold stops the start, naming the rule to fix.
#[tokio::test]
async fn a_policy_that_cannot_hold_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("alice", "pw")]);
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "rules:\n  - path: /team\n    grant: {\"*\": write}\n  - path: /team/secret\n    grant: {\"user:alice\": read}\n",
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_kubedav"))
        .args([
            "--target=all",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .arg("--root")
        .arg(dir.path())
        .arg("--users-file")
        .arg(&users)
        .arg("--policy")
        .arg(&policy)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("rule /team/secret is hidden from *, who may write rule /team"),
        "{stderr}"
    );
}

in_both_modes!(
    homes_are_absent_to_everyone_else,
    each_request_leaves_an_audit_line,
    a_changed_policy_is_in_force_within_two_seconds,
    a_home_holds_its_quota
);
on_s3!(homes_are_absent_to_everyone_else, a_home_holds_its_quota);
