//! Public links with real clients, in both run modes and on both backends (issue 53):
//! davfs2 and rclone mount a read link and a password link; cadaver puts into a drop
//! box, twice under one name, and is refused a listing, a read and an overwrite;
//! headless Chromium opens a password link, is asked for the password, and downloads.
//! (The attack list, method by method, is `services/gateway/tests/links.rs`, in
//! process; revocation across two gateways is `tests/shares.rs`.)

#[macro_use]
mod common;

use common::tools::{davfs2_mount, run, tool};
use common::{BACKEND, Backend, Mode, Server, client, users_file};
use reqwest::StatusCode;
use serde_json::{Value, json};

const POLICY: &str = "homes: /home/{user}\n";

async fn start(mode: Mode) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("alice", "pw")]);
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let envs = [("KUBEDAV_POLICY", policy.to_str().unwrap())];
    let server = Server::start_auth(mode, Some(&users), &[], &[], &envs).await;
    for (method, path, body) in [
        ("MKCOL", "/home/alice/pub/", ""),
        ("PUT", "/home/alice/pub/a.txt", "public a"),
        ("MKCOL", "/home/alice/drop/", ""),
        ("PUT", "/home/alice/secret.txt", "alice's own"),
    ] {
        let response = client()
            .request(method.parse().unwrap(), server.url(path))
            .basic_auth("alice", Some("pw"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{method} {path}: {}",
            response.status()
        );
    }
    (server, dir)
}

/// Publishes a link as alice; its URL.
async fn publish(server: &Server, body: Value) -> String {
    let response = client()
        .post(server.url("/.kubedav/links"))
        .basic_auth("alice", Some("pw"))
        .header("x-kubedav-request", "1")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let made: Value = response.json().await.unwrap();
    server.url(made["url"].as_str().unwrap())
}

/// davfs2 and rclone read a read link and a password link.
async fn davfs2_and_rclone_mount_links(mode: Mode) {
    let (server, dir) = start(mode).await;
    let open = publish(&server, json!({"path": "/home/alice/pub", "permission": "read"})).await;
    let locked = publish(
        &server,
        json!({"path": "/home/alice/pub", "permission": "read", "password": "link-password"}),
    )
    .await;
    for (url, credentials) in [(&open, None), (&locked, Some(("anyone", "link-password")))] {
        let mount_dir = tempfile::tempdir_in(dir.path()).unwrap();
        let mounted = davfs2_mount(url, mount_dir.path(), credentials).await;
        // (davfs2's directory reads fail on this machine's kernel, whatever the server:
        // files are read by name.)
        let read = std::fs::read_to_string(mounted.0.join("a.txt"));
        let outside = std::fs::read_to_string(mounted.0.join("../secret.txt"));
        let beside = std::fs::read_to_string(mounted.0.join("secret.txt"));
        run("umount", &[mounted.0.to_str().unwrap()], None).await;
        std::mem::forget(mounted);
        assert_eq!(
            read.unwrap(),
            "public a",
            "davfs2 through {}",
            credentials.is_some()
        );
        assert!(
            outside.is_err() && beside.is_err(),
            "davfs2 reached alice's own file"
        );

        let copied = dir.path().join(format!("rclone-{}", credentials.is_some()));
        let mut args = vec![
            "copy".to_owned(),
            ":webdav:".into(),
            copied.display().to_string(),
            "--webdav-url".into(),
            url.clone(),
        ];
        if let Some((user, password)) = credentials {
            let obscured = run("rclone", &["obscure", password], None).await;
            args.extend([
                "--webdav-user".into(),
                user.into(),
                "--webdav-pass".into(),
                obscured.trim().to_owned(),
            ]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run("rclone", &args, None).await;
        assert_eq!(std::fs::read_to_string(copied.join("a.txt")).unwrap(), "public a");
        assert!(!copied.join("secret.txt").exists());
    }
    // Without the password, rclone gets nothing.
    let refused = dir.path().join("rclone-refused");
    let output = tokio::process::Command::new("rclone")
        .args([
            "copy",
            ":webdav:",
            refused.to_str().unwrap(),
            "--webdav-url",
            &locked,
            "--retries",
            "1",
        ])
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    assert!(!refused.join("a.txt").exists());
}

/// cadaver puts into a drop box and is refused a listing, a read and an overwrite.
async fn cadaver_fills_a_drop_box(mode: Mode) {
    let (server, dir) = start(mode).await;
    let drop = publish(
        &server,
        json!({"path": "/home/alice/drop", "permission": "upload"}),
    )
    .await;
    let local = dir.path().join("report.txt");
    let home = dir.path().join("cadaver-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut outputs = Vec::new();
    for text in ["first report", "second report"] {
        std::fs::write(&local, text).unwrap();
        let script = format!(
            "put {} report.txt\nls\nget report.txt {}\nquit\n",
            local.display(),
            dir.path().join("got.txt").display()
        );
        let output = run(
            "env",
            &[&format!("HOME={}", home.display()), "cadaver", &drop],
            Some(&script),
        )
        .await;
        outputs.push(output);
    }
    let joined = outputs.join("\n");
    assert!(joined.matches("succeeded").count() >= 2, "{joined}");
    assert!(
        joined.contains("403"),
        "a listing or a read was not refused: {joined}"
    );
    let got = std::fs::read_to_string(dir.path().join("got.txt")).unwrap_or_default();
    assert!(!got.contains("report"), "cadaver read from the drop box: {got}");
    // Both uploads are there, neither over the other; alice sees them.
    let listing = client()
        .request("PROPFIND".parse().unwrap(), server.url("/home/alice/drop/"))
        .basic_auth("alice", Some("pw"))
        .header("depth", "1")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        listing.contains("report.txt") && listing.contains("report%20(2).txt"),
        "{listing}"
    );
    let first = client()
        .get(server.url("/home/alice/drop/report.txt"))
        .basic_auth("alice", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.text().await.unwrap(), "first report");
}

/// Headless Chromium (`tests/clients/browser_links.py`) opens a password link: the
/// page asks for the password, refuses a wrong one, opens the folder with the right
/// one, and the file downloads (screenshots kept).
async fn chromium_opens_a_password_link(mode: Mode) {
    let (server, dir) = start(mode).await;
    let url = publish(
        &server,
        json!({"path": "/home/alice/pub", "permission": "read", "password": "link-password"}),
    )
    .await;
    let python = tool("KUBEDAV_BROWSER_PYTHON", "need-browser.sh");
    let shots = std::env::var("KUBEDAV_SCREENSHOTS").map_or_else(|_| dir.path().to_owned(), Into::into);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/browser_links.py");
    let output = run(
        &python,
        &[script, &url, shots.to_str().unwrap(), "link-password"],
        None,
    )
    .await;
    assert!(output.contains("link view ok"), "{output}");
    assert!(shots.join("link-password.png").exists() && shots.join("link-opened.png").exists());
}

in_both_modes!(
    davfs2_and_rclone_mount_links,
    cadaver_fills_a_drop_box,
    chromium_opens_a_password_link
);
on_s3!(davfs2_and_rclone_mount_links, cadaver_fills_a_drop_box);
