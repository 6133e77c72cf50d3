//! Apache's `$apr1$` MD5 crypt (the md5-crypt algorithm with the `$apr1$` magic), read
//! for compatibility with old htpasswd files only.

use md5::{Digest, Md5};

const ALPHABET: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The `$apr1$salt$hash` string for `password` and `salt` (at most 8 characters used).
pub fn apr1(password: &[u8], salt: &[u8]) -> String {
    const MAGIC: &[u8] = b"$apr1$";
    let salt = &salt[..salt.len().min(8)];
    let mut alternate = Md5::new();
    alternate.update(password);
    alternate.update(salt);
    alternate.update(password);
    let alternate = alternate.finalize();

    let mut ctx = Md5::new();
    ctx.update(password);
    ctx.update(MAGIC);
    ctx.update(salt);
    let mut left = password.len();
    while left > 0 {
        ctx.update(&alternate[..left.min(16)]);
        left = left.saturating_sub(16);
    }
    let mut i = password.len();
    while i > 0 {
        if i & 1 == 1 {
            ctx.update([0u8]);
        } else {
            ctx.update(&password[..1]);
        }
        i >>= 1;
    }
    let mut digest = ctx.finalize();
    for round in 0..1000 {
        let mut ctx = Md5::new();
        if round & 1 == 1 {
            ctx.update(password);
        } else {
            ctx.update(digest);
        }
        if round % 3 != 0 {
            ctx.update(salt);
        }
        if round % 7 != 0 {
            ctx.update(password);
        }
        if round & 1 == 1 {
            ctx.update(digest);
        } else {
            ctx.update(password);
        }
        digest = ctx.finalize();
    }
    let mut out = String::from("$apr1$");
    out.push_str(&String::from_utf8_lossy(salt));
    out.push('$');
    let groups = [(0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)];
    for (a, b, c) in groups {
        let v = (u32::from(digest[a]) << 16) | (u32::from(digest[b]) << 8) | u32::from(digest[c]);
        for k in 0..4 {
            out.push(ALPHABET[((v >> (6 * k)) & 63) as usize] as char);
        }
    }
    let v = u32::from(digest[11]);
    for k in 0..2 {
        out.push(ALPHABET[((v >> (6 * k)) & 63) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_openssl() {
        // openssl passwd -apr1 -salt saltsalt secretapr
        assert_eq!(
            super::apr1(b"secretapr", b"saltsalt"),
            "$apr1$saltsalt$lSklNqYhb/pWvQ69oj2HK1"
        );
    }
}
