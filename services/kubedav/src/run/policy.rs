//! `--policy`: the access policy read, compiled, and the paths it names created.

use super::RunError;
use kubedav_api::fileio::FileIo;
use kubedav_policy::Policy;
use std::path::Path;
use std::sync::Arc;

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
