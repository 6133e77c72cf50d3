//! Copies inside the bucket, with no byte passing through this process: CopyObject up
//! to S3's 5 GiB, and a multipart upload of UploadPartCopy ranges beyond.

use super::replies::{MTIME_HEADER, completed, mtime_metadata};
use super::{KEY_IN_HEADER, S3Client, SIGNED_FOR};
use bytes::Bytes;
use http::Method;
use rusty_s3::S3Action;
use rusty_s3::actions::{PutObject, UploadPart};
use tonic::Status;

/// The largest object one CopyObject copies (S3's limit).
pub(crate) const COPY_OBJECT_MAX: u64 = 5 << 30;
/// The range each UploadPartCopy of a larger object copies: 10,000 of them reach S3's
/// largest object.
const COPY_PART_BYTES: u64 = 1 << 30;

impl S3Client {
    /// `x-amz-copy-source` for `key` of this bucket.
    fn copy_source(&self, key: &str) -> String {
        format!(
            "/{}/{}",
            self.bucket.name(),
            percent_encoding::utf8_percent_encode(key, KEY_IN_HEADER)
        )
    }

    /// Gives the object `key`, while its ETag is still `etag`, the modification time
    /// `modified_unix_ns` (`x-amz-meta-mtime`): a CopyObject onto itself that replaces
    /// its metadata, the only way S3 changes it. The object's new ETag (S3 may give the
    /// copy another); ABORTED if the object changed meanwhile.
    pub async fn restamp(&self, key: &str, etag: &str, modified_unix_ns: i64) -> Result<String, Status> {
        let copy_source = self.copy_source(key);
        let mtime = mtime_metadata(modified_unix_ns);
        let quoted = format!("\"{etag}\"");
        let headers = [
            ("x-amz-copy-source", copy_source.as_str()),
            ("x-amz-copy-source-if-match", quoted.as_str()),
            ("x-amz-metadata-directive", "REPLACE"),
            (MTIME_HEADER, mtime.as_str()),
        ];
        self.copy_object(key, key, &headers).await
    }

    /// Copies the object `source` to `destination` (CopyObject, up to 5 GiB), metadata
    /// and all; the new object's ETag.
    pub async fn copy(&self, source: &str, destination: &str) -> Result<String, Status> {
        let copy_source = self.copy_source(source);
        self.copy_object(
            source,
            destination,
            &[("x-amz-copy-source", copy_source.as_str())],
        )
        .await
    }

    /// Copies the object `source`, of `size` bytes, to `destination` whatever its size,
    /// with the modification time `modified_unix_ns` when given (else without one); the
    /// new object's ETag. It appears whole and at once.
    pub async fn copy_whole(
        &self,
        source: &str,
        destination: &str,
        size: u64,
        modified_unix_ns: Option<i64>,
    ) -> Result<String, Status> {
        if size > COPY_OBJECT_MAX {
            return self
                .copy_in_parts(source, destination, size, modified_unix_ns, COPY_PART_BYTES)
                .await;
        }
        let copy_source = self.copy_source(source);
        let mtime = modified_unix_ns.map(mtime_metadata);
        let mut headers = vec![
            ("x-amz-copy-source", copy_source.as_str()),
            ("x-amz-metadata-directive", "REPLACE"),
        ];
        if let Some(mtime) = &mtime {
            headers.push((MTIME_HEADER, mtime.as_str()));
        }
        self.copy_object(source, destination, &headers).await
    }

    /// [`S3Client::copy_whole`] as a multipart upload of `destination` whose parts are
    /// copied from ranges of `part_bytes` of `source` (UploadPartCopy); aborted when a
    /// part fails.
    pub async fn copy_in_parts(
        &self,
        source: &str,
        destination: &str,
        size: u64,
        modified_unix_ns: Option<i64>,
        part_bytes: u64,
    ) -> Result<String, Status> {
        let upload = self.start_upload_with(destination, modified_unix_ns).await?;
        let copied = async {
            let mut etags = Vec::new();
            let mut first = 0;
            while first < size || etags.is_empty() {
                let last = (first + part_bytes).min(size).saturating_sub(1);
                let number = u16::try_from(etags.len() + 1).map_err(|_| {
                    Status::invalid_argument(format!("{source} is larger than 10,000 copied parts"))
                })?;
                etags.push(
                    self.copy_part(source, destination, &upload, number, first, last)
                        .await?,
                );
                first = last + 1;
            }
            self.complete_upload(destination, &upload, &etags, None).await
        }
        .await;
        if copied.is_err() {
            let _ = self.abort_upload(destination, &upload).await;
        }
        copied
    }

    /// Copies the bytes `first..=last` of `source` as part `number` of the upload
    /// `upload` of `destination` (UploadPartCopy); the part's ETag.
    async fn copy_part(
        &self,
        source: &str,
        destination: &str,
        upload: &str,
        number: u16,
        first: u64,
        last: u64,
    ) -> Result<String, Status> {
        let copy_source = self.copy_source(source);
        let range = format!("bytes={first}-{last}");
        let headers = [
            ("x-amz-copy-source", copy_source.as_str()),
            ("x-amz-copy-source-range", range.as_str()),
        ];
        let mut action = UploadPart::new(&self.bucket, Some(&self.credentials), destination, number, upload);
        for (name, value) in headers {
            action.headers_mut().insert(name, value);
        }
        let url = action.sign(SIGNED_FOR);
        let (_, body) = self
            .succeed("UploadPartCopy", source, Method::PUT, url, &headers, Bytes::new())
            .await?;
        completed("UploadPartCopy", source, &body)
    }

    /// One CopyObject onto `destination` with `headers` (its source among them); the
    /// new object's ETag.
    async fn copy_object(
        &self,
        source: &str,
        destination: &str,
        headers: &[(&str, &str)],
    ) -> Result<String, Status> {
        let mut action = PutObject::new(&self.bucket, Some(&self.credentials), destination);
        for (name, value) in headers {
            action.headers_mut().insert(*name, *value);
        }
        let url = action.sign(SIGNED_FOR);
        let (_, body) = self
            .succeed("CopyObject", source, Method::PUT, url, headers, Bytes::new())
            .await?;
        completed("CopyObject", source, &body)
    }
}
