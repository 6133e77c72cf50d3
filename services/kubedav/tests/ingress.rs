//! What a deployment behind an Ingress needs, in both run modes: `--base-path` (every
//! href, listing link, Destination and lock root under the prefix), CORS for browser
//! pages on the listed origins only (`--cors-origins`), and compressed listings. These
//! are the gateway's alone, so they run on a volume.

#[macro_use]
mod common;

use common::{Mode, Server, client, users_file};
use reqwest::{Method, StatusCode};

fn verb(name: &str) -> Method {
    Method::from_bytes(name.as_bytes()).unwrap()
}

/// Under `--base-path /dav`: requests outside the prefix are 404; inside it every href
/// of a listing, the HTML page's links, a COPY's Destination and Location, and a lock's
/// root carry the prefix; a Destination outside it is another server's (502).
async fn base_path_prefixes_every_href(mode: Mode) {
    let server = Server::start_with(mode, &["--base-path", "/dav"]).await;
    let put = client()
        .put(server.url("/dav/a.txt"))
        .body("one")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    assert_eq!(
        client().get(server.url("/a.txt")).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        client()
            .get(server.url("/davx/a.txt"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::NOT_FOUND
    );
    let mkcol = client()
        .request(verb("MKCOL"), server.url("/dav/d/"))
        .send()
        .await
        .unwrap();
    assert_eq!(mkcol.status(), StatusCode::CREATED);

    let listing = client()
        .request(verb("PROPFIND"), server.url("/dav/"))
        .header("depth", "1")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for href in [
        "<D:href>/dav/</D:href>",
        "<D:href>/dav/a.txt</D:href>",
        "<D:href>/dav/d/</D:href>",
    ] {
        assert!(listing.contains(href), "{href} missing: {listing}");
    }
    let root = client()
        .request(verb("PROPFIND"), server.url("/dav"))
        .header("depth", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(root.status(), StatusCode::MULTI_STATUS);

    let html = client()
        .get(server.url("/dav/d/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("href=\"/dav/\""), "the parent link: {html}");
    let html = client()
        .get(server.url("/dav/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("href=\"/dav/a.txt\"") && html.contains("href=\"/dav/d/\""),
        "{html}"
    );

    let copy = client()
        .request(verb("COPY"), server.url("/dav/a.txt"))
        .header("destination", server.url("/dav/d/b.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(copy.status(), StatusCode::CREATED);
    assert_eq!(copy.headers()["location"], "/dav/d/b.txt");
    let body = client()
        .get(server.url("/dav/d/b.txt"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body, "one");
    let outside = client()
        .request(verb("MOVE"), server.url("/dav/a.txt"))
        .header("destination", server.url("/elsewhere/a.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(outside.status(), StatusCode::BAD_GATEWAY);

    let lock = client()
        .request(verb("LOCK"), server.url("/dav/a.txt"))
        .body(r#"<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#)
        .send()
        .await
        .unwrap();
    assert_eq!(lock.status(), StatusCode::OK);
    let discovery = lock.text().await.unwrap();
    assert!(
        discovery.contains("<D:lockroot><D:href>/dav/a.txt</D:href></D:lockroot>"),
        "{discovery}"
    );
}

/// `--cors-origins`: a preflight from a listed origin is answered without credentials,
/// with the WebDAV methods and headers; one from another origin takes the ordinary way
/// (401 without credentials, no CORS headers); a WebDAV client's own OPTIONS still gets
/// the DAV classes; an answer to a listed origin carries Access-Control-Allow-Origin.
async fn cors_answers_listed_origins_only(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("ada", "lovelace")]);
    let server = Server::start_auth(
        mode,
        Some(&users),
        &[],
        &["--cors-origins", "https://app.example,https://other.example"],
        &[],
    )
    .await;
    let preflight = |origin: &'static str| {
        client()
            .request(Method::OPTIONS, server.url("/docs/"))
            .header("origin", origin)
            .header("access-control-request-method", "PROPFIND")
            .header("access-control-request-headers", "authorization, depth")
            .send()
    };
    let listed = preflight("https://app.example").await.unwrap();
    assert_eq!(listed.status(), StatusCode::OK);
    let headers = listed.headers();
    assert_eq!(headers["access-control-allow-origin"], "https://app.example");
    assert_eq!(headers["access-control-allow-credentials"], "true");
    assert!(
        headers["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("PROPFIND")
    );
    let allowed = headers["access-control-allow-headers"].to_str().unwrap();
    assert!(
        allowed.contains("depth") && allowed.contains("authorization"),
        "{allowed}"
    );

    let foreign = preflight("https://evil.example").await.unwrap();
    assert_eq!(foreign.status(), StatusCode::UNAUTHORIZED);
    assert!(foreign.headers().get("access-control-allow-origin").is_none());

    let webdav = client()
        .request(Method::OPTIONS, server.url("/"))
        .basic_auth("ada", Some("lovelace"))
        .send()
        .await
        .unwrap();
    assert_eq!(webdav.status(), StatusCode::OK);
    assert!(webdav.headers()["dav"].to_str().unwrap().contains('2'));

    let actual = client()
        .request(verb("PROPFIND"), server.url("/"))
        .header("origin", "https://app.example")
        .header("depth", "0")
        .basic_auth("ada", Some("lovelace"))
        .send()
        .await
        .unwrap();
    assert_eq!(actual.status(), StatusCode::MULTI_STATUS);
    assert_eq!(
        actual.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    assert!(
        actual.headers()["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .contains("etag")
    );
    let other = client()
        .get(server.url("/"))
        .header("origin", "https://evil.example")
        .basic_auth("ada", Some("lovelace"))
        .send()
        .await
        .unwrap();
    assert!(other.headers().get("access-control-allow-origin").is_none());
}

/// A PROPFIND Depth 1 of 1,000 files and the HTML page come compressed when the client
/// accepts gzip or brotli, and decompress to the very answer sent uncompressed; a file
/// (which has a strong etag) is never compressed. Prints the sizes.
async fn listings_are_compressed(mode: Mode) {
    let server = Server::start(mode).await;
    std::fs::create_dir(server.disk("many")).unwrap();
    for i in 0..1000 {
        std::fs::write(server.disk(&format!("many/IMG_20240101_{i:06}.jpg")), b"x").unwrap();
    }
    let propfind = |encoding: &'static str| {
        client()
            .request(verb("PROPFIND"), server.url("/many/"))
            .header("depth", "1")
            .header("accept-encoding", encoding)
            .send()
    };
    let varies = |response: &reqwest::Response| {
        response.headers().get_all("vary").iter().any(|v| {
            v.to_str()
                .unwrap()
                .to_ascii_lowercase()
                .contains("accept-encoding")
        })
    };
    let plain = propfind("identity").await.unwrap();
    assert!(plain.headers().get("content-encoding").is_none());
    // Sent uncompressed, but a cache must still know it could have been.
    assert!(varies(&plain));
    let plain = plain.bytes().await.unwrap();
    let mut sizes = vec![("identity", plain.len())];
    for encoding in ["gzip", "br"] {
        let response = propfind(encoding).await.unwrap();
        assert_eq!(response.status(), StatusCode::MULTI_STATUS);
        assert_eq!(response.headers()["content-encoding"], encoding);
        assert!(varies(&response));
        let size = response.bytes().await.unwrap().len();
        assert!(size * 5 < plain.len(), "{encoding}: {size} of {}", plain.len());
        sizes.push((encoding, size));
        // curl decodes it: the same answer as the uncompressed one.
        let decoded = std::process::Command::new("curl")
            .args(["-s", "--compressed", "-X", "PROPFIND", "-H", "Depth: 1", "-H"])
            .arg(format!("Accept-Encoding: {encoding}"))
            .arg(server.url("/many/"))
            .output()
            .expect("curl: `make test` installs it");
        assert_eq!(decoded.stdout.len(), plain.len(), "{encoding} decoded differs");
    }
    println!("PROPFIND Depth 1 of 1,000 files: {sizes:?} bytes");
    let html = client()
        .get(server.url("/many/"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(html.headers()["content-encoding"], "gzip");
    std::fs::write(server.disk("big.xml"), "<a>x</a>".repeat(1000)).unwrap();
    let file = client()
        .get(server.url("/big.xml"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert!(
        file.headers().get("content-encoding").is_none(),
        "a file was compressed"
    );
    assert!(!varies(&file));
    assert_eq!(file.bytes().await.unwrap().len(), 8000);
}

in_both_modes!(
    base_path_prefixes_every_href,
    cors_answers_listed_origins_only,
    listings_are_compressed
);
