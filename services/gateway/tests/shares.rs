//! Shares, in process: alice shares a folder of her home with bob, and a project's
//! manager shares with a group. What a share gives is exactly its path and beneath,
//! with the way to it; everything else of alice's home still answers as absent; the
//! path itself stays put for bob; revoking, expiring, deleting or moving ends it.

mod common;

use common::{App, Options, Response};
use http::{Method, StatusCode};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

const POLICY: &str = r#"
homes: /home/{user}
admins: [root]
groups:
  staff: [carol]
  leads: [erin]
rules:
  - path: /projects
    grant: {"group:leads": manage, "group:staff": read}
"#;

const USERS: [&str; 6] = ["alice", "bob", "carol", "dave", "erin", "root"];

/// The time the shares read, which a test moves.
type Now = Arc<Mutex<SystemTime>>;

fn app() -> (App, Now) {
    let now: Now = Arc::new(Mutex::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    ));
    let clock = now.clone();
    let app = App::with(Options {
        users: USERS.iter().map(|u| (*u, "pw")).collect(),
        policy: Some(POLICY),
        clock: Some(Arc::new(move || *clock.lock().unwrap())),
        ..Options::default()
    });
    for dir in [
        "home/alice/project/docs",
        "home/alice/private",
        "home/bob",
        "projects/apollo",
    ] {
        std::fs::create_dir_all(app.disk(dir)).unwrap();
    }
    for (file, text) in [
        ("home/alice/project/plan.txt", "the plan"),
        ("home/alice/private/diary.txt", "dear diary"),
        ("projects/apollo/spec.txt", "the spec"),
    ] {
        std::fs::write(app.disk(file), text).unwrap();
    }
    (app, now)
}

async fn send(
    app: &App,
    user: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> Response {
    let mut request = app
        .client()
        .request(Method::from_bytes(method.as_bytes()).unwrap(), app.url(path))
        .basic_auth(user, Some("pw"));
    for (name, value) in headers {
        request = request.header(name, value);
    }
    if !body.is_empty() || method == "PUT" {
        request = request.body(body.to_owned());
    }
    request.send().await.unwrap()
}

/// A call to the shares API; the JSON answer.
async fn api(
    app: &App,
    user: &str,
    method: &str,
    rest: &str,
    body: serde_json::Value,
) -> (StatusCode, serde_json::Value) {
    let mut headers = vec![("x-kubedav-request", "1".to_owned())];
    let text = if body.is_null() {
        String::new()
    } else {
        headers.push(("content-type", "application/json".to_owned()));
        body.to_string()
    };
    let response = send(
        app,
        user,
        method,
        &format!("/.kubedav/shares{rest}"),
        &headers,
        &text,
    )
    .await;
    let status = response.status();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
    )
}

async fn share(app: &App, user: &str, path: &str, to: &str, permission: &str) -> String {
    let (status, made) = api(
        app,
        user,
        "POST",
        "",
        serde_json::json!({"path": path, "to": to, "permission": permission}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    made["id"].as_str().unwrap().to_owned()
}

async fn status(app: &App, user: &str, method: &str, path: &str) -> StatusCode {
    let depth = [("depth", "1".to_owned())];
    let headers: &[(&str, String)] = if method == "PROPFIND" { &depth } else { &[] };
    send(app, user, method, path, headers, "").await.status()
}

/// The hrefs a Depth 1 PROPFIND lists.
async fn listed(app: &App, user: &str, path: &str) -> Vec<String> {
    let response = send(app, user, "PROPFIND", path, &[("depth", "1".to_owned())], "").await;
    assert_eq!(response.status(), StatusCode::MULTI_STATUS, "{user} {path}");
    let text = response.text().await.unwrap();
    let mut hrefs: Vec<String> = text
        .split("<D:href>")
        .skip(1)
        .filter_map(|s| s.split("</D:href>").next())
        .map(str::to_owned)
        .collect();
    hrefs.sort();
    hrefs
}

#[tokio::test]
async fn bob_works_in_what_alice_shared_and_nowhere_else() {
    let (app, _) = app();
    assert_eq!(
        status(&app, "bob", "GET", "/home/alice/project/plan.txt").await,
        StatusCode::NOT_FOUND
    );
    share(&app, "alice", "/home/alice/project/", "user:bob", "write").await;
    let put = send(
        &app,
        "bob",
        "PUT",
        "/home/alice/project/notes.txt",
        &[],
        "bob's notes",
    )
    .await;
    assert_eq!(put.status(), StatusCode::CREATED);
    assert_eq!(
        std::fs::read_to_string(app.disk("home/alice/project/notes.txt")).unwrap(),
        "bob's notes"
    );
    let get = send(&app, "bob", "GET", "/home/alice/project/plan.txt", &[], "").await;
    assert_eq!(
        (get.status(), get.text().await.unwrap()),
        (StatusCode::OK, "the plan".to_owned())
    );
    // The way to the share shows only the share.
    assert_eq!(
        listed(&app, "bob", "/home/alice/").await,
        ["/home/alice/", "/home/alice/project/"]
    );
    assert_eq!(
        listed(&app, "bob", "/home/").await,
        ["/home/", "/home/alice/", "/home/bob/"]
    );
    assert_eq!(
        listed(&app, "bob", "/home/alice/project/").await,
        [
            "/home/alice/project/",
            "/home/alice/project/docs/",
            "/home/alice/project/notes.txt",
            "/home/alice/project/plan.txt"
        ]
    );
    // The rest of alice's home answers as absent, as before.
    for method in ["GET", "PROPFIND", "DELETE", "PROPPATCH"] {
        let hidden = status(&app, "bob", method, "/home/alice/private/diary.txt").await;
        let absent = status(&app, "bob", method, "/home/alice/private/none.txt").await;
        assert_eq!(
            (hidden, absent),
            (StatusCode::NOT_FOUND, StatusCode::NOT_FOUND),
            "{method}"
        );
    }
    assert_eq!(
        status(&app, "bob", "PUT", "/home/alice/new.txt").await,
        StatusCode::FORBIDDEN,
        "the way to a share is not writable"
    );
    // Checked at both ends: out of the share into bob's home, not into alice's rest.
    let destination = |path: &str| vec![("destination", app.url(path))];
    let copied = send(
        &app,
        "bob",
        "COPY",
        "/home/alice/project/plan.txt",
        &destination("/home/bob/plan.txt"),
        "",
    )
    .await;
    assert_eq!(copied.status(), StatusCode::CREATED);
    let into_private = send(
        &app,
        "bob",
        "COPY",
        "/home/alice/project/plan.txt",
        &destination("/home/alice/private/plan.txt"),
        "",
    )
    .await;
    let into_absent = send(
        &app,
        "bob",
        "COPY",
        "/home/alice/project/plan.txt",
        &destination("/home/alice/nothing/plan.txt"),
        "",
    )
    .await;
    assert_eq!(into_private.status(), into_absent.status());
    assert_eq!(into_private.status(), StatusCode::CONFLICT);
    // The shared path stays put for bob.
    assert_eq!(
        status(&app, "bob", "DELETE", "/home/alice/project").await,
        StatusCode::FORBIDDEN
    );
    let moved = send(
        &app,
        "bob",
        "MOVE",
        "/home/alice/project/",
        &destination("/home/bob/taken/"),
        "",
    )
    .await;
    assert_eq!(moved.status(), StatusCode::FORBIDDEN);
    assert!(app.disk("home/alice/project/plan.txt").exists());
    // Nobody else gained anything.
    assert_eq!(
        status(&app, "dave", "GET", "/home/alice/project/plan.txt").await,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_read_share_only_reads_and_a_group_share_reaches_its_members() {
    let (app, _) = app();
    share(&app, "alice", "/home/alice/project", "user:bob", "read").await;
    assert_eq!(
        status(&app, "bob", "GET", "/home/alice/project/plan.txt").await,
        StatusCode::OK
    );
    let put = send(&app, "bob", "PUT", "/home/alice/project/plan.txt", &[], "changed").await;
    assert_eq!(put.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        std::fs::read_to_string(app.disk("home/alice/project/plan.txt")).unwrap(),
        "the plan"
    );
    // erin leads projects (manage); carol is staff, so she reads it already, and dave not.
    share(&app, "erin", "/projects/apollo", "group:staff", "write").await;
    assert_eq!(
        send(&app, "carol", "PUT", "/projects/apollo/review.txt", &[], "ok")
            .await
            .status(),
        StatusCode::CREATED
    );
    assert_eq!(
        status(&app, "dave", "GET", "/projects/apollo/spec.txt").await,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_share_ends_when_revoked_or_expired() {
    let (app, now) = app();
    let id = share(&app, "alice", "/home/alice/project", "user:bob", "read").await;
    assert_eq!(
        status(&app, "bob", "GET", "/home/alice/project/plan.txt").await,
        StatusCode::OK
    );
    // Nobody but its creator (or an administrator) revokes it, and to them it does not exist.
    let (refused, _) = api(&app, "bob", "DELETE", &format!("/{id}"), serde_json::Value::Null).await;
    assert_eq!(refused, StatusCode::NOT_FOUND);
    let (revoked, _) = api(
        &app,
        "alice",
        "DELETE",
        &format!("/{id}"),
        serde_json::Value::Null,
    )
    .await;
    assert_eq!(revoked, StatusCode::NO_CONTENT);
    assert_eq!(
        status(&app, "bob", "GET", "/home/alice/project/plan.txt").await,
        StatusCode::NOT_FOUND
    );

    let expires = jiff::Timestamp::from_second(1_800_000_060).unwrap().to_string();
    let (made, _) = api(
        &app,
        "alice",
        "POST",
        "",
        serde_json::json!({"path": "/home/alice/project", "to": "user:bob", "permission": "read", "expires_at": expires}),
    )
    .await;
    assert_eq!(made, StatusCode::CREATED);
    assert_eq!(
        status(&app, "bob", "GET", "/home/alice/project/plan.txt").await,
        StatusCode::OK
    );
    *now.lock().unwrap() += Duration::from_secs(60);
    assert_eq!(
        status(&app, "bob", "GET", "/home/alice/project/plan.txt").await,
        StatusCode::NOT_FOUND
    );
    let (_, mine) = api(&app, "bob", "GET", "", serde_json::Value::Null).await;
    assert_eq!(mine["received"], serde_json::json!([]));
}

#[tokio::test]
async fn deleting_or_moving_the_path_ends_its_shares() {
    let (app, _) = app();
    share(&app, "alice", "/home/alice/project/docs", "user:bob", "write").await;
    share(&app, "alice", "/home/alice/private", "user:bob", "read").await;
    // A move of what holds a share ends it; a new folder under the old name is alice's alone.
    let moved = send(
        &app,
        "alice",
        "MOVE",
        "/home/alice/project/",
        &[("destination", app.url("/home/alice/old-project/"))],
        "",
    )
    .await;
    assert_eq!(moved.status(), StatusCode::CREATED);
    std::fs::create_dir_all(app.disk("home/alice/project/docs")).unwrap();
    std::fs::write(app.disk("home/alice/project/docs/new.txt"), "new").unwrap();
    assert_eq!(
        status(&app, "bob", "GET", "/home/alice/project/docs/new.txt").await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        status(&app, "bob", "PROPFIND", "/home/alice/old-project/docs/").await,
        StatusCode::NOT_FOUND
    );
    // A delete ends it too.
    assert_eq!(
        status(&app, "alice", "DELETE", "/home/alice/private/").await,
        StatusCode::NO_CONTENT
    );
    std::fs::create_dir_all(app.disk("home/alice/private")).unwrap();
    assert_eq!(
        status(&app, "bob", "PROPFIND", "/home/alice/private/").await,
        StatusCode::NOT_FOUND
    );
    let (_, shares) = api(&app, "alice", "GET", "", serde_json::Value::Null).await;
    assert_eq!(shares["made"], serde_json::json!([]));
}

#[tokio::test]
async fn only_a_manager_shares_and_only_with_users_or_groups() {
    let (app, _) = app();
    let ask = |user: &'static str, body: serde_json::Value| {
        let app = &app;
        async move { api(app, user, "POST", "", body).await }
    };
    let body = |path: &str, to: &str, permission: &str| serde_json::json!({"path": path, "to": to, "permission": permission});
    // bob cannot see alice's home: her folder does not exist for him.
    let (hidden, said) = ask("bob", body("/home/alice/project", "user:dave", "read")).await;
    let (absent, _) = ask("bob", body("/home/alice/none", "user:dave", "read")).await;
    assert_eq!(
        (hidden, absent),
        (StatusCode::NOT_FOUND, StatusCode::NOT_FOUND),
        "{said}"
    );
    // carol reads /projects but does not manage it.
    let (reader, said) = ask("carol", body("/projects/apollo", "user:dave", "read")).await;
    assert_eq!(reader, StatusCode::FORBIDDEN, "{said}");
    // Write on a share is not manage: bob cannot pass on what alice gave him.
    share(&app, "alice", "/home/alice/project", "user:bob", "write").await;
    let (reshare, said) = ask("bob", body("/home/alice/project", "user:dave", "read")).await;
    assert_eq!(reshare, StatusCode::FORBIDDEN, "{said}");
    for (bad, why) in [
        (body("/home/alice/project", "*", "read"), "anyone"),
        (body("/home/alice/project", "bob", "read"), "no kind"),
        (body("/home/alice/project", "user:alice", "read"), "herself"),
        (body("/home/alice/project", "user:bob", "manage"), "manage"),
        (body("/home/alice/../bob", "user:bob", "read"), "dot-dot"),
        (
            serde_json::json!({"path": "/home/alice/project", "to": "user:bob", "permission": "read", "expires_at": "2001-01-01T00:00:00Z"}),
            "past",
        ),
        (
            serde_json::json!({"path": "/home/alice/project", "to": "user:bob", "permission": "read", "colour": "red"}),
            "unknown key",
        ),
    ] {
        let (status, said) = ask("alice", bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{why}: {said}");
        assert!(said["error"].as_str().is_some_and(|e| !e.is_empty()), "{why}");
    }
    let (missing, _) = ask("alice", body("/home/alice/none", "user:bob", "read")).await;
    assert_eq!(missing, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bob_finds_what_was_shared_with_him_and_an_admin_finds_everything() {
    let (app, _) = app();
    let id = share(&app, "alice", "/home/alice/project", "user:bob", "write").await;
    share(&app, "erin", "/projects/apollo", "group:staff", "read").await;
    let (_, bobs) = api(&app, "bob", "GET", "", serde_json::Value::Null).await;
    assert_eq!(bobs["made"], serde_json::json!([]));
    let received = &bobs["received"][0];
    assert_eq!(
        (
            received["id"].as_str(),
            received["href"].as_str(),
            received["creator"].as_str(),
            received["permission"].as_str()
        ),
        (
            Some(id.as_str()),
            Some("/home/alice/project/"),
            Some("alice"),
            Some("write")
        )
    );
    let (refused, _) = api(&app, "alice", "GET", "?all", serde_json::Value::Null).await;
    assert_eq!(refused, StatusCode::FORBIDDEN);
    let (listed, all) = api(&app, "root", "GET", "?all", serde_json::Value::Null).await;
    assert_eq!(listed, StatusCode::OK);
    assert_eq!(all["all"].as_array().map(Vec::len), Some(2));
    let (revoked, _) = api(&app, "root", "DELETE", &format!("/{id}"), serde_json::Value::Null).await;
    assert_eq!(revoked, StatusCode::NO_CONTENT);
}
