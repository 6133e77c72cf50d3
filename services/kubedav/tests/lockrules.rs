//! Concurrent conditional PUTs commit one at a time, and a DELETE whose client left
//! still releases the locks of what it removed, in both modes. The lock rules the
//! handlers enforce are tested in-process, in `services/gateway/tests/lockrules.rs`.

#[macro_use]
mod common;

use common::{Mode, Server, client};
use reqwest::{Method, StatusCode};

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

const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>test</D:owner></D:lockinfo>"#;

/// A DELETE of a locked tree whose client gives up while fileio is still deleting: the
/// tree goes, and so do its locks, so what is made at that path afterwards is not refused
/// by a lock that no one holds. (The trash is off, so the delete removes each file.)
async fn a_delete_whose_client_left_still_releases_its_locks(mode: Mode) {
    let server = Server::start_full(mode, &[], &[("KUBEDAV_TRASH_RETENTION_DAYS", "0")]).await;
    let tree = server.root.join("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..20_000 {
        std::fs::write(tree.join(format!("f{i}.txt")), b"x").unwrap();
    }
    let lock = client()
        .request(Method::from_bytes(b"LOCK").unwrap(), server.url("/tree"))
        .header("depth", "infinity")
        .header("timeout", "Second-3600")
        .body(LOCKINFO)
        .send()
        .await
        .unwrap();
    assert_eq!(lock.status(), StatusCode::OK);
    let token = lock.headers()["lock-token"].to_str().unwrap().to_owned();
    let delete = client()
        .delete(server.url("/tree"))
        .header("if", format!("({token})"))
        .timeout(std::time::Duration::from_millis(50))
        .send()
        .await;
    assert!(
        delete.as_ref().is_err_and(|e| e.is_timeout()),
        "the DELETE was answered before its client left ({delete:?}): delete more files"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while tree.exists() {
        assert!(std::time::Instant::now() < deadline, "the tree was never deleted");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The locks are released right after the delete: given a few seconds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let status = status(client().put(server.url("/tree")).body("a file now")).await;
        if status == StatusCode::CREATED {
            break;
        }
        assert_eq!(status, StatusCode::LOCKED);
        assert!(
            std::time::Instant::now() < deadline,
            "a lock of the deleted tree still refuses a PUT at its path"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A LOCK of a new file in a folder that does not exist gets 409 and leaves no lock
/// behind: the lock taken before the empty file could not be made is given back in its
/// owner's name, so the owner can lock the file once the folder exists.
async fn a_lock_refused_for_a_missing_folder_leaves_no_lock(mode: Mode) {
    let (server, _dir) = start(mode, &[]).await;
    let lock = || {
        as_user(&server, "alice", "LOCK", "/missing/new.txt")
            .header("timeout", "Second-3600")
            .body(LOCKINFO)
    };
    assert_eq!(status(lock()).await, StatusCode::CONFLICT);
    assert_eq!(
        status(as_user(&server, "alice", "MKCOL", "/missing")).await,
        StatusCode::CREATED
    );
    assert_eq!(status(lock()).await, StatusCode::CREATED);
}

/// Stops the busy threads when the test ends, however it ends.
struct StopOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

in_both_modes!(
    concurrent_conditional_puts_commit_one_at_a_time,
    a_delete_whose_client_left_still_releases_its_locks,
    a_lock_refused_for_a_missing_folder_leaves_no_lock,
);
