//! TLS for the HTTPS clients kubedav runs itself (fileio to its S3 endpoint,
//! `kubedav ensure-secrets` to the Kubernetes API server): one rustls configuration with
//! the ring provider, trusting the roots the caller names, and the test for the error
//! that says a server's certificate is not trusted, so each caller can say what to do.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which certificates a client trusts.
#[derive(Clone, Copy, Debug)]
pub enum Trust<'a> {
    /// The public (Mozilla) roots built in, and the PEM certificates of `extra_ca` when it
    /// is given: a private CA's, as `AWS_CA_BUNDLE` names it.
    PublicRoots {
        /// A PEM file of certificates to trust as well.
        extra_ca: Option<&'a Path>,
    },
    /// Only the PEM certificates of this file, as a pod trusts its cluster's CA.
    Only(&'a Path),
}

/// Why no client configuration could be made. Each message starts with the CA file it
/// is about, for the caller to prefix with what names that file (`AWS_CA_BUNDLE`,
/// `--ca-file`).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The CA file cannot be read, is not PEM, or holds a certificate rustls refuses.
    #[error("{}: {source}", path.display())]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The CA file is readable but holds no certificate.
    #[error("{}: holds no PEM certificate", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The crypto provider offers no safe protocol version (a build without TLS 1.2/1.3).
    #[error("no safe TLS protocol version: {0}")]
    Protocols(#[source] rustls::Error),
}

/// A client configuration (ring, the safe default protocol versions, no client
/// certificate) that trusts what `trust` says.
pub fn client_config(trust: Trust<'_>) -> Result<rustls::ClientConfig, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    let ca_file = match trust {
        Trust::PublicRoots { extra_ca } => {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            extra_ca
        }
        Trust::Only(path) => Some(path),
    };
    if let Some(path) = ca_file {
        add_pem_file(&mut roots, path)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Protocols)?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Adds every certificate of the PEM file `path` to `roots`; an error if there is none.
fn add_pem_file(roots: &mut rustls::RootCertStore, path: &Path) -> Result<(), TlsError> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let unreadable = |source: Box<dyn std::error::Error + Send + Sync>| TlsError::CaFile {
        path: path.to_owned(),
        source,
    };
    let mut added = 0;
    for certificate in CertificateDer::pem_file_iter(path).map_err(|e| unreadable(e.into()))? {
        roots
            .add(certificate.map_err(|e| unreadable(e.into()))?)
            .map_err(|e| unreadable(e.into()))?;
        added += 1;
    }
    if added == 0 {
        return Err(TlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(())
}

/// Whether an error's text, with its causes as [`crate::errors::with_causes`] writes
/// them, says the server's certificate was refused: not issued by a trusted CA, or
/// otherwise invalid. The caller appends what to do (which setting names the CA).
pub fn untrusted_certificate(text: &str) -> bool {
    text.contains("UnknownIssuer") || text.contains("invalid peer certificate")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA certificate (self-signed, P-256, made with `openssl req -x509`), as a
    /// cluster's ca.crt holds one.
    const CA: &str = "-----BEGIN CERTIFICATE-----
MIIBkjCCATmgAwIBAgIUckO5WpUi0+Kcl4Tr5U4HXFa2RsQwCgYIKoZIzj0EAwIw
HjEcMBoGA1UEAwwTa3ViZWRhdiBraXQgdGVzdCBDQTAgFw0yNjExMjcxMzA2MTJa
GA8yMTI2MTEwMzEzMDYxMlowHjEcMBoGA1UEAwwTa3ViZWRhdiBraXQgdGVzdCBD
QTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABOGCwSSNxAKIbmdLQS0RtGeqnWeT
M+qnKQZMyvCoRR6imKoJJ4Lsw04j4OKPkB2YYATmOY0JuPRrJJUfbeuACDOjUzBR
MB0GA1UdDgQWBBQ68A1Vhmf30jbHrcLgQHQFYA0mJTAfBgNVHSMEGDAWgBQ68A1V
hmf30jbHrcLgQHQFYA0mJTAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0cA
MEQCIBjRJHtzdDaOwR6tgrWmzeVka8ySfG4cOKTga0Z5XjsdAiB7gar3557YxnNw
DHCyBhP+QhtXE0wlKaqSa3qZXEEwjg==
-----END CERTIFICATE-----
";

    fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn public_roots_need_no_file() {
        client_config(Trust::PublicRoots { extra_ca: None }).unwrap();
    }

    #[test]
    fn a_ca_file_is_trusted_alone_or_with_the_public_roots() {
        let dir = tempfile::tempdir().unwrap();
        let ca = file(dir.path(), "ca.pem", CA);
        client_config(Trust::Only(&ca)).unwrap();
        client_config(Trust::PublicRoots { extra_ca: Some(&ca) }).unwrap();
    }

    #[test]
    fn a_bad_ca_file_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let empty = file(dir.path(), "empty.pem", "no certificate here\n");
        for trust in [
            Trust::Only(&missing),
            Trust::PublicRoots {
                extra_ca: Some(&missing),
            },
        ] {
            let error = client_config(trust).unwrap_err().to_string();
            assert!(error.starts_with(&format!("{}: ", missing.display())), "{error}");
        }
        let error = client_config(Trust::Only(&empty)).unwrap_err().to_string();
        assert_eq!(error, format!("{}: holds no PEM certificate", empty.display()));
    }

    #[test]
    fn refused_certificates_are_recognized() {
        assert!(untrusted_certificate(
            "client error (Connect): invalid peer certificate: UnknownIssuer"
        ));
        assert!(!untrusted_certificate(
            "client error (Connect): tcp connect error: Connection refused (os error 111)"
        ));
    }
}
