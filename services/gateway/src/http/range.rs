//! The `Range` request header (RFC 9110 14.2), `bytes` unit only.

use kubedav_api::pb::fileio::v1::ByteRangeSpec;

/// Most ranges honoured in one request. A longer list is refused (416), which RFC 9110
/// 14.2 allows for "many small ranges" and which defeats range-amplification attacks.
pub const MAX_RANGES: usize = 64;

/// Whether a `Range` header asks for more than [`MAX_RANGES`] ranges (counted by their
/// separators, before any parsing).
pub fn too_many(value: &str) -> bool {
    let Some((unit, set)) = value.split_once('=') else {
        return false;
    };
    unit.trim().eq_ignore_ascii_case("bytes")
        && set.split(',').filter(|part| !part.trim().is_empty()).count() > MAX_RANGES
}

/// Parses a `Range` header value. `None` means "ignore the header and send the whole
/// file": another unit, a syntax error, or (see [`too_many`], which callers check first)
/// too many ranges.
pub fn parse(value: &str) -> Option<Vec<ByteRangeSpec>> {
    let (unit, set) = value.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return None;
    }
    let mut specs = Vec::new();
    for part in set.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (first, last) = part.split_once('-')?;
        let (first, last) = (first.trim(), last.trim());
        let spec = match (first.is_empty(), last.is_empty()) {
            (true, true) => return None,
            (true, false) => ByteRangeSpec {
                first: None,
                last: Some(number(last)?),
            },
            (false, true) => ByteRangeSpec {
                first: Some(number(first)?),
                last: None,
            },
            (false, false) => {
                let (first, last) = (number(first)?, number(last)?);
                if last < first {
                    return None;
                }
                ByteRangeSpec {
                    first: Some(first),
                    last: Some(last),
                }
            }
        };
        specs.push(spec);
        if specs.len() > MAX_RANGES {
            return None;
        }
    }
    if specs.is_empty() { None } else { Some(specs) }
}

fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(first: Option<u64>, last: Option<u64>) -> ByteRangeSpec {
        ByteRangeSpec { first, last }
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(parse("bytes=0-499"), Some(vec![spec(Some(0), Some(499))]));
        assert_eq!(parse("bytes=500-"), Some(vec![spec(Some(500), None)]));
        assert_eq!(parse("bytes=-200"), Some(vec![spec(None, Some(200))]));
        assert_eq!(
            parse("Bytes = 0-0, 5-9 ,-1"),
            Some(vec![
                spec(Some(0), Some(0)),
                spec(Some(5), Some(9)),
                spec(None, Some(1))
            ])
        );
    }

    #[test]
    fn ignores_what_it_cannot_honour() {
        for bad in [
            "items=0-1",
            "bytes=",
            "bytes=-",
            "bytes=5-2",
            "bytes=a-b",
            "bytes=1-2-3",
            "bytes=+1-2",
            "0-1",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        let many = format!(
            "bytes={}",
            (0..=MAX_RANGES)
                .map(|i| format!("{i}-{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert_eq!(parse(&many), None);
        assert!(too_many(&many));
        let most = format!(
            "bytes={}",
            (0..MAX_RANGES)
                .map(|i| format!("{i}-{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert!(!too_many(&most));
        assert!(
            !too_many(&many.replace("bytes", "items")),
            "other units are ignored"
        );
        assert_eq!(parse(&most).map(|r| r.len()), Some(MAX_RANGES));
    }
}
