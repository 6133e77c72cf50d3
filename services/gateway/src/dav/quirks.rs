//! Settings for particular clients' habits. macOS Finder writes an AppleDouble file
//! (`._NAME`) beside every file it copies and a `.DS_Store` into every folder it opens;
//! `--refuse-macos-metadata` answers those writes 403 without storing anything, and
//! `--hide-dotfiles` leaves names starting with `.` out of listings (they can still be
//! read by name). Both are off by default (docs/clients.md).

use crate::http::errors::HttpError;
use http::StatusCode;
use kubedav_api::path::VolumePath;

/// Whether a name is macOS metadata: an AppleDouble file or a `.DS_Store`.
pub fn is_macos_metadata(name: &str) -> bool {
    name.starts_with("._") || name == ".DS_Store"
}

/// 403 for a write that would create `path` when `refuse` is set and its name is macOS
/// metadata.
pub fn refuse_macos_metadata(refuse: bool, path: &VolumePath) -> Result<(), HttpError> {
    if refuse && is_macos_metadata(path.name()) {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            format!(
                "{} is macOS metadata (an AppleDouble file or .DS_Store), which this server \
                 does not store (--refuse-macos-metadata)",
                path.name()
            ),
        ));
    }
    Ok(())
}

/// Whether a listed path is hidden from a listing of `target` by `--hide-dotfiles`: a
/// segment below the target starts with `.` (the target itself is always shown).
pub fn hidden_below(target: &str, listed: &str) -> bool {
    let below = listed.strip_prefix(target).unwrap_or(listed);
    below.split('/').any(|segment| segment.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finders_files_are_recognised() {
        assert!(is_macos_metadata("._report.pdf") && is_macos_metadata(".DS_Store"));
        assert!(!is_macos_metadata(".hidden") && !is_macos_metadata("a._b"));
        let path = VolumePath::parse("docs/._a.txt").unwrap();
        assert_eq!(
            refuse_macos_metadata(true, &path).unwrap_err().status,
            StatusCode::FORBIDDEN
        );
        assert!(refuse_macos_metadata(false, &path).is_ok());
    }

    #[test]
    fn only_dot_segments_below_the_target_hide() {
        assert!(hidden_below("docs", "docs/.git"));
        assert!(hidden_below("", ".config/a"));
        assert!(hidden_below("docs", "docs/.git/config"));
        assert!(!hidden_below(".config", ".config/a"));
        assert!(!hidden_below("docs", "docs/a.b"));
    }
}
