//! fileio's `Stat` of a path it resolved beneath the root before: while the path still
//! leads to the same unchanged inode, one `statx` answers (no `openat2` and `close`); a
//! path whose file was replaced is resolved again, and one now a symlink to a file out of
//! the root is resolved again and refused, as a fileio that never saw it refuses it.
//!
//! One test in this binary: it counts the process-wide
//! `kubedav_cache_lookups_total{cache="fileio_resolved"}` series, which other tests would
//! move too.

use kubedav_api::fileio::{FileIo, StatRequest};
use kubedav_fileio::LocalFileIo;
use std::path::Path;
use std::time::{Duration, SystemTime};

fn stat(path: &str) -> StatRequest {
    StatRequest {
        path: path.to_owned(),
    }
}

/// `(hits, misses)` of the cache of resolved paths so far.
fn lookups() -> (u64, u64) {
    (
        kubedav_metrics::cache_lookups("fileio_resolved", "hit").get(),
        kubedav_metrics::cache_lookups("fileio_resolved", "miss").get(),
    )
}

/// Waits until the change time of `path` lies further back than fileio's settling bound
/// (`cache::validity::SETTLED`, 1 s): only such an inode's resolution is remembered.
fn wait_until_settled(path: &Path) {
    let changed = std::fs::metadata(path).unwrap();
    let ctime = SystemTime::UNIX_EPOCH
        + Duration::new(
            std::os::unix::fs::MetadataExt::ctime(&changed) as u64,
            std::os::unix::fs::MetadataExt::ctime_nsec(&changed) as u32,
        );
    while SystemTime::now() < ctime + Duration::from_millis(1_050) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn a_stat_of_a_path_resolved_before_takes_one_statx_and_a_changed_path_is_resolved_again() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.txt");
    std::fs::write(&file, b"one").unwrap();
    wait_until_settled(&file);
    let fileio = LocalFileIo::open(dir.path()).unwrap();

    let (hits, misses) = lookups();
    let first = fileio.stat(stat("f.txt")).await.unwrap();
    assert_eq!(lookups(), (hits, misses + 1), "the first Stat resolves the path");
    let second = fileio.stat(stat("f.txt")).await.unwrap();
    assert_eq!(lookups(), (hits + 1, misses + 1), "the second is one statx");
    assert_eq!(second, first, "and answers the same");
    assert!(
        !second.validator.is_empty(),
        "with the validator of a settled file"
    );

    // Replaced: resolved again, and the answer is the new file's.
    std::fs::write(dir.path().join("g.txt"), b"three").unwrap();
    std::fs::rename(dir.path().join("g.txt"), &file).unwrap();
    let replaced = fileio.stat(stat("f.txt")).await.unwrap();
    assert_eq!(lookups(), (hits + 1, misses + 2));
    assert_eq!(replaced.size, 5);
    assert_ne!(replaced.etag, first.etag);

    // Now a symlink to a file out of the root: refused, as a path never resolved is,
    // though the path was remembered.
    wait_until_settled(&file);
    fileio.stat(stat("f.txt")).await.unwrap();
    fileio.stat(stat("f.txt")).await.unwrap();
    assert_eq!(lookups(), (hits + 2, misses + 3), "remembered again once settled");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), b"secret").unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), &file).unwrap();
    let escaped = fileio.stat(stat("f.txt")).await.unwrap_err();
    assert_eq!(lookups(), (hits + 2, misses + 4), "a miss");
    assert_eq!(escaped.code(), tonic::Code::PermissionDenied, "{escaped:?}");
    let fresh = LocalFileIo::open(dir.path()).unwrap();
    let never_resolved = fresh.stat(stat("f.txt")).await.unwrap_err();
    assert_eq!(escaped.code(), never_resolved.code());
    assert_eq!(escaped.message(), never_resolved.message());
}
