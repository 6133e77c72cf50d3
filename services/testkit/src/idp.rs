//! [`Idp`]: a real OpenID provider (panva's `oidc-provider` on Node, as
//! `services/testkit/idp/idp.mjs` configures it) on a free loopback port, with accounts
//! and signing keys the test chooses, and [`Idp::token`], which gets a user's access
//! token the way a script does: the authorization code flow with PKCE through the
//! provider's own login page.

use base64::Engine;
use sha2::Digest;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// One account at the provider.
#[derive(Clone, Debug)]
pub struct Account {
    /// The name typed on the login page.
    pub login: String,
    /// The password typed there.
    pub password: String,
    /// The stable subject (`sub`).
    pub sub: String,
    /// The display name (`name`).
    pub name: String,
    /// The groups (`groups`).
    pub groups: Vec<String>,
    /// A disabled account cannot sign in, and the provider no longer finds it (a
    /// refresh token of it fails).
    pub disabled: bool,
}

impl Account {
    /// An enabled account whose subject is `u-{login}` and whose name is `login` with a
    /// capital.
    pub fn new(login: &str, password: &str, groups: &[&str]) -> Self {
        let mut name = login.to_owned();
        if let Some(first) = name.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        Self {
            login: login.into(),
            password: password.into(),
            sub: format!("u-{login}"),
            name,
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            disabled: false,
        }
    }
}

/// The provider's confidential client for kubedav's sign-in, as `idp.mjs` registers it.
pub const CLIENT_ID: &str = "kubedav";
/// Its secret.
pub const CLIENT_SECRET: &str = "kubedav-secret";
/// The audience of the provider's access tokens.
pub const AUDIENCE: &str = "kubedav";

/// A running provider. Stopped when dropped.
pub struct Idp {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    accounts: Vec<Account>,
    redirect_uris: Vec<String>,
}

impl Idp {
    /// Starts a provider with `accounts`, one new signing key, and kubedav's client
    /// allowed to return to `redirect_uris`.
    pub fn start(accounts: &[Account], redirect_uris: &[String]) -> Idp {
        let mut idp = Idp {
            child: None,
            port: 0,
            dir: tempfile::tempdir().expect("a temporary directory"),
            accounts: accounts.to_vec(),
            redirect_uris: redirect_uris.to_vec(),
        };
        let key = idp.new_key("key-1");
        idp.set_keys(&[key]);
        idp.write_accounts();
        for _ in 0..5 {
            idp.port = crate::free_port();
            if idp.spawn() {
                return idp;
            }
        }
        panic!("oidc-provider did not start on any of 5 free ports");
    }

    /// The issuer URL.
    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A new RS256 private JWK named `kid`.
    pub fn new_key(&self, kid: &str) -> String {
        let output = Command::new("node")
            .arg(self.script())
            .args(["genkey", kid])
            .output()
            .expect("node runs");
        assert!(
            output.status.success(),
            "genkey: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    }

    /// The keys the provider signs with (the first) and publishes (all) from its next
    /// start ([`Idp::restart`]): a rotation adds a new key in front, then drops the old.
    pub fn set_keys(&self, keys: &[String]) {
        std::fs::write(
            self.dir.path().join("keys.json"),
            format!("{{\"keys\":[{}]}}", keys.join(",")),
        )
        .expect("the keys file");
    }

    /// The keys file of the provider's last start: `{"keys": [private JWKs]}`.
    pub fn keys_file(&self) -> PathBuf {
        self.dir.path().join("keys.json")
    }

    /// Disables (or enables again) the account `login`, at once.
    pub fn set_disabled(&mut self, login: &str, disabled: bool) {
        for account in self.accounts.iter_mut().filter(|a| a.login == login) {
            account.disabled = disabled;
        }
        self.write_accounts();
    }

    /// Stops the provider (it is then unreachable, as an IdP that is down).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, with the keys last set.
    pub fn restart(&mut self) {
        self.stop();
        for _ in 0..50 {
            if self.spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("oidc-provider did not start again on port {}", self.port);
    }

    /// An access token of `login`, got as a script gets one: the authorization code flow
    /// with PKCE for the public client `cli`, signing in on the provider's login page.
    pub async fn token(&self, login: &str, password: &str) -> Result<String, String> {
        let issuer = self.issuer();
        let mut verifier = [0u8; 32];
        getrandom::fill(&mut verifier).map_err(|e| e.to_string())?;
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let verifier = b64(&verifier);
        let challenge = b64(&sha2::Sha256::digest(verifier.as_bytes()));
        let redirect = "http://127.0.0.1/callback";
        let authorize = format!(
            "{issuer}/auth?client_id=cli&response_type=code&scope=openid%20profile%20groups&state=s&\
             redirect_uri={}&code_challenge={challenge}&code_challenge_method=S256",
            percent(redirect)
        );
        let location = self.sign_in(&authorize, login, password, redirect).await?;
        let code = location
            .split(['?', '&'])
            .find_map(|p| p.strip_prefix("code="))
            .ok_or_else(|| format!("no code: {location}"))?;
        let client = reqwest::Client::new();
        self.exchange(&client, code, &verifier, redirect).await
    }

    /// Follows `authorize` (the provider's authorization URL, as a client sends a user
    /// there) through the provider's login page as `login`, as a person would, up to the
    /// redirect back to the client at `redirect`: that redirect's URL, with its `code` and
    /// `state`.
    pub async fn sign_in(
        &self,
        authorize: &str,
        login: &str,
        password: &str,
        redirect: &str,
    ) -> Result<String, String> {
        let issuer = self.issuer();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        let mut cookies = BTreeMap::new();
        let mut next = authorize.to_owned();
        let mut form: Option<String> = None;
        for _ in 0..10 {
            let request = match form.take() {
                Some(body) => client
                    .post(&next)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(body),
                None => client.get(&next),
            };
            let cookie: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let response = request
                .header("cookie", cookie.join("; "))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            for value in response.headers().get_all("set-cookie") {
                if let Some((pair, _)) = value.to_str().unwrap_or_default().split_once(';')
                    && let Some((name, value)) = pair.split_once('=')
                {
                    cookies.insert(name.to_owned(), value.to_owned());
                }
            }
            let status = response.status();
            if status.is_redirection() {
                let location = response.headers()["location"].to_str().unwrap().to_owned();
                if location.starts_with(&format!("{redirect}?")) {
                    return Ok(location);
                }
                next = if location.starts_with('/') {
                    format!("{issuer}{location}")
                } else {
                    location
                };
                continue;
            }
            let body = response.text().await.map_err(|e| e.to_string())?;
            if status.is_success() && body.contains("name=\"login\"") {
                if body.contains("id=\"problem\"") {
                    return Err(format!("the provider refused {login}'s sign-in"));
                }
                let action = body
                    .split("action=\"")
                    .nth(1)
                    .and_then(|rest| rest.split('"').next())
                    .ok_or("a login form without action")?;
                next = format!("{issuer}{action}");
                form = Some(format!("login={}&password={}", percent(login), percent(password)));
                continue;
            }
            return Err(format!("the provider answered {status}: {body}"));
        }
        Err("too many redirects".into())
    }

    async fn exchange(
        &self,
        client: &reqwest::Client,
        code: &str,
        verifier: &str,
        redirect: &str,
    ) -> Result<String, String> {
        let body = format!(
            "grant_type=authorization_code&client_id=cli&code={}&code_verifier={verifier}&redirect_uri={}",
            percent(code),
            percent(redirect)
        );
        let response = client
            .post(format!("{}/token", self.issuer()))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let text = response.text().await.map_err(|e| e.to_string())?;
        let answer: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{status}: {e}: {text}"))?;
        answer["access_token"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("no access token: {text}"))
    }

    fn script(&self) -> PathBuf {
        // Copied beside the installed node_modules, where Node resolves its imports.
        let modules = modules_dir();
        let script = modules.join("idp.mjs");
        let source = concat!(env!("CARGO_MANIFEST_DIR"), "/idp/idp.mjs");
        let text = std::fs::read(source).expect("idp.mjs");
        if std::fs::read(&script).ok().as_deref() != Some(&text[..]) {
            let temporary = modules.join(format!("idp.mjs.{}", std::process::id()));
            std::fs::write(&temporary, &text).expect("a copy of idp.mjs");
            std::fs::rename(&temporary, &script).expect("a copy of idp.mjs");
        }
        script
    }

    fn write_accounts(&self) {
        let accounts: Vec<serde_json::Value> = self
            .accounts
            .iter()
            .map(|a| {
                serde_json::json!({
                    "login": a.login, "password": a.password, "sub": a.sub,
                    "name": a.name, "groups": a.groups, "disabled": a.disabled,
                })
            })
            .collect();
        let path = self.dir.path().join("accounts.json");
        let temporary = self.dir.path().join("accounts.json.new");
        std::fs::write(
            &temporary,
            serde_json::json!({ "accounts": accounts }).to_string(),
        )
        .unwrap();
        std::fs::rename(temporary, path).unwrap();
    }

    fn spawn(&mut self) -> bool {
        let mut child = Command::new("node")
            .arg(self.script())
            .env("IDP_PORT", self.port.to_string())
            .env("IDP_KEYS", self.dir.path().join("keys.json"))
            .env("IDP_ACCOUNTS", self.dir.path().join("accounts.json"))
            .env("IDP_REDIRECT_URIS", self.redirect_uris.join(","))
            .env("IDP_AUDIENCE", AUDIENCE)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run node ({e}): `make test` installs it"));
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (ready_tx, ready_rx) = mpsc::channel();
        let port = self.port;
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with("listening on") {
                    let _ = ready_tx.send(());
                }
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !line.contains("WARNING") {
                    eprintln!("[idp:{port}] {line}");
                }
            }
        });
        let ready = ready_rx.recv_timeout(Duration::from_secs(30)).is_ok();
        self.child = Some(child);
        if !ready {
            self.stop();
        }
        ready
    }
}

impl Drop for Idp {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where `scripts/need-oidc-provider.sh` installed oidc-provider: `KUBEDAV_OIDC_PROVIDER`,
/// else the tools cache.
fn modules_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KUBEDAV_OIDC_PROVIDER") {
        return dir.into();
    }
    let cache = std::env::var_os("KUBEDAV_TOOLS_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("kubedav-tools")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/kubedav-tools")))
        .expect("HOME or KUBEDAV_TOOLS_CACHE");
    let dir = cache.join("oidc-provider-9.13.3");
    assert!(
        dir.join("node_modules/oidc-provider").is_dir(),
        "oidc-provider is not installed at {}: run scripts/need-oidc-provider.sh (make test does)",
        dir.display()
    );
    dir
}

fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
