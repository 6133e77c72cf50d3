//! What sync clients add to WebDAV: ownCloud's `X-OC-Mtime` and `OC-Checksum` headers
//! and `oc:checksums` property (rclone's `owncloud` and `nextcloud` vendors, the
//! Nextcloud and ownCloud desktop clients), RFC 9530's `Content-Digest`, `Repr-Digest`
//! and `Want-Repr-Digest`, and the properties that set a file's modification time
//! (`DAV:lastmodified`, `DAV:getlastmodified`, Windows' `Win32LastModifiedTime`).
//! docs/clients.md says which client sends what.

use crate::http::errors::HttpError;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use http::HeaderMap;
use kubedav_api::checksums::{Algorithm, Checksum, Stored, is_reserved, parse_hex, to_hex};
use kubedav_api::fileio::FileInfo;
use kubedav_api::pb::fileio::v1::DeadProperty;

/// ownCloud's property namespace (`oc:`).
pub const OWNCLOUD: &str = "http://owncloud.org/ns";
/// The namespace of Windows' Mini-Redirector properties.
pub const MICROSOFT: &str = "urn:schemas-microsoft-com:";

/// The checksums a PUT asks fileio to check and to compute.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct UploadChecks {
    /// Checksums the body must have.
    pub expected: Vec<Checksum>,
    /// Further algorithms to compute and keep.
    pub compute: Vec<&'static str>,
    /// Whether to answer with `OC-Checksum`.
    pub owncloud: bool,
    /// Whether to answer with `Repr-Digest`.
    pub digest: bool,
}

impl UploadChecks {
    /// What a PUT's headers ask for: `OC-Checksum` (one `ALGORITHM:hex`; ownCloud then
    /// keeps SHA1, MD5 and ADLER32, as ownCloud does, so a client comparing either hash
    /// finds it), `Content-Digest` and `Repr-Digest` (checked for the algorithms kubedav
    /// computes, others ignored as RFC 9530 asks), and `Want-Repr-Digest` (sha-256 or
    /// sha-512 kept for later GETs).
    pub fn of(headers: &HeaderMap) -> Result<Self, HttpError> {
        let mut checks = UploadChecks::default();
        if let Some(value) = headers.get("oc-checksum") {
            let text = value
                .to_str()
                .map_err(|_| HttpError::bad_request("OC-Checksum is not text"))?;
            for item in text.split_whitespace() {
                checks.expected.push(owncloud_checksum(item)?);
            }
            checks.owncloud = true;
            checks.compute.extend(Algorithm::OWNCLOUD.map(Algorithm::name));
        }
        for name in ["content-digest", "repr-digest"] {
            for value in headers.get_all(name) {
                let text = value
                    .to_str()
                    .map_err(|_| HttpError::bad_request(format!("{name} is not text")))?;
                for (algorithm, bytes) in digest_members(text, name)? {
                    checks.expected.push(Checksum {
                        algorithm: algorithm.name().to_owned(),
                        hex: to_hex(&bytes),
                    });
                    checks.digest = true;
                }
            }
        }
        if let Some(algorithm) = wanted_digest(headers, WANT_REPR_DIGEST) {
            checks.compute.push(algorithm.name());
            checks.digest = true;
        }
        Ok(checks)
    }
}

/// One `ALGORITHM:hex` of `OC-Checksum`.
fn owncloud_checksum(item: &str) -> Result<Checksum, HttpError> {
    let (name, hex) = item.split_once(':').ok_or_else(|| {
        HttpError::bad_request(format!(
            "OC-Checksum {item:?} is not ALGORITHM:hex (for example SHA1:2aae6c35c94fcfb415dbe95f408b9ce91ee846ed)"
        ))
    })?;
    let algorithm = Algorithm::from_name(name).ok_or_else(|| {
        HttpError::bad_request(format!(
            "OC-Checksum names {name:?}, which kubedav does not compute; use SHA1, MD5 or ADLER32"
        ))
    })?;
    if parse_hex(algorithm, hex).is_none() {
        return Err(HttpError::bad_request(format!(
            "OC-Checksum's {name} value {hex:?} is not {} hex digits",
            algorithm.value_len() * 2
        )));
    }
    Ok(Checksum {
        algorithm: algorithm.name().to_owned(),
        hex: hex.to_ascii_lowercase(),
    })
}

/// The members of a `Content-Digest` or `Repr-Digest` field (an RFC 8941 dictionary of
/// byte sequences, `sha-256=:base64:`) whose algorithm kubedav computes.
fn digest_members(text: &str, field: &str) -> Result<Vec<(Algorithm, Vec<u8>)>, HttpError> {
    let mut members = Vec::new();
    for member in text.split(',') {
        let member = member.trim();
        if member.is_empty() {
            continue;
        }
        let malformed = || {
            HttpError::bad_request(format!(
                "{field} member {member:?} is not algorithm=:base64: (RFC 9530), for example sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"
            ))
        };
        let (key, value) = member.split_once('=').ok_or_else(malformed)?;
        let Some(algorithm) = Algorithm::from_digest_key(key.trim()) else {
            continue;
        };
        let value = value.trim();
        let encoded = value
            .strip_prefix(':')
            .and_then(|v| v.strip_suffix(':'))
            .ok_or_else(malformed)?;
        let bytes = BASE64.decode(encoded).map_err(|_| malformed())?;
        if bytes.len() != algorithm.value_len() {
            return Err(malformed());
        }
        members.push((algorithm, bytes));
    }
    Ok(members)
}

/// `Want-Repr-Digest` (RFC 9530), by name: a lookup by text parses the name each time.
pub const WANT_REPR_DIGEST: http::HeaderName = http::HeaderName::from_static("want-repr-digest");

/// The algorithm a `Want-Repr-Digest` (or `Want-Content-Digest`) prefers among those
/// kubedav keeps: the highest weight above 0, sha-256 on a tie.
pub fn wanted_digest(headers: &HeaderMap, field: http::HeaderName) -> Option<Algorithm> {
    let mut best: Option<(Algorithm, u32)> = None;
    for value in headers.get_all(field) {
        let Ok(text) = value.to_str() else { continue };
        for member in text.split(',') {
            let (key, weight) = member.split_once('=').unwrap_or((member, "1"));
            let Some(algorithm) = Algorithm::from_digest_key(key.trim()) else {
                continue;
            };
            let Ok(weight) = weight.trim().parse::<u32>() else {
                continue;
            };
            if weight > 0 && best.is_none_or(|(_, w)| weight > w) {
                best = Some((algorithm, weight));
            }
        }
    }
    best.map(|(algorithm, _)| algorithm)
}

/// `Repr-Digest`'s value for the checksums of `algorithms` found in `sums`.
pub fn repr_digest(sums: &[Checksum], algorithms: &[Algorithm]) -> Option<String> {
    let members: Vec<String> = sums
        .iter()
        .filter_map(|sum| {
            let algorithm = Algorithm::from_name(&sum.algorithm)?;
            let key = algorithm.digest_key()?;
            if !algorithms.contains(&algorithm) {
                return None;
            }
            let bytes = parse_hex(algorithm, &sum.hex)?;
            Some(format!("{key}=:{}:", BASE64.encode(bytes)))
        })
        .collect();
    (!members.is_empty()).then(|| members.join(", "))
}

/// `OC-Checksum`'s value (ownCloud answers with its SHA1): the first of SHA1, MD5 and
/// ADLER32 kept.
pub fn owncloud_header(sums: &[Checksum]) -> Option<String> {
    Algorithm::OWNCLOUD.into_iter().find_map(|algorithm| {
        sums.iter()
            .find(|s| s.algorithm == algorithm.name())
            .map(|s| format!("{}:{}", s.algorithm, s.hex))
    })
}

/// `X-OC-Mtime`: Unix seconds (a fraction allowed), as nanoseconds.
pub fn oc_mtime(headers: &HeaderMap) -> Result<Option<i64>, HttpError> {
    let Some(value) = headers.get("x-oc-mtime") else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("");
    unix_seconds(text.trim()).map(Some).ok_or_else(|| {
        HttpError::bad_request(format!(
            "X-OC-Mtime {text:?} is not a time in Unix seconds (for example 1700000000)"
        ))
    })
}

/// Unix seconds, with an optional fraction, as nanoseconds; `None` if not a number in
/// the range of years 1 to 9999.
fn unix_seconds(text: &str) -> Option<i64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let seconds: i64 = whole.parse().ok()?;
    if !(-62_135_596_800..=253_402_300_799).contains(&seconds)
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut nanos = 0i64;
    for (i, digit) in fraction.bytes().take(9).enumerate() {
        nanos += i64::from(digit - b'0') * 10i64.pow(8 - i as u32);
    }
    Some(seconds * 1_000_000_000 + if seconds < 0 { -nanos } else { nanos })
}

/// Whether a PROPPATCH property sets the modification time rather than being stored:
/// `DAV:lastmodified` (ownCloud, rclone: Unix seconds), `DAV:getlastmodified` and
/// `Win32LastModifiedTime` (an HTTP date, or Unix seconds).
pub fn is_modification_time(namespace: &str, local: &str) -> bool {
    matches!(
        (namespace, local),
        ("DAV:", "lastmodified") | ("DAV:", "getlastmodified") | (MICROSOFT, "Win32LastModifiedTime")
    )
}

/// The time a modification-time property's text content names, in nanoseconds.
pub fn modification_time(text: &str) -> Result<i64, HttpError> {
    let text = text.trim();
    if let Some(nanos) = unix_seconds(text) {
        return Ok(nanos);
    }
    httpdate::parse_http_date(text)
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|since| since.as_nanos() as i64)
        .ok_or_else(|| {
            HttpError::bad_request(format!(
                "{text:?} is not a modification time: send Unix seconds or an HTTP date \
                 (Wed, 25 Nov 2026 10:00:00 GMT)"
            ))
        })
}

/// Whether a property is `oc:checksums`, which kubedav computes from the content.
pub fn is_owncloud_checksums(namespace: &str, local: &str) -> bool {
    namespace == OWNCLOUD && local == "checksums"
}

/// Replaces fileio's reserved properties in a listed entry by what a client sees: the
/// checksums as `oc:checksums` when they are those of this very content, nothing
/// otherwise. Costs nothing for an entry without them.
pub fn present(properties: &mut Vec<DeadProperty>, info: &FileInfo) {
    if !properties.iter().any(|p| is_reserved(&p.namespace)) {
        return;
    }
    let sums = Stored::find(properties).and_then(|stored| stored.valid_for(&info.etag));
    properties.retain(|p| !is_reserved(&p.namespace));
    let Some(sums) = sums else { return };
    let mut value = String::from("<checksum xmlns=\"http://owncloud.org/ns\">");
    for (i, sum) in sums
        .iter()
        .filter(|s| Algorithm::OWNCLOUD.iter().any(|a| a.name() == s.algorithm))
        .enumerate()
    {
        if i > 0 {
            value.push(' ');
        }
        value.push_str(&sum.algorithm);
        value.push(':');
        value.push_str(&sum.hex);
    }
    value.push_str("</checksum>");
    properties.push(DeadProperty {
        namespace: OWNCLOUD.to_owned(),
        name: "checksums".to_owned(),
        value: value.into(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (http::HeaderName::from_static(k), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn oc_checksum_asks_for_the_owncloud_three() {
        let checks = UploadChecks::of(&headers(&[(
            "oc-checksum",
            "SHA1:2AAE6C35C94FCFB415DBE95F408B9CE91EE846ED",
        )]))
        .unwrap();
        assert_eq!(checks.expected[0].hex, "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed");
        assert_eq!(checks.compute, ["SHA1", "MD5", "ADLER32"]);
        assert!(checks.owncloud && !checks.digest);
        for bad in ["SHA1", "CRC32:00", "MD5:123"] {
            let error = UploadChecks::of(&headers(&[("oc-checksum", bad)])).unwrap_err();
            assert_eq!(error.status, http::StatusCode::BAD_REQUEST, "{bad}");
        }
    }

    #[test]
    fn content_digest_is_checked_for_known_algorithms_only() {
        let checks = UploadChecks::of(&headers(&[(
            "content-digest",
            "unixsum=:AAA=:, sha-256=:uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=:",
        )]))
        .unwrap();
        assert_eq!(checks.expected.len(), 1);
        assert_eq!(
            checks.expected[0].hex,
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
        assert!(UploadChecks::of(&headers(&[("content-digest", "sha-256=:short:")])).is_err());
        assert!(UploadChecks::of(&headers(&[("content-digest", "sha-256=nocolons")])).is_err());
    }

    #[test]
    fn want_repr_digest_prefers_the_heaviest() {
        let h = headers(&[("want-repr-digest", "sha-256=3, sha-512=5, md5=9")]);
        assert_eq!(wanted_digest(&h, WANT_REPR_DIGEST), Some(Algorithm::Sha512));
        let h = headers(&[("want-repr-digest", "sha-256=0")]);
        assert_eq!(wanted_digest(&h, WANT_REPR_DIGEST), None);
        let sums = [Checksum {
            algorithm: "SHA256".into(),
            hex: "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9".into(),
        }];
        assert_eq!(
            repr_digest(&sums, &[Algorithm::Sha256]).unwrap(),
            "sha-256=:uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=:"
        );
    }

    #[test]
    fn times_are_unix_seconds_or_http_dates() {
        assert_eq!(unix_seconds("1700000000"), Some(1_700_000_000_000_000_000));
        assert_eq!(unix_seconds("1.5"), Some(1_500_000_000));
        assert_eq!(unix_seconds("abc"), None);
        assert_eq!(unix_seconds("99999999999999"), None);
        assert_eq!(
            modification_time("Thu, 01 Jan 1970 00:00:10 GMT").unwrap(),
            10_000_000_000
        );
        assert!(modification_time("yesterday").is_err());
        let h = headers(&[("x-oc-mtime", "1700000000")]);
        assert_eq!(oc_mtime(&h).unwrap(), Some(1_700_000_000_000_000_000));
        assert!(oc_mtime(&headers(&[("x-oc-mtime", "soon")])).is_err());
    }

    #[test]
    fn checksums_show_only_for_their_own_content() {
        let stored = Stored {
            etag: "e1".into(),
            sums: vec![
                Checksum {
                    algorithm: "SHA1".into(),
                    hex: "aa".into(),
                },
                Checksum {
                    algorithm: "MD5".into(),
                    hex: "bb".into(),
                },
            ],
        };
        let info = |etag: &str| FileInfo {
            etag: etag.into(),
            ..Default::default()
        };
        let mut props = vec![stored.to_property()];
        present(&mut props, &info("e1"));
        assert_eq!(props.len(), 1);
        assert_eq!(
            &props[0].value[..],
            b"<checksum xmlns=\"http://owncloud.org/ns\">SHA1:aa MD5:bb</checksum>"
        );
        let mut props = vec![stored.to_property()];
        present(&mut props, &info("e2"));
        assert!(props.is_empty());
    }
}
