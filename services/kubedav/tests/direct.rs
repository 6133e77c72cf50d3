//! Large files sent from the gateway's own mount of fileio's volume (`--fileio-volume`,
//! microservices mode on a volume): the bytes, ranges and headers are fileio's, a file
//! is sent from the mount only once fileio has named the very version opened there, and
//! a mount that shows other files is never trusted. On a bucket there is no volume to
//! mount, so these cases run on the volume backend only.

#[macro_use]
mod common;

use common::{Backend, Mode, Server, client, eventually_async};
use reqwest::StatusCode;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Sent from the mount, and opened there but sent by fileio.
const SENT: &str = "kubedav_gateway_direct_reads_total";
const DECLINED: &str = "kubedav_gateway_direct_reads_declined_total";

/// A file no gateway keeps (over `MAX_FILE_BYTES`, 1 MiB), of bytes that differ with
/// their position and with `seed`.
fn patterned(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// `source` bind-mounted read only on a fresh directory, unmounted when dropped.
struct ReadOnlyMount(tempfile::TempDir);

impl ReadOnlyMount {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn bind(&self, source: &Path) {
        let run = |args: &[&str]| {
            let status = std::process::Command::new("mount")
                .args(args)
                .arg(source)
                .arg(self.path())
                .status()
                .unwrap();
            assert!(status.success(), "mount {args:?} (needs root)");
        };
        run(&["--bind"]);
        let status = std::process::Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(self.path())
            .status()
            .unwrap();
        assert!(status.success(), "remounting read only");
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.path())
            .status();
    }
}

async fn put(server: &Server, path: &str, body: Vec<u8>) {
    let response = client().put(server.url(path)).body(body).send().await.unwrap();
    assert!(
        response.status().is_success(),
        "PUT {path}: {}",
        response.status()
    );
}

/// A GET's status, the headers a client compares, and the body.
async fn get(server: &Server, path: &str, range: Option<&str>) -> (StatusCode, Vec<String>, Vec<u8>) {
    let mut request = client().get(server.url(path));
    if let Some(range) = range {
        request = request.header("range", range);
    }
    let response = request.send().await.unwrap();
    let headers = [
        "etag",
        "last-modified",
        "content-length",
        "content-type",
        "content-range",
    ]
    .iter()
    .map(|name| {
        let value = response
            .headers()
            .get(*name)
            .map(|v| v.to_str().unwrap().to_owned());
        format!("{name}: {}", value.unwrap_or_default())
    })
    .collect();
    (
        response.status(),
        headers,
        response.bytes().await.unwrap().to_vec(),
    )
}

async fn gateway_metric(server: &Server, name: &str) -> f64 {
    common::metric_sum(server.admin_of("gateway"), name).await
}

/// Once fileio names the version the gateway opened (its change time settled, 1 s after
/// the PUT), a large GET is sent from the mount: the same bytes, ranges and headers as
/// fileio sent before. A new version put over it is what the next GET sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_files_are_sent_from_the_gateways_mount_as_fileio_would() {
    if common::backend() != Backend::Volume {
        return;
    }
    let mount = ReadOnlyMount::new();
    let mount_arg = mount.path().to_str().unwrap().to_owned();
    let server = Server::start_prepared(Mode::Microservices, &["--fileio-volume", &mount_arg], &|root| {
        mount.bind(root)
    })
    .await;
    let data = patterned(3 << 20, 1);
    let made = client()
        .request(
            reqwest::Method::from_bytes(b"MKCOL").unwrap(),
            server.url("/photos/"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    put(&server, "/photos/big.bin", data.clone()).await;
    // Before fileio can name the version (its change time has not settled), fileio
    // sends the file: these are the answers to compare with.
    let (status, fileio_headers, body) = get(&server, "/photos/big.bin", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body == data, "fileio's answer: other bytes");
    let range = "bytes=1000-2000999";
    let (status, fileio_range_headers, _) = get(&server, "/photos/big.bin", Some(range)).await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        gateway_metric(&server, SENT).await,
        0.0,
        "sent from the mount before fileio named it"
    );

    let sent_from_mount = eventually_async(Duration::from_secs(10), || async {
        let (status, headers, body) = get(&server, "/photos/big.bin", None).await;
        assert_eq!((status, &headers), (StatusCode::OK, &fileio_headers));
        assert!(body == data, "other bytes");
        gateway_metric(&server, SENT).await > 0.0
    })
    .await;
    assert!(
        sent_from_mount,
        "no GET was sent from the gateway's mount within 10 s"
    );
    let sent = gateway_metric(&server, SENT).await;
    let (status, headers, body) = get(&server, "/photos/big.bin", Some(range)).await;
    assert_eq!(
        (status, headers),
        (StatusCode::PARTIAL_CONTENT, fileio_range_headers)
    );
    assert!(
        body == data[1000..2_001_000],
        "the range from the mount: other bytes"
    );
    assert_eq!(
        gateway_metric(&server, SENT).await,
        sent + 1.0,
        "the range was not sent from the mount"
    );

    let newer = patterned(3 << 20, 2);
    put(&server, "/photos/big.bin", newer.clone()).await;
    let (status, _, body) = get(&server, "/photos/big.bin", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body == newer, "the GET after a PUT sent the old version");
    assert_eq!(gateway_metric(&server, DECLINED).await, 0.0);
}

/// A mount that shows other files than fileio's (another volume, a stale copy) is never
/// trusted: the same name with other bytes of the same size, even once settled, is
/// opened there but fileio names another version, so fileio sends its own bytes; after
/// 32 such GETs in a row the gateway warns and stops trying for a while.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_showing_other_files_is_not_trusted() {
    if common::backend() != Backend::Volume {
        return;
    }
    let elsewhere = tempfile::tempdir().unwrap();
    let impostor = patterned(3 << 20, 9);
    std::fs::write(elsewhere.path().join("doc.bin"), &impostor).unwrap();
    let data = patterned(3 << 20, 3);
    let at: PathBuf = elsewhere.path().to_owned();
    let server = Server::start_prepared(
        Mode::Microservices,
        &["--fileio-volume", at.to_str().unwrap()],
        &|root| std::fs::write(root.join("doc.bin"), &data).unwrap(),
    )
    .await;
    let declined = eventually_async(Duration::from_secs(10), || async {
        let (status, _, body) = get(&server, "/doc.bin", None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            body != impostor,
            "the gateway sent its mount's bytes, not fileio's"
        );
        assert!(body == data, "other bytes");
        gateway_metric(&server, DECLINED).await > 0.0
    })
    .await;
    assert!(declined, "the mount's file was never opened");
    // 32 declines in a row: the mount is left alone (for a minute), with a warning.
    let mut server = server;
    while gateway_metric(&server, DECLINED).await < 32.0 {
        let (_, _, body) = get(&server, "/doc.bin", None).await;
        assert!(body == data, "other bytes");
    }
    for _ in 0..4 {
        let (_, _, body) = get(&server, "/doc.bin", None).await;
        assert!(body == data, "other bytes");
    }
    assert_eq!(
        gateway_metric(&server, DECLINED).await,
        32.0,
        "the mount was not left alone"
    );
    assert_eq!(gateway_metric(&server, SENT).await, 0.0);
    let warning = server.process("gateway").logged("--fileio-volume:").await;
    assert!(warning.contains("is it the volume fileio serves"), "{warning}");
}

/// A gateway told of a mount it cannot open does not start, and says what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_mount_stops_the_gateway_with_advice() {
    let said = common::gateway_refusal(&["--fileio-volume", "/nonexistent/kubedav-volume"]);
    assert!(
        said.contains("--fileio-volume")
            && said.contains("/nonexistent/kubedav-volume")
            && said.contains("mount"),
        "{said}"
    );
}
