//! WebDAV handlers in-process (see `common`): PROPFIND's forms and depths (and Depth
//! infinity when enabled), COPY and MOVE, LOCK and UNLOCK with the If header, a Depth
//! infinity lock guarding its tree, and names XML cannot carry. What needs the services
//! as processes stays in `services/kubedav/tests/webdav.rs`.

mod common;

use common::{App, Options, RequestBuilder};
use http::{Method, StatusCode};

const PROP: &str = r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:x="urn:x"><D:prop><D:getcontentlength/><D:getetag/><D:resourcetype/><x:missing/></D:prop></D:propfind>"#;

const SET: &str = r#"<?xml version="1.0"?>
<D:propertyupdate xmlns:D="DAV:" xmlns:z="urn:z" xmlns:q="urn:q">
  <D:set><D:prop><z:author>Ada &amp; Bob</z:author><z:tree><q:leaf q:kind="x">1</q:leaf><plain xmlns="">2</plain></z:tree></D:prop></D:set>
  <D:set><D:prop><z:gone>soon</z:gone></D:prop></D:set>
  <D:remove><D:prop><z:gone/></D:prop></D:remove>
</D:propertyupdate>"#;

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

#[tokio::test]
async fn propfind_forms_and_depths() {
    let app = App::new();
    std::fs::create_dir_all(app.disk("d/s")).unwrap();
    std::fs::write(app.disk("d/a.txt"), b"12345").unwrap();
    std::fs::write(app.disk("d/b <&>\".txt"), b"x").unwrap();

    let (status, xml) = propfind(&app, "/d/", "0", "").await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert_eq!(xml.matches("<D:response>").count(), 1);
    for live in [
        "creationdate",
        "displayname>d<",
        "getlastmodified",
        "<D:collection/>",
        "<D:lockentry>",
        "lockdiscovery",
    ] {
        assert!(xml.contains(live), "allprop has {live}: {xml}");
    }
    assert!(!xml.contains("quota"), "quota properties stay out of allprop");

    let (status, xml) = propfind(&app, "/d/", "1", "").await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert_eq!(xml.matches("<D:response>").count(), 4);
    assert!(
        xml.contains("<D:href>/d/b%20%3C%26%3E%22.txt</D:href>"),
        "hrefs are percent-encoded: {xml}"
    );
    assert!(
        xml.contains("<D:displayname>b &lt;&amp;&gt;&quot;.txt</D:displayname>"),
        "names are escaped"
    );
    assert!(xml.contains("<D:href>/d/s/</D:href>"));

    let (status, xml) = propfind(&app, "/d/a.txt", "0", PROP).await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert!(xml.contains("<D:getcontentlength>5</D:getcontentlength>"));
    let (ok, missing) = xml.split_once("HTTP/1.1 200 OK").unwrap();
    assert!(ok.contains("getetag") && !ok.contains("missing"));
    assert!(
        // Asked names are echoed under prefixes declared once on the multistatus.
        xml.contains("xmlns:N0=\"urn:x\"")
            && missing.contains("<N0:missing/>")
            && missing.contains("HTTP/1.1 404 Not Found"),
        "{xml}"
    );

    let (_, xml) = propfind(&app, "/d/", "0", PROP).await;
    assert!(
        xml.contains("<D:getcontentlength/>") && xml.contains("404"),
        "no length on a collection: {xml}"
    );

    let names = r#"<propfind xmlns="DAV:"><propname/></propfind>"#;
    let (status, xml) = propfind(&app, "/d/a.txt", "0", names).await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert!(
        xml.contains("<D:getetag/>") && !xml.contains("&quot;"),
        "names without values: {xml}"
    );

    let include = r#"<propfind xmlns="DAV:"><allprop/><include><quota-available-bytes/><quota-used-bytes/></include></propfind>"#;
    let (_, xml) = propfind(&app, "/d/", "0", include).await;
    assert!(
        xml.contains("<D:quota-available-bytes>") && xml.contains("<D:quota-used-bytes>"),
        "{xml}"
    );

    for depth in ["infinity", "Infinity"] {
        let (status, xml) = propfind(&app, "/d/", depth, "").await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(xml.contains("<D:propfind-finite-depth/>"), "{xml}");
    }
    let (status, _, _) = send(dav(&app, "PROPFIND", "/d/")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no Depth means infinity");
    // A file's infinite depth is itself (Apache mod_dav refuses collections only), as
    // clients without a Depth header (webdav4) ask a file's properties.
    let (status, _, xml) = send(dav(&app, "PROPFIND", "/d/a.txt")).await;
    assert_eq!(status, StatusCode::MULTI_STATUS, "{xml}");
    assert_eq!(xml.matches("<D:response>").count(), 1, "{xml}");
    assert_eq!(propfind(&app, "/nope", "0", "").await.0, StatusCode::NOT_FOUND);
    assert_eq!(
        propfind(&app, "/d/a.txt/", "0", "").await.0,
        StatusCode::NOT_FOUND
    );

    let (status, _, text) = send(dav(&app, "PROPFIND", "/d/").header("depth", "2")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("Depth"), "the message names the header: {text}");
    for (body, why) in [
        ("<propfind xmlns=\"DAV:\"><prop>", "truncated"),
        ("<x:propfind/>", "undeclared prefix"),
        (
            "<propfind xmlns=\"urn:not-dav\"><allprop/></propfind>",
            "wrong root",
        ),
        (
            r#"<!DOCTYPE p [<!ENTITY e "x">]><propfind xmlns="DAV:">&e;</propfind>"#,
            "DTD",
        ),
        (
            r#"<propfind xmlns="DAV:" xmlns:bad=""><allprop/></propfind>"#,
            "empty prefix binding",
        ),
    ] {
        assert_eq!(
            propfind(&app, "/d/", "0", body).await.0,
            StatusCode::BAD_REQUEST,
            "{why}"
        );
    }
    // An oversized body is refused from its Content-Length, before it is read (so the
    // test sends the head alone, as a client waiting for 100-continue would).
    let head = dav(&app, "PROPFIND", "/d/")
        .header("depth", "0")
        .header("content-length", "2000000");
    assert_eq!(head.send().await.unwrap().status(), StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn propfind_infinity_when_enabled() {
    let app = App::with(Options {
        config: Some(|config| {
            config.propfind_infinity = true;
            config.propfind_max_entries = 5;
        }),
        ..Options::default()
    });
    std::fs::create_dir_all(app.disk("t/u")).unwrap();
    std::fs::write(app.disk("t/u/deep.txt"), b"d").unwrap();
    let (status, xml) = propfind(&app, "/t/", "infinity", "").await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert!(xml.contains("<D:href>/t/u/deep.txt</D:href>"), "{xml}");
    for i in 0..5 {
        std::fs::write(app.disk(&format!("t/f{i}")), b"").unwrap();
    }
    let (status, xml) = propfind(&app, "/t/", "infinity", "").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "bounded by the entry limit");
    assert!(xml.contains("propfind-finite-depth"));
}

#[tokio::test]
async fn lock_and_unlock() {
    let app = App::new();
    std::fs::write(app.disk("l.txt"), b"locked").unwrap();
    let (status, _, _) = send(dav(&app, "OPTIONS", "/")).await;
    assert_eq!(status, StatusCode::OK);
    let options = app
        .client()
        .request(Method::OPTIONS, app.url("/"))
        .send()
        .await
        .unwrap();
    assert_eq!(options.headers()["dav"], "1, 2");

    let (status, token, xml) = take_lock(&app, "/l.txt", LOCKINFO, "0").await;
    assert_eq!(status, StatusCode::OK);
    assert!(token.starts_with("urn:uuid:") && token.len() == 45, "{token}");
    well_formed(&xml);
    assert!(
        xml.contains(&format!("<D:href>{token}</D:href>")) && xml.contains("mailto:ada@example.org"),
        "{xml}"
    );
    assert!(xml.contains("<D:timeout>Second-600</D:timeout>"));

    let (status, _, xml) = take_lock(&app, "/l.txt", LOCKINFO, "0").await;
    assert_eq!(status, StatusCode::LOCKED);
    assert!(
        xml.contains("<D:no-conflicting-lock><D:href>/l.txt</D:href>"),
        "{xml}"
    );
    assert_eq!(take_lock(&app, "/l.txt", SHARED, "0").await.0, StatusCode::LOCKED);

    let (status, _, xml) = send(app.client().put(app.url("/l.txt")).body("intruder")).await;
    assert_eq!(status, StatusCode::LOCKED);
    assert!(
        xml.contains("<D:lock-token-submitted><D:href>/l.txt</D:href>"),
        "{xml}"
    );
    for verb in ["DELETE", "PROPPATCH"] {
        assert_eq!(
            send(dav(&app, verb, "/l.txt").body(SET)).await.0,
            StatusCode::LOCKED,
            "{verb}"
        );
    }
    assert_eq!(
        send(dav(&app, "MOVE", "/l.txt").header("destination", "/x.txt"))
            .await
            .0,
        StatusCode::LOCKED
    );
    assert_eq!(
        send(dav(&app, "COPY", "/l.txt").header("destination", "/copy.txt"))
            .await
            .0,
        StatusCode::CREATED,
        "reading is free"
    );
    assert_eq!(
        send(dav(&app, "COPY", "/copy.txt").header("destination", "/l.txt"))
            .await
            .0,
        StatusCode::LOCKED
    );
    assert_eq!(std::fs::read(app.disk("l.txt")).unwrap(), b"locked");

    let with = |value: String| {
        app.client()
            .put(app.url("/l.txt"))
            .header("if", value)
            .body("owner")
    };
    assert_eq!(
        send(with("(<urn:uuid:00000000-0000-0000-0000-000000000000>)".into()))
            .await
            .0,
        StatusCode::PRECONDITION_FAILED
    );
    let etag = app
        .client()
        .head(app.url("/l.txt"))
        .send()
        .await
        .unwrap()
        .headers()["etag"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        send(with(format!("(<{token}> [\"stale\"])"))).await.0,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(
        send(with(format!("(<{token}> [{etag}])"))).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        send(with(format!("<http://{}/l.txt> (<{token}>)", common::HOST)))
            .await
            .0,
        StatusCode::NO_CONTENT,
        "tagged"
    );
    assert_eq!(
        send(with(format!("(<{token}x>) (Not <DAV:no-lock>)"))).await.0,
        StatusCode::LOCKED,
        "OR, but no valid token"
    );
    let (status, _, text) = send(with("(<unclosed".into())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("If header"), "{text}");

    // lockdiscovery shows it; a body-less LOCK refreshes it.
    let (_, xml) = propfind(
        &app,
        "/l.txt",
        "0",
        r#"<propfind xmlns="DAV:"><prop><lockdiscovery/></prop></propfind>"#,
    )
    .await;
    assert!(xml.contains(&token) && xml.contains("<D:exclusive/>"), "{xml}");
    let refresh = dav(&app, "LOCK", "/l.txt")
        .header("if", format!("(<{token}>)"))
        .header("timeout", "Second-300");
    let (status, _, xml) = send(refresh).await;
    assert_eq!(status, StatusCode::OK);
    assert!(xml.contains("Second-300") || xml.contains("Second-299"), "{xml}");
    let refresh = dav(&app, "LOCK", "/l.txt").header("if", "(<urn:uuid:nope>)");
    assert_eq!(send(refresh).await.0, StatusCode::PRECONDITION_FAILED);
    let (status, _, text) = send(
        dav(&app, "LOCK", "/l.txt")
            .header("timeout", "Hour-1")
            .body(LOCKINFO),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("Timeout"));
    assert_eq!(
        send(dav(&app, "LOCK", "/l.txt").body("<lockinfo xmlns=\"DAV:\"/>"))
            .await
            .0,
        StatusCode::BAD_REQUEST
    );

    // UNLOCK.
    let (status, _, text) = send(dav(&app, "UNLOCK", "/l.txt")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("Lock-Token"));
    assert_eq!(
        send(dav(&app, "UNLOCK", "/l.txt").header("lock-token", token.clone()))
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    let (status, _, xml) = send(dav(&app, "UNLOCK", "/l.txt").header("lock-token", "<urn:uuid:nope>")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(xml.contains("lock-token-matches-request-uri"));
    assert_eq!(
        send(dav(&app, "UNLOCK", "/l.txt").header("lock-token", format!("<{token}>")))
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        send(app.client().put(app.url("/l.txt")).body("free")).await.0,
        StatusCode::NO_CONTENT
    );
    let (status, _, _) = send(with(format!("(<{token}>)"))).await;
    assert_eq!(
        status,
        StatusCode::PRECONDITION_FAILED,
        "a released token no longer holds"
    );

    // LOCK on an unmapped URL creates an empty resource; without a parent it is 409.
    let (status, token, _) = take_lock(&app, "/fresh.txt", LOCKINFO, "0").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(std::fs::metadata(app.disk("fresh.txt")).unwrap().len(), 0);
    assert_eq!(
        take_lock(&app, "/no/parent.txt", LOCKINFO, "0").await.0,
        StatusCode::CONFLICT
    );
    // MOVE with the token takes the resource and releases its lock.
    let (status, _, _) = send(
        dav(&app, "MOVE", "/fresh.txt")
            .header("destination", "/moved.txt")
            .header("if", format!("(<{token}>)")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        take_lock(&app, "/fresh.txt", LOCKINFO, "0").await.0,
        StatusCode::CREATED,
        "the old lock is gone"
    );

    // Shared locks coexist, and a write needs one of their tokens.
    std::fs::write(app.disk("s.txt"), b"s").unwrap();
    let (status, first, _) = take_lock(&app, "/s.txt", SHARED, "0").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(take_lock(&app, "/s.txt", SHARED, "0").await.0, StatusCode::OK);
    assert_eq!(
        take_lock(&app, "/s.txt", LOCKINFO, "0").await.0,
        StatusCode::LOCKED
    );
    assert_eq!(
        send(app.client().put(app.url("/s.txt")).body("x")).await.0,
        StatusCode::LOCKED
    );
    let put = app
        .client()
        .put(app.url("/s.txt"))
        .header("if", format!("(<{first}>)"))
        .body("x");
    assert_eq!(send(put).await.0, StatusCode::NO_CONTENT);
}
