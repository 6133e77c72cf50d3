//! `kubedav smoke`, the test `helm test` runs: it passes against both modes (with the
//! gateway finding its services by name, balanced, as over a headless Service), and fails
//! with a clear message when it cannot write.

mod common;

use common::{Mode, Server, start_gateway, start_service};

fn smoke(url: &str, envs: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_kubedav"))
        .arg("smoke")
        .arg(url)
        .env_remove("KUBEDAV_SMOKE_USER")
        .env_remove("KUBEDAV_SMOKE_PASSWORD")
        .envs(envs.iter().copied())
        .output()
        .expect("kubedav smoke runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_passes_all_in_one() {
    let server = Server::start(Mode::AllInOne).await;
    let out = smoke(&server.url("/"), &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for step in [
        "MKCOL", "PUT", "PROPFIND", "GET", "LOCK", "-> 423", "UNLOCK", "DELETE",
    ] {
        assert!(stdout.contains(step), "{step} missing from {stdout}");
    }
    let left: Vec<String> = common::names_in(&server.root);
    assert!(left.is_empty(), "the smoke test cleans up after itself: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_passes_with_services_found_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = vec!["--root".to_owned(), dir.path().display().to_string()];
    let (_fileio, fileio, _) = start_service("fileio", "fileio", &root, &[]).await;
    let (_locks, locks, _) = start_service("locks", "locks", &[], &[]).await;
    let args = vec![
        "--fileio-url".to_owned(),
        format!("http://localhost:{}", fileio.port()),
        "--locks-url".to_owned(),
        format!("http://localhost:{}", locks.port()),
        "--markdown-url".to_owned(),
        String::new(),
    ];
    let (mut gateway, http, _) = start_gateway("gateway", &args, &[]).await;
    let out = smoke(&format!("http://{http}/"), &[]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let line = gateway.logged("gRPC backends changed host=localhost").await;
    assert!(line.contains("backends="), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_says_what_to_do_without_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("alice", "pw")]);
    let server = Server::start_auth(Mode::AllInOne, Some(&users), &[], &[], &[]).await;
    let out = smoke(&server.url("/"), &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("401") && stderr.contains("KUBEDAV_SMOKE_USER"),
        "{stderr}"
    );
    let out = smoke(
        &server.url("/"),
        &[("KUBEDAV_SMOKE_USER", "alice"), ("KUBEDAV_SMOKE_PASSWORD", "pw")],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
