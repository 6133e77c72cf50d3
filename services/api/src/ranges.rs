//! Byte ranges (RFC 9110 14.1.2) resolved against a file's size: one definition for
//! fileio, which reads them, and the gateway's cache, which cuts them from kept copies.

use crate::pb::fileio::v1::{ByteRangeSpec, ResolvedRange};

/// Resolves the requested ranges against a file of `size` bytes (RFC 9110 14.1.2).
/// No ranges means the whole file. Unsatisfiable ranges are left out, so an empty result
/// for a non-empty request means 416.
pub fn resolve_ranges(specs: &[ByteRangeSpec], size: u64) -> Vec<ResolvedRange> {
    if specs.is_empty() {
        return if size == 0 {
            Vec::new()
        } else {
            vec![ResolvedRange {
                first: 0,
                last: size - 1,
            }]
        };
    }
    specs
        .iter()
        .filter_map(|spec| match (spec.first, spec.last) {
            (Some(first), _) if first >= size => None,
            (Some(first), Some(last)) if last < first => None,
            (Some(first), last) => Some(ResolvedRange {
                first,
                last: last.map_or(size - 1, |l| l.min(size - 1)),
            }),
            (None, Some(suffix)) if suffix > 0 && size > 0 => Some(ResolvedRange {
                first: size.saturating_sub(suffix),
                last: size - 1,
            }),
            (None, _) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(first: Option<u64>, last: Option<u64>) -> ByteRangeSpec {
        ByteRangeSpec { first, last }
    }
    fn pairs(ranges: Vec<ResolvedRange>) -> Vec<(u64, u64)> {
        ranges.into_iter().map(|r| (r.first, r.last)).collect()
    }

    #[test]
    fn whole_file_when_no_range_is_asked() {
        assert_eq!(pairs(resolve_ranges(&[], 10)), vec![(0, 9)]);
        assert!(resolve_ranges(&[], 0).is_empty());
    }

    #[test]
    fn ranges_are_clamped_and_unsatisfiable_ones_dropped() {
        let specs = [
            spec(Some(0), Some(4)),
            spec(Some(8), Some(100)),
            spec(Some(5), None),
            spec(None, Some(3)),
            spec(None, Some(50)),
            spec(Some(10), Some(12)),
            spec(None, Some(0)),
        ];
        assert_eq!(
            pairs(resolve_ranges(&specs, 10)),
            vec![(0, 4), (8, 9), (5, 9), (7, 9), (0, 9)]
        );
        assert!(resolve_ranges(&[spec(Some(0), None)], 0).is_empty());
    }
}
