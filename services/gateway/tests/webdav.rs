//! WebDAV handlers in-process (see `common`): COPY and MOVE, a Depth infinity lock
//! guarding its tree, and names XML cannot carry. What needs the services as processes
//! stays in `services/kubedav/tests/webdav.rs`.

mod common;

use common::{App, RequestBuilder};
use http::{Method, StatusCode};

const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner><D:href>mailto:ada@example.org</D:href></D:owner></D:lockinfo>"#;

const SHARED: &str = r#"<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#;

fn method(name: &str) -> Method {
    Method::from_bytes(name.as_bytes()).unwrap()
}

fn dav(app: &App, verb: &str, path: &str) -> RequestBuilder {
    app.client().request(method(verb), app.url(path))
}

async fn send(request: RequestBuilder) -> (StatusCode, http::HeaderMap, String) {
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

async fn propfind(app: &App, path: &str, depth: &str, body: &str) -> (StatusCode, String) {
    let mut request = dav(app, "PROPFIND", path).header("depth", depth);
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

async fn take_lock(app: &App, path: &str, body: &str, depth: &str) -> (StatusCode, String, String) {
    let (status, headers, xml) = send(
        dav(app, "LOCK", path)
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

#[tokio::test]
async fn copy_and_move() {
    let app = App::new();
    std::fs::create_dir_all(app.disk("src/sub")).unwrap();
    std::fs::write(app.disk("src/f.txt"), b"file").unwrap();
    std::fs::write(app.disk("src/sub/g.txt"), b"deep").unwrap();
    let host = common::HOST;
    let copy = |from: &str, to: &str| dav(&app, "COPY", from).header("destination", to);
    let moving = |from: &str, to: &str| dav(&app, "MOVE", from).header("destination", to);

    let (status, headers, _) = send(copy("/src/f.txt", &format!("http://{host}/f2.txt"))).await;
    assert_eq!(status, StatusCode::CREATED, "an absolute Destination");
    assert!(headers.contains_key("location"));
    assert_eq!(std::fs::read(app.disk("f2.txt")).unwrap(), b"file");
    assert_eq!(
        send(copy("/src/f.txt", "/f2.txt")).await.0,
        StatusCode::NO_CONTENT,
        "a path Destination, overwritten"
    );
    assert_eq!(
        send(copy("/src/f.txt", "/f2.txt").header("overwrite", "F"))
            .await
            .0,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(
        send(copy("/src/f.txt", "/no/parent.txt")).await.0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        send(copy("/src/f.txt", "http://other.example/x")).await.0,
        StatusCode::BAD_GATEWAY
    );
    assert_eq!(
        send(copy("/src/f.txt", "/src/f.txt")).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        send(copy("/src/", "/src/sub/inner/")).await.0,
        StatusCode::FORBIDDEN,
        "into itself"
    );
    assert_eq!(send(copy("/missing", "/x")).await.0, StatusCode::NOT_FOUND);
    let (status, _, text) = send(dav(&app, "COPY", "/src/f.txt")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("Destination"));
    let (status, _, text) = send(copy("/src/f.txt", "/f3.txt").header("overwrite", "maybe")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("Overwrite"));
    let (status, _, text) = send(copy("/src/", "/shallow/").header("depth", "1")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("Depth"));

    assert_eq!(
        send(copy("/src/", "/shallow/").header("depth", "0")).await.0,
        StatusCode::CREATED
    );
    assert!(app.disk("shallow").is_dir() && std::fs::read_dir(app.disk("shallow")).unwrap().count() == 0);
    assert_eq!(send(copy("/src/", "/tree/")).await.0, StatusCode::CREATED);
    assert_eq!(std::fs::read(app.disk("tree/sub/g.txt")).unwrap(), b"deep");

    assert_eq!(send(moving("/tree/", "/moved/")).await.0, StatusCode::CREATED);
    assert!(!app.disk("tree").exists() && app.disk("moved/sub/g.txt").exists());
    assert_eq!(
        send(moving("/moved/", "/shallow/").header("overwrite", "F"))
            .await
            .0,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(
        send(moving("/moved/", "/shallow/")).await.0,
        StatusCode::NO_CONTENT
    );
    assert!(app.disk("shallow/sub/g.txt").exists() && !app.disk("moved").exists());
    assert_eq!(
        send(moving("/shallow/", "/shallow/sub/x/")).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        send(moving("/shallow/", "/none/x/")).await.0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        send(moving("/shallow/", "/s2/").header("depth", "0")).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(send(moving("/", "/elsewhere/")).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn depth_infinity_lock_guards_the_tree() {
    let app = App::new();
    std::fs::create_dir_all(app.disk("c/x/y")).unwrap();
    let (status, token, _) = take_lock(&app, "/c/", LOCKINFO, "infinity").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, xml) = send(app.client().put(app.url("/c/x/y/z.txt")).body("deep")).await;
    assert_eq!(
        status,
        StatusCode::LOCKED,
        "a PUT deep inside a depth-infinity lock"
    );
    assert!(
        xml.contains("<D:href>/c/</D:href>"),
        "the body names the lock root: {xml}"
    );
    assert!(!app.disk("c/x/y/z.txt").exists());
    assert_eq!(send(dav(&app, "MKCOL", "/c/x/new")).await.0, StatusCode::LOCKED);
    assert_eq!(
        take_lock(&app, "/c/x/y", SHARED, "0").await.0,
        StatusCode::LOCKED,
        "an ancestor's lock conflicts"
    );
    assert_eq!(
        take_lock(&app, "/", LOCKINFO, "infinity").await.0,
        StatusCode::LOCKED,
        "a descendant's lock conflicts"
    );
    assert_eq!(send(dav(&app, "DELETE", "/")).await.0, StatusCode::FORBIDDEN);
    let put = app
        .client()
        .put(app.url("/c/x/y/z.txt"))
        .header("if", format!("(<{token}>)"))
        .body("deep");
    assert_eq!(send(put).await.0, StatusCode::CREATED);
    // lockdiscovery shows the inherited lock on members.
    let (_, xml) = propfind(
        &app,
        "/c/x/",
        "1",
        r#"<propfind xmlns="DAV:"><prop><lockdiscovery/></prop></propfind>"#,
    )
    .await;
    assert_eq!(
        xml.matches(&token).count(),
        2,
        "inherited by /c/x/ and /c/x/y/: {xml}"
    );
    // Refresh through a member.
    let refresh = dav(&app, "LOCK", "/c/x/y/z.txt").header("if", format!("(<{token}>)"));
    assert_eq!(send(refresh).await.0, StatusCode::OK);
    // DELETE of the locked tree needs the token, then releases the lock.
    assert_eq!(send(dav(&app, "DELETE", "/c/")).await.0, StatusCode::LOCKED);
    assert_eq!(
        send(dav(&app, "DELETE", "/c/").header("if", format!("(<{token}>)")))
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        send(dav(&app, "MKCOL", "/c")).await.0,
        StatusCode::CREATED,
        "no lock is left on the path"
    );
}

/// A name XML cannot carry (a control character), put on the volume by other means, is
/// left out of listings, which stay valid XML for every client; over WebDAV such a
/// name cannot be created at all.
#[tokio::test]
async fn names_xml_cannot_carry_are_left_out() {
    let app = App::new();
    std::fs::write(app.disk("plain.txt"), b"x").unwrap();
    std::fs::write(app.disk("bell\u{7}.txt"), b"x").unwrap();
    let (status, xml) = propfind(&app, "/", "1", "").await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert!(xml.contains("plain.txt"), "{xml}");
    assert!(!xml.contains("bell"), "{xml}");
    assert!(
        !xml.chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t')),
        "{xml}"
    );
    let listing = send(dav(&app, "GET", "/")).await.2;
    assert!(
        listing.contains("plain.txt") && !listing.contains("bell"),
        "{listing}"
    );
    let (status, _, body) = send(dav(&app, "PUT", "/new%07.txt").body("x")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("control character U+0007"), "{body}");
}
