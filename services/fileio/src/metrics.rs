//! fileio's own Prometheus metrics (in the process's one registry, `kubedav_metrics`).

use crate::volume::Volume;
use kubedav_metrics::{Counter, CounterFamily, HistogramFamily};
use std::sync::{Arc, LazyLock};

static READ_BYTES: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter(
        "kubedav_fileio_read_bytes_total",
        "File bytes read from the volume.",
    )
});
static WRITTEN_BYTES: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter(
        "kubedav_fileio_written_bytes_total",
        "File bytes written to the volume (before commit).",
    )
});
static SCANS: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_fileio_scans_total",
        "Listings of a collection's members (Depth 1 and infinity) started, by how they gather \
         metadata (io_uring, fallback, s3).",
        &["path"],
    )
});
static SCAN_BATCH: LazyLock<HistogramFamily> = LazyLock::new(|| {
    HistogramFamily::new(
        "kubedav_fileio_scan_batch_entries",
        "Entries whose metadata a listing gathers in one step: up to 256 of a directory's \
         entries, in one io_uring submission or with a statx call each (fallback).",
        &["path"],
        &kubedav_metrics::exponential_buckets(1.0, 4.0, 7),
    )
});

/// How a listing gathers its entries' metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanPath {
    /// statx requests batched through io_uring.
    IoUring,
    /// One statx system call per entry.
    Fallback,
    /// Listings of an S3 bucket (ListObjectsV2).
    ObjectStore,
}

impl ScanPath {
    fn label(self) -> &'static str {
        match self {
            ScanPath::IoUring => "io_uring",
            ScanPath::Fallback => "fallback",
            ScanPath::ObjectStore => "s3",
        }
    }
}

/// Starts the listing series of both paths at zero.
pub fn register() {
    for path in [ScanPath::IoUring, ScanPath::Fallback, ScanPath::ObjectStore] {
        SCANS.with_label_values(&[path.label()]);
        SCAN_BATCH.with_label_values(&[path.label()]);
    }
    for reason in ["age", "count", "quota", "space", "user", "admin"] {
        PURGES.with_label_values(&[reason]);
    }
    for event in ["created", "expired"] {
        UPLOADS.with_label_values(&[event]);
    }
    // Nothing kept yet (or ever, without a trash and versions): the whole tree at zero.
    kept(&std::collections::BTreeMap::new());
}

/// Counts a listing started on `path`.
pub fn scan(path: ScanPath) {
    SCANS.with_label_values(&[path.label()]).inc();
}

/// Records one step of a listing on `path` that gathered `entries` entries.
pub fn scan_batch(path: ScanPath, entries: usize) {
    SCAN_BATCH
        .with_label_values(&[path.label()])
        .observe(entries as f64);
}

static S3_REQUESTS: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_fileio_s3_requests_total",
        "Requests to the S3 server, by S3 action (GetObject, ListObjectsV2, ...) and outcome \
         (ok, refused: any answer but a success, failed: no answer).",
        &["action", "outcome"],
    )
});

/// Counts one request of `action` to the S3 server and its `outcome`.
pub fn s3_request(action: &'static str, outcome: &'static str) {
    S3_REQUESTS.with_label_values(&[action, outcome]).inc();
}

static PURGES: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_fileio_purges_total",
        "Trash items and versions removed, by why: age (the retention), count (a file's \
         versions past --versions-max), quota (a write needed its root's room), space (a \
         write found the volume full), user (a DELETE in the trash), admin (an \
         administrator emptied a root's trash).",
        &["reason"],
    )
});

/// Counts `n` trash items or versions removed for `reason` (`age`, `count`, `quota`,
/// `space`, `user`, `admin`).
pub fn purged(reason: &'static str, n: u64) {
    PURGES.with_label_values(&[reason]).inc_by(n);
}

static UPLOADS: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_fileio_uploads_total",
        "Uploads in many requests (TUS, Nextcloud chunking), by event: created, expired \
         (removed unfinished, --upload-expiry-hours after their last data), reread (a \
         landing read every byte again for a checksum its requests did not carry).",
        &["event"],
    )
});

/// Counts `n` uploads created.
pub fn uploads_created(n: u64) {
    UPLOADS.with_label_values(&["created"]).inc_by(n);
}

/// Counts `n` unfinished uploads removed by their expiry.
pub fn uploads_expired(n: u64) {
    UPLOADS.with_label_values(&["expired"]).inc_by(n);
}

/// Counts a landing that read its upload's bytes again for a checksum.
pub fn upload_reread() {
    UPLOADS.with_label_values(&["reread"]).inc();
}

/// Counts bytes read.
pub fn read_bytes(n: u64) {
    READ_BYTES.inc_by(n);
}

/// Counts bytes written.
pub fn written_bytes(n: u64) {
    WRITTEN_BYTES.inc_by(n);
}

/// Reports `volume`'s size and free space on /metrics, read (`statvfs`) at every scrape:
/// `kubedav_fileio_volume_size_bytes` and `kubedav_fileio_volume_available_bytes` (what
/// an unprivileged writer can still use). The first volume a process opens is the one
/// reported (a process serves one).
pub fn report_capacity(volume: Arc<Volume>) {
    static REPORTED: std::sync::Once = std::sync::Once::new();
    REPORTED.call_once(|| {
        kubedav_metrics::register_scraped_gauges(move || {
            let Ok(vfs) = rustix::fs::fstatvfs(volume.root_fd()) else {
                return Vec::new();
            };
            let bytes = |blocks: u64| i64::try_from(blocks.saturating_mul(vfs.f_frsize)).unwrap_or(i64::MAX);
            vec![
                (
                    "kubedav_fileio_volume_size_bytes",
                    "Size of the served volume's file system.",
                    bytes(vfs.f_blocks),
                ),
                (
                    "kubedav_fileio_volume_available_bytes",
                    "Bytes still available to kubedav on the served volume's file system.",
                    bytes(vfs.f_bavail),
                ),
            ]
        })
    });
}

static KEPT: LazyLock<[kubedav_metrics::GaugeFamily; 4]> = LazyLock::new(|| {
    let family = |name: &str, help: &str| kubedav_metrics::GaugeFamily::new(name, help, &["root"]);
    [
        family(
            "kubedav_fileio_trash_items",
            "Trash items, by quota root (\"\" for the whole tree), as the last retention pass found them.",
        ),
        family(
            "kubedav_fileio_trash_bytes",
            "Bytes of the trash items (their files and versions), by quota root, as the last retention pass found them.",
        ),
        family(
            "kubedav_fileio_versions",
            "Versions of files, by the quota root of their file, as the last retention pass found them.",
        ),
        family(
            "kubedav_fileio_version_bytes",
            "Bytes of the versions of files, by the quota root of their file, as the last retention pass found them.",
        ),
    ]
});

/// What is kept in one quota root.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeptFigures {
    /// Trash items.
    pub items: u64,
    /// Their bytes.
    pub item_bytes: u64,
    /// Versions.
    pub versions: u64,
    /// Their bytes.
    pub version_bytes: u64,
}

/// Sets the gauges of what is kept to `by_root` (roots not in it are dropped). The whole
/// tree's series (`root=""`) stays, at zero when nothing is kept there: a family with no
/// series is not exported at all, and dashboards and alerts would see no data.
pub fn kept(by_root: &std::collections::BTreeMap<String, KeptFigures>) {
    for family in KEPT.iter() {
        family.clear();
    }
    let nothing = (String::new(), KeptFigures::default());
    let whole_tree = (!by_root.contains_key("")).then_some((&nothing.0, &nothing.1));
    for (root, figures) in by_root.iter().chain(whole_tree) {
        let values = [
            figures.items,
            figures.item_bytes,
            figures.versions,
            figures.version_bytes,
        ];
        for (family, value) in KEPT.iter().zip(values) {
            family
                .with_label_values(&[root])
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A retention pass that finds nothing kept leaves the whole tree's series at zero:
    /// with none, the families vanish from /metrics, and the fileio dashboard's panel
    /// had no data (seen with the trash on by default).
    #[test]
    fn nothing_kept_still_exports_the_whole_tree_at_zero() {
        kept(&std::collections::BTreeMap::from([(
            "home/alice".to_owned(),
            KeptFigures {
                items: 2,
                ..KeptFigures::default()
            },
        )]));
        kept(&std::collections::BTreeMap::new());
        let text = kubedav_metrics::encode(false).unwrap();
        for family in [
            "kubedav_fileio_trash_items",
            "kubedav_fileio_trash_bytes",
            "kubedav_fileio_versions",
            "kubedav_fileio_version_bytes",
        ] {
            assert!(
                text.contains(&format!("{family}{{root=\"\"}} 0")),
                "{family}: {text}"
            );
        }
        assert!(
            !text.contains("home/alice"),
            "a root with nothing left is dropped"
        );
    }
}
