//! Fuzzes URL path decoding: any request path must decode or be refused (400 or 414),
//! never panic; a decoded path never holds an empty, `.` or `..` segment, a slash inside a
//! segment or a NUL; and the href written for it decodes back to the same path, so a
//! client following an href from a listing reaches the same resource.
#![no_main]

use kubedav_api::path::VolumePath;
use kubedav_gateway::http::paths::BasePath;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    if VolumePath::parse(raw).is_ok() {
        // A wire path fileio accepts is one the gateway could have produced.
        let path = VolumePath::parse(raw).unwrap();
        check(&path);
    }
    let base = BasePath::root();
    let Ok(decoded) = base.decode(raw) else { return };
    check(&decoded.path);
    for collection in [false, true] {
        let again = base
            .decode(&base.href(&decoded.path, collection))
            .expect("an href decodes");
        assert_eq!(again.path, decoded.path, "href round trip");
        assert_eq!(again.trailing_slash, collection && !decoded.path.is_root());
    }
});

fn check(path: &VolumePath) {
    for segment in path.segments() {
        assert!(!segment.is_empty(), "an empty segment in {path:?}");
        assert!(segment != "." && segment != "..", "a dot segment in {path:?}");
        assert!(!segment.contains(['/', '\0']), "a slash or NUL in {path:?}");
    }
}
