//! HTTP semantics of the handlers, in-process (see `common`): GET and HEAD, conditional
//! requests, byte ranges, PUT's statuses, MKCOL, DELETE and OPTIONS, and the HTML
//! listing. What needs a connection or the services as processes stays in
//! `services/kubedav/tests/http.rs`.

mod common;

use common::{App, RequestBuilder};
use http::{Method, StatusCode};

fn method(name: &str) -> Method {
    Method::from_bytes(name.as_bytes()).unwrap()
}

async fn put(app: &App, path: &str, body: impl Into<bytes::Bytes>) -> common::Response {
    app.client().put(app.url(path)).body(body).send().await.unwrap()
}

async fn get_bytes(app: &App, path: &str) -> (StatusCode, Vec<u8>) {
    let response = app.client().get(app.url(path)).send().await.unwrap();
    (response.status(), response.bytes().await.unwrap().to_vec())
}

#[tokio::test]
async fn conditional_requests() {
    let app = App::new();
    put(&app, "/c.txt", "conditional").await;
    let first = app.client().get(app.url("/c.txt")).send().await.unwrap();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    let modified = first.headers()["last-modified"].to_str().unwrap().to_owned();
    let status = |request: RequestBuilder| async move { request.send().await.unwrap().status() };
    let c = app.client();
    let url = app.url("/c.txt");
    assert_eq!(
        status(c.get(&url).header("if-none-match", &etag)).await,
        StatusCode::NOT_MODIFIED
    );
    assert_eq!(
        status(
            c.head(&url)
                .header("if-none-match", "\"other\", ".to_owned() + &etag)
        )
        .await,
        StatusCode::NOT_MODIFIED
    );
    assert_eq!(
        status(c.get(&url).header("if-none-match", "\"other\"")).await,
        StatusCode::OK
    );
    assert_eq!(
        status(c.get(&url).header("if-modified-since", &modified)).await,
        StatusCode::NOT_MODIFIED
    );
    assert_eq!(
        status(
            c.get(&url)
                .header("if-modified-since", "Thu, 01 Jan 2015 00:00:00 GMT")
        )
        .await,
        StatusCode::OK
    );
    assert_eq!(
        status(c.get(&url).header("if-match", "\"nope\"")).await,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(
        status(c.get(&url).header("if-match", &etag)).await,
        StatusCode::OK
    );
    assert_eq!(
        status(
            c.get(&url)
                .header("if-unmodified-since", "Thu, 01 Jan 2015 00:00:00 GMT")
        )
        .await,
        StatusCode::PRECONDITION_FAILED
    );
    // Writes honour them too: a lost update is refused and leaves the content alone.
    assert_eq!(
        status(c.put(&url).header("if-match", "\"stale\"").body("x")).await,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(
        status(c.put(&url).header("if-none-match", "*").body("x")).await,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(get_bytes(&app, "/c.txt").await.1, b"conditional");
    assert_eq!(
        status(c.put(&url).header("if-match", &etag).body("v2")).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        status(c.put(app.url("/new.txt")).header("if-none-match", "*").body("n")).await,
        StatusCode::CREATED
    );
    assert_eq!(
        status(c.delete(&url).header("if-match", &etag)).await,
        StatusCode::PRECONDITION_FAILED
    );
}

#[tokio::test]
async fn byte_ranges() {
    let app = App::new();
    let content: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    put(&app, "/r.bin", content.clone()).await;
    let c = app.client();
    let url = app.url("/r.bin");

    let single = c.get(&url).header("range", "bytes=10-19").send().await.unwrap();
    assert_eq!(single.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(single.headers()["content-range"], "bytes 10-19/1000");
    assert_eq!(single.bytes().await.unwrap().as_ref(), &content[10..20]);

    let suffix = c.get(&url).header("range", "bytes=-5").send().await.unwrap();
    assert_eq!(suffix.headers()["content-range"], "bytes 995-999/1000");
    assert_eq!(suffix.bytes().await.unwrap().as_ref(), &content[995..]);

    let open = c
        .get(&url)
        .header("range", "bytes=990-5000")
        .send()
        .await
        .unwrap();
    assert_eq!(open.headers()["content-range"], "bytes 990-999/1000");

    let multi = c
        .get(&url)
        .header("range", "bytes=0-3,500-503")
        .send()
        .await
        .unwrap();
    assert_eq!(multi.status(), StatusCode::PARTIAL_CONTENT);
    let content_type = multi.headers()["content-type"].to_str().unwrap().to_owned();
    let boundary = content_type
        .strip_prefix("multipart/byteranges; boundary=")
        .expect("multipart")
        .to_owned();
    let declared: usize = multi.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body = multi.bytes().await.unwrap();
    assert_eq!(body.len(), declared, "Content-Length matches the multipart body");
    let text = String::from_utf8_lossy(&body);
    assert_eq!(text.matches(&format!("--{boundary}\r\n")).count(), 2);
    assert!(
        text.contains("Content-Range: bytes 0-3/1000") && text.contains("Content-Range: bytes 500-503/1000")
    );
    assert!(text.ends_with(&format!("--{boundary}--\r\n")));
    let part = "Content-Range: bytes 500-503/1000\r\n\r\n".to_string();
    let at = body
        .windows(part.len())
        .position(|w| w == part.as_bytes())
        .unwrap()
        + part.len();
    assert_eq!(&body[at..at + 4], &content[500..504]);

    let unsatisfiable = c
        .get(&url)
        .header("range", "bytes=5000-6000")
        .send()
        .await
        .unwrap();
    assert_eq!(unsatisfiable.status(), StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(unsatisfiable.headers()["content-range"], "bytes */1000");

    let garbage = c.get(&url).header("range", "bytes=z-").send().await.unwrap();
    assert_eq!(
        garbage.status(),
        StatusCode::OK,
        "an unparseable Range is ignored"
    );

    let stale = c
        .get(&url)
        .header("range", "bytes=0-1")
        .header("if-range", "\"old\"")
        .send()
        .await
        .unwrap();
    assert_eq!(
        stale.status(),
        StatusCode::OK,
        "If-Range with another etag sends the whole file"
    );
    assert_eq!(stale.bytes().await.unwrap().len(), 1000);
}

#[tokio::test]
async fn put_statuses() {
    let app = App::new();
    assert_eq!(put(&app, "/p.txt", "one").await.status(), StatusCode::CREATED);
    let replaced = put(&app, "/p.txt", "two").await;
    assert_eq!(replaced.status(), StatusCode::NO_CONTENT);
    assert!(replaced.headers().contains_key("etag"));
    assert_eq!(get_bytes(&app, "/p.txt").await.1, b"two");
    let orphan = put(&app, "/no/such/parent.txt", "x").await;
    assert_eq!(orphan.status(), StatusCode::CONFLICT);
    assert!(
        orphan.text().await.unwrap().contains("MKCOL"),
        "the message says what to do"
    );
    assert_eq!(put(&app, "/", "x").await.status(), StatusCode::METHOD_NOT_ALLOWED);
    std::fs::create_dir(app.disk("dir")).unwrap();
    assert_eq!(
        put(&app, "/dir", "x").await.status(),
        StatusCode::CONFLICT,
        "a file cannot replace a collection"
    );
    let ranged = app
        .client()
        .put(app.url("/p.txt"))
        .header("content-range", "bytes 0-1/3")
        .body("ab")
        .send()
        .await;
    assert_eq!(ranged.unwrap().status(), StatusCode::BAD_REQUEST);
    assert_eq!(std::fs::read(app.disk("p.txt")).unwrap(), b"two");
    // An empty body makes an empty file.
    assert_eq!(put(&app, "/empty", "").await.status(), StatusCode::CREATED);
    assert_eq!(std::fs::metadata(app.disk("empty")).unwrap().len(), 0);
}

#[tokio::test]
async fn mkcol_delete_options() {
    let app = App::new();
    let c = app.client();
    let mkcol = |path: &str| c.request(method("MKCOL"), app.url(path));
    assert_eq!(mkcol("/d").send().await.unwrap().status(), StatusCode::CREATED);
    assert!(app.disk("d").is_dir());
    assert_eq!(
        mkcol("/d").send().await.unwrap().status(),
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(
        mkcol("/").send().await.unwrap().status(),
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(mkcol("/x/y").send().await.unwrap().status(), StatusCode::CONFLICT);
    let with_body = mkcol("/e")
        .header("content-type", "application/xml")
        .body("<x/>")
        .send()
        .await
        .unwrap();
    assert_eq!(with_body.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(!app.disk("e").exists());

    put(&app, "/d/f.txt", "f").await;
    assert_eq!(
        mkcol("/d/f.txt/sub").send().await.unwrap().status(),
        StatusCode::CONFLICT
    );
    assert_eq!(
        mkcol("/d/sub/").send().await.unwrap().status(),
        StatusCode::CREATED
    );
    put(&app, "/d/sub/deep.txt", "deep").await;
    assert_eq!(
        c.delete(app.url("/d/f.txt")).send().await.unwrap().status(),
        StatusCode::NO_CONTENT
    );
    assert!(!app.disk("d/f.txt").exists());
    assert_eq!(
        c.delete(app.url("/d/f.txt")).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        c.delete(app.url("/d/")).send().await.unwrap().status(),
        StatusCode::NO_CONTENT
    );
    assert!(
        !app.disk("d").exists(),
        "a collection goes with everything below it"
    );
    assert_eq!(
        c.delete(app.url("/")).send().await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    assert!(app.disk("").is_dir());

    let options = c.request(Method::OPTIONS, app.url("/")).send().await.unwrap();
    assert_eq!(options.status(), StatusCode::OK);
    assert!(
        options.headers()["dav"]
            .to_str()
            .unwrap()
            .split(',')
            .any(|c| c.trim() == "1")
    );
    let allow = options.headers()["allow"].to_str().unwrap().to_owned();
    for m in ["GET", "HEAD", "PUT", "DELETE", "MKCOL", "OPTIONS"] {
        assert!(allow.contains(m), "Allow lists {m}: {allow}");
    }
    let unknown = c.request(method("BREW"), app.url("/")).send().await.unwrap();
    assert_eq!(unknown.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(unknown.headers().contains_key("allow"));
}

#[tokio::test]
async fn get_and_head() {
    let app = App::new();
    std::fs::write(app.disk("hello.txt"), b"hello world").unwrap();
    std::fs::write(app.disk("pic.png"), [0x89, b'P', b'N', b'G']).unwrap();
    let response = app.client().get(app.url("/hello.txt")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/plain");
    assert_eq!(headers["content-length"], "11");
    assert_eq!(headers["accept-ranges"], "bytes");
    let etag = headers["etag"].to_str().unwrap().to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && !etag.starts_with("W/"),
        "strong etag: {etag}"
    );
    assert!(httpdate::parse_http_date(headers["last-modified"].to_str().unwrap()).is_ok());
    assert_eq!(response.bytes().await.unwrap().as_ref(), b"hello world");

    let head = app.client().head(app.url("/hello.txt")).send().await.unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(head.headers()["content-length"], "11");
    assert_eq!(head.headers()["etag"].to_str().unwrap(), etag);
    assert!(head.bytes().await.unwrap().is_empty());

    let png = app.client().get(app.url("/pic.png")).send().await.unwrap();
    assert_eq!(png.headers()["content-type"], "image/png");
    assert_eq!(
        png.headers()["x-content-type-options"],
        "nosniff",
        "files are never sniffed"
    );
    let (status, _) = get_bytes(&app, "/missing.txt").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = get_bytes(&app, "/hello.txt/").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a file addressed as a collection");

    // The etag changes with the content.
    put(&app, "/hello.txt", "changed").await;
    let again = app.client().head(app.url("/hello.txt")).send().await.unwrap();
    assert_ne!(again.headers()["etag"].to_str().unwrap(), etag);
}

/// Files one user uploads never run script for another in the server's origin: every
/// file answer (whole, a range, HEAD; the Markdown variant in `tests/clients.rs`)
/// carries the `sandbox` policy, whatever its type, except PDFs (Chromium does not show a PDF in a sandbox,
/// and a PDF's scripts run in the viewer's own world). The file manager's pages keep
/// their own policy (`html_listing`).
#[tokio::test]
async fn files_are_served_in_a_sandbox() {
    let app = App::new();
    let page = b"<html><script>document.title = 'ran'</script><p>hi</p></html>";
    for name in [
        "page.html",
        "image.svg",
        "page.xhtml",
        "data.xml",
        "notes.txt",
        "blob",
    ] {
        std::fs::write(app.disk(name), page).unwrap();
    }
    std::fs::write(app.disk("paper.pdf"), b"%PDF-1.4\n").unwrap();
    let policy = |response: &common::Response| {
        response
            .headers()
            .get("content-security-policy")
            .map(|v| v.to_str().unwrap().to_owned())
    };
    for name in [
        "page.html",
        "image.svg",
        "page.xhtml",
        "data.xml",
        "notes.txt",
        "blob",
    ] {
        let url = app.url(&format!("/{name}"));
        let whole = app.client().get(&url).send().await.unwrap();
        assert_eq!(whole.status(), StatusCode::OK);
        assert_eq!(policy(&whole).as_deref(), Some("sandbox"), "{name}");
        let head = app.client().head(&url).send().await.unwrap();
        assert_eq!(policy(&head).as_deref(), Some("sandbox"), "HEAD {name}");
        let range = app
            .client()
            .get(&url)
            .header("range", "bytes=0-5")
            .send()
            .await
            .unwrap();
        assert_eq!(range.status(), StatusCode::PARTIAL_CONTENT);
        assert_eq!(policy(&range).as_deref(), Some("sandbox"), "a range of {name}");
    }
    let pdf = app.client().get(app.url("/paper.pdf")).send().await.unwrap();
    assert_eq!(pdf.headers()["content-type"], "application/pdf");
    assert_eq!(policy(&pdf), None, "a PDF is shown by the browser's viewer");
    assert_eq!(pdf.headers()["x-content-type-options"], "nosniff");
}

#[tokio::test]
async fn html_listing() {
    let app = App::new();
    std::fs::create_dir(app.disk("zeta dir")).unwrap();
    std::fs::write(app.disk("zeta dir/inner.txt"), b"in").unwrap();
    std::fs::write(app.disk("b.txt"), vec![0u8; 2048]).unwrap();
    std::fs::write(app.disk("<a&\"q\">.txt"), b"x").unwrap();
    std::fs::write(app.disk("100% #1?.txt"), b"y").unwrap();
    let response = app.client().get(app.url("/")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    let policy = response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        policy.contains("default-src 'none'")
            && policy.contains("script-src 'self'")
            && !policy.contains("unsafe"),
        "only kubedav's own script may run on a listing, nothing inline: {policy}"
    );
    let html = response.text().await.unwrap();
    assert!(
        html.contains("&lt;a&amp;&quot;q&quot;&gt;.txt"),
        "names are escaped"
    );
    assert!(!html.contains("<a&"), "no raw markup from names");
    assert!(
        html.contains("href=\"/100%25%20%231%3F.txt\""),
        "links are percent-encoded: {html}"
    );
    assert!(html.contains("2.0 KiB"), "sizes are shown");
    assert!(html.contains("GMT"), "dates are shown");
    let dir = html.find("zeta dir/").unwrap();
    let a = html.find("100% #1?.txt").unwrap();
    let b = html.find(">b.txt<").unwrap();
    assert!(dir < a && a < b, "collections first, then names in order");
    assert!(!html.contains("../"), "the root has no parent link");
    // Every link can be followed (the `data-href` of the script's buttons name APIs,
    // not pages).
    for href in html.split(" href=\"").skip(1).map(|s| &s[..s.find('"').unwrap()]) {
        let status = app.client().get(app.url(href)).send().await.unwrap().status();
        assert_eq!(status, StatusCode::OK, "{href}");
    }
    let sub = app
        .client()
        .get(app.url("/zeta%20dir/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(sub.contains("href=\"/\">../</a>"), "a parent link");
    assert!(sub.contains("href=\"/zeta%20dir/inner.txt\""));
}

/// Two gateways in one process, each under its own `--base-path`: each serves below its
/// prefix only (404 under the other's), and every href it writes (PROPFIND, the HTML
/// listing, Location) starts with its own. The base path is each gateway's setting, not
/// the process's.
#[tokio::test]
async fn two_gateways_in_one_process_each_under_its_own_base_path() {
    let dav = App::with(common::Options {
        config: Some(|config| config.base_path = "/dav".parse().unwrap()),
        ..Default::default()
    });
    let files = App::with(common::Options {
        config: Some(|config| config.base_path = "/team/files/".parse().unwrap()),
        ..Default::default()
    });
    for (app, base, other) in [(&dav, "/dav", "/team/files"), (&files, "/team/files", "/dav")] {
        std::fs::create_dir(app.disk("sub")).unwrap();
        let created = put(app, &format!("{base}/sub/a.txt"), "mine").await;
        assert_eq!(created.status(), StatusCode::CREATED, "{base}");
        assert_eq!(
            get_bytes(app, &format!("{base}/sub/a.txt")).await,
            (StatusCode::OK, b"mine".to_vec()),
            "{base}"
        );
        assert_eq!(std::fs::read(app.disk("sub/a.txt")).unwrap(), b"mine");
        for outside in [format!("{other}/sub/a.txt"), "/sub/a.txt".to_owned()] {
            let status = app.client().get(app.url(&outside)).send().await.unwrap().status();
            assert_eq!(
                status,
                StatusCode::NOT_FOUND,
                "{outside} on the gateway under {base}"
            );
        }
        let listing = app
            .client()
            .request(method("PROPFIND"), app.url(&format!("{base}/sub/")))
            .header("depth", "1")
            .send()
            .await
            .unwrap();
        assert_eq!(listing.status(), StatusCode::MULTI_STATUS, "{base}");
        let xml = listing.text().await.unwrap();
        let hrefs: Vec<&str> = xml
            .split("<D:href>")
            .skip(1)
            .map(|s| &s[..s.find("</D:href>").unwrap()])
            .collect();
        assert_eq!(
            hrefs,
            [format!("{base}/sub/"), format!("{base}/sub/a.txt")],
            "{xml}"
        );
        let html = app
            .client()
            .get(app.url(&format!("{base}/sub/")))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(html.contains(&format!("href=\"{base}/sub/a.txt\"")), "{html}");
        assert!(
            html.contains(&format!("href=\"{base}/.kubedav-ui/app.css\"")),
            "{html}"
        );
        assert!(!html.contains(&format!("href=\"{other}")), "{html}");
        let moved = app
            .client()
            .request(method("MOVE"), app.url(&format!("{base}/sub/a.txt")))
            .header("destination", app.url(&format!("{base}/b.txt")))
            .send()
            .await
            .unwrap();
        assert_eq!(moved.status(), StatusCode::CREATED, "{base}");
        assert_eq!(moved.headers()["location"], format!("{base}/b.txt").as_str());
        let elsewhere = app
            .client()
            .request(method("MOVE"), app.url(&format!("{base}/b.txt")))
            .header("destination", app.url(&format!("{other}/c.txt")))
            .send()
            .await
            .unwrap();
        assert_eq!(
            elsewhere.status(),
            StatusCode::BAD_GATEWAY,
            "{base}: a Destination under {other}"
        );
    }
}
