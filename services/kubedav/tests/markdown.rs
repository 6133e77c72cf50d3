//! Markdown for agents, in both modes: the negotiation matrix with q-values, Vary on both
//! variants, HEAD, 304 on a matching If-None-Match without a conversion, the size limit,
//! Range requests, and fail-open when the markdown service is down.

#[macro_use]
mod common;

use common::{Mode, Server, client};
use reqwest::StatusCode;

const PAGE: &str = "<html><head><title>t</title></head><body><nav>menu</nav><h1>Hello</h1><p>Some <b>bold</b> text.</p></body></html>";
const MARKDOWN: &str = "# Hello\n\nSome **bold** text.\n";

fn converter(mode: Mode) -> &'static str {
    if mode == Mode::AllInOne { "all" } else { "markdown" }
}

async fn conversions(server: &Server, mode: Mode) -> f64 {
    let admin = server.admin_of(converter(mode));
    common::metric_sum(admin, "kubedav_markdown_conversions_total").await
}

async fn get(server: &Server, path: &str, accept: Option<&str>) -> reqwest::Response {
    let mut request = client().get(server.url(path));
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    request.send().await.unwrap()
}

async fn negotiation(mode: Mode) {
    let server = Server::start_with(mode, &["--content-signal", "ai-train=no, search=yes"]).await;
    std::fs::write(server.disk("page.html"), PAGE).unwrap();
    std::fs::write(server.disk("notes.txt"), "plain").unwrap();
    for (accept, markdown) in [
        (None, false),
        (Some("text/markdown"), true),
        (Some("text/html"), false),
        (Some("*/*"), false),
        (Some("text/markdown;q=0.9, text/html"), false),
        (Some("text/html;q=0.5, text/markdown"), true),
        (Some("text/*;q=0.8, text/markdown"), true),
        (Some("text/markdown;q=0"), false),
    ] {
        let response = get(&server, "/page.html", accept).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()["vary"],
            "Accept",
            "both variants vary on Accept ({accept:?})"
        );
        let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
        if markdown {
            assert_eq!(content_type, "text/markdown; charset=utf-8", "{accept:?}");
            let tokens = MARKDOWN.chars().count().div_ceil(4).to_string();
            assert_eq!(
                response.headers()["x-markdown-tokens"],
                tokens.as_str(),
                "characters / 4, rounded up"
            );
            assert_eq!(response.headers()["content-signal"], "ai-train=no, search=yes");
            assert_eq!(response.text().await.unwrap(), MARKDOWN);
        } else {
            assert_eq!(content_type, "text/html", "{accept:?}");
            assert!(!response.headers().contains_key("content-signal"));
            assert_eq!(response.text().await.unwrap(), PAGE);
        }
    }
    let plain = get(&server, "/notes.txt", Some("text/markdown")).await;
    assert_eq!(
        plain.headers()["content-type"],
        "text/plain",
        "only HTML has a Markdown variant"
    );
    assert!(!plain.headers().contains_key("vary"));

    let head = client()
        .head(server.url("/page.html"))
        .header("accept", "text/markdown")
        .send()
        .await
        .unwrap();
    assert_eq!(head.headers()["content-type"], "text/markdown; charset=utf-8");
    assert_eq!(
        head.headers()["content-length"],
        MARKDOWN.len().to_string().as_str()
    );
    assert!(head.text().await.unwrap().is_empty());
}

async fn not_modified_without_converting(mode: Mode) {
    let server = Server::start(mode).await;
    std::fs::write(server.disk("page.html"), PAGE).unwrap();
    let first = get(&server, "/page.html", Some("text/markdown")).await;
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    let html_etag = get(&server, "/page.html", None).await.headers()["etag"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_ne!(etag, html_etag, "the variants have their own etags");
    let before = conversions(&server, mode).await;
    let cached = get(&server, "/page.html", Some("text/markdown")).await;
    assert_eq!(cached.text().await.unwrap(), MARKDOWN);
    let again = client()
        .get(server.url("/page.html"))
        .header("accept", "text/markdown")
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()["vary"], "Accept");
    assert_eq!(
        conversions(&server, mode).await,
        before,
        "neither the cached GET nor the 304 converted anything"
    );
    // A changed page is converted again (changed through kubedav: in microservices mode
    // a change behind its back is seen within the gateway's freshness bound, not at once).
    let put = client()
        .put(server.url("/page.html"))
        .body("<p>changed</p>")
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    let changed = client()
        .get(server.url("/page.html"))
        .header("accept", "text/markdown")
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), StatusCode::OK);
    assert_eq!(changed.text().await.unwrap(), "changed\n");
    assert_eq!(conversions(&server, mode).await, before + 1.0);
}

async fn size_limit_and_ranges_get_the_html(mode: Mode) {
    let server = Server::start_with(mode, &["--markdown-max-bytes", "50"]).await;
    std::fs::write(server.disk("big.html"), PAGE).unwrap();
    let response = get(&server, "/big.html", Some("text/markdown")).await;
    assert_eq!(response.headers()["content-type"], "text/html");
    assert!(
        response.headers()["x-markdown-error"]
            .to_str()
            .unwrap()
            .contains("larger than")
    );
    std::fs::write(server.disk("small.html"), "<p>hi</p>").unwrap();
    let ranged = client()
        .get(server.url("/small.html"))
        .header("accept", "text/markdown")
        .header("range", "bytes=0-2")
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(ranged.text().await.unwrap(), "<p>");
}

/// With the markdown service stopped, the HTML is served (fail-open).
async fn fail_open() {
    let mut server = Server::start(Mode::Microservices).await;
    std::fs::write(server.disk("page.html"), PAGE).unwrap();
    server.process("markdown").child.kill().await.unwrap();
    let response = get(&server, "/page.html", Some("text/markdown")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/html");
    assert!(
        response.headers()["x-markdown-error"]
            .to_str()
            .unwrap()
            .contains("conversion failed")
    );
    assert_eq!(response.text().await.unwrap(), PAGE);

    // Fail-closed, when configured: 502 rather than the HTML.
    let mut closed = Server::start_with(Mode::Microservices, &["--markdown-fail-closed"]).await;
    std::fs::write(closed.disk("page.html"), PAGE).unwrap();
    closed.process("markdown").child.kill().await.unwrap();
    let refused = get(&closed, "/page.html", Some("text/markdown")).await;
    assert_eq!(refused.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(
        get(&closed, "/page.html", None).await.status(),
        StatusCode::OK,
        "HTML clients are unaffected"
    );
}

/// A page with a site around its content: navigation, a page header, an icon link and
/// a hidden dialog, and relative links and images.
const SITE_PAGE: &str = "<!DOCTYPE html><html><head><title>Guide &amp; more</title>\
    <meta name=\"description\" content=\"How to &quot;quote&quot;\"></head><body>\
    <header><a href=\"/\">Site</a></header><nav><ul><li><a href=\"a.html\">A</a></li></ul></nav>\
    <main><h1>Guide</h1><p>See <a href=\"next.html\">the next page</a> \
    <a href=\"print.html\" title=\"Print\"><i class=\"icon\"></i></a> and \
    <img src=\"../img/x.png\" alt=\"a chart\">.</p><div hidden>secret menu</div></main>\
    <footer>(c) us</footer></body></html>";

async fn main_content_with_absolute_links(mode: Mode) {
    // Through the environment, which every process of the mode reads (the flag is the
    // markdown service's).
    let server = Server::start_full(mode, &[], &[("KUBEDAV_MARKDOWN_FRONT_MATTER", "true")]).await;
    std::fs::create_dir(server.disk("docs")).unwrap();
    std::fs::write(server.disk("docs/guide.html"), SITE_PAGE).unwrap();
    let response = get(&server, "/docs/guide.html", Some("text/markdown")).await;
    let etag = response.headers()["etag"].to_str().unwrap().to_owned();
    let source_etag = get(&server, "/docs/guide.html", None).await.headers()["etag"]
        .to_str()
        .unwrap()
        .to_owned();
    let page = server.url("/docs/guide.html");
    let expected = format!(
        "---\ntitle: \"Guide & more\"\ndescription: \"How to \\\"quote\\\"\"\nurl: \"{page}\"\n\
         source_etag: \"{}\"\n---\n\n# Guide\n\nSee [the next page]({}) and ![a chart]({}).\n",
        source_etag.replace('"', "\\\""),
        server.url("/docs/next.html"),
        server.url("/img/x.png"),
    );
    assert_eq!(
        response.text().await.unwrap(),
        expected,
        "only <main>, links made absolute"
    );
    assert!(etag.contains("-md"), "{etag}");
}

async fn agents_get_markdown_listings(mode: Mode) {
    let server = Server::start(mode).await;
    std::fs::create_dir_all(server.disk("docs/sub")).unwrap();
    std::fs::write(server.disk("docs/a [1].html"), PAGE).unwrap();
    let listing = get(&server, "/docs/", Some("text/markdown")).await;
    assert_eq!(listing.status(), StatusCode::OK);
    assert_eq!(listing.headers()["content-type"], "text/markdown; charset=utf-8");
    assert_eq!(listing.headers()["vary"], "Accept");
    let etag = listing.headers()["etag"].to_str().unwrap().to_owned();
    let text = listing.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "# Index of /docs/", "{text}");
    assert!(lines[2].starts_with("2 members"), "{text}");
    assert!(
        lines[4].starts_with("- [sub/](/docs/sub/) — collection, modified 20"),
        "{text}"
    );
    assert!(
        lines[5].starts_with(&format!(
            "- [a \\[1\\].html](/docs/a%20%5B1%5D.html) — {} bytes, text/html, modified 20",
            PAGE.len()
        )),
        "{text}"
    );
    let html = get(&server, "/docs/", None).await;
    assert_eq!(html.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(html.headers()["vary"], "Accept", "the HTML listing varies too");

    let not_modified = client()
        .get(server.url("/docs/"))
        .header("accept", "text/markdown")
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(not_modified.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(not_modified.headers()["vary"], "Accept");
    let put = client()
        .put(server.url("/docs/new.txt"))
        .body("n")
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success());
    let changed = client()
        .get(server.url("/docs/"))
        .header("accept", "text/markdown")
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(
        changed.status(),
        StatusCode::OK,
        "a new member changes the listing's etag"
    );
    assert!(
        changed
            .text()
            .await
            .unwrap()
            .contains("- [new.txt](/docs/new.txt) — 1 bytes, text/plain")
    );
}

in_both_modes!(
    negotiation,
    not_modified_without_converting,
    size_limit_and_ranges_get_the_html,
    main_content_with_absolute_links,
    agents_get_markdown_listings,
);
microservices_only!(fail_open);
