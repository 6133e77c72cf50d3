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
