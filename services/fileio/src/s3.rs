//! The S3 client fileio's object-storage backend talks through: requests built and
//! signed by rusty-s3 (keys used as they are, so the bucket stays a plain bucket), sent
//! with hyper over plain HTTP or rustls, and every failure mapped to the gRPC status the
//! rest of kubedav understands. The XML answers are read by a parser, never by searching
//! for tags: rusty-s3's for ListObjectsV2, ListParts and CreateMultipartUpload, quick-xml's
//! serde support for the rest (`s3/answers.rs`). docs/architecture.md says why rusty-s3 and
//! not object_store.

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use rusty_s3::actions::{
    AbortMultipartUpload, CompleteMultipartUpload, CreateMultipartUpload, DeleteObject, GetObject,
    HeadObject, ListObjectsV2, ListParts, PutObject, UploadPart,
};
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};
use std::path::PathBuf;
use std::time::Duration;
use tonic::Status;

mod answers;
mod copies;
mod replies;
mod streaming;

use answers::{Completion, ErrorBody};
use replies::{
    MTIME_HEADER, collect, completed, header, listing, mtime_metadata, object_info, refused, rfc3339_ns,
    whole,
};

/// How long a signed request stays valid: long enough for the slowest part upload.
const SIGNED_FOR: Duration = Duration::from_secs(15 * 60);

/// What a key keeps of itself in `x-amz-copy-source`: everything but unreserved
/// characters and `/` is percent-encoded (RFC 3986, as AWS's SigV4 canonical URIs).
const KEY_IN_HEADER: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// Where the bucket is and how to sign for it.
#[derive(Clone, Debug)]
pub struct S3Config {
    /// The endpoint, `http://127.0.0.1:7070` or `https://s3.eu-west-1.amazonaws.com`.
    pub endpoint: url::Url,
    /// The bucket.
    pub bucket: String,
    /// The region signatures are made for.
    pub region: String,
    /// The access key id.
    pub access_key: String,
    /// The secret access key.
    pub secret_key: String,
    /// The session token of temporary credentials (`AWS_SESSION_TOKEN`).
    pub session_token: Option<String>,
    /// Path-style addressing (`endpoint/bucket/key`), as non-AWS servers want.
    pub path_style: bool,
    /// PEM certificates to trust besides the public roots (`AWS_CA_BUNDLE`), for an
    /// `https://` endpoint whose certificate a private CA issued.
    pub ca_bundle: Option<PathBuf>,
}

/// An object's metadata, as HEAD and listings give it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The key.
    pub key: String,
    /// Bytes.
    pub size: u64,
    /// The ETag, without quotes.
    pub etag: String,
    /// Last modification, nanoseconds since the Unix epoch (0 when the server gave none).
    pub modified_unix_ns: i64,
}

/// An object being read: its metadata and its bytes as they arrive.
pub struct OpenedObject {
    /// The object's metadata (its whole size, whatever range was asked for).
    pub info: ObjectInfo,
    /// The bytes asked for.
    pub body: hyper::body::Incoming,
}

/// One page of a listing with a delimiter.
#[derive(Clone, Debug, Default)]
pub struct ListPage {
    /// The objects directly under the prefix.
    pub objects: Vec<ObjectInfo>,
    /// The "directories" under the prefix, each ending with the delimiter.
    pub prefixes: Vec<String>,
    /// Where the next page starts, if there is one.
    pub next: Option<String>,
}

/// A client of one bucket.
#[derive(Clone)]
pub struct S3Client {
    bucket: Bucket,
    credentials: Credentials,
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// The same connections' kind, for bodies sent as they arrive.
    streaming: Client<HttpsConnector<HttpConnector>, streaming::Body>,
}

impl S3Client {
    /// A client of the bucket `config` names, over plain HTTP or TLS as its endpoint
    /// says. TLS trusts the public (Mozilla) roots and the certificates of
    /// `config.ca_bundle`; an unreadable bundle is an error that names it.
    pub fn new(config: &S3Config) -> Result<Self, String> {
        if !matches!(config.endpoint.scheme(), "http" | "https") {
            return Err(format!(
                "the S3 endpoint {} is neither http:// nor https://: set AWS_ENDPOINT_URL to \
                 the S3 server's URL",
                config.endpoint
            ));
        }
        let style = if config.path_style {
            UrlStyle::Path
        } else {
            UrlStyle::VirtualHost
        };
        let bucket = Bucket::new(
            config.endpoint.clone(),
            style,
            config.bucket.clone(),
            config.region.clone(),
        )
        .map_err(|e| format!("the S3 bucket {} at {}: {e}", config.bucket, config.endpoint))?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(config.ca_bundle.as_deref())?)
            .https_or_http()
            .enable_http1()
            .build();
        let http = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector.clone());
        let streaming = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Ok(Self {
            bucket,
            credentials: match &config.session_token {
                Some(token) => Credentials::new_with_token(
                    config.access_key.clone(),
                    config.secret_key.clone(),
                    token.clone(),
                ),
                None => Credentials::new(config.access_key.clone(), config.secret_key.clone()),
            },
            http,
            streaming,
        })
    }

    /// The metadata of `key`; `None` when there is no such object.
    pub async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, Status> {
        let url = HeadObject::new(&self.bucket, Some(&self.credentials), key).sign(SIGNED_FOR);
        let found = self.fetch("HeadObject", Method::HEAD, url, key).await?;
        Ok(found.map(|(headers, _)| object_info(key, &headers)))
    }

    /// Opens `key` for reading, the bytes `first..=last` of it when `range` is given, and
    /// only while its ETag is `if_match` when that is given (ABORTED otherwise). `None`
    /// when there is no such object; OUT_OF_RANGE when the range starts past its end.
    pub async fn open(
        &self,
        key: &str,
        range: Option<(u64, u64)>,
        if_match: Option<&str>,
    ) -> Result<Option<OpenedObject>, Status> {
        let url = GetObject::new(&self.bucket, Some(&self.credentials), key).sign(SIGNED_FOR);
        let range = range.map(|(first, last)| format!("bytes={first}-{last}"));
        let quoted = if_match.map(|etag| format!("\"{etag}\""));
        let mut headers = Vec::new();
        if let Some(range) = &range {
            headers.push(("range", range.as_str()));
        }
        if let Some(etag) = &quoted {
            headers.push(("if-match", etag.as_str()));
        }
        let response = self
            .request("GetObject", Method::GET, url, &headers, Bytes::new())
            .await?;
        let (parts, body) = response.into_parts();
        match parts.status {
            status if status.is_success() => {
                let mut info = object_info(key, &parts.headers);
                // A ranged answer's Content-Length is the range's; the whole size follows
                // the slash of Content-Range.
                if let Some(total) = header(&parts.headers, "content-range")
                    .rsplit_once('/')
                    .and_then(|(_, total)| total.parse().ok())
                {
                    info.size = total;
                }
                Ok(Some(OpenedObject { info, body }))
            }
            StatusCode::NOT_FOUND => Ok(None),
            StatusCode::RANGE_NOT_SATISFIABLE => Err(Status::out_of_range(format!(
                "{key}: the range starts past its end"
            ))),
            status => {
                let answer = collect(body).await?;
                Err(refused("GetObject", key, status, &answer))
            }
        }
    }

    /// The whole object `key`; NOT_FOUND when there is none.
    pub async fn get(&self, key: &str) -> Result<Bytes, Status> {
        match self.get_versioned(key).await? {
            Some((data, _)) => Ok(data),
            None => Err(Status::not_found(format!("no object {key}"))),
        }
    }

    /// The whole object `key` and its ETag; `None` when there is none.
    pub async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, String)>, Status> {
        let url = GetObject::new(&self.bucket, Some(&self.credentials), key).sign(SIGNED_FOR);
        let found = self.fetch("GetObject", Method::GET, url, key).await?;
        Ok(found.map(|(headers, body)| (body, header(&headers, "etag").trim_matches('"').to_owned())))
    }

    /// Writes `data` as the object `key` in one request; its ETag.
    pub async fn put(&self, key: &str, data: Bytes) -> Result<String, Status> {
        self.put_if(key, data, None).await
    }

    /// Writes `data` as the object `key` only if the object is still as `expected` says:
    /// `Some(etag)` for that version, `Some("")` for no object at all, `None` for
    /// whatever is there. ABORTED when it is not; its ETag otherwise.
    pub async fn put_if(&self, key: &str, data: Bytes, expected: Option<&str>) -> Result<String, Status> {
        self.put_with(key, data, expected, None).await
    }

    /// [`S3Client::put_if`], keeping `modified_unix_ns` as the object's modification
    /// time in `x-amz-meta-mtime` (rclone's convention: Unix seconds with a fraction), so
    /// HEAD and GET report it instead of the time of the write.
    pub async fn put_with(
        &self,
        key: &str,
        data: Bytes,
        expected: Option<&str>,
        modified_unix_ns: Option<i64>,
    ) -> Result<String, Status> {
        let mtime = modified_unix_ns.map(mtime_metadata);
        let mut action = PutObject::new(&self.bucket, Some(&self.credentials), key);
        if let Some(mtime) = &mtime {
            action.headers_mut().insert(MTIME_HEADER, mtime.as_str());
        }
        let url = action.sign(SIGNED_FOR);
        let condition = Condition::new(expected);
        let mut headers = condition.headers();
        if let Some(mtime) = &mtime {
            headers.push((MTIME_HEADER, mtime.as_str()));
        }
        let (headers, _) = self
            .succeed("PutObject", key, Method::PUT, url, &headers, data)
            .await?;
        Ok(header(&headers, "etag").trim_matches('"').to_owned())
    }

    /// Removes the object `key` (no error when there is none, as S3 does; versitygw
    /// answers 404 for a key another client removed a moment before).
    pub async fn delete(&self, key: &str) -> Result<(), Status> {
        let url = DeleteObject::new(&self.bucket, Some(&self.credentials), key).sign(SIGNED_FOR);
        match self
            .succeed("DeleteObject", key, Method::DELETE, url, &[], Bytes::new())
            .await
        {
            Ok(_) => Ok(()),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(()),
            Err(status) => Err(status),
        }
    }

    /// One page of the objects and prefixes directly under `prefix` (`/` delimited),
    /// from `from` (the previous page's `next`).
    pub async fn list(&self, prefix: &str, from: Option<&str>) -> Result<ListPage, Status> {
        self.list_page(prefix, from, true, None, None).await
    }

    /// The first page of [`S3Client::list`] without the key `prefix` itself (a
    /// collection's marker, which sorts first): 1,000 members fit one page.
    pub async fn list_members(&self, prefix: &str) -> Result<ListPage, Status> {
        let marker = (!prefix.is_empty()).then_some(prefix);
        self.list_page(prefix, None, true, None, marker).await
    }

    /// One page of every object whose key starts with `prefix`, however deep.
    pub async fn list_all(&self, prefix: &str, from: Option<&str>) -> Result<ListPage, Status> {
        self.list_page(prefix, from, false, None, None).await
    }

    /// Whether any object's key starts with `prefix`, and the first such object.
    pub async fn first_under(&self, prefix: &str) -> Result<Option<ObjectInfo>, Status> {
        let page = self.list_page(prefix, None, false, Some(1), None).await?;
        Ok(page.objects.into_iter().next())
    }

    async fn list_page(
        &self,
        prefix: &str,
        from: Option<&str>,
        delimited: bool,
        max_keys: Option<usize>,
        start_after: Option<&str>,
    ) -> Result<ListPage, Status> {
        let mut list = ListObjectsV2::new(&self.bucket, Some(&self.credentials));
        list.with_prefix(prefix);
        if let Some(key) = start_after {
            list.with_start_after(key);
        }
        if delimited {
            list.with_delimiter("/");
        }
        if let Some(token) = from {
            list.with_continuation_token(token);
        }
        if let Some(max) = max_keys {
            list.with_max_keys(max);
        }
        let url = list.sign(SIGNED_FOR);
        let (_, body) = self
            .succeed("ListObjectsV2", prefix, Method::GET, url, &[], Bytes::new())
            .await?;
        listing(prefix, &body)
    }

    /// Starts a multipart upload of `key`; its upload id.
    pub async fn start_upload(&self, key: &str) -> Result<String, Status> {
        self.start_upload_with(key, None).await
    }

    /// [`S3Client::start_upload`], the object to keep `modified_unix_ns` as its
    /// modification time (see [`S3Client::put_with`]).
    pub async fn start_upload_with(
        &self,
        key: &str,
        modified_unix_ns: Option<i64>,
    ) -> Result<String, Status> {
        let mtime = modified_unix_ns.map(mtime_metadata);
        let mut action = CreateMultipartUpload::new(&self.bucket, Some(&self.credentials), key);
        if let Some(mtime) = &mtime {
            action.headers_mut().insert(MTIME_HEADER, mtime.as_str());
        }
        let url = action.sign(SIGNED_FOR);
        let headers: Vec<(&str, &str)> = mtime.iter().map(|m| (MTIME_HEADER, m.as_str())).collect();
        let (_, body) = self
            .succeed(
                "CreateMultipartUpload",
                key,
                Method::POST,
                url,
                &headers,
                Bytes::new(),
            )
            .await?;
        let parsed = CreateMultipartUpload::parse_response(&String::from_utf8_lossy(&body)).map_err(|e| {
            Status::internal(format!(
                "the S3 server's answer to CreateMultipartUpload did not parse: {e}"
            ))
        })?;
        Ok(parsed.upload_id().to_owned())
    }

    /// Uploads part `number` (from 1) of an upload; the part's ETag, as sent.
    pub async fn upload_part(
        &self,
        key: &str,
        upload: &str,
        number: u16,
        data: Bytes,
    ) -> Result<String, Status> {
        let url =
            UploadPart::new(&self.bucket, Some(&self.credentials), key, number, upload).sign(SIGNED_FOR);
        let (headers, _) = self
            .succeed("UploadPart", key, Method::PUT, url, &[], data)
            .await?;
        Ok(header(&headers, "etag").to_owned())
    }

    /// Completes an upload from its parts' ETags, in order: the object appears whole.
    /// The object's ETag.
    /// `expected` is a condition as [`S3Client::put_if`] takes it, which servers that
    /// know conditional completion (AWS S3 since 2024, versitygw) check atomically and
    /// others ignore.
    pub async fn complete_upload(
        &self,
        key: &str,
        upload: &str,
        etags: &[String],
        expected: Option<&str>,
    ) -> Result<String, Status> {
        let numbered: Vec<(u16, &str)> = (1u16..).zip(etags.iter().map(String::as_str)).collect();
        self.complete_numbered(key, upload, &numbered, expected).await
    }

    /// [`S3Client::complete_upload`] from parts named by their numbers, ascending (S3
    /// allows gaps between them).
    pub async fn complete_numbered(
        &self,
        key: &str,
        upload: &str,
        parts: &[(u16, &str)],
        expected: Option<&str>,
    ) -> Result<String, Status> {
        let action = CompleteMultipartUpload::new(
            &self.bucket,
            Some(&self.credentials),
            key,
            upload,
            std::iter::empty::<&str>(),
        );
        let url = action.sign(SIGNED_FOR);
        let body = Bytes::from(answers::completion_body(parts));
        let condition = Condition::new(expected);
        let (_, answer) = self
            .succeed(
                "CompleteMultipartUpload",
                key,
                Method::POST,
                url,
                &condition.headers(),
                body,
            )
            .await?;
        completed("CompleteMultipartUpload", key, &answer)
    }

    /// Abandons an upload: its parts are dropped and no object appears.
    pub async fn abort_upload(&self, key: &str, upload: &str) -> Result<(), Status> {
        let url =
            AbortMultipartUpload::new(&self.bucket, Some(&self.credentials), key, upload).sign(SIGNED_FOR);
        let answer = self
            .request("AbortMultipartUpload", Method::DELETE, url, &[], Bytes::new())
            .await?;
        let (status, _, body) = whole(answer).await?;
        if !status.is_success() && status != StatusCode::NOT_FOUND {
            return Err(refused("AbortMultipartUpload", key, status, &body));
        }
        Ok(())
    }

    /// When a part of the upload `upload` of `key` was last stored, in nanoseconds since
    /// the epoch (0 when it has none yet); NOT_FOUND once it is gone.
    pub async fn last_part(&self, key: &str, upload: &str) -> Result<i64, Status> {
        let mut latest = 0;
        let mut marker = None;
        loop {
            let mut action = ListParts::new(&self.bucket, Some(&self.credentials), key, upload);
            if let Some(number) = marker {
                action.set_part_number_marker(number);
            }
            let url = action.sign(SIGNED_FOR);
            let (_, body) = self
                .succeed("ListParts", key, Method::GET, url, &[], Bytes::new())
                .await?;
            let parsed = ListParts::parse_response(&String::from_utf8_lossy(&body)).map_err(|e| {
                Status::internal(format!("the S3 server's parts of {key} did not parse: {e}"))
            })?;
            for part in &parsed.parts {
                latest = latest.max(rfc3339_ns(&part.last_modified));
            }
            match parsed.next_part_number_marker {
                Some(next) => marker = Some(next),
                None => return Ok(latest),
            }
        }
    }

    /// The multipart uploads under way below `prefix`, every page of them: each one's
    /// key, id and start in nanoseconds since the epoch (ListMultipartUploads).
    pub async fn uploads(&self, prefix: &str) -> Result<Vec<(String, String, i64)>, Status> {
        let mut all = Vec::new();
        let mut from: Option<(String, String)> = None;
        loop {
            let mut query = vec![("prefix", prefix), ("uploads", "")];
            if let Some((key, id)) = &from {
                query.extend([("key-marker", key.as_str()), ("upload-id-marker", id.as_str())]);
            }
            let url = rusty_s3::signing::sign(
                &jiff::Timestamp::now(),
                rusty_s3::Method::Get,
                self.bucket.base_url().clone(),
                self.credentials.key(),
                self.credentials.secret(),
                self.credentials.token(),
                self.bucket.region(),
                SIGNED_FOR.as_secs(),
                query.into_iter(),
                std::iter::empty(),
            );
            let (_, body) = self
                .succeed(
                    "ListMultipartUploads",
                    prefix,
                    Method::GET,
                    url,
                    &[],
                    Bytes::new(),
                )
                .await?;
            let (page, next) = answers::uploads(&body).map_err(|e| {
                Status::internal(format!(
                    "the S3 server's uploads under {prefix} did not parse: {e}"
                ))
            })?;
            all.extend(page.into_iter().map(|upload| {
                let started = rfc3339_ns(&upload.initiated);
                (upload.key, upload.id, started)
            }));
            match next {
                Some(next) if from.as_ref() != Some(&next) => from = Some(next),
                _ => return Ok(all),
            }
        }
    }

    /// Sends one signed read of `key` (GET or HEAD): `None` when there is no such
    /// object, else the answer's headers and whole body.
    async fn fetch(
        &self,
        action: &'static str,
        method: Method,
        url: url::Url,
        key: &str,
    ) -> Result<Option<(http::HeaderMap, Bytes)>, Status> {
        let (status, headers, body) =
            whole(self.request(action, method, url, &[], Bytes::new()).await?).await?;
        match status {
            StatusCode::NOT_FOUND => Ok(None),
            status if status.is_success() => Ok(Some((headers, body))),
            status => Err(refused(action, key, status, &body)),
        }
    }

    /// Sends one signed request about `subject` (a key or prefix) that must succeed: the
    /// answer's headers and whole body, or the refusal mapped by [`refused`].
    async fn succeed(
        &self,
        action: &'static str,
        subject: &str,
        method: Method,
        url: url::Url,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<(http::HeaderMap, Bytes), Status> {
        let (status, headers, body) = whole(self.request(action, method, url, headers, body).await?).await?;
        if !status.is_success() {
            return Err(refused(action, subject, status, &body));
        }
        Ok((headers, body))
    }

    /// Sends one signed request of `action` (counted in
    /// `kubedav_fileio_s3_requests_total`); the answer, its body still to come.
    async fn request(
        &self,
        action: &'static str,
        method: Method,
        url: url::Url,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<http::Response<hyper::body::Incoming>, Status> {
        let mut request = Request::builder().method(method).uri(url.as_str());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| Status::internal(format!("an S3 request could not be built: {e}")))?;
        match self.http.request(request).await {
            Ok(response) => {
                let outcome = if response.status().is_success() {
                    "ok"
                } else {
                    "refused"
                };
                crate::metrics::s3_request(action, outcome);
                Ok(response)
            }
            Err(e) => {
                crate::metrics::s3_request(action, "failed");
                Err(Status::unavailable(format!(
                    "the S3 server at {} cannot be reached: {}",
                    self.bucket.base_url(),
                    with_causes(&e)
                )))
            }
        }
    }
}

/// The precondition of a write: none, `If-None-Match: *` (`Some("")`: only if there is
/// no object), or `If-Match` on an ETag.
struct Condition(Option<(&'static str, String)>);

impl Condition {
    fn new(expected: Option<&str>) -> Self {
        Self(match expected {
            None => None,
            Some("") => Some(("if-none-match", "*".to_owned())),
            Some(etag) => Some(("if-match", format!("\"{etag}\""))),
        })
    }

    fn headers(&self) -> Vec<(&str, &str)> {
        self.0
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect()
    }
}

/// What TLS to an `https://` endpoint trusts: the public roots, and the PEM
/// certificates in `ca_bundle`.
fn tls_config(ca_bundle: Option<&std::path::Path>) -> Result<rustls::ClientConfig, String> {
    use kubedav_kit::tls::{TlsError, Trust, client_config};
    client_config(Trust::PublicRoots { extra_ca: ca_bundle }).map_err(|e| match e {
        TlsError::Protocols(_) => format!("TLS for the S3 endpoint: {e}"),
        _ => format!("AWS_CA_BUNDLE {e}"),
    })
}

/// An error and every cause under it, with what to do when the cause is the S3
/// server's certificate.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = kubedav_kit::errors::with_causes(error);
    if kubedav_kit::tls::untrusted_certificate(&text) {
        text.push_str(
            " (the S3 server's certificate is not issued by a trusted CA: put the CA's \
             certificate in a PEM file and name it in AWS_CA_BUNDLE)",
        );
    }
    text
}

#[cfg(test)]
mod tests;
