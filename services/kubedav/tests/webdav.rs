//! WebDAV over HTTP with the services as they run, in both modes: dead properties that
//! outlive a restart, locks that expire or outlive the gateway, how many calls a
//! PROPFIND makes, and tree operations that fail part way. The handlers' own logic
//! (PROPFIND's forms, COPY and MOVE, LOCK and UNLOCK, the If header) is tested
//! in-process in `services/gateway/tests/webdav.rs`.

#[macro_use]
mod common;

use common::{BACKEND, Backend, Mode, Server, client};
use reqwest::{Method, StatusCode};
use std::time::Duration;

fn method(name: &str) -> Method {
    Method::from_bytes(name.as_bytes()).unwrap()
}

fn dav(server: &Server, verb: &str, path: &str) -> reqwest::RequestBuilder {
    client().request(method(verb), server.url(path))
}

async fn send(request: reqwest::RequestBuilder) -> (StatusCode, reqwest::header::HeaderMap, String) {
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, response.text().await.unwrap())
}

/// Parses the whole document; panics if it is not well-formed XML.
fn well_formed(xml: &str) {
    let mut reader = quick_xml::NsReader::from_str(xml);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed ({e}): {xml}"),
        }
    }
}

async fn propfind(server: &Server, path: &str, depth: &str, body: &str) -> (StatusCode, String) {
    let mut request = dav(server, "PROPFIND", path).header("depth", depth);
    if !body.is_empty() {
        request = request
            .header("content-type", "application/xml")
            .body(body.to_owned());
    }
    let (status, _, text) = send(request).await;
    if status == StatusCode::MULTI_STATUS {
        well_formed(&text);
    }
    (status, text)
}

const SET: &str = r#"<?xml version="1.0"?>
<D:propertyupdate xmlns:D="DAV:" xmlns:z="urn:z" xmlns:q="urn:q">
  <D:set><D:prop><z:author>Ada &amp; Bob</z:author><z:tree><q:leaf q:kind="x">1</q:leaf><plain xmlns="">2</plain></z:tree></D:prop></D:set>
  <D:set><D:prop><z:gone>soon</z:gone></D:prop></D:set>
  <D:remove><D:prop><z:gone/></D:prop></D:remove>
</D:propertyupdate>"#;

const GET_Z: &str = r#"<propfind xmlns="DAV:"><prop><author xmlns="urn:z"/><tree xmlns="urn:z"/><gone xmlns="urn:z"/></prop></propfind>"#;

async fn proppatch_and_dead_properties(mode: Mode) {
    let mut server = Server::start(mode).await;
    std::fs::write(server.disk("p.txt"), b"p").unwrap();
    let (status, _, xml) = send(dav(&server, "PROPPATCH", "/p.txt").body(SET)).await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    well_formed(&xml);
    assert!(xml.contains("HTTP/1.1 200 OK") && !xml.contains("403"), "{xml}");
    let (_, xml) = propfind(&server, "/p.txt", "0", GET_Z).await;
    assert!(
        xml.contains("xmlns:N0=\"urn:z\"") && xml.contains("<N0:author>Ada &amp; Bob</N0:author>"),
        "{xml}"
    );
    assert!(
        xml.contains("<n0:leaf xmlns=\"\" xmlns:n0=\"urn:q\" n0:kind=\"x\">1</n0:leaf>")
            && xml.contains("<plain xmlns=\"\">2</plain>"),
        "a stored value comes back with its namespaces: {xml}"
    );
    assert!(
        xml.contains("<N0:gone/>") && xml.contains("404"),
        "removed properties are gone"
    );
    let (_, all) = propfind(&server, "/p.txt", "0", "").await;
    assert!(all.contains("Ada &amp; Bob"), "allprop includes dead properties");

    // All or nothing: a protected property fails the whole request.
    let mixed = r#"<propertyupdate xmlns="DAV:"><set><prop><new xmlns="urn:z">n</new><getetag>x</getetag></prop></set></propertyupdate>"#;
    let (status, _, xml) = send(dav(&server, "PROPPATCH", "/p.txt").body(mixed)).await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert!(
        xml.contains("403 Forbidden") && xml.contains("<D:cannot-modify-protected-property/>"),
        "{xml}"
    );
    assert!(xml.contains("424 Failed Dependency"));
    let (_, xml) = propfind(
        &server,
        "/p.txt",
        "0",
        r#"<propfind xmlns="DAV:"><prop><new xmlns="urn:z"/></prop></propfind>"#,
    )
    .await;
    assert!(xml.contains("404 Not Found"), "nothing was applied: {xml}");

    // A PUT replaces the body, not the properties.
    client()
        .put(server.url("/p.txt"))
        .body("new body")
        .send()
        .await
        .unwrap();
    assert!(
        propfind(&server, "/p.txt", "0", GET_Z)
            .await
            .1
            .contains("Ada &amp; Bob")
    );
    // COPY copies them, MOVE takes them along, DELETE removes them.
    assert_eq!(
        send(dav(&server, "COPY", "/p.txt").header("destination", "/c.txt"))
            .await
            .0,
        StatusCode::CREATED
    );
    assert!(
        propfind(&server, "/c.txt", "0", GET_Z)
            .await
            .1
            .contains("Ada &amp; Bob")
    );
    assert_eq!(
        send(dav(&server, "MOVE", "/c.txt").header("destination", "/m.txt"))
            .await
            .0,
        StatusCode::CREATED
    );
    assert!(
        propfind(&server, "/m.txt", "0", GET_Z)
            .await
            .1
            .contains("Ada &amp; Bob")
    );
    assert_eq!(
        send(dav(&server, "DELETE", "/m.txt")).await.0,
        StatusCode::NO_CONTENT
    );
    client()
        .put(server.url("/m.txt"))
        .body("again")
        .send()
        .await
        .unwrap();
    assert!(
        !propfind(&server, "/m.txt", "0", GET_Z).await.1.contains("Ada"),
        "a new resource starts bare"
    );

    // Dead properties live on the volume: they survive a restart of fileio (of
    // everything, in all-in-one mode).
    let name = if mode == Mode::AllInOne { "all" } else { "fileio" };
    server.process(name).restart().await;
    let (status, xml) = propfind(&server, "/p.txt", "0", GET_Z).await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert!(xml.contains("Ada &amp; Bob"), "after a restart: {xml}");

    assert_eq!(
        send(dav(&server, "PROPPATCH", "/missing").body(SET)).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        send(dav(&server, "PROPPATCH", "/p.txt")).await.0,
        StatusCode::BAD_REQUEST,
        "no body"
    );
    assert_eq!(
        send(
            dav(&server, "PROPPATCH", "/p.txt")
                .body("<propertyupdate xmlns=\"DAV:\"><bogus/></propertyupdate>")
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
}

const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner><D:href>mailto:ada@example.org</D:href></D:owner></D:lockinfo>"#;
async fn take_lock(server: &Server, path: &str, body: &str, depth: &str) -> (StatusCode, String, String) {
    let (status, headers, xml) = send(
        dav(server, "LOCK", path)
            .header("depth", depth)
            .header("timeout", "Second-600")
            .body(body.to_owned()),
    )
    .await;
    let token = headers
        .get("lock-token")
        .map(|v| v.to_str().unwrap().trim_matches(['<', '>']).to_owned())
        .unwrap_or_default();
    (status, token, xml)
}

/// Locks live in the locks service: a gateway restart does not forget them.
/// A lock lives in the locks service, not in the gateway: it still binds after the
/// gateway restarts. (All-in-one has no gateway of its own to restart.)
async fn locks_outlive_the_gateway() {
    let mut server = Server::start(Mode::Microservices).await;
    std::fs::write(server.disk("keep.txt"), b"k").unwrap();
    let (status, token, _) = take_lock(&server, "/keep.txt", LOCKINFO, "0").await;
    assert_eq!(status, StatusCode::OK);
    server.process("gateway").restart().await;
    assert_eq!(
        send(client().put(server.url("/keep.txt")).body("x")).await.0,
        StatusCode::LOCKED
    );
    let put = client()
        .put(server.url("/keep.txt"))
        .header("if", format!("(<{token}>)"))
        .body("x");
    assert_eq!(send(put).await.0, StatusCode::NO_CONTENT);
}

async fn expired_locks_disappear(mode: Mode) {
    // The maximum comes from the environment here, as Kubernetes would set it.
    let server = Server::start_full(mode, &[], &[("KUBEDAV_LOCK_MAX_TIMEOUT_SECONDS", "1")]).await;
    std::fs::write(server.disk("e.txt"), b"e").unwrap();
    let (status, _, xml) = take_lock(&server, "/e.txt", LOCKINFO, "0").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        xml.contains("<D:timeout>Second-1</D:timeout>"),
        "capped by the maximum: {xml}"
    );
    assert_eq!(
        send(client().put(server.url("/e.txt")).body("now")).await.0,
        StatusCode::LOCKED
    );
    // Poll until the lock has expired (bounded: well past its one second).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = send(client().put(server.url("/e.txt")).body("later")).await.0;
        if status == StatusCode::NO_CONTENT {
            break;
        }
        assert_eq!(status, StatusCode::LOCKED);
        assert!(tokio::time::Instant::now() < deadline, "the lock never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Marks a directory immutable (`chattr +i`) until dropped. The suite runs as root on
/// ext4, where this makes unlinking inside the directory fail with EPERM.
struct Immutable(std::path::PathBuf);

impl Immutable {
    fn set(path: std::path::PathBuf) -> Self {
        let status = std::process::Command::new("chattr").arg("+i").arg(&path).status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "chattr +i needs root and an ext4 or XFS volume"
        );
        Immutable(path)
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

/// When part of a tree cannot be removed, DELETE answers 207 naming the members that
/// failed, and removes the rest; a COPY over such a tree takes its place whole. (A
/// deletion that deletes: with the trash, on by default, a volume renames the tree whole
/// into it and nothing can fail partway.)
async fn partial_tree_failures_give_207(mode: Mode) {
    let nothing_kept = [
        ("KUBEDAV_TRASH_RETENTION_DAYS", "0"),
        ("KUBEDAV_VERSIONS_MAX", "0"),
    ];
    let server = Server::start_full(mode, &[], &nothing_kept).await;
    std::fs::create_dir_all(server.disk("t/stuck")).unwrap();
    std::fs::write(server.disk("t/stuck/kept.txt"), b"k").unwrap();
    std::fs::write(server.disk("t/free.txt"), b"x").unwrap();
    std::fs::write(server.disk("src.txt"), b"s").unwrap();
    let _guard = Immutable::set(server.disk("t/stuck"));
    let (status, _, xml) = send(dav(&server, "DELETE", "/t/")).await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    well_formed(&xml);
    // The volume refuses with EPERM (403); the S3 server with a 500 of its own, which
    // is kubedav's 503: worth a retry, never a 404.
    let refused = match common::backend() {
        Backend::Volume => "403 Forbidden",
        Backend::S3 | Backend::S3OverTls => "503 Service Unavailable",
    };
    assert!(
        xml.contains("<D:href>/t/stuck/kept.txt</D:href>") && xml.contains(refused),
        "{xml}"
    );
    assert!(
        !xml.contains("<D:href>/t/</D:href>"),
        "ancestors of a failed member are not reported"
    );
    assert!(!server.disk("t/free.txt").exists(), "the rest was deleted");
    assert!(server.disk("t/stuck/kept.txt").exists());
    if common::backend() == Backend::S3 {
        // A bucket has no rename to swap a copy in with: the destination goes first, and
        // a COPY over a tree that cannot go is refused, its source untouched.
        let (status, _, text) = send(dav(&server, "COPY", "/src.txt").header("destination", "/t")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
        assert_eq!(std::fs::read(server.disk("src.txt")).unwrap(), b"s");
        assert!(server.disk("t/stuck/kept.txt").exists());
        return;
    }
    // A COPY never removes its destination first: the copy takes its place in one step,
    // and what of the old tree cannot be removed stays hidden, never half-visible.
    let (status, _, xml) = send(dav(&server, "COPY", "/src.txt").header("destination", "/t")).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{xml}");
    assert_eq!(
        std::fs::read(server.disk("t")).unwrap(),
        b"s",
        "the copy is in place"
    );
    let hidden: Vec<_> = common::names_in(&server.root)
        .into_iter()
        .filter(|name| name.starts_with(".kubedav-upload-"))
        .collect();
    assert_eq!(hidden.len(), 1, "the old tree, hidden: {hidden:?}");
    let (_, listing) = propfind(&server, "/", "1", "").await;
    assert!(
        !listing.contains("kubedav-upload") && !listing.contains("stuck"),
        "{listing}"
    );
    // The test's own cleanup: the immutable directory now lives under the hidden name.
    let _moved = Immutable(server.root.join(&hidden[0]).join("stuck"));
}

/// Sum of a metric's samples on one process's admin port.
async fn metric_sum(server: &Server, process: &str, name: &str) -> f64 {
    let addr = server.admin_of(process);
    common::metric_sum(addr, name).await
}

/// A Depth 1 PROPFIND costs one fileio call and one locks call, however many entries
/// the collection holds (here more than one batch of the listing stream).
async fn propfind_depth_one_is_one_call_each(mode: Mode) {
    let server = Server::start(mode).await;
    std::fs::create_dir(server.disk("many")).unwrap();
    for i in 0..300 {
        std::fs::write(server.disk(&format!("many/f{i:03}")), b"x").unwrap();
    }
    let (fileio, calls) = match mode {
        Mode::AllInOne => ("all", "kubedav_fileio_scans_total"),
        Mode::Microservices => ("fileio", "kubedav_grpc_server_started_total"),
    };
    let fileio_before = metric_sum(&server, fileio, calls).await;
    let locks_before = if mode == Mode::Microservices {
        metric_sum(&server, "locks", calls).await
    } else {
        0.0
    };
    let (status, xml) = propfind(&server, "/many/", "1", "").await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert_eq!(xml.matches("<D:response>").count(), 301);
    assert_eq!(
        metric_sum(&server, fileio, calls).await - fileio_before,
        1.0,
        "one fileio call"
    );
    if mode == Mode::Microservices {
        assert_eq!(
            metric_sum(&server, "locks", calls).await - locks_before,
            1.0,
            "one locks call"
        );
    }
}

in_both_modes!(
    proppatch_and_dead_properties,
    expired_locks_disappear,
    propfind_depth_one_is_one_call_each,
    partial_tree_failures_give_207,
);
on_s3!(
    proppatch_and_dead_properties,
    expired_locks_disappear,
    propfind_depth_one_is_one_call_each,
    partial_tree_failures_give_207,
);

microservices_only!(locks_outlive_the_gateway);
