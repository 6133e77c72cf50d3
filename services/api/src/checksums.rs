//! Checksums of a file's content: the algorithms sync clients (ownCloud's `OC-Checksum`)
//! and RFC 9530 (`Content-Digest`, `Repr-Digest`) name, and how fileio keeps them.
//!
//! fileio computes checksums while an upload streams and keeps them with the content as
//! one reserved dead property, [`RESERVED_NAMESPACE`] `checksums`, whose value names the
//! etag they were computed for ([`Stored`]). A checksum is only ever reported for that
//! etag: a file changed in any way (by kubedav or behind its back) has another etag, so a
//! stale checksum is never shown. Clients can neither read nor write the reserved
//! namespace; the gateway presents the checksums as ownCloud's `oc:checksums`.

pub use crate::pb::fileio::v1::Checksum;
use crate::pb::fileio::v1::{DeadProperty, PropertyName};
use bytes::Bytes;

/// A checksum algorithm kubedav computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// SHA-1 (ownCloud's and Nextcloud's default).
    Sha1,
    /// MD5.
    Md5,
    /// Adler-32 (ownCloud computes it beside SHA-1 and MD5).
    Adler32,
    /// SHA-256 (RFC 9530 `sha-256`).
    Sha256,
    /// SHA-512 (RFC 9530 `sha-512`).
    Sha512,
}

impl Algorithm {
    /// Every algorithm, in the order checksums are listed.
    pub const ALL: [Algorithm; 5] = [
        Algorithm::Sha1,
        Algorithm::Md5,
        Algorithm::Adler32,
        Algorithm::Sha256,
        Algorithm::Sha512,
    ];

    /// The checksums ownCloud keeps for an upload that carried any `OC-Checksum`.
    pub const OWNCLOUD: [Algorithm; 3] = [Algorithm::Sha1, Algorithm::Md5, Algorithm::Adler32];

    /// The name on the wire of fileio and in `OC-Checksum` (`SHA1`, `MD5`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Sha1 => "SHA1",
            Algorithm::Md5 => "MD5",
            Algorithm::Adler32 => "ADLER32",
            Algorithm::Sha256 => "SHA256",
            Algorithm::Sha512 => "SHA512",
        }
    }

    /// The algorithm an `OC-Checksum` (or fileio) name means, in any case, with or
    /// without a dash (`SHA1`, `sha-256`).
    pub fn from_name(name: &str) -> Option<Algorithm> {
        let plain: String = name
            .chars()
            .filter(|c| *c != '-')
            .map(|c| c.to_ascii_uppercase())
            .collect();
        Algorithm::ALL.into_iter().find(|a| a.name() == plain)
    }

    /// The RFC 9530 algorithm key (`sha-256`, `sha-512`), for the two that are not
    /// deprecated there; `None` for the others.
    pub fn digest_key(self) -> Option<&'static str> {
        match self {
            Algorithm::Sha256 => Some("sha-256"),
            Algorithm::Sha512 => Some("sha-512"),
            _ => None,
        }
    }

    /// The algorithm an RFC 9530 key names, if kubedav computes it.
    pub fn from_digest_key(key: &str) -> Option<Algorithm> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.digest_key().is_some_and(|k| k.eq_ignore_ascii_case(key)))
    }

    /// The length of its value in bytes.
    pub fn value_len(self) -> usize {
        match self {
            Algorithm::Sha1 => 20,
            Algorithm::Md5 => 16,
            Algorithm::Adler32 => 4,
            Algorithm::Sha256 => 32,
            Algorithm::Sha512 => 64,
        }
    }
}

/// The dead-property namespace fileio keeps for itself. Clients cannot set, remove or
/// see properties in it.
pub const RESERVED_NAMESPACE: &str = "urn:x-kubedav:content";

/// The reserved property that holds a file's [`Stored`] checksums.
pub const CHECKSUMS_PROPERTY: &str = "checksums";

/// Whether a dead property's namespace is fileio's own.
pub fn is_reserved(namespace: &str) -> bool {
    namespace == RESERVED_NAMESPACE
}

/// The name of the reserved checksums property, for selecting it in a listing.
pub fn checksums_property_name() -> PropertyName {
    PropertyName {
        namespace: RESERVED_NAMESPACE.to_owned(),
        name: CHECKSUMS_PROPERTY.to_owned(),
    }
}

/// The reserved property that holds a modification time a client gave, where the
/// storage cannot keep one itself (a bucket's listings): `ETAG\nNANOSECONDS`.
pub const MODIFIED_PROPERTY: &str = "modified";

/// The reserved property recording that the content whose etag is `etag` has the
/// modification time `unix_ns`.
pub fn modified_property(etag: &str, unix_ns: i64) -> DeadProperty {
    DeadProperty {
        namespace: RESERVED_NAMESPACE.to_owned(),
        name: MODIFIED_PROPERTY.to_owned(),
        value: Bytes::from(format!("{etag}\n{unix_ns}")),
    }
}

/// The modification time [`modified_property`] recorded among `properties`, if it is
/// that of the content whose etag is `etag`.
pub fn recorded_modified(properties: &[DeadProperty], etag: &str) -> Option<i64> {
    let property = properties
        .iter()
        .find(|p| is_reserved(&p.namespace) && p.name == MODIFIED_PROPERTY)?;
    let (recorded, nanos) = std::str::from_utf8(&property.value).ok()?.split_once('\n')?;
    (recorded == etag).then(|| nanos.parse().ok()).flatten()
}

/// Checksums of one version of a file's content, named by its etag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The etag of the content they were computed over.
    pub etag: String,
    /// The checksums, one per algorithm.
    pub sums: Vec<Checksum>,
}

impl Stored {
    /// The reserved dead property that keeps them.
    pub fn to_property(&self) -> DeadProperty {
        let mut value = String::with_capacity(self.etag.len() + 1 + self.sums.len() * 48);
        value.push_str(&self.etag);
        for sum in &self.sums {
            value.push('\n');
            value.push_str(&sum.algorithm);
            value.push(':');
            value.push_str(&sum.hex);
        }
        DeadProperty {
            namespace: RESERVED_NAMESPACE.to_owned(),
            name: CHECKSUMS_PROPERTY.to_owned(),
            value: Bytes::from(value),
        }
    }

    /// What [`Stored::to_property`] kept, from a resource's dead properties; `None`
    /// when there is none or it is unreadable.
    pub fn find(properties: &[DeadProperty]) -> Option<Stored> {
        let property = properties
            .iter()
            .find(|p| is_reserved(&p.namespace) && p.name == CHECKSUMS_PROPERTY)?;
        let text = std::str::from_utf8(&property.value).ok()?;
        let mut lines = text.split('\n');
        let etag = lines.next()?.to_owned();
        let sums = lines
            .map(|line| {
                let (algorithm, hex) = line.split_once(':')?;
                Some(Checksum {
                    algorithm: algorithm.to_owned(),
                    hex: hex.to_owned(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Stored { etag, sums })
    }

    /// The checksums, if they are those of the content whose etag is `etag`.
    pub fn valid_for(self, etag: &str) -> Option<Vec<Checksum>> {
        (self.etag == etag).then_some(self.sums)
    }
}

/// `hex` as bytes, if it is the hex form of a value of `algorithm`.
pub fn parse_hex(algorithm: Algorithm, hex: &str) -> Option<Vec<u8>> {
    if hex.len() != algorithm.value_len() * 2 {
        return None;
    }
    from_hex(hex)
}

/// `hex` as bytes, if it is hex digits in pairs.
pub fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `bytes` in lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_in_any_spelling() {
        assert_eq!(Algorithm::from_name("sha1"), Some(Algorithm::Sha1));
        assert_eq!(Algorithm::from_name("Adler32"), Some(Algorithm::Adler32));
        assert_eq!(Algorithm::from_name("sha-256"), Some(Algorithm::Sha256));
        assert_eq!(Algorithm::from_name("crc32"), None);
        assert_eq!(Algorithm::from_digest_key("SHA-512"), Some(Algorithm::Sha512));
        assert_eq!(Algorithm::from_digest_key("md5"), None);
    }

    #[test]
    fn stored_checksums_round_trip_and_name_their_etag() {
        let stored = Stored {
            etag: "1a-2b-3c".into(),
            sums: vec![
                Checksum {
                    algorithm: "SHA1".into(),
                    hex: "00ff".into(),
                },
                Checksum {
                    algorithm: "MD5".into(),
                    hex: "abcd".into(),
                },
            ],
        };
        let other = DeadProperty {
            namespace: "urn:x".into(),
            name: "checksums".into(),
            value: Bytes::from_static(b"x"),
        };
        let found = Stored::find(&[other, stored.to_property()]).unwrap();
        assert_eq!(found, stored);
        assert!(found.clone().valid_for("other").is_none());
        assert_eq!(found.valid_for("1a-2b-3c").unwrap().len(), 2);
    }

    #[test]
    fn hex_is_checked_for_the_algorithm() {
        assert_eq!(
            parse_hex(Algorithm::Adler32, "0A0b0c0d"),
            Some(vec![10, 11, 12, 13])
        );
        assert_eq!(parse_hex(Algorithm::Adler32, "0a0b0c"), None);
        assert_eq!(parse_hex(Algorithm::Adler32, "0a0b0c0g"), None);
        assert_eq!(to_hex(&[10, 255]), "0aff");
    }
}
