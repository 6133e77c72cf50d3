//! Real WebDAV clients against kubedav, in both run modes and on both backends (a
//! volume and S3-compatible object storage): rclone copies a tree up and down and
//! checks every byte (and, as an ownCloud client, keeps times and compares hashes),
//! cadaver walks through a session of collections, properties, locks, COPY, MOVE and
//! DELETE, davfs2 mounts it, GNOME's gio goes through GVfs, and Python's webdav4 runs a
//! session through fsspec. Under an access policy, rclone, cadaver, davfs2 and the file
//! manager in headless Chromium see and change only what it grants. `make test`
//! installs them (Debian packages; webdav4 from PyPI into a virtual environment).

#[macro_use]
mod common;

use common::tools::{davfs2_mount, run, tool};
use common::{BACKEND, Backend, Mode, Server, client};
use reqwest::StatusCode;
use std::path::Path;

/// rclone with no configuration file, on the WebDAV remote `:webdav:` at the server.
async fn rclone(server: &Server, args: &[&str]) -> String {
    rclone_as(server, "other", args).await
}

/// rclone as above, with `--webdav-vendor vendor` (`owncloud` sends `X-OC-Mtime` and
/// `OC-Checksum` and reads `oc:checksums`).
async fn rclone_as(server: &Server, vendor: &str, args: &[&str]) -> String {
    let url = server.url("/");
    let mut all = vec![
        "--config",
        "/dev/null",
        "--webdav-url",
        url.as_str(),
        "--webdav-vendor",
        vendor,
    ];
    all.extend_from_slice(args);
    run("rclone", &all, None).await
}

fn write(path: &Path, data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap();
}

/// rclone copies a tree up (a 20 MiB file among small, empty and oddly named ones),
/// finds no difference byte for byte, lists it, copies it back down unchanged, and
/// purges it.
async fn rclone_round_trips_a_tree(mode: Mode) {
    let server = Server::start(mode).await;
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    write(&tree.join("a/x.txt"), b"hello");
    write(&tree.join("a/empty"), b"");
    write(&tree.join("a/name with spaces & \u{fc} #1%.txt"), b"odd name");
    let big: Vec<u8> = (0..20u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    write(&tree.join("a/b/big.bin"), &big);
    let tree_arg = tree.to_str().unwrap();

    rclone(&server, &["copy", tree_arg, ":webdav:up"]).await;
    let check = rclone(&server, &["check", "--download", tree_arg, ":webdav:up"]).await;
    assert!(check.contains("0 differences found"), "{check}");
    let listing = rclone(&server, &["lsf", "-R", ":webdav:up"]).await;
    let mut names: Vec<&str> = listing.lines().collect();
    names.sort_unstable();
    assert_eq!(
        names,
        vec![
            "a/",
            "a/b/",
            "a/b/big.bin",
            "a/empty",
            "a/name with spaces & \u{fc} #1%.txt",
            "a/x.txt"
        ]
    );
    let down = local.path().join("down");
    rclone(&server, &["copy", ":webdav:up", down.to_str().unwrap()]).await;
    assert_eq!(std::fs::read(down.join("a/b/big.bin")).unwrap(), big);
    assert_eq!(std::fs::read(down.join("a/x.txt")).unwrap(), b"hello");
    rclone(&server, &["purge", ":webdav:up"]).await;
    let gone = client()
        .request(
            reqwest::Method::from_bytes(b"PROPFIND").unwrap(),
            server.url("/up/"),
        )
        .header("depth", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), StatusCode::NOT_FOUND);
}

/// rclone as an ownCloud sync client: a tree copied in keeps its modification times
/// (`rclone lsl` of both sides agree), `rclone check` compares hashes without
/// downloading anything, and a second `rclone sync` uploads nothing (every etag stays),
/// on a volume and on a bucket alike.
async fn rclone_owncloud_keeps_times_and_hashes(mode: Mode) {
    let server = Server::start(mode).await;
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    let files: [(&str, &[u8], u64); 4] = [
        ("a/x.txt", b"hello", 1_400_000_000),
        ("a/empty", b"", 1_500_000_000),
        ("a/b/odd name \u{fc}.txt", b"odd name", 1_600_000_000),
        ("c.bin", &[7u8; 300_000], 1_650_000_000),
    ];
    for (name, data, seconds) in files {
        let path = tree.join(name);
        write(&path, data);
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds))
            .unwrap();
    }
    let tree_arg = tree.to_str().unwrap();
    rclone_as(&server, "owncloud", &["copy", tree_arg, ":webdav:up"]).await;

    let sorted = |text: String| {
        let mut lines: Vec<String> = text.lines().map(|l| l.trim().to_owned()).collect();
        lines.sort_unstable();
        lines
    };
    let remote = sorted(rclone_as(&server, "owncloud", &["lsl", ":webdav:up"]).await);
    let source = sorted(rclone_as(&server, "owncloud", &["lsl", tree_arg]).await);
    assert_eq!(remote, source, "modification times were not kept");
    let check = rclone_as(&server, "owncloud", &["check", tree_arg, ":webdav:up"]).await;
    assert!(check.contains("0 differences found"), "{check}");
    assert!(check.contains("4 matching files"), "{check}");
    assert!(
        !check.contains("could not be checked"),
        "hashes were not compared: {check}"
    );

    let before = etags(&server, &["/up/", "/up/a/", "/up/a/b/"]).await;
    let again = rclone_as(&server, "owncloud", &["sync", "-v", tree_arg, ":webdav:up"]).await;
    assert!(
        !again.contains("Copied"),
        "the second sync uploaded again: {again}"
    );
    let after = etags(&server, &["/up/", "/up/a/", "/up/a/b/"]).await;
    assert_eq!(after, before, "the second sync changed files");
}

/// `rclone about` reads the RFC 4331 quota properties: with `--quota-bytes` it shows
/// the quota, what is used and what is left.
async fn rclone_about_shows_the_quota(mode: Mode) {
    let server = Server::start_full(mode, &[], &[("KUBEDAV_QUOTA_BYTES", "1000000")]).await;
    let put = client()
        .put(server.url("/f.bin"))
        .body(vec![0u8; 250_000])
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let about = rclone_as(&server, "owncloud", &["about", "--json", ":webdav:"]).await;
    let compact: String = about.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(
        compact.contains(r#""total":1000000"#)
            && compact.contains(r#""used":250000"#)
            && compact.contains(r#""free":750000"#),
        "{about}"
    );
}

/// Python's webdav4 through fsspec (`tests/clients/webdav4_session.py`): mkdir, put,
/// write, ls, info, mv, get, read, rm. `make test` installs it in a virtual environment
/// (`scripts/need-webdav4.sh`) and passes its Python in `KUBEDAV_WEBDAV4_PYTHON`.
async fn webdav4_session(mode: Mode) {
    let server = Server::start(mode).await;
    let python = tool("KUBEDAV_WEBDAV4_PYTHON", "need-webdav4.sh");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/webdav4_session.py");
    let output = run(&python, &[script, &server.url("/")], None).await;
    assert!(output.contains("webdav4 session ok"), "{output}");
}

/// GNOME's gio (GVfs's dav backend, what GNOME Files uses), in a D-Bus session of its
/// own: mount, list, read, copy in, make a folder, move, copy out, delete, unmount.
async fn gio_session(mode: Mode) {
    let server = Server::start(mode).await;
    std::fs::write(server.disk("served.txt"), b"from the server\n").unwrap();
    let local = tempfile::tempdir().unwrap();
    let (into, out) = (local.path().join("in.txt"), local.path().join("out.txt"));
    std::fs::write(&into, b"written with gio\n").unwrap();
    let url = server.url("/").replacen("http://", "dav://", 1);
    let script = format!(
        "set -e\n\
         gio mount '{url}' < /dev/null\n\
         gio list '{url}'\n\
         gio cat '{url}served.txt'\n\
         gio copy '{into}' '{url}in.txt'\n\
         gio mkdir '{url}sub'\n\
         gio move '{url}in.txt' '{url}sub/moved.txt'\n\
         gio copy '{url}sub/moved.txt' '{out}'\n\
         gio remove '{url}served.txt'\n\
         gio list '{url}sub/'\n\
         gio mount -u '{url}'\n",
        into = into.display(),
        out = out.display()
    );
    let output = run("dbus-run-session", &["--", "bash", "-c", &script], None).await;
    assert!(
        output.contains("served.txt") && output.contains("from the server"),
        "{output}"
    );
    assert!(output.contains("moved.txt"), "{output}");
    assert_eq!(std::fs::read(&out).unwrap(), b"written with gio\n");
    let moved = client().get(server.url("/sub/moved.txt")).send().await.unwrap();
    assert_eq!(moved.bytes().await.unwrap().as_ref(), b"written with gio\n");
    for gone in ["/in.txt", "/served.txt"] {
        let status = client().get(server.url(gone)).send().await.unwrap().status();
        assert_eq!(status, StatusCode::NOT_FOUND, "{gone}");
    }
}

/// Debian's chromium, headless through chromium-driver and selenium
/// (`tests/clients/browser_listing.py`), uses the file manager as a person would: a
/// member named like an HTML injection shows as its text and runs nothing; sorting, a
/// Markdown preview, an upload of 50 MiB through the picker with its progress bar seen
/// moving, a new folder, a rename and a confirmed delete all show in the listing, which
/// the server confirms; the browser logs no Content Security Policy violation. `make
/// test` installs them (`scripts/need-browser.sh`) and passes selenium's Python in
/// `KUBEDAV_BROWSER_PYTHON`. Screenshots are kept in `KUBEDAV_SCREENSHOTS` when it is
/// set (docs/images/ holds one), else in the test's temporary directory.
async fn browser_file_manager(mode: Mode) {
    let server = Server::start(mode).await;
    std::fs::create_dir(server.disk("docs")).unwrap();
    std::fs::write(server.disk("docs/<img src=x onerror=alert(1)>.html"), b"<p>x</p>").unwrap();
    std::fs::write(server.disk("docs/notes.md"), b"# read me\n\nSome *text*.\n").unwrap();
    let small = [&[b's'; 100][..], b" small file"].concat();
    std::fs::write(server.disk("docs/small.txt"), small).unwrap();
    let local = tempfile::tempdir().unwrap();
    let big = local.path().join("big.bin");
    let data: Vec<u8> = (0..50u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    std::fs::write(&big, &data).unwrap();
    let python = tool("KUBEDAV_BROWSER_PYTHON", "need-browser.sh");
    let shots = match std::env::var("KUBEDAV_SCREENSHOTS") {
        Ok(dir) => std::path::PathBuf::from(dir),
        Err(_) => local.path().to_owned(),
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/browser_listing.py");
    let url = server.url("/docs/");
    let args = [
        script,
        url.as_str(),
        shots.to_str().unwrap(),
        big.to_str().unwrap(),
    ];
    let output = run(&python, &args, None).await;
    assert!(output.contains("browser file manager ok"), "{output}");
    assert!(shots.join("listing.png").exists());
    let uploaded = client().get(server.url("/docs/big.bin")).send().await.unwrap();
    assert_eq!(
        uploaded.bytes().await.unwrap().as_ref(),
        &data[..],
        "the upload arrived whole"
    );
    let folder = client()
        .request(
            reqwest::Method::from_bytes(b"PROPFIND").unwrap(),
            server.url("/docs/new%20folder/"),
        )
        .header("depth", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(folder.status(), StatusCode::MULTI_STATUS);
    for gone in ["/docs/notes.md", "/docs/renamed.md"] {
        let status = client().get(server.url(gone)).send().await.unwrap().status();
        assert_eq!(status, StatusCode::NOT_FOUND, "{gone}");
    }
}

/// The file manager offers write actions only to users who may write: a read-only user's
/// page has no upload, new folder, rename or delete (and the server refuses their writes
/// whatever a page sends); a writer's page has them.
async fn file_manager_hides_writes_from_read_only_users(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("ada", "writer"), ("bob", "reader")]);
    let server = Server::start_auth(mode, Some(&users), &[], &["--read-only-users", "bob"], &[]).await;
    std::fs::write(server.disk("a.txt"), b"a").unwrap();
    let page = |user: &'static str, password: &'static str| {
        let url = server.url("/");
        async move {
            client()
                .get(url)
                .basic_auth(user, Some(password))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let reader = page("bob", "reader").await;
    assert!(
        reader.contains("data-writable=\"false\"") && reader.contains("id=\"toolbar\" hidden"),
        "{reader}"
    );
    assert!(!reader.contains("data-action=\"rename\"") && !reader.contains("data-action=\"delete\""));
    assert!(
        reader.contains("data-action=\"link\""),
        "copying a link is for everyone"
    );
    let refused = client()
        .put(server.url("/b.txt"))
        .basic_auth("bob", Some("reader"))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let writer = page("ada", "writer").await;
    assert!(writer.contains("data-writable=\"true\"") && !writer.contains("id=\"toolbar\" hidden"));
    assert!(writer.contains("data-action=\"rename\"") && writer.contains("data-action=\"delete\""));
}

/// The Depth 1 listings of `collections`, one after the other: every member's etag.
async fn etags(server: &Server, collections: &[&str]) -> Vec<String> {
    let mut listings = Vec::new();
    for path in collections {
        let response = client()
            .request(
                reqwest::Method::from_bytes(b"PROPFIND").unwrap(),
                server.url(path),
            )
            .header("depth", "1")
            .body(r#"<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/></D:prop></D:propfind>"#)
            .send()
            .await
            .unwrap();
        listings.push(response.text().await.unwrap());
    }
    listings
}

/// cadaver, scripted as a user would type: MKCOL, PUT, PROPPATCH and PROPFIND of a
/// dead property, LOCK and UNLOCK, COPY, MOVE, a listing, GET and DELETE.
async fn cadaver_session(mode: Mode) {
    let server = Server::start(mode).await;
    let local = tempfile::tempdir().unwrap();
    let note = local.path().join("note.txt");
    std::fs::write(&note, b"written with cadaver\n").unwrap();
    let fetched = local.path().join("fetched.txt");
    let script = format!(
        "mkcol docs\ncd docs\nput {} note.txt\npropset note.txt color teal\npropget note.txt color\n\
         lock note.txt\nunlock note.txt\ncopy note.txt copy.txt\nmove copy.txt moved.txt\nls\n\
         get moved.txt {}\nrm note.txt\nquit\n",
        note.display(),
        fetched.display()
    );
    let output = run("cadaver", &[&server.url("/")], Some(&script)).await;
    for step in [
        "Creating `docs': succeeded",
        "Uploading",
        "Setting property on `note.txt': succeeded",
        "Value of color is: teal",
        "Locking `note.txt': succeeded",
        "Unlocking `note.txt': succeeded",
        "Copying `/docs/note.txt' to `/docs/copy.txt':  succeeded",
        "Moving `/docs/copy.txt' to `/docs/moved.txt':  succeeded",
        "Deleting `note.txt': succeeded",
    ] {
        assert!(output.contains(step), "no {step:?} in:\n{output}");
    }
    assert!(!output.contains("failed"), "{output}");
    assert_eq!(std::fs::read(&fetched).unwrap(), b"written with cadaver\n");
    let moved = client().get(server.url("/docs/moved.txt")).send().await.unwrap();
    assert_eq!(moved.status(), StatusCode::OK);
    let deleted = client().get(server.url("/docs/note.txt")).send().await.unwrap();
    assert_eq!(deleted.status(), StatusCode::NOT_FOUND);
}

/// davfs2 mounts the server (FUSE, as root): a file made over HTTP reads through the
/// mount, and a file written, a directory made, a rename and a delete through the mount
/// are on the server once it is unmounted. (Listing a directory through davfs2 1.6 fails with
/// EINVAL on this kernel against every server, rclone's too, so no case lists.)
async fn davfs2_mount_reads_and_writes(mode: Mode) {
    let server = Server::start(mode).await;
    let status = client()
        .put(server.url("/served.txt"))
        .body("from the server")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::CREATED);
    let dir = tempfile::tempdir().unwrap();
    let mounted = davfs2_mount(&server.url("/"), dir.path(), None).await;
    let mount = mounted.0.clone();
    assert_eq!(
        std::fs::read(mount.join("served.txt")).unwrap(),
        b"from the server"
    );
    std::fs::write(mount.join("new.txt"), b"written through davfs2").unwrap();
    std::fs::create_dir(mount.join("sub")).unwrap();
    std::fs::rename(mount.join("new.txt"), mount.join("sub/moved.txt")).unwrap();
    std::fs::remove_file(mount.join("served.txt")).unwrap();
    // Unmounting uploads what is still in davfs2's cache, and waits for it.
    run("umount", &[mount.to_str().unwrap()], None).await;
    std::mem::forget(mounted);
    let moved = client().get(server.url("/sub/moved.txt")).send().await.unwrap();
    assert_eq!(moved.status(), StatusCode::OK);
    assert_eq!(moved.bytes().await.unwrap().as_ref(), b"written through davfs2");
    for gone in ["/new.txt", "/served.txt"] {
        let old = client().get(server.url(gone)).send().await.unwrap();
        assert_eq!(old.status(), StatusCode::NOT_FOUND, "{gone}");
    }
}

/// Files another user uploaded run no script in the server's origin, where the file
/// manager runs and a reader's credentials are cached: headless Chromium
/// (`tests/clients/browser_user_content.py`) opens an HTML page, an SVG image and an
/// XHTML page whose scripts would retitle the page and PUT a file beside themselves.
/// Each is shown (its screenshot is kept), its title stays its own, and nothing was
/// written. Without the `sandbox` policy on file answers, all three scripts ran.
async fn uploaded_pages_run_no_script(mode: Mode) {
    let server = Server::start(mode).await;
    std::fs::create_dir(server.disk("shared")).unwrap();
    let script = |name: &str| {
        format!(
            "document.title = 'script ran'; var x = new XMLHttpRequest(); \
             x.open('PUT', 'ran-{name}.txt', false); x.send('ran');"
        )
    };
    let pages = [
        (
            "page.html",
            format!(
                "<!doctype html><title>a page</title><p>hello</p><script>{}</script>",
                script("html")
            ),
        ),
        (
            "image.svg",
            format!(
                "<svg xmlns='http://www.w3.org/2000/svg' width='200' height='80'><title>an image</title>\
                 <rect width='200' height='80' fill='teal'/><script>{}</script></svg>",
                script("svg")
            ),
        ),
        (
            "page.xhtml",
            format!(
                "<html xmlns='http://www.w3.org/1999/xhtml'><head><title>a page</title></head>\
                 <body><p>hello</p><script>{}</script></body></html>",
                script("xhtml")
            ),
        ),
    ];
    for (name, content) in &pages {
        std::fs::write(server.disk(&format!("shared/{name}")), content).unwrap();
    }
    let python = tool("KUBEDAV_BROWSER_PYTHON", "need-browser.sh");
    let local = tempfile::tempdir().unwrap();
    let shots = match std::env::var("KUBEDAV_SCREENSHOTS") {
        Ok(dir) => std::path::PathBuf::from(dir),
        Err(_) => local.path().to_owned(),
    };
    let script_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/browser_user_content.py"
    );
    let url = server.url("/shared/");
    let mut args = vec![script_path, url.as_str(), shots.to_str().unwrap()];
    args.extend(pages.iter().map(|(name, _)| *name));
    let output = run(&python, &args, None).await;
    assert!(output.contains("user content ok"), "{output}");
    for title in [
        "page.html: title=a page",
        "image.svg: title=an image",
        "page.xhtml: title=a page",
    ] {
        assert!(output.contains(title), "each file is shown as itself: {output}");
    }
    for (name, _) in &pages {
        assert!(shots.join(format!("user-content-{name}.png")).exists());
    }
    let left: Vec<_> = std::fs::read_dir(server.disk("shared"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("ran-"))
        .collect();
    assert!(left.is_empty(), "an uploaded script wrote {left:?}");
    let markdown = client()
        .get(server.url("/shared/page.html"))
        .header("accept", "text/markdown")
        .send()
        .await
        .unwrap();
    assert_eq!(markdown.headers()["content-type"], "text/markdown; charset=utf-8");
    assert_eq!(
        markdown.headers()["content-security-policy"],
        "sandbox",
        "the Markdown variant of a page is the file's bytes too"
    );
}

const POLICY: &str = r#"
homes: /home/{user}
groups:
  staff: [alice, bob]
rules:
  - path: /projects/apollo
    grant: {"group:staff": write, "user:carol": read}
  - path: /public
    grant: {"*": read}
"#;

/// Starts kubedav under [`POLICY`] with alice, bob, carol and dave (password `pw`).
async fn start_with_policy(mode: Mode) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(
        dir.path(),
        &[("alice", "pw"), ("bob", "pw"), ("carol", "pw"), ("dave", "pw")],
    );
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let envs = [("KUBEDAV_POLICY", policy.to_str().unwrap())];
    let server = Server::start_auth(mode, Some(&users), &[], &[], &envs).await;
    (server, dir)
}

/// rclone as `user` (password `pw`, obscured as rclone wants it).
async fn rclone_user(server: &Server, user: &str, args: &[&str]) -> String {
    let obscured = run("rclone", &["obscure", "pw"], None).await;
    let mut all = vec!["--webdav-user", user, "--webdav-pass", obscured.trim()];
    all.extend_from_slice(args);
    rclone(server, &all).await
}

/// Under a policy, real clients see and change only what it grants: alice syncs a tree
/// into her home with rclone and finds it whole; carol, listing everything with rclone
/// (`lsf -R`) and with cadaver, sees the way to the project she reads and its files, the
/// public space and her own home, and nothing of alice's; dave, through a davfs2 mount,
/// writes his home but not the public space (davfs2 answers that write EINVAL, and
/// nothing reaches the server).
async fn clients_see_only_what_the_policy_grants(mode: Mode) {
    let (server, dir) = start_with_policy(mode).await;
    let put = |user: &'static str, path: &'static str| {
        let server = &server;
        async move {
            client()
                .put(server.url(path))
                .basic_auth(user, Some("pw"))
                .body(format!("{user} wrote {path}"))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(put("bob", "/projects/apollo/plan.txt").await, StatusCode::CREATED);
    assert_eq!(put("alice", "/home/alice/diary.txt").await, StatusCode::CREATED);

    let local = dir.path().join("tree");
    write(&local.join("a.txt"), b"alpha");
    write(&local.join("deep/b.txt"), &vec![7u8; 300_000]);
    write(&local.join("deep/empty.txt"), b"");
    let source = local.to_str().unwrap();
    rclone_user(&server, "alice", &["sync", source, ":webdav:home/alice/synced"]).await;
    let checked = rclone_user(&server, "alice", &["check", source, ":webdav:home/alice/synced"]).await;
    assert!(checked.contains("0 differences found"), "{checked}");

    let seen = rclone_user(&server, "carol", &["lsf", "-R", ":webdav:"]).await;
    let mut seen: Vec<&str> = seen.lines().collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "home/",
            "home/carol/",
            "projects/",
            "projects/apollo/",
            "projects/apollo/plan.txt",
            "public/"
        ],
        "carol's whole tree"
    );

    let home = dir.path().join("cadaver-home");
    std::fs::create_dir(&home).unwrap();
    let netrc = home.join(".netrc");
    std::fs::write(&netrc, "machine 127.0.0.1 login carol password pw\n").unwrap();
    let cadaver = tokio::process::Command::new("cadaver")
        .arg(server.url("/"))
        .env("HOME", &home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("cadaver runs (make test installs it)");
    let listing = listed_by(cadaver, "ls\ncd home\nls\nquit\n").await;
    for shown in ["projects", "public", "home", "carol"] {
        assert!(listing.contains(shown), "no {shown} in:\n{listing}");
    }
    assert!(!listing.contains("alice"), "{listing}");

    let mount = davfs2_mount(&server.url("/"), dir.path(), Some(("dave", "pw"))).await;
    assert!(mount.0.join("public").is_dir());
    let allowed = std::fs::write(mount.0.join("home/dave/mine.txt"), b"dave's own");
    let written = std::fs::write(mount.0.join("public/graffiti.txt"), b"not allowed");
    let unmounted = std::process::Command::new("umount")
        .arg(&mount.0)
        .output()
        .unwrap();
    std::mem::forget(mount);
    let graffiti = client()
        .get(server.url("/public/graffiti.txt"))
        .basic_auth("dave", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        graffiti.status(),
        StatusCode::NOT_FOUND,
        "davfs2 wrote into the read-only space ({written:?}, {unmounted:?})"
    );
    assert!(unmounted.status.success(), "{unmounted:?}");
    assert!(
        written.is_err(),
        "davfs2 reported no failure writing into /public"
    );
    assert!(
        allowed.is_ok(),
        "dave writes his own home through davfs2: {allowed:?}"
    );
    let mine = client()
        .get(server.url("/home/dave/mine.txt"))
        .basic_auth("dave", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(mine.text().await.unwrap(), "dave's own");
}

/// The file manager under a policy, in headless Chromium as carol
/// (`tests/clients/browser_policy.py`): `/` lists only the ways to what she may read,
/// `/home/` only her own home, and the project she may only read offers no write and
/// answers files dropped on it with a sentence, not an upload (screenshots kept).
async fn file_manager_under_a_policy(mode: Mode) {
    let (server, dir) = start_with_policy(mode).await;
    let made = client()
        .put(server.url("/projects/apollo/plan.txt"))
        .basic_auth("bob", Some("pw"))
        .body("the plan")
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    let alice = client()
        .put(server.url("/home/alice/diary.txt"))
        .basic_auth("alice", Some("pw"))
        .body("alice's")
        .send()
        .await
        .unwrap();
    assert_eq!(alice.status(), StatusCode::CREATED);
    let python = tool("KUBEDAV_BROWSER_PYTHON", "need-browser.sh");
    let shots = match std::env::var("KUBEDAV_SCREENSHOTS") {
        Ok(shots) => std::path::PathBuf::from(shots),
        Err(_) => dir.path().to_owned(),
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/browser_policy.py");
    let url = server.url("");
    let url = url.trim_end_matches('/');
    let output = run(
        &python,
        &[script, url, shots.to_str().unwrap(), "carol", "pw"],
        None,
    )
    .await;
    assert!(output.contains("policy view ok"), "{output}");
    assert!(shots.join("policy-root.png").exists() && shots.join("policy-read-only.png").exists());
    let graffiti = client()
        .get(server.url("/projects/apollo/graffiti.txt"))
        .basic_auth("bob", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(graffiti.status(), StatusCode::NOT_FOUND, "nothing was uploaded");
}

/// What cadaver printed for `script`, which ends with `quit`.
async fn listed_by(mut cadaver: tokio::process::Child, script: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let mut stdin = cadaver.stdin.take().unwrap();
    stdin.write_all(script.as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), cadaver.wait_with_output())
        .await
        .expect("cadaver finished")
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

in_both_modes!(
    rclone_round_trips_a_tree,
    rclone_owncloud_keeps_times_and_hashes,
    rclone_about_shows_the_quota,
    webdav4_session,
    gio_session,
    browser_file_manager,
    uploaded_pages_run_no_script,
    file_manager_hides_writes_from_read_only_users,
    cadaver_session,
    davfs2_mount_reads_and_writes,
    clients_see_only_what_the_policy_grants,
    file_manager_under_a_policy
);
on_s3!(
    rclone_round_trips_a_tree,
    rclone_owncloud_keeps_times_and_hashes,
    rclone_about_shows_the_quota,
    webdav4_session,
    gio_session,
    browser_file_manager,
    file_manager_hides_writes_from_read_only_users,
    cadaver_session,
    davfs2_mount_reads_and_writes,
    clients_see_only_what_the_policy_grants,
    file_manager_under_a_policy
);
