//! What gateways keep of fileio's and the locks service's answers (files of up to 1
//! MiB, single resources and Depth 1 listings with their dead properties, lock
//! discovery) never outlives a change made through kubedav: two gateways, each process
//! separate, and a change made through one is seen by the very next request through
//! the other, whatever either had kept. Also
//! when a gateway is paused (the change waits for its lease, no longer), when fileio is
//! restarted, and when the volume is changed behind kubedav's back (seen within the
//! freshness bound).

mod common;

use common::{Process, client, signal, start_gateway, start_service, stop};
use reqwest::{Method, StatusCode};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>test</D:owner></D:lockinfo>"#;

/// fileio, locks (memory store) and two gateways with their caches on.
struct Fleet {
    dir: tempfile::TempDir,
    fileio: Process,
    fileio_admin: SocketAddr,
    gateways: Vec<(Process, SocketAddr, SocketAddr)>,
    _locks: Process,
}

impl Fleet {
    async fn start() -> Fleet {
        Self::start_with(&[]).await
    }

    /// As [`Fleet::start`], with `gateway_args` added to each gateway's.
    async fn start_with(gateway_args: &[&str]) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let root_arg = vec!["--root".to_owned(), root.display().to_string()];
        let (fileio, fileio_grpc, fileio_admin) = start_service("fileio", "fileio", &root_arg, &[]).await;
        let (locks, locks_grpc, _) = start_service("locks", "locks", &[], &[]).await;
        let mut gateways = Vec::new();
        for name in ["gateway-a", "gateway-b"] {
            let mut args = vec![
                "--fileio-url".to_owned(),
                format!("http://{fileio_grpc}"),
                "--locks-url".to_owned(),
                format!("http://{locks_grpc}"),
                "--markdown-url".to_owned(),
                String::new(),
            ];
            args.extend(gateway_args.iter().map(|arg| arg.to_string()));
            gateways.push(start_gateway(name, &args, &[]).await);
        }
        Fleet {
            dir,
            fileio,
            fileio_admin,
            gateways,
            _locks: locks,
        }
    }

    fn url(&self, g: usize, path: &str) -> String {
        format!("http://{}{path}", self.gateways[g].1)
    }

    async fn put(&self, g: usize, path: &str, body: &str) {
        let status = client()
            .put(self.url(g, path))
            .body(body.to_owned())
            .send()
            .await
            .unwrap()
            .status();
        assert!(status.is_success(), "PUT {path} through gateway {g}: {status}");
    }

    async fn get(&self, g: usize, path: &str) -> (StatusCode, String) {
        let response = client().get(self.url(g, path)).send().await.unwrap();
        (response.status(), response.text().await.unwrap())
    }

    async fn request(
        &self,
        g: usize,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (StatusCode, String) {
        let mut request = client().request(Method::from_bytes(method.as_bytes()).unwrap(), self.url(g, path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.body(body.to_owned()).send().await.unwrap();
        (response.status(), response.text().await.unwrap())
    }

    async fn propfind0(&self, g: usize, path: &str) -> String {
        let (status, body) = self.request(g, "PROPFIND", path, &[("depth", "0")], "").await;
        assert_eq!(status, StatusCode::MULTI_STATUS, "{body}");
        body
    }

    /// Answers gateway `g` gave from what it kept.
    async fn hits(&self, g: usize, cache: &str) -> f64 {
        self.lookups(g, cache, "hit").await
    }

    /// Changes fileio announced and saw acknowledged (or the holders' leases run out).
    async fn announcements_waited(&self) -> f64 {
        let text = common::metric_text(self.fileio_admin).await;
        text.lines()
            .find_map(|line| line.strip_prefix("kubedav_lease_invalidation_wait_seconds_count "))
            .map_or(0.0, |v| v.parse().unwrap())
    }

    /// Lookups of gateway `g` in `cache` with `result`.
    async fn lookups(&self, g: usize, cache: &str, result: &str) -> f64 {
        let text = common::metric_text(self.gateways[g].2).await;
        let needle = format!("kubedav_cache_lookups_total{{cache=\"gateway_{cache}\",result=\"{result}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&needle))
            .map_or(0.0, |v| v.parse().unwrap())
    }

    /// An exclusive lock on `path` through gateway `g` with `depth` (10 minutes): its
    /// `Lock-Token` header, angle brackets included.
    async fn lock(&self, g: usize, path: &str, depth: &str) -> String {
        let response = client()
            .request(Method::from_bytes(b"LOCK").unwrap(), self.url(g, path))
            .header("timeout", "Second-600")
            .header("depth", depth)
            .body(LOCKINFO)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "LOCK {path} through gateway {g}"
        );
        response.headers()["lock-token"].to_str().unwrap().to_owned()
    }

    /// Calls gateway `g` made to release the locks of a removed resource.
    async fn releases(&self, g: usize) -> f64 {
        let text = common::metric_text(self.gateways[g].2).await;
        let needle = "kubedav_grpc_client_started_total{grpc_service=\"kubedav.locks.v1.Locks\",grpc_method=\"Release\"} ";
        text.lines()
            .find_map(|line| line.strip_prefix(needle))
            .map_or(0.0, |v| v.parse().unwrap())
    }

    /// PROPFINDs `path` through gateway `g` until its lock discovery is answered from
    /// what the gateway kept: its lease from the locks service has begun.
    async fn until_locks_kept(&self, g: usize, path: &str) {
        let before = self.hits(g, "locks").await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.hits(g, "locks").await == before {
            assert!(
                Instant::now() < deadline,
                "gateway {g} never held a lease from the locks service"
            );
            self.propfind0(g, path).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// GETs through gateway `g` every 20 ms, checking the content, until `more` of its
    /// kept copies were renewed by a `Stat` instead of read again.
    async fn get_until_renewed(&self, g: usize, path: &str, expected: &str, more: f64) {
        let target = self.lookups(g, "file", "revalidated").await + more;
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.lookups(g, "file", "revalidated").await < target {
            assert!(
                Instant::now() < deadline,
                "gateway {g} revalidated no kept copy of {path} in 10 s"
            );
            assert_eq!(self.get(g, path).await, (StatusCode::OK, expected.to_owned()));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// GETs through gateway `g` until one is answered from what it kept (a gateway keeps
    /// nothing until its lease from fileio began), checking the content every time.
    async fn until_kept(&self, g: usize, path: &str, expected: &str) {
        let before = self.hits(g, "file").await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert_eq!(self.get(g, path).await, (StatusCode::OK, expected.to_owned()));
            if self.hits(g, "file").await > before {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "gateway {g} never answered {path} from its copy"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A PUT, PROPPATCH, DELETE or MOVE answered through one gateway is seen by the next
/// request through the other, though the other had the old state kept (each round
/// first makes sure of that).
#[tokio::test]
async fn changes_through_one_gateway_are_seen_at_once_through_the_other() {
    let fleet = Fleet::start().await;
    fleet.put(0, "/doc.txt", "version 0").await;
    fleet.until_kept(1, "/doc.txt", "version 0").await;
    for round in 1..=20 {
        let (writer, reader) = if round % 2 == 0 { (0, 1) } else { (1, 0) };
        let before = format!("version {}", round - 1);
        fleet.until_kept(reader, "/doc.txt", &before).await;
        let now = format!("version {round}");
        fleet.put(writer, "/doc.txt", &now).await;
        assert_eq!(
            fleet.get(reader, "/doc.txt").await,
            (StatusCode::OK, now.clone()),
            "round {round}"
        );
        let head = client().head(fleet.url(reader, "/doc.txt")).send().await.unwrap();
        assert_eq!(head.headers()["content-length"], now.len().to_string().as_str());
    }

    // Dead properties: a PROPPATCH through A shows in a Depth 0 PROPFIND through B,
    // though B had the resource kept, and its answer too (`cache::answers`).
    for round in 0..5 {
        let before = fleet.hits(1, "resource").await;
        let answers_before = fleet.hits(1, "answer").await;
        fleet.propfind0(1, "/doc.txt").await;
        fleet.propfind0(1, "/doc.txt").await;
        fleet.propfind0(1, "/doc.txt").await;
        assert!(
            fleet.hits(1, "answer").await > answers_before,
            "round {round}: B answered no PROPFIND from a kept answer"
        );
        let value = format!("colour {round}");
        let patch = format!(
            r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:test"><D:set><D:prop><Z:colour>{value}</Z:colour></D:prop></D:set></D:propertyupdate>"#
        );
        let (status, body) = fleet.request(0, "PROPPATCH", "/doc.txt", &[], &patch).await;
        assert_eq!(status, StatusCode::MULTI_STATUS, "{body}");
        let listed = fleet.propfind0(1, "/doc.txt").await;
        assert!(listed.contains(&value), "round {round}: {listed}");
        assert!(
            fleet.hits(1, "resource").await > before,
            "B answered no PROPFIND from its copy"
        );
    }

    // A new member changes its collection: B lists the root afresh.
    fleet.propfind0(1, "/").await;
    fleet.put(0, "/second.txt", "two").await;
    assert_eq!(
        fleet.get(1, "/second.txt").await,
        (StatusCode::OK, "two".to_owned())
    );

    // DELETE through A: gone through B.
    fleet.until_kept(1, "/second.txt", "two").await;
    let (status, _) = fleet.request(0, "DELETE", "/second.txt", &[], "").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(fleet.get(1, "/second.txt").await.0, StatusCode::NOT_FOUND);

    // A collection moved through B: its members are gone from their old place through
    // A, which had one of them kept.
    let (status, _) = fleet.request(1, "MKCOL", "/dir", &[], "").await;
    assert_eq!(status, StatusCode::CREATED);
    fleet.put(1, "/dir/member.txt", "member").await;
    fleet.until_kept(0, "/dir/member.txt", "member").await;
    let destination = fleet.url(1, "/moved");
    let (status, _) = fleet
        .request(1, "MOVE", "/dir", &[("destination", &destination)], "")
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(fleet.get(0, "/dir/member.txt").await.0, StatusCode::NOT_FOUND);
    assert_eq!(
        fleet.get(0, "/moved/member.txt").await,
        (StatusCode::OK, "member".to_owned())
    );
}

/// Files of up to 1 MiB are kept whole (ranges answered from the copy), and a PUT
/// through the other gateway replaces the copy at once; a larger file streams from
/// fileio every time.
#[tokio::test]
async fn files_up_to_a_mebibyte_are_kept_and_replaced_at_once() {
    let fleet = Fleet::start().await;
    let letters =
        |first: u8| -> String { (0..1 << 20).map(|i| char::from(first + (i % 26) as u8)).collect() };
    let (lower, upper) = (letters(b'a'), letters(b'A'));
    fleet.put(0, "/big.bin", &lower).await;
    fleet.until_kept(1, "/big.bin", &lower).await;

    let before = fleet.hits(1, "file").await;
    let range = client()
        .get(fleet.url(1, "/big.bin"))
        .header("range", "bytes=1000000-1000009")
        .send()
        .await
        .unwrap();
    assert_eq!(range.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(range.text().await.unwrap(), lower[1_000_000..1_000_010]);
    let together = futures_util::future::join_all((0..8).map(|_| fleet.get(1, "/big.bin"))).await;
    assert!(
        together
            .iter()
            .all(|answer| *answer == (StatusCode::OK, lower.clone()))
    );
    assert!(fleet.hits(1, "file").await > before, "B answered from its copy");

    fleet.put(0, "/big.bin", &upper).await;
    assert_eq!(fleet.get(1, "/big.bin").await, (StatusCode::OK, upper.clone()));

    let larger = format!("{lower}!");
    fleet.put(0, "/larger.bin", &larger).await;
    let before = fleet.hits(1, "file").await;
    for _ in 0..3 {
        assert_eq!(
            fleet.get(1, "/larger.bin").await,
            (StatusCode::OK, larger.clone())
        );
    }
    assert_eq!(
        fleet.hits(1, "file").await,
        before,
        "a file over 1 MiB is not kept"
    );
}

/// A member added, changed (its dead properties) or deleted through one gateway shows at
/// once in the other's Depth 1 PROPFIND of the collection, though the other had the
/// listing kept.
#[tokio::test]
async fn listings_show_changes_of_members_at_once_through_the_other_gateway() {
    let fleet = Fleet::start().await;
    let (status, _) = fleet.request(0, "MKCOL", "/col", &[], "").await;
    assert_eq!(status, StatusCode::CREATED);
    fleet.put(0, "/col/a.txt", "a").await;
    let fleet = &fleet;
    let listing = move |g: usize| async move {
        let (status, body) = fleet.request(g, "PROPFIND", "/col/", &[("depth", "1")], "").await;
        assert_eq!(status, StatusCode::MULTI_STATUS, "{body}");
        body
    };
    // Until B answers the listing from its copy (its lease may need a moment).
    let deadline = Instant::now() + Duration::from_secs(10);
    let before = fleet.hits(1, "listing").await;
    while fleet.hits(1, "listing").await == before {
        assert!(listing(1).await.contains("/col/a.txt"));
        assert!(
            Instant::now() < deadline,
            "B never answered the listing from its copy"
        );
    }
    let kept = move |what: &'static str| async move {
        let before = fleet.hits(1, "listing").await;
        listing(1).await;
        assert!(
            fleet.hits(1, "listing").await > before,
            "B had no copy of the listing before {what}"
        );
    };

    kept("the PUT").await;
    fleet.put(0, "/col/b.txt", "b").await;
    assert!(listing(1).await.contains("/col/b.txt"), "a new member is listed");

    kept("the PROPPATCH").await;
    let patch = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:test"><D:set><D:prop><Z:colour>teal</Z:colour></D:prop></D:set></D:propertyupdate>"#;
    let (status, body) = fleet.request(0, "PROPPATCH", "/col/a.txt", &[], patch).await;
    assert_eq!(status, StatusCode::MULTI_STATUS, "{body}");
    assert!(
        listing(1).await.contains("teal"),
        "a member's new property is listed"
    );

    kept("the DELETE").await;
    let (status, _) = fleet.request(0, "DELETE", "/col/b.txt", &[], "").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(
        !listing(1).await.contains("/col/b.txt"),
        "a deleted member is not listed"
    );
}

/// A collection with more members than a gateway keeps a listing of (4,096 entries) is
/// listed whole every time, straight from fileio, and never answered from a copy.
#[tokio::test]
async fn a_listing_too_large_to_keep_is_listed_whole_from_fileio() {
    let fleet = Fleet::start().await;
    let big = fleet.dir.path().join("root/big");
    std::fs::create_dir(&big).unwrap();
    for i in 0..4200 {
        std::fs::write(big.join(format!("f{i}.txt")), "x").unwrap();
    }
    // Once the gateway keeps things at all (its lease from fileio began).
    fleet.put(0, "/small.txt", "s").await;
    fleet.until_kept(0, "/small.txt", "s").await;
    let before = fleet.hits(0, "listing").await;
    for _ in 0..3 {
        let (status, body) = fleet.request(0, "PROPFIND", "/big/", &[("depth", "1")], "").await;
        assert_eq!(status, StatusCode::MULTI_STATUS);
        assert_eq!(
            body.matches("<D:response>").count(),
            4201,
            "the collection and all its members"
        );
        assert!(body.contains("/big/f4199.txt"));
    }
    assert_eq!(
        fleet.hits(0, "listing").await,
        before,
        "no copy of the listing was kept"
    );
}

/// A LOCK or UNLOCK through one gateway shows in the other's lockdiscovery at once,
/// though the other had answered the same PROPFIND from what it kept.
#[tokio::test]
async fn locks_taken_through_one_gateway_show_at_once_through_the_other() {
    let fleet = Fleet::start().await;
    fleet.put(0, "/locked.txt", "content").await;
    for round in 0..5 {
        let before = fleet.hits(1, "locks").await;
        fleet.propfind0(1, "/locked.txt").await;
        let listed = fleet.propfind0(1, "/locked.txt").await;
        assert!(
            !listed.contains("opaquelocktoken") && !listed.contains("urn:uuid"),
            "{listed}"
        );
        let token = fleet.lock(0, "/locked.txt", "0").await;
        let bare = token.trim_matches(|c| c == '<' || c == '>').to_owned();
        let listed = fleet.propfind0(1, "/locked.txt").await;
        assert!(
            listed.contains(&bare),
            "round {round}: B does not show the new lock: {listed}"
        );
        let listed = fleet.propfind0(1, "/locked.txt").await;
        assert!(listed.contains(&bare), "round {round}: {listed}");

        let (status, _) = fleet
            .request(0, "UNLOCK", "/locked.txt", &[("lock-token", &token)], "")
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let listed = fleet.propfind0(1, "/locked.txt").await;
        assert!(
            !listed.contains(&bare),
            "round {round}: B still shows a released lock: {listed}"
        );
        assert!(
            fleet.hits(1, "locks").await > before,
            "B answered no lockdiscovery from its copy"
        );
    }
}

/// A DELETE of a tree no lock touches makes no call to release its locks: the check
/// before it found none, and under the locks service's lease none can have been taken
/// since without the gateway hearing of it. A tree whose lock was submitted still has
/// its locks released, so a new resource at its path is not refused.
#[tokio::test]
async fn removing_an_unlocked_tree_skips_the_release_and_a_locked_one_releases() {
    let fleet = Fleet::start().await;
    fleet.put(0, "/gone.txt", "content").await;
    fleet.until_locks_kept(0, "/gone.txt").await;
    let spared = fleet.lookups(0, "release", "hit").await;
    let (status, _) = fleet.request(0, "DELETE", "/gone.txt", &[], "").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        fleet.releases(0).await,
        0.0,
        "a release was asked of the locks service"
    );
    assert_eq!(fleet.lookups(0, "release", "hit").await, spared + 1.0);

    fleet.request(0, "MKCOL", "/dir", &[], "").await;
    fleet.put(0, "/dir/a.txt", "content").await;
    let token = fleet.lock(1, "/dir", "infinity").await;
    let (status, body) = fleet
        .request(0, "DELETE", "/dir", &[("if", &format!("({token})"))], "")
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        fleet.releases(0).await,
        1.0,
        "the removed tree's lock was not released"
    );
    let (status, body) = fleet.request(1, "MKCOL", "/dir", &[], "").await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "the released lock still refuses: {body}"
    );
}

/// Writes into a tree the locks service found free of locks are allowed by the gateway
/// itself, and a lock taken there through the other gateway refuses the very next write
/// without its token through the first.
#[tokio::test]
async fn a_write_into_a_tree_free_of_locks_asks_no_check_until_a_lock_is_taken() {
    let fleet = Fleet::start().await;
    fleet.request(0, "MKCOL", "/d", &[], "").await;
    fleet.put(0, "/d/a.txt", "one").await;
    fleet.until_locks_kept(0, "/d/a.txt").await;
    fleet.put(0, "/d/a.txt", "two").await;
    let allowed = fleet.lookups(0, "write_check", "hit").await;
    fleet.put(0, "/d/b.txt", "three").await;
    assert_eq!(
        fleet.lookups(0, "write_check", "hit").await,
        allowed + 1.0,
        "the PUT's lock check was asked of the locks service"
    );
    let token = fleet.lock(1, "/d/b.txt", "0").await;
    let (status, _) = fleet.request(0, "PUT", "/d/b.txt", &[], "not mine").await;
    assert_eq!(
        status,
        StatusCode::LOCKED,
        "a write past a lock taken through the other gateway"
    );
    let (status, _) = fleet.request(0, "DELETE", "/d", &[], "").await;
    assert_eq!(status, StatusCode::LOCKED, "a removal of the tree holding it");
    let (status, _) = fleet
        .request(0, "PUT", "/d/b.txt", &[("if", &format!("({token})"))], "mine")
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        fleet.get(1, "/d/b.txt").await,
        (StatusCode::OK, "mine".to_owned())
    );
}

/// A lock taken, refreshed and released in one user's tree leaves what a gateway keeps
/// of the others' trees: their writes still need no lock check, and their lock
/// discovery is still answered from what was kept. The lock itself binds at once.
#[tokio::test]
async fn lock_changes_in_one_tree_leave_what_was_kept_of_the_others() {
    let fleet = Fleet::start().await;
    for collection in ["/alice", "/bob"] {
        fleet.request(0, "MKCOL", collection, &[], "").await;
    }
    fleet.put(0, "/alice/x.txt", "alice's").await;
    fleet.put(0, "/alice/y.txt", "alice's too").await;
    let alice = fleet.lock(1, "/alice/x.txt", "0").await;
    fleet.put(0, "/bob/a.txt", "one").await;
    fleet.until_locks_kept(0, "/bob/a.txt").await;
    fleet.put(0, "/bob/a.txt", "two").await;
    let (checks, discoveries) = (
        fleet.lookups(0, "write_check", "hit").await,
        fleet.hits(0, "locks").await,
    );

    let (status, _) = fleet
        .request(
            1,
            "LOCK",
            "/alice/x.txt",
            &[("if", &format!("({alice})")), ("timeout", "Second-900")],
            "",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "the refresh");
    let other = fleet.lock(1, "/alice/y.txt", "0").await;
    let (status, _) = fleet
        .request(1, "UNLOCK", "/alice/y.txt", &[("lock-token", &other)], "")
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    fleet.put(0, "/bob/b.txt", "three").await;
    assert_eq!(
        fleet.lookups(0, "write_check", "hit").await,
        checks + 1.0,
        "a write into bob's tree asked the locks service after lock changes in alice's"
    );
    fleet.propfind0(0, "/bob/a.txt").await;
    assert_eq!(
        fleet.hits(0, "locks").await,
        discoveries + 1.0,
        "bob's lock discovery was fetched again after lock changes in alice's"
    );
    let (status, _) = fleet.request(0, "PUT", "/alice/x.txt", &[], "not alice's").await;
    assert_eq!(status, StatusCode::LOCKED, "a write past alice's lock");
    let discovery = fleet.propfind0(0, "/alice/x.txt").await;
    assert!(
        discovery.contains("Second-900") || discovery.contains("Second-899"),
        "the refreshed timeout shows at once through the other gateway: {discovery}"
    );
}

/// A paused gateway (alive, connected, silent) holds a change up for its lease at most,
/// and once resumed it serves the new content, never its old copy.
#[tokio::test]
async fn a_paused_gateway_delays_changes_by_its_lease_and_then_serves_them() {
    let fleet = Fleet::start().await;
    fleet.put(0, "/doc.txt", "old").await;
    fleet.until_kept(1, "/doc.txt", "old").await;
    let paused = fleet.gateways[1].0.pid();
    stop(paused);
    let put = tokio::time::timeout(Duration::from_secs(20), fleet.put(0, "/doc.txt", "new")).await;
    signal(paused, rustix::process::Signal::CONT);
    put.expect("the PUT was answered once the paused gateway's lease ran out");
    assert_eq!(fleet.get(1, "/doc.txt").await, (StatusCode::OK, "new".to_owned()));
    assert_eq!(fleet.get(0, "/doc.txt").await, (StatusCode::OK, "new".to_owned()));
}

/// fileio killed and started again: the new process knows nothing of the leases the old
/// one granted, so it answers no change before they have run out, and the gateway that
/// had a copy never serves it after the change.
#[tokio::test]
async fn a_restarted_fileio_leaves_no_stale_copy_behind() {
    let mut fleet = Fleet::start().await;
    fleet.put(0, "/doc.txt", "before the restart").await;
    fleet.until_kept(1, "/doc.txt", "before the restart").await;
    fleet.fileio.restart().await;
    // Through A, as soon as the new fileio is reachable (503 until then).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = client()
            .put(fleet.url(0, "/doc.txt"))
            .body("after the restart")
            .send()
            .await
            .unwrap()
            .status();
        if status.is_success() {
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(Instant::now() < deadline, "fileio never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        fleet.get(1, "/doc.txt").await,
        (StatusCode::OK, "after the restart".to_owned())
    );
}

/// A file changed on the volume behind kubedav's back is served fresh within the
/// freshness bound (1 s by default), though the gateway had a copy.
#[tokio::test]
async fn a_change_behind_kubedavs_back_is_seen_within_the_freshness_bound() {
    let fleet = Fleet::start().await;
    fleet.put(0, "/doc.txt", "through kubedav").await;
    fleet.until_kept(1, "/doc.txt", "through kubedav").await;
    std::fs::write(fleet.dir.path().join("root/doc.txt"), "behind its back").unwrap();
    let changed = Instant::now();
    let mut seen = false;
    while changed.elapsed() < Duration::from_secs(5) {
        if fleet.get(1, "/doc.txt").await.1 == "behind its back" {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(seen, "the gateway kept serving its copy for 5 s");
}

/// A hot file whose copy outlived the freshness bound costs fileio a `Stat`, not a read:
/// the gateway renews the copy when fileio's `Stat` repeats the validator of the read
/// it kept (fileio gives one once the file's change time is a second old). A change
/// behind kubedav's back is still seen (above).
#[tokio::test]
async fn a_hot_copy_past_the_freshness_bound_is_revalidated_not_read_again() {
    let fleet = Fleet::start_with(&["--gateway-cache-freshness-ms", "100"]).await;
    let body = "0123456789".repeat(20_000);
    fleet.put(0, "/hot.bin", &body).await;
    let read = || common::metric_sum(fleet.fileio_admin, "kubedav_fileio_read_bytes_total");
    fleet.get_until_renewed(0, "/hot.bin", &body, 1.0).await;
    let read_before = read().await;
    fleet.get_until_renewed(0, "/hot.bin", &body, 3.0).await;
    assert_eq!(read().await, read_before, "fileio read the unchanged file again");
}

/// A COPY whose client goes away while fileio is still copying: fileio finishes it,
/// and the gateway that had the destination's old content kept serves the new content
/// once it is there. (Cancelling the gateway's call must not cancel the announcement
/// that follows the change.) The freshness bound is set long, so a copy that outlived the
/// change would show for a minute, not for a second.
#[tokio::test]
async fn a_change_whose_client_went_away_is_still_announced() {
    let fleet = Fleet::start_with(&["--gateway-cache-freshness-ms", "60000"]).await;
    fleet.request(0, "MKCOL", "/source", &[], "").await;
    fleet.request(0, "MKCOL", "/copy", &[], "").await;
    fleet.put(0, "/source/a.txt", "new").await;
    fleet.put(0, "/copy/a.txt", "old").await;
    // Enough to copy that it takes a while after the client has gone: bytes (which a
    // file system that clones files copies at once), and files, each written, synced and
    // renamed into the copy.
    for i in 0..300 {
        std::fs::write(fleet.dir.path().join(format!("root/source/{i}.txt")), "small").unwrap();
    }
    let big = fleet.dir.path().join("root/source/big.bin");
    let file = std::fs::File::create(&big).unwrap();
    let size = 256u64 << 20;
    std::io::Write::write_all(&mut &file, &vec![7u8; 1 << 20]).unwrap();
    file.set_len(size).unwrap();
    drop(file);
    fleet.until_kept(1, "/copy/a.txt", "old").await;
    let waited_before = fleet.announcements_waited().await;
    let copy = client()
        .request(Method::from_bytes(b"COPY").unwrap(), fleet.url(0, "/source"))
        .header("destination", fleet.url(0, "/copy"))
        .header("overwrite", "T")
        .timeout(Duration::from_millis(100))
        .send()
        .await;
    assert!(
        copy.as_ref().is_err_and(|e| e.is_timeout()),
        "the COPY was answered before its client went away ({copy:?}): copy more bytes"
    );
    let copied = fleet.dir.path().join("root/copy/big.bin");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&copied).map_or(true, |m| m.len() != size) {
        assert!(Instant::now() < deadline, "fileio never finished the COPY");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The copy's last step renames it into place; then fileio announces it (given a few
    // seconds: without the announcement, what B serves below is the finding).
    let deadline = Instant::now() + Duration::from_secs(5);
    while fleet.announcements_waited().await < waited_before + 1.0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        fleet.get(1, "/copy/a.txt").await,
        (StatusCode::OK, "new".to_owned()),
        "gateway B served what it kept from before the COPY"
    );
}
