//! Test harness: starts the real `kubedav` binary on free ports, in one of the two run
//! modes, over a fresh temporary root, and speaks HTTP to it.
#![allow(dead_code)]

/// Generates, for each named async case `fn(Mode)`, one test per run mode, in modules
/// `all_in_one` and `microservices`.
#[allow(unused_macros)] // not every suite runs in both modes
macro_rules! in_both_modes {
    ($($case:ident),* $(,)?) => {
        mod all_in_one {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Mode::AllInOne).await
                }
            )*
        }
        mod microservices {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Mode::Microservices).await
                }
            )*
        }
    };
}

/// Generates, for each named async case `fn(Mode)`, one test per run mode with fileio on
/// S3-compatible object storage (a real versitygw, `--storage s3://BUCKET/PREFIX`), in
/// modules `s3_all_in_one` and `s3_microservices`. `Server::disk` then names the object's
/// file in versitygw's posix directory, so a case can still look at or write "the disk"
/// the way another S3 client would.
#[allow(unused_macros)]
macro_rules! on_s3 {
    ($($case:ident),* $(,)?) => {
        mod s3_all_in_one {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::BACKEND.scope(super::Backend::S3, super::$case(super::Mode::AllInOne)).await
                }
            )*
        }
        mod s3_microservices {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::BACKEND.scope(super::Backend::S3, super::$case(super::Mode::Microservices)).await
                }
            )*
        }
    };
}

/// Declares tests that only make sense with separate processes (a service to stop or
/// pause on its own), under `mod microservices_only`.
#[macro_export]
macro_rules! microservices_only {
    ($($case:ident),* $(,)?) => {
        mod microservices_only {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case().await
                }
            )*
        }
    };
}

pub(crate) mod fleet;
pub(crate) mod prometheus;
pub(crate) mod tools;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// How the services are deployed for a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `--target=all`: one process, no network between the services.
    AllInOne,
    /// `--target=gateway` plus `--target=fileio` and `--target=locks`, talking gRPC over
    /// loopback.
    Microservices,
}

/// Where fileio keeps the files of a test's server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// `--root DIR`: a temporary directory.
    Volume,
    /// `--storage s3://files/served`: a prefix of a bucket on a real S3 server.
    S3,
    /// The same, with the S3 server speaking only TLS, under a certificate of a private
    /// CA that fileio is told to trust through `AWS_CA_BUNDLE`.
    S3OverTls,
}

tokio::task_local! {
    /// The backend of the servers a test starts (see `on_s3!`); a volume unless set.
    pub static BACKEND: Backend;
}

/// The backend of the servers this test starts.
pub(crate) fn backend() -> Backend {
    BACKEND.try_with(|backend| *backend).unwrap_or(Backend::Volume)
}

/// The prefix of the bucket an S3-backed server serves.
pub(crate) const S3_PREFIX: &str = "served";

/// One started process and what it announced.
pub(crate) struct Process {
    pub child: Child,
    pub name: &'static str,
    lines: mpsc::UnboundedReceiver<String>,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    /// Addresses announced so far, by what was announced ("fileio gRPC", ...).
    bound: Vec<(String, SocketAddr)>,
    /// Every log line read so far.
    history: Vec<String>,
}

impl Process {
    /// Starts `kubedav` with `args`; its stderr is echoed to the test's output.
    pub(crate) fn spawn(name: &'static str, args: &[String], envs: &[(String, String)]) -> Process {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kubedav"))
            .args(args)
            .env("RUST_LOG", "info")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .envs(envs.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the kubedav binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                eprintln!("[{name}] {line}");
                let _ = tx.send(line);
            }
        });
        Process {
            child,
            name,
            lines,
            args: args.to_vec(),
            envs: envs.to_vec(),
            bound: Vec::new(),
            history: Vec::new(),
        }
    }

    /// Kills the process and starts it again with the same arguments, on the addresses
    /// it had bound before (so its clients find it again), and waits until it announces
    /// them.
    pub(crate) async fn restart(&mut self) {
        // It may have been killed already (a test of what happens meanwhile).
        let _ = self.child.kill().await;
        let mut args = self.args.clone();
        for (what, addr) in &self.bound {
            let flag = if what.ends_with("gRPC") {
                "--grpc-listen"
            } else if what.ends_with("admin") {
                "--admin-listen"
            } else {
                "--listen"
            };
            if let Some(i) = args.iter().position(|a| a == flag) {
                args[i + 1] = addr.to_string();
            }
        }
        let bound = std::mem::take(&mut self.bound);
        *self = Process::spawn(self.name, &args, &self.envs);
        for (what, _) in bound {
            self.listening(&what).await;
        }
    }

    /// Waits for the log line "`what` listening on ADDR" (text or JSON) and returns ADDR.
    pub(crate) async fn listening(&mut self, what: &str) -> SocketAddr {
        let needle = format!("{what} listening on ");
        let history = &mut self.history;
        let wait = async {
            while let Some(line) = self.lines.recv().await {
                history.push(line.clone());
                if let Some(pos) = line.find(&needle) {
                    let addr = line[pos + needle.len()..]
                        .split(|c: char| c.is_whitespace() || c == '"')
                        .next()
                        .unwrap_or_default();
                    let addr: SocketAddr = addr.parse().expect("a socket address follows 'listening on'");
                    return addr;
                }
            }
            panic!("{} exited before announcing {what}", self.name);
        };
        let addr = tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .unwrap_or_else(|_| panic!("{} did not announce {what}", self.name));
        self.bound.push((what.to_owned(), addr));
        addr
    }

    /// A log line containing `needle`, logged at any time since the start (waiting for
    /// it if need be).
    pub(crate) async fn logged(&mut self, needle: &str) -> String {
        if let Some(line) = self.history.iter().find(|l| l.contains(needle)) {
            return line.clone();
        }
        self.next_log_line(needle).await
    }

    /// Waits for the next new log line containing `needle` and returns it.
    pub(crate) async fn next_log_line(&mut self, needle: &str) -> String {
        let history = &mut self.history;
        let wait = async {
            while let Some(line) = self.lines.recv().await {
                history.push(line.clone());
                if line.contains(needle) {
                    return line;
                }
            }
            panic!("{} exited before logging {needle:?}", self.name);
        };
        tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .unwrap_or_else(|_| panic!("{} never logged {needle:?}", self.name))
    }

    /// Every log line so far (without waiting for more).
    pub(crate) fn log_so_far(&mut self) -> Vec<String> {
        while let Ok(line) = self.lines.try_recv() {
            self.history.push(line);
        }
        self.history.clone()
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("the process is running")
    }
}

/// A running kubedav serving a temporary root.
pub(crate) struct Server {
    pub mode: Mode,
    pub addr: SocketAddr,
    pub root: PathBuf,
    pub processes: Vec<Process>,
    /// The admin address of each process, by process name.
    pub admin: Vec<(&'static str, SocketAddr)>,
    /// fileio's gRPC address (microservices mode).
    pub grpc: Option<SocketAddr>,
    /// The S3 server fileio stores into, on the S3 backend.
    pub s3: Option<kubedav_testkit::S3Server>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts kubedav in `mode` with default settings.
    pub(crate) async fn start(mode: Mode) -> Server {
        Self::start_with(mode, &[]).await
    }

    /// Starts kubedav in `mode`; `gateway_args` go to the process that serves HTTP.
    pub(crate) async fn start_with(mode: Mode, gateway_args: &[&str]) -> Server {
        Self::start_full(mode, gateway_args, &[]).await
    }

    /// Starts kubedav in `mode`; `gateway_args` go to the process that serves HTTP and
    /// `envs` to every process.
    pub(crate) async fn start_full(mode: Mode, gateway_args: &[&str], envs: &[(&str, &str)]) -> Server {
        Self::start_auth(mode, None, &[], gateway_args, envs).await
    }

    /// Starts kubedav with authentication against `users_file` (all-in-one: the one
    /// process reads it; microservices: an auth process does). `auth_args` go to the
    /// process that verifies credentials.
    pub(crate) async fn start_auth(
        mode: Mode,
        users_file: Option<&Path>,
        auth_args: &[&str],
        gateway_args: &[&str],
        envs: &[(&str, &str)],
    ) -> Server {
        Self::launch(mode, users_file, auth_args, gateway_args, envs, &|_| {}).await
    }

    /// Starts kubedav in `mode` after `prepare` has readied the (empty, existing) root
    /// directory, e.g. by mounting a file system on it.
    pub(crate) async fn start_prepared(mode: Mode, gateway_args: &[&str], prepare: &dyn Fn(&Path)) -> Server {
        Self::launch(mode, None, &[], gateway_args, &[], prepare).await
    }

    /// [`Server::start_prepared`] with `envs` for every process.
    pub(crate) async fn start_prepared_with(
        mode: Mode,
        envs: &[(&str, &str)],
        prepare: &dyn Fn(&Path),
    ) -> Server {
        Self::launch(mode, None, &[], &[], envs, prepare).await
    }

    async fn launch(
        mode: Mode,
        users_file: Option<&Path>,
        auth_args: &[&str],
        gateway_args: &[&str],
        envs: &[(&str, &str)],
        prepare: &dyn Fn(&Path),
    ) -> Server {
        let mut envs: Vec<(String, String)> =
            envs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (root, storage, s3) = match backend() {
            Backend::Volume => {
                let root = dir.path().join("root");
                std::fs::create_dir(&root).unwrap();
                let root_arg = root.to_str().unwrap().to_owned();
                (root, vec!["--root".to_owned(), root_arg], None)
            }
            Backend::S3 | Backend::S3OverTls => {
                let s3 = if backend() == Backend::S3OverTls {
                    kubedav_testkit::S3Server::start_tls("files")
                } else {
                    kubedav_testkit::S3Server::start("files")
                };
                envs.extend(s3_envs(&s3));
                let root = s3.bucket_dir().join(S3_PREFIX);
                std::fs::create_dir_all(&root).unwrap();
                let storage = vec![
                    "--storage".to_owned(),
                    format!("s3://{}/{S3_PREFIX}", s3.bucket()),
                ];
                (root, storage, Some(s3))
            }
        };
        prepare(&root);
        let any = "127.0.0.1:0".to_owned();
        let extra: Vec<String> = gateway_args.iter().map(|s| s.to_string()).collect();
        let mut processes = Vec::new();
        let mut admin = Vec::new();
        let mut grpc_addr = None;
        let addr = match mode {
            Mode::AllInOne => {
                let mut args = vec!["--target=all".into()];
                args.extend(storage);
                if !names_listen(&extra) {
                    args.extend(["--listen".into(), any.clone()]);
                }
                args.extend(["--admin-listen".into(), any]);
                if let Some(file) = users_file {
                    args.extend(["--users-file".into(), file.display().to_string()]);
                    args.extend(auth_args.iter().map(|s| s.to_string()));
                }
                args.extend(extra);
                let mut all = Process::spawn("all", &args, &envs);
                let addr = all.listening("gateway HTTP").await;
                admin.push(("all", all.listening("all admin").await));
                processes.push(all);
                addr
            }
            Mode::Microservices => {
                let (fileio, grpc, fileio_admin) = start_service("fileio", "fileio", &storage, &envs).await;
                admin.push(("fileio", fileio_admin));
                grpc_addr = Some(grpc);
                let (locks, locks_grpc, locks_admin) = start_service("locks", "locks", &[], &envs).await;
                admin.push(("locks", locks_admin));
                let (markdown, markdown_grpc, markdown_admin) =
                    start_service("markdown", "markdown", &[], &envs).await;
                admin.push(("markdown", markdown_admin));
                let mut args = vec![
                    "--fileio-url".into(),
                    format!("http://{grpc}"),
                    "--locks-url".into(),
                    format!("http://{locks_grpc}"),
                    "--markdown-url".into(),
                    format!("http://{markdown_grpc}"),
                ];
                let mut auth_process = None;
                if let Some(file) = users_file {
                    // The auth target keeps app passwords through fileio's records.
                    let mut auth_cmd = vec![
                        "--users-file".into(),
                        file.display().to_string(),
                        "--fileio-url".into(),
                        format!("http://{grpc}"),
                    ];
                    auth_cmd.extend(auth_args.iter().map(|s| s.to_string()));
                    let (auth, auth_grpc, auth_admin) = start_service("auth", "auth", &auth_cmd, &envs).await;
                    admin.push(("auth", auth_admin));
                    args.extend(["--auth-url".into(), format!("http://{auth_grpc}")]);
                    auth_process = Some(auth);
                }
                args.extend(extra);
                let (gateway, addr, gateway_admin) = start_gateway("gateway", &args, &envs).await;
                admin.push(("gateway", gateway_admin));
                processes.push(gateway);
                processes.push(fileio);
                processes.push(locks);
                processes.push(markdown);
                processes.extend(auth_process);
                addr
            }
        };
        Server {
            mode,
            addr,
            root,
            processes,
            admin,
            grpc: grpc_addr,
            s3,
            _dir: dir,
        }
    }

    /// Starts every service as its own process, sharing state through `redis` as a
    /// production fleet does: auth (users `users`, in `dir`) with the shared cache, locks
    /// on Redis, markdown. `envs` go to every process.
    pub(crate) async fn start_on_redis(
        redis: &kubedav_testkit::RedisServer,
        dir: &Path,
        users: &[(&str, &str)],
        envs: &[(&str, &str)],
    ) -> Server {
        let users = users_file(dir, users);
        let url = redis.url(0);
        let mut all = vec![
            ("KUBEDAV_LOCK_STORE", url.as_str()),
            (
                "KUBEDAV_AUTH_CACHE_SECRET",
                "a secret shared by the auth replicas",
            ),
        ];
        all.extend_from_slice(envs);
        Self::start_auth(
            Mode::Microservices,
            Some(&users),
            &["--auth-cache-redis", &url],
            &[],
            &all,
        )
        .await
    }

    /// The URL of a raw (already encoded) path.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// A path on disk inside the root.
    pub(crate) fn disk(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// The admin address (metrics, health) of the process with this name.
    pub(crate) fn admin_of(&self, name: &str) -> SocketAddr {
        self.admin
            .iter()
            .find(|(process, _)| *process == name)
            .map(|(_, addr)| *addr)
            .expect("a process of that name")
    }

    /// The admin address of the process that serves HTTP: `all`, or `gateway`.
    pub(crate) fn edge_admin(&self) -> SocketAddr {
        self.admin
            .iter()
            .find(|(process, _)| matches!(*process, "all" | "gateway"))
            .map(|(_, addr)| *addr)
            .expect("a process serving HTTP")
    }

    /// The process with this name.
    pub(crate) fn process(&mut self, name: &str) -> &mut Process {
        self.processes
            .iter_mut()
            .find(|p| p.name == name)
            .expect("a process of that name")
    }

    /// A /proc/PID/status field of the process that serves HTTP (all-in-one: the one
    /// process), in KiB.
    pub(crate) fn gateway_memory_kib(&self, field: &str) -> u64 {
        let gateway = self
            .processes
            .iter()
            .find(|p| matches!(p.name, "all" | "gateway"))
            .expect("a process serves HTTP");
        proc_status_kib(gateway.pid(), field)
    }

    /// Sum over the server's processes of a /proc/PID/status field, in KiB.
    pub(crate) fn memory_kib(&self, field: &str) -> u64 {
        self.processes
            .iter()
            .map(|p| proc_status_kib(p.pid(), field))
            .sum()
    }
}

/// A client of `s3`'s bucket, as kubedav's fileio talks to it.
pub(crate) fn bucket_client(s3: &kubedav_testkit::S3Server) -> kubedav_fileio::s3::S3Client {
    kubedav_fileio::s3::S3Client::new(&kubedav_fileio::s3::S3Config {
        endpoint: s3.endpoint().parse().unwrap(),
        bucket: s3.bucket().to_owned(),
        region: kubedav_testkit::S3_REGION.to_owned(),
        access_key: kubedav_testkit::S3_ACCESS_KEY.to_owned(),
        secret_key: kubedav_testkit::S3_SECRET_KEY.to_owned(),
        session_token: None,
        path_style: true,
        ca_bundle: s3.ca_bundle(),
    })
    .unwrap()
}

/// The environment that points fileio at `s3`: endpoint, region, credentials, and the
/// CA bundle of a TLS server.
pub(crate) fn s3_envs(s3: &kubedav_testkit::S3Server) -> Vec<(String, String)> {
    let mut envs: Vec<(String, String)> = [
        ("AWS_ENDPOINT_URL", s3.endpoint()),
        ("AWS_REGION", kubedav_testkit::S3_REGION.to_owned()),
        ("AWS_ACCESS_KEY_ID", kubedav_testkit::S3_ACCESS_KEY.to_owned()),
        ("AWS_SECRET_ACCESS_KEY", kubedav_testkit::S3_SECRET_KEY.to_owned()),
    ]
    .map(|(name, value)| (name.to_owned(), value))
    .into();
    if let Some(bundle) = s3.ca_bundle() {
        envs.push(("AWS_CA_BUNDLE".to_owned(), bundle.display().to_string()));
    }
    envs
}

/// Writes `dir/users`, a users file with a SHA-512 crypt entry for each (user, password),
/// and returns its path.
pub(crate) fn users_file(dir: &Path, users: &[(&str, &str)]) -> PathBuf {
    let path = dir.join("users");
    let lines: String = users
        .iter()
        .map(|(user, password)| {
            format!(
                "{user}:{}\n",
                kubedav_auth::passwd::sha512_crypt(password).unwrap()
            )
        })
        .collect();
    std::fs::write(&path, lines).unwrap();
    path
}

/// Starts `kubedav --target=<target> ARGS` on free ports, as the process `name`; returns
/// it with its gRPC and admin addresses once it announced them.
pub(crate) async fn start_service(
    name: &'static str,
    target: &str,
    args: &[String],
    envs: &[(String, String)],
) -> (Process, SocketAddr, SocketAddr) {
    let mut all = vec![
        format!("--target={target}"),
        "--grpc-listen".into(),
        "127.0.0.1:0".into(),
        "--admin-listen".into(),
        "127.0.0.1:0".into(),
    ];
    all.extend(args.iter().cloned());
    let mut process = Process::spawn(name, &all, envs);
    let grpc = process.listening(&format!("{target} gRPC")).await;
    let admin = process.listening(&format!("{target} admin")).await;
    (process, grpc, admin)
}

/// Starts `kubedav --target=gateway ARGS` on free ports, as the process `name`; returns
/// it with its HTTP and admin addresses once it announced them.
pub(crate) async fn start_gateway(
    name: &'static str,
    args: &[String],
    envs: &[(String, String)],
) -> (Process, SocketAddr, SocketAddr) {
    let mut all = vec![
        "--target=gateway".into(),
        "--admin-listen".into(),
        "127.0.0.1:0".into(),
    ];
    if !names_listen(args) {
        all.extend(["--listen".into(), "127.0.0.1:0".into()]);
    }
    all.extend(args.iter().cloned());
    let mut process = Process::spawn(name, &all, envs);
    let http = process.listening("gateway HTTP").await;
    let admin = process.listening("gateway admin").await;
    (process, http, admin)
}

/// Whether `args` choose the gateway's address themselves (a test that must know it
/// before the start, for `--public-url`).
fn names_listen(args: &[String]) -> bool {
    args.iter().any(|a| a == "--listen" || a.starts_with("--listen="))
}

/// A field of /proc/PID/status (VmRSS, VmHWM), in KiB.
pub(crate) fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or(0)
}

/// An HTTP client that never uses a proxy.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().expect("a client")
}

/// A raw HTTP/1.1 exchange: sends `request` as is (no URL normalisation, unlike every
/// client library) on a new connection and reads the response until the server closes.
pub(crate) async fn raw(addr: SocketAddr, request: &[u8]) -> RawResponse {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request).await.expect("send");
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut buf)).await;
    RawResponse::parse(&buf)
}

/// [`raw`] from the local address `source` (any of 127.0.0.0/8 reaches a server on
/// 127.0.0.1), so a test can be several clients.
pub(crate) async fn raw_from(source: std::net::IpAddr, addr: SocketAddr, request: &[u8]) -> RawResponse {
    let mut stream = connect_from(source, addr).await;
    stream.write_all(request).await.expect("send");
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut buf)).await;
    RawResponse::parse(&buf)
}

/// A connection to `addr` from the local address `source`.
pub(crate) async fn connect_from(source: std::net::IpAddr, addr: SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind(SocketAddr::new(source, 0))
        .expect("bind the source address");
    socket.connect(addr).await.expect("connect")
}

/// A raw GET of `target` with `Connection: close`.
pub(crate) async fn raw_get(addr: SocketAddr, method: &str, target: &str) -> RawResponse {
    raw(
        addr,
        format!("{method} {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            .as_bytes(),
    )
    .await
}

/// A parsed raw response.
#[derive(Debug)]
pub(crate) struct RawResponse {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl RawResponse {
    fn parse(buf: &[u8]) -> RawResponse {
        let split = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(buf.len());
        let head = String::from_utf8_lossy(&buf[..split]).into_owned();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = buf.get(split + 4..).unwrap_or_default().to_vec();
        RawResponse { status, head, body }
    }
}

/// [`eventually_async`] with a check that needs no waiting.
pub(crate) async fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    kubedav_testkit::eventually(timeout, move || std::future::ready(check())).await
}

/// Polls the async `check` until it holds or `timeout` passes (`kubedav_testkit`).
pub(crate) async fn eventually_async<F, Fut>(timeout: Duration, check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    kubedav_testkit::eventually(timeout, check).await
}

/// Names in a directory on disk: what clients put there and whatever an interrupted write
/// left, beside kubedav's reserved area `.kubedav` (the trash, the versions and the
/// records, on by default), which is left out.
pub(crate) fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != kubedav_api::path::RESERVED_AREA)
        .collect();
    names.sort();
    names
}

/// The metrics text of an admin port.
pub(crate) async fn metric_text(admin: SocketAddr) -> String {
    client()
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Sum of a metric's samples on an admin port.
pub(crate) async fn metric_sum(admin: SocketAddr, name: &str) -> f64 {
    metric_text(admin)
        .await
        .lines()
        .filter(|line| line.starts_with(name) && line[name.len()..].starts_with(['{', ' ']))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Sends `signal` to `pid`.
pub(crate) fn signal(pid: u32, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("a live pid");
    rustix::process::kill_process(pid, signal).expect("signal sent");
}

/// Stops `pid` with SIGSTOP and waits until every one of its threads has stopped: the
/// signal is only queued when kill(2) returns, and on a loaded machine a thread may still
/// answer a request before it takes effect.
pub(crate) fn stop(pid: u32) {
    signal(pid, rustix::process::Signal::STOP);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let running = std::fs::read_dir(format!("/proc/{pid}/task"))
            .expect("the process is alive")
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("stat")).ok())
            .filter(|stat| {
                // The state follows the command name, which is in parentheses.
                let state = stat.rsplit_once(") ").map(|(_, rest)| rest.as_bytes()[0]);
                !matches!(state, Some(b'T' | b't'))
            })
            .count();
        if running == 0 {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{pid} did not stop");
        std::thread::yield_now();
    }
}

/// What a gateway started with `args` (beside fresh listen addresses) says on standard
/// error when it refuses to start; panics if it starts.
pub(crate) fn gateway_refusal(args: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_kubedav"))
        .args([
            "--target=gateway",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(!output.status.success(), "the gateway started with {args:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}
