//! Users from a real OpenID provider (panva's oidc-provider, `kubedav_testkit::idp`), in
//! both modes: bearer tokens got through the provider's login page on every method,
//! their groups deciding under a policy beside htpasswd users, rclone with a token, the
//! provider's key rotation without a restart, a start while the provider is down, and
//! forged or foreign tokens refused and counted.

#[macro_use]
mod common;

use common::{BACKEND, Backend, Mode, Server, client, eventually_async, metric_text, users_file};
use kubedav_testkit::idp::{Account, Idp};
use reqwest::StatusCode;
use std::time::Duration;

const POLICY: &str = "\
homes: /home/{user}
rules:
  - path: /team
    grant: {\"group:team\": write}
";

fn accounts() -> Vec<Account> {
    vec![
        Account::new("alice", "alice-password", &["team"]),
        Account::new("bob", "bob-password", &[]),
    ]
}

/// kubedav with htpasswd user `carol`, the provider's users, and `policy` if given.
async fn start(mode: Mode, idp: &Idp, dir: &std::path::Path, extra: &[&str], policy: Option<&str>) -> Server {
    let users = users_file(dir, &[("carol", "carol-password")]);
    let mut gateway_args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    if let Some(policy) = policy {
        let file = dir.join("policy.yaml");
        std::fs::write(&file, policy).unwrap();
        gateway_args.extend(["--policy".into(), file.display().to_string()]);
    }
    let gateway_args: Vec<&str> = gateway_args.iter().map(String::as_str).collect();
    let issuer = idp.issuer();
    let envs = [
        ("KUBEDAV_OIDC_ISSUER", issuer.as_str()),
        ("KUBEDAV_OIDC_JWKS_MIN_REFRESH_SECONDS", "1"),
        ("KUBEDAV_OIDC_JWKS_REFRESH_SECONDS", "1"),
    ];
    Server::start_auth(mode, Some(&users), &[], &gateway_args, &envs).await
}

async fn with_token(
    server: &Server,
    method: &str,
    path: &str,
    token: &str,
    body: &'static str,
) -> StatusCode {
    client()
        .request(method.parse().unwrap(), server.url(path))
        .bearer_auth(token)
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
}

async fn bearer_tokens_work_on_every_method_and_their_groups_decide(mode: Mode) {
    let idp = Idp::start(&accounts(), &[]);
    let dir = tempfile::tempdir().unwrap();
    let server = start(mode, &idp, dir.path(), &[], Some(POLICY)).await;
    let alice = idp.token("alice", "alice-password").await.unwrap();
    let bob = idp.token("bob", "bob-password").await.unwrap();
    assert!(
        idp.token("alice", "wrong").await.is_err(),
        "the provider checks passwords"
    );

    // alice is in the provider's group team, which the policy lets write /team.
    assert_eq!(
        with_token(&server, "PUT", "/team/plan.txt", &alice, "v1").await,
        StatusCode::CREATED
    );
    assert_eq!(
        with_token(&server, "GET", "/team/plan.txt", &alice, "").await,
        StatusCode::OK
    );
    assert_eq!(
        with_token(&server, "MKCOL", "/team/docs", &alice, "").await,
        StatusCode::CREATED
    );
    let propfind = client()
        .request("PROPFIND".parse().unwrap(), server.url("/team/"))
        .bearer_auth(&alice)
        .header("Depth", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(propfind.status().as_u16(), 207);
    assert!(propfind.text().await.unwrap().contains("plan.txt"));
    assert_eq!(
        with_token(&server, "DELETE", "/team/docs", &alice, "").await,
        StatusCode::NO_CONTENT
    );
    // Her home is keyed by the provider's stable subject, behind the prefix.
    assert_eq!(
        with_token(&server, "PUT", "/home/oidc-u-alice/notes.txt", &alice, "mine").await,
        StatusCode::CREATED
    );
    // bob is in no group: /team does not exist for him.
    assert_eq!(
        with_token(&server, "GET", "/team/plan.txt", &bob, "").await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        with_token(&server, "GET", "/home/oidc-u-alice/notes.txt", &bob, "").await,
        StatusCode::NOT_FOUND
    );
    // The htpasswd user works beside them.
    let carol = client()
        .put(server.url("/home/carol/c.txt"))
        .basic_auth("carol", Some("carol-password"))
        .body("c")
        .send()
        .await
        .unwrap();
    assert_eq!(carol.status(), StatusCode::CREATED);

    // No credentials: both schemes are offered. A bad token: invalid_token, and why.
    let anonymous = client().get(server.url("/")).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let offered: Vec<&str> = anonymous
        .headers()
        .get_all("www-authenticate")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert!(
        offered.iter().any(|v| v.starts_with("Basic realm=")),
        "{offered:?}"
    );
    assert!(
        offered.iter().any(|v| v.starts_with("Bearer realm=")),
        "{offered:?}"
    );
    // One character of the signature changed (in the middle: every bit there counts).
    let at = alice.rfind('.').unwrap() + 10;
    let changed = if &alice[at..=at] == "A" { "B" } else { "A" };
    let tampered = format!("{}{changed}{}", &alice[..at], &alice[at + 1..]);
    let refused = client()
        .get(server.url("/team/"))
        .bearer_auth(&tampered)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let bearer = refused
        .headers()
        .get_all("www-authenticate")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|v| v.starts_with("Bearer"))
        .unwrap();
    assert!(bearer.contains("error=\"invalid_token\""), "{bearer}");
    assert!(refused.text().await.unwrap().contains("signature"));
    let admin = server.admin_of(if mode == Mode::AllInOne { "all" } else { "auth" });
    let metrics = metric_text(admin).await;
    assert!(
        metrics.contains("kubedav_auth_verifications_total{kind=\"bearer\",result=\"signature\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("kubedav_auth_idp_up 1"), "{metrics}");

    // Bogus tokens count against the address as wrong passwords do: after 20 refusals
    // (one above) it is locked out, and answered 429 without a signature check.
    let mut refusals = 1;
    loop {
        let answer = with_token(&server, "GET", "/team/", &tampered, "").await;
        if answer == StatusCode::TOO_MANY_REQUESTS {
            break;
        }
        assert_eq!(answer, StatusCode::UNAUTHORIZED);
        refusals += 1;
        assert!(
            refusals <= 20,
            "still checking signatures after {refusals} bogus tokens"
        );
    }
    let metrics = metric_text(admin).await;
    assert!(
        metrics.contains(&format!(
            "kubedav_auth_verifications_total{{kind=\"bearer\",result=\"signature\"}} {refusals}"
        )),
        "{metrics}"
    );
}

async fn rclone_copies_a_tree_in_and_out_with_a_bearer_token(mode: Mode) {
    let idp = Idp::start(&accounts(), &[]);
    let dir = tempfile::tempdir().unwrap();
    let server = start(mode, &idp, dir.path(), &[], Some(POLICY)).await;
    let token = idp.token("alice", "alice-password").await.unwrap();
    let source = dir.path().join("source");
    std::fs::create_dir_all(source.join("sub")).unwrap();
    std::fs::write(source.join("a.txt"), "alpha").unwrap();
    std::fs::write(source.join("sub/b.bin"), vec![7u8; 300_000]).unwrap();
    let remote = format!(":webdav,url='{}':team/tree", server.url("/"));
    let rclone = |args: &[&str]| {
        let output = std::process::Command::new("rclone")
            .args(args)
            .args(["--webdav-bearer-token", &token, "--config", "/dev/null", "-q"])
            .output()
            .expect("rclone runs (make test installs it)");
        assert!(
            output.status.success(),
            "rclone {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    rclone(&["copy", source.to_str().unwrap(), &remote]);
    let back = dir.path().join("back");
    rclone(&["copy", &remote, back.to_str().unwrap()]);
    assert_eq!(std::fs::read(back.join("a.txt")).unwrap(), b"alpha");
    assert_eq!(std::fs::read(back.join("sub/b.bin")).unwrap(), vec![7u8; 300_000]);
    rclone(&["check", source.to_str().unwrap(), &remote]);
}

async fn rotated_keys_verify_without_a_restart(mode: Mode) {
    let mut idp = Idp::start(&accounts(), &[]);
    let dir = tempfile::tempdir().unwrap();
    let server = start(mode, &idp, dir.path(), &[], None).await;
    let old_key = std::fs::read_to_string(idp.keys_file()).unwrap();
    let old_token = idp.token("alice", "alice-password").await.unwrap();
    assert_eq!(
        with_token(&server, "GET", "/", &old_token, "").await,
        StatusCode::OK
    );

    // A new key signs; the old one is still published.
    let new_key = idp.new_key("key-2");
    idp.set_keys(&[new_key.clone(), first_key(&old_key)]);
    idp.restart();
    let new_token = idp.token("alice", "alice-password").await.unwrap();
    assert!(new_token != old_token);
    assert!(
        eventually_async(Duration::from_secs(10), || async {
            with_token(&server, "GET", "/", &new_token, "").await == StatusCode::OK
        })
        .await,
        "a token of the new key verifies without a restart"
    );
    assert_eq!(
        with_token(&server, "GET", "/", &old_token, "").await,
        StatusCode::OK
    );

    // The old key leaves the JWKS: its tokens stop verifying at the next refresh, even
    // those verified before (the cache keeps nothing past the keys that signed it).
    idp.set_keys(&[new_key]);
    idp.restart();
    let fresh_old_token_refused = eventually_async(Duration::from_secs(10), || async {
        with_token(&server, "GET", "/", &old_token, "").await == StatusCode::UNAUTHORIZED
    })
    .await;
    assert!(
        fresh_old_token_refused,
        "a token of a key no longer published is refused"
    );
    assert_eq!(
        with_token(&server, "GET", "/", &new_token, "").await,
        StatusCode::OK
    );
}

async fn kubedav_starts_while_the_provider_is_down(mode: Mode) {
    let mut idp = Idp::start(&accounts(), &[]);
    let token = idp.token("alice", "alice-password").await.unwrap();
    idp.stop();
    let dir = tempfile::tempdir().unwrap();
    let server = start(mode, &idp, dir.path(), &[], None).await;
    // htpasswd users are served at once.
    let carol = client()
        .get(server.url("/"))
        .basic_auth("carol", Some("carol-password"))
        .send()
        .await
        .unwrap();
    assert_eq!(carol.status(), StatusCode::OK);
    // Bearer tokens cannot be checked yet, and say so.
    let refused = client()
        .get(server.url("/"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("identity provider has not been reached")
    );
    // /readyz stays ready, naming the provider's URL and the error; the metric says down.
    let admin = server.admin_of(if mode == Mode::AllInOne { "all" } else { "auth" });
    let readyz = client()
        .get(format!("http://{admin}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(readyz.status(), StatusCode::OK);
    let text = readyz.text().await.unwrap();
    assert!(text.contains("degraded: identity provider"), "{text}");
    assert!(text.contains(&idp.issuer()), "{text}");
    assert!(metric_text(admin).await.contains("kubedav_auth_idp_up 0"));

    idp.restart();
    assert!(
        eventually_async(Duration::from_secs(20), || async {
            with_token(&server, "GET", "/", &token, "").await == StatusCode::OK
        })
        .await,
        "bearer tokens verify once the provider answers"
    );
    let text = client()
        .get(format!("http://{admin}/readyz"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(text, "ready\n");
}

/// The file manager's sign-in through the provider's own login page, in headless
/// Chromium (`tests/clients/browser_sign_in.py`): a session that uploads and makes an
/// app password; a page of another origin on the same host that tries to write, make
/// an app password, share, publish a link and sign the user out, with the session
/// cookie and then with Basic credentials the browser sends, and does none of it; a sign-out that ends the session
/// for every client; and the app password refused soon after the account is disabled
/// at the provider.
async fn the_file_manager_signs_in_through_the_provider(mode: Mode) {
    let port = kubedav_testkit::free_port_below_ephemeral();
    let public_url = format!("http://127.0.0.1:{port}");
    let mut idp = Idp::start(&accounts(), &[format!("{public_url}/.kubedav/callback")]);
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("carol", "carol-password")]);
    let secret_file = dir.path().join("client-secret");
    std::fs::write(&secret_file, format!("{}\n", kubedav_testkit::idp::CLIENT_SECRET)).unwrap();
    let issuer = idp.issuer();
    let listen = format!("127.0.0.1:{port}");
    let envs = [
        ("KUBEDAV_OIDC_ISSUER", issuer.as_str()),
        ("KUBEDAV_OIDC_CLIENT_SECRET_FILE", secret_file.to_str().unwrap()),
        ("KUBEDAV_OIDC_SCOPES", "openid profile groups offline_access"),
        ("KUBEDAV_OIDC_ACCOUNT_CHECK_SECONDS", "1"),
        ("KUBEDAV_PUBLIC_URL", public_url.as_str()),
        (
            "KUBEDAV_SECRET_KEY",
            "a secret key of at least thirty-two bytes, for tests",
        ),
    ];
    // Everyone manages everything: the other origin's shares and links would be allowed.
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "rules:\n  - path: /\n    grant: {\"*\": manage}\n").unwrap();
    let gateway_args = ["--listen", &listen, "--policy", policy.to_str().unwrap()];
    let server = Server::start_auth(mode, Some(&users), &[], &gateway_args, &envs).await;
    // The provider's keys are fetched in the background: sign-in waits for them.
    assert!(
        eventually_async(Duration::from_secs(10), || async {
            !metric_text(server.admin_of(if mode == Mode::AllInOne { "all" } else { "auth" }))
                .await
                .contains("kubedav_auth_idp_up 0")
        })
        .await
    );
    let python = common::tools::tool("KUBEDAV_BROWSER_PYTHON", "need-browser.sh");
    let shots = match std::env::var("KUBEDAV_SCREENSHOTS") {
        Ok(shots) => std::path::PathBuf::from(shots),
        Err(_) => dir.path().to_owned(),
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/browser_sign_in.py");
    let output = common::tools::run(
        &python,
        &[
            script,
            &public_url,
            shots.to_str().unwrap(),
            "alice",
            "alice-password",
            "carol",
            "carol-password",
        ],
        None,
    )
    .await;
    assert!(output.contains("sign-in ok"), "{output}");
    eprintln!("{output}");
    let line = |prefix: &str| {
        output
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {output}"))
            .to_owned()
    };
    let basic = |path: &str, method: &str, user: &str, password: &str| {
        client()
            .request(method.parse().unwrap(), server.url(path))
            .basic_auth(user, Some(password))
            .body("written")
    };

    // The upload landed, as the signed-in user made it.
    let uploaded = basic("/hello.txt", "GET", "carol", "carol-password")
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.text().await.unwrap(), "hello from the browser\n");
    // Nothing the other origin tried happened, with the cookie or with Basic.
    for stolen in ["/stolen.txt", "/stolen-form.txt", "/stolen-dir/"] {
        let found = basic(stolen, "GET", "carol", "carol-password")
            .send()
            .await
            .unwrap();
        assert_eq!(found.status(), StatusCode::NOT_FOUND, "{stolen}: {output}");
    }
    let alice_token = idp.token("alice", "alice-password").await.unwrap();
    let listed = |credential: reqwest::RequestBuilder| async move {
        let answer = credential.send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        answer.json::<serde_json::Value>().await.unwrap()
    };
    let alices = listed(
        client()
            .get(server.url("/.kubedav/app-passwords"))
            .bearer_auth(&alice_token),
    )
    .await;
    assert_eq!(alices.as_array().unwrap().len(), 1, "{alices}");
    let carols = listed(basic("/.kubedav/app-passwords", "GET", "carol", "carol-password")).await;
    assert_eq!(carols.as_array().unwrap().len(), 0, "{carols}");
    // Nor did it share or publish the upload, as either user.
    let alices = listed(
        client()
            .get(server.url("/.kubedav/shares"))
            .bearer_auth(&alice_token),
    )
    .await;
    assert_eq!(alices["made"], serde_json::json!([]), "{alices}");
    let carols = listed(basic("/.kubedav/shares", "GET", "carol", "carol-password")).await;
    assert_eq!(carols["made"], serde_json::json!([]), "{carols}");
    let alices = listed(
        client()
            .get(server.url("/.kubedav/links"))
            .bearer_auth(&alice_token),
    )
    .await;
    assert_eq!(alices, serde_json::json!([]), "{alices}");
    let carols = listed(basic("/.kubedav/links", "GET", "carol", "carol-password")).await;
    assert_eq!(carols, serde_json::json!([]), "{carols}");

    // The session ended for every client at sign-out.
    let session = line("session: ");
    let with_cookie = client()
        .get(server.url("/"))
        .header("cookie", format!("kubedav-session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(with_cookie.status(), StatusCode::UNAUTHORIZED);
    let metrics = metric_text(server.admin_of(if mode == Mode::AllInOne { "all" } else { "auth" })).await;
    assert!(
        metrics.contains("kubedav_auth_sign_ins_total{result=\"completed\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("kubedav_auth_sign_ins_total{result=\"signed_out\"} 1"),
        "{metrics}"
    );

    // The app password works until the account is disabled at the provider, then stops
    // within the check period (1 s here) and the freshness bound.
    let app = line("app: ");
    let user = "oidc-u-alice";
    let put = basic("/app.txt", "PUT", user, &app).send().await.unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    idp.set_disabled("alice", true);
    let disabled_at = std::time::Instant::now();
    assert!(
        eventually_async(Duration::from_secs(10), || async {
            basic("/app.txt", "GET", user, &app)
                .send()
                .await
                .unwrap()
                .status()
                == StatusCode::UNAUTHORIZED
        })
        .await,
        "the app password of a disabled account still works"
    );
    let took = disabled_at.elapsed();
    // The bound: one check period, the freshness (0.5 s) and the provider's answer.
    assert!(
        took < Duration::from_secs(3),
        "took {took:?}, past the bound of 1.5 s and the provider's answer"
    );
    let metrics = metric_text(server.admin_of(if mode == Mode::AllInOne { "all" } else { "auth" })).await;
    assert!(
        metrics.contains("kubedav_auth_accounts_suspended_total 1"),
        "{metrics}"
    );

    // A sign-in of its own lets a client call the callback with made-up codes, each a
    // call to the provider: refusals count against its address, which is then refused
    // without one. (Last: the address stays locked out for a while.)
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let started = no_redirects
        .get(server.url("/.kubedav/sign-in"))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), StatusCode::SEE_OTHER);
    let flow = started.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let location = started.headers()["location"].to_str().unwrap().to_owned();
    let state = location
        .split(['?', '&'])
        .find_map(|pair| pair.strip_prefix("state="))
        .unwrap()
        .to_owned();
    let callback = |code: &str| {
        no_redirects
            .get(server.url(&format!("/.kubedav/callback?code={code}&state={state}")))
            .header("cookie", &flow)
            .send()
    };
    let refused = callback("made-up").await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let page = refused.text().await.unwrap();
    assert!(
        page.contains("the identity provider refused the sign-in"),
        "{page}"
    );
    let mut answers = Vec::new();
    for _ in 0..25 {
        answers.push(callback("made-up").await.unwrap().status());
    }
    assert_eq!(
        answers.last(),
        Some(&StatusCode::TOO_MANY_REQUESTS),
        "{answers:?}"
    );
}

/// The first key of a keys file's JSON.
fn first_key(keys_json: &str) -> String {
    let keys: serde_json::Value = serde_json::from_str(keys_json).unwrap();
    keys["keys"][0].to_string()
}

in_both_modes!(
    bearer_tokens_work_on_every_method_and_their_groups_decide,
    rclone_copies_a_tree_in_and_out_with_a_bearer_token,
    rotated_keys_verify_without_a_restart,
    kubedav_starts_while_the_provider_is_down,
    the_file_manager_signs_in_through_the_provider,
);
// Sessions and accounts are records: in the bucket too.
on_s3!(the_file_manager_signs_in_through_the_provider);
