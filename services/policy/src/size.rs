//! Sizes as people write them in a policy: `10GiB`, `500MB`, `1048576`.

/// Bytes in `text`: a whole number with an optional unit, binary (`KiB`, `MiB`, `GiB`,
/// `TiB`) or decimal (`KB`, `MB`, `GB`, `TB`), `B` or none for bytes. `None` when it is
/// none of those or does not fit in 64 bits.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return None,
    };
    number.checked_mul(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_binary_and_decimal() {
        assert_eq!(parse_size("10GiB"), Some(10 << 30));
        assert_eq!(parse_size("100 GiB"), Some(100 << 30));
        assert_eq!(parse_size("500MB"), Some(500_000_000));
        assert_eq!(parse_size("1048576"), Some(1 << 20));
        assert_eq!(parse_size("7B"), Some(7));
        for bad in ["", "GiB", "1.5GiB", "10gib", "-1", "99999999999TiB"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }
}
