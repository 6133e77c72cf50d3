//! The lock rules a user notices with two users, through the handlers in-process (see
//! `common`): a depth-0 lock on a collection guards its membership (RFC 4918 7.5) for
//! every method that adds, removes or renames a member, only a lock's owner may refresh
//! it, and lock owners and the locks one user holds are bounded. The race of conditional
//! PUTs, which needs the services as they run, stays in
//! `services/kubedav/tests/lockrules.rs`.

mod common;

use common::{App, Options, RequestBuilder};
use http::{Method, StatusCode};

/// A gateway with the users alice and carol.
fn start(options: Options) -> App {
    App::with(Options {
        users: vec![("alice", "alice-pw"), ("carol", "carol-pw")],
        ..options
    })
}

const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>alice</D:owner></D:lockinfo>"#;

/// A request as `user` (whose password is `user-pw`).
fn as_user(app: &App, user: &str, verb: &str, path: &str) -> RequestBuilder {
    app.client()
        .request(Method::from_bytes(verb.as_bytes()).unwrap(), app.url(path))
        .basic_auth(user, Some(format!("{user}-pw")))
}

async fn status(request: RequestBuilder) -> StatusCode {
    request.send().await.unwrap().status()
}

/// LOCKs `path` as `user`; returns the status and the token.
async fn lock(app: &App, user: &str, path: &str, depth: &str, owner: &str) -> (StatusCode, String) {
    let body = LOCKINFO.replace("<D:owner>alice</D:owner>", &format!("<D:owner>{owner}</D:owner>"));
    let response = as_user(app, user, "LOCK", path)
        .header("depth", depth)
        .header("timeout", "Second-600")
        .body(body)
        .send()
        .await
        .unwrap();
    let token = response
        .headers()
        .get("lock-token")
        .map(|v| v.to_str().unwrap().trim_matches(['<', '>']).to_owned())
        .unwrap_or_default();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(
        status.is_success() || text.len() > 10,
        "a refusal says why: {text}"
    );
    (status, token)
}

/// With alice's depth-0 lock on /d0/, carol (without the token) may change the members
/// that exist, but may not add, remove or rename one, by any method, at the source or at
/// the destination. With the token, alice may.
#[tokio::test]
async fn a_depth_0_lock_guards_the_membership() {
    let app = start(Options::default());
    std::fs::create_dir(app.disk("d0")).unwrap();
    std::fs::write(app.disk("d0/old.txt"), b"old").unwrap();
    std::fs::write(app.disk("outside.txt"), b"outside").unwrap();
    let (locked, token) = lock(&app, "alice", "/d0/", "0", "alice").await;
    assert_eq!(locked, StatusCode::OK);

    let carol = |verb: &str, path: &str| as_user(&app, "carol", verb, path);
    let destination = |path: &str| app.url(path);
    let refused = [
        ("PUT of a new member", carol("PUT", "/d0/new.txt").body("new")),
        (
            "LOCK of an unmapped member",
            carol("LOCK", "/d0/x.txt").header("depth", "0").body(LOCKINFO),
        ),
        ("MKCOL of a member", carol("MKCOL", "/d0/sub/")),
        (
            "COPY into it",
            carol("COPY", "/outside.txt").header("destination", destination("/d0/copy.txt")),
        ),
        (
            "MOVE into it",
            carol("MOVE", "/outside.txt").header("destination", destination("/d0/moved.txt")),
        ),
        (
            "MOVE out of it",
            carol("MOVE", "/d0/old.txt").header("destination", destination("/moved.txt")),
        ),
        ("DELETE of a member", carol("DELETE", "/d0/old.txt")),
    ];
    for (what, request) in refused {
        let response = request.send().await.unwrap();
        let code = response.status();
        let body = response.text().await.unwrap();
        assert_eq!(code, StatusCode::LOCKED, "{what}: {body}");
        assert!(
            body.contains("lock-token-submitted") && body.contains("/d0/"),
            "{what}: {body}"
        );
    }
    assert_eq!(
        common::names_in(&app.disk("d0")),
        vec!["old.txt"],
        "nothing was added or removed"
    );
    assert!(app.disk("outside.txt").exists());

    // Replacing a member is no change of membership.
    assert_eq!(
        status(carol("PUT", "/d0/old.txt").body("changed")).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(std::fs::read(app.disk("d0/old.txt")).unwrap(), b"changed");

    // The lock's owner, with the token, may.
    // The token is submitted for the collection whose lock it is (a tagged list: an
    // untagged one would be about the new member, which the lock does not cover).
    let if_collection = format!("<{}> (<{token}>)", app.url("/d0/"));
    let with_token = |verb: &str, path: &str| as_user(&app, "alice", verb, path).header("if", &if_collection);
    assert_eq!(
        status(with_token("PUT", "/d0/new.txt").body("new")).await,
        StatusCode::CREATED
    );
    assert_eq!(status(with_token("MKCOL", "/d0/sub/")).await, StatusCode::CREATED);
    let (created, _) = {
        let response = with_token("LOCK", "/d0/x.txt")
            .header("depth", "0")
            .body(LOCKINFO)
            .send()
            .await
            .unwrap();
        (response.status(), ())
    };
    assert_eq!(created, StatusCode::CREATED);
    assert_eq!(
        status(with_token("MOVE", "/outside.txt").header("destination", destination("/d0/moved.txt"))).await,
        StatusCode::CREATED
    );
    assert_eq!(
        status(with_token("DELETE", "/d0/old.txt")).await,
        StatusCode::NO_CONTENT
    );
}

/// Lock tokens are visible to everyone in lockdiscovery, so a refresh (LOCK without a
/// body) must come from the lock's owner: anyone else gets 403, and cannot keep an
/// abandoned lock alive.
#[tokio::test]
async fn only_the_owner_refreshes_a_lock() {
    let app = start(Options::default());
    std::fs::write(app.disk("f.txt"), b"f").unwrap();
    let (locked, token) = lock(&app, "alice", "/f.txt", "0", "alice").await;
    assert_eq!(locked, StatusCode::OK);
    let refresh = |user: &str| {
        as_user(&app, user, "LOCK", "/f.txt")
            .header("if", format!("(<{token}>)"))
            .header("timeout", "Second-900")
    };
    let response = refresh("carol").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("only the user who took a lock")
    );
    let response = refresh("alice").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.text().await.unwrap().contains("Second-900"));
}

/// The owner XML kept with a lock and echoed in every lock discovery is bounded, and so
/// is the number of locks one user holds; each refusal is a clear 4xx, and other users
/// are not affected.
#[tokio::test]
async fn lock_owners_and_counts_are_bounded() {
    let app = start(Options {
        max_locks_per_principal: 3,
        config: Some(|config| config.max_lock_owner_bytes = 100),
        ..Options::default()
    });
    for i in 0..5 {
        std::fs::write(app.disk(&format!("f{i}.txt")), b"f").unwrap();
    }
    let big_owner = "o".repeat(200);
    let response = as_user(&app, "alice", "LOCK", "/f0.txt")
        .header("depth", "0")
        .body(LOCKINFO.replace("alice</D:owner>", &format!("{big_owner}</D:owner>")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.text().await.unwrap().contains("at most 100"));

    let mut tokens = Vec::new();
    for i in 0..3 {
        let (status, token) = lock(&app, "alice", &format!("/f{i}.txt"), "0", "alice").await;
        assert_eq!(status, StatusCode::OK);
        tokens.push(token);
    }
    let response = as_user(&app, "alice", "LOCK", "/f3.txt")
        .header("depth", "0")
        .body(LOCKINFO)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(response.text().await.unwrap().contains("alice holds 3 locks"));
    assert_eq!(
        lock(&app, "carol", "/f4.txt", "0", "carol").await.0,
        StatusCode::OK,
        "others are not affected"
    );
    let unlock = as_user(&app, "alice", "UNLOCK", "/f0.txt").header("lock-token", format!("<{}>", tokens[0]));
    assert_eq!(status(unlock).await, StatusCode::NO_CONTENT);
    assert_eq!(
        lock(&app, "alice", "/f3.txt", "0", "alice").await.0,
        StatusCode::OK,
        "a released lock frees its place"
    );
}
