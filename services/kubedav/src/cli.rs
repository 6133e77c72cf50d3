//! The command line. Every flag is also read from `KUBEDAV_<FLAG>` (upper snake case).

mod commands;
pub(crate) mod identity;
mod remote;
mod settings;
mod values;

pub(crate) use commands::Command;
pub(crate) use remote::RemoteArgs;

pub(crate) use values::{Durability, HostPort, LockStore, LogFormat, MarkdownContent, OrEmpty, Origin};

use clap::{Args, Parser, Subcommand, ValueEnum};
use kubedav_kit::redis::RedisUrl;
use std::path::PathBuf;
use std::time::Duration;
use values::Redacting;

/// Which service(s) this process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Target {
    /// Everything in one process, with no network between the services.
    All,
    /// The HTTP/WebDAV edge, talking to the services over gRPC.
    Gateway,
    /// The volume service.
    Fileio,
    /// Credential verification.
    Auth,
    /// The WebDAV lock manager.
    Locks,
    /// HTML to Markdown conversion.
    Markdown,
}

impl Target {
    /// The target's name, as on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Target::All => "all",
            Target::Gateway => "gateway",
            Target::Fileio => "fileio",
            Target::Auth => "auth",
            Target::Locks => "locks",
            Target::Markdown => "markdown",
        }
    }

    /// The default admin address, distinct per target so that several targets can run
    /// on one machine with no flags.
    pub(crate) fn default_admin_listen(self) -> &'static str {
        match self {
            Target::All | Target::Gateway => "127.0.0.1:9180",
            Target::Fileio => "127.0.0.1:9181",
            Target::Auth => "127.0.0.1:9182",
            Target::Locks => "127.0.0.1:9183",
            Target::Markdown => "127.0.0.1:9184",
        }
    }

    /// The default gRPC address of a service target.
    pub(crate) fn default_grpc_listen(self) -> &'static str {
        match self {
            Target::Auth => "127.0.0.1:9092",
            Target::Locks => "127.0.0.1:9093",
            Target::Markdown => "127.0.0.1:9094",
            _ => "127.0.0.1:9091",
        }
    }
}

/// kubedav: a WebDAV file service. One binary; `--target` picks what this process runs.
///
/// The flags are grouped per service ([`ServeArgs`], [`FileioArgs`], ...), each group
/// under its own heading in `--help`; a flag's name, its `KUBEDAV_` variable and its
/// default are those of the field in its group.
#[derive(Debug, Parser)]
#[command(name = "kubedav", version, about, long_about = None)]
pub(crate) struct Cli {
    /// A tool instead of a server.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// What this process runs: everything (`all`) or one service.
    #[arg(long, env = "KUBEDAV_TARGET", value_enum, default_value = "all")]
    pub target: Target,

    /// Where a target serves, and how it stops.
    #[command(flatten)]
    pub serve: ServeArgs,

    /// What fileio serves, and how.
    #[command(flatten)]
    pub fileio: FileioArgs,

    /// The HTTP/WebDAV edge: its limits, paths and WebDAV behaviour.
    #[command(flatten)]
    pub gateway: GatewayArgs,

    /// What a gateway keeps of fileio's answers.
    #[command(flatten)]
    pub cache: GatewayCacheArgs,

    /// Where a gateway finds the services, and how it calls them.
    #[command(flatten)]
    pub remote: RemoteArgs,

    /// How replicas of fileio and locks find each other, and the Redis keys.
    #[command(flatten)]
    pub replicas: ReplicaArgs,

    /// The lock manager.
    #[command(flatten)]
    pub locks: LocksArgs,

    /// Who may log in, how credentials are verified and cached, and who may do what.
    #[command(flatten)]
    pub auth: AuthArgs,

    /// The identity provider whose users kubedav serves.
    #[command(flatten)]
    pub oidc: identity::OidcArgs,

    /// App passwords, and the key of what kubedav keeps secret with the data.
    #[command(flatten)]
    pub credentials: identity::CredentialArgs,

    /// HTML to Markdown conversion: when the gateway asks for it, and how the converter works.
    #[command(flatten)]
    pub markdown: MarkdownArgs,

    /// Logs, and the admin port.
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
}

/// Where a target serves, and how it stops.
#[derive(Debug, Args)]
#[command(next_help_heading = "Serving (every target)")]
pub(crate) struct ServeArgs {
    /// The gateway's HTTP address (targets all, gateway). Port 0 picks a free port.
    #[arg(long, env = "KUBEDAV_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: HostPort,

    /// A service's gRPC address (targets fileio, auth, locks, markdown)
    /// [default: 127.0.0.1:9091 fileio, :9092 auth, :9093 locks, :9094 markdown].
    #[arg(long, env = "KUBEDAV_GRPC_LISTEN")]
    pub grpc_listen: Option<HostPort>,

    /// Seconds the serving port stays open after SIGTERM, while /readyz already answers
    /// 503 "draining": time for load balancers and Kubernetes Endpoints to stop sending
    /// new connections (gateway, all: the HTTP port), and for gateways to re-resolve a
    /// headless Service or re-read the registry (auth, locks, fileio, markdown: the gRPC
    /// port), before the port closes. 0 closes it at once.
    #[arg(long, env = "KUBEDAV_SHUTDOWN_DELAY_SECONDS", default_value_t = 0)]
    pub shutdown_delay_seconds: u64,
}

/// What fileio serves, and how.
#[derive(Debug, Args)]
#[command(next_help_heading = "Storage (targets all, fileio)")]
pub(crate) struct FileioArgs {
    /// The served directory (targets all, fileio). It must exist.
    #[arg(long, env = "KUBEDAV_ROOT", default_value = "./data")]
    pub root: PathBuf,

    /// Serve a prefix of an S3-compatible bucket instead of --root (targets all,
    /// fileio): s3://BUCKET or s3://BUCKET/PREFIX. The endpoint, region and credentials
    /// come from AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
    /// and AWS_SESSION_TOKEN; an https:// endpoint of a private CA needs the CA's PEM
    /// file in AWS_CA_BUNDLE.
    #[arg(long, env = "KUBEDAV_STORAGE")]
    pub storage: Option<kubedav_fileio::objects::config::Location>,

    /// With --storage: how long an incomplete multipart upload may store nothing (no part)
    /// before fileio aborts it as abandoned, by a crash or a client gone. Swept at start
    /// and every half of it (at most every 10 minutes); uploads in flight on other
    /// replicas store a part every few seconds and are left alone.
    #[arg(long, env = "KUBEDAV_ABANDONED_UPLOAD_SECONDS", default_value_t = kubedav_fileio::objects::sweep::DEFAULT_IDLE.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub abandoned_upload_seconds: u64,

    /// Hours an unfinished upload in many requests (TUS, Nextcloud chunking) is kept
    /// after its last data (targets all, fileio; docs/uploads.md): then its bytes are
    /// removed.
    #[arg(long, env = "KUBEDAV_UPLOAD_EXPIRY_HOURS", default_value_t = kubedav_fileio::uploads::DEFAULT_EXPIRY_HOURS, value_parser = clap::value_parser!(u64).range(1..))]
    pub upload_expiry_hours: u64,

    /// Most unfinished uploads in many requests one user may have at once (targets all,
    /// fileio): one more is refused with 507 until one finishes, is cancelled or expires.
    #[arg(long, env = "KUBEDAV_UPLOADS_PER_USER", default_value_t = kubedav_fileio::uploads::DEFAULT_PER_OWNER, value_parser = clap::value_parser!(u32).range(1..))]
    pub uploads_per_user: u32,

    /// Days a deleted file or collection stays in the trash, restorable (targets all,
    /// fileio; docs/trash-and-versions.md). 0: no trash, a delete deletes.
    #[arg(long, env = "KUBEDAV_TRASH_RETENTION_DAYS", default_value_t = 30)]
    pub trash_retention_days: u64,

    /// Most versions kept of each file, the content a PUT, COPY or MOVE replaced
    /// (targets all, fileio). 0: none, an overwrite replaces.
    #[arg(long, env = "KUBEDAV_VERSIONS_MAX", default_value_t = 10)]
    pub versions_max: u32,

    /// Days a version is kept (targets all, fileio).
    #[arg(long, env = "KUBEDAV_VERSIONS_RETENTION_DAYS", default_value_t = 30)]
    pub versions_retention_days: u64,

    /// A quota on the served root, in bytes (targets all, fileio): a write that would
    /// pass it is refused with 507, before any byte is stored when its size is known, and
    /// the RFC 4331 quota properties report it. Unset: no quota, and those properties
    /// report the volume's own figures.
    #[arg(long, env = "KUBEDAV_QUOTA_BYTES")]
    pub quota_bytes: Option<u64>,

    /// How often the usage counted against --quota-bytes is counted again from a listing
    /// of the whole tree (it is also counted at start), in seconds: that corrects what
    /// other replicas and other tools changed.
    #[arg(long, env = "KUBEDAV_QUOTA_RESCAN_SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub quota_rescan_seconds: u64,

    /// Batch the `statx` calls of collection listings through io_uring (targets all,
    /// fileio), where the kernel and seccomp allow it. Off by default: with metadata in
    /// memory one `statx` per member is faster (docs/benchmarks.md); on a cold cache or
    /// slow storage the batch's requests run in parallel.
    #[arg(long, env = "KUBEDAV_IO_URING_SCANS", default_value_t = false, action = clap::ArgAction::Set)]
    pub io_uring_scans: bool,

    /// What a change to the volume waits for before it is answered (targets all, fileio,
    /// and a gateway with --fileio-incoming, which starts writing bodies back with fsync;
    /// a bucket's writes are as durable as its store makes them): `fsync` (the default:
    /// the file's data and its directory reach the disk first, so an answered PUT, MKCOL,
    /// DELETE, COPY or MOVE survives a power loss) or `none` (the kernel writes back when
    /// it will, as nginx and Apache leave it; docs/benchmarks.md measures the difference).
    #[arg(long, env = "KUBEDAV_DURABILITY", value_enum, default_value_t = Durability::Fsync)]
    pub durability: Durability,

    /// Memory for copies of small files (64 KiB at most each), in MiB (targets all,
    /// fileio); 0 turns the cache off. A copy is served only after a `statx` shows the
    /// file unchanged since it was read (docs/architecture.md).
    #[arg(long, env = "KUBEDAV_FILE_CACHE_MIB", default_value_t = 16)]
    pub file_cache_mib: u64,
}

/// The HTTP/WebDAV edge: its limits, paths and WebDAV behaviour.
#[derive(Debug, Args)]
#[command(next_help_heading = "Gateway (targets all, gateway)")]
pub(crate) struct GatewayArgs {
    /// Largest request body in bytes; 0 for no limit. Larger uploads get 413.
    #[arg(long, env = "KUBEDAV_MAX_BODY_BYTES", default_value_t = 16 << 30)]
    pub max_body_bytes: u64,

    /// Largest request head (request line and headers) in bytes. Larger ones get 431.
    #[arg(long, env = "KUBEDAV_MAX_HEADER_BYTES", default_value_t = 64 * 1024)]
    pub max_header_bytes: usize,

    /// Seconds a client has to send a complete request head before it is cut off.
    #[arg(long, env = "KUBEDAV_HEADER_READ_TIMEOUT_SECONDS", default_value_t = 30)]
    pub header_read_timeout_seconds: u64,

    /// Most client connections the gateway holds at once (targets all, gateway); past
    /// it a new connection gets 503 with Retry-After and is closed. Idle keep-alive
    /// connections count, and are closed after the header read timeout.
    #[arg(long, env = "KUBEDAV_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,

    /// Most connections one client address (IPv6: one /64) may hold open (targets all,
    /// gateway); past it a new one gets 429 with Retry-After and is closed, so one
    /// address cannot take every slot. Trusted proxies are exempt.
    #[arg(long, env = "KUBEDAV_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 256)]
    pub max_connections_per_address: usize,

    /// Threads client connections are served on (targets all, gateway), each with its
    /// own event loop, like nginx's worker processes; a connection stays on the thread it
    /// was given, the one holding the fewest. 0 serves connections on the shared
    /// runtime's work-stealing workers instead. Default: one per CPU this process may
    /// use (a cgroup CPU limit counts).
    #[arg(long, env = "KUBEDAV_HTTP_THREADS")]
    pub http_threads: Option<usize>,

    /// Proxies whose `X-Forwarded-For` or `Forwarded` header names the client (targets
    /// all, gateway): comma-separated addresses or networks, e.g. `10.0.0.0/8`. Set it to
    /// the Ingress controller's pods. The client address is then used for login
    /// throttling, logs and traces; from any other peer these headers are ignored.
    #[arg(long, env = "KUBEDAV_TRUSTED_PROXIES", default_value = "", value_parser = kubedav_gateway::edge::client::TrustedProxies::parse)]
    pub trusted_proxies: kubedav_gateway::edge::client::TrustedProxies,

    /// Serve kubedav under this path prefix (e.g. /dav, for an Ingress that routes
    /// https://host/dav/ to it without rewriting): request paths and Destinations must
    /// start with it (404 otherwise), and every href, listing link and lock root kubedav
    /// writes does.
    #[arg(long, env = "KUBEDAV_BASE_PATH")]
    pub base_path: Option<kubedav_gateway::http::paths::BasePath>,

    /// Browser origins allowed to call kubedav from their pages (CORS), comma-separated,
    /// e.g. https://app.example.com. Preflight OPTIONS requests from them are answered
    /// without credentials; other origins get no CORS headers. Empty: CORS off.
    #[arg(long, env = "KUBEDAV_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<Origin>,

    /// Checksums to compute and keep for every upload, whether its client asks or not:
    /// comma-separated, of sha-256, sha-512, sha1, md5 and adler32. Each costs CPU per byte
    /// uploaded; with sha-256, a GET with Want-Repr-Digest gets Repr-Digest for any file
    /// uploaded since. Empty: only what clients ask for (docs/clients.md).
    #[arg(long, env = "KUBEDAV_UPLOAD_DIGESTS", value_delimiter = ',', value_parser = parse_algorithm)]
    pub upload_digests: Vec<kubedav_api::checksums::Algorithm>,

    /// Serve PROPFIND with Depth: infinity (refused with 403 otherwise).
    #[arg(long, env = "KUBEDAV_PROPFIND_DEPTH_INFINITY")]
    pub propfind_depth_infinity: bool,

    /// Most entries a Depth: infinity PROPFIND may return; past it the answer is 403.
    #[arg(long, env = "KUBEDAV_PROPFIND_MAX_ENTRIES", default_value_t = 100_000)]
    pub propfind_max_entries: u64,

    /// Largest DAV:owner a LOCK may carry, in bytes (targets all, gateway); it is kept
    /// with the lock and echoed in every lock discovery. Larger ones get 400.
    #[arg(long, env = "KUBEDAV_MAX_LOCK_OWNER_BYTES", default_value_t = 4096)]
    pub max_lock_owner_bytes: usize,

    /// Leave names starting with "." out of listings (PROPFIND and the HTML page); they
    /// can still be read by name.
    #[arg(long, env = "KUBEDAV_HIDE_DOTFILES")]
    pub hide_dotfiles: bool,

    /// Refuse (403, nothing stored) the metadata files macOS Finder writes beside every
    /// file and folder: AppleDouble "._NAME" files and ".DS_Store".
    #[arg(long, env = "KUBEDAV_REFUSE_MACOS_METADATA")]
    pub refuse_macos_metadata: bool,
}

/// What a gateway keeps of fileio's answers.
#[derive(Debug, Args)]
#[command(next_help_heading = "Gateway cache (targets all, gateway)")]
pub(crate) struct GatewayCacheArgs {
    /// Memory for what a gateway keeps of fileio's answers, in MiB (targets gateway and
    /// all; not target all with its locks in Redis: then other processes share the volume
    /// or the bucket and announce nothing to it): files (1 MiB at most), single resources and Depth 1 listings of collections
    /// (4,096 entries at most) with their dead properties, plus lock discovery when the
    /// locks service offers leases. Kept under the services' leases, so a change made
    /// through any gateway is seen at once by every other; 0 turns it off
    /// (docs/architecture.md, "What a gateway keeps").
    #[arg(long, env = "KUBEDAV_GATEWAY_CACHE_MIB", default_value_t = 16)]
    pub gateway_cache_mib: u64,

    /// The longest a gateway serves a kept copy without asking fileio again, in
    /// milliseconds (targets gateway and all): how long a change
    /// made to the volume or the bucket behind kubedav's back (not through a gateway) may
    /// go unseen.
    #[arg(long, env = "KUBEDAV_GATEWAY_CACHE_FRESHNESS_MS", default_value_t = 1000)]
    pub gateway_cache_freshness_ms: u64,

    /// Where a gateway writes its kept copies of files over 64 KiB (targets gateway and
    /// all), as unnamed files that vanish with the process and hold
    /// at most a third of `--gateway-cache-mib`: sendfile sends them for less CPU than
    /// from memory. Unset: the system's temporary directory ($TMPDIR, else /tmp). On
    /// tmpfs, or where unnamed files are refused, copies are kept in memory (sealed
    /// memfds) instead (docs/architecture.md, "Large files with sendfile").
    #[arg(long, env = "KUBEDAV_GATEWAY_CACHE_DIR")]
    pub gateway_cache_dir: Option<std::path::PathBuf>,
}

/// How replicas of fileio and locks find each other, and the Redis keys.
#[derive(Debug, Args)]
#[command(next_help_heading = "Replicas and Redis (targets fileio, locks, gateway)")]
pub(crate) struct ReplicaArgs {
    /// Where the replicas of fileio (serving the same storage) and of locks (sharing one
    /// Redis store) register: a Redis URL (targets fileio, locks, gateway), needed for
    /// more than one fileio replica. Each replica registers its --advertise-address;
    /// each gateway sends calls to the registered replicas and holds a lease from every
    /// one, so a change through any replica is dropped from every gateway's copies
    /// before it is answered. A gateway with it refuses to start while the locks service
    /// keeps its locks in memory.
    #[arg(long, env = "KUBEDAV_REGISTRY", default_value = "", value_parser = Redacting(values::redis_url_or_empty))]
    pub registry: OrEmpty<RedisUrl>,

    /// The host:port gateways reach this replica at (targets fileio and locks with
    /// --registry): in Kubernetes, the pod's IP and the gRPC port. Defaults to
    /// the bound --grpc-listen address, unless that is 0.0.0.0 or [::].
    #[arg(long, env = "KUBEDAV_ADVERTISE_ADDRESS")]
    pub advertise_address: Option<HostPort>,

    /// Prefix of every Redis key kubedav writes: locks live under `<prefix>locks:`, the
    /// shared auth cache under `<prefix>auth:`, the fileio registry at
    /// `<prefix>fileio:replicas`. Give deployments sharing a Redis their own.
    #[arg(long, env = "KUBEDAV_REDIS_PREFIX", default_value = "kubedav:", value_parser = values::redis_prefix)]
    pub redis_prefix: String,

    /// PEM file of the CA certificates a `rediss://` Redis is checked against, instead of
    /// the public CAs (a managed Redis with a CA of its own, as Memorystore's); for every
    /// Redis URL of the process.
    #[arg(long, env = "KUBEDAV_REDIS_CA_FILE")]
    pub redis_ca_file: Option<std::path::PathBuf>,

    /// How many Redis replicas must acknowledge a lock change or a replica's registration
    /// (WAIT) before it counts; without them it is refused with 503, so that a failover
    /// never loses what was answered. Defaults to 1 with a redis+sentinel:// URL and 0
    /// (the master alone) with one server; 0 turns the wait off.
    #[arg(long, env = "KUBEDAV_REDIS_REPLICA_ACKS")]
    pub redis_replica_acks: Option<u32>,
}

impl ReplicaArgs {
    /// A connection to the Redis at `url`, with this process's CA file and
    /// acknowledgements.
    pub(crate) fn redis(&self, url: &RedisUrl) -> Result<kubedav_kit::redis::Redis, String> {
        let connection = kubedav_kit::redis::connect_trusting(url.as_str(), self.redis_ca_file.as_deref())?;
        Ok(match self.redis_replica_acks {
            Some(acks) => connection.with_replica_acks(acks),
            None => connection,
        })
    }
}

/// The lock manager.
#[derive(Debug, Args)]
#[command(next_help_heading = "Locks (targets all, locks)")]
pub(crate) struct LocksArgs {
    /// Where locks are kept (targets all, locks): `memory` (this process only) or a Redis
    /// URL, redis://host:port/db (shared by every locks replica, kept across restarts);
    /// redis+sentinel://host:port,host:port/MASTER/db follows the master Sentinel names
    /// (docs/deploy.md), as every Redis URL here does.
    #[arg(long, env = "KUBEDAV_LOCK_STORE", default_value = "memory", value_parser = Redacting(LockStore::parse))]
    pub lock_store: LockStore,

    /// Longest lock timeout granted, in seconds; `Timeout: Infinite` gets this (targets
    /// all, locks).
    #[arg(long, env = "KUBEDAV_LOCK_MAX_TIMEOUT_SECONDS", default_value_t = 3600)]
    pub lock_max_timeout_seconds: u64,

    /// Most locks one user may hold at once (targets all, locks); without
    /// authentication, all clients share this count. Past it LOCK gets 403.
    #[arg(long, env = "KUBEDAV_MAX_LOCKS_PER_PRINCIPAL", default_value_t = 1000)]
    pub max_locks_per_principal: usize,
}

/// Who may log in, how credentials are verified and cached, and who may do what.
#[derive(Debug, Args)]
#[command(next_help_heading = "Authentication (targets all, auth, gateway)")]
pub(crate) struct AuthArgs {
    /// The htpasswd-style users file (targets all, auth). With it, all-in-one mode
    /// requires credentials.
    #[arg(long, env = "KUBEDAV_USERS_FILE")]
    pub users_file: Option<PathBuf>,

    /// Accept plaintext passwords in the users file.
    #[arg(long, env = "KUBEDAV_ALLOW_PLAINTEXT_PASSWORDS")]
    pub allow_plaintext_passwords: bool,

    /// Seconds between checks of the users file for changes.
    #[arg(long, env = "KUBEDAV_USERS_RELOAD_SECONDS", default_value_t = 2)]
    pub users_reload_seconds: u64,

    /// Seconds a successful verification is cached; 0 turns the cache off.
    #[arg(long, env = "KUBEDAV_AUTH_CACHE_TTL_SECONDS", default_value_t = 60)]
    pub auth_cache_ttl_seconds: u64,

    /// Redis URL of an auth cache shared by the auth replicas (targets all, auth), so a
    /// credential is crypt-verified once per TTL across the fleet; empty: each replica
    /// caches on its own. Needs --auth-cache-secret.
    #[arg(long, env = "KUBEDAV_AUTH_CACHE_REDIS", default_value = "", value_parser = Redacting(values::redis_url_or_empty))]
    pub auth_cache_redis: OrEmpty<RedisUrl>,

    /// The secret the shared auth cache's keys are HMACs under: at least 16 bytes, the
    /// same on every auth replica (from a Kubernetes Secret; prefer the env var to the
    /// flag, which other users of the machine can see).
    #[arg(long, env = "KUBEDAV_AUTH_CACHE_SECRET", hide_env_values = true)]
    pub auth_cache_secret: Option<String>,

    /// Crypt worker threads [default: half the CPUs, at least 1, so a flood of password
    /// guesses never takes every core from cached traffic].
    #[arg(long, env = "KUBEDAV_AUTH_WORKERS")]
    pub auth_workers: Option<usize>,

    /// Crypt verifications that may wait for a worker; beyond, logins get 503 at once.
    #[arg(long, env = "KUBEDAV_AUTH_QUEUE", default_value_t = 64)]
    pub auth_queue: usize,

    /// Consecutive failed logins before a user is locked out; 0 never.
    #[arg(long, env = "KUBEDAV_AUTH_MAX_FAILURES", default_value_t = 5)]
    pub auth_max_failures: u32,

    /// Consecutive failed logins before a client address is locked out; 0 never.
    #[arg(long, env = "KUBEDAV_AUTH_MAX_FAILURES_PER_ADDRESS", default_value_t = 20)]
    pub auth_max_failures_per_address: u32,

    /// First lockout in seconds; each further failure doubles it (at most 15 minutes).
    #[arg(long, env = "KUBEDAV_AUTH_LOCKOUT_SECONDS", default_value_t = 30)]
    pub auth_lockout_seconds: u64,

    /// The Basic authentication realm.
    #[arg(long, env = "KUBEDAV_AUTH_REALM", default_value = "kubedav")]
    pub auth_realm: String,

    /// Let requests without credentials read (GET, HEAD, OPTIONS, PROPFIND).
    #[arg(long, env = "KUBEDAV_ANONYMOUS_READ")]
    pub anonymous_read: bool,

    /// Users who may only read, comma-separated.
    #[arg(long, env = "KUBEDAV_READ_ONLY_USERS", value_delimiter = ',')]
    pub read_only_users: Vec<String>,

    /// The access policy (YAML): homes, groups, path rules and quota roots
    /// (docs/configuration.md, "Many users"). Without it every user sees the whole tree.
    #[arg(long, env = "KUBEDAV_POLICY")]
    pub policy: Option<std::path::PathBuf>,

    /// The most a public link may allow where the policy's rules do not say (their
    /// `links:`), and everywhere without a policy: off, read, upload (drop boxes) or
    /// write (targets all, gateway).
    #[arg(long, env = "KUBEDAV_LINKS", value_enum, default_value = "write")]
    pub links: values::LinkCap,

    /// Most bytes the uploads through one public link may add, all together; a link's
    /// maker may give less (targets all, gateway).
    #[arg(long, env = "KUBEDAV_LINK_MAX_BYTES", default_value_t = 1 << 30)]
    pub link_max_bytes: u64,

    /// Administrators where there is no policy (the policy's admins: otherwise),
    /// comma-separated: they list and revoke every share and link (targets all, gateway).
    #[arg(long, env = "KUBEDAV_ADMINS", value_delimiter = ',')]
    pub admins: Vec<String>,

    /// Serve without authentication on an address other than loopback.
    #[arg(long, env = "KUBEDAV_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,
}

/// HTML to Markdown conversion: when the gateway asks for it, and how the converter works.
#[derive(Debug, Args)]
#[command(next_help_heading = "Markdown for agents (targets all, gateway, markdown)")]
pub(crate) struct MarkdownArgs {
    /// Largest HTML converted to Markdown for agents, in bytes; larger resources are
    /// served as HTML.
    #[arg(long, env = "KUBEDAV_MARKDOWN_MAX_BYTES", default_value_t = 16 << 20)]
    pub markdown_max_bytes: u64,

    /// Answer 502 when a conversion fails, instead of serving the HTML (fail-open).
    #[arg(long, env = "KUBEDAV_MARKDOWN_FAIL_CLOSED")]
    pub markdown_fail_closed: bool,

    /// A Content-Signal header for Markdown answers, e.g. "ai-train=no, search=yes".
    #[arg(long, env = "KUBEDAV_CONTENT_SIGNAL", value_parser = values::header_value)]
    pub content_signal: Option<http::HeaderValue>,

    /// Bytes of converted Markdown kept in the cache (targets all, markdown).
    #[arg(long, env = "KUBEDAV_MARKDOWN_CACHE_BYTES", default_value_t = 64 << 20)]
    pub markdown_cache_bytes: u64,

    /// What of an HTML page agents get: `main` (its `<main>`, else its articles, else
    /// `[role=main]`, else the body; without navigation, asides, footers, the page
    /// header, dialogs, form controls, hidden elements and empty links) or `full` (the
    /// body, minus scripts, styles, form controls and the pruned elements).
    #[arg(long, env = "KUBEDAV_MARKDOWN_CONTENT", value_enum, default_value = "main")]
    pub markdown_content: MarkdownContent,

    /// Start each Markdown page with YAML front matter: title, description, URL and
    /// the source's ETag, so an agent knows what it read.
    #[arg(long, env = "KUBEDAV_MARKDOWN_FRONT_MATTER")]
    pub markdown_front_matter: bool,

    /// Elements pruned with their content, comma-separated.
    #[arg(
        long,
        env = "KUBEDAV_MARKDOWN_PRUNE",
        value_delimiter = ',',
        default_value = "nav,footer,aside"
    )]
    pub markdown_prune: Vec<String>,

    /// Characters per token for the X-Markdown-Tokens estimate.
    #[arg(long, env = "KUBEDAV_MARKDOWN_CHARS_PER_TOKEN", default_value_t = 4.0)]
    pub markdown_chars_per_token: f32,

    /// Deepest HTML nesting converted; deeper documents are served as HTML.
    #[arg(long, env = "KUBEDAV_MARKDOWN_MAX_DEPTH", default_value_t = 256)]
    pub markdown_max_depth: usize,

    /// Longest one conversion may take, in seconds.
    #[arg(long, env = "KUBEDAV_MARKDOWN_TIMEOUT_SECONDS", default_value_t = 5)]
    pub markdown_timeout_seconds: u64,
}

/// Logs, and the admin port.
#[derive(Debug, Args)]
#[command(next_help_heading = "Logs and admin (every target)")]
pub(crate) struct TelemetryArgs {
    /// The admin address: /metrics, /healthz, /readyz (every target)
    /// [default: 127.0.0.1:9180 all and gateway, :9181 fileio, :9182 auth, :9183 locks, :9184 markdown].
    #[arg(long, env = "KUBEDAV_ADMIN_LISTEN")]
    pub admin_listen: Option<HostPort>,

    /// Log format: text or json. The level comes from RUST_LOG (default info).
    #[arg(long, env = "KUBEDAV_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Log one line per HTTP request (target `kubedav::access`: method, path, status,
    /// duration and request id; with trace and span ids in JSON). Off by default.
    #[arg(long, env = "KUBEDAV_ACCESS_LOG")]
    pub access_log: bool,

    /// Under --policy, log one audit line per request (target `kubedav::audit`: user,
    /// method, path, decision, and the rule or home that decided it). Off by default.
    #[arg(long, env = "KUBEDAV_AUDIT_LOG")]
    pub audit_log: bool,
}

impl Cli {
    /// The admin address in effect.
    pub(crate) fn admin_listen(&self) -> &str {
        self.telemetry
            .admin_listen
            .as_ref()
            .map_or(self.target.default_admin_listen(), HostPort::as_str)
    }

    /// The gRPC address in effect.
    pub(crate) fn grpc_listen(&self) -> &str {
        self.serve
            .grpc_listen
            .as_ref()
            .map_or(self.target.default_grpc_listen(), HostPort::as_str)
    }

    /// What a gRPC service asks of its callers: the shared token, if one is set.
    pub(crate) fn require_token(&self) -> kubedav_remote::serve::RequireToken {
        kubedav_remote::serve::RequireToken::new(self.remote.grpc_token.as_deref())
    }

    /// Where a service target listens, and the token its callers must carry.
    pub(crate) fn listen(&self) -> kubedav_remote::serve::Listen<'_> {
        kubedav_remote::serve::Listen {
            name: self.target.name(),
            grpc: self.grpc_listen(),
            admin: self.admin_listen(),
            token: self.require_token(),
            on_bound: None,
            drain_delay: Duration::from_secs(self.serve.shutdown_delay_seconds),
        }
    }
}

/// A checksum algorithm's name, as `--upload-digests` takes it.
fn parse_algorithm(name: &str) -> Result<kubedav_api::checksums::Algorithm, String> {
    kubedav_api::checksums::Algorithm::from_name(name.trim())
        .ok_or_else(|| format!("{name:?} is not one of sha-256, sha-512, sha1, md5, adler32"))
}

#[cfg(test)]
mod tests;
