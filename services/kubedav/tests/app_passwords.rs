//! App passwords end to end, in both modes: made, listed and revoked through the API
//! (`{base}/.kubedav/app-passwords`) only by calls that prove they come from kubedav's
//! own pages or a script, used with Basic by davfs2 and cadaver, limited to their scope,
//! refused everywhere within a second of their revocation through either of two
//! gateways, and kept with the data through a restart of every process and a Redis
//! `FLUSHALL`. Browser sessions across the same two gateways: one sign-in, one session
//! everywhere, ended everywhere, and working with a provider's app passwords and bearer
//! tokens while the provider is down.

#[macro_use]
mod common;

use common::fleet::Fleet;
use common::tools::{davfs2_mount, davfs2_try_mount, run, run_status};
use common::{BACKEND, Backend, Mode, Server, client, eventually_async, metric_sum, users_file};
use kubedav_testkit::RedisServer;
use kubedav_testkit::idp::{Account, Idp};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const SECRET_KEY: &str = "a key of at least thirty-two bytes, shared by every replica";

/// POSTs `body` to the API as `user`, with the proof of origin kubedav's pages send.
async fn create(at: &str, user: (&str, &str), body: Value) -> (StatusCode, Value) {
    let response = client()
        .post(format!("{at}/.kubedav/app-passwords"))
        .basic_auth(user.0, Some(user.1))
        .header("x-kubedav-request", "1")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The app passwords `user` holds, as the API lists them.
async fn list(at: &str, user: (&str, &str)) -> Value {
    client()
        .get(format!("{at}/.kubedav/app-passwords"))
        .basic_auth(user.0, Some(user.1))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn status_with(url: &str, method: &str, user: &str, password: &str) -> StatusCode {
    client()
        .request(method.parse().unwrap(), url)
        .basic_auth(user, Some(password))
        .header("depth", "0")
        .body(if method == "PUT" { "x" } else { "" })
        .send()
        .await
        .unwrap()
        .status()
}

async fn made_listed_scoped_and_revoked_through_the_api(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("carol", "carol-password")]);
    let envs = [("KUBEDAV_SECRET_KEY", SECRET_KEY)];
    let server = Server::start_auth(mode, Some(&users), &[], &[], &envs).await;
    let base = server.url("");
    let carol = ("carol", "carol-password");
    for path in ["/docs/", "/other/"] {
        let made = client()
            .request("MKCOL".parse().unwrap(), server.url(path))
            .basic_auth(carol.0, Some(carol.1))
            .send()
            .await
            .unwrap();
        assert_eq!(made.status(), StatusCode::CREATED);
    }

    // Without the proof of origin, or from another origin: refused, nothing made.
    let no_proof = client()
        .post(format!("{base}/.kubedav/app-passwords"))
        .basic_auth(carol.0, Some(carol.1))
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_proof.status(), StatusCode::FORBIDDEN);
    assert!(no_proof.text().await.unwrap().contains("X-Kubedav-Request"));
    let other_port = format!("http://127.0.0.1:{}", server.addr.port() + 1);
    for (header, value) in [("origin", other_port.as_str()), ("sec-fetch-site", "same-site")] {
        let foreign = client()
            .post(format!("{base}/.kubedav/app-passwords"))
            .basic_auth(carol.0, Some(carol.1))
            .header("x-kubedav-request", "1")
            .header(header, value)
            .json(&json!({"name": "x"}))
            .send()
            .await
            .unwrap();
        assert_eq!(foreign.status(), StatusCode::FORBIDDEN, "{header}: {value}");
    }
    let text_plain = client()
        .post(format!("{base}/.kubedav/app-passwords"))
        .basic_auth(carol.0, Some(carol.1))
        .header("x-kubedav-request", "1")
        .header("content-type", "text/plain")
        .body(r#"{"name": "x"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(text_plain.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let listed = list(&base, carol).await;
    assert_eq!(listed, json!([]), "nothing was made by the refused calls");

    // Made from kubedav's own origin: shown once, listed without its secret.
    let own_origin = format!("http://{}", server.addr);
    let made = client()
        .post(format!("{base}/.kubedav/app-passwords"))
        .basic_auth(carol.0, Some(carol.1))
        .header("x-kubedav-request", "1")
        .header("origin", &own_origin)
        .header("sec-fetch-site", "same-origin")
        .json(&json!({"name": "Laptop, davfs2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    let made: Value = made.json().await.unwrap();
    let writer = made["password"].as_str().unwrap().to_owned();
    assert!(writer.starts_with("kdv-") && writer.len() <= 64, "{writer}");
    assert_eq!(made["username"], "carol");
    assert_eq!(made["permission"], "write");
    let (status, reader) = create(
        &base,
        carol,
        json!({"name": "reader", "permission": "read", "path": "/docs"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{reader}");
    let reader_password = reader["password"].as_str().unwrap().to_owned();
    let listed = list(&base, carol).await;
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(
        !Value::Array(listed.clone()).to_string().contains(&writer[12..]),
        "no secret is listed"
    );
    let listed_reader = listed.iter().find(|shown| shown["name"] == "reader").unwrap();
    assert_eq!(listed_reader["path"], "/docs");
    assert_eq!(listed_reader["permission"], "read");

    // Used with Basic: the writer writes anywhere, the reader reads /docs only.
    assert_eq!(
        status_with(&server.url("/other/w.txt"), "PUT", "carol", &writer).await,
        StatusCode::CREATED
    );
    assert_eq!(
        status_with(&server.url("/docs/r.txt"), "PUT", "carol", &writer).await,
        StatusCode::CREATED
    );
    assert_eq!(
        status_with(&server.url("/docs/r.txt"), "GET", "carol", &reader_password).await,
        StatusCode::OK
    );
    assert_eq!(
        status_with(&server.url("/docs/"), "PROPFIND", "carol", &reader_password)
            .await
            .as_u16(),
        207
    );
    assert_eq!(
        status_with(&server.url("/docs/r.txt"), "PUT", "carol", &reader_password).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status_with(&server.url("/other/w.txt"), "GET", "carol", &reader_password).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        status_with(&server.url("/"), "PROPFIND", "carol", &reader_password).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        status_with(&server.url("/other/w.txt"), "GET", "mallory", &writer).await,
        StatusCode::UNAUTHORIZED
    );
    // An app password makes no app passwords.
    let (status, _) = create(&base, ("carol", &writer), json!({"name": "more"})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Revoked: refused at once; revoking again finds nothing.
    let id = made["id"].as_str().unwrap();
    let revoke = || {
        client()
            .delete(format!("{base}/.kubedav/app-passwords/{id}"))
            .basic_auth(carol.0, Some(carol.1))
            .header("x-kubedav-request", "1")
            .send()
    };
    assert_eq!(revoke().await.unwrap().status(), StatusCode::NO_CONTENT);
    assert_eq!(
        status_with(&server.url("/docs/r.txt"), "GET", "carol", &writer).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(revoke().await.unwrap().status(), StatusCode::NOT_FOUND);
    assert_eq!(
        status_with(&server.url("/docs/r.txt"), "GET", "carol", &reader_password).await,
        StatusCode::OK
    );
    // The records are where no WebDAV path reaches.
    if common::backend() == Backend::Volume {
        assert!(server.disk(".kubedav/app-passwords").is_dir());
    }
}

/// Two gateways over one storage, with htpasswd user carol, the shared secret key, and
/// `extra` environment.
async fn fleet(mode: Mode, redis: &RedisServer, dir: &Path, extra: &[(&str, &str)]) -> Fleet {
    let users = users_file(dir, &[("carol", "carol-password")]);
    let mut envs: Vec<(String, String)> = vec![
        ("KUBEDAV_SECRET_KEY".into(), SECRET_KEY.into()),
        ("KUBEDAV_LOCK_STORE".into(), redis.url(0)),
        ("KUBEDAV_USERS_FILE".into(), users.display().to_string()),
    ];
    envs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    common::fleet::fleet(mode, envs, dir).await
}

async fn davfs2_and_cadaver_use_one_and_every_gateway_drops_it_within_a_second(mode: Mode) {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut fleet = fleet(mode, &redis, dir.path(), &[]).await;
    let [a, b] = fleet.gateways.clone();
    let carol = ("carol", "carol-password");
    let (status, made) = create(&a, carol, json!({"name": "davfs2 and cadaver"})).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let password = made["password"].as_str().unwrap().to_owned();
    let (_, second) = create(&b, carol, json!({"name": "revoked through b"})).await;
    let (_, kept) = create(&b, carol, json!({"name": "kept through restarts"})).await;
    let kept = kept["password"].as_str().unwrap().to_owned();

    // davfs2 through gateway b writes a file; cadaver through gateway a reads it back.
    let mount_dir = tempfile::tempdir().unwrap();
    let mounted = davfs2_mount(&format!("{b}/"), mount_dir.path(), Some(("carol", &password))).await;
    std::fs::write(mounted.0.join("from-davfs2.txt"), b"written through davfs2").unwrap();
    run("umount", &[mounted.0.to_str().unwrap()], None).await;
    std::mem::forget(mounted);
    let fetched = dir.path().join("fetched.txt");
    let script = format!("get from-davfs2.txt {}\nquit\n", fetched.display());
    let output = cadaver(&format!("{a}/"), &script, &netrc(dir.path(), &password)).await;
    assert!(output.contains("succeeded"), "{output}");
    assert_eq!(std::fs::read(&fetched).unwrap(), b"written through davfs2");

    // Each revoked through one gateway: refused there at once, through the other within
    // a second, and then by cadaver and davfs2 through both.
    let second = (
        second["id"].as_str().unwrap().to_owned(),
        second["password"].as_str().unwrap().to_owned(),
    );
    let first = (made["id"].as_str().unwrap().to_owned(), password.clone());
    for ((id, password), (through, other)) in [(first, (&a, &b)), (second, (&b, &a))] {
        for gateway in [through, other] {
            assert_eq!(
                status_with(&format!("{gateway}/"), "PROPFIND", "carol", &password)
                    .await
                    .as_u16(),
                207
            );
        }
        let revoked = client()
            .delete(format!("{through}/.kubedav/app-passwords/{id}"))
            .basic_auth(carol.0, Some(carol.1))
            .header("x-kubedav-request", "1")
            .send()
            .await
            .unwrap();
        assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
        let at = Instant::now();
        assert_eq!(
            status_with(&format!("{through}/"), "PROPFIND", "carol", &password).await,
            StatusCode::UNAUTHORIZED
        );
        loop {
            let status = status_with(&format!("{other}/"), "PROPFIND", "carol", &password).await;
            if status == StatusCode::UNAUTHORIZED {
                break;
            }
            assert!(
                at.elapsed() < Duration::from_secs(1),
                "{other} still accepts it after {:?}",
                at.elapsed()
            );
        }
        eprintln!(
            "revoked through {through}: refused through {other} after {:?}",
            at.elapsed()
        );
        let home = netrc(dir.path(), &password);
        for gateway in [through, other] {
            let output = cadaver_may_fail(&format!("{gateway}/"), &script, &home).await;
            assert!(
                !output.contains("succeeded"),
                "cadaver still got in through {gateway}: {output}"
            );
            let mount_dir = tempfile::tempdir().unwrap();
            let refused = davfs2_try_mount(
                &format!("{gateway}/"),
                mount_dir.path(),
                Some(("carol", &password)),
            )
            .await;
            assert!(refused.is_err(), "davfs2 still mounts through {gateway}");
        }
    }

    // Counted where they were made and revoked: three made, two revoked.
    let mut counted = (0.0, 0.0);
    for admin in fleet.auth_admins {
        counted.0 += metric_sum(admin, "kubedav_auth_app_passwords_total{event=\"created\"}").await;
        counted.1 += metric_sum(admin, "kubedav_auth_app_passwords_total{event=\"revoked\"}").await;
    }
    assert_eq!(counted, (3.0, 2.0));

    // Redis loses everything and every process restarts: the app password is still there.
    run("redis-cli", &["-u", &redis.url(0), "FLUSHALL"], None).await;
    for process in &mut fleet.processes {
        process.restart().await;
    }
    for gateway in [&a, &b] {
        assert_eq!(
            status_with(&format!("{gateway}/from-davfs2.txt"), "GET", "carol", &kept).await,
            StatusCode::OK
        );
        assert_eq!(
            status_with(&format!("{gateway}/"), "PROPFIND", "carol", &password).await,
            StatusCode::UNAUTHORIZED
        );
    }
}

/// A home for cadaver in `dir` whose `.netrc` gives carol's `password` for the test host.
fn netrc(dir: &Path, password: &str) -> std::path::PathBuf {
    let home = dir.join(format!("home-{}", &password[password.len() - 6..]));
    std::fs::create_dir_all(&home).unwrap();
    let netrc = home.join(".netrc");
    std::fs::write(
        &netrc,
        format!("machine 127.0.0.1\nlogin carol\npassword {password}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&netrc, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    home
}

/// A browser session and a provider account's app password across two gateways: a
/// sign-in started through one gateway is finished through the other, and its session
/// works through both; while the provider is down (keys and accounts checked each
/// second, in vain) the session, an app password made with it and a bearer token on the
/// keys fetched before all keep working (the session's cookie is a `__Host-` one, as
/// behind an Ingress with TLS); a sign-out through one gateway ends the session
/// through the other within a second.
async fn a_session_works_through_every_gateway_and_while_the_provider_is_down(mode: Mode) {
    // The address browsers use, through an Ingress that ends TLS.
    let public = "https://kubedav.test";
    let callback = format!("{public}/.kubedav/callback");
    let mut idp = Idp::start(
        &[Account::new("alice", "alice-password", &["team"])],
        std::slice::from_ref(&callback),
    );
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("client-secret");
    std::fs::write(&secret_file, format!("{}\n", kubedav_testkit::idp::CLIENT_SECRET)).unwrap();
    let issuer = idp.issuer();
    let envs = [
        ("KUBEDAV_OIDC_ISSUER", issuer.as_str()),
        ("KUBEDAV_OIDC_CLIENT_SECRET_FILE", secret_file.to_str().unwrap()),
        ("KUBEDAV_OIDC_SCOPES", "openid profile groups offline_access"),
        ("KUBEDAV_OIDC_ACCOUNT_CHECK_SECONDS", "1"),
        ("KUBEDAV_OIDC_JWKS_MIN_REFRESH_SECONDS", "1"),
        ("KUBEDAV_OIDC_JWKS_REFRESH_SECONDS", "1"),
        ("KUBEDAV_PUBLIC_URL", public),
    ];
    let fleet = fleet(mode, &redis, dir.path(), &envs).await;
    let [a, b] = fleet.gateways.clone();
    for admin in fleet.auth_admins {
        assert!(
            eventually_async(Duration::from_secs(10), || async {
                metric_sum(admin, "kubedav_auth_idp_up").await == 1.0
            })
            .await,
            "the provider's keys were not fetched"
        );
    }

    // Started through a, sent to the provider's login page, finished through b.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let started = no_redirects
        .get(format!("{a}/.kubedav/sign-in"))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), StatusCode::SEE_OTHER);
    let flow = first_cookie(&started);
    let to_provider = started.headers()["location"].to_str().unwrap().to_owned();
    let back = idp
        .sign_in(&to_provider, "alice", "alice-password", &callback)
        .await
        .unwrap();
    let finished = no_redirects
        .get(back.replacen(public, &b, 1))
        .header("cookie", &flow)
        .send()
        .await
        .unwrap();
    assert_eq!(finished.status(), StatusCode::SEE_OTHER);
    // A cookie only this host can set, sent back only over TLS, never to scripts.
    let set = finished.headers()["set-cookie"].to_str().unwrap().to_owned();
    for part in [
        "__Host-kubedav-session=",
        "; Path=/;",
        "; HttpOnly",
        "; SameSite=Lax",
        "; Secure",
    ] {
        assert!(set.contains(part), "no {part} in {set}");
    }
    let session = first_cookie(&finished);
    let with_session = |at: &str, method: &str, path: &str| {
        client()
            .request(method.parse().unwrap(), format!("{at}{path}"))
            .header("cookie", &session)
    };
    for gateway in [&a, &b] {
        let listing = with_session(gateway, "GET", "/").send().await.unwrap();
        assert_eq!(listing.status(), StatusCode::OK, "through {gateway}");
    }
    let made = with_session(&b, "POST", "/.kubedav/app-passwords")
        .header("x-kubedav-request", "1")
        .header("content-type", "application/json")
        .body(json!({"name": "while the provider is down"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    let made: Value = made.json().await.unwrap();
    let (user, password) = (
        made["username"].as_str().unwrap(),
        made["password"].as_str().unwrap(),
    );
    let token = idp.token("alice", "alice-password").await.unwrap();

    // The provider goes down: keys and accounts are checked each second and fail, and
    // every credential goes on working through both gateways.
    idp.stop();
    for admin in fleet.auth_admins {
        assert!(
            eventually_async(Duration::from_secs(20), || async {
                metric_sum(admin, "kubedav_auth_jwks_fetches_total{result=\"error\"}").await >= 3.0
            })
            .await,
            "the provider's keys were not tried again"
        );
    }
    for gateway in [&a, &b] {
        let put = client()
            .put(format!("{gateway}/down.txt"))
            .basic_auth(user, Some(password))
            .body("written while the provider is down")
            .send()
            .await
            .unwrap();
        assert!(
            put.status().is_success(),
            "app password through {gateway}: {}",
            put.status()
        );
        let got = client()
            .get(format!("{gateway}/down.txt"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(got.status(), StatusCode::OK, "bearer token through {gateway}");
        let listing = with_session(gateway, "GET", "/").send().await.unwrap();
        assert_eq!(listing.status(), StatusCode::OK, "session through {gateway}");
    }
    for admin in fleet.auth_admins {
        assert_eq!(
            metric_sum(admin, "kubedav_auth_accounts_suspended_total").await,
            0.0
        );
        assert_eq!(metric_sum(admin, "kubedav_auth_idp_up").await, 0.0);
        // The keys in use are those of the last good fetch, seconds ago.
        assert!(metric_sum(admin, "kubedav_auth_jwks_age_seconds").await >= 2.0);
    }

    // Back up; signed out through a: refused through a at once, through b within a second.
    idp.restart();
    let ended = with_session(&a, "POST", "/.kubedav/sign-out")
        .header("x-kubedav-request", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), StatusCode::OK);
    let ended: Value = ended.json().await.unwrap();
    assert!(
        ended["redirect"].as_str().unwrap().starts_with(&issuer),
        "not sent to the provider's end-session page: {ended}"
    );
    let at = Instant::now();
    assert_eq!(
        with_session(&a, "GET", "/").send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    loop {
        if with_session(&b, "GET", "/").send().await.unwrap().status() == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            at.elapsed() < Duration::from_secs(1),
            "gateway b still accepts the session after {:?}",
            at.elapsed()
        );
    }
    eprintln!("signed out through a: refused through b after {:?}", at.elapsed());
}

/// The first cookie an answer sets, as `name=value`.
fn first_cookie(answer: &reqwest::Response) -> String {
    let header = answer.headers()["set-cookie"].to_str().unwrap();
    header.split(';').next().unwrap().to_owned()
}

/// cadaver on `url` with credentials from `home`'s `.netrc`; its output.
async fn cadaver(url: &str, script: &str, home: &Path) -> String {
    let home = home.display().to_string();
    run("env", &[&format!("HOME={home}"), "cadaver", url], Some(script)).await
}

/// [`cadaver`], whose failure is the point: its output.
async fn cadaver_may_fail(url: &str, script: &str, home: &Path) -> String {
    let home = home.display().to_string();
    run_status("env", &[&format!("HOME={home}"), "cadaver", url], Some(script))
        .await
        .1
}

/// The file manager's page of app passwords in headless Chromium
/// (`tests/clients/browser_app_passwords.py`): made from the listing's link, one that
/// writes and one that reads, each secret read off the page, the second revoked with its
/// button; the first then writes with Basic, the second is refused (screenshots kept).
async fn the_file_manager_makes_and_revokes_app_passwords(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("carol", "carol-password")]);
    let envs = [("KUBEDAV_SECRET_KEY", SECRET_KEY)];
    let server = Server::start_auth(mode, Some(&users), &[], &[], &envs).await;
    let python = common::tools::tool("KUBEDAV_BROWSER_PYTHON", "need-browser.sh");
    let shots = match std::env::var("KUBEDAV_SCREENSHOTS") {
        Ok(shots) => std::path::PathBuf::from(shots),
        Err(_) => dir.path().to_owned(),
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/browser_app_passwords.py"
    );
    let url = server.url("");
    let output = run(
        &python,
        &[
            script,
            url.trim_end_matches('/'),
            shots.to_str().unwrap(),
            "carol",
            "carol-password",
        ],
        None,
    )
    .await;
    assert!(output.contains("app passwords ok"), "{output}");
    let secret = |kind: &str| {
        output
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{kind}: ")))
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        status_with(&server.url("/laptop.txt"), "PUT", "carol", &secret("write")).await,
        StatusCode::CREATED
    );
    assert_eq!(
        status_with(&server.url("/"), "PROPFIND", "carol", &secret("read")).await,
        StatusCode::UNAUTHORIZED
    );
    assert!(shots.join("app-passwords-made.png").exists() && shots.join("app-passwords-list.png").exists());
}

/// A revocation does not go through Redis: an app password revoked while the Redis
/// master behind Sentinel is killed (locks kept there) is refused through both gateways
/// within a second, and stays refused once a replica is master.
async fn a_revocation_holds_across_a_redis_failover(mode: Mode) {
    let group = kubedav_testkit::sentinel::SentinelGroup::start();
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("carol", "carol-password")]);
    let envs: Vec<(String, String)> = vec![
        ("KUBEDAV_SECRET_KEY".into(), SECRET_KEY.into()),
        ("KUBEDAV_LOCK_STORE".into(), group.url(0)),
        ("KUBEDAV_USERS_FILE".into(), users.display().to_string()),
    ];
    let fleet = common::fleet::fleet(mode, envs, dir.path()).await;
    let [a, b] = fleet.gateways.clone();
    let carol = ("carol", "carol-password");
    let (status, made) = create(&a, carol, json!({"name": "revoked in a failover"})).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let (id, password) = (
        made["id"].as_str().unwrap().to_owned(),
        made["password"].as_str().unwrap().to_owned(),
    );
    for gateway in [&a, &b] {
        let status = status_with(&format!("{gateway}/"), "PROPFIND", "carol", &password).await;
        assert_eq!(status.as_u16(), 207);
    }

    let mut group = group;
    let failover = tokio::task::spawn_blocking(move || {
        let took = group.kill_master();
        (group, took)
    });
    let revoked = client()
        .delete(format!("{a}/.kubedav/app-passwords/{id}"))
        .basic_auth(carol.0, Some(carol.1))
        .header("x-kubedav-request", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        revoked.status(),
        StatusCode::NO_CONTENT,
        "a revocation waited for Redis"
    );
    let at = Instant::now();
    let mut refused_everywhere = None;
    while !failover.is_finished() || refused_everywhere.is_none() {
        let mut accepted = Vec::new();
        for gateway in [&a, &b] {
            let status = status_with(&format!("{gateway}/"), "PROPFIND", "carol", &password).await;
            if !refused(status) {
                accepted.push((gateway.clone(), status));
            }
        }
        match (&refused_everywhere, accepted.is_empty()) {
            (None, true) => refused_everywhere = Some(at.elapsed()),
            (None, false) => assert!(
                at.elapsed() < Duration::from_secs(1),
                "still answered {accepted:?} {:?} after the revocation",
                at.elapsed()
            ),
            (Some(_), false) => panic!("a revoked app password was accepted again: {accepted:?}"),
            (Some(_), true) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_group, took) = failover.await.unwrap();
    eprintln!(
        "revoked while the Redis master died (a replica master {took:?} later): refused \
         through both gateways {:?} after the revocation",
        refused_everywhere.unwrap()
    );
    // Once a replica is master, still refused.
    for gateway in [&a, &b] {
        let status = status_with(&format!("{gateway}/"), "PROPFIND", "carol", &password).await;
        assert!(refused(status), "{status}");
    }
}

/// Whether a credential was refused: 401, or 429 once its failures locked the account
/// out for a while (each failure after the revocation counts).
fn refused(status: StatusCode) -> bool {
    status == StatusCode::UNAUTHORIZED || status == StatusCode::TOO_MANY_REQUESTS
}

in_both_modes!(
    a_revocation_holds_across_a_redis_failover,
    made_listed_scoped_and_revoked_through_the_api,
    davfs2_and_cadaver_use_one_and_every_gateway_drops_it_within_a_second,
    a_session_works_through_every_gateway_and_while_the_provider_is_down,
    the_file_manager_makes_and_revokes_app_passwords,
);
on_s3!(made_listed_scoped_and_revoked_through_the_api);
