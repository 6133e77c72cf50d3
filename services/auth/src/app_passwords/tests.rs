//! App passwords over the volume's records: made, shown without their secret, verified
//! with their scope, refused when wrong, expired (on a clock the test moves) or revoked,
//! and still there after a restart.

use super::*;
use kubedav_api::auth::{CreateAppPasswordRequest, Principal};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tonic::Code;

struct Fixture {
    dir: tempfile::TempDir,
    now: Arc<Mutex<SystemTime>>,
}

impl Fixture {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            now: Arc::new(Mutex::new(
                SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            )),
        }
    }

    /// A replica's app passwords over the fixture's volume.
    fn replica(&self, freshness: Duration) -> AppPasswords {
        self.replica_with(freshness, Some(vec![7; 32]))
    }

    /// [`Fixture::replica`] with `secret` (`None`: the one kept with the data).
    fn replica_with(&self, freshness: Duration, secret: Option<Vec<u8>>) -> AppPasswords {
        let fileio = kubedav_fileio::LocalFileIo::open(self.dir.path()).unwrap();
        let now = self.now.clone();
        AppPasswords::new(
            Arc::new(fileio.records()),
            AppPasswordsConfig {
                secret,
                freshness,
                last_used_every: Duration::from_secs(3600),
                clock: Arc::new(move || *now.lock().unwrap()),
            },
        )
    }

    fn advance(&self, by: Duration) {
        *self.now.lock().unwrap() += by;
    }
}

fn owner(user: &str) -> Principal {
    Principal {
        user: user.into(),
        display_name: "Alice".into(),
        groups: vec!["team".into()],
        kind: "bearer".into(),
        ..Default::default()
    }
}

fn request(
    user: &str,
    name: &str,
    permission: &str,
    path: &str,
    expires_at: &str,
) -> CreateAppPasswordRequest {
    CreateAppPasswordRequest {
        owner: Some(owner(user)),
        name: name.into(),
        permission: permission.into(),
        path: path.into(),
        expires_at: expires_at.into(),
    }
}

#[tokio::test]
async fn made_shown_without_secret_and_verified_with_their_scope() {
    let fixture = Fixture::new();
    let store = fixture.replica(Duration::from_millis(500));
    let made = store
        .create(request("alice", "Laptop, davfs2", "read", "/team/", ""))
        .await
        .unwrap();
    let shown = made.app_password.unwrap();
    assert_eq!(
        (shown.username.as_str(), shown.name.as_str()),
        ("alice", "Laptop, davfs2")
    );
    assert_eq!((shown.permission.as_str(), shown.path.as_str()), ("read", "team"));
    assert_eq!(secret::id_of(&made.password), Some(shown.id.as_str()));

    let (principal, _, _) = store.verify("alice", &made.password).await.unwrap().unwrap();
    assert_eq!(principal.user, "alice");
    assert_eq!(principal.groups, ["team"]);
    assert!(principal.read_only);
    assert_eq!(principal.path_prefix, "team");
    assert_eq!(principal.kind, "app-password");
    assert_eq!(principal.credential_id, shown.id);

    // The secret is nowhere on the volume, and the list never shows it.
    let mut stored = Vec::new();
    for entry in walk(fixture.dir.path()) {
        stored.extend(std::fs::read(entry).unwrap());
    }
    let stored = String::from_utf8_lossy(&stored);
    assert!(!stored.contains(&made.password[secret::MARK.len() + secret::ID_LENGTH..]));
    let listed = store.list("alice").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, shown.id);
    assert!(!format!("{listed:?}").contains(&made.password));

    // Wrong secret, wrong user, not an app password at all.
    let mut wrong = made.password.clone();
    let last = wrong.pop().unwrap();
    wrong.push(if last == 'a' { 'b' } else { 'a' });
    assert_eq!(
        store.verify("alice", &wrong).await.unwrap().err(),
        Some(Refused::Unknown)
    );
    assert_eq!(
        store.verify("bob", &made.password).await.unwrap().err(),
        Some(Refused::Unknown)
    );
    assert_eq!(
        store.verify("alice", "hunter2").await.unwrap().err(),
        Some(Refused::Unknown)
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test]
async fn a_revocation_holds_at_once_here_and_after_the_freshness_elsewhere() {
    let fixture = Fixture::new();
    let here = fixture.replica(Duration::from_secs(3600));
    let elsewhere = fixture.replica(Duration::ZERO);
    let made = here
        .create(request("alice", "cadaver", "write", "", ""))
        .await
        .unwrap();
    let id = made.app_password.unwrap().id;
    assert!(here.verify("alice", &made.password).await.unwrap().is_ok());
    assert!(elsewhere.verify("alice", &made.password).await.unwrap().is_ok());
    here.revoke("alice", &id).await.unwrap();
    assert_eq!(
        here.verify("alice", &made.password).await.unwrap().err(),
        Some(Refused::Unknown)
    );
    assert_eq!(
        elsewhere.verify("alice", &made.password).await.unwrap().err(),
        Some(Refused::Unknown)
    );
    assert!(here.list("alice").await.unwrap().is_empty());
    let again = here.revoke("alice", &id).await.unwrap_err();
    assert_eq!(again.code(), Code::NotFound);
    // Only the owner revokes: bob names alice's id and finds nothing.
    let kept = here
        .create(request("alice", "kept", "write", "", ""))
        .await
        .unwrap();
    let kept_id = kept.app_password.unwrap().id;
    assert_eq!(
        here.revoke("bob", &kept_id).await.unwrap_err().code(),
        Code::NotFound
    );
    assert!(here.verify("alice", &kept.password).await.unwrap().is_ok());
}

#[tokio::test]
async fn an_app_password_expires_on_time_and_survives_a_restart() {
    let fixture = Fixture::new();
    let store = fixture.replica(Duration::from_millis(500));
    let expires = jiff::Timestamp::from_second(1_800_000_060).unwrap().to_string();
    let made = store
        .create(request("alice", "a day", "write", "", &expires))
        .await
        .unwrap();
    assert_eq!(made.app_password.unwrap().expires_at, expires);
    let restarted = fixture.replica(Duration::from_millis(500));
    assert!(
        restarted.verify("alice", &made.password).await.unwrap().is_ok(),
        "kept with the data"
    );
    fixture.advance(Duration::from_secs(59));
    assert!(restarted.verify("alice", &made.password).await.unwrap().is_ok());
    fixture.advance(Duration::from_secs(1));
    assert_eq!(
        restarted.verify("alice", &made.password).await.unwrap().err(),
        Some(Refused::Expired)
    );
}

#[tokio::test]
async fn what_may_not_be_made_is_refused_with_what_to_do() {
    let fixture = Fixture::new();
    let store = fixture.replica(Duration::from_millis(500));
    let past = jiff::Timestamp::from_second(1_700_000_000).unwrap().to_string();
    for (bad, says) in [
        (request("alice", "", "write", "", ""), "name the app password"),
        (
            request("alice", &"x".repeat(MAX_NAME_CHARS + 1), "write", "", ""),
            "name the app password",
        ),
        (
            request("alice", "n", "admin", "", ""),
            "give \"read\" or \"write\"",
        ),
        (request("alice", "n", "write", "a/../b", ""), "path"),
        (request("alice", "n", "write", "", "tomorrow"), "RFC 3339"),
        (request("alice", "n", "write", "", &past), "in the past"),
    ] {
        let refused = store.create(bad).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(refused.message().contains(says), "{}", refused.message());
    }
    let mut by_app_password = request("alice", "n", "write", "", "");
    by_app_password.owner.as_mut().unwrap().kind = "app-password".into();
    assert_eq!(
        store.create(by_app_password).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let mut reader = request("alice", "n", "write", "", "");
    reader.owner.as_mut().unwrap().read_only = true;
    assert_eq!(
        store.create(reader).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    for n in 0..MAX_PER_USER {
        store
            .create(request("carol", &format!("n{n}"), "read", "", ""))
            .await
            .unwrap();
    }
    let full = store
        .create(request("carol", "one more", "read", "", ""))
        .await
        .unwrap_err();
    assert_eq!(full.code(), Code::ResourceExhausted);
}

#[tokio::test]
async fn without_a_given_secret_one_is_made_once_and_kept_with_the_data() {
    let fixture = Fixture::new();
    let store = fixture.replica_with(Duration::from_millis(500), None);
    assert!(
        !fixture.dir.path().join(".kubedav/keys/secret").exists(),
        "made only when needed"
    );
    let made = store
        .create(request("alice", "kept key", "write", "", ""))
        .await
        .unwrap();
    assert!(fixture.dir.path().join(".kubedav/keys/secret").exists());
    let restarted = fixture.replica_with(Duration::from_millis(500), None);
    assert!(restarted.verify("alice", &made.password).await.unwrap().is_ok());
    let other_key = fixture.replica_with(Duration::from_millis(500), Some(vec![9; 32]));
    assert_eq!(
        other_key.verify("alice", &made.password).await.unwrap().err(),
        Some(Refused::Unknown)
    );
}
