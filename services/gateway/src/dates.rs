//! Dates as WebDAV and HTTP write them.

use std::time::{Duration, UNIX_EPOCH};

fn whole_seconds(unix_ns: i64) -> i64 {
    unix_ns.div_euclid(1_000_000_000)
}

/// An HTTP date (IMF-fixdate), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(unix_ns: i64) -> String {
    let secs = u64::try_from(whole_seconds(unix_ns)).unwrap_or(0);
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs))
}

/// An RFC 3339 UTC timestamp, e.g. `1994-11-06T08:49:37Z` (DAV:creationdate).
pub fn rfc3339(unix_ns: i64) -> String {
    let secs = whole_seconds(unix_ns);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(784_111_777_000_000_000), "1994-11-06T08:49:37Z");
        assert_eq!(rfc3339(951_782_400_000_000_000), "2000-02-29T00:00:00Z");
        assert_eq!(
            http_date(784_111_777_999_999_999),
            "Sun, 06 Nov 1994 08:49:37 GMT"
        );
    }
}
