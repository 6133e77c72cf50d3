//! Reading what an S3 server answers: bodies, listings, object metadata, refusals.

use super::*;

/// One page of a ListObjectsV2 answer about `prefix`, as rusty-s3 reads it: keys
/// URL-decoded when the server encoded them (rusty-s3 asks for `encoding-type=url`, and
/// decodes when the answer says `<EncodingType>url`), taken as they are otherwise (a
/// server that ignores the parameter, as versitygw does, escapes them as XML).
pub(super) fn listing(prefix: &str, body: &[u8]) -> Result<ListPage, Status> {
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
pub(super) async fn whole(
    response: http::Response<hyper::body::Incoming>,
) -> Result<(StatusCode, http::HeaderMap, Bytes), Status> {
    let (parts, body) = response.into_parts();
    Ok((parts.status, parts.headers, collect(body).await?))
}

/// The whole of an answer's body; UNAVAILABLE when it breaks off.
pub(super) async fn collect(body: hyper::body::Incoming) -> Result<Bytes, Status> {
    Ok(body
        .collect()
        .await
        .map_err(|e| Status::unavailable(format!("the S3 server's answer broke off: {e}")))?
        .to_bytes())
}

/// An object's metadata from the headers of a HEAD or GET answer.
pub(super) fn object_info(key: &str, headers: &http::HeaderMap) -> ObjectInfo {
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
pub(super) const MTIME_HEADER: &str = "x-amz-meta-mtime";

/// `x-amz-meta-mtime`'s value for a time: Unix seconds with nine decimals.
pub(super) fn mtime_metadata(unix_ns: i64) -> String {
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
pub(super) fn rfc3339_ns(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>()
        .map_or(0, |time| time.as_nanosecond() as i64)
}

/// A header's value, `""` when absent.
pub(super) fn header<'h>(headers: &'h http::HeaderMap, name: &str) -> &'h str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The status for a request the S3 server refused: throttling and outages are
/// UNAVAILABLE (503 with Retry-After at the gateway), a refused signature or permission
/// is INTERNAL with the server's reason (a misconfiguration, never a 404), and anything
/// else keeps the server's own code and message.
pub(super) fn refused(action: &str, key: &str, status: StatusCode, body: &Bytes) -> Status {
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
pub(super) fn completed(action: &str, subject: &str, body: &Bytes) -> Result<String, Status> {
    match Completion::parse(body) {
        Ok(Completion::Done(etag)) => Ok(etag),
        Ok(Completion::Failed(error)) => Err(refused_with(action, subject, StatusCode::OK, error)),
        Err(e) => Err(Status::internal(format!(
            "the S3 server's answer to {action} {subject} did not parse: {e}"
        ))),
    }
}
