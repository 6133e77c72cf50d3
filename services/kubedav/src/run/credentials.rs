//! App passwords at start: the key they are hashed under, and the records they are
//! kept in (the local storage's in all-in-one, fileio's over gRPC for the auth target).

use super::RunError;
use crate::cli::Cli;
use crate::cli::identity::MIN_SECRET_KEY_BYTES;
use kubedav_api::records::{GetRecordRequest, PutRecordRequest, Records};
use kubedav_auth::AuthCore;
use kubedav_auth::app_passwords::AppPasswords;
use std::sync::Arc;

/// The record that keeps the key all-in-one made for itself (without --secret-key).
const KEPT_KEY: (&str, &str) = ("keys", "secret");

/// Lets `core` keep app passwords in `records`, under `--secret-key` or, when `made_here`
/// allows it (all-in-one, the only process), a key made once and kept with the data.
pub(super) async fn keep_app_passwords(
    cli: &Cli,
    core: &AuthCore,
    records: Arc<dyn Records>,
    made_here: bool,
) -> Result<(), RunError> {
    let secret = match &cli.credentials.secret_key {
        Some(key) if key.len() >= MIN_SECRET_KEY_BYTES => key.as_bytes().to_vec(),
        Some(key) => return Err(RunError::SecretKey(key.len())),
        None if made_here => kept_key(records.as_ref()).await?,
        None => {
            without_key();
            return Ok(());
        }
    };
    core.set_app_passwords(AppPasswords::new(records, cli.credentials.app_passwords(&secret)));
    Ok(())
}

/// Says that the auth target keeps no app passwords without a key.
pub(super) fn without_key() {
    tracing::warn!(target: "kubedav", "no --secret-key: app passwords can be neither made nor used (give the auth target KUBEDAV_SECRET_KEY from a Secret, and --fileio-url)");
}

/// The key kept with the data, made now if there is none.
async fn kept_key(records: &dyn Records) -> Result<Vec<u8>, RunError> {
    let (area, key) = KEPT_KEY;
    let request = GetRecordRequest {
        area: area.into(),
        key: key.into(),
    };
    let kept = records.get(request).await.map_err(RunError::Records)?;
    if kept.found && kept.data.len() >= MIN_SECRET_KEY_BYTES {
        return Ok(kept.data.to_vec());
    }
    let mut secret = vec![0u8; 48];
    getrandom::fill(&mut secret).map_err(|e| RunError::Records(tonic::Status::internal(e.to_string())))?;
    records
        .put(PutRecordRequest {
            area: area.into(),
            key: key.into(),
            data: secret.clone().into(),
        })
        .await
        .map_err(RunError::Records)?;
    tracing::info!(target: "kubedav", "made the key app passwords are hashed under, and kept it with the data (.kubedav/keys/); give --secret-key from a Secret to keep it apart");
    Ok(secret)
}
