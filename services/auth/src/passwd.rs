//! `kubedav passwd`: adds or changes a user in a users file, hashing with SHA-512 crypt.

use sha_crypt::PasswordHasher;
use std::path::Path;

const SALT_ALPHABET: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A `$6$` hash of `password` with a random 16-character salt.
pub fn sha512_crypt(password: &str) -> Result<String, String> {
    sha512_crypt_with_rounds(password, 5000)
}

/// A `$6$` hash with `rounds` rounds (5,000 is the standard default; more costs more).
pub fn sha512_crypt_with_rounds(password: &str, rounds: u32) -> Result<String, String> {
    let mut random = [0u8; 16];
    getrandom::fill(&mut random).map_err(|e| format!("no randomness for the salt: {e}"))?;
    let salt: Vec<u8> = random
        .iter()
        .map(|b| SALT_ALPHABET[usize::from(b & 63)])
        .collect();
    let params = sha_crypt::Params::new(rounds).map_err(|e| format!("invalid rounds: {e}"))?;
    let hash = sha_crypt::ShaCrypt::from(params)
        .hash_password_with_salt(password.as_bytes(), &salt)
        .map_err(|e| format!("hashing failed: {e}"))?;
    Ok(hash.as_str().to_owned())
}

/// Sets `user`'s password in the users file at `path` (created if missing), keeping
/// every other line. The file is replaced atomically (temporary file, fsync, rename).
pub fn set_password(path: &Path, user: &str, password: &str) -> Result<bool, String> {
    if user.is_empty() || user.contains([':', '\n', '\r']) {
        return Err("a user name must not be empty or contain ':' or a line break".into());
    }
    if password.is_empty() {
        return Err("the password is empty".into());
    }
    let existing = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let entry = format!("{user}:{}", sha512_crypt(password)?);
    let mut replaced = false;
    let mut lines: Vec<String> = existing
        .lines()
        .map(|line| match line.split_once(':') {
            Some((name, _)) if name.trim() == user && !line.trim_start().starts_with('#') => {
                replaced = true;
                entry.clone()
            }
            _ => line.to_owned(),
        })
        .collect();
    if !replaced {
        lines.push(entry);
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let temp = dir.join(format!(
        ".{}.kubedav-tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("users")
    ));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut file = std::fs::File::create(&temp)?;
        file.write_all((lines.join("\n") + "\n").as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    };
    write().map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(replaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_and_changes_users() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users");
        std::fs::write(&path, "# keep me\nbob:$apr1$saltsalt$lSklNqYhb/pWvQ69oj2HK1\n").unwrap();
        assert!(!set_password(&path, "ann", "first").unwrap());
        assert!(set_password(&path, "bob", "second").unwrap());
        let users = crate::users::parse(&std::fs::read_to_string(&path).unwrap(), false);
        assert!(users.problems.is_empty());
        assert!(users.users["ann"].verify("first"));
        assert!(users.users["bob"].verify("second") && !users.users["bob"].verify("secretapr"));
        assert!(std::fs::read_to_string(&path).unwrap().starts_with("# keep me\n"));
        assert!(set_password(&path, "a:b", "x").is_err());
    }
}
