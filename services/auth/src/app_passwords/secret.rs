//! What an app password looks like: `kdv-{id}-{5 groups of 5}`, 42 characters of
//! lowercase letters and digits without the ones people confuse (`0 o 1 l`), so it can
//! be read aloud, typed on a phone, and fits every client's password field (davfs2 caps
//! passwords near 256). The id (8 characters) names the record; the 25 secret characters
//! carry 125 bits from the system's random source.

/// The letters of an app password: 32 symbols, 5 bits each.
const ALPHABET: &[u8; 32] = b"abcdefghijkmnpqrstuvwxyz23456789";

/// The mark every app password starts with (and secret scanners can look for).
pub const MARK: &str = "kdv-";
/// Characters of an id.
pub const ID_LENGTH: usize = 8;
/// Groups of the secret, and characters per group.
const GROUPS: usize = 5;
const GROUP_LENGTH: usize = 5;
/// Length of a whole app password.
pub const LENGTH: usize = MARK.len() + ID_LENGTH + GROUPS * (GROUP_LENGTH + 1);

fn random_symbols(count: usize) -> Result<String, String> {
    let mut bytes = vec![0u8; count];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for an app password: {e}"))?;
    Ok(bytes
        .iter()
        .map(|b| ALPHABET[usize::from(b & 31)] as char)
        .collect())
}

/// A new id.
pub fn new_id() -> Result<String, String> {
    random_symbols(ID_LENGTH)
}

/// A new app password with the id `id`.
pub fn new_password(id: &str) -> Result<String, String> {
    let secret = random_symbols(GROUPS * GROUP_LENGTH)?;
    let mut password = format!("{MARK}{id}");
    for group in secret.as_bytes().chunks(GROUP_LENGTH) {
        password.push('-');
        password.push_str(std::str::from_utf8(group).expect("ASCII"));
    }
    Ok(password)
}

/// Whether each byte is a symbol of [`ALPHABET`]: one load a byte, where `contains`
/// would scan the alphabet (every Basic request with a password is asked this).
const SYMBOL: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < ALPHABET.len() {
        table[ALPHABET[i] as usize] = true;
        i += 1;
    }
    table
};

/// The id of `password` if it has the shape of an app password.
pub fn id_of(password: &str) -> Option<&str> {
    let bytes = password.as_bytes();
    if bytes.len() != LENGTH || !password.starts_with(MARK) {
        return None;
    }
    let start = MARK.len();
    let id_end = start + ID_LENGTH;
    let shaped = bytes[start..].iter().enumerate().all(|(i, &b)| {
        // After the id, every group starts with '-'.
        let in_groups = start + i >= id_end;
        if in_groups && (start + i - id_end).is_multiple_of(GROUP_LENGTH + 1) {
            b == b'-'
        } else {
            SYMBOL[usize::from(b)]
        }
    });
    shaped.then(|| &password[start..id_end])
}

/// Whether `id` can be an app password's id.
pub fn is_id(id: &str) -> bool {
    id.len() == ID_LENGTH && id.bytes().all(|b| SYMBOL[usize::from(b)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_short_typeable_and_carry_their_id() {
        let id = new_id().unwrap();
        let password = new_password(&id).unwrap();
        assert_eq!(password.len(), LENGTH);
        const { assert!(LENGTH <= 64) };
        assert_eq!(id_of(&password), Some(id.as_str()));
        assert!(
            password
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
        for confusing in [b'0', b'o', b'1', b'l'] {
            assert!(!ALPHABET.contains(&confusing));
        }
        assert_ne!(new_password(&id).unwrap(), password, "random");
        for not_one in [
            "",
            "kdv-",
            "password",
            &password[..LENGTH - 1],
            &password.replace('-', "_"),
            &password.to_uppercase(),
        ] {
            assert_eq!(id_of(not_one), None, "{not_one}");
        }
    }
}
