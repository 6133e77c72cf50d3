//! `--policy`: the access policy read, compiled, and the paths it names created; then
//! read again whenever the file changes ([`watch`]).

use super::RunError;
use kubedav_api::fileio::FileIo;
use kubedav_api::path::VolumePath;
use kubedav_fileio::quota::{QuotaRoots, Root};
use kubedav_gateway::Gateway;
use kubedav_policy::Policy;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How often the policy file is looked at: a change is in force within this and the
/// time to compile it (milliseconds for 10,000 rules).
const LOOK_EVERY: Duration = Duration::from_millis(500);

/// Reads and compiles the policy in `file`, and creates the paths it names.
pub(super) async fn load(file: &Path, fileio: Arc<dyn FileIo>) -> Result<Arc<Policy>, RunError> {
    let refuse = |reason: String| RunError::Policy {
        file: file.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(file).map_err(|e| refuse(e.to_string()))?;
    let policy = Arc::new(Policy::from_yaml(&text).map_err(|e| refuse(e.to_string()))?);
    create_named_paths(fileio, policy.clone())
        .await
        .map_err(|status| refuse(format!("creating the paths it names: {}", status.message())))?;
    tracing::info!(target: "kubedav", rules = policy.rule_count(), "access policy loaded from {}", file.display());
    Ok(policy)
}

/// Creates the paths the policy names. A fileio that cannot be reached yet (a gateway
/// starting before it) is tried again every second in the background; any other
/// refusal stops the start.
async fn create_named_paths(fileio: Arc<dyn FileIo>, policy: Arc<Policy>) -> Result<(), tonic::Status> {
    let unreachable = |status: &tonic::Status| {
        matches!(
            status.code(),
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
        )
    };
    match kubedav_gateway::access::create_named_paths(fileio.as_ref(), &policy).await {
        Err(status) if unreachable(&status) => {
            tracing::warn!(target: "kubedav", "fileio is not reachable yet; the policy's paths are created once it is: {}", status.message());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    match kubedav_gateway::access::create_named_paths(fileio.as_ref(), &policy).await {
                        Err(status) if unreachable(&status) => continue,
                        Err(status) => {
                            tracing::error!(target: "kubedav", "the policy's paths could not be created: {}", status.message());
                            return;
                        }
                        Ok(()) => return,
                    }
                }
            });
            Ok(())
        }
        other => other,
    }
}

/// What identifies one version of the policy file without reading it: a ConfigMap's
/// update swaps a symlink, which changes the file's inode and time.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Version {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Version {
    fn of(file: &Path) -> Option<Version> {
        use std::os::unix::fs::MetadataExt;
        let metadata = std::fs::metadata(file).ok()?;
        Some(Version {
            modified: metadata.modified().ok(),
            len: metadata.len(),
            inode: metadata.ino(),
        })
    }
}

/// Looks at `file` every [`LOOK_EVERY`] and, when its text changed and compiles,
/// hands the new policy to `apply`. A version that does not compile is logged with what
/// to fix, and the policy in force stays.
fn watch<F, Fut>(file: PathBuf, apply: F)
where
    F: Fn(Arc<Policy>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut version = Version::of(&file);
        let mut text = std::fs::read_to_string(&file).ok();
        let mut ticks = tokio::time::interval(LOOK_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let now = Version::of(&file);
            if now == version {
                continue;
            }
            version = now;
            let Ok(new_text) = std::fs::read_to_string(&file) else {
                tracing::error!(target: "kubedav", "the access policy {} cannot be read; the policy in force stays", file.display());
                continue;
            };
            if text.as_deref() == Some(new_text.as_str()) {
                continue;
            }
            text = Some(new_text);
            match Policy::from_yaml(text.as_deref().unwrap_or_default()) {
                Err(error) => tracing::error!(
                    target: "kubedav",
                    "the access policy {} changed but cannot be used, so the policy in force stays: {error}",
                    file.display()
                ),
                Ok(policy) => {
                    let policy = Arc::new(policy);
                    apply(policy.clone()).await;
                    tracing::info!(target: "kubedav", rules = policy.rule_count(), "access policy reloaded from {}", file.display());
                }
            }
        }
    });
}

/// Keeps `gateway` deciding by the policy in `file` as it changes: the paths a new
/// version names are created, then it is put in force.
pub(super) fn watch_for_gateway(file: PathBuf, gateway: Arc<Gateway>) {
    watch(file, move |policy| {
        let gateway = gateway.clone();
        async move {
            if let Err(status) =
                kubedav_gateway::access::create_named_paths(gateway.fileio.as_ref(), &policy).await
            {
                tracing::warn!(target: "kubedav", "the reloaded policy's paths could not all be created: {}", status.message());
            }
            gateway.replace_policy(policy);
        }
    });
}

/// The quota roots fileio holds writes to: the policy's (`quota.homes`, `quota.paths`),
/// kept current as its file changes, and the whole tree's (`--quota-bytes`).
pub(super) struct PolicyQuotas {
    current: arc_swap::ArcSwap<Policy>,
    whole: Option<u64>,
}

impl QuotaRoots for PolicyQuotas {
    fn roots_of(&self, path: &VolumePath) -> Vec<Root> {
        let whole = self.whole.map(|limit| Root {
            path: VolumePath::root(),
            limit,
        });
        let policy = self.current.load();
        whole
            .into_iter()
            .chain(policy.quota_roots(path).into_iter().map(|root| Root {
                path: root.path,
                limit: root.limit,
            }))
            .collect()
    }
}

/// The quota roots of the policy in `file` with `--quota-bytes` (`whole`), or `None`
/// when the policy sets no quota (then `--quota-bytes` alone applies, if given). A
/// policy that sets none at start gets none until a restart.
pub(super) fn quotas(file: &Path, whole: Option<u64>) -> Result<Option<Arc<PolicyQuotas>>, RunError> {
    let refuse = |reason: String| RunError::Policy {
        file: file.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(file).map_err(|e| refuse(e.to_string()))?;
    let policy = Policy::from_yaml(&text).map_err(|e| refuse(e.to_string()))?;
    if !policy.has_quotas() {
        return Ok(None);
    }
    let quotas = Arc::new(PolicyQuotas {
        current: arc_swap::ArcSwap::from_pointee(policy),
        whole,
    });
    let kept = quotas.clone();
    watch(file.to_owned(), move |policy| {
        kept.current.store(policy);
        std::future::ready(())
    });
    tracing::info!(target: "kubedav", "quotas on the roots the access policy {} names", file.display());
    Ok(Some(quotas))
}
