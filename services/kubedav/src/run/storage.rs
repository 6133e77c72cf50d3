//! The storage a target serves: a volume (`--root`) or a bucket (`--storage`), its
//! quotas, the records kept with its data, and its trash and versions.

use super::{RunError, policy};
use crate::cli::Cli;
use kubedav_api::fileio::FileIo;
use kubedav_api::keep::Keep;
use kubedav_api::path::VolumePath;
use kubedav_api::records::Records;
use kubedav_api::uploads::Uploads;
use kubedav_fileio::keep::Keeping;
use kubedav_fileio::quota::{Kept, QuotaFileIo, QuotaRoots, WholeTree};
use kubedav_fileio::{LocalFileIo, ObjectFileIo};
use kubedav_kit::admin::ReadinessCheck;
use std::sync::Arc;
use std::time::Duration;

/// What `--storage` or `--root` names: the fileio core (with its quotas), the records
/// kept with the data, the trash and versions, and the readiness check.
pub(super) struct Storage {
    /// The files.
    pub fileio: Arc<dyn FileIo>,
    /// The records (app passwords, ...), in the same volume or bucket.
    pub records: Arc<dyn Records>,
    /// The trash and versions, where they are kept (a volume with
    /// `--trash-retention-days` or `--versions-max`).
    pub keep: Option<Arc<dyn Keep>>,
    /// The same, as the quotas count it and make room from it.
    pub kept: Option<Arc<dyn Kept>>,
    /// Uploads in many requests, kept with the data (on a volume or in a bucket).
    pub uploads: Arc<dyn Uploads>,
    /// Whether the storage answers.
    pub ready: ReadinessCheck,
}

/// The storage `--storage` or `--root` names.
pub(super) async fn open_storage(cli: &Cli) -> Result<Storage, RunError> {
    let roots: Option<Arc<dyn QuotaRoots>> = match &cli.auth.policy {
        Some(file) => {
            policy::quotas(file, cli.fileio.quota_bytes)?.map(|quotas| quotas as Arc<dyn QuotaRoots>)
        }
        None => None,
    };
    let roots = roots.or_else(|| {
        let limit = cli.fileio.quota_bytes?;
        tracing::info!(target: "kubedav", "a quota of {limit} bytes on the served root");
        Some(Arc::new(WholeTree(limit)) as Arc<dyn QuotaRoots>)
    });
    let storage = open_backend(cli, keeping(cli, roots.clone())).await?;
    let Some(roots) = roots else {
        return Ok(storage);
    };
    let period = Duration::from_secs(cli.fileio.quota_rescan_seconds);
    let mut quota = QuotaFileIo::with_roots(storage.fileio, roots, period);
    if let Some(kept) = storage.kept.clone() {
        quota = quota.keeping(kept);
    }
    Ok(Storage {
        fileio: Arc::new(quota),
        ..storage
    })
}

/// What deletes and overwrites keep, as the flags say, each counted in the innermost
/// quota root of its path (the whole tree's without quotas).
fn keeping(cli: &Cli, roots: Option<Arc<dyn QuotaRoots>>) -> Keeping {
    let days = |days: u64| Duration::from_secs(days.saturating_mul(86_400));
    let fileio = &cli.fileio;
    Keeping {
        trash_for: (fileio.trash_retention_days > 0).then(|| days(fileio.trash_retention_days)),
        versions_max: fileio.versions_max,
        versions_for: days(fileio.versions_retention_days),
        root_of: Arc::new(move |path: &VolumePath| {
            roots
                .as_ref()
                .and_then(|roots| roots.roots_of(path).pop())
                .map_or_else(VolumePath::root, |root| root.path)
        }),
        ..Keeping::defaults()
    }
}

/// The storage backend: a bucket with --storage, else the volume at --root.
async fn open_backend(cli: &Cli, keeping: Keeping) -> Result<Storage, RunError> {
    if let Some(location) = &cli.fileio.storage {
        let mut storage =
            kubedav_fileio::objects::config::from_env(location, |name| std::env::var(name).ok())
                .map_err(RunError::Storage)?;
        storage.sweep.idle = std::time::Duration::from_secs(cli.fileio.abandoned_upload_seconds);
        let keeps = keeping.trashes() || keeping.versions();
        let core = ObjectFileIo::open(&storage)
            .await
            .map_err(RunError::Storage)?
            .with_keeping(keeping)
            .with_uploads(upload_settings(cli));
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
        let keep = keeps.then(|| Arc::new(core.keep()));
        return Ok(Storage {
            records: Arc::new(core.records()),
            keep: keep.clone().map(|keep| keep as Arc<dyn Keep>),
            kept: keep.map(|keep| keep as Arc<dyn Kept>),
            uploads: Arc::new(core.uploads()),
            fileio: Arc::new(core),
            ready,
        });
    }
    let keeps = keeping.trashes() || keeping.versions();
    let mut core = open_volume(cli)?
        .with_keeping(keeping)
        .with_uploads(upload_settings(cli));
    // Gateways of their own may write large bodies into the volume (--fileio-incoming).
    if cli.target == crate::cli::Target::Fileio {
        core = core.with_incoming_area();
    }
    let checked = core.clone();
    let ready: ReadinessCheck = Arc::new(move || {
        let core = checked.clone();
        Box::pin(async move { core.check() })
    });
    let keep = keeps.then(|| Arc::new(core.keep()));
    Ok(Storage {
        records: Arc::new(core.records()),
        keep: keep.clone().map(|keep| keep as Arc<dyn Keep>),
        kept: keep.map(|keep| keep as Arc<dyn Kept>),
        uploads: Arc::new(core.uploads()),
        fileio: Arc::new(core),
        ready,
    })
}

/// How uploads in many requests are kept, as the flags say.
fn upload_settings(cli: &Cli) -> kubedav_fileio::uploads::UploadSettings {
    kubedav_fileio::uploads::UploadSettings {
        expiry: Duration::from_secs(cli.fileio.upload_expiry_hours.saturating_mul(3600)),
        per_owner: cli.fileio.uploads_per_user,
        ..Default::default()
    }
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
