//! Multipart uploads a crash left incomplete: invisible, but their parts are stored
//! and billed until aborted. fileio aborts, at start and then every so often, each
//! upload under its prefix that has stored nothing for an idle time: begun that long
//! ago, and with no part since. An upload in flight, of this process or of another
//! replica over the same bucket, stores a part at least every few seconds and is left
//! alone, and so is the multipart upload of an unfinished upload in many requests
//! (TUS, Nextcloud chunking: `crate::uploads::bucket`), which its expiry aborts. A bucket
//! lifecycle rule (AbortIncompleteMultipartUpload) is the belt to these
//! braces; docs/architecture.md shows one.

use crate::s3::S3Client;
use std::time::Duration;

/// The idle time `--abandoned-upload-seconds` defaults to.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(3600);

/// How long an upload may store nothing before it counts as abandoned, and how often
/// the sweep looks: half the idle time, within a second and ten minutes.
#[derive(Clone, Copy, Debug)]
pub struct Sweep {
    /// Idle time after which an upload is aborted.
    pub idle: Duration,
}

impl Sweep {
    /// How long between two sweeps.
    pub fn every(&self) -> Duration {
        (self.idle / 2).clamp(Duration::from_secs(1), Duration::from_secs(600))
    }

    /// Sweeps `prefix` now, then every [`Sweep::every`], for as long as the process runs.
    pub async fn run(self, s3: S3Client, prefix: String) {
        loop {
            let aborted = abandoned_uploads(&s3, &prefix, self.idle).await;
            if aborted > 0 {
                tracing::warn!(target: "kubedav", "aborted {aborted} uploads that stored nothing for {:?} (left by a crash or a vanished client)", self.idle);
            }
            tokio::time::sleep(self.every()).await;
        }
    }
}

/// Nanoseconds since the epoch.
fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as i64)
}

/// Aborts the uploads below `prefix` that stored nothing for `idle`; how many. Failures
/// are logged: the next sweep tries again.
pub async fn abandoned_uploads(s3: &S3Client, prefix: &str, idle: Duration) -> usize {
    let uploads = match s3.uploads(prefix).await {
        Ok(uploads) => uploads,
        Err(status) => {
            tracing::warn!(target: "kubedav", error = %status.message(), "could not list the uploads left incomplete; the next sweep tries again");
            return 0;
        }
    };
    let quiet_since = now_ns() - idle.as_nanos() as i64;
    let mut aborted = 0;
    // The multipart uploads of unfinished uploads in many requests: their expiry
    // aborts them, not their idle time (asked once, when an upload is old enough).
    let mut in_use = None;
    for (key, id, began) in uploads {
        // Begun within the idle time: in flight whatever its parts say.
        if began > quiet_since {
            continue;
        }
        match s3.last_part(&key, &id).await {
            Ok(last) if last > quiet_since => continue,
            Ok(_) => {}
            Err(status) if status.code() == tonic::Code::NotFound => continue,
            Err(status) => {
                tracing::warn!(target: "kubedav", %key, error = %status.message(), "could not read the parts of an upload left incomplete");
                continue;
            }
        }
        if in_use.is_none() {
            match crate::uploads::bucket::multiparts_in_use(s3, prefix).await {
                Ok(ids) => in_use = Some(ids),
                Err(status) => {
                    tracing::warn!(target: "kubedav", error = %status.message(), "could not read the uploads in progress; the next sweep tries again");
                    return aborted;
                }
            }
        }
        if in_use.as_ref().is_some_and(|ids| ids.contains(&id)) {
            continue;
        }
        match s3.abort_upload(&key, &id).await {
            Ok(()) => aborted += 1,
            Err(status) => {
                tracing::warn!(target: "kubedav", %key, error = %status.message(), "could not abort an upload left incomplete")
            }
        }
    }
    aborted
}
