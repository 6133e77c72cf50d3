//! WebDAV request headers (RFC 4918 section 10), each refused with a 400 that names it.

use crate::http::errors::HttpError;
use crate::http::paths::{BasePath, RequestPath};
use http::{HeaderMap, StatusCode, header};

/// The WebDAV request headers' names (RFC 4918 section 10). Looked up by a
/// `HeaderName`, not by text, which would be parsed and classified on every lookup.
pub mod names {
    use http::HeaderName;
    /// `Depth`
    pub const DEPTH: HeaderName = HeaderName::from_static("depth");
    /// `Overwrite`
    pub const OVERWRITE: HeaderName = HeaderName::from_static("overwrite");
    /// `Destination`
    pub const DESTINATION: HeaderName = HeaderName::from_static("destination");
    /// `Timeout`
    pub const TIMEOUT: HeaderName = HeaderName::from_static("timeout");
    /// `Lock-Token`
    pub const LOCK_TOKEN: HeaderName = HeaderName::from_static("lock-token");
    /// `If`
    pub const IF: HeaderName = HeaderName::from_static("if");
}

/// The Depth header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// `0`
    Zero,
    /// `1`
    One,
    /// `infinity`
    Infinity,
}

/// Parses `Depth`; `default` applies when it is absent.
pub fn depth(headers: &HeaderMap, default: Depth) -> Result<Depth, HttpError> {
    let Some(value) = headers.get(names::DEPTH) else {
        return Ok(default);
    };
    match value.to_str().map(str::trim) {
        Ok("0") => Ok(Depth::Zero),
        Ok("1") => Ok(Depth::One),
        Ok(v) if v.eq_ignore_ascii_case("infinity") => Ok(Depth::Infinity),
        _ => Err(HttpError::bad_request(
            "the Depth header must be 0, 1 or infinity",
        )),
    }
}

/// Parses `Overwrite` (default T).
pub fn overwrite(headers: &HeaderMap) -> Result<bool, HttpError> {
    match headers.get(names::OVERWRITE).map(|v| v.to_str().map(str::trim)) {
        None => Ok(true),
        Some(Ok("T" | "t")) => Ok(true),
        Some(Ok("F" | "f")) => Ok(false),
        Some(_) => Err(HttpError::bad_request("the Overwrite header must be T or F")),
    }
}

/// Parses `Destination`: an absolute URI on this server or an absolute path. Another
/// host gives 502 (kubedav does not copy or move across servers), and so does a path
/// outside the gateway's `base` path.
pub fn destination(base: &BasePath, headers: &HeaderMap) -> Result<RequestPath, HttpError> {
    let value = headers
        .get(names::DESTINATION)
        .ok_or_else(|| HttpError::bad_request("the Destination header is missing"))?
        .to_str()
        .map_err(|_| HttpError::bad_request("the Destination header is not ASCII; percent-encode it"))?
        .trim();
    let path = if value.starts_with('/') {
        value.to_owned()
    } else {
        let uri: http::Uri = value
            .parse()
            .map_err(|_| HttpError::bad_request("the Destination header is not a URI or an absolute path"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(HttpError::bad_request(
                "the Destination header must be an http(s) URI or an absolute path",
            ));
        }
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if !same_authority(authority, host, uri.scheme_str().unwrap_or("http")) {
            return Err(HttpError::new(
                StatusCode::BAD_GATEWAY,
                format!(
                    "the Destination {value} is on another server; kubedav copies and moves only within itself"
                ),
            ));
        }
        uri.path().to_owned()
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    base.decode(path).map_err(|e| match e {
        crate::http::paths::DecodeError::OutsideBase(_) => HttpError::new(
            StatusCode::BAD_GATEWAY,
            format!("the Destination {path} is not on this server: {e}"),
        ),
        e => HttpError::bad_request(format!("the Destination path is invalid: {e}")),
    })
}

/// Parses `Timeout` (RFC 4918 10.7): the first acceptable of a comma-separated list of
/// `Second-N` and `Infinite`. Returns seconds, 0 for Infinite or absent (the locks
/// service then grants its maximum).
pub fn timeout(headers: &HeaderMap) -> Result<u64, HttpError> {
    let Some(value) = headers.get(names::TIMEOUT) else {
        return Ok(0);
    };
    let bad =
        || HttpError::bad_request("the Timeout header must be Second-N or Infinite (or a list of them)");
    let value = value.to_str().map_err(|_| bad())?;
    if let Some(item) = value.split(',').map(str::trim).next() {
        if item.eq_ignore_ascii_case("infinite") {
            return Ok(0);
        }
        let seconds = item
            .get(..7)
            .filter(|p| p.eq_ignore_ascii_case("second-"))
            .and_then(|_| item[7..].parse::<u64>().ok())
            .ok_or_else(bad)?;
        return Ok(seconds.max(1));
    }
    Err(bad())
}

/// Parses `Lock-Token` (RFC 4918 10.5): one Coded-URL, `<urn:uuid:...>`.
pub fn lock_token(headers: &HeaderMap) -> Result<String, HttpError> {
    let value = headers
        .get(names::LOCK_TOKEN)
        .ok_or_else(|| HttpError::bad_request("UNLOCK needs the Lock-Token header"))?
        .to_str()
        .map_err(|_| HttpError::bad_request("the Lock-Token header is not ASCII"))?
        .trim();
    value
        .strip_prefix('<')
        .and_then(|v| v.strip_suffix('>'))
        .filter(|t| !t.is_empty() && !t.contains(['<', '>', ' ']))
        .map(str::to_owned)
        .ok_or_else(|| {
            HttpError::bad_request("the Lock-Token header must be a token in angle brackets: <urn:uuid:...>")
        })
}

fn same_authority(destination: &str, host: &str, scheme: &str) -> bool {
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    let normal = |a: &str| {
        let a = a.to_ascii_lowercase();
        a.strip_suffix(default_port).map(str::to_owned).unwrap_or(a)
    };
    host.is_empty() || normal(destination) == normal(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn destination(headers: &HeaderMap) -> Result<RequestPath, HttpError> {
        super::destination(&BasePath::root(), headers)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (header::HeaderName::from_static(k), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn depth_values() {
        assert_eq!(depth(&headers(&[]), Depth::Infinity).unwrap(), Depth::Infinity);
        assert_eq!(
            depth(&headers(&[("depth", "0")]), Depth::One).unwrap(),
            Depth::Zero
        );
        assert_eq!(
            depth(&headers(&[("depth", "Infinity")]), Depth::One).unwrap(),
            Depth::Infinity
        );
        assert!(
            depth(&headers(&[("depth", "2")]), Depth::One)
                .unwrap_err()
                .message
                .contains("Depth")
        );
    }

    #[test]
    fn overwrite_values() {
        assert!(overwrite(&headers(&[])).unwrap());
        assert!(!overwrite(&headers(&[("overwrite", "F")])).unwrap());
        assert!(
            overwrite(&headers(&[("overwrite", "yes")]))
                .unwrap_err()
                .message
                .contains("Overwrite")
        );
    }

    #[test]
    fn timeouts_and_tokens() {
        assert_eq!(timeout(&headers(&[])).unwrap(), 0);
        assert_eq!(timeout(&headers(&[("timeout", "Second-3600")])).unwrap(), 3600);
        assert_eq!(
            timeout(&headers(&[("timeout", "Infinite, Second-4100000000")])).unwrap(),
            0
        );
        for bad in ["Minute-5", "Second-", "Second-x", "soon"] {
            assert!(
                timeout(&headers(&[("timeout", bad)]))
                    .unwrap_err()
                    .message
                    .contains("Timeout"),
                "{bad}"
            );
        }
        assert_eq!(
            lock_token(&headers(&[("lock-token", "<urn:uuid:1>")])).unwrap(),
            "urn:uuid:1"
        );
        for bad in ["urn:uuid:1", "<>", "<a b>"] {
            assert!(
                lock_token(&headers(&[("lock-token", bad)]))
                    .unwrap_err()
                    .message
                    .contains("Lock-Token"),
                "{bad}"
            );
        }
    }

    #[test]
    fn destinations() {
        let h = headers(&[
            ("host", "dav.example:8080"),
            ("destination", "http://DAV.example:8080/a%20b/c"),
        ]);
        assert_eq!(destination(&h).unwrap().path.as_str(), "a b/c");
        let h = headers(&[
            ("host", "dav.example"),
            ("destination", "http://dav.example:80/x/"),
        ]);
        let d = destination(&h).unwrap();
        assert_eq!((d.path.as_str(), d.trailing_slash), ("x", true));
        let h = headers(&[("host", "h"), ("destination", "/p/q")]);
        assert_eq!(destination(&h).unwrap().path.as_str(), "p/q");
        let h = headers(&[("host", "h"), ("destination", "http://elsewhere/p")]);
        assert_eq!(destination(&h).unwrap_err().status, StatusCode::BAD_GATEWAY);
        for bad in ["ftp://h/p", "not a uri", "http://h/../etc"] {
            let h = headers(&[("host", "h"), ("destination", bad)]);
            assert_eq!(
                destination(&h).unwrap_err().status,
                StatusCode::BAD_REQUEST,
                "{bad}"
            );
        }
        assert!(
            destination(&headers(&[]))
                .unwrap_err()
                .message
                .contains("missing")
        );
    }
}
