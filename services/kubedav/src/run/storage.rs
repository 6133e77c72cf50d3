//! The storage a target serves: a volume (`--root`) or a bucket (`--storage`), its
//! quotas, and the records kept with its data.

use super::{RunError, policy};
use crate::cli::Cli;
use kubedav_api::fileio::FileIo;
use kubedav_api::records::Records;
use kubedav_fileio::{LocalFileIo, ObjectFileIo};
use kubedav_kit::admin::ReadinessCheck;
use std::sync::Arc;
use std::time::Duration;

/// What `--storage` or `--root` names: the fileio core (with its quotas), the records
/// kept with the data, and the readiness check.
pub(super) struct Storage {
    /// The files.
    pub fileio: Arc<dyn FileIo>,
    /// The records (app passwords, ...), in the same volume or bucket.
    pub records: Arc<dyn Records>,
    /// Whether the storage answers.
    pub ready: ReadinessCheck,
}

/// The storage `--storage` or `--root` names.
pub(super) async fn open_storage(cli: &Cli) -> Result<Storage, RunError> {
    let Storage {
        fileio,
        records,
        ready,
    } = open_backend(cli).await?;
    let (core, ready) = (fileio, ready);
    let period = Duration::from_secs(cli.fileio.quota_rescan_seconds);
    if let Some(file) = &cli.auth.policy
        && let Some(roots) = policy::quotas(file, cli.fileio.quota_bytes)?
    {
        return Ok(Storage {
            fileio: Arc::new(kubedav_fileio::quota::QuotaFileIo::with_roots(
                core, roots, period,
            )),
            records,
            ready,
        });
    }
    let Some(limit) = cli.fileio.quota_bytes else {
        return Ok(Storage {
            fileio: core,
            records,
            ready,
        });
    };
    tracing::info!(target: "kubedav", "a quota of {limit} bytes on the served root");
    Ok(Storage {
        fileio: Arc::new(kubedav_fileio::quota::QuotaFileIo::new(core, limit, period)),
        records,
        ready,
    })
}

/// The storage backend: a bucket with --storage, else the volume at --root.
async fn open_backend(cli: &Cli) -> Result<Storage, RunError> {
    if let Some(location) = &cli.fileio.storage {
        let mut storage =
            kubedav_fileio::objects::config::from_env(location, |name| std::env::var(name).ok())
                .map_err(RunError::Storage)?;
        storage.sweep.idle = std::time::Duration::from_secs(cli.fileio.abandoned_upload_seconds);
        let core = ObjectFileIo::open(&storage).await.map_err(RunError::Storage)?;
        tracing::info!(
            target: "kubedav",
            "serving s3://{}/{} at {}",
            storage.s3.bucket,
            storage.prefix,
            storage.s3.endpoint
        );
        let checked = core.clone();
        let ready: ReadinessCheck = Arc::new(move || {
            let core = checked.clone();
            Box::pin(async move { core.check().await })
        });
        return Ok(Storage {
            records: Arc::new(core.records()),
            fileio: Arc::new(core),
            ready,
        });
    }
    let core = open_volume(cli)?;
    let checked = core.clone();
    let ready: ReadinessCheck = Arc::new(move || {
        let core = checked.clone();
        Box::pin(async move { core.check() })
    });
    Ok(Storage {
        records: Arc::new(core.records()),
        fileio: Arc::new(core),
        ready,
    })
}

/// The volume core `--root` names.
pub(super) fn open_volume(cli: &Cli) -> Result<LocalFileIo, RunError> {
    let fileio = &cli.fileio;
    let core = LocalFileIo::open_with(&fileio.root, fileio.durability.into())
        .map_err(RunError::Root)?
        .with_file_cache(fileio.file_cache_mib.saturating_mul(1024 * 1024));
    tracing::info!(target: "kubedav", "serving {}", fileio.root.display());
    kubedav_fileio::uring::set_scans_enabled(fileio.io_uring_scans);
    if fileio.io_uring_scans && !kubedav_fileio::uring::scans_enabled() {
        tracing::warn!(target: "kubedav", "--io-uring-scans is on but io_uring is unavailable: listings use one statx per member");
    }
    Ok(core)
}
