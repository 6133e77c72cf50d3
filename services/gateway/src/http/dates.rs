//! Dates as WebDAV and HTTP write them.

fn whole_seconds(unix_ns: i64) -> i64 {
    unix_ns.div_euclid(1_000_000_000)
}

/// An HTTP date (IMF-fixdate), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(unix_ns: i64) -> String {
    let mut out = String::with_capacity(29);
    write_http_date(&mut out, unix_ns);
    out
}

/// An RFC 3339 UTC timestamp, e.g. `1994-11-06T08:49:37Z` (DAV:creationdate).
pub fn rfc3339(unix_ns: i64) -> String {
    let mut out = String::with_capacity(20);
    write_rfc3339(&mut out, unix_ns);
    out
}

/// Appends [`http_date`]'s text to `out` (no allocation of its own). Times before 1970
/// are written as 1970-01-01, as HTTP dates cannot go earlier in practice.
pub fn write_http_date(out: &mut String, unix_ns: i64) {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = whole_seconds(unix_ns).max(0);
    let days = secs / 86_400;
    let (year, month, day) = civil(days);
    out.push_str(DAYS[(days % 7) as usize]);
    out.push_str(", ");
    push_digits(out, day, 2);
    out.push(' ');
    out.push_str(MONTHS[(month - 1) as usize]);
    out.push(' ');
    push_digits(out, year, 4);
    out.push(' ');
    push_time(out, secs % 86_400);
    out.push_str(" GMT");
}

/// Appends [`rfc3339`]'s text to `out` (no allocation of its own).
pub fn write_rfc3339(out: &mut String, unix_ns: i64) {
    let secs = whole_seconds(unix_ns);
    let (year, month, day) = civil(secs.div_euclid(86_400));
    push_digits(out, year, 4);
    out.push('-');
    push_digits(out, month, 2);
    out.push('-');
    push_digits(out, day, 2);
    out.push('T');
    push_time(out, secs.rem_euclid(86_400));
    out.push('Z');
}

/// Year, month (1-12) and day of month of a day count since 1970-01-01 (Howard
/// Hinnant's civil-from-days algorithm).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// `HH:MM:SS` of a second of the day.
fn push_time(out: &mut String, second_of_day: i64) {
    push_digits(out, second_of_day / 3600, 2);
    out.push(':');
    push_digits(out, second_of_day % 3600 / 60, 2);
    out.push(':');
    push_digits(out, second_of_day % 60, 2);
}

/// `value` in decimal, zero-padded to `width` digits (wider values keep all digits;
/// negative years are written as 0). Two dates per PROPFIND entry come through here, so
/// the common fields (two digits, a four-digit year) take no loop.
fn push_digits(out: &mut String, value: i64, width: usize) {
    let value = value.max(0) as u64;
    let digit = |place: u64| char::from(b'0' + (value / place % 10) as u8);
    match (width, value) {
        (2, 0..=99) => {
            out.push(digit(10));
            out.push(digit(1));
        }
        (4, 0..=9999) => {
            out.push(digit(1000));
            out.push(digit(100));
            out.push(digit(10));
            out.push(digit(1));
        }
        _ => {
            let text = value.to_string();
            for _ in text.len()..width {
                out.push('0');
            }
            out.push_str(&text);
        }
    }
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
        // The same text as the httpdate crate (which parses them), every day for 60 years
        // and across leap years.
        for day in 0..(60 * 366) {
            let secs = day * 86_400 + (day * 7919) % 86_400;
            let expected =
                httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64));
            assert_eq!(http_date(secs * 1_000_000_000), expected);
        }
        assert_eq!(http_date(-5), "Thu, 01 Jan 1970 00:00:00 GMT");
    }

    #[test]
    fn digits_are_padded_never_cut() {
        let digits = |value, width| {
            let mut out = String::new();
            push_digits(&mut out, value, width);
            out
        };
        assert_eq!(digits(7, 2), "07");
        assert_eq!(digits(0, 4), "0000");
        assert_eq!(digits(12_345, 4), "12345");
        assert_eq!(digits(-3, 2), "00");
        assert_eq!(digits(i64::MAX, 1), i64::MAX.to_string());
    }
}
