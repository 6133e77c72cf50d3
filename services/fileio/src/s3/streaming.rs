//! Parts sent as their bytes arrive: an UploadPart whose body is fed through a channel,
//! so a request's bytes flow on to the bucket while they are received instead of after.

use super::replies::{header, refused, whole};
use super::{S3Client, SIGNED_FOR};
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::BodyExt;
use rusty_s3::S3Action;
use rusty_s3::actions::UploadPart;
use tokio::sync::mpsc;
use tonic::Status;

/// A body sent as it arrives.
pub(super) type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, std::io::Error>;

impl S3Client {
    /// Uploads part `number` (from 1) of an upload as its `length` bytes arrive on
    /// `bytes`; the part's ETag. A channel closed before `length` bytes came fails the
    /// part (the S3 server never stores a short one).
    pub async fn upload_part_streamed(
        &self,
        key: &str,
        upload: &str,
        number: u16,
        length: u64,
        bytes: mpsc::Receiver<Bytes>,
    ) -> Result<String, Status> {
        let url =
            UploadPart::new(&self.bucket, Some(&self.credentials), key, number, upload).sign(SIGNED_FOR);
        let frames = futures_util::stream::unfold(bytes, |mut bytes| async move {
            let data = bytes.recv().await?;
            Some((Ok(hyper::body::Frame::data(data)), bytes))
        });
        let body = http_body_util::StreamBody::new(frames).boxed_unsync();
        let request = Request::builder()
            .method(Method::PUT)
            .uri(url.as_str())
            .header(http::header::CONTENT_LENGTH, length)
            .body(body)
            .map_err(|e| Status::internal(format!("an S3 request could not be built: {e}")))?;
        let response = match self.streaming.request(request).await {
            Ok(response) => response,
            Err(e) => {
                crate::metrics::s3_request("UploadPart", "failed");
                return Err(Status::unavailable(format!(
                    "a part of {key} could not be sent to the S3 server at {}: {}",
                    self.bucket.base_url(),
                    kubedav_kit::errors::with_causes(&e)
                )));
            }
        };
        let outcome = if response.status().is_success() {
            "ok"
        } else {
            "refused"
        };
        crate::metrics::s3_request("UploadPart", outcome);
        let (status, headers, answer) = whole(response).await?;
        if !status.is_success() {
            return Err(refused("UploadPart", key, status, &answer));
        }
        Ok(header(&headers, "etag").to_owned())
    }
}
