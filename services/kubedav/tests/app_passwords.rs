//! App passwords end to end, in both modes: made, listed and revoked through the API
//! (`{base}/.kubedav/app-passwords`) only by calls that prove they come from kubedav's
//! own pages or a script, used with Basic by davfs2 and cadaver, limited to their scope,
//! refused everywhere within a second of their revocation through either of two
//! gateways, and kept with the data through a restart of every process and a Redis
//! `FLUSHALL`.

#[macro_use]
mod common;

use common::tools::{davfs2_mount, run};
use common::{BACKEND, Backend, Mode, Process, Server, client, start_gateway, start_service, users_file};
use kubedav_testkit::RedisServer;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

const SECRET_KEY: &str = "a key of at least thirty-two bytes, shared by every replica";

/// POSTs `body` to the API as `user`, with the proof of origin kubedav's pages send.
async fn create(at: &str, user: (&str, &str), body: Value) -> (StatusCode, Value) {
    let response = client()
        .post(format!("{at}/.kubedav/app-passwords"))
        .basic_auth(user.0, Some(user.1))
        .header("x-kubedav-request", "1")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The app passwords `user` holds, as the API lists them.
async fn list(at: &str, user: (&str, &str)) -> Value {
    client()
        .get(format!("{at}/.kubedav/app-passwords"))
        .basic_auth(user.0, Some(user.1))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn status_with(url: &str, method: &str, user: &str, password: &str) -> StatusCode {
    client()
        .request(method.parse().unwrap(), url)
        .basic_auth(user, Some(password))
        .header("depth", "0")
        .body(if method == "PUT" { "x" } else { "" })
        .send()
        .await
        .unwrap()
        .status()
}

async fn made_listed_scoped_and_revoked_through_the_api(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("carol", "carol-password")]);
    let envs = [("KUBEDAV_SECRET_KEY", SECRET_KEY)];
    let server = Server::start_auth(mode, Some(&users), &[], &[], &envs).await;
    let base = server.url("");
    let carol = ("carol", "carol-password");
    for path in ["/docs/", "/other/"] {
        let made = client()
            .request("MKCOL".parse().unwrap(), server.url(path))
            .basic_auth(carol.0, Some(carol.1))
            .send()
            .await
            .unwrap();
        assert_eq!(made.status(), StatusCode::CREATED);
    }

    // Without the proof of origin, or from another origin: refused, nothing made.
    let no_proof = client()
        .post(format!("{base}/.kubedav/app-passwords"))
        .basic_auth(carol.0, Some(carol.1))
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_proof.status(), StatusCode::FORBIDDEN);
    assert!(no_proof.text().await.unwrap().contains("X-Kubedav-Request"));
    let other_port = format!("http://127.0.0.1:{}", server.addr.port() + 1);
    for (header, value) in [("origin", other_port.as_str()), ("sec-fetch-site", "same-site")] {
        let foreign = client()
            .post(format!("{base}/.kubedav/app-passwords"))
            .basic_auth(carol.0, Some(carol.1))
            .header("x-kubedav-request", "1")
            .header(header, value)
            .json(&json!({"name": "x"}))
            .send()
            .await
            .unwrap();
        assert_eq!(foreign.status(), StatusCode::FORBIDDEN, "{header}: {value}");
    }
    let text_plain = client()
        .post(format!("{base}/.kubedav/app-passwords"))
        .basic_auth(carol.0, Some(carol.1))
        .header("x-kubedav-request", "1")
        .header("content-type", "text/plain")
        .body(r#"{"name": "x"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(text_plain.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let listed = list(&base, carol).await;
    assert_eq!(listed, json!([]), "nothing was made by the refused calls");

    // Made from kubedav's own origin: shown once, listed without its secret.
    let own_origin = format!("http://{}", server.addr);
    let made = client()
        .post(format!("{base}/.kubedav/app-passwords"))
        .basic_auth(carol.0, Some(carol.1))
        .header("x-kubedav-request", "1")
        .header("origin", &own_origin)
        .header("sec-fetch-site", "same-origin")
        .json(&json!({"name": "Laptop, davfs2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    let made: Value = made.json().await.unwrap();
    let writer = made["password"].as_str().unwrap().to_owned();
    assert!(writer.starts_with("kdv-") && writer.len() <= 64, "{writer}");
    assert_eq!(made["username"], "carol");
    assert_eq!(made["permission"], "write");
    let (status, reader) = create(
        &base,
        carol,
        json!({"name": "reader", "permission": "read", "path": "/docs"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{reader}");
    let reader_password = reader["password"].as_str().unwrap().to_owned();
    let listed = list(&base, carol).await;
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(
        !Value::Array(listed.clone()).to_string().contains(&writer[12..]),
        "no secret is listed"
    );
    let listed_reader = listed.iter().find(|shown| shown["name"] == "reader").unwrap();
    assert_eq!(listed_reader["path"], "/docs");
    assert_eq!(listed_reader["permission"], "read");

    // Used with Basic: the writer writes anywhere, the reader reads /docs only.
    assert_eq!(
        status_with(&server.url("/other/w.txt"), "PUT", "carol", &writer).await,
        StatusCode::CREATED
    );
    assert_eq!(
        status_with(&server.url("/docs/r.txt"), "PUT", "carol", &writer).await,
        StatusCode::CREATED
    );
    assert_eq!(
        status_with(&server.url("/docs/r.txt"), "GET", "carol", &reader_password).await,
        StatusCode::OK
    );
    assert_eq!(
        status_with(&server.url("/docs/"), "PROPFIND", "carol", &reader_password)
            .await
            .as_u16(),
        207
    );
    assert_eq!(
        status_with(&server.url("/docs/r.txt"), "PUT", "carol", &reader_password).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status_with(&server.url("/other/w.txt"), "GET", "carol", &reader_password).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        status_with(&server.url("/"), "PROPFIND", "carol", &reader_password).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        status_with(&server.url("/other/w.txt"), "GET", "mallory", &writer).await,
        StatusCode::UNAUTHORIZED
    );
    // An app password makes no app passwords.
    let (status, _) = create(&base, ("carol", &writer), json!({"name": "more"})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Revoked: refused at once; revoking again finds nothing.
    let id = made["id"].as_str().unwrap();
    let revoke = || {
        client()
            .delete(format!("{base}/.kubedav/app-passwords/{id}"))
            .basic_auth(carol.0, Some(carol.1))
            .header("x-kubedav-request", "1")
            .send()
    };
    assert_eq!(revoke().await.unwrap().status(), StatusCode::NO_CONTENT);
    assert_eq!(
        status_with(&server.url("/docs/r.txt"), "GET", "carol", &writer).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(revoke().await.unwrap().status(), StatusCode::NOT_FOUND);
    assert_eq!(
        status_with(&server.url("/docs/r.txt"), "GET", "carol", &reader_password).await,
        StatusCode::OK
    );
    // The records are where no WebDAV path reaches.
    if common::backend() == Backend::Volume {
        assert!(server.disk(".kubedav/app-passwords").is_dir());
    }
}

/// Two gateways over one storage, each with its own auth (microservices) or each a
/// whole process (all-in-one, sharing locks through Redis), as replicas run.
struct Fleet {
    processes: Vec<Process>,
    gateways: [SocketAddr; 2],
}

async fn fleet(mode: Mode, redis: &RedisServer, dir: &Path) -> Fleet {
    let users = users_file(dir, &[("carol", "carol-password")]);
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let envs: Vec<(String, String)> = vec![
        ("KUBEDAV_SECRET_KEY".into(), SECRET_KEY.into()),
        ("KUBEDAV_LOCK_STORE".into(), redis.url(0)),
        ("KUBEDAV_USERS_FILE".into(), users.display().to_string()),
        ("KUBEDAV_ROOT".into(), root.display().to_string()),
    ];
    let mut processes = Vec::new();
    let mut gateways = Vec::new();
    match mode {
        Mode::AllInOne => {
            for name in ["all-a", "all-b"] {
                let args: Vec<String> = ["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"]
                    .map(String::from)
                    .to_vec();
                let mut process = Process::spawn(name, &args, &envs);
                gateways.push(process.listening("gateway HTTP").await);
                process.listening("all admin").await;
                processes.push(process);
            }
        }
        Mode::Microservices => {
            let (fileio, fileio_grpc, _) = start_service("fileio", "fileio", &[], &envs).await;
            let (locks, locks_grpc, _) = start_service("locks", "locks", &[], &envs).await;
            processes.extend([fileio, locks]);
            for (auth_name, gateway_name) in [("auth-a", "gateway-a"), ("auth-b", "gateway-b")] {
                let fileio_url = format!("http://{fileio_grpc}");
                let (auth, auth_grpc, _) = start_service(
                    auth_name,
                    "auth",
                    &["--fileio-url".into(), fileio_url.clone()],
                    &envs,
                )
                .await;
                let args = [
                    "--fileio-url".to_owned(),
                    fileio_url,
                    "--locks-url".into(),
                    format!("http://{locks_grpc}"),
                    "--auth-url".into(),
                    format!("http://{auth_grpc}"),
                    "--markdown-url".into(),
                    String::new(),
                ];
                let (gateway, http, _) = start_gateway(gateway_name, &args, &envs).await;
                gateways.push(http);
                processes.extend([auth, gateway]);
            }
        }
    }
    Fleet {
        processes,
        gateways: [gateways[0], gateways[1]],
    }
}

async fn davfs2_and_cadaver_use_one_and_every_gateway_drops_it_within_a_second(mode: Mode) {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut fleet = fleet(mode, &redis, dir.path()).await;
    let [a, b] = fleet.gateways.map(|addr| format!("http://{addr}"));
    let carol = ("carol", "carol-password");
    let (status, made) = create(&a, carol, json!({"name": "davfs2 and cadaver"})).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let password = made["password"].as_str().unwrap().to_owned();
    let (_, kept) = create(&b, carol, json!({"name": "kept through restarts"})).await;
    let kept = kept["password"].as_str().unwrap().to_owned();

    // davfs2 through gateway b writes a file; cadaver through gateway a reads it back.
    let mount_dir = tempfile::tempdir().unwrap();
    let mounted = davfs2_mount(&format!("{b}/"), mount_dir.path(), Some(("carol", &password))).await;
    std::fs::write(mounted.0.join("from-davfs2.txt"), b"written through davfs2").unwrap();
    run("umount", &[mounted.0.to_str().unwrap()], None).await;
    std::mem::forget(mounted);
    let fetched = dir.path().join("fetched.txt");
    let netrc = dir.path().join(".netrc");
    std::fs::write(
        &netrc,
        format!("machine 127.0.0.1\nlogin carol\npassword {password}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&netrc, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let script = format!("get from-davfs2.txt {}\nquit\n", fetched.display());
    let output = cadaver(&format!("{a}/"), &script, dir.path()).await;
    assert!(output.contains("succeeded"), "{output}");
    assert_eq!(std::fs::read(&fetched).unwrap(), b"written through davfs2");

    // Both gateways accept it (each has read its record); revoked through a, it is
    // refused through a at once and through b within a second.
    for gateway in [&a, &b] {
        assert_eq!(
            status_with(&format!("{gateway}/"), "PROPFIND", "carol", &password)
                .await
                .as_u16(),
            207
        );
    }
    let id = made["id"].as_str().unwrap();
    let revoked = client()
        .delete(format!("{a}/.kubedav/app-passwords/{id}"))
        .basic_auth(carol.0, Some(carol.1))
        .header("x-kubedav-request", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
    let at = Instant::now();
    assert_eq!(
        status_with(&format!("{a}/"), "PROPFIND", "carol", &password).await,
        StatusCode::UNAUTHORIZED
    );
    loop {
        let status = status_with(&format!("{b}/"), "PROPFIND", "carol", &password).await;
        if status == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            at.elapsed() < Duration::from_secs(1),
            "gateway b still accepts it after {:?}",
            at.elapsed()
        );
    }
    eprintln!(
        "revocation held through the other gateway after {:?}",
        at.elapsed()
    );
    let output = cadaver_may_fail(&format!("{a}/"), &script, dir.path()).await;
    assert!(!output.contains("succeeded"), "cadaver still got in: {output}");

    // Redis loses everything and every process restarts: the app password is still there.
    run("redis-cli", &["-u", &redis.url(0), "FLUSHALL"], None).await;
    for process in &mut fleet.processes {
        process.restart().await;
    }
    for gateway in [&a, &b] {
        assert_eq!(
            status_with(&format!("{gateway}/from-davfs2.txt"), "GET", "carol", &kept).await,
            StatusCode::OK
        );
        assert_eq!(
            status_with(&format!("{gateway}/"), "PROPFIND", "carol", &password).await,
            StatusCode::UNAUTHORIZED
        );
    }
}

/// cadaver on `url` with credentials from `home`'s `.netrc`; its output.
async fn cadaver(url: &str, script: &str, home: &Path) -> String {
    let home = home.display().to_string();
    run("env", &[&format!("HOME={home}"), "cadaver", url], Some(script)).await
}

/// [`cadaver`], whose failure is the point.
async fn cadaver_may_fail(url: &str, script: &str, home: &Path) -> String {
    let output = tokio::process::Command::new("cadaver")
        .arg(url)
        .env("HOME", home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = output;
    use tokio::io::AsyncWriteExt;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(script.as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The file manager's page of app passwords in headless Chromium
/// (`tests/clients/browser_app_passwords.py`): made from the listing's link, one that
/// writes and one that reads, each secret read off the page, the second revoked with its
/// button; the first then writes with Basic, the second is refused (screenshots kept).
async fn the_file_manager_makes_and_revokes_app_passwords(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("carol", "carol-password")]);
    let envs = [("KUBEDAV_SECRET_KEY", SECRET_KEY)];
    let server = Server::start_auth(mode, Some(&users), &[], &[], &envs).await;
    let python = common::tools::tool_python("KUBEDAV_BROWSER_PYTHON", "need-browser.sh");
    let shots = match std::env::var("KUBEDAV_SCREENSHOTS") {
        Ok(shots) => std::path::PathBuf::from(shots),
        Err(_) => dir.path().to_owned(),
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/browser_app_passwords.py"
    );
    let url = server.url("");
    let output = run(
        &python,
        &[
            script,
            url.trim_end_matches('/'),
            shots.to_str().unwrap(),
            "carol",
            "carol-password",
        ],
        None,
    )
    .await;
    assert!(output.contains("app passwords ok"), "{output}");
    let secret = |kind: &str| {
        output
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{kind}: ")))
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        status_with(&server.url("/laptop.txt"), "PUT", "carol", &secret("write")).await,
        StatusCode::CREATED
    );
    assert_eq!(
        status_with(&server.url("/"), "PROPFIND", "carol", &secret("read")).await,
        StatusCode::UNAUTHORIZED
    );
    assert!(shots.join("app-passwords-made.png").exists() && shots.join("app-passwords-list.png").exists());
}

in_both_modes!(
    made_listed_scoped_and_revoked_through_the_api,
    davfs2_and_cadaver_use_one_and_every_gateway_drops_it_within_a_second,
    the_file_manager_makes_and_revokes_app_passwords,
);
on_s3!(made_listed_scoped_and_revoked_through_the_api);
