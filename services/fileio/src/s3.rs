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

use answers::{Completion, ErrorBody};

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
        let http = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
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

    /// Copies the object `source` to `destination` inside the bucket, with no byte
    /// passing through this process (CopyObject: up to 5 GiB); the copy's ETag.
    /// Gives the object `key`, while its ETag is still `etag`, the modification time
    /// `modified_unix_ns` (`x-amz-meta-mtime`): a CopyObject onto itself that replaces
    /// its metadata, the only way S3 changes it. The object's new ETag (S3 may give the
    /// copy another); ABORTED if the object changed meanwhile.
    pub async fn restamp(&self, key: &str, etag: &str, modified_unix_ns: i64) -> Result<String, Status> {
        let copy_source = format!(
            "/{}/{}",
            self.bucket.name(),
            percent_encoding::utf8_percent_encode(key, KEY_IN_HEADER)
        );
        let mtime = mtime_metadata(modified_unix_ns);
        let quoted = format!("\"{etag}\"");
        let headers = [
            ("x-amz-copy-source", copy_source.as_str()),
            ("x-amz-copy-source-if-match", quoted.as_str()),
            ("x-amz-metadata-directive", "REPLACE"),
            (MTIME_HEADER, mtime.as_str()),
        ];
        let mut action = PutObject::new(&self.bucket, Some(&self.credentials), key);
        for (name, value) in headers {
            action.headers_mut().insert(name, value);
        }
        let url = action.sign(SIGNED_FOR);
        let (_, body) = self
            .succeed("CopyObject", key, Method::PUT, url, &headers, Bytes::new())
            .await?;
        completed("CopyObject", key, &body)
    }

    pub async fn copy(&self, source: &str, destination: &str) -> Result<String, Status> {
        let copy_source = format!(
            "/{}/{}",
            self.bucket.name(),
            percent_encoding::utf8_percent_encode(source, KEY_IN_HEADER)
        );
        let mut action = PutObject::new(&self.bucket, Some(&self.credentials), destination);
        action
            .headers_mut()
            .insert("x-amz-copy-source", copy_source.clone());
        let url = action.sign(SIGNED_FOR);
        let headers = [("x-amz-copy-source", copy_source.as_str())];
        let (_, body) = self
            .succeed("CopyObject", source, Method::PUT, url, &headers, Bytes::new())
            .await?;
        completed("CopyObject", source, &body)
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

    /// Removes the object `key` (no error when there is none, as S3 does).
    pub async fn delete(&self, key: &str) -> Result<(), Status> {
        let url = DeleteObject::new(&self.bucket, Some(&self.credentials), key).sign(SIGNED_FOR);
        self.succeed("DeleteObject", key, Method::DELETE, url, &[], Bytes::new())
            .await?;
        Ok(())
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
        let action = CompleteMultipartUpload::new(
            &self.bucket,
            Some(&self.credentials),
            key,
            upload,
            etags.iter().map(String::as_str),
        );
        let url = action.sign(SIGNED_FOR);
        let body = Bytes::from(action.body());
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

    /// The multipart uploads under way below `prefix` (the first 1,000): each one's key,
    /// id and start in nanoseconds since the epoch (ListMultipartUploads).
    pub async fn uploads(&self, prefix: &str) -> Result<Vec<(String, String, i64)>, Status> {
        let url = rusty_s3::signing::sign(
            &jiff::Timestamp::now(),
            rusty_s3::Method::Get,
            self.bucket.base_url().clone(),
            self.credentials.key(),
            self.credentials.secret(),
            self.credentials.token(),
            self.bucket.region(),
            SIGNED_FOR.as_secs(),
            [("prefix", prefix), ("uploads", "")].into_iter(),
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
        let uploads = answers::uploads(&body).map_err(|e| {
            Status::internal(format!(
                "the S3 server's uploads under {prefix} did not parse: {e}"
            ))
        })?;
        Ok(uploads
            .into_iter()
            .map(|upload| {
                let started = rfc3339_ns(&upload.initiated);
                (upload.key, upload.id, started)
            })
            .collect())
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

/// One page of a ListObjectsV2 answer about `prefix`, as rusty-s3 reads it: keys
/// URL-decoded when the server encoded them (rusty-s3 asks for `encoding-type=url`, and
/// decodes when the answer says `<EncodingType>url`), taken as they are otherwise (a
/// server that ignores the parameter, as versitygw does, escapes them as XML).
fn listing(prefix: &str, body: &[u8]) -> Result<ListPage, Status> {
    let parsed = ListObjectsV2::parse_response(&String::from_utf8_lossy(body))
        .map_err(|e| Status::internal(format!("the S3 server's listing of {prefix} did not parse: {e}")))?;
    Ok(ListPage {
        objects: parsed
            .contents
            .into_iter()
            .map(|o| ObjectInfo {
                modified_unix_ns: o.last_modified.as_deref().map(rfc3339_ns).unwrap_or(0),
                key: o.key,
                size: o.size.unwrap_or(0),
                etag: o.etag.unwrap_or_default().trim_matches('"').to_owned(),
            })
            .collect(),
        prefixes: parsed.common_prefixes.into_iter().map(|p| p.prefix).collect(),
        next: parsed.next_continuation_token,
    })
}

/// An answer's status, headers and whole body; UNAVAILABLE when the body breaks off.
async fn whole(
    response: http::Response<hyper::body::Incoming>,
) -> Result<(StatusCode, http::HeaderMap, Bytes), Status> {
    let (parts, body) = response.into_parts();
    Ok((parts.status, parts.headers, collect(body).await?))
}

/// The whole of an answer's body; UNAVAILABLE when it breaks off.
async fn collect(body: hyper::body::Incoming) -> Result<Bytes, Status> {
    Ok(body
        .collect()
        .await
        .map_err(|e| Status::unavailable(format!("the S3 server's answer broke off: {e}")))?
        .to_bytes())
}

/// An object's metadata from the headers of a HEAD or GET answer.
fn object_info(key: &str, headers: &http::HeaderMap) -> ObjectInfo {
    let written = httpdate::parse_http_date(header(headers, "last-modified"))
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |since| since.as_nanos() as i64);
    ObjectInfo {
        key: key.to_owned(),
        size: header(headers, "content-length").parse().unwrap_or(0),
        etag: header(headers, "etag").trim_matches('"').to_owned(),
        modified_unix_ns: parse_mtime_metadata(header(headers, MTIME_HEADER)).unwrap_or(written),
    }
}

/// The user metadata that holds an object's modification time, as rclone writes it.
const MTIME_HEADER: &str = "x-amz-meta-mtime";

/// `x-amz-meta-mtime`'s value for a time: Unix seconds with nine decimals.
fn mtime_metadata(unix_ns: i64) -> String {
    format!(
        "{}.{:09}",
        unix_ns.div_euclid(1_000_000_000),
        unix_ns.rem_euclid(1_000_000_000)
    )
}

/// The time an `x-amz-meta-mtime` value names (Unix seconds, a fraction allowed), in
/// nanoseconds; `None` when absent or not a number.
fn parse_mtime_metadata(text: &str) -> Option<i64> {
    let (whole, fraction) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    let seconds: i64 = whole.parse().ok()?;
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = fraction.chars().chain(std::iter::repeat('0')).take(9).collect();
    let nanos: i64 = digits.parse().ok()?;
    seconds.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Nanoseconds since the epoch of an RFC 3339 time, as listings give them (0 if it does
/// not parse).
fn rfc3339_ns(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>()
        .map_or(0, |time| time.as_nanosecond() as i64)
}

/// A header's value, `""` when absent.
fn header<'h>(headers: &'h http::HeaderMap, name: &str) -> &'h str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The status for a request the S3 server refused: throttling and outages are
/// UNAVAILABLE (503 with Retry-After at the gateway), a refused signature or permission
/// is INTERNAL with the server's reason (a misconfiguration, never a 404), and anything
/// else keeps the server's own code and message.
fn refused(action: &str, key: &str, status: StatusCode, body: &Bytes) -> Status {
    refused_with(action, key, status, ErrorBody::parse(body))
}

/// [`refused`], with the server's `<Error>` read already.
fn refused_with(action: &str, key: &str, status: StatusCode, error: ErrorBody) -> Status {
    let ErrorBody { code, message } = error;
    let detail = format!("{action} {key}: the S3 server answered {status} {code} {message}");
    match status {
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS => Status::unavailable(detail),
        StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => {
            tracing::error!("{detail}");
            Status::internal(detail)
        }
        StatusCode::NOT_FOUND => Status::not_found(detail),
        StatusCode::PRECONDITION_FAILED => Status::aborted(detail),
        _ if status.is_server_error() => Status::unavailable(detail),
        _ => Status::internal(detail),
    }
}

/// The new object's ETag from a 200 answer of CopyObject or CompleteMultipartUpload, or
/// the failure in its body: both may fail after their status has been sent.
fn completed(action: &str, subject: &str, body: &Bytes) -> Result<String, Status> {
    match Completion::parse(body) {
        Ok(Completion::Done(etag)) => Ok(etag),
        Ok(Completion::Failed(error)) => Err(refused_with(action, subject, StatusCode::OK, error)),
        Err(e) => Err(Status::internal(format!(
            "the S3 server's answer to {action} {subject} did not parse: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of the tests: what S3 servers escape in XML (`&`, `<`, `>`, `"`, `'`),
    /// what means something in URLs and forms (`%`, `+`, a space), and non-ASCII.
    const KEYS: [&str; 5] = [
        "served/a&b <c>.txt",
        "served/say \"hi\", it's.txt",
        "served/100% a+b.txt",
        "served/&amp;&#39;.txt",
        "served/gr\u{fc}\u{df}e \u{65e5}\u{672c}.txt",
    ];

    fn keys(page: &ListPage) -> Vec<&str> {
        page.objects.iter().map(|o| o.key.as_str()).collect()
    }

    /// As versitygw answers (Go's encoding/xml): no `<EncodingType>`, whatever was asked,
    /// and `"` and `'` as character references.
    #[test]
    fn a_listing_escaped_as_xml_keeps_its_keys() {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>files</Name><Prefix>served/</Prefix><KeyCount>6</KeyCount><MaxKeys>1000</MaxKeys>
  <Delimiter>/</Delimiter><IsTruncated>false</IsTruncated>
  <Contents><Key>served/a&amp;b &lt;c&gt;.txt</Key><LastModified>2026-01-02T03:04:05.5Z</LastModified><ETag>&#34;e1&#34;</ETag><Size>3</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>served/say &#34;hi&#34;, it&#39;s.txt</Key><ETag>&quot;e2&quot;</ETag><Size>4</Size></Contents>
  <Contents><Key>served/100% a+b.txt</Key><Size>5</Size></Contents>
  <Contents><Key>served/&amp;amp;&amp;#39;.txt</Key><Size>6</Size></Contents>
  <Contents><Key>served/gr&#xFC;ße &#26085;本.txt</Key><Size>7</Size></Contents>
  <CommonPrefixes><Prefix>served/sub &amp;&#39;&#34;/</Prefix></CommonPrefixes>
</ListBucketResult>"#;
        let page = listing("served/", body.as_bytes()).unwrap();
        assert_eq!(keys(&page), KEYS);
        assert_eq!(page.prefixes, vec!["served/sub &'\"/".to_owned()]);
        assert_eq!(page.objects[0].etag, "e1");
        assert_eq!(page.objects[0].size, 3);
        assert_eq!(page.objects[0].modified_unix_ns, 1_767_323_045_500_000_000);
        assert_eq!(page.objects[1].etag, "e2");
        assert_eq!(page.objects[2].modified_unix_ns, 0, "no time given");
        assert_eq!(page.next, None);
    }

    /// As AWS S3 and MinIO answer `encoding-type=url`: keys and prefixes percent-encoded,
    /// a space as `+` and a `+` as `%2B`.
    #[test]
    fn a_url_encoded_listing_is_decoded() {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>files</Name><Prefix>served%2F</Prefix><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>
  <Contents><Key>served/a%26b+%3Cc%3E.txt</Key><Size>1</Size></Contents>
  <Contents><Key>served/say+%22hi%22%2C+it%27s.txt</Key><Size>1</Size></Contents>
  <Contents><Key>served/100%25+a%2Bb.txt</Key><Size>1</Size></Contents>
  <Contents><Key>served/%26amp%3B%26%2339%3B.txt</Key><Size>1</Size></Contents>
  <Contents><Key>served/gr%C3%BC%C3%9Fe+%E6%97%A5%E6%9C%AC.txt</Key><Size>1</Size></Contents>
  <CommonPrefixes><Prefix>served/sub+%26%27%22/</Prefix></CommonPrefixes>
</ListBucketResult>"#;
        let page = listing("served/", body.as_bytes()).unwrap();
        assert_eq!(keys(&page), KEYS);
        assert_eq!(page.prefixes, vec!["served/sub &'\"/".to_owned()]);
    }

    #[test]
    fn an_empty_listing_has_nothing_and_no_next_page() {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>files</Name><Prefix>served/none/</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>false</IsTruncated></ListBucketResult>"#;
        let page = listing("served/none/", body.as_bytes()).unwrap();
        assert!(page.objects.is_empty() && page.prefixes.is_empty() && page.next.is_none());
    }

    #[test]
    fn a_truncated_listing_says_where_the_next_page_starts() {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>files</Name><Prefix>served/</Prefix><KeyCount>1</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>true</IsTruncated>
  <Contents><Key>served/a&amp;b</Key><Size>1</Size></Contents>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&amp;+</NextContinuationToken>
</ListBucketResult>"#;
        let page = listing("served/", body.as_bytes()).unwrap();
        assert_eq!(keys(&page), ["served/a&b"]);
        assert_eq!(
            page.next.as_deref(),
            Some("1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&+"),
            "the token as it is, only unescaped"
        );
        let cut = body
            .replace("<NextContinuationToken>", "<Other>")
            .replace("</NextContinuationToken>", "</Other>");
        let refused = listing("served/", cut.as_bytes()).unwrap_err();
        assert_eq!(
            refused.code(),
            tonic::Code::Internal,
            "a truncated page without a token"
        );
        assert!(
            refused.message().contains("did not parse"),
            "{}",
            refused.message()
        );
    }

    #[test]
    fn a_refusal_says_the_servers_code_and_message() {
        let body = Bytes::from_static(
            b"<Error><Details><Code>Nested</Code></Details><Code>NoSuchKey</Code><Message>No &lt;key&gt; &#34;a&amp;b&#34;</Message><Key>a&amp;b</Key></Error>",
        );
        let status = refused("GetObject", "a&b", StatusCode::NOT_FOUND, &body);
        assert_eq!(status.code(), tonic::Code::NotFound);
        assert_eq!(
            status.message(),
            "GetObject a&b: the S3 server answered 404 Not Found NoSuchKey No <key> \"a&b\""
        );
        let throttled = refused("PutObject", "k", StatusCode::SERVICE_UNAVAILABLE, &Bytes::new());
        assert_eq!(throttled.code(), tonic::Code::Unavailable);
    }

    #[test]
    fn a_200_with_an_error_inside_is_a_failure() {
        let late =
            Bytes::from_static(b"<Error><Code>InternalError</Code><Message>try again</Message></Error>");
        let status = completed("CopyObject", "a", &late).unwrap_err();
        assert_eq!(status.code(), tonic::Code::Internal);
        assert!(
            status.message().contains("InternalError try again"),
            "{}",
            status.message()
        );
        let done = Bytes::from_static(b"<CopyObjectResult><ETag>&#34;e&#34;</ETag></CopyObjectResult>");
        assert_eq!(completed("CopyObject", "a", &done).unwrap(), "e");
    }
}
