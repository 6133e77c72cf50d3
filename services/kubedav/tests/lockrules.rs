//! The lock rules a user notices with two users, in both modes: a depth-0 lock on a
//! collection guards its membership (RFC 4918 7.5) for every method that adds, removes
//! or renames a member, only a lock's owner may refresh it, lock owners and the locks
//! one user holds are bounded, and concurrent conditional PUTs commit one at a time.

#[macro_use]
mod common;

use common::{Mode, Server, client};
use reqwest::{Method, StatusCode};

const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>alice</D:owner></D:lockinfo>"#;

async fn start(mode: Mode, envs: &[(&str, &str)]) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("alice", "alice-pw"), ("carol", "carol-pw")]);
    let server = Server::start_auth(mode, Some(&users), &[], &[], envs).await;
    (server, dir)
}

/// A request as `user` (whose password is `user-pw`).
fn as_user(server: &Server, user: &str, verb: &str, path: &str) -> reqwest::RequestBuilder {
    client()
        .request(Method::from_bytes(verb.as_bytes()).unwrap(), server.url(path))
        .basic_auth(user, Some(format!("{user}-pw")))
}

async fn status(request: reqwest::RequestBuilder) -> StatusCode {
    request.send().await.unwrap().status()
}

/// LOCKs `path` as `user`; returns the status and the token.
async fn lock(server: &Server, user: &str, path: &str, depth: &str, owner: &str) -> (StatusCode, String) {
    let body = LOCKINFO.replace("<D:owner>alice</D:owner>", &format!("<D:owner>{owner}</D:owner>"));
    let response = as_user(server, user, "LOCK", path)
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
async fn a_depth_0_lock_guards_the_membership(mode: Mode) {
    let (server, _dir) = start(mode, &[]).await;
    std::fs::create_dir(server.disk("d0")).unwrap();
    std::fs::write(server.disk("d0/old.txt"), b"old").unwrap();
    std::fs::write(server.disk("outside.txt"), b"outside").unwrap();
    let (locked, token) = lock(&server, "alice", "/d0/", "0", "alice").await;
    assert_eq!(locked, StatusCode::OK);

    let carol = |verb: &str, path: &str| as_user(&server, "carol", verb, path);
    let destination = |path: &str| server.url(path);
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
        common::names_in(&server.disk("d0")),
        vec!["old.txt"],
        "nothing was added or removed"
    );
    assert!(server.disk("outside.txt").exists());

    // Replacing a member is no change of membership.
    assert_eq!(
        status(carol("PUT", "/d0/old.txt").body("changed")).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(std::fs::read(server.disk("d0/old.txt")).unwrap(), b"changed");

    // The lock's owner, with the token, may.
    // The token is submitted for the collection whose lock it is (a tagged list: an
    // untagged one would be about the new member, which the lock does not cover).
    let if_collection = format!("<{}> (<{token}>)", server.url("/d0/"));
    let with_token =
        |verb: &str, path: &str| as_user(&server, "alice", verb, path).header("if", &if_collection);
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
async fn only_the_owner_refreshes_a_lock(mode: Mode) {
    let (server, _dir) = start(mode, &[]).await;
    std::fs::write(server.disk("f.txt"), b"f").unwrap();
    let (locked, token) = lock(&server, "alice", "/f.txt", "0", "alice").await;
    assert_eq!(locked, StatusCode::OK);
    let refresh = |user: &str| {
        as_user(&server, user, "LOCK", "/f.txt")
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
async fn lock_owners_and_counts_are_bounded(mode: Mode) {
    let (server, _dir) = start(
        mode,
        &[
            ("KUBEDAV_MAX_LOCKS_PER_PRINCIPAL", "3"),
            ("KUBEDAV_MAX_LOCK_OWNER_BYTES", "100"),
        ],
    )
    .await;
    for i in 0..5 {
        std::fs::write(server.disk(&format!("f{i}.txt")), b"f").unwrap();
    }
    let big_owner = "o".repeat(200);
    let response = as_user(&server, "alice", "LOCK", "/f0.txt")
        .header("depth", "0")
        .body(LOCKINFO.replace("alice</D:owner>", &format!("{big_owner}</D:owner>")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.text().await.unwrap().contains("at most 100"));

    let mut tokens = Vec::new();
    for i in 0..3 {
        let (status, token) = lock(&server, "alice", &format!("/f{i}.txt"), "0", "alice").await;
        assert_eq!(status, StatusCode::OK);
        tokens.push(token);
    }
    let response = as_user(&server, "alice", "LOCK", "/f3.txt")
        .header("depth", "0")
        .body(LOCKINFO)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(response.text().await.unwrap().contains("alice holds 3 locks"));
    assert_eq!(
        lock(&server, "carol", "/f4.txt", "0", "carol").await.0,
        StatusCode::OK,
        "others are not affected"
    );
    let unlock =
        as_user(&server, "alice", "UNLOCK", "/f0.txt").header("lock-token", format!("<{}>", tokens[0]));
    assert_eq!(status(unlock).await, StatusCode::NO_CONTENT);
    assert_eq!(
        lock(&server, "alice", "/f3.txt", "0", "alice").await.0,
        StatusCode::OK,
        "a released lock frees its place"
    );
}

/// Sixteen PUTs carrying the same If-Match race: exactly one replaces the file, the
/// others get 412 and change nothing (the etag check and the rename are one step). Busy
/// threads keep every core loaded meanwhile, so the server's writers are preempted
/// often, as on a busy node: that is when a check and a rename that are not one step let
/// another commit in between.
async fn concurrent_conditional_puts_commit_one_at_a_time(mode: Mode) {
    let (server, _dir) = start(mode, &[]).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let _stop_busy = StopOnDrop(stop);
    let put = as_user(&server, "alice", "PUT", "/race.txt").body("original");
    assert_eq!(status(put).await, StatusCode::CREATED);
    for round in 0..10 {
        let head = as_user(&server, "alice", "HEAD", "/race.txt")
            .send()
            .await
            .unwrap();
        let etag = head.headers()["etag"].to_str().unwrap().to_owned();
        let puts = (0..16).map(|i| {
            let body = format!("writer {i} of round {round} ").repeat(65_536);
            as_user(&server, "alice", "PUT", "/race.txt")
                .header("if-match", &etag)
                .body(body)
                .send()
        });
        let answers: Vec<StatusCode> = futures_util::future::join_all(puts)
            .await
            .into_iter()
            .map(|r| r.unwrap().status())
            .collect();
        let won = answers.iter().filter(|s| s.is_success()).count();
        let lost = answers
            .iter()
            .filter(|s| **s == StatusCode::PRECONDITION_FAILED)
            .count();
        assert_eq!((won, lost), (1, 15), "round {round}: {answers:?}");
    }
    drop(_stop_busy);
    for thread in busy {
        thread.join().unwrap();
    }
}

/// Stops the busy threads when the test ends, however it ends.
struct StopOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

in_both_modes!(
    a_depth_0_lock_guards_the_membership,
    only_the_owner_refreshes_a_lock,
    lock_owners_and_counts_are_bounded,
    concurrent_conditional_puts_commit_one_at_a_time,
);
