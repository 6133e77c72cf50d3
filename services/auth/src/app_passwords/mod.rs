//! App passwords: named, expiring, revocable passwords a signed-in user makes for
//! clients that only speak Basic (Finder, Windows, davfs2, cadaver, rclone).
//!
//! * **Stored with the data**, as records (`kubedav_api::records`) in the volume or the
//!   bucket, one per app password, under the owner's folder of the `app-passwords`
//!   area: they survive a restart of every process and a `FLUSHALL` of Redis, which
//!   never holds one.
//! * **Only a keyed hash** of each is kept: HMAC-SHA-256 under a key derived from
//!   `--secret-key` (docs/security.md says why a fast keyed hash suffices for 125 random
//!   bits, where a user's chosen password needs crypt).
//! * **Revoked everywhere within a second**: a replica keeps what it read of a record
//!   for at most [`AppPasswordsConfig::freshness`] (half a second by default), so a
//!   revocation made through any replica is seen by every other within that time, with
//!   no announcement to lose; the replica that revoked forgets at once.
//! * Each carries a scope: `read` or `write`, and optionally a path it is limited to.

pub mod secret;
mod store;

pub use crate::secret_key::KEPT_SECRET;
pub(crate) use store::user_folder;
pub use store::{
    AREA, AppPasswords, AppPasswordsConfig, MAX_NAME_CHARS, MAX_PER_USER, Refused, WallClock, seconds,
};

#[cfg(test)]
mod tests;
