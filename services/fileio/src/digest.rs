//! Checksums computed while a body streams: every algorithm a write asks for, in one
//! pass over each chunk, so no file is ever read again to learn its checksum.

use kubedav_api::checksums::{Algorithm, Checksum, to_hex};
use kubedav_api::fileio::WriteHeader;
use sha2::Digest;
use tonic::Status;

/// One running checksum.
enum Running {
    Sha1(sha1::Sha1),
    Md5(md5::Md5),
    Adler32(adler2::Adler32),
    Sha256(sha2::Sha256),
    Sha512(sha2::Sha512),
}

impl Running {
    fn new(algorithm: Algorithm) -> Self {
        match algorithm {
            Algorithm::Sha1 => Running::Sha1(sha1::Sha1::new()),
            Algorithm::Md5 => Running::Md5(md5::Md5::new()),
            Algorithm::Adler32 => Running::Adler32(adler2::Adler32::new()),
            Algorithm::Sha256 => Running::Sha256(sha2::Sha256::new()),
            Algorithm::Sha512 => Running::Sha512(sha2::Sha512::new()),
        }
    }

    fn update(&mut self, data: &[u8]) {
        match self {
            Running::Sha1(h) => h.update(data),
            Running::Md5(h) => h.update(data),
            Running::Adler32(h) => h.write_slice(data),
            Running::Sha256(h) => h.update(data),
            Running::Sha512(h) => h.update(data),
        }
    }

    fn finish(self) -> Vec<u8> {
        match self {
            Running::Sha1(h) => h.finalize().to_vec(),
            Running::Md5(h) => h.finalize().to_vec(),
            Running::Adler32(h) => h.checksum().to_be_bytes().to_vec(),
            Running::Sha256(h) => h.finalize().to_vec(),
            Running::Sha512(h) => h.finalize().to_vec(),
        }
    }
}

/// The checksums one write computes, and those its body must match.
pub struct Digester {
    running: Vec<(Algorithm, Running)>,
    expected: Vec<(Algorithm, String)>,
}

impl Digester {
    /// What `header` asks for: `None` when it asks for no checksum (nothing to compute).
    /// An unknown algorithm or a malformed value is INVALID_ARGUMENT.
    pub fn for_write(header: &WriteHeader) -> Result<Option<Self>, Status> {
        Self::for_checksums(&header.checksums, &header.compute)
    }

    /// The checksums data must match, and further algorithms to compute over it: `None`
    /// when both are empty. An unknown algorithm or a malformed value is INVALID_ARGUMENT.
    pub fn for_checksums(checksums: &[Checksum], compute: &[String]) -> Result<Option<Self>, Status> {
        let mut expected = Vec::new();
        for sum in checksums {
            let algorithm = known(&sum.algorithm)?;
            if kubedav_api::checksums::parse_hex(algorithm, &sum.hex).is_none() {
                return Err(Status::invalid_argument(format!(
                    "the {} checksum {:?} is not {} hex digits",
                    algorithm.name(),
                    sum.hex,
                    algorithm.value_len() * 2
                )));
            }
            expected.push((algorithm, sum.hex.to_ascii_lowercase()));
        }
        let mut algorithms: Vec<Algorithm> = expected.iter().map(|(a, _)| *a).collect();
        for name in compute {
            algorithms.push(known(name)?);
        }
        if algorithms.is_empty() {
            return Ok(None);
        }
        let running = Algorithm::ALL
            .into_iter()
            .filter(|a| algorithms.contains(a))
            .map(|a| (a, Running::new(a)))
            .collect();
        Ok(Some(Digester { running, expected }))
    }

    /// Adds a chunk of the body.
    pub fn update(&mut self, data: &[u8]) {
        for (_, running) in &mut self.running {
            running.update(data);
        }
    }

    /// The checksums of the whole body, once each expected one matched; a mismatch is
    /// INVALID_ARGUMENT naming both values, and `path` in the message.
    pub fn finish(self, path: &str) -> Result<Vec<Checksum>, Status> {
        let sums: Vec<Checksum> = self
            .running
            .into_iter()
            .map(|(algorithm, running)| Checksum {
                algorithm: algorithm.name().to_owned(),
                hex: to_hex(&running.finish()),
            })
            .collect();
        for (algorithm, wanted) in &self.expected {
            let got = sums.iter().find(|s| s.algorithm == algorithm.name());
            if let Some(got) = got
                && &got.hex != wanted
            {
                return Err(Status::invalid_argument(format!(
                    "the body's {} checksum is {}, but the request said {wanted}: the upload \
                     was damaged on its way; nothing was written to {path}, send it again",
                    algorithm.name(),
                    got.hex
                )));
            }
        }
        Ok(sums)
    }

    /// Runs on from `carried`, the SHA-1 of every byte before the next `update`, instead
    /// of from the start: true when SHA-1 is the one algorithm this digester runs (then
    /// the bytes before need not be read again), false and unchanged otherwise.
    pub fn continue_from(&mut self, carried: sha1::Sha1) -> bool {
        match self.running.as_mut_slice() {
            [(Algorithm::Sha1, running)] => {
                *running = Running::Sha1(carried);
                true
            }
            _ => false,
        }
    }
}

/// The SHA-1 of an upload's first `at` bytes, kept in its state between requests
/// (docs/uploads.md, "The whole file's SHA-1"): a Nextcloud client names the whole
/// file's SHA-1 only with its last request, and the landing then reads no byte again.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct CarriedSha1 {
    /// How many bytes it covers, from the start.
    pub at: u64,
    /// The hasher's state (RustCrypto's serialized state), in hex.
    pub state: String,
}

impl CarriedSha1 {
    /// What `hasher` has taken in, the first `at` bytes.
    pub fn keep(hasher: &sha1::Sha1, at: u64) -> Self {
        use sha1::digest::common::hazmat::SerializableState;
        CarriedSha1 {
            at,
            state: to_hex(&hasher.serialize()),
        }
    }

    /// The hasher again, when it covers the first `at` bytes and its state reads back.
    pub fn resume(&self, at: u64) -> Option<sha1::Sha1> {
        use sha1::digest::common::hazmat::SerializableState;
        if self.at != at {
            return None;
        }
        let state = kubedav_api::checksums::from_hex(&self.state)?
            .as_slice()
            .try_into()
            .ok()?;
        sha1::Sha1::deserialize(&state).ok()
    }
}

/// The SHA-1 an append runs on over the bytes it adds in order, from where the upload's
/// state left it.
pub struct RunningSha1 {
    hasher: sha1::Sha1,
    at: u64,
}

impl RunningSha1 {
    /// From the start of an empty upload, or on from `carried` when it covers the
    /// `offset` bytes the upload holds; `None` when it does not (then the landing reads
    /// the bytes again, if it needs their SHA-1).
    pub fn resume(carried: Option<&CarriedSha1>, offset: u64) -> Option<Self> {
        let hasher = match carried {
            None if offset == 0 => sha1::Sha1::new(),
            None => return None,
            Some(carried) => carried.resume(offset)?,
        };
        Some(RunningSha1 { hasher, at: offset })
    }

    /// Takes in the next bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.hasher.update(data);
        self.at += data.len() as u64;
    }

    /// What to keep in the state of an upload holding `offset` bytes: `None` unless this
    /// took in exactly those.
    pub fn carried(&self, offset: u64) -> Option<CarriedSha1> {
        (self.at == offset).then(|| CarriedSha1::keep(&self.hasher, offset))
    }
}

fn known(name: &str) -> Result<Algorithm, Status> {
    Algorithm::from_name(name).ok_or_else(|| {
        Status::invalid_argument(format!(
            "kubedav does not compute {name:?} checksums; use SHA1, MD5, ADLER32, SHA256 or SHA512"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubedav_api::checksums::Checksum;

    fn header(checksums: &[(&str, &str)], compute: &[&str]) -> WriteHeader {
        WriteHeader {
            checksums: checksums
                .iter()
                .map(|(a, h)| Checksum {
                    algorithm: a.to_string(),
                    hex: h.to_string(),
                })
                .collect(),
            compute: compute.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn computes_the_known_values_across_chunks() {
        let mut digester = Digester::for_write(&header(&[], &["SHA1", "MD5", "ADLER32", "SHA256"]))
            .unwrap()
            .unwrap();
        digester.update(b"hello ");
        digester.update(b"world");
        let sums = digester.finish("f").unwrap();
        let hex = |a: &str| sums.iter().find(|s| s.algorithm == a).unwrap().hex.clone();
        assert_eq!(hex("SHA1"), "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed");
        assert_eq!(hex("MD5"), "5eb63bbbe01eeed093cb22bb8f5acdc3");
        assert_eq!(hex("ADLER32"), "1a0b045d");
        assert_eq!(
            hex("SHA256"),
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
    }

    #[test]
    fn a_carried_sha1_goes_on_where_it_stopped() {
        let mut hasher = sha1::Sha1::new();
        hasher.update(b"hello ");
        let carried = CarriedSha1::keep(&hasher, 6);
        let json = serde_json::to_string(&carried).unwrap();
        let carried: CarriedSha1 = serde_json::from_str(&json).unwrap();
        assert!(carried.resume(5).is_none(), "it covers 6 bytes, not 5");
        let expected = [("SHA1", "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed")];
        let mut digester = Digester::for_write(&header(&expected, &[])).unwrap().unwrap();
        assert!(digester.continue_from(carried.resume(6).unwrap()));
        digester.update(b"world");
        assert_eq!(digester.finish("f").unwrap()[0].hex, expected[0].1);
        let mut two = Digester::for_write(&header(&expected, &["MD5"]))
            .unwrap()
            .unwrap();
        assert!(
            !two.continue_from(carried.resume(6).unwrap()),
            "MD5 needs every byte"
        );
        let damaged = CarriedSha1 {
            state: "zz".repeat(carried.state.len() / 2),
            ..carried
        };
        assert!(damaged.resume(6).is_none());
    }

    #[test]
    fn a_mismatch_is_refused_and_nothing_asked_computes_nothing() {
        let wrong = "0000000000000000000000000000000000000000";
        let mut digester = Digester::for_write(&header(&[("sha1", wrong)], &[]))
            .unwrap()
            .unwrap();
        digester.update(b"hello world");
        let status = digester.finish("f").unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(status.message().contains("nothing was written"));
        assert!(Digester::for_write(&header(&[], &[])).unwrap().is_none());
        assert!(Digester::for_write(&header(&[("CRC32", "00")], &[])).is_err());
        assert!(Digester::for_write(&header(&[("MD5", "zz")], &[])).is_err());
    }
}
