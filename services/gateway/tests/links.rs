//! Public links, in process: the issue's attack list, each refused. A read link lists
//! and downloads and reaches nothing above its folder in any spelling; a password link
//! asks for its password and locks out the guesser, never the link; a drop box takes
//! new files and renames a second of the same name, and lists, reads and overwrites
//! nothing; expiry, `max_uses`, `max_bytes`, revocation, a creator who lost the folder
//! and the policy's `links:` each end what the link does. No answer carries the token
//! or the folder's real path.

mod common;

use common::{App, Options, Response};
use http::{Method, StatusCode};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

const POLICY: &str = r#"
homes: /home/{user}
admins: [root]
groups:
  leads: [erin]
rules:
  - path: /projects
    grant: {"group:leads": manage}
  - path: /projects/quiet
    grant: {"group:leads": manage}
    links: read
"#;

const USERS: [&str; 4] = ["alice", "bob", "erin", "root"];

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
        "home/alice/pub/sub",
        "home/alice/drop",
        "home/alice/private",
        "projects/apollo",
        "projects/quiet",
    ] {
        std::fs::create_dir_all(app.disk(dir)).unwrap();
    }
    for (file, text) in [
        ("home/alice/pub/a.txt", "public a"),
        ("home/alice/pub/sub/b.txt", "public b"),
        ("home/alice/private/diary.txt", "dear diary"),
        ("home/alice/drop/existing.txt", "already here"),
        ("projects/apollo/spec.txt", "the spec"),
    ] {
        std::fs::write(app.disk(file), text).unwrap();
    }
    (app, now)
}

/// Makes a link as `user`; its id and URL path.
async fn publish(app: &App, user: &str, body: serde_json::Value) -> (StatusCode, serde_json::Value) {
    let response = app
        .client()
        .request(Method::POST, app.url("/.kubedav/links"))
        .basic_auth(user, Some("pw"))
        .header("x-kubedav-request", "1")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status();
    (
        status,
        serde_json::from_str(&response.text().await.unwrap()).unwrap_or_default(),
    )
}

async fn link(app: &App, body: serde_json::Value) -> (String, String) {
    let (status, made) = publish(app, "alice", body).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let url = made["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with("/.kubedav/s/") && url.ends_with('/'), "{url}");
    (made["id"].as_str().unwrap().to_owned(), url)
}

/// A request through a link, with no credentials unless `password` is given.
async fn through(
    app: &App,
    method: &str,
    url: &str,
    password: Option<&str>,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut request = app
        .client()
        .request(Method::from_bytes(method.as_bytes()).unwrap(), url);
    if let Some(password) = password {
        request = request.basic_auth("anyone", Some(password));
    }
    for (name, value) in headers {
        request = request.header(name, value);
    }
    if !body.is_empty() || method == "PUT" {
        request = request.body(body.to_owned());
    }
    request.send().await.unwrap()
}

/// The status and body of an answer, which must never carry the folder's real path,
/// nor the token when it is an error (a listing's hrefs are the link's URLs).
async fn seen(response: Response, token: &str) -> (StatusCode, String) {
    let status = response.status();
    let referrer = response.headers().get("referrer-policy").cloned();
    let text = response.text().await.unwrap();
    assert!(
        status.as_u16() < 400 || !text.contains(token),
        "the token in an error: {text}"
    );
    for folder in ["/home/alice/pub", "/home/alice/drop"] {
        assert!(!text.contains(folder), "the real path in an answer: {text}");
    }
    assert_eq!(
        referrer.as_ref().map(|v| v.to_str().unwrap()),
        Some("no-referrer")
    );
    (status, text)
}

fn token_of(url: &str) -> &str {
    url.trim_end_matches('/').rsplit('/').next().unwrap()
}

#[tokio::test]
async fn a_read_link_lists_and_downloads_and_reaches_nothing_above_its_folder() {
    let (app, _) = app();
    let (_, url) = link(
        &app,
        serde_json::json!({"path": "/home/alice/pub", "permission": "read"}),
    )
    .await;
    let token = token_of(&url).to_owned();
    let (status, text) = seen(
        through(&app, "GET", &format!("{url}a.txt"), None, &[], "").await,
        &token,
    )
    .await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, "public a"));
    let listing = through(&app, "PROPFIND", &url, None, &[("depth", "1")], "").await;
    let (status, text) = seen(listing, &token).await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    for member in ["", "sub/", "a.txt"] {
        assert!(
            text.contains(&format!("<D:href>{url}{member}</D:href>")),
            "{member}: {text}"
        );
    }
    // Writes of any kind are refused.
    for (method, headers) in [
        ("PUT", vec![]),
        ("DELETE", vec![]),
        ("MKCOL", vec![]),
        ("PROPPATCH", vec![]),
    ] {
        let target = if method == "MKCOL" {
            format!("{url}new/")
        } else {
            format!("{url}a.txt")
        };
        let (status, _) = seen(through(&app, method, &target, None, &headers, "x").await, &token).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method}");
    }
    assert_eq!(
        std::fs::read_to_string(app.disk("home/alice/pub/a.txt")).unwrap(),
        "public a"
    );
    // An error names the path as the link shows it, never where the folder is.
    let (status, text) = seen(
        through(&app, "GET", &format!("{url}sub/missing.txt"), None, &[], "").await,
        &token,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(text.contains("/sub/missing.txt"), "{text}");
    // Nothing above the folder, in every spelling.
    for escape in [
        "../private/diary.txt",
        "%2e%2e/private/diary.txt",
        ".%2e/private/diary.txt",
        "sub/../../private/diary.txt",
        "a.txt/..%2f..%2fprivate",
    ] {
        let response = through(&app, "GET", &format!("{url}{escape}"), None, &[], "").await;
        let (status, text) = seen(response, &token).await;
        assert!(status.is_client_error(), "{escape}: {status}");
        assert!(!text.contains("dear diary"), "{escape}");
    }
    // A Destination outside the link, even on a write link, is refused.
    let (_, write_url) = link(
        &app,
        serde_json::json!({"path": "/home/alice/pub", "permission": "write"}),
    )
    .await;
    let write_token = token_of(&write_url).to_owned();
    for destination in [
        app.url("/home/alice/private/a.txt"),
        app.url(&format!("{url}x.txt")),
        app.url("/.kubedav/s/other/x.txt"),
    ] {
        let response = through(
            &app,
            "COPY",
            &format!("{write_url}a.txt"),
            None,
            &[("destination", &destination)],
            "",
        )
        .await;
        let (status, _) = seen(response, &write_token).await;
        assert!(
            status.is_client_error() || status.is_server_error(),
            "{destination}: {status}"
        );
    }
    assert!(!app.disk("home/alice/private/a.txt").exists());
    // The write link writes inside; its folder itself stays put.
    let (status, _) = seen(
        through(&app, "PUT", &format!("{write_url}c.txt"), None, &[], "c").await,
        &write_token,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = seen(
        through(&app, "DELETE", &write_url, None, &[], "").await,
        &write_token,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn guessed_tokens_and_ended_links_answer_alike() {
    let (app, now) = app();
    let (id, url) = link(
        &app,
        serde_json::json!({"path": "/home/alice/pub", "permission": "read"}),
    )
    .await;
    let token = token_of(&url).to_owned();
    let (_, expiring) = link(
        &app,
        serde_json::json!({"path": "/home/alice/pub", "permission": "read", "expires_at": "2027-01-15T08:00:20Z"}),
    )
    .await;
    let unknown = seen(
        through(
            &app,
            "GET",
            "/.kubedav/s/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/a.txt",
            None,
            &[],
            "",
        )
        .await,
        "AAAA",
    )
    .await;
    assert_eq!(unknown.0, StatusCode::NOT_FOUND);
    // The clock reaches the expiry.
    *now.lock().unwrap() = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_020);
    let expired = seen(
        through(&app, "GET", &format!("{expiring}a.txt"), None, &[], "").await,
        token_of(&expiring),
    )
    .await;
    let revoke = app
        .client()
        .delete(app.url(&format!("/.kubedav/links/{id}")))
        .basic_auth("alice", Some("pw"))
        .header("x-kubedav-request", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(revoke.status(), StatusCode::NO_CONTENT);
    let revoked = seen(
        through(&app, "GET", &format!("{url}a.txt"), None, &[], "").await,
        &token,
    )
    .await;
    assert_eq!(unknown, expired);
    assert_eq!(unknown, revoked);
}

#[tokio::test]
async fn a_password_locks_out_the_guesser_and_never_the_link() {
    let (app, _) = app();
    let (_, url) = link(
        &app,
        serde_json::json!({"path": "/home/alice/pub", "permission": "read", "password": "open sesame"}),
    )
    .await;
    let token = token_of(&url).to_owned();
    let file = format!("{url}a.txt");
    let asked = through(&app, "GET", &file, None, &[], "").await;
    assert_eq!(asked.status(), StatusCode::UNAUTHORIZED);
    assert!(asked.headers().get("www-authenticate").is_some());
    let (status, text) = seen(
        through(&app, "GET", &file, Some("open sesame"), &[], "").await,
        &token,
    )
    .await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, "public a"));
    // A browser gets a page asking for it.
    let page = through(&app, "GET", &url, None, &[("accept", "text/html")], "").await;
    assert_eq!(page.status(), StatusCode::UNAUTHORIZED);
    assert!(page.headers().get("www-authenticate").is_none());
    assert!(page.text().await.unwrap().contains("needs a password"));
    // A guesser from one address is locked out after ten wrong passwords ...
    let mut statuses = Vec::new();
    for n in 0..12 {
        let guess = app
            .client()
            .get(&file)
            .basic_auth("x", Some(format!("guess {n}")))
            .sent_from("198.51.100.7")
            .send()
            .await
            .unwrap();
        statuses.push(guess.status());
    }
    assert_eq!(statuses[0], StatusCode::UNAUTHORIZED);
    assert_eq!(
        *statuses.last().unwrap(),
        StatusCode::TOO_MANY_REQUESTS,
        "{statuses:?}"
    );
    let right_but_locked = app
        .client()
        .get(&file)
        .basic_auth("x", Some("open sesame"))
        .sent_from("198.51.100.7")
        .send()
        .await
        .unwrap();
    assert_eq!(right_but_locked.status(), StatusCode::TOO_MANY_REQUESTS);
    // ... while whoever holds the password, from elsewhere, still opens the link.
    let elsewhere = app
        .client()
        .get(&file)
        .basic_auth("y", Some("open sesame"))
        .sent_from("203.0.113.9")
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), StatusCode::OK);
    // The page's unlock: a wrong password is refused without a challenge (which would
    // make the browser ask in a dialog of its own); it needs the proof of kubedav's own
    // page, then gives a cookie.
    let wrong = app
        .client()
        .request(Method::POST, &url)
        .header("x-kubedav-link-password", "not it")
        .header("x-kubedav-request", "1")
        .sent_from("203.0.113.50")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    assert!(wrong.headers().get("www-authenticate").is_none());
    let forged = through(
        &app,
        "POST",
        &url,
        None,
        &[("x-kubedav-link-password", "open sesame")],
        "",
    )
    .await;
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let unlocked = through(
        &app,
        "POST",
        &url,
        None,
        &[
            ("x-kubedav-link-password", "open sesame"),
            ("x-kubedav-request", "1"),
        ],
        "",
    )
    .await;
    assert_eq!(unlocked.status(), StatusCode::NO_CONTENT);
    let cookie = unlocked.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let (status, _) = seen(
        through(&app, "GET", &file, None, &[("cookie", &cookie)], "").await,
        &token,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // A download URL does not get past the password: no query or header does.
    let query = through(
        &app,
        "GET",
        &format!("{file}?download=1&password=open+sesame"),
        None,
        &[],
        "",
    )
    .await;
    assert_eq!(query.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_drop_box_takes_new_files_and_gives_nothing_back() {
    let (app, _) = app();
    let (_, url) = link(
        &app,
        serde_json::json!({"path": "/home/alice/drop", "permission": "upload"}),
    )
    .await;
    let token = token_of(&url).to_owned();
    for body in ["first", "second"] {
        let (status, _) = seen(
            through(&app, "PUT", &format!("{url}report.txt"), None, &[], body).await,
            &token,
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    assert_eq!(
        std::fs::read_to_string(app.disk("home/alice/drop/report.txt")).unwrap(),
        "first"
    );
    assert_eq!(
        std::fs::read_to_string(app.disk("home/alice/drop/report (2).txt")).unwrap(),
        "second"
    );
    let (status, _) = seen(
        through(
            &app,
            "PUT",
            &format!("{url}existing.txt"),
            None,
            &[],
            "overwrite?",
        )
        .await,
        &token,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        std::fs::read_to_string(app.disk("home/alice/drop/existing.txt")).unwrap(),
        "already here"
    );
    for (method, path, depth) in [
        ("GET", "existing.txt", None),
        ("HEAD", "existing.txt", None),
        ("PROPFIND", "", Some("1")),
        ("PROPFIND", "existing.txt", Some("0")),
        ("DELETE", "existing.txt", None),
        ("MOVE", "existing.txt", None),
        ("LOCK", "existing.txt", None),
    ] {
        let mut headers = vec![];
        if let Some(depth) = depth {
            headers.push(("depth", depth));
        }
        let destination = app.url(&format!("{url}moved.txt"));
        if method == "MOVE" {
            headers.push(("destination", destination.as_str()));
        }
        let (status, text) = seen(
            through(&app, method, &format!("{url}{path}"), None, &headers, "").await,
            &token,
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {text}");
        assert!(!text.contains("already here"));
    }
    let (status, _) = seen(
        through(&app, "PROPFIND", &url, None, &[("depth", "0")], "").await,
        &token,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::MULTI_STATUS,
        "a client mounts the drop box with a Depth 0 PROPFIND"
    );
    // A browser gets the upload page.
    let page = through(&app, "GET", &url, None, &[("accept", "text/html")], "").await;
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("Upload files"));
}

#[tokio::test]
async fn uses_and_bytes_are_bounded() {
    let (app, _) = app();
    let (_, url) = link(
        &app,
        serde_json::json!({"path": "/home/alice/pub", "permission": "read", "max_uses": 2}),
    )
    .await;
    let token = token_of(&url).to_owned();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(
            seen(
                through(&app, "GET", &format!("{url}a.txt"), None, &[], "").await,
                &token,
            )
            .await
            .0,
        );
    }
    assert_eq!(statuses, [StatusCode::OK, StatusCode::OK, StatusCode::GONE]);
    let (_, drop) = link(
        &app,
        serde_json::json!({"path": "/home/alice/drop", "permission": "upload", "max_bytes": 10}),
    )
    .await;
    let drop_token = token_of(&drop).to_owned();
    let (status, _) = seen(
        through(&app, "PUT", &format!("{drop}six.txt"), None, &[], "123456").await,
        &drop_token,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, text) = seen(
        through(&app, "PUT", &format!("{drop}five.txt"), None, &[], "12345").await,
        &drop_token,
    )
    .await;
    assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE, "{text}");
    assert!(!app.disk("home/alice/drop/five.txt").exists());
}

/// The uses records of a link that ended, as long as any remain.
fn uses_left(app: &App, id: &str) -> usize {
    std::fs::read_dir(app.disk(&format!(".kubedav/links/uses/{id}"))).map_or(0, |entries| entries.count())
}

#[tokio::test]
async fn an_ended_links_uses_are_removed_with_it() {
    let (app, now) = app();
    let (id, url) = link(
        &app,
        serde_json::json!({"path": "/home/alice/pub", "permission": "read", "max_uses": 5,
                           "expires_at": "2027-01-15T08:00:20Z"}),
    )
    .await;
    let token = token_of(&url).to_owned();
    let (status, _) = seen(
        through(&app, "GET", &format!("{url}a.txt"), None, &[], "").await,
        &token,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        uses_left(&app, &id),
        1,
        "a download of a link with max_uses claims a slot"
    );
    // The clock passes the expiry: the link is swept, and its uses follow it.
    *now.lock().unwrap() = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_021);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while uses_left(&app, &id) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        uses_left(&app, &id),
        0,
        "the uses of an expired link are still kept"
    );
}

#[tokio::test]
async fn a_link_ends_with_its_creators_right_and_the_policy_caps_its_kind() {
    let (app, _) = app();
    let (status, made) = publish(
        &app,
        "erin",
        serde_json::json!({"path": "/projects/apollo", "permission": "read"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let url = made["url"].as_str().unwrap().to_owned();
    assert_eq!(
        through(&app, "GET", &format!("{url}spec.txt"), None, &[], "")
            .await
            .status(),
        StatusCode::OK
    );
    let spec = format!("{url}spec.txt");
    let status_now = |yaml: String| {
        let (app, spec) = (&app, spec.clone());
        async move {
            app.gateway
                .replace_policy(Arc::new(kubedav_policy::Policy::from_yaml(&yaml).unwrap()));
            through(app, "GET", &spec, None, &[], "").await.status()
        }
    };
    // The leads may still write there but no longer manage it: erin may read the
    // folder, yet her link stops; and where links: turns off, every link there stops.
    let leads_write = POLICY.replacen(r#"{"group:leads": manage}"#, r#"{"group:leads": write}"#, 1);
    assert_eq!(status_now(leads_write).await, StatusCode::NOT_FOUND);
    let links_off = POLICY.replacen(
        r#"grant: {"group:leads": manage}
"#,
        r#"grant: {"group:leads": manage}
    links: off
"#,
        1,
    );
    assert_eq!(status_now(links_off).await, StatusCode::NOT_FOUND);
    assert_eq!(
        status_now(POLICY.to_owned()).await,
        StatusCode::OK,
        "back as it was"
    );
    // erin leaves the leads: her link stops.
    let without_erin =
        kubedav_policy::Policy::from_yaml(&POLICY.replace("leads: [erin]", "leads: [bob]")).unwrap();
    app.gateway.replace_policy(Arc::new(without_erin));
    assert_eq!(
        through(&app, "GET", &format!("{url}spec.txt"), None, &[], "")
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    // links: read under /projects/quiet: no drop box or write link there.
    let (status, said) = publish(
        &app,
        "bob",
        serde_json::json!({"path": "/projects/quiet", "permission": "upload"}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{said}");
    let (status, _) = publish(
        &app,
        "bob",
        serde_json::json!({"path": "/projects/quiet", "permission": "read"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    // Only a manager publishes; what the caller cannot see does not exist.
    let (status, _) = publish(
        &app,
        "bob",
        serde_json::json!({"path": "/home/alice/pub", "permission": "read"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // An administrator lists every link with its uses.
    let all = app
        .client()
        .get(app.url("/.kubedav/links?all"))
        .basic_auth("root", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(all.status(), StatusCode::OK);
    let all: serde_json::Value = serde_json::from_str(&all.text().await.unwrap()).unwrap();
    let all = all["all"].as_array().unwrap();
    assert_eq!(all.len(), 2);
    let erins = all.iter().find(|l| l["creator"] == "erin").unwrap();
    assert_eq!(erins["uses"], 2, "two downloads: {all:?}");
    assert!(
        all.iter()
            .all(|l| l.get("url").is_none() && !l.to_string().contains("token"))
    );
}

#[tokio::test]
async fn deleting_a_published_folder_ends_its_links() {
    let (app, _) = app();
    let (_, url) = link(
        &app,
        serde_json::json!({"path": "/home/alice/pub", "permission": "read"}),
    )
    .await;
    let deleted = app
        .client()
        .delete(app.url("/home/alice/pub/"))
        .basic_auth("alice", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    std::fs::create_dir_all(app.disk("home/alice/pub")).unwrap();
    std::fs::write(app.disk("home/alice/pub/a.txt"), "a new folder's file").unwrap();
    assert_eq!(
        through(&app, "GET", &format!("{url}a.txt"), None, &[], "")
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
}
