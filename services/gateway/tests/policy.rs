//! The access policy at the gateway, in process: five users, two groups, homes, a shared
//! space, a space others only read, and an administrator. Each test attacks one way
//! across: what one user cannot read must answer exactly as what does not exist, and
//! must be missing from every listing.

mod common;

use common::{App, Options, Response};
use http::{Method, StatusCode};

const POLICY: &str = r#"
homes: /home/{user}
admins: [root]
groups:
  staff: [alice, bob]
  readers: [carol]
rules:
  - path: /projects/apollo
    grant: {"group:staff": write, "group:readers": read}
  - path: /public
    grant: {"*": read, "user:alice": write}
"#;

const USERS: [&str; 5] = ["alice", "bob", "carol", "dave", "root"];

fn app() -> App {
    let app = App::with(Options {
        users: USERS.iter().map(|u| (*u, "pw")).collect(),
        policy: Some(POLICY),
        ..Options::default()
    });
    for dir in ["home/alice", "home/bob/deep", "elsewhere"] {
        std::fs::create_dir_all(app.disk(dir)).unwrap();
    }
    for (file, text) in [
        ("home/alice/mine.txt", "alice's"),
        ("home/bob/secret.txt", "bob's"),
        ("home/bob/deep/more.txt", "bob's too"),
        ("projects/apollo/plan.txt", "the plan"),
        ("public/readme.txt", "for all"),
        ("elsewhere/x.txt", "no rule"),
    ] {
        std::fs::write(app.disk(file), text).unwrap();
    }
    app
}

async fn send<V: AsRef<str>>(
    app: &App,
    user: &str,
    method: &str,
    path: &str,
    headers: &[(&str, V)],
) -> Response {
    let mut request = app
        .client()
        .request(Method::from_bytes(method.as_bytes()).unwrap(), app.url(path))
        .basic_auth(user, Some("pw"));
    for (name, value) in headers {
        request = request.header(name, value.as_ref().replace("{base}", &app.url("")));
    }
    if matches!(method, "PUT" | "PROPPATCH" | "LOCK") {
        let body = match method {
            "PROPPATCH" => {
                r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><x xmlns="urn:t">1</x></D:prop></D:set></D:propertyupdate>"#
            }
            "LOCK" => {
                r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#
            }
            _ => "written",
        };
        request = request.body(body);
    }
    request.send().await.unwrap()
}

/// What a client can tell of an answer: status, body, and every header but the ones
/// that differ per request. The body's `as_said` is written `said` (an answer names its
/// path: the absent path's answer is compared under the hidden path's name).
async fn seen(
    response: Response,
    (as_said, said): (&str, &str),
) -> (StatusCode, Vec<(String, String)>, String) {
    let status = response.status();
    let mut headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "date" | "x-request-id"))
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("?").to_owned()))
        .collect();
    headers.sort();
    (
        status,
        headers,
        response.text().await.unwrap().replace(as_said, said),
    )
}

/// Every method alice may try on a path of bob's: (method, headers). Her UNLOCK carries
/// the token of bob's lock on his file, as if it had leaked.
fn attempts(bobs_token: &str) -> Vec<(&'static str, Vec<(&'static str, String)>)> {
    vec![
        ("GET", vec![]),
        ("HEAD", vec![]),
        ("PROPFIND", vec![("depth", "0".into())]),
        ("PROPFIND", vec![("depth", "1".into())]),
        ("PUT", vec![]),
        ("DELETE", vec![]),
        ("MKCOL", vec![]),
        ("PROPPATCH", vec![]),
        ("LOCK", vec![]),
        ("UNLOCK", vec![("lock-token", format!("<{bobs_token}>"))]),
        (
            "COPY",
            vec![("destination", "{base}/home/alice/copied.txt".into())],
        ),
        (
            "MOVE",
            vec![("destination", "{base}/home/alice/moved.txt".into())],
        ),
    ]
}

#[tokio::test]
async fn what_alice_cannot_read_answers_as_what_does_not_exist() {
    let app = app();
    // Spelled as a client might, to reach the same hidden paths.
    // (hidden, absent, how the absent one's name differs)
    let spellings = [
        (
            "/home/bob/secret.txt",
            "/home/bob/nothing.txt",
            ("nothing", "secret"),
        ),
        (
            "/home/bob/deep/more.txt",
            "/home/nobody/deep/more.txt",
            ("nobody", "bob"),
        ),
        ("/home/bob/deep/", "/home/nobody/deep/", ("nobody", "bob")),
        ("/home/bob/", "/home/nobody/", ("nobody", "bob")),
        (
            "/home//bob/./secret.txt",
            "/home//nobody/./secret.txt",
            ("nobody", "bob"),
        ),
        (
            "/home/%62ob/secret.txt",
            "/home/%6eobody/secret.txt",
            ("nobody", "bob"),
        ),
        (
            "/home/alice/../bob/secret.txt",
            "/home/alice/../nobody/secret.txt",
            ("nobody", "bob"),
        ),
        (
            "/projects/../home/bob/secret.txt",
            "/projects/../home/nobody/secret.txt",
            ("nobody", "bob"),
        ),
        ("/elsewhere/x.txt", "/elsewhere/y.txt", ("y.txt", "x.txt")),
    ];
    let locked = send(
        &app,
        "bob",
        "LOCK",
        "/home/bob/secret.txt",
        &[] as &[(&str, &str)],
    )
    .await;
    assert_eq!(locked.status(), StatusCode::OK);
    let token = locked.headers()["lock-token"].to_str().unwrap();
    let token = token.trim_matches(['<', '>']).to_owned();
    for (hidden, absent, renamed) in spellings {
        for (method, headers) in attempts(&token) {
            let there = seen(send(&app, "alice", method, hidden, &headers).await, ("", "")).await;
            let nowhere = seen(send(&app, "alice", method, absent, &headers).await, renamed).await;
            assert_eq!(there, nowhere, "alice {method} {hidden} against {absent}");
            assert!(
                matches!(
                    there.0,
                    StatusCode::NOT_FOUND
                        | StatusCode::CONFLICT
                        | StatusCode::FORBIDDEN
                        | StatusCode::BAD_REQUEST
                ),
                "alice {method} {hidden}: {there:?}"
            );
        }
    }
    // Nothing of bob's changed or moved.
    assert_eq!(
        std::fs::read_to_string(app.disk("home/bob/secret.txt")).unwrap(),
        "bob's"
    );
    assert!(app.disk("home/bob/deep/more.txt").exists());
    assert!(!app.disk("home/alice/copied.txt").exists());
    assert!(!app.disk("home/alice/moved.txt").exists());
}

#[tokio::test]
async fn a_destination_alice_cannot_read_answers_as_one_that_does_not_exist() {
    let app = app();
    for method in ["COPY", "MOVE"] {
        for overwrite in ["T", "F"] {
            let to = |path: &'static str| vec![("destination", path), ("overwrite", overwrite)];
            let there = seen(
                send(
                    &app,
                    "alice",
                    method,
                    "/home/alice/mine.txt",
                    &to("{base}/home/bob/secret.txt"),
                )
                .await,
                ("", ""),
            )
            .await;
            let nowhere = seen(
                send(
                    &app,
                    "alice",
                    method,
                    "/home/alice/mine.txt",
                    &to("{base}/home/nobody/secret.txt"),
                )
                .await,
                ("nobody", "bob"),
            )
            .await;
            assert_eq!(there, nowhere, "{method} overwrite {overwrite}");
            assert_eq!(there.0, StatusCode::CONFLICT, "{method}: {there:?}");
        }
    }
    assert_eq!(
        std::fs::read_to_string(app.disk("home/bob/secret.txt")).unwrap(),
        "bob's"
    );
    assert_eq!(
        std::fs::read_to_string(app.disk("home/alice/mine.txt")).unwrap(),
        "alice's"
    );
}

/// The names in a 207, in order.
fn hrefs(multistatus: &str) -> Vec<String> {
    multistatus
        .split("<D:href>")
        .skip(1)
        .map(|rest| rest.split("</D:href>").next().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn listings_show_each_user_only_the_way_to_what_it_may_read() {
    let app = app();
    let list = |user: &'static str, path: &'static str, depth: &'static str| {
        let app = &app;
        async move {
            let response = send(app, user, "PROPFIND", path, &[("depth", depth)]).await;
            assert_eq!(response.status(), StatusCode::MULTI_STATUS, "{user} {path}");
            let mut hrefs = hrefs(&response.text().await.unwrap());
            hrefs[1..].sort();
            hrefs
        }
    };
    assert_eq!(
        list("alice", "/", "1").await,
        ["/", "/home/", "/projects/", "/public/"]
    );
    assert_eq!(list("alice", "/home/", "1").await, ["/home/", "/home/alice/"]);
    assert_eq!(
        list("alice", "/projects/", "1").await,
        ["/projects/", "/projects/apollo/"]
    );
    assert_eq!(
        list("carol", "/projects/", "1").await,
        ["/projects/", "/projects/apollo/"]
    );
    assert_eq!(list("dave", "/", "1").await, ["/", "/home/", "/public/"]);
    assert_eq!(
        list("dave", "/home/", "1").await,
        ["/home/", "/home/dave/"],
        "dave's home, made on his first request, and no one else's"
    );
    assert_eq!(
        list("root", "/", "1").await,
        ["/", "/elsewhere/", "/home/", "/projects/", "/public/"]
    );
    // The HTML listing, the file manager's page, shows the same.
    let page = send(&app, "alice", "GET", "/home/", &[] as &[(&str, &str)])
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("alice/") && !page.contains("bob"), "{page}");
    // And the Markdown listing for agents.
    let markdown = send(&app, "dave", "GET", "/", &[("accept", "text/markdown")]).await;
    let markdown = markdown.text().await.unwrap();
    assert!(
        markdown.contains("public/") && !markdown.contains("projects"),
        "{markdown}"
    );
}

#[tokio::test]
async fn each_grant_allows_what_it_says_and_no_more() {
    let app = app();
    assert!(!app.disk("home/dave").exists());
    let status = |user: &'static str, method: &'static str, path: &'static str| {
        let app = &app;
        async move {
            send(app, user, method, path, &[] as &[(&str, &str)])
                .await
                .status()
        }
    };
    assert_eq!(
        status("bob", "PUT", "/projects/apollo/new.txt").await,
        StatusCode::CREATED
    );
    assert_eq!(
        status("carol", "GET", "/projects/apollo/plan.txt").await,
        StatusCode::OK
    );
    assert_eq!(
        status("carol", "PUT", "/projects/apollo/plan.txt").await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status("carol", "DELETE", "/projects/apollo/plan.txt").await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status("dave", "GET", "/projects/apollo/plan.txt").await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(status("dave", "GET", "/public/readme.txt").await, StatusCode::OK);
    assert_eq!(
        status("dave", "PUT", "/public/readme.txt").await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status("alice", "PUT", "/public/news.txt").await,
        StatusCode::CREATED
    );
    assert_eq!(
        status("dave", "PUT", "/home/dave/first.txt").await,
        StatusCode::CREATED,
        "a home is made on its owner's first request"
    );
    assert_eq!(
        status("dave", "MKCOL", "/home/dave").await,
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(status("alice", "MKCOL", "/home/zed").await, StatusCode::FORBIDDEN);
    assert_eq!(
        status("alice", "PUT", "/projects/new.txt").await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status("root", "GET", "/home/bob/secret.txt").await,
        StatusCode::OK
    );
    assert_eq!(
        std::fs::read_to_string(app.disk("public/readme.txt")).unwrap(),
        "for all"
    );
}

#[tokio::test]
async fn paths_the_policy_names_stay_put() {
    let app = app();
    let to = |path: &'static str| vec![("destination", path)];
    let tries = [
        ("DELETE", "/projects/apollo", vec![]),
        ("MOVE", "/projects/apollo", to("{base}/home/bob/apollo")),
        ("MOVE", "/home/alice", to("{base}/public/alice")),
        ("COPY", "/home/alice/mine.txt", to("{base}/public")),
    ];
    for (method, path, headers) in tries {
        let response = send(&app, "alice", method, path, &headers).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "alice {method} {path}");
        let text = response.text().await.unwrap();
        assert!(
            text.contains("only an administrator")
                || text.contains("may not write")
                || text.contains("only read"),
            "{text}"
        );
    }
    assert!(app.disk("projects/apollo/plan.txt").exists());
    assert!(app.disk("home/alice/mine.txt").exists());
    // Moving across spaces where both ends allow it works, and checks both ends.
    let moved = send(
        &app,
        "alice",
        "MOVE",
        "/home/alice/mine.txt",
        &to("{base}/public/mine.txt"),
    )
    .await;
    assert_eq!(moved.status(), StatusCode::CREATED);
    let back = send(
        &app,
        "bob",
        "MOVE",
        "/public/mine.txt",
        &to("{base}/home/bob/mine.txt"),
    )
    .await;
    assert_eq!(back.status(), StatusCode::FORBIDDEN, "bob may only read /public");
    assert!(app.disk("public/mine.txt").exists());
}

#[tokio::test]
async fn without_credentials_nothing_exists() {
    let app = app();
    let anonymous = app
        .client()
        .get(app.url("/public/readme.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
}

/// A tag of an If header naming a path the principal cannot see is evaluated as one
/// naming a path where nothing is: its locks and etag cannot be tested from outside.
#[tokio::test]
async fn an_if_header_cannot_test_what_is_hidden() {
    let app = app();
    let locked = send(
        &app,
        "bob",
        "LOCK",
        "/home/bob/secret.txt",
        &[] as &[(&str, &str)],
    )
    .await;
    assert_eq!(locked.status(), StatusCode::OK);
    let token = locked.headers()["lock-token"].to_str().unwrap().to_owned();
    let token = token.trim_matches(|c| c == '<' || c == '>').to_owned();
    let put_with = |user: &'static str, path: &'static str, tagged: &'static str| {
        let app = &app;
        let condition = format!("<{{base}}{tagged}> (<{token}>)");
        async move { send(app, user, "PUT", path, &[("if", condition)]).await.status() }
    };
    assert_eq!(
        put_with("bob", "/home/bob/secret.txt", "/home/bob/secret.txt").await,
        StatusCode::NO_CONTENT,
        "the lock's owner, who sees the path, submits its token"
    );
    let hidden = put_with("alice", "/home/alice/mine.txt", "/home/bob/secret.txt").await;
    let absent = put_with("alice", "/home/alice/mine.txt", "/home/nobody/secret.txt").await;
    assert_eq!(
        hidden, absent,
        "a hidden path's lock is tested as an absent path's"
    );
    assert_eq!(hidden, StatusCode::PRECONDITION_FAILED);
}

const LOCKING_POLICY: &str = r#"
homes: /home/{user}
groups:
  staff: [alice, bob]
rules:
  - path: /projects/apollo
    grant: {"group:staff": write}
  - path: /projects/apollo/archive
    grant: {"group:staff": read, "user:bob": write}
"#;

/// A lock of all of a collection (Depth: infinity) needs write on all of it, so it
/// never covers what its owner may not change, nor meets locks there.
#[tokio::test]
async fn a_lock_of_all_of_a_collection_needs_write_on_all_of_it() {
    let app = App::with(Options {
        users: USERS.iter().map(|u| (*u, "pw")).collect(),
        policy: Some(LOCKING_POLICY),
        ..Options::default()
    });
    let lock = |user: &'static str, path: &'static str, depth: &'static str| {
        let app = &app;
        async move { send(app, user, "LOCK", path, &[("depth", depth)]).await }
    };
    let refused = lock("alice", "/projects/apollo/", "infinity").await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let text = refused.text().await.unwrap();
    assert!(text.contains("Depth: 0"), "{text}");
    assert_eq!(
        lock("bob", "/projects/apollo/archive/", "infinity")
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        lock("alice", "/projects/apollo/", "0").await.status(),
        StatusCode::OK
    );
    assert_eq!(
        lock("alice", "/home/alice/", "infinity").await.status(),
        StatusCode::OK
    );
}

const COPY_POLICY: &str = r#"
homes: /team/{user}
groups:
  staff: [alice, bob]
rules:
  - path: /team
    grant: {"*": read}
  - path: /shared
    grant: {"*": read, "group:staff": write}
  - path: /shared/board
    grant: {"group:staff": read}
  - path: /scratch
    grant: {"*": write}
"#;

/// A COPY of a collection takes what its maker may read and leaves the rest, so it is
/// neither refused (which would say something unreadable is inside) nor a way to it.
#[tokio::test]
async fn a_copy_takes_only_what_its_maker_may_read() {
    let app = App::with(Options {
        users: USERS.iter().map(|u| (*u, "pw")).collect(),
        policy: Some(COPY_POLICY),
        ..Options::default()
    });
    for dir in ["shared/board", "team/alice", "team/bob"] {
        std::fs::create_dir_all(app.disk(dir)).unwrap();
    }
    for (file, text) in [
        ("shared/readme.txt", "for all"),
        ("shared/board/minutes.txt", "staff only"),
        ("team/notes.txt", "for all"),
        ("team/alice/a.txt", "alice's"),
        ("team/bob/b.txt", "bob's"),
    ] {
        std::fs::write(app.disk(file), text).unwrap();
    }
    let copy = |user: &'static str, from: &'static str, to: &'static str| {
        let app = &app;
        async move {
            let destination = format!("{{base}}{to}");
            send(app, user, "COPY", from, &[("destination", destination)])
                .await
                .status()
        }
    };
    assert_eq!(
        copy("dave", "/shared/", "/scratch/dave/").await,
        StatusCode::CREATED
    );
    assert!(app.disk("scratch/dave/readme.txt").exists());
    assert!(!app.disk("scratch/dave/board").exists(), "the board is staff's");
    assert_eq!(
        copy("alice", "/shared/", "/scratch/alice/").await,
        StatusCode::CREATED
    );
    assert!(app.disk("scratch/alice/board/minutes.txt").exists());
    // The homes beneath a readable collection: only the copier's own goes with it.
    assert_eq!(
        copy("dave", "/team/", "/scratch/team/").await,
        StatusCode::CREATED
    );
    assert!(
        app.disk("scratch/team/dave").is_dir(),
        "dave's home, made on his first request"
    );
    assert!(!app.disk("scratch/team/alice").exists() && !app.disk("scratch/team/bob").exists());
    // Every name in the homes' parent is someone's home: notes.txt too, as dave's
    // listing of /team shows.
    assert!(!app.disk("scratch/team/notes.txt").exists());
    // A collection dave only passes through is not his to copy.
    assert_eq!(
        copy("dave", "/", "/scratch/everything/").await,
        StatusCode::FORBIDDEN
    );
    assert!(!app.disk("scratch/everything").exists());
}
