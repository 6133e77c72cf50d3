//! Multipart uploads a crash left incomplete: invisible, but their parts are stored
//! and billed until aborted. At start, fileio aborts every upload under its prefix that
//! began before it did (an upload of a running replica began after, and is left alone).
//! A bucket lifecycle rule (AbortIncompleteMultipartUpload) is the belt to these
//! braces; docs/architecture.md shows one.

use crate::s3::S3Client;

/// Aborts the uploads below `prefix` begun before `started` (ns since the epoch); how
/// many. Failures are logged: the next start tries again.
pub async fn abandoned_uploads(s3: &S3Client, prefix: &str, started: i64) -> usize {
    let uploads = match s3.uploads(prefix).await {
        Ok(uploads) => uploads,
        Err(status) => {
            tracing::warn!(target: "kubedav", error = %status.message(), "could not list the uploads left incomplete; they stay until the next start");
            return 0;
        }
    };
    let mut aborted = 0;
    for (key, id, began) in uploads {
        if began >= started {
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
