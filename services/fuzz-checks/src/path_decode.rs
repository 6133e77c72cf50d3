//! Fuzzes URL path decoding: any request path must decode or be refused (400 or 414),
//! never panic; a decoded path never holds an empty, `.` or `..` segment, a slash inside a
//! segment or a NUL; and the href written for it decodes back to the same path, so a
//! client following an href from a listing reaches the same resource.

use kubedav_api::path::VolumePath;
use kubedav_gateway::http::paths::BasePath;

/// Checks one input: returns when every property holds, panics naming the one that
/// does not.
pub fn check(data: &[u8]) {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    if VolumePath::parse(raw).is_ok() {
        // A wire path fileio accepts is one the gateway could have produced.
        let path = VolumePath::parse(raw).unwrap();
        check_segments(&path);
    }
    let base = BasePath::root();
    let Ok(decoded) = base.decode(raw) else { return };
    check_segments(&decoded.path);
    for collection in [false, true] {
        let again = base
            .decode(&base.href(&decoded.path, collection))
            .expect("an href decodes");
        assert_eq!(again.path, decoded.path, "href round trip");
        assert_eq!(again.trailing_slash, collection && !decoded.path.is_root());
    }
}

fn check_segments(path: &VolumePath) {
    for segment in path.segments() {
        assert!(!segment.is_empty(), "an empty segment in {path:?}");
        assert!(segment != "." && segment != "..", "a dot segment in {path:?}");
        assert!(!segment.contains(['/', '\0']), "a slash or NUL in {path:?}");
    }
}
