//! The trash and the versions end to end (issue 54), in both run modes and on both
//! backends: what a DELETE,
//! an overwrite and a collection replaced by a MOVE remove comes back byte-identical,
//! with its dead properties and checksums, through `{base}/.kubedav/trash/`; a file
//! keeps ten versions that follow it through a MOVE and into the trash; and a real sync
//! client that deletes a whole tree by mistake (rclone `sync` from an empty directory)
//! loses nothing. (Who sees what, method by method, is `services/gateway/tests/trash.rs`,
//! in process; retention and quotas on a test clock are `services/fileio/tests/keep.rs`.)

#[macro_use]
mod common;

use common::tools::run;
use common::{BACKEND, Backend, Mode, Server, client};
use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use std::collections::HashMap;

/// Trash for 30 days, ten versions per file.
const KEEPING: [(&str, &str); 2] = [
    ("KUBEDAV_TRASH_RETENTION_DAYS", "30"),
    ("KUBEDAV_VERSIONS_MAX", "10"),
];

const HELLO: &[u8] = b"hello world";
const HELLO_SHA1: &str = "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed";

async fn start(mode: Mode) -> Server {
    Server::start_full(mode, &[], &KEEPING).await
}

async fn send(
    server: &Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (StatusCode, String) {
    let mut request = client().request(Method::from_bytes(method.as_bytes()).unwrap(), server.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.body(body).send().await.unwrap();
    let status = response.status();
    (status, response.text().await.unwrap())
}

async fn put(server: &Server, path: &str, body: &[u8]) {
    let (status, text) = send(server, "PUT", path, &[], body.to_vec()).await;
    assert!(status.is_success(), "PUT {path}: {status} {text}");
}

async fn mkcol(server: &Server, path: &str) {
    let (status, text) = send(server, "MKCOL", path, &[], Vec::new()).await;
    assert_eq!(status, StatusCode::CREATED, "MKCOL {path}: {text}");
}

async fn get(server: &Server, path: &str) -> (StatusCode, Vec<u8>) {
    let response = client().get(server.url(path)).send().await.unwrap();
    (response.status(), response.bytes().await.unwrap().to_vec())
}

/// `n` bytes that differ from file to file (`seed`).
fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32 * 31 + seed as u32 * 7) as u8).collect()
}

/// The trash as a client lists it: each item's href by its original location.
async fn trash(server: &Server) -> HashMap<String, String> {
    let (status, xml) = send(
        server,
        "PROPFIND",
        "/.kubedav/trash/",
        &[("depth", "1")],
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::MULTI_STATUS, "{xml}");
    responses(&xml)
        .into_iter()
        .filter_map(|(href, properties)| Some((properties.get("trashbin-original-location")?.clone(), href)))
        .collect()
}

/// Restores the item deleted from `origin` to `destination`.
async fn restore(server: &Server, items: &HashMap<String, String>, origin: &str, destination: &str) {
    let href = items
        .get(origin)
        .unwrap_or_else(|| panic!("no trash item from {origin}: {items:?}"));
    let (status, text) = send(server, "MOVE", href, &[("destination", destination)], Vec::new()).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "restore {origin} to {destination}: {text}"
    );
}

/// The versions of `path`: (href, size), oldest first.
async fn versions(server: &Server, path: &str) -> Vec<(String, u64)> {
    let (status, xml) = send(
        server,
        "PROPFIND",
        &format!("/.kubedav/versions{path}"),
        &[("depth", "1")],
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::MULTI_STATUS, "{path}: {xml}");
    responses(&xml)
        .into_iter()
        .skip(1)
        .map(|(href, properties)| (href, properties["getcontentlength"].parse().unwrap()))
        .collect()
}

/// Each `response` of a multistatus: its href, and its properties' text by local name.
fn responses(xml: &str) -> Vec<(String, HashMap<String, String>)> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut found: Vec<(String, HashMap<String, String>)> = Vec::new();
    let (mut open, mut text) = (Vec::<String>::new(), String::new());
    loop {
        match reader
            .read_event()
            .unwrap_or_else(|e| panic!("not XML ({e}): {xml}"))
        {
            Event::Start(start) => {
                let name = start.local_name().into_inner().to_owned();
                if name == "response" {
                    found.push(Default::default());
                }
                open.push(name);
                text.clear();
            }
            Event::Text(part) => text.push_str(&part.xml10_content()),
            Event::GeneralRef(name) => text.push_str(&format!("&{};", name.xml10_content())),
            Event::End(_) => {
                let name = open.pop().unwrap_or_default();
                if let Some((href, properties)) = found.last_mut()
                    && !text.is_empty()
                {
                    let value = quick_xml::escape::unescape(&text).unwrap().into_owned();
                    if name == "href" {
                        *href = value;
                    } else {
                        properties.insert(name, value);
                    }
                }
                text.clear();
            }
            Event::Eof => return found,
            _ => {}
        }
    }
}

/// The value of the dead property `urn:x` `color` of `path`, and its `oc:checksums`.
async fn color_and_checksums(server: &Server, path: &str) -> (String, String) {
    let (status, xml) = send(
        server,
        "PROPFIND",
        path,
        &[("depth", "0")],
        br#"<d:propfind xmlns:d="DAV:" xmlns:x="urn:x" xmlns:oc="http://owncloud.org/ns"><d:prop><x:color/><oc:checksums/></d:prop></d:propfind>"#.to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::MULTI_STATUS, "{xml}");
    let found = responses(&xml);
    let properties = &found[0].1;
    let text = |name: &str| properties.get(name).cloned().unwrap_or_default();
    (text("color"), text("checksum"))
}

async fn set_color(server: &Server, path: &str, color: &str) {
    let body = format!(
        r#"<d:propertyupdate xmlns:d="DAV:" xmlns:x="urn:x"><d:set><d:prop><x:color>{color}</x:color></d:prop></d:set></d:propertyupdate>"#
    );
    let (status, text) = send(server, "PROPPATCH", path, &[], body.into_bytes()).await;
    assert_eq!(status, StatusCode::MULTI_STATUS, "{text}");
}

/// A file, a three-level collection and a collection replaced by a MOVE come back from
/// the trash as they were: bytes, dead properties, checksums; a taken name is refused.
async fn what_was_deleted_comes_back_whole(mode: Mode) {
    let server = start(mode).await;
    let (status, text) = send(
        &server,
        "PUT",
        "/a.txt",
        &[("oc-checksum", &format!("SHA1:{HELLO_SHA1}"))],
        HELLO.to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    set_color(&server, "/a.txt", "blue").await;
    for dir in ["/tree", "/tree/l1", "/tree/l1/l2", "/replaced", "/incoming"] {
        mkcol(&server, dir).await;
    }
    let deep = bytes(300_000, 1);
    put(&server, "/tree/l1/l2/deep.bin", &deep).await;
    put(&server, "/tree/top.txt", b"top").await;
    set_color(&server, "/tree/l1", "green").await;
    put(&server, "/replaced/old.txt", b"old").await;
    put(&server, "/incoming/new.txt", b"new").await;
    let before = color_and_checksums(&server, "/a.txt").await;
    assert!(before.1.contains(HELLO_SHA1), "{before:?}");

    assert_eq!(
        send(&server, "DELETE", "/a.txt", &[], Vec::new()).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        send(&server, "DELETE", "/tree", &[], Vec::new()).await.0,
        StatusCode::NO_CONTENT
    );
    let (status, _) = send(
        &server,
        "MOVE",
        "/incoming",
        &[("destination", "/replaced"), ("overwrite", "T")],
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(get(&server, "/a.txt").await.0, StatusCode::NOT_FOUND);

    let items = trash(&server).await;
    assert_eq!(items.len(), 3, "{items:?}");
    restore(&server, &items, "a.txt", "/a.txt").await;
    assert_eq!(get(&server, "/a.txt").await.1, HELLO);
    assert_eq!(color_and_checksums(&server, "/a.txt").await, before);
    restore(&server, &items, "tree", "/tree").await;
    assert_eq!(get(&server, "/tree/l1/l2/deep.bin").await.1, deep);
    assert_eq!(get(&server, "/tree/top.txt").await.1, b"top");
    assert_eq!(color_and_checksums(&server, "/tree/l1").await.0, "green");
    // The replaced collection's name is taken by what replaced it.
    let taken = items["replaced"].clone();
    let (status, text) = send(
        &server,
        "MOVE",
        &taken,
        &[("destination", "/replaced")],
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED, "{text}");
    restore(&server, &items, "replaced", "/replaced-before").await;
    assert_eq!(get(&server, "/replaced-before/old.txt").await.1, b"old");
    assert_eq!(get(&server, "/replaced/new.txt").await.1, b"new");
    assert!(trash(&server).await.is_empty());
}

/// Twelve PUTs leave ten versions; one restores byte-identical; they follow a MOVE, go
/// to the trash with their file and come back with it.
async fn a_file_keeps_ten_versions_that_follow_it(mode: Mode) {
    let server = start(mode).await;
    let contents: Vec<Vec<u8>> = (0..12u8).map(|i| bytes(1000 + i as usize, i)).collect();
    for content in &contents {
        put(&server, "/v.bin", content).await;
    }
    let kept = versions(&server, "/v.bin").await;
    assert_eq!(kept.len(), 10, "{kept:?}");
    let sizes: Vec<u64> = kept.iter().map(|(_, size)| *size).collect();
    assert_eq!(
        sizes,
        (1..11).map(|i| 1000 + i).collect::<Vec<u64>>(),
        "the ten newest replaced, oldest first"
    );
    assert_eq!(get(&server, &kept[0].0).await.1, contents[1]);

    let (status, text) = send(
        &server,
        "COPY",
        &kept[0].0,
        &[("destination", "/v.bin")],
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(get(&server, "/v.bin").await.1, contents[1]);
    let kept = versions(&server, "/v.bin").await;
    assert_eq!(kept.len(), 10);
    assert_eq!(
        get(&server, &kept[9].0).await.1,
        contents[11],
        "the replaced content is the newest version"
    );

    let (status, _) = send(
        &server,
        "MOVE",
        "/v.bin",
        &[("destination", "/w.bin")],
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(versions(&server, "/w.bin").await.len(), 10);
    let (status, _) = send(
        &server,
        "PROPFIND",
        "/.kubedav/versions/v.bin",
        &[("depth", "1")],
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    assert_eq!(
        send(&server, "DELETE", "/w.bin", &[], Vec::new()).await.0,
        StatusCode::NO_CONTENT
    );
    restore(&server, &trash(&server).await, "w.bin", "/w.bin").await;
    let back = versions(&server, "/w.bin").await;
    assert_eq!(back.len(), 10, "the versions came back with their file");
    assert_eq!(get(&server, &back[9].0).await.1, contents[11]);
}

/// rclone `sync` from an empty directory deletes a whole tree, as a sync client that
/// mistakes an empty mount for a deleted tree does; everything comes back from the
/// trash, parents first.
async fn a_sync_from_an_empty_directory_loses_nothing(mode: Mode) {
    let server = start(mode).await;
    let files: Vec<(String, Vec<u8>)> = [
        "photos/2025/a.jpg",
        "photos/2025/b.jpg",
        "photos/2026/c.jpg",
        "docs/report.txt",
        "top.txt",
    ]
    .iter()
    .enumerate()
    .map(|(i, path)| (path.to_string(), bytes(5000 + i * 100, i as u8)))
    .collect();
    for dir in ["/photos", "/photos/2025", "/photos/2026", "/docs"] {
        mkcol(&server, dir).await;
    }
    for (path, content) in &files {
        put(&server, &format!("/{path}"), content).await;
    }
    let empty = tempfile::tempdir().unwrap();
    let url = server.url("/");
    run(
        "rclone",
        &[
            "--config",
            "/dev/null",
            "--webdav-url",
            &url,
            "--webdav-vendor",
            "other",
            "sync",
            empty.path().to_str().unwrap(),
            ":webdav:",
        ],
        None,
    )
    .await;
    for (path, _) in &files {
        assert_eq!(
            get(&server, &format!("/{path}")).await.0,
            StatusCode::NOT_FOUND,
            "rclone deleted {path}"
        );
    }

    let items = trash(&server).await;
    let mut origins: Vec<&String> = items.keys().collect();
    origins.sort_by_key(|origin| origin.matches('/').count());
    for origin in origins {
        let path = format!("/{origin}");
        if get(&server, &path).await.0 == StatusCode::NOT_FOUND {
            restore(&server, &items, origin, &path).await;
        }
    }
    for (path, content) in &files {
        assert_eq!(
            &get(&server, &format!("/{path}")).await.1,
            content,
            "{path} came back"
        );
    }
}

/// Isolation, through the real processes and either backend: bob, alice's neighbour,
/// lists none of her trash items, and her item, her file's versions and one version
/// answer him exactly as ones that never existed, in every method the areas answer and
/// in the spellings that reach them; a file he deleted from a folder alice shared with
/// him is in his trash and hers, and he restores it. (Every method and spelling, with
/// more users, is `services/gateway/tests/trash.rs`, in process.)
async fn a_neighbour_sees_nothing_kept_of_a_home_but_restores_what_he_deleted_through_a_share(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("alice", "pw"), ("bob", "pw")]);
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "homes: /home/{user}\nquota:\n  homes: 1GiB\n").unwrap();
    let mut envs = KEEPING.to_vec();
    envs.push(("KUBEDAV_POLICY", policy.to_str().unwrap()));
    let server = Server::start_auth(mode, Some(&users), &[], &[], &envs).await;
    let ask = |user: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str| {
        let mut request = client()
            .request(Method::from_bytes(method.as_bytes()).unwrap(), server.url(path))
            .basic_auth(user, Some("pw"))
            .body(body.to_owned());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            let mut headers: Vec<(String, String)> = response
                .headers()
                .iter()
                .filter(|(name, _)| !matches!(name.as_str(), "date" | "x-request-id" | "traceparent"))
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("?").to_owned()))
                .collect();
            headers.sort();
            (status, headers, response.text().await.unwrap())
        }
    };
    for (path, body) in [
        ("/home/alice/diary.txt", "one"),
        ("/home/alice/diary.txt", "two"),
        ("/home/alice/gone.txt", "gone"),
    ] {
        assert!(ask("alice", "PUT", path, &[], body).await.0.is_success());
    }
    assert_eq!(
        ask("alice", "DELETE", "/home/alice/gone.txt", &[], "").await.0,
        StatusCode::NO_CONTENT
    );
    let listing = |user: &'static str| {
        let ask = &ask;
        async move {
            let (status, _, text) = ask(user, "PROPFIND", "/.kubedav/trash/", &[("depth", "1")], "").await;
            assert_eq!(status, StatusCode::MULTI_STATUS, "{user}: {text}");
            responses(&text)
                .into_iter()
                .skip(1)
                .map(|(href, properties)| (properties["trashbin-original-location"].clone(), href))
                .collect::<HashMap<String, String>>()
        }
    };
    let item = listing("alice").await["home/alice/gone.txt"].clone();
    assert!(listing("bob").await.is_empty());
    let (_, _, text) = ask(
        "alice",
        "PROPFIND",
        "/.kubedav/versions/home/alice/diary.txt",
        &[("depth", "1")],
        "",
    )
    .await;
    let version = responses(&text)[1].0.clone();
    let id = item.rsplit('/').next().unwrap().to_owned();
    // As long as the real id (a flat item's has 18 random hex digits, a folder's 16).
    let made_up = format!("{}-{}", &id[..20], &"0123456789abcdef0123456789"[..id.len() - 21]);
    let version_id = version.rsplit('/').next().unwrap().to_owned();
    let other_version = format!("{}-01234567", &version_id[..20]);
    let pairs = [
        (
            item.clone(),
            item.replace(&id, &made_up),
            (made_up.as_str(), id.as_str()),
        ),
        (
            item.replace("/trash/", "/trash//"),
            item.replace("/trash/", "/trash//").replace(&id, &made_up),
            (made_up.as_str(), id.as_str()),
        ),
        (
            "/.kubedav/versions/home/alice/diary.txt".to_owned(),
            "/.kubedav/versions/home/alice/diarz.txt".to_owned(),
            ("diarz.txt", "diary.txt"),
        ),
        (
            "/.kubedav/versions/home/%61lice/diary.txt".to_owned(),
            "/.kubedav/versions/home/%61lice/diarz.txt".to_owned(),
            ("diarz.txt", "diary.txt"),
        ),
        (
            version.clone(),
            version
                .replace(&version_id, &other_version)
                .replace("diary.txt", "diarz.txt"),
            ("diarz", "diary"),
        ),
    ];
    assert!(
        ask("bob", "PUT", "/home/bob/mine.txt", &[], "mine")
            .await
            .0
            .is_success()
    );
    for (hidden, absent, (named, as_)) in &pairs {
        for (method, headers) in [
            ("PROPFIND", vec![("depth", "0")]),
            ("PROPFIND", vec![("depth", "1")]),
            ("GET", vec![]),
            ("HEAD", vec![]),
            ("MOVE", vec![("destination", "/home/bob/taken.txt")]),
            (
                "COPY",
                vec![("destination", "/home/bob/mine.txt"), ("overwrite", "T")],
            ),
            ("DELETE", vec![]),
            ("PUT", vec![]),
        ] {
            let there = ask("bob", method, hidden, &headers, "").await;
            let mut nowhere = ask("bob", method, absent, &headers, "").await;
            nowhere.2 = nowhere.2.replace(named, as_).replace(&other_version, &version_id);
            assert_eq!(there, nowhere, "bob {method} {hidden} against {absent}");
            assert!(!there.0.is_success(), "bob {method} {hidden}: {:?}", there);
        }
    }
    assert_eq!(listing("alice").await.len(), 1, "alice's item is still there");

    // Through a share: bob deletes from alice's folder, and restores it.
    assert_eq!(
        ask("alice", "MKCOL", "/home/alice/project", &[], "").await.0,
        StatusCode::CREATED
    );
    assert!(
        ask("alice", "PUT", "/home/alice/project/plan.txt", &[], "the plan")
            .await
            .0
            .is_success()
    );
    let (status, _, text) = ask(
        "alice",
        "POST",
        "/.kubedav/shares",
        &[("x-kubedav-request", "1"), ("content-type", "application/json")],
        r#"{"path": "/home/alice/project", "to": "user:bob", "permission": "write"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    assert_eq!(
        ask("bob", "DELETE", "/home/alice/project/plan.txt", &[], "")
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    let bobs = listing("bob").await;
    assert_eq!(bobs.keys().collect::<Vec<_>>(), ["home/alice/project/plan.txt"]);
    assert_eq!(
        listing("alice").await["home/alice/project/plan.txt"],
        bobs["home/alice/project/plan.txt"]
    );
    let (status, _, text) = ask(
        "bob",
        "MOVE",
        &bobs["home/alice/project/plan.txt"],
        &[("destination", "/home/alice/project/plan.txt")],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    let (status, _, text) = ask("alice", "GET", "/home/alice/project/plan.txt", &[], "").await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, "the plan"));
}

/// The file manager's trash and versions in headless Chromium
/// (`tests/clients/browser_keep.py`): alice restores an old version of a file, restores
/// two deleted files (one over a taken name, which she agrees to replace) and purges a
/// third; the server then holds what she asked for (screenshots kept).
async fn trash_and_versions_in_the_file_manager(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("alice", "pw")]);
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "homes: /home/{user}\n").unwrap();
    let mut envs = KEEPING.to_vec();
    envs.push(("KUBEDAV_POLICY", policy.to_str().unwrap()));
    let server = Server::start_auth(mode, Some(&users), &[], &[], &envs).await;
    let as_alice = |method: &str, path: &str, body: &[u8]| {
        client()
            .request(Method::from_bytes(method.as_bytes()).unwrap(), server.url(path))
            .basic_auth("alice", Some("pw"))
            .body(body.to_vec())
            .send()
    };
    for (path, body) in [
        ("/home/alice/report.txt", &b"first"[..]),
        ("/home/alice/report.txt", b"the second draft"),
        ("/home/alice/report.txt", b"the third draft"),
        ("/home/alice/notes.txt", b"notes"),
        ("/home/alice/draft.txt", b"the deleted draft"),
        ("/home/alice/old.txt", b"old"),
    ] {
        assert!(as_alice("PUT", path, body).await.unwrap().status().is_success());
    }
    for path in [
        "/home/alice/notes.txt",
        "/home/alice/draft.txt",
        "/home/alice/old.txt",
    ] {
        assert_eq!(
            as_alice("DELETE", path, b"").await.unwrap().status(),
            StatusCode::NO_CONTENT
        );
    }
    assert!(
        as_alice("PUT", "/home/alice/draft.txt", b"a new draft")
            .await
            .unwrap()
            .status()
            .is_success()
    );

    let python = common::tools::tool("KUBEDAV_BROWSER_PYTHON", "need-browser.sh");
    let shots = std::env::var("KUBEDAV_SCREENSHOTS").map_or_else(|_| dir.path().to_owned(), Into::into);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/browser_keep.py");
    let at = server.url("");
    let output = run(
        &python,
        &[script, at.trim_end_matches('/'), shots.to_str().unwrap(), "pw"],
        None,
    )
    .await;
    assert!(output.contains("keep view ok"), "{output}");
    assert!(shots.join("trash.png").exists() && shots.join("versions.png").exists());
    let read = |path: &'static str| {
        let request = as_alice("GET", path, b"");
        async move { request.await.unwrap().bytes().await.unwrap().to_vec() }
    };
    assert_eq!(read("/home/alice/report.txt").await, b"first");
    assert_eq!(read("/home/alice/notes.txt").await, b"notes");
    assert_eq!(read("/home/alice/draft.txt").await, b"the deleted draft");
    let versions = client()
        .request(
            Method::from_bytes(b"PROPFIND").unwrap(),
            server.url("/.kubedav/versions/home/alice/draft.txt"),
        )
        .basic_auth("alice", Some("pw"))
        .header("depth", "1")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        responses(&versions).len(),
        2,
        "the replaced draft is a version: {versions}"
    );
}

/// fileio is killed (SIGKILL) in the middle of a large collection's trashing, once the
/// copies are made and the originals are being deleted (on a bucket, when its journal
/// appears; on a volume, when its item does). After fileio's restart the collection is
/// whole in one place: in the trash (the restarted replica finishes the deletion the
/// journal names) or in place, never split; restored, all of it is back.
async fn a_fileio_killed_while_trashing_leaves_the_tree_whole() {
    const FILES: usize = 600;
    let mut server = start(Mode::Microservices).await;
    mkcol(&server, "/big").await;
    let uploads = futures_util::stream::iter(0..FILES)
        .map(|i| {
            let server = &server;
            async move {
                put(
                    server,
                    &format!("/big/f{i:04}.txt"),
                    format!("file {i}").as_bytes(),
                )
                .await
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>();
    uploads.await;
    let trash_dir = server.disk(".kubedav/trash/.kubedav");
    let deleting = {
        let url = server.url("/big");
        tokio::spawn(async move { client().delete(url).send().await.map(|r| r.status()) })
    };
    let marker = match common::backend() {
        Backend::Volume => None,
        _ => Some("journal.json"),
    };
    let started = common::eventually(std::time::Duration::from_secs(60), || {
        std::fs::read_dir(&trash_dir).is_ok_and(|items| {
            items
                .flatten()
                .any(|item| marker.is_none_or(|name| item.path().join(name).exists()))
        })
    })
    .await;
    assert!(started, "the trashing never began");
    server.process("fileio").restart().await;
    let _ = deleting.await;
    let in_place = |server: &Server| {
        (0..FILES)
            .filter(|i| server.disk(&format!("big/f{i:04}.txt")).exists())
            .count()
    };
    let whole = common::eventually_async(std::time::Duration::from_secs(30), || async {
        let items = trash(&server).await;
        let left = in_place(&server);
        (items.len() == 1 && left == 0) || (items.is_empty() && left == FILES)
    })
    .await;
    let items = trash(&server).await;
    assert!(
        whole,
        "split: {} of {FILES} in place, {} items",
        in_place(&server),
        items.len()
    );
    println!(
        "after the kill: {}",
        if items.is_empty() {
            "whole in place"
        } else {
            "whole in the trash"
        }
    );
    if let Some(href) = items.get("big") {
        let (status, text) = send(&server, "MOVE", href, &[("destination", "/big")], Vec::new()).await;
        assert_eq!(status, StatusCode::CREATED, "{text}");
    }
    assert_eq!(in_place(&server), FILES, "every file is back");
    assert_eq!(get(&server, "/big/f0599.txt").await.1, b"file 599");
}

in_both_modes!(
    trash_and_versions_in_the_file_manager,
    a_neighbour_sees_nothing_kept_of_a_home_but_restores_what_he_deleted_through_a_share,
    what_was_deleted_comes_back_whole,
    a_file_keeps_ten_versions_that_follow_it,
    a_sync_from_an_empty_directory_loses_nothing,
);
microservices_only!(a_fileio_killed_while_trashing_leaves_the_tree_whole);

mod s3_killed {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fileio_killed_while_trashing_leaves_the_tree_whole() {
        super::BACKEND
            .scope(
                super::Backend::S3,
                super::a_fileio_killed_while_trashing_leaves_the_tree_whole(),
            )
            .await
    }
}

on_s3!(
    trash_and_versions_in_the_file_manager,
    a_neighbour_sees_nothing_kept_of_a_home_but_restores_what_he_deleted_through_a_share,
    what_was_deleted_comes_back_whole,
    a_file_keeps_ten_versions_that_follow_it,
    a_sync_from_an_empty_directory_loses_nothing,
);
