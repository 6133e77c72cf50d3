//! Real client programs the suites run: any program with its output checked
//! ([`run`]), davfs2 mounts ([`davfs2_mount`]), and the Pythons of the tools cache
//! ([`tool`]: webdav4's, the browser tests').

use std::path::Path;
use tokio::process::Command;

/// Runs `program` with `args` (stdin from `input`); its stdout and stderr, together.
/// Panics, with the output, if it fails.
pub(crate) async fn run(program: &str, args: &[&str], input: Option<&str>) -> String {
    let (success, text) = run_status(program, args, input).await;
    assert!(success, "{program} {args:?} failed:\n{text}");
    text
}

/// Runs `program` with `args` (stdin from `input`): whether it succeeded, and its stdout
/// and stderr together (for a run whose failure may be the point).
pub(crate) async fn run_status(program: &str, args: &[&str], input: Option<&str>) -> (bool, String) {
    use tokio::io::AsyncWriteExt;
    let mut child = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}): `make test` installs it"));
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        stdin.write_all(input.as_bytes()).await.unwrap();
    }
    drop(stdin);
    let output = tokio::time::timeout(std::time::Duration::from_secs(300), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{program} {args:?} did not finish in 5 minutes"))
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Unmounts a davfs2 mount when dropped (lazily, if a test failed while it was busy).
pub(crate) struct Mounted(pub std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Mounts `url` with davfs2 under `dir`, with `credentials` (user, password) if given.
/// davfs2 drops to its own user, which must reach its cache and write into it.
pub(crate) async fn davfs2_mount(url: &str, dir: &Path, credentials: Option<(&str, &str)>) -> Mounted {
    davfs2_try_mount(url, dir, credentials)
        .await
        .unwrap_or_else(|output| panic!("mount.davfs failed:\n{output}"))
}

/// [`davfs2_mount`], whose refusal may be the point: mount.davfs's output when it fails.
pub(crate) async fn davfs2_try_mount(
    url: &str,
    dir: &Path,
    credentials: Option<(&str, &str)>,
) -> Result<Mounted, String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (mount, cache, conf, secrets) = (
        dir.join("mnt"),
        dir.join("cache"),
        dir.join("davfs2.conf"),
        dir.join("secrets"),
    );
    std::fs::create_dir(&mount).unwrap();
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let credentials = credentials.map(|(user, password)| format!("{url} {user} {password}\n"));
    std::fs::write(&secrets, credentials.unwrap_or_default()).unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(
        &conf,
        format!(
            "ask_auth 0\ncache_dir {}\nuse_locks 1\ndelay_upload 0\nsecrets {}\n",
            cache.display(),
            secrets.display()
        ),
    )
    .unwrap();
    let option = format!("conf={}", conf.display());
    let (mounted, output) = run_status(
        "mount.davfs",
        &[url, mount.to_str().unwrap(), "-o", &option],
        Some(""),
    )
    .await;
    if mounted { Ok(Mounted(mount)) } else { Err(output) }
}

/// The program a client test runs (a Python with the client installed, or a client
/// built at a pinned version): `variable` when `make test` set it, else what the script
/// `need` in scripts/ installs and prints.
pub(crate) fn tool(variable: &str, need: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| {
        let script = format!("{}/../../scripts/{need}", env!("CARGO_MANIFEST_DIR"));
        let output = std::process::Command::new("bash")
            .arg(&script)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    })
}
