//! The users file: htpasswd-style `user:hash` lines.
//!
//! Accepted hashes: SHA-512 crypt (`$6$`), SHA-256 crypt (`$5$`), bcrypt (`$2a$`, `$2b$`,
//! `$2y$`), Apache `$apr1$` MD5 (read for compatibility, with a warning) and, only when
//! allowed, plaintext. Comments (`#`) and blank lines are skipped; a malformed line is
//! reported with its number and skipped, never fatal.

use sha_crypt::PasswordVerifier;
use std::collections::HashMap;
use subtle::ConstantTimeEq;

/// A stored password hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredHash {
    /// `$5$` or `$6$`.
    ShaCrypt(String),
    /// `$2a$`, `$2b$` or `$2y$`.
    Bcrypt(String),
    /// `$apr1$` (weak; compatibility only).
    Apr1(String),
    /// Plaintext (only when allowed).
    Plain(String),
}

impl StoredHash {
    /// The hash (or, for plaintext entries, the password) as the users file has it.
    pub fn text(&self) -> &str {
        match self {
            StoredHash::ShaCrypt(text)
            | StoredHash::Bcrypt(text)
            | StoredHash::Apr1(text)
            | StoredHash::Plain(text) => text,
        }
    }

    /// Whether `password` matches. Runs the full crypt: call it off the async workers.
    pub fn verify(&self, password: &str) -> bool {
        match self {
            StoredHash::ShaCrypt(hash) => sha_crypt::ShaCrypt::default()
                .verify_password(password.as_bytes(), hash.as_str())
                .is_ok(),
            StoredHash::Bcrypt(hash) => bcrypt::verify(password, hash).unwrap_or(false),
            StoredHash::Apr1(hash) => {
                let salt = hash
                    .trim_start_matches("$apr1$")
                    .split('$')
                    .next()
                    .unwrap_or_default();
                crate::apr1::apr1(password.as_bytes(), salt.as_bytes())
                    .as_bytes()
                    .ct_eq(hash.as_bytes())
                    .into()
            }
            StoredHash::Plain(stored) => stored.as_bytes().ct_eq(password.as_bytes()).into(),
        }
    }
}

/// A parsed users file.
#[derive(Clone, Debug, Default)]
pub struct Users {
    /// Users by name.
    pub users: HashMap<String, StoredHash>,
    /// Lines that were skipped: (line number, what was wrong).
    pub problems: Vec<(usize, String)>,
}

/// Parses a users file. `allow_plaintext` accepts entries that are not a known hash.
pub fn parse(text: &str, allow_plaintext: bool) -> Users {
    let mut parsed = Users::default();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let Some((user, hash)) = line.split_once(':') else {
            parsed.problems.push((number, "expected user:hash".into()));
            continue;
        };
        let (user, hash) = (user.trim(), hash.trim());
        if user.is_empty() || hash.is_empty() {
            parsed
                .problems
                .push((number, "the user name and the hash must not be empty".into()));
            continue;
        }
        let stored = if hash.starts_with("$6$") || hash.starts_with("$5$") {
            if sha_crypt::PasswordHashRef::new(hash).is_err() {
                parsed
                    .problems
                    .push((number, "the SHA crypt hash is malformed".into()));
                continue;
            }
            StoredHash::ShaCrypt(hash.to_owned())
        } else if ["$2a$", "$2b$", "$2y$"].iter().any(|p| hash.starts_with(p)) {
            if hash.len() != 60 {
                parsed.problems.push((
                    number,
                    "the bcrypt hash is malformed (60 characters expected)".into(),
                ));
                continue;
            }
            StoredHash::Bcrypt(hash.to_owned())
        } else if hash.starts_with("$apr1$") {
            tracing::warn!(
                line = number,
                user,
                "user has a weak $apr1$ MD5 hash; re-hash it with `kubedav passwd`"
            );
            StoredHash::Apr1(hash.to_owned())
        } else if hash.starts_with('$') || hash.starts_with('{') {
            parsed
                .problems
                .push((number, "unsupported hash format (use $6$, $5$ or bcrypt)".into()));
            continue;
        } else if allow_plaintext {
            StoredHash::Plain(hash.to_owned())
        } else {
            parsed.problems.push((
                number,
                "plaintext password refused (allow it with --allow-plaintext-passwords)".into(),
            ));
            continue;
        };
        if parsed.users.insert(user.to_owned(), stored).is_some() {
            parsed
                .problems
                .push((number, format!("user {user} appears again; the last entry wins")));
        }
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    // Hashes made by openssl passwd and Apache's htpasswd.
    const FILE: &str = "# team\n\
        six:$6$saltsalt$LMtDgChSrV.wGnnrAr7LXtxT9OYdesYYRBi0J7VAO0UoNpOTX5uxqMPmQ0Gkk2HMqd/t1jYDOamm5q1ro0ZhX/\n\
        five:$5$saltsalt$708Qd1GA5FblAgceNooXo6mCmXw7DIUSz5IHtzs/2E6\n\
        \n\
        bob:$2y$04$0NzdbFzsvv6XZI9hfsFXm.IvaTRCq/RgZYd4psDEFzN0rM.M68D4m\n\
        old:$apr1$saltsalt$lSklNqYhb/pWvQ69oj2HK1\n\
        plain:letmein\n\
        broken line\n\
        md5:$1$abc$def\n\
        :nohash\n";

    #[test]
    fn every_format_checks_the_right_password() {
        let users = parse(FILE, true);
        for (user, password) in [
            ("six", "secret6"),
            ("five", "secret5"),
            ("bob", "secret2y"),
            ("old", "secretapr"),
            ("plain", "letmein"),
        ] {
            let stored = &users.users[user];
            assert!(stored.verify(password), "{user} accepts its password");
            assert!(!stored.verify("wrong"), "{user} refuses a wrong one");
            assert!(!stored.verify(""), "{user} refuses an empty one");
        }
    }

    #[test]
    fn malformed_lines_are_reported_with_their_numbers() {
        let users = parse(FILE, false);
        let lines: Vec<usize> = users.problems.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, vec![7, 8, 9, 10], "{:?}", users.problems);
        assert!(users.problems[0].1.contains("plaintext"));
        assert_eq!(users.users.len(), 4, "the good lines still count");
    }
}
