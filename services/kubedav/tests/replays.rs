//! The request sequences of the two file managers that mount WebDAV, replayed with their
//! headers and bodies, in both run modes and on both backends (docs/clients.md says
//! where each comes from):
//!
//! * macOS Finder (WebDAVFS): connect, browse, copy a file in (LOCK, a chunked PUT with
//!   `X-Expected-Entity-Length`, its AppleDouble `._` twin, UNLOCK), rename, delete; and
//!   the same with `--refuse-macos-metadata --hide-dotfiles`.
//! * Windows Explorer (the Mini-Redirector): OPTIONS, PROPFIND with `Translate: f` and
//!   the Win32 properties, LOCK with `Timeout: Infinite, Second-4100000000`, a PUT of 0
//!   bytes then of the content, PROPPATCH of `Win32FileAttributes` and the Win32 times,
//!   UNLOCK.

#[macro_use]
mod common;

use common::{BACKEND, Backend, Mode, Server, client};
use reqwest::{Method, RequestBuilder, StatusCode};

const FINDER: &str = "WebDAVFS/3.0.0 (03008000) Darwin/22.1.0 (arm64)";
const MINIREDIR: &str = "Microsoft-WebDAV-MiniRedir/10.0.19045";

const FINDER_PROPFIND: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:">
<D:prop>
<D:getlastmodified/>
<D:getcontentlength/>
<D:creationdate/>
<D:resourcetype/>
</D:prop>
</D:propfind>
"#;

const FINDER_LOCK: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<D:lockinfo xmlns:D="DAV:">
<D:lockscope><D:exclusive/></D:lockscope>
<D:locktype><D:write/></D:locktype>
<D:owner><D:href>http://www.apple.com/webdav_fs/</D:href></D:owner>
</D:lockinfo>
"#;

const WINDOWS_PROPFIND: &str = r#"<?xml version="1.0" encoding="utf-8" ?><D:propfind xmlns:D="DAV:"><D:prop xmlns:Z="urn:schemas-microsoft-com:"><D:getcontentlength/><D:getlastmodified/><D:resourcetype/><D:creationdate/><Z:Win32CreationTime/><Z:Win32LastAccessTime/><Z:Win32LastModifiedTime/><Z:Win32FileAttributes/></D:prop></D:propfind>"#;

const WINDOWS_LOCK: &str = r#"<?xml version="1.0" encoding="utf-8" ?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner><D:href>DESKTOP-1\ada</D:href></D:owner></D:lockinfo>"#;

const WINDOWS_PROPPATCH: &str = r#"<?xml version="1.0" encoding="utf-8" ?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop><Z:Win32CreationTime>Tue, 01 Feb 2022 10:20:30 GMT</Z:Win32CreationTime><Z:Win32LastAccessTime>Wed, 02 Feb 2022 10:20:30 GMT</Z:Win32LastAccessTime><Z:Win32LastModifiedTime>Wed, 02 Feb 2022 10:20:30 GMT</Z:Win32LastModifiedTime><Z:Win32FileAttributes>00000020</Z:Win32FileAttributes></D:prop></D:set></D:propertyupdate>"#;

fn request(server: &Server, agent: &str, verb: &str, path: &str) -> RequestBuilder {
    client()
        .request(Method::from_bytes(verb.as_bytes()).unwrap(), server.url(path))
        .header("user-agent", agent)
}

async fn send(builder: RequestBuilder) -> (StatusCode, reqwest::header::HeaderMap, String) {
    let response = builder.send().await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, response.text().await.unwrap())
}

/// A chunked body, as Finder streams a file (no Content-Length).
fn chunked(data: &'static [u8]) -> reqwest::Body {
    reqwest::Body::wrap_stream(futures_util::stream::iter(
        data.chunks(5)
            .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::from_static(c))),
    ))
}

/// Finder copies `name` in as WebDAVFS does: LOCK (which creates it empty), a chunked PUT
/// with `X-Expected-Entity-Length` under the lock, then UNLOCK. The statuses of the
/// LOCK and the PUT.
async fn finder_copies_in(server: &Server, name: &str, data: &'static [u8]) -> (StatusCode, StatusCode) {
    let path = format!("/Documents/{name}");
    let (locked, headers, _) = send(
        request(server, FINDER, "LOCK", &path)
            .header("depth", "0")
            .header("timeout", "Second-600")
            .header("content-type", "text/xml; charset=\"utf-8\"")
            .body(FINDER_LOCK),
    )
    .await;
    let token = headers.get("lock-token").map(|v| v.to_str().unwrap().to_owned());
    let mut put = request(server, FINDER, "PUT", &path)
        .header("content-type", "application/octet-stream")
        .header("x-expected-entity-length", data.len().to_string())
        .body(chunked(data));
    if let Some(token) = &token {
        put = put.header("if", format!("({token})"));
    }
    let (stored, _, _) = send(put).await;
    if let Some(token) = token {
        let (unlocked, _, _) =
            send(request(server, FINDER, "UNLOCK", &path).header("lock-token", token)).await;
        assert_eq!(unlocked, StatusCode::NO_CONTENT);
    }
    (locked, stored)
}

async fn finder_session(server: &Server, refusing: bool) {
    // Connect: OPTIONS, then the root and its members, and the probes for the files that
    // tune Finder's behaviour per volume.
    let (status, headers, _) = send(request(server, FINDER, "OPTIONS", "/")).await;
    assert_eq!(status, StatusCode::OK);
    let dav = headers["dav"].to_str().unwrap();
    assert!(
        dav.contains('2'),
        "Finder mounts read-only without class 2: {dav}"
    );
    for depth in ["0", "1"] {
        let (status, _, _) = send(
            request(server, FINDER, "PROPFIND", "/")
                .header("depth", depth)
                .header("content-type", "text/xml")
                .body(FINDER_PROPFIND),
        )
        .await;
        assert_eq!(status, StatusCode::MULTI_STATUS);
    }
    for probe in [
        "/._.",
        "/.hidden",
        "/.metadata_never_index",
        "/.ql_disablethumbnails",
    ] {
        let (status, _, _) = send(
            request(server, FINDER, "PROPFIND", probe)
                .header("depth", "0")
                .body(FINDER_PROPFIND),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{probe}");
    }
    let (made, _, _) = send(request(server, FINDER, "MKCOL", "/Documents/")).await;
    assert_eq!(made, StatusCode::CREATED);

    // Copy in: the file, its AppleDouble twin and the folder's .DS_Store.
    let (locked, stored) = finder_copies_in(server, "report.txt", b"quarterly figures\n").await;
    assert_eq!((locked, stored), (StatusCode::CREATED, StatusCode::NO_CONTENT));
    let twins = [
        finder_copies_in(server, "._report.txt", b"\x00\x05\x16\x07AppleDouble").await,
        finder_copies_in(server, ".DS_Store", b"\x00\x00\x00\x01Bud1").await,
    ];
    let (status, _, listing) = send(
        request(server, FINDER, "PROPFIND", "/Documents/")
            .header("depth", "1")
            .body(FINDER_PROPFIND),
    )
    .await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert!(listing.contains("/Documents/report.txt"), "{listing}");
    if refusing {
        for (locked, _) in twins {
            assert_eq!(locked, StatusCode::FORBIDDEN, "macOS metadata must not be stored");
        }
        assert!(!listing.contains("._report.txt") && !listing.contains(".DS_Store"));
        let (status, _, _) = send(request(server, FINDER, "GET", "/Documents/._report.txt")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    } else {
        for (locked, stored) in twins {
            assert_eq!((locked, stored), (StatusCode::CREATED, StatusCode::NO_CONTENT));
        }
        assert!(listing.contains("/Documents/._report.txt"), "{listing}");
    }
    let (status, _, body) = send(request(server, FINDER, "GET", "/Documents/report.txt")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "quarterly figures\n"));

    // Rename: MOVE without overwriting, the twin first as Finder does.
    if !refusing {
        let (status, _, _) = send(
            request(server, FINDER, "MOVE", "/Documents/._report.txt")
                .header("destination", server.url("/Documents/._final.txt"))
                .header("overwrite", "F"),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, _, _) = send(
        request(server, FINDER, "MOVE", "/Documents/report.txt")
            .header("destination", server.url("/Documents/final.txt"))
            .header("overwrite", "F"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _, body) = send(request(server, FINDER, "GET", "/Documents/final.txt")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "quarterly figures\n"));

    // Delete.
    let (status, _, _) = send(request(server, FINDER, "DELETE", "/Documents/final.txt")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = send(request(server, FINDER, "GET", "/Documents/final.txt")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Finder's session as it is by default: its metadata files are stored and listed.
async fn finder_connects_copies_renames_and_deletes(mode: Mode) {
    let server = Server::start(mode).await;
    finder_session(&server, false).await;
}

/// With `--refuse-macos-metadata --hide-dotfiles`, its `._` and `.DS_Store` writes are
/// refused (nothing stored) and other dotfiles stay readable but unlisted.
async fn finder_without_its_metadata(mode: Mode) {
    let server = Server::start_with(mode, &["--refuse-macos-metadata", "--hide-dotfiles"]).await;
    finder_session(&server, true).await;
    let put = client()
        .put(server.url("/.env"))
        .body("KEY=1")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let (_, _, listing) = send(request(&server, FINDER, "PROPFIND", "/").header("depth", "1")).await;
    assert!(!listing.contains(".env"), "{listing}");
    let html = client()
        .get(server.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!html.contains(".env"), "{html}");
    let (status, _, body) = send(request(&server, FINDER, "GET", "/.env")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "KEY=1"));
    let (status, _, listing) = send(request(&server, FINDER, "PROPFIND", "/.env").header("depth", "0")).await;
    assert_eq!(status, StatusCode::MULTI_STATUS, "{listing}");
}

/// Windows Explorer saves a new file: LOCK of the unmapped name, a PUT of 0 bytes and one
/// of the content under the lock, PROPPATCH of its Win32 properties (the times set the
/// file's time), UNLOCK; then lists the folder with the Win32 properties.
async fn windows_explorer_saves_a_file(mode: Mode) {
    let server = Server::start(mode).await;
    let (status, headers, _) = send(request(&server, MINIREDIR, "OPTIONS", "/")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["dav"].to_str().unwrap().contains('2'));
    let (status, _, _) = send(
        request(&server, MINIREDIR, "PROPFIND", "/")
            .header("depth", "0")
            .header("translate", "f")
            .body(WINDOWS_PROPFIND),
    )
    .await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    let (status, headers, _) = send(
        request(&server, MINIREDIR, "LOCK", "/notes.txt")
            .header("timeout", "Infinite, Second-4100000000")
            .header("content-type", "text/xml; charset=\"utf-8\"")
            .body(WINDOWS_LOCK),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let token = headers["lock-token"].to_str().unwrap().to_owned();
    let under_lock = format!("(<{}>)", token.trim_matches(['<', '>']));
    for body in ["", "saved from Notepad\r\n"] {
        let (status, _, _) = send(
            request(&server, MINIREDIR, "PUT", "/notes.txt")
                .header("if", &under_lock)
                .header("translate", "f")
                .body(body),
        )
        .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "PUT of {} bytes", body.len());
    }
    let (status, _, outcome) = send(
        request(&server, MINIREDIR, "PROPPATCH", "/notes.txt")
            .header("if", &under_lock)
            .body(WINDOWS_PROPPATCH),
    )
    .await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert!(
        outcome.contains("200 OK") && !outcome.contains("HTTP/1.1 4") && !outcome.contains("HTTP/1.1 5"),
        "{outcome}"
    );
    let (status, _, _) =
        send(request(&server, MINIREDIR, "UNLOCK", "/notes.txt").header("lock-token", &token)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, listing) = send(
        request(&server, MINIREDIR, "PROPFIND", "/")
            .header("depth", "1")
            .header("translate", "f")
            .body(WINDOWS_PROPFIND),
    )
    .await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    assert!(
        listing.contains("<D:getcontentlength>20</D:getcontentlength>"),
        "{listing}"
    );
    assert!(listing.contains("Wed, 02 Feb 2022 10:20:30 GMT"), "{listing}");
    assert!(
        listing.contains(">00000020<"),
        "the attributes are kept: {listing}"
    );
    let (status, _, body) =
        send(request(&server, MINIREDIR, "GET", "/notes.txt").header("translate", "f")).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "saved from Notepad\r\n")
    );
}

in_both_modes!(
    finder_connects_copies_renames_and_deletes,
    finder_without_its_metadata,
    windows_explorer_saves_a_file
);
on_s3!(
    finder_connects_copies_renames_and_deletes,
    finder_without_its_metadata,
    windows_explorer_saves_a_file
);
