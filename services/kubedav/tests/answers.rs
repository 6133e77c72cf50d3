//! PROPFIND Depth 0 answers the gateway keeps (`cache::answers`): an answer given again
//! is byte for byte the one the gateway composed, and every change that would alter it
//! (PUT, PROPPATCH, COPY or MOVE onto the resource, DELETE, a lock on it or on a
//! collection above it, a change on disk behind kubedav's back) is seen by the very
//! next PROPFIND, though the answer was kept. In both run modes.

#[macro_use]
mod common;

use common::{Mode, Server, client};
use reqwest::{Method, StatusCode};
use std::time::{Duration, Instant};

const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>answers test</D:owner></D:lockinfo>"#;
const ALLPROP: &str =
    r#"<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>"#;
const ETAG_ONLY: &str =
    r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:getetag/></D:prop></D:propfind>"#;

struct Dav {
    server: Server,
}

impl Dav {
    async fn start(mode: Mode) -> Dav {
        Dav {
            server: Server::start(mode).await,
        }
    }

    async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (StatusCode, String) {
        let mut request = client().request(
            Method::from_bytes(method.as_bytes()).unwrap(),
            self.server.url(path),
        );
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.body(body.to_owned()).send().await.unwrap();
        (response.status(), response.text().await.unwrap())
    }

    async fn put(&self, path: &str, body: &str) {
        let (status, text) = self.request("PUT", path, &[], body).await;
        assert!(status.is_success(), "PUT {path}: {status} {text}");
    }

    async fn propfind(&self, path: &str, body: &str) -> (StatusCode, String) {
        self.request("PROPFIND", path, &[("depth", "0")], body).await
    }

    /// Kept answers given so far.
    async fn answer_hits(&self) -> f64 {
        let gateway = match self.server.mode {
            Mode::AllInOne => "all",
            Mode::Microservices => "gateway",
        };
        let admin = self.server.admin_of(gateway);
        let needle = "kubedav_cache_lookups_total{cache=\"gateway_answer\",result=\"hit\"} ";
        common::metric_text(admin)
            .await
            .lines()
            .find_map(|line| line.strip_prefix(needle))
            .map_or(0.0, |v| v.parse().unwrap())
    }

    /// PROPFINDs `path` with `body` until the answer comes from what the gateway kept,
    /// checking that every answer, kept or composed, is the same 207; returns it.
    async fn until_kept(&self, path: &str, body: &str) -> String {
        let (status, composed) = self.propfind(path, body).await;
        assert_eq!(status, StatusCode::MULTI_STATUS, "{composed}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let before = self.answer_hits().await;
            let (status, answer) = self.propfind(path, body).await;
            assert_eq!(status, StatusCode::MULTI_STATUS, "{answer}");
            assert_eq!(answer, composed, "a later answer differs from the composed one");
            if self.answer_hits().await > before {
                return answer;
            }
            assert!(Instant::now() < deadline, "no answer for {path} was kept in 10 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// LOCKs `path` to `depth` for `timeout`; its lock token.
    async fn lock(&self, path: &str, depth: &str, timeout: &str) -> String {
        let response = client()
            .request(Method::from_bytes(b"LOCK").unwrap(), self.server.url(path))
            .header("timeout", timeout)
            .header("depth", depth)
            .body(LOCKINFO)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "LOCK {path}");
        response.headers()["lock-token"].to_str().unwrap().to_owned()
    }
}

fn content_length(answer: &str) -> &str {
    let start = answer.find("<D:getcontentlength>").expect("a content length") + "<D:getcontentlength>".len();
    let end = start + answer[start..].find('<').unwrap();
    &answer[start..end]
}

async fn a_kept_answer_is_the_composed_one_and_follows_every_change(mode: Mode) {
    let dav = Dav::start(mode).await;
    dav.put("/doc.txt", "version 0").await;

    // The same answer for an empty body and for allprop, kept separately; another body
    // gets its own answer.
    let answer = dav.until_kept("/doc.txt", "").await;
    assert_eq!(content_length(&answer), "9");
    assert_eq!(dav.until_kept("/doc.txt", ALLPROP).await, answer);
    let etag_only = dav.until_kept("/doc.txt", ETAG_ONLY).await;
    assert!(
        etag_only.contains("getetag") && !etag_only.contains("getcontentlength"),
        "{etag_only}"
    );
    // Quota changes with any write in the tree: an answer showing it is never kept.
    let quota = r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:quota-used-bytes/></D:prop></D:propfind>"#;
    let hits = dav.answer_hits().await;
    for _ in 0..3 {
        assert_eq!(dav.propfind("/doc.txt", quota).await.0, StatusCode::MULTI_STATUS);
    }
    assert_eq!(dav.answer_hits().await, hits, "an answer showing quota was kept");
    // The same path with a trailing slash addresses a collection: still 404.
    assert_eq!(dav.propfind("/doc.txt/", "").await.0, StatusCode::NOT_FOUND);

    // PUT
    dav.put("/doc.txt", "version one").await;
    let (_, answer) = dav.propfind("/doc.txt", ALLPROP).await;
    assert_eq!(content_length(&answer), "11", "after a PUT: {answer}");

    // PROPPATCH
    dav.until_kept("/doc.txt", ALLPROP).await;
    let patch = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:test"><D:set><D:prop><Z:colour>teal</Z:colour></D:prop></D:set></D:propertyupdate>"#;
    let (status, text) = dav.request("PROPPATCH", "/doc.txt", &[], patch).await;
    assert_eq!(status, StatusCode::MULTI_STATUS, "{text}");
    let (_, answer) = dav.propfind("/doc.txt", ALLPROP).await;
    assert!(answer.contains("teal"), "after a PROPPATCH: {answer}");

    // A lock on the resource, then its release.
    dav.until_kept("/doc.txt", "").await;
    let token = dav.lock("/doc.txt", "0", "Second-600").await;
    let bare = token.trim_matches(|c| c == '<' || c == '>');
    let (_, answer) = dav.propfind("/doc.txt", "").await;
    assert!(answer.contains(bare), "after a LOCK: {answer}");
    let (status, _) = dav
        .request("UNLOCK", "/doc.txt", &[("lock-token", &token)], "")
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, answer) = dav.propfind("/doc.txt", "").await;
    assert!(!answer.contains(bare), "after an UNLOCK: {answer}");

    // A lock of the collection above it, to infinite depth.
    dav.until_kept("/doc.txt", "").await;
    let token = dav.lock("/", "infinity", "Second-600").await;
    let bare = token.trim_matches(|c| c == '<' || c == '>');
    let (_, answer) = dav.propfind("/doc.txt", "").await;
    assert!(answer.contains(bare), "after a LOCK of the root: {answer}");
    let (status, _) = dav.request("UNLOCK", "/", &[("lock-token", &token)], "").await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // COPY and MOVE onto it.
    dav.put("/copied.txt", "twelve bytes").await;
    dav.until_kept("/doc.txt", ALLPROP).await;
    let destination = dav.server.url("/doc.txt");
    let (status, _) = dav
        .request("COPY", "/copied.txt", &[("destination", &destination)], "")
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, answer) = dav.propfind("/doc.txt", ALLPROP).await;
    assert_eq!(content_length(&answer), "12", "after a COPY onto it: {answer}");
    dav.put("/moved.txt", "thirteen byte").await;
    dav.until_kept("/doc.txt", ALLPROP).await;
    let (status, _) = dav
        .request("MOVE", "/moved.txt", &[("destination", &destination)], "")
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, answer) = dav.propfind("/doc.txt", ALLPROP).await;
    assert_eq!(content_length(&answer), "13", "after a MOVE onto it: {answer}");

    // A change on disk behind kubedav's back: seen within the freshness bound (1 s).
    dav.until_kept("/doc.txt", ALLPROP).await;
    std::fs::write(dav.server.disk("doc.txt"), "changed behind its back").unwrap();
    let changed = Instant::now();
    loop {
        let (_, answer) = dav.propfind("/doc.txt", ALLPROP).await;
        if content_length(&answer) == "23" {
            break;
        }
        assert!(
            changed.elapsed() < Duration::from_secs(5),
            "the kept answer outlived the change by 5 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // DELETE
    dav.until_kept("/doc.txt", ALLPROP).await;
    let (status, _) = dav.request("DELETE", "/doc.txt", &[], "").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(dav.propfind("/doc.txt", ALLPROP).await.0, StatusCode::NOT_FOUND);
}

/// A lock that runs out while the resource's answer would otherwise be kept: the answer
/// with the lock is never kept, and the one after it shows no lock.
async fn an_expired_lock_leaves_the_answers(mode: Mode) {
    let dav = Dav::start(mode).await;
    dav.put("/short.txt", "short").await;
    dav.until_kept("/short.txt", "").await;
    let token = dav.lock("/short.txt", "0", "Second-1").await;
    let bare = token.trim_matches(|c| c == '<' || c == '>').to_owned();
    let hits = dav.answer_hits().await;
    let (_, answer) = dav.propfind("/short.txt", "").await;
    assert!(answer.contains(&bare), "{answer}");
    let (_, answer) = dav.propfind("/short.txt", "").await;
    assert!(answer.contains(&bare), "{answer}");
    assert_eq!(
        dav.answer_hits().await,
        hits,
        "an answer showing a lock was given from what was kept"
    );
    let locked = Instant::now();
    loop {
        let (_, answer) = dav.propfind("/short.txt", "").await;
        if !answer.contains(&bare) {
            break;
        }
        assert!(
            locked.elapsed() < Duration::from_secs(10),
            "the lock never ran out"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answer = dav.until_kept("/short.txt", "").await;
    assert!(!answer.contains(&bare), "{answer}");
}

in_both_modes!(
    a_kept_answer_is_the_composed_one_and_follows_every_change,
    an_expired_lock_leaves_the_answers,
);
