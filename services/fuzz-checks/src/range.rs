//! Fuzzes the `Range` header parser and the resolution of its ranges against a file:
//! any header must parse or be ignored, never panic; an accepted header holds at most
//! `MAX_RANGES` ranges and is never counted as too many; and every resolved range lies
//! inside the file.

use kubedav_gateway::http::range::{MAX_RANGES, parse, too_many};

/// Checks one input: returns when every property holds, panics naming the one that
/// does not.
pub fn check(data: &[u8]) {
    if data.len() < 8 {
        return;
    }
    let size = u64::from_le_bytes(data[..8].try_into().unwrap()) >> (data[0] % 64);
    let Ok(value) = std::str::from_utf8(&data[8..]) else {
        return;
    };
    let many = too_many(value);
    let Some(specs) = parse(value) else { return };
    assert!(!many, "an accepted header counted as too many ranges");
    assert!(!specs.is_empty() && specs.len() <= MAX_RANGES);
    for spec in &specs {
        assert!(spec.first.is_some() || spec.last.is_some());
        if let (Some(first), Some(last)) = (spec.first, spec.last) {
            assert!(first <= last);
        }
    }
    for range in kubedav_fileio::read::resolve_ranges(&specs, size) {
        assert!(
            range.first <= range.last && range.last < size,
            "{range:?} outside {size} bytes"
        );
    }
}
