//! The users file beside an identity provider: no user of the file may have a provider
//! user's id.

use super::{AuthConfig, AuthCore};
use crate::oidc::OidcConfig;
use crate::oidc::bearer::Claims;
use std::time::Duration;

fn config(dir: &std::path::Path, user_prefix: &str) -> AuthConfig {
    let users = dir.join("users");
    let hash = crate::passwd::sha512_crypt("pw").unwrap();
    std::fs::write(&users, format!("carol:{hash}\noidc-u-alice:{hash}\n")).unwrap();
    AuthConfig {
        users_file: Some(users),
        oidc: Some(OidcConfig {
            issuer: "https://idp.example/realms/files".into(),
            claims: Claims {
                audience: "kubedav".into(),
                username_claim: "sub".into(),
                groups_claim: "groups".into(),
                user_prefix: user_prefix.into(),
                leeway: Duration::from_secs(60),
            },
            freshness: Default::default(),
            ca_file: None,
            sign_in: None,
        }),
        allow_plaintext: false,
        cache_ttl: Duration::from_secs(60),
        cache_capacity: 100,
        workers: 1,
        queue: 8,
        max_failures_per_user: 0,
        max_failures_per_address: 0,
        lockout: Duration::from_secs(1),
    }
}

#[test]
fn a_user_of_the_file_named_like_a_provider_user_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let core = AuthCore::new(config(dir.path(), "oidc-")).unwrap();
    let users = core.inner.users.read().unwrap().clone();
    assert!(users.contains_key("carol"));
    assert!(
        !users.contains_key("oidc-u-alice"),
        "a user of the file took the provider user's id"
    );
}

#[test]
fn an_empty_prefix_beside_a_users_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let Err(refused) = AuthCore::new(config(dir.path(), "")) else {
        panic!("an empty prefix beside a users file was accepted");
    };
    assert!(
        refused.contains("--oidc-user-prefix is empty beside a users file"),
        "{refused}"
    );
    let mut alone = config(dir.path(), "");
    alone.users_file = None;
    assert!(
        AuthCore::new(alone).is_ok(),
        "the provider's users alone need no prefix"
    );
}
