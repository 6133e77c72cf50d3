//! [`LeftOut`]: the members a copy leaves out ([`kubedav_api::fileio::CopyRequest`]'s
//! `leave_out`): what the caller may not read, each with everything beneath it.

use kubedav_api::path::VolumePath;
use std::collections::HashSet;
use tonic::Status;

/// The most paths one copy may leave out.
pub const MOST: usize = 10_000;

/// The paths a copy of a source leaves out, relative to that source.
#[derive(Debug, Default)]
pub struct LeftOut {
    /// Each left-out path below the source, as `a/b` for `SOURCE/a/b`.
    relative: HashSet<String>,
}

impl LeftOut {
    /// The paths in `leave_out`, each of which must lie strictly beneath `source`.
    pub fn parse(source: &VolumePath, leave_out: &[String]) -> Result<Self, Status> {
        if leave_out.len() > MOST {
            return Err(Status::invalid_argument(format!(
                "a copy leaves out at most {MOST} paths, not {}",
                leave_out.len()
            )));
        }
        let mut relative = HashSet::with_capacity(leave_out.len());
        for path in leave_out {
            let path =
                VolumePath::parse(path).map_err(|e| Status::invalid_argument(format!("leave_out: {e}")))?;
            let inside = match source.is_root() {
                true => Some(path.as_str()),
                false => path
                    .as_str()
                    .strip_prefix(source.as_str())
                    .and_then(|rest| rest.strip_prefix('/')),
            };
            match inside {
                Some(rest) if !rest.is_empty() => relative.insert(rest.to_owned()),
                _ => {
                    return Err(Status::invalid_argument(format!(
                        "leave_out: {path} is not beneath the source {source}"
                    )));
                }
            };
        }
        Ok(Self { relative })
    }

    /// Whether nothing is left out.
    pub fn is_empty(&self) -> bool {
        self.relative.is_empty()
    }

    /// Whether the member at `relative` (below the source, `a/b/c.txt`; a collection's
    /// marker may end with `/`) is left out: it or a collection above it is named.
    pub fn covers(&self, relative: &str) -> bool {
        if self.relative.is_empty() {
            return false;
        }
        let relative = relative.strip_suffix('/').unwrap_or(relative);
        relative
            .match_indices('/')
            .map(|(at, _)| &relative[..at])
            .chain(std::iter::once(relative))
            .any(|prefix| self.relative.contains(prefix))
    }

    /// Each left-out path, relative to the source.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.relative.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn left_out(source: &str, paths: &[&str]) -> Result<LeftOut, Status> {
        let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
        LeftOut::parse(&VolumePath::parse(source).unwrap(), &paths)
    }

    #[test]
    fn a_left_out_collection_covers_everything_beneath_it() {
        let out = left_out("a", &["a/secret", "a/b/file.txt"]).unwrap();
        for covered in ["secret", "secret/", "secret/x.txt", "secret/deep/y", "b/file.txt"] {
            assert!(out.covers(covered), "{covered}");
        }
        for kept in ["secrets", "secret.txt", "b", "b/", "b/file.txt2", "x/secret"] {
            assert!(!out.covers(kept), "{kept}");
        }
        let root = left_out("", &["home/bob"]).unwrap();
        assert!(root.covers("home/bob/diary.txt") && !root.covers("home/alice"));
    }

    #[test]
    fn only_paths_beneath_the_source_may_be_left_out() {
        assert!(left_out("a", &["a"]).is_err());
        assert!(left_out("a", &["ab/c"]).is_err());
        assert!(left_out("a", &["b/c"]).is_err());
        assert!(left_out("a", &["a/../b"]).is_err());
        assert!(left_out("", &[""]).is_err());
        let many: Vec<String> = (0..=MOST).map(|i| format!("a/{i}")).collect();
        assert!(LeftOut::parse(&VolumePath::parse("a").unwrap(), &many).is_err());
    }
}
