//! How the targets are composed, and what their errors say.

use super::*;
use clap::Parser;

fn cli(args: &[&str]) -> Cli {
    Cli::try_parse_from([&["kubedav"], args].concat()).unwrap()
}

/// The flag or variable to change, as each error says it.
#[tokio::test]
async fn each_error_names_what_to_change() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();

    let error = storage::open_volume(&cli(&["--root", missing])).err().unwrap();
    assert!(matches!(error, RunError::Root(_)), "{error:?}");
    assert!(
        error.to_string().contains("set --root or KUBEDAV_ROOT"),
        "{error}"
    );

    let error = auth_core(&cli(&["--users-file", missing])).err().unwrap();
    assert!(matches!(error, RunError::UsersFile(_)), "{error:?}");
    assert!(error.to_string().contains("set --users-file"), "{error}");

    for (issuer, says) in [
        ("ftp://idp.example", "must be an https:// URL"),
        ("idp.example", "is not a URL"),
    ] {
        let error = auth_core(&cli(&["--oidc-issuer", issuer])).err().unwrap();
        assert!(matches!(error, RunError::IdentityProvider(_)), "{error:?}");
        assert!(error.to_string().starts_with("--oidc-issuer"), "{error}");
        assert!(error.to_string().contains(says), "{error}");
    }

    let shared = cli(&[
        "--users-file",
        missing,
        "--auth-cache-redis",
        "redis://127.0.0.1:1/0",
    ]);
    let error = auth_core(&shared).err().unwrap();
    assert!(matches!(error, RunError::AuthCacheWithoutSecret), "{error:?}");
    assert!(error.to_string().contains("needs --auth-cache-secret"), "{error}");

    let short = cli(&[
        "--users-file",
        missing,
        "--auth-cache-redis",
        "redis://127.0.0.1:1/0",
        "--auth-cache-secret",
        "short",
    ]);
    let error = auth_core(&short).err().unwrap();
    assert!(error.to_string().starts_with("--auth-cache-secret: "), "{error}");
    assert!(
        !error.to_string().contains("short"),
        "the secret stays out: {error}"
    );

    let one_process = cli(&["--registry", "redis://127.0.0.1:1/0"]);
    let error = local_ports(&one_process).await.err().unwrap();
    assert!(matches!(error, RunError::RegistryInOneProcess), "{error:?}");
    assert!(
        error.to_string().starts_with("--registry is for replicas"),
        "{error}"
    );

    let token = cli(&["--target=gateway", "--grpc-token", "two\nlines"]);
    let error = channel(
        "fileio",
        token.remote.fileio_url.as_str(),
        token.remote.grpc_token.as_deref(),
    )
    .err()
    .unwrap();
    assert_eq!(
        error.to_string(),
        "--grpc-token: the gRPC token must be printable ASCII"
    );

    let open = cli(&["--listen", "0.0.0.0:0"]);
    let error = RunError::Unauthenticated(open.serve.listen.clone()).to_string();
    assert!(
        error.starts_with("refusing to serve 0.0.0.0:0 without authentication"),
        "{error}"
    );
    assert!(error.contains("--allow-unauthenticated"), "{error}");
}
