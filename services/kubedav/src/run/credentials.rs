//! App passwords at start: the secret they are hashed under, and the records they are
//! kept in (the local storage's in all-in-one, fileio's over gRPC for the auth target).

use super::RunError;
use crate::cli::Cli;
use crate::cli::identity::MIN_SECRET_KEY_BYTES;
use kubedav_api::records::Records;
use kubedav_auth::AuthCore;
use kubedav_auth::app_passwords::AppPasswords;
use std::sync::Arc;

/// Lets `core` keep app passwords in `records`, under `--secret-key` or, when `made_here`
/// allows it (all-in-one, the only process), a secret made once and kept with the data
/// (the first time an app password is made or used).
pub(super) fn keep_app_passwords(
    cli: &Cli,
    core: &AuthCore,
    records: Arc<dyn Records>,
    made_here: bool,
) -> Result<(), RunError> {
    let secret = match &cli.credentials.secret_key {
        Some(key) if key.len() >= MIN_SECRET_KEY_BYTES => Some(key.as_bytes().to_vec()),
        Some(key) => return Err(RunError::SecretKey(key.len())),
        None if made_here => None,
        None => {
            without_key();
            return Ok(());
        }
    };
    core.set_app_passwords(AppPasswords::new(records, cli.credentials.app_passwords(secret)));
    Ok(())
}

/// Says that the auth target keeps no app passwords without a key.
pub(super) fn without_key() {
    tracing::warn!(target: "kubedav", "no --secret-key: app passwords can be neither made nor used (give the auth target KUBEDAV_SECRET_KEY from a Secret, and --fileio-url)");
}
