//! WebDAV request headers (RFC 4918 section 10), each refused with a 400 that names it.

use crate::errors::HttpError;
use crate::paths::{RequestPath, decode};
use http::{HeaderMap, StatusCode, header};

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
    let Some(value) = headers.get("depth") else {
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
    match headers.get("overwrite").map(|v| v.to_str().map(str::trim)) {
        None => Ok(true),
        Some(Ok("T" | "t")) => Ok(true),
        Some(Ok("F" | "f")) => Ok(false),
        Some(_) => Err(HttpError::bad_request("the Overwrite header must be T or F")),
    }
}

/// Parses `Destination`: an absolute URI on this server or an absolute path. Another
/// host gives 502 (kubedav does not copy or move across servers).
pub fn destination(headers: &HeaderMap) -> Result<RequestPath, HttpError> {
    let value = headers
        .get("destination")
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
    decode(path).map_err(|e| HttpError::bad_request(format!("the Destination path is invalid: {e}")))
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
