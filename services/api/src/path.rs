//! Volume paths: the one definition of what a path on the wire may be.
//!
//! A [`VolumePath`] is relative to the volume root, `/`-separated, UTF-8, with no empty,
//! `.` or `..` segment, no NUL or other control character (U+0001 to U+001F, U+007F:
//! XML 1.0, in which every WebDAV answer is written, cannot carry most of them, so one
//! such name would break the listing of its collection for every client) and no segment
//! longer than [`MAX_NAME_BYTES`]. The empty path is the root. Names on the volume that
//! break these rules (written there by other means) are left out of listings. Names with
//! the [`RESERVED_PREFIX`] belong to fileio (in-flight uploads, property indexes), and
//! the name [`RESERVED_AREA`] to what kubedav keeps for its users: both are refused, so
//! no client can read, overwrite or list them ([`is_reserved_name`]).
//!
//! Validation here is a first line of defence and a source of clear 400 messages; the
//! real guarantee that nothing outside the root is reached is fileio resolving every
//! path with `openat2(RESOLVE_BENEATH)`.

use std::fmt;

/// Longest single name, in bytes (Linux `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;
/// Longest whole path, in bytes (Linux `PATH_MAX` less room for the root).
pub const MAX_PATH_BYTES: usize = 3840;
/// Prefix of every name fileio keeps for itself: the temporary files of uploads and
/// copies on a volume ([`TEMPORARY_PREFIX`]) and the property indexes in a bucket. Never
/// a valid client name.
pub const RESERVED_PREFIX: &str = ".kubedav-";
/// The folder at the root of the served tree that holds what kubedav keeps for its
/// users besides their files (`{base}/.kubedav/`: app passwords, shares, links, trash,
/// versions, upload state). The name is reserved at every depth, as the
/// [`RESERVED_PREFIX`] is, so no client path can take it or move a folder of that name
/// to where it would count.
pub const RESERVED_AREA: &str = ".kubedav";
/// Prefix of fileio's temporary files on a volume, which it sweeps at start.
pub const TEMPORARY_PREFIX: &str = ".kubedav-upload-";

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path is longer than [`MAX_PATH_BYTES`].
    #[error("path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    /// One segment is longer than [`MAX_NAME_BYTES`].
    #[error("a path segment is longer than {MAX_NAME_BYTES} bytes")]
    NameTooLong,
    /// A `.` or `..` segment.
    #[error("path segments '.' and '..' are not allowed")]
    DotSegment,
    /// A NUL byte.
    #[error("path contains a NUL byte")]
    Nul,
    /// Another control character.
    #[error("a name contains the control character U+{0:04X}; WebDAV answers are XML, which cannot carry it")]
    Control(u32),
    /// A segment that contained an encoded slash (`%2F`).
    #[error("path segment contains an encoded '/'")]
    EncodedSlash,
    /// Percent-decoding gave bytes that are not UTF-8.
    #[error("path is not valid UTF-8 once percent-decoded")]
    NotUtf8,
    /// A reserved name.
    #[error(
        "the name '{RESERVED_AREA}' and names starting with '{RESERVED_PREFIX}' are reserved for kubedav's own use; choose another name"
    )]
    Reserved,
    /// Anything else (an empty segment on the wire, a leading slash on the wire).
    #[error("malformed path: {0}")]
    Malformed(&'static str),
}

/// A validated volume-relative path. See the module docs for the rules.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct VolumePath(String);

impl VolumePath {
    /// The volume root.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// Validates a path as it travels on the wire (no leading or trailing slash, no empty
    /// segments).
    pub fn parse(wire: &str) -> Result<Self, PathError> {
        if wire.is_empty() {
            return Ok(Self::root());
        }
        if wire.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong);
        }
        for segment in wire.split('/') {
            if segment.is_empty() {
                return Err(PathError::Malformed("empty segment"));
            }
            check_segment(segment)?;
        }
        Ok(Self(wire.to_owned()))
    }

    /// Builds a path from already-decoded segments (the gateway decodes the URL), skipping
    /// empty ones (`//` in a URL).
    pub fn from_segments<'a>(segments: impl IntoIterator<Item = &'a str>) -> Result<Self, PathError> {
        let mut out = String::with_capacity(64);
        for segment in segments {
            if segment.is_empty() {
                continue;
            }
            if segment.contains('/') {
                return Err(PathError::EncodedSlash);
            }
            check_segment(segment)?;
            if !out.is_empty() {
                out.push('/');
            }
            out.push_str(segment);
            if out.len() > MAX_PATH_BYTES {
                return Err(PathError::TooLong);
            }
        }
        Ok(Self(out))
    }

    /// The wire form ("" for the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the volume root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The parent path and the last name; `None` for the root.
    pub fn split_last(&self) -> Option<(VolumePath, &str)> {
        if self.is_root() {
            return None;
        }
        Some(match self.0.rsplit_once('/') {
            Some((parent, name)) => (VolumePath(parent.to_owned()), name),
            None => (VolumePath::root(), self.0.as_str()),
        })
    }

    /// The last name ("" for the root).
    pub fn name(&self) -> &str {
        last_name(&self.0)
    }

    /// This path with one more name appended. The name must be a valid segment.
    pub fn join(&self, name: &str) -> Result<VolumePath, PathError> {
        check_segment(name)?;
        if name.contains('/') || name.is_empty() {
            return Err(PathError::Malformed("a name may not be empty or contain '/'"));
        }
        let joined = if self.is_root() {
            name.to_owned()
        } else {
            let mut joined = String::with_capacity(self.0.len() + 1 + name.len());
            joined.push_str(&self.0);
            joined.push('/');
            joined.push_str(name);
            joined
        };
        if joined.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong);
        }
        Ok(VolumePath(joined))
    }

    /// Whether `self` is `other` or lies below it.
    pub fn starts_with(&self, other: &VolumePath) -> bool {
        other.is_root()
            || self.0 == other.0
            || (self.0.starts_with(&other.0) && self.0.as_bytes().get(other.0.len()) == Some(&b'/'))
    }

    /// The segments, root first.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|s| !s.is_empty())
    }
}

fn check_segment(segment: &str) -> Result<(), PathError> {
    if segment == "." || segment == ".." {
        return Err(PathError::DotSegment);
    }
    if segment.len() > MAX_NAME_BYTES {
        return Err(PathError::NameTooLong);
    }
    // One pass for both: NUL is a control character, named on its own.
    match segment.bytes().find(u8::is_ascii_control) {
        Some(0) => return Err(PathError::Nul),
        Some(c) => return Err(PathError::Control(u32::from(c))),
        None => {}
    }
    if is_reserved_name(segment) {
        return Err(PathError::Reserved);
    }
    Ok(())
}

/// Whether `name` belongs to kubedav: [`RESERVED_AREA`], or starts with
/// [`RESERVED_PREFIX`]. Such names are never addressed by clients nor listed to them.
pub fn is_reserved_name(name: &str) -> bool {
    name.starts_with(RESERVED_AREA)
        && (name.len() == RESERVED_AREA.len() || name[RESERVED_AREA.len()..].starts_with('-'))
}

impl fmt::Display for VolumePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/{}", self.0)
    }
}

impl fmt::Debug for VolumePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VolumePath({:?})", self.0)
    }
}

impl From<PathError> for tonic::Status {
    fn from(e: PathError) -> Self {
        tonic::Status::invalid_argument(e.to_string())
    }
}

/// The last name of a path in its wire form (segments joined by `/`, "" for the root),
/// as [`VolumePath::name`] gives it, without parsing the path first.
pub fn last_name(wire: &str) -> &str {
    wire.rsplit('/').next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_simple_paths() {
        assert!(VolumePath::parse("").unwrap().is_root());
        let p = VolumePath::parse("a/b c/d.txt").unwrap();
        assert_eq!(p.as_str(), "a/b c/d.txt");
        let (parent, name) = p.split_last().unwrap();
        assert_eq!(parent.as_str(), "a/b c");
        assert_eq!(name, "d.txt");
        assert_eq!(
            VolumePath::parse("x").unwrap().split_last().unwrap().0,
            VolumePath::root()
        );
    }

    #[test]
    fn refuses_traversal_and_garbage() {
        assert_eq!(VolumePath::parse("a/../b"), Err(PathError::DotSegment));
        assert_eq!(VolumePath::parse(".."), Err(PathError::DotSegment));
        assert_eq!(VolumePath::parse("./a"), Err(PathError::DotSegment));
        assert_eq!(VolumePath::parse("a\0b"), Err(PathError::Nul));
        assert_eq!(VolumePath::parse("a\u{1}b"), Err(PathError::Control(1)));
        assert_eq!(VolumePath::parse("d/a\rb"), Err(PathError::Control(13)));
        assert_eq!(VolumePath::parse("a\u{7f}"), Err(PathError::Control(0x7f)));
        assert!(
            VolumePath::parse("caf\u{e9} \u{85}").is_ok(),
            "C1 and Latin-1 are fine"
        );
        assert!(matches!(VolumePath::parse("/a"), Err(PathError::Malformed(_))));
        assert!(matches!(VolumePath::parse("a//b"), Err(PathError::Malformed(_))));
        assert_eq!(VolumePath::parse(&"x".repeat(256)), Err(PathError::NameTooLong));
        assert_eq!(
            VolumePath::parse(&["abc"; 1000].join("/")),
            Err(PathError::TooLong)
        );
        assert_eq!(VolumePath::parse(".kubedav-upload-1"), Err(PathError::Reserved));
        assert_eq!(VolumePath::parse(".kubedav"), Err(PathError::Reserved));
        assert_eq!(VolumePath::parse(".kubedav/trash"), Err(PathError::Reserved));
        assert_eq!(VolumePath::parse("a/.kubedav"), Err(PathError::Reserved));
        assert_eq!(VolumePath::root().join(".kubedav"), Err(PathError::Reserved));
        for allowed in [".kubedavx", ".kubedav.d", "kubedav", ".kube", "a/.kubedav2"] {
            assert!(VolumePath::parse(allowed).is_ok(), "{allowed}");
        }
        assert_eq!(
            VolumePath::parse("a/.kubedav-properties"),
            Err(PathError::Reserved)
        );
    }

    #[test]
    fn from_segments_skips_empty_and_refuses_slashes() {
        let p = VolumePath::from_segments(["", "a", "", "b"]).unwrap();
        assert_eq!(p.as_str(), "a/b");
        assert_eq!(VolumePath::from_segments(["a/b"]), Err(PathError::EncodedSlash));
        assert_eq!(VolumePath::from_segments([".."]), Err(PathError::DotSegment));
    }

    #[test]
    fn prefix_relation_respects_segment_boundaries() {
        let a = VolumePath::parse("a/b").unwrap();
        assert!(a.starts_with(&VolumePath::parse("a").unwrap()));
        assert!(a.starts_with(&VolumePath::root()));
        assert!(a.starts_with(&a));
        assert!(!VolumePath::parse("a/bc").unwrap().starts_with(&a));
    }
}
