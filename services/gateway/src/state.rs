//! The gateway's state: its ports to the services ([`Ports`]), its settings
//! ([`GatewayConfig`]) and whether it is draining. Every layer reads it; it imports no
//! layer but the client-address settings of `edge::client` and the answers kept by
//! `cache::answers`.

use kubedav_api::auth::Auth;
use kubedav_api::fileio::FileIo;
use kubedav_api::locks::Locks;
use kubedav_api::markdown::Markdown;
use std::sync::Arc;
use std::time::Duration;

/// Limits and settings of the HTTP edge.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Largest request body accepted (413 past it); `None` for no limit.
    pub max_body_bytes: Option<u64>,
    /// Largest request head (request line and headers) in bytes; 431 past it.
    pub max_header_bytes: usize,
    /// Most header fields in one request; 431 past it.
    pub max_headers: usize,
    /// Time a client has to send its complete request head (and time an idle
    /// keep-alive connection is kept).
    pub header_read_timeout: Duration,
    /// Most client connections held at once; past it a new one gets 503 and is closed.
    pub max_connections: usize,
    /// Most connections one client address (IPv6: one /64) may hold; past it a new one
    /// gets 429 and is closed. Trusted proxies are exempt.
    pub max_connections_per_address: usize,
    /// Threads client connections are served on, each with a runtime of its own
    /// (`edge::threads`); 0 serves them on the shared runtime.
    pub http_threads: usize,
    /// Peers whose `X-Forwarded-For` / `Forwarded` headers name the client.
    pub trusted_proxies: crate::edge::client::TrustedProxies,
    /// Largest DAV:owner kept with a lock, in bytes (400 past it).
    pub max_lock_owner_bytes: usize,
    /// Whether PROPFIND with Depth: infinity is served (otherwise 403).
    pub propfind_infinity: bool,
    /// Most entries a Depth: infinity PROPFIND may return (403 past it).
    pub propfind_max_entries: u64,
    /// The Basic authentication realm.
    pub auth_realm: String,
    /// Whether requests without credentials may read.
    pub anonymous_read: bool,
    /// Whether bearer tokens are accepted (an identity provider is configured): 401s
    /// then offer Bearer beside Basic.
    pub bearer_tokens: bool,
    /// Browser sign-in through the identity provider (`--public-url` with an issuer):
    /// navigations without credentials are sent to it, and a session cookie
    /// authenticates the file manager.
    pub sign_in: Option<SignInSettings>,
    /// Users who may only read.
    pub read_only_users: std::collections::HashSet<String>,
    /// The access policy (`--policy`) the gateway starts with: who may do what to which
    /// path. `None` serves the whole tree to every authenticated user, as before
    /// policies. [`Gateway::replace_policy`] changes it while serving.
    pub policy: Option<Arc<kubedav_policy::Policy>>,
    /// Largest HTML converted for agents; larger resources are served as HTML.
    pub markdown_max_bytes: u64,
    /// Answer 502 instead of the HTML when a conversion fails.
    pub markdown_fail_closed: bool,
    /// A `Content-Signal` header for Markdown answers (e.g. `ai-train=no, search=yes`).
    pub content_signal: Option<http::HeaderValue>,
    /// Leave names starting with `.` out of listings (`dav::quirks`).
    pub hide_dotfiles: bool,
    /// Refuse (403) writes of macOS metadata files, `._*` and `.DS_Store` (`dav::quirks`).
    pub refuse_macos_metadata: bool,
    /// Browser origins allowed by CORS (`edge::cors`); empty: CORS off.
    pub cors_origins: Vec<http::HeaderValue>,
    /// Checksums computed and kept for every upload, asked for or not
    /// (`--upload-digests`), so `Repr-Digest` and `oc:checksums` answer for any content
    /// uploaded since.
    pub upload_digests: Vec<kubedav_api::checksums::Algorithm>,
    /// The path prefix this gateway is served under (`--base-path`): request paths and
    /// `Destination`s must start with it, and every href it writes does.
    pub base_path: crate::http::paths::BasePath,
    /// What public links may be (`--links`, `--link-max-bytes`, `--admins`).
    pub links: crate::links::LinkSettings,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: Some(16 << 30),
            max_header_bytes: 64 * 1024,
            max_headers: 100,
            header_read_timeout: Duration::from_secs(30),
            max_connections: 4096,
            max_connections_per_address: 256,
            http_threads: crate::edge::threads::default_count(),
            trusted_proxies: Default::default(),
            max_lock_owner_bytes: 4096,
            propfind_infinity: false,
            propfind_max_entries: 100_000,
            auth_realm: "kubedav".into(),
            anonymous_read: false,
            bearer_tokens: false,
            sign_in: None,
            read_only_users: Default::default(),
            policy: None,
            markdown_max_bytes: 16 << 20,
            markdown_fail_closed: false,
            content_signal: None,
            hide_dotfiles: false,
            refuse_macos_metadata: false,
            cors_origins: Vec::new(),
            upload_digests: Vec::new(),
            base_path: Default::default(),
            links: Default::default(),
        }
    }
}

/// The services a gateway talks to: local cores or gRPC clients.
pub struct Ports {
    /// The volume.
    pub fileio: Arc<dyn FileIo>,
    /// The lock manager.
    pub locks: Arc<dyn Locks>,
    /// Credential verification; `None` serves without authentication.
    pub auth: Option<Arc<dyn Auth>>,
    /// HTML to Markdown; `None` never converts.
    pub markdown: Option<Arc<dyn Markdown>>,
    /// The records kept with the data (shares); `None`: no shares.
    pub records: Option<Arc<dyn kubedav_api::records::Records>>,
    /// The trash and versions fileio keeps; `None`: none (FAILED_PRECONDITION from a
    /// fileio that keeps none says the same).
    pub keep: Option<Arc<dyn kubedav_api::keep::Keep>>,
    /// Uploads in many requests (TUS, Nextcloud chunking); `None`: fileio keeps none.
    pub uploads: Option<Arc<dyn kubedav_api::uploads::Uploads>>,
    /// The volume as `/readyz` asks it, past any cache of `fileio`, so that a fileio
    /// that went away is seen at once, not after a kept answer; `None`: `fileio`.
    pub readiness: Option<Arc<dyn FileIo>>,
}

/// The gateway's state: its ports to the services and its configuration.
pub struct Gateway {
    /// The volume.
    pub fileio: Arc<dyn FileIo>,
    /// The lock manager.
    pub locks: Arc<dyn Locks>,
    /// Credential verification; `None` serves without authentication.
    pub auth: Option<Arc<dyn Auth>>,
    /// HTML to Markdown for agents; `None` never converts.
    pub markdown: Option<Arc<dyn Markdown>>,
    /// The trash and versions fileio keeps, if any.
    pub keep: Option<Arc<dyn kubedav_api::keep::Keep>>,
    /// Uploads in many requests, if fileio keeps them.
    pub uploads: Option<Arc<dyn kubedav_api::uploads::Uploads>>,
    /// Whether fileio answered that it keeps them (over gRPC, a fileio on a bucket does
    /// not serve them yet): learnt once, at the first page that would offer them.
    uploads_served: std::sync::OnceLock<bool>,
    /// The volume as `/readyz` asks it ([`Ports::readiness`]).
    readiness: Arc<dyn FileIo>,
    /// Limits and settings.
    pub config: GatewayConfig,
    /// The access policy in force, if any (starts as [`GatewayConfig::policy`]).
    pub policy: Option<crate::access::LivePolicy>,
    /// The shares users made, with a policy and records.
    pub shares: Option<Arc<crate::shares::Shares>>,
    /// The public links users made, with authentication and records.
    pub links: Option<Arc<crate::links::Links>>,
    /// The links' uses and uploaded bytes.
    pub link_uses: Option<Arc<crate::links::uses::Uses>>,
    /// Wrong link passwords, lockouts, and passwords accepted a moment ago.
    pub(crate) link_guard: crate::links::password::Guard,
    /// Writes through links per client address.
    pub(crate) link_rate: crate::links::rate::WriteRate,
    /// What tokens opened lately.
    pub(crate) link_resolved: crate::links::serve::ResolvedLinks,
    /// PROPFIND Depth 0 answers rendered before, answered again while they hold.
    pub(crate) answers: crate::cache::KeptAnswers,
    /// Credentials the auth service accepted a moment ago.
    pub(crate) verdicts: crate::edge::verdicts::Verdicts,
    /// Set once shutdown began: HTTP/1 answers carry `Connection: close`.
    draining: std::sync::atomic::AtomicBool,
    /// The process's shutdown signal, read directly ([`Gateway::drain_on`]).
    drain_signal: std::sync::OnceLock<Arc<dyn Fn() -> bool + Send + Sync>>,
}

impl Gateway {
    /// A gateway over these service ports.
    pub fn new(ports: Ports, config: GatewayConfig) -> Arc<Self> {
        Self::with_clock(ports, config, Arc::new(std::time::SystemTime::now))
    }

    /// A gateway over these service ports whose shares read the time from `clock`.
    /// With a policy and records, it starts checking the shares (in a task of the
    /// current tokio runtime).
    pub fn with_clock(ports: Ports, config: GatewayConfig, clock: crate::shares::WallClock) -> Arc<Self> {
        let Ports {
            fileio,
            locks,
            auth,
            markdown,
            records,
            keep,
            uploads,
            readiness,
        } = ports;
        let readiness = readiness.unwrap_or_else(|| fileio.clone());
        let records = records.filter(|_| auth.is_some());
        let shares = records
            .clone()
            .filter(|_| config.policy.is_some())
            .map(|records| crate::shares::kept(records, clock.clone()));
        match &shares {
            Some(shares) => shares.keep_checked(),
            None if records.is_some() => crate::shares::register_metrics(),
            None => {}
        }
        let links = records.clone().map(|records| crate::links::kept(records, clock));
        if let Some(links) = &links {
            links.keep_checked();
        }
        let link_uses = records.map(crate::links::uses::Uses::new);
        if let (Some(uses), Some(links)) = (&link_uses, &links) {
            uses.keep_writing(links.clone());
        }
        Arc::new(Self {
            fileio,
            locks,
            auth,
            markdown,
            keep,
            uploads,
            uploads_served: std::sync::OnceLock::new(),
            readiness,
            shares,
            links,
            link_uses,
            link_guard: Default::default(),
            link_rate: Default::default(),
            link_resolved: Default::default(),
            policy: config.policy.clone().map(crate::access::LivePolicy::new),
            config,
            answers: Default::default(),
            verdicts: Default::default(),
            draining: std::sync::atomic::AtomicBool::new(false),
            drain_signal: std::sync::OnceLock::new(),
        })
    }

    /// Whether pages may offer uploads in many requests: fileio keeps them. Asked of
    /// fileio once (a fileio that does not serve them answers UNIMPLEMENTED); until it
    /// answers either way, not offered.
    pub async fn offers_uploads(&self) -> bool {
        let Some(uploads) = &self.uploads else {
            return false;
        };
        if let Some(served) = self.uploads_served.get() {
            return *served;
        }
        let asked = uploads
            .list(kubedav_api::uploads::ListUploadsRequest {
                owner: "-".to_owned(),
            })
            .await;
        match asked {
            Ok(_) => *self.uploads_served.get_or_init(|| true),
            Err(status) if status.code() == tonic::Code::Unimplemented => {
                *self.uploads_served.get_or_init(|| false)
            }
            Err(_) => false,
        }
    }

    /// The base path of the request being handled: a public link's mount while one is
    /// in force, else `--base-path`.
    pub fn base_path(&self) -> crate::http::paths::CurrentBase<'_> {
        crate::http::paths::current(&self.config.base_path)
    }

    /// Drains as soon as `signal` answers true, with no task in between: `/readyz` turns
    /// "draining" on the same signal, so a client that saw it draining is never answered
    /// without `Connection: close` afterwards. Set once; later calls are ignored.
    pub fn drain_on(&self, signal: Arc<dyn Fn() -> bool + Send + Sync>) {
        let _ = self.drain_signal.set(signal);
    }

    /// Shutdown began: from now on every HTTP/1 answer carries `Connection: close`, so
    /// keep-alive clients open their next connection elsewhere (a balancer no longer
    /// sends new ones here) before the port closes.
    pub fn start_draining(&self) {
        self.draining.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether [`Gateway::start_draining`] was called or the [`Gateway::drain_on`]
    /// signal is raised.
    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Relaxed)
            || self.drain_signal.get().is_some_and(|signal| signal())
    }

    /// Puts `policy` in force from the next request on (a request already decided
    /// finishes under the old one), and drops what was kept under the old one: kept
    /// answers, and which homes exist. Ignored by a gateway started without a policy:
    /// turning the policy on or off takes a restart.
    pub fn replace_policy(&self, policy: Arc<kubedav_policy::Policy>) {
        if let Some(live) = &self.policy {
            live.replace(policy);
            self.answers.clear();
        }
    }

    /// Whether the gateway can serve: the volume answers, asked past the gateway's
    /// cache ([`Ports::readiness`]). The lock manager is left out on
    /// purpose: without it reads still work (writes get 503), and taking every gateway
    /// out of its Service during a lock store outage would turn a write outage into a
    /// total one. The locks service's own `/readyz` reports its store.
    pub async fn ready(&self) -> Result<(), String> {
        self.readiness
            .stat(kubedav_api::fileio::StatRequest { path: String::new() })
            .await
            .map_err(|status| format!("fileio: {}", status.message()))?;
        Ok(())
    }
}

/// Where browsers reach the gateway, for the browser sign-in.
#[derive(Clone, Debug)]
pub struct SignInSettings {
    /// `--public-url` without a trailing slash (`https://files.example.com`): the
    /// provider sends browsers back to it + `{base}/.kubedav/callback`.
    pub public_url: String,
}
