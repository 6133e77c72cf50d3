//! In-process handler tests: the gateway's `service()` over the real fileio and locks
//! cores (and, with users, the real auth core) on a temporary directory, without a
//! socket, a process or gRPC. A request is a `tower::ServiceExt::oneshot` call, as in
//! axum's testing example, so a case costs milliseconds.
//!
//! What needs the wire (connections, framing, the services as processes, both run
//! modes) stays in the black-box suites of `services/kubedav/tests`.
#![allow(dead_code)]

use axum::body::Body;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use kubedav_api::auth::Auth;
use kubedav_gateway::request::ClientIp;
use kubedav_gateway::{Gateway, GatewayConfig, Ports};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

/// A gateway in this process over a fresh temporary root.
pub(crate) struct App {
    service: kubedav_gateway::app::HttpService,
    /// The gateway behind the service (to change its policy while it serves).
    pub gateway: Arc<Gateway>,
    root: tempfile::TempDir,
    /// Holds the users file.
    _config_dir: tempfile::TempDir,
}

/// How to build an [`App`].
#[derive(Default)]
pub(crate) struct Options {
    /// Users and their passwords; none serves without authentication.
    pub users: Vec<(&'static str, &'static str)>,
    /// Most locks one principal holds (0: no limit).
    pub max_locks_per_principal: usize,
    /// Changes to the gateway's defaults.
    pub config: Option<fn(&mut GatewayConfig)>,
    /// An access policy (YAML); the paths it names are made on the root.
    pub policy: Option<&'static str>,
    /// The clock the shares read (the system's when `None`).
    pub clock: Option<kubedav_gateway::shares::WallClock>,
    /// Deletes go to the trash and overwrites keep versions (each kept in the innermost
    /// quota root of the policy, as `kubedav` keeps them).
    pub keeping: bool,
}

impl App {
    /// A gateway without authentication.
    pub(crate) fn new() -> App {
        App::with(Options::default())
    }

    /// A gateway as `options` say.
    pub(crate) fn with(options: Options) -> App {
        let root = tempfile::tempdir().unwrap();
        let config_dir = tempfile::tempdir().unwrap();
        let mut fileio = kubedav_fileio::LocalFileIo::open(root.path()).unwrap();
        if options.keeping {
            let policy = options
                .policy
                .map(|yaml| Arc::new(kubedav_policy::Policy::from_yaml(yaml).unwrap()));
            fileio = fileio.with_keeping(kubedav_fileio::keep::Keeping {
                root_of: Arc::new(move |path| {
                    policy
                        .as_ref()
                        .and_then(|policy| policy.quota_roots(path).pop())
                        .map_or_else(kubedav_api::path::VolumePath::root, |root| root.path)
                }),
                ..kubedav_fileio::keep::Keeping::defaults()
            });
        }
        let locks = kubedav_locks::MemoryLocks::new(Duration::from_secs(3600))
            .with_max_locks_per_principal(options.max_locks_per_principal);
        let auth = (!options.users.is_empty()).then(|| {
            let users = config_dir.path().join("users");
            let lines: String = options
                .users
                .iter()
                .map(|(user, password)| {
                    format!(
                        "{user}:{}\n",
                        kubedav_auth::passwd::sha512_crypt(password).unwrap()
                    )
                })
                .collect();
            std::fs::write(&users, lines).unwrap();
            let core = kubedav_auth::AuthCore::new(kubedav_auth::AuthConfig {
                users_file: Some(users),
                oidc: None,
                allow_plaintext: false,
                cache_ttl: Duration::from_secs(60),
                cache_capacity: 1000,
                workers: 1,
                queue: 64,
                max_failures_per_user: 0,
                max_failures_per_address: 0,
                lockout: Duration::from_secs(1),
            })
            .unwrap();
            Arc::new(core) as Arc<dyn Auth>
        });
        let mut config = GatewayConfig::default();
        if let Some(change) = options.config {
            change(&mut config);
        }
        if let Some(yaml) = options.policy {
            let policy = kubedav_policy::Policy::from_yaml(yaml).unwrap();
            for named in policy.named_paths() {
                std::fs::create_dir_all(root.path().join(named.as_str())).unwrap();
            }
            config.policy = Some(Arc::new(policy));
        }
        let records = Arc::new(fileio.records()) as Arc<dyn kubedav_api::records::Records>;
        let keep = Arc::new(fileio.keep()) as Arc<dyn kubedav_api::keep::Keep>;
        let uploads = Arc::new(fileio.uploads()) as Arc<dyn kubedav_api::uploads::Uploads>;
        let ports = Ports {
            fileio: Arc::new(fileio),
            locks: Arc::new(locks),
            auth,
            markdown: None,
            records: Some(records),
            keep: Some(keep),
            uploads: Some(uploads),
            readiness: None,
        };
        let clock = options
            .clock
            .unwrap_or_else(|| Arc::new(std::time::SystemTime::now));
        let gateway = Gateway::with_clock(ports, config, clock);
        App {
            service: gateway.service(),
            gateway,
            root,
            _config_dir: config_dir,
        }
    }

    /// Where `relative` is on the served root.
    pub(crate) fn disk(&self, relative: &str) -> PathBuf {
        self.root.path().join(relative)
    }

    /// The URL of `path` on this gateway (its host is `dav.test`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{HOST}{path}")
    }

    /// A client of this gateway, shaped like `reqwest::Client` so that a case reads as it
    /// does in the black-box suites.
    pub(crate) fn client(&self) -> Client {
        Client {
            service: self.service.clone(),
        }
    }
}

/// The host every request names.
pub(crate) const HOST: &str = "dav.test";

/// Calls the gateway's service; see [`App::client`].
#[derive(Clone)]
pub(crate) struct Client {
    service: kubedav_gateway::app::HttpService,
}

impl Client {
    /// A request with `method` to `url` (an [`App::url`], or a bare path).
    pub(crate) fn request(&self, method: Method, url: impl AsRef<str>) -> RequestBuilder {
        let url = url.as_ref();
        let path = url.strip_prefix(&format!("http://{HOST}")).unwrap_or(url);
        RequestBuilder {
            service: self.service.clone(),
            request: Request::builder().method(method).uri(path).header("host", HOST),
            body: Body::empty(),
            client: "192.0.2.1".parse().unwrap(),
        }
    }

    /// A GET.
    pub(crate) fn get(&self, url: impl AsRef<str>) -> RequestBuilder {
        self.request(Method::GET, url)
    }

    /// A HEAD.
    pub(crate) fn head(&self, url: impl AsRef<str>) -> RequestBuilder {
        self.request(Method::HEAD, url)
    }

    /// A PUT.
    pub(crate) fn put(&self, url: impl AsRef<str>) -> RequestBuilder {
        self.request(Method::PUT, url)
    }

    /// A DELETE.
    pub(crate) fn delete(&self, url: impl AsRef<str>) -> RequestBuilder {
        self.request(Method::DELETE, url)
    }
}

/// A request being built; [`RequestBuilder::send`] makes it.
pub(crate) struct RequestBuilder {
    service: kubedav_gateway::app::HttpService,
    request: http::request::Builder,
    body: Body,
    /// The address the request comes from.
    client: std::net::IpAddr,
}

impl RequestBuilder {
    /// Adds a header.
    pub(crate) fn header(mut self, name: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        self.request = self.request.header(name.as_ref(), value.as_ref());
        self
    }

    /// Basic credentials.
    pub(crate) fn basic_auth(
        self,
        user: impl std::fmt::Display,
        password: Option<impl std::fmt::Display>,
    ) -> Self {
        use base64::Engine;
        let password = password.map(|p| p.to_string()).unwrap_or_default();
        let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        self.header("authorization", format!("Basic {pair}"))
    }

    /// The request body, with its Content-Length.
    pub(crate) fn body(mut self, body: impl Into<bytes::Bytes>) -> Self {
        let body: bytes::Bytes = body.into();
        self.request = self.request.header("content-length", body.len().to_string());
        self.body = Body::from(body);
        self
    }

    /// The request comes from `address` (192.0.2.1 unless said).
    pub(crate) fn sent_from(mut self, address: &str) -> Self {
        self.client = address.parse().unwrap();
        self
    }

    /// Sends the request through the gateway's service, as from 192.0.2.1. Never fails: the
    /// `Result` only keeps the shape of reqwest's.
    pub(crate) async fn send(self) -> Result<Response, std::convert::Infallible> {
        let mut request = self.request.body(self.body).unwrap();
        request.extensions_mut().insert(ClientIp(self.client));
        let response = self.service.oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

/// A whole answer, shaped like `reqwest::Response`.
#[derive(Debug)]
pub(crate) struct Response {
    status: StatusCode,
    headers: HeaderMap,
    body: bytes::Bytes,
}

impl Response {
    /// The status.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// The headers.
    pub(crate) fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body as text.
    pub(crate) async fn text(self) -> Result<String, std::convert::Infallible> {
        Ok(String::from_utf8_lossy(&self.body).into_owned())
    }

    /// The body.
    pub(crate) async fn bytes(self) -> Result<bytes::Bytes, std::convert::Infallible> {
        Ok(self.body)
    }
}

/// The names in a directory, sorted.
pub(crate) fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The uploads suites' server: alice and bob with homes under `/home` (and
/// `/home/alice/in` made), and `/library` everyone may read.
pub(crate) fn uploads_app() -> App {
    const POLICY: &str = r#"
homes: /home/{user}
rules:
  - path: /library
    grant: {"*": read}
"#;
    let app = App::with(Options {
        users: vec![("alice", "pw"), ("bob", "pw")],
        policy: Some(POLICY),
        ..Options::default()
    });
    for dir in ["home/alice/in", "home/bob", "library"] {
        std::fs::create_dir_all(app.disk(dir)).unwrap();
    }
    app
}

/// A request by `user` (password "pw", Basic) with `headers` and, unless empty, `body`.
pub(crate) async fn send_as(
    app: &App,
    user: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Response {
    let mut request = app
        .client()
        .request(Method::from_bytes(method.as_bytes()).unwrap(), app.url(path))
        .basic_auth(user, Some("pw"));
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    if !body.is_empty() {
        request = request.body(body.to_vec());
    }
    request.send().await.unwrap()
}
