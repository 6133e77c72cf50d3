//! Request paths: percent-decoding a URL path into a [`VolumePath`], and encoding
//! volume paths back into hrefs.
//!
//! Decoding works segment by segment on the raw path, so an encoded slash (`%2F`) can
//! never create a segment boundary and an encoded dot segment (`%2e%2e`) is refused like a
//! literal one.

use crate::http::errors::HttpError;
use http::StatusCode;
use kubedav_api::path::{MAX_PATH_BYTES, PathError, VolumePath};
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};

/// A decoded request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPath {
    /// The volume path.
    pub path: VolumePath,
    /// Whether the URL ended with a slash (a collection was named).
    pub trailing_slash: bool,
}

/// Why a URL path was refused, with the HTTP status to send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The path is too long: 414.
    #[error("the request path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    /// Anything else: 400.
    #[error("{0}")]
    Invalid(PathError),
    /// Not below the base path (`--base-path`, or a link's URL): 404.
    #[error("{}", .0.outside())]
    OutsideBase(BasePath),
}

impl From<DecodeError> for HttpError {
    fn from(e: DecodeError) -> Self {
        match e {
            DecodeError::TooLong => HttpError::new(StatusCode::URI_TOO_LONG, e.to_string()),
            DecodeError::Invalid(inner) => HttpError::bad_request(format!("invalid request path: {inner}")),
            DecodeError::OutsideBase(_) => HttpError::new(StatusCode::NOT_FOUND, e.to_string()),
        }
    }
}

/// The decoded path of a request below the gateway's `base` path, or the 400, 404 or
/// 414 that explains why it is refused ([`DecodeError`]).
pub fn request_path<B>(base: &BasePath, request: &http::Request<B>) -> Result<RequestPath, HttpError> {
    Ok(base.decode(request.uri().path())?)
}

tokio::task_local! {
    /// The base path of a request made through a public link: its URL prefix, mounted
    /// on the link's path.
    static MOUNT: BasePath;
}

/// The base path the request being handled is under: a link's mount while one is in
/// force ([`mounted`]), else `configured` (the gateway's `--base-path`, borrowed: most
/// requests pay no reference count for it).
pub fn current(configured: &BasePath) -> CurrentBase<'_> {
    match MOUNT.try_with(Clone::clone) {
        Ok(mounted) => CurrentBase::Mounted(mounted),
        Err(_) => CurrentBase::Configured(configured),
    }
}

/// [`current`]'s answer: the configured base path, borrowed, or a link's mount.
pub enum CurrentBase<'a> {
    /// `--base-path`.
    Configured(&'a BasePath),
    /// A link's mount.
    Mounted(BasePath),
}

impl std::ops::Deref for CurrentBase<'_> {
    type Target = BasePath;

    fn deref(&self) -> &BasePath {
        match self {
            CurrentBase::Configured(base) => base,
            CurrentBase::Mounted(base) => base,
        }
    }
}

/// Runs `future` with `base` as the base path of everything it decodes and writes.
pub async fn mounted<F: std::future::Future>(base: BasePath, future: F) -> F::Output {
    MOUNT.scope(base, future).await
}

/// Whether a mount is in force (a link's, or Nextcloud's files alias).
pub fn is_mounted() -> bool {
    MOUNT.try_with(|_| ()).is_ok()
}

/// Runs `f` with `base` as the base path of everything it decodes and writes.
pub fn mounted_now<R>(base: BasePath, f: impl FnOnce() -> R) -> R {
    MOUNT.sync_scope(base, f)
}

/// The path prefix a gateway is served under (`--base-path`, e.g. `/dav`), without a
/// trailing slash; empty when served at the root. Each gateway has its own, in its
/// [`GatewayConfig`](crate::GatewayConfig): request paths and `Destination`s must start
/// with it, and every href it writes does. Cloning it is a reference count, not a copy.
///
/// A public link's requests are under a *mounted* base path ([`BasePath::mounted`]):
/// its URL prefix stands for the link's path, so what lies below the prefix is decoded
/// beneath that path, and hrefs of that path and beneath are written below the prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BasePath {
    prefix: std::sync::Arc<str>,
    /// The volume path the prefix stands for, when mounted.
    root: Option<std::sync::Arc<VolumePath>>,
}

impl BasePath {
    /// Served at the root: no prefix.
    pub fn root() -> Self {
        Self {
            prefix: std::sync::Arc::from(""),
            root: None,
        }
    }

    /// `prefix` (already as it is written in URLs) standing for `root`.
    pub fn mounted(prefix: &str, root: VolumePath) -> Self {
        Self {
            prefix: std::sync::Arc::from(prefix.trim_end_matches('/')),
            root: Some(std::sync::Arc::new(root)),
        }
    }

    /// The prefix (`/dav`), or `""` at the root.
    pub fn as_str(&self) -> &str {
        &self.prefix
    }

    /// Whether this is the root (no prefix).
    pub fn is_root(&self) -> bool {
        self.prefix.is_empty()
    }

    /// The volume path a mounted base stands for (a link's folder); `None` when not
    /// mounted.
    pub fn mount_root(&self) -> Option<&VolumePath> {
        self.root.as_deref()
    }

    /// `path` as the clients of this base see it: `/a/b` beneath the root of a mounted
    /// base (`/` for the root itself), the whole path otherwise.
    pub fn shown(&self, path: &VolumePath) -> String {
        match self.root.as_deref() {
            Some(root) if !root.is_root() => match path.as_str().strip_prefix(root.as_str()) {
                Some(rest) if rest.starts_with('/') => rest.to_owned(),
                _ => "/".to_owned(),
            },
            _ => path.to_string(),
        }
    }

    /// What a path outside it is told: a link's URL (which holds its token) is never
    /// repeated.
    fn outside(&self) -> String {
        match self.root {
            Some(_) => "this link serves only paths below its own URL".to_owned(),
            None => format!("this server serves only paths below {}", self.prefix),
        }
    }

    /// Decodes a raw URL path (as in the request line, without the query) below this
    /// base path.
    pub fn decode(&self, raw: &str) -> Result<RequestPath, DecodeError> {
        let base = self.as_str();
        let raw = match raw.strip_prefix(base) {
            _ if base.is_empty() => raw,
            Some("") => "/",
            Some(rest) if rest.starts_with('/') => rest,
            _ => return Err(DecodeError::OutsideBase(self.clone())),
        };
        let below = decode_below(raw)?;
        let Some(root) = &self.root else {
            return Ok(below);
        };
        let path =
            VolumePath::from_segments(root.segments().chain(below.path.segments())).map_err(|e| match e {
                PathError::TooLong => DecodeError::TooLong,
                other => DecodeError::Invalid(other),
            })?;
        Ok(RequestPath {
            trailing_slash: raw.ends_with('/') && !path.is_root(),
            path,
        })
    }

    /// The absolute href of a volume path below this base path; collections get a
    /// trailing slash.
    pub fn href(&self, path: &VolumePath, collection: bool) -> String {
        let mut out = String::with_capacity(self.prefix.len() + path.as_str().len() + 2);
        self.write_href(&mut out, path, collection);
        out
    }

    /// Appends [`BasePath::href`]'s text to `out`. The percent-encoding leaves no
    /// character that XML must escape (`&`, `'`, `"`, `<` and `>` are all encoded).
    pub fn write_href(&self, out: &mut String, path: &VolumePath, collection: bool) {
        self.write_wire_href(out, path.as_str(), collection);
    }

    /// Appends the href of a path in its wire form (segments joined by `/`, "" for the
    /// root, as fileio sends them), as [`BasePath::write_href`] does, without parsing it
    /// into a [`VolumePath`] first: what a listing does for every entry.
    pub fn write_wire_href(&self, out: &mut String, wire: &str, collection: bool) {
        out.push_str(self.as_str());
        out.push('/');
        // Mounted: the path below the root; what lies outside it (the root's ancestors,
        // which a lock's root can be) is written as the root.
        let wire = match self.root.as_deref() {
            None => wire,
            Some(root) if root.is_root() => wire,
            Some(root) => match wire.strip_prefix(root.as_str()) {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
                _ => "",
            },
        };
        for (i, segment) in wire.split('/').filter(|s| !s.is_empty()).enumerate() {
            if i > 0 {
                out.push('/');
            }
            if segment.bytes().all(stays_in_href) {
                out.push_str(segment);
            } else {
                out.extend(utf8_percent_encode(segment, SEGMENT));
            }
        }
        if collection && !wire.trim_start_matches('/').is_empty() {
            out.push('/');
        }
    }
}

impl Default for BasePath {
    fn default() -> Self {
        Self::root()
    }
}

/// The prefix as it is written into hrefs: `/dav`, or nothing at the root.
impl std::fmt::Display for BasePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for BasePath {
    type Err = String;

    /// A plain absolute path (`/dav`, `/team/files/`; a trailing slash is dropped), or
    /// `""` or `/` for the root. Its segments are written into hrefs as they are, so
    /// each must need no percent-encoding.
    fn from_str(base: &str) -> Result<Self, String> {
        let trimmed = base.trim_end_matches('/');
        if trimmed.is_empty() {
            return Ok(Self::root());
        }
        let valid = trimmed.starts_with('/')
            && trimmed[1..].split('/').all(|segment| {
                !segment.is_empty() && segment != "." && segment != ".." && segment.bytes().all(stays_in_href)
            });
        if !valid {
            return Err(format!(
                "{base:?} is not an absolute path of plain segments, such as /dav"
            ));
        }
        Ok(Self {
            prefix: std::sync::Arc::from(trimmed),
            root: None,
        })
    }
}

/// Decodes a raw URL path below the base path (the base already taken off).
fn decode_below(raw: &str) -> Result<RequestPath, DecodeError> {
    if !raw.starts_with('/') {
        return Err(DecodeError::Invalid(PathError::Malformed(
            "the path must start with '/'",
        )));
    }
    if raw.len() > MAX_PATH_BYTES * 3 {
        return Err(DecodeError::TooLong);
    }
    let path = if raw.contains('%') {
        let mut segments = Vec::new();
        for raw_segment in raw.split('/') {
            let decoded = percent_decode_str(raw_segment)
                .decode_utf8()
                .map_err(|_| DecodeError::Invalid(PathError::NotUtf8))?;
            segments.push(decoded);
        }
        VolumePath::from_segments(segments.iter().map(|s| s.as_ref()))
    } else {
        // Nothing escaped: the segments are the text's own, checked as they are.
        VolumePath::from_segments(raw.split('/'))
    }
    .map_err(|e| match e {
        PathError::TooLong => DecodeError::TooLong,
        other => DecodeError::Invalid(other),
    })?;
    let trailing_slash = raw.ends_with('/') && !path.is_root();
    Ok(RequestPath { path, trailing_slash })
}

/// Characters escaped in an href segment: everything but unreserved characters and a
/// few sub-delimiters that are safe in a path segment.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}')
    .add(b'\'')
    .add(b';')
    .add(b'&');

/// Whether `byte` is written as itself in an href segment: the complement of [`SEGMENT`]
/// (checked by a test), tested without percent_encoding's iterator, as most names need
/// no encoding at all.
fn stays_in_href(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!$()*+,-.:=@_~".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(raw: &str) -> Result<RequestPath, DecodeError> {
        BasePath::root().decode(raw)
    }

    fn href(path: &VolumePath, collection: bool) -> String {
        BasePath::root().href(path, collection)
    }

    fn ok(raw: &str) -> String {
        decode(raw).unwrap().path.as_str().to_owned()
    }

    #[test]
    fn decodes_percent_escapes_and_collapses_slashes() {
        assert_eq!(ok("/"), "");
        assert_eq!(ok("/a%20b/c%C3%A9.txt"), "a b/cé.txt");
        assert_eq!(ok("//a///b/"), "a/b");
        assert!(decode("/dir/").unwrap().trailing_slash);
        assert!(!decode("/").unwrap().trailing_slash);
    }

    #[test]
    fn refuses_traversal_in_every_spelling() {
        for raw in [
            "/../etc/passwd",
            "/a/../../b",
            "/%2e%2e/x",
            "/%2E%2E/x",
            "/.%2e/x",
            "/a/./b",
        ] {
            assert_eq!(
                decode(raw),
                Err(DecodeError::Invalid(PathError::DotSegment)),
                "{raw}"
            );
        }
        assert_eq!(
            decode("/a%2f..%2fb"),
            Err(DecodeError::Invalid(PathError::EncodedSlash))
        );
        assert_eq!(
            decode("/a%2Fb"),
            Err(DecodeError::Invalid(PathError::EncodedSlash))
        );
        assert_eq!(decode("/a%00b"), Err(DecodeError::Invalid(PathError::Nul)));
        assert_eq!(decode("/%ff"), Err(DecodeError::Invalid(PathError::NotUtf8)));
        assert_eq!(
            decode("x"),
            Err(DecodeError::Invalid(PathError::Malformed(
                "the path must start with '/'"
            )))
        );
    }

    #[test]
    fn refuses_overlong_paths_and_names() {
        let long = format!("/{}", ["abcdefgh"; 600].join("/"));
        assert_eq!(decode(&long), Err(DecodeError::TooLong));
        let long_name = format!("/{}", "n".repeat(300));
        assert_eq!(
            decode(&long_name),
            Err(DecodeError::Invalid(PathError::NameTooLong))
        );
    }

    #[test]
    fn a_mounted_base_decodes_beneath_its_root_and_writes_below_its_prefix() {
        let root = VolumePath::parse("home/alice/drop").unwrap();
        let base = BasePath::mounted("/dav/.kubedav/s/tok", root.clone());
        let decoded = base.decode("/dav/.kubedav/s/tok/a%20b/c.txt").unwrap();
        assert_eq!(decoded.path.as_str(), "home/alice/drop/a b/c.txt");
        let top = base.decode("/dav/.kubedav/s/tok/").unwrap();
        assert_eq!((top.path, top.trailing_slash), (root.clone(), true));
        assert_eq!(base.href(&decoded.path, false), "/dav/.kubedav/s/tok/a%20b/c.txt");
        assert_eq!(base.href(&root, true), "/dav/.kubedav/s/tok/");
        // Nothing above the root is reachable, in any spelling.
        for outside in [
            "/dav/.kubedav/s/tok/../x",
            "/dav/.kubedav/s/tok/%2e%2e/x",
            "/dav/other",
            "/dav/.kubedav/s/tokx/y",
        ] {
            assert!(base.decode(outside).is_err(), "{outside}");
        }
        // An ancestor of the root (a lock's root) is written as the root.
        assert_eq!(
            base.href(&VolumePath::parse("home/alice").unwrap(), true),
            "/dav/.kubedav/s/tok/"
        );
    }

    #[test]
    fn the_fast_check_agrees_with_the_encode_set() {
        for byte in 0..=u8::MAX {
            let encoded = percent_encoding::percent_encode(&[byte], SEGMENT).to_string();
            assert_eq!(stays_in_href(byte), encoded.len() == 1, "byte {byte:#04x}");
        }
    }

    #[test]
    fn hrefs_round_trip() {
        let path = VolumePath::parse("a b/100%/x#y?/é").unwrap();
        let encoded = href(&path, false);
        assert_eq!(encoded, "/a%20b/100%25/x%23y%3F/%C3%A9");
        assert_eq!(decode(&encoded).unwrap().path, path);
        assert_eq!(href(&VolumePath::parse("d").unwrap(), true), "/d/");
        assert_eq!(href(&VolumePath::root(), true), "/");
    }
}
