//! Test helpers shared by kubedav's suites: real peers started on free ports in
//! temporary directories, and stopped when dropped, and [`eventually`], the one way the
//! suites wait for a state instead of sleeping.

#![forbid(unsafe_code)]

pub mod idp;
pub mod sentinel;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Polls `check` every 20 ms until it holds or `timeout` passes; returns whether it held.
pub async fn eventually<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A free loopback port below the kernel's ephemeral range (32768 and up), for a server
/// whose address must be known before it starts (`--public-url`): no `:0` bind and no
/// outgoing connection of the other processes can take it between now and then, as
/// they can take one from [`free_port`].
pub fn free_port_below_ephemeral() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    for _ in 0..1000 {
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let port = 20_000 + (random % 12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port between 20000 and 32000")
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// A real `redis-server` on a free loopback port, with its data in a temporary
/// directory. Writes go to an append-only file synced on every write, so a stop (even a
/// SIGKILL) and a restart keep the data, as a Redis with persistence does.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    /// Further arguments (`--replicaof` for a replica).
    args: Vec<String>,
    /// The password of a server that speaks only TLS (see [`RedisServer::start_tls`]).
    tls_password: Option<String>,
}

impl RedisServer {
    /// Starts a server and waits until it accepts connections.
    pub fn start() -> RedisServer {
        Self::start_with(Vec::new())
    }

    /// Starts a replica of the server on loopback port `master`, and waits until it
    /// accepts connections.
    pub fn start_replica_of(master: u16) -> RedisServer {
        Self::start_with(vec!["--replicaof".into(), "127.0.0.1".into(), master.to_string()])
    }

    /// Starts a server that speaks only TLS, with a certificate for `127.0.0.1` issued by
    /// a CA made for it ([`RedisServer::ca_file`]) and the password `password`, as a
    /// managed Redis is; waits until it accepts connections.
    pub fn start_tls(password: &str) -> RedisServer {
        Self::start_as(Vec::new(), Some(password.to_owned()))
    }

    fn start_with(args: Vec<String>) -> RedisServer {
        Self::start_as(args, None)
    }

    fn start_as(args: Vec<String>, tls_password: Option<String>) -> RedisServer {
        for _ in 0..5 {
            let mut server = RedisServer {
                child: None,
                port: free_port(),
                dir: tempfile::tempdir().expect("a temporary directory"),
                args: args.clone(),
                tls_password: tls_password.clone(),
            };
            if server.tls_password.is_some() {
                write_certificates(server.dir.path());
            }
            if server.spawn() {
                return server;
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    /// Spawns redis-server on `self.port`; true once it is ready, false if it exited
    /// (the port was taken).
    fn spawn(&mut self) -> bool {
        let mut child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--save", "", "--appendonly", "yes", "--appendfsync", "always"])
            .args(["--protected-mode", "no", "--daemonize", "no"])
            .args(&self.args)
            .args(self.tls_args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run redis-server ({e}): `make test` installs it, or apt-get install redis-server"
                )
            });
        let stdout = child.stdout.take().expect("stdout is piped");
        let (ready_tx, ready_rx) = mpsc::channel();
        let port = self.port;
        // Reads the log for the whole life of the server, so its pipe never fills.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("Ready to accept connections") {
                    let _ = ready_tx.send(());
                }
                if std::env::var_os("KUBEDAV_TEST_REDIS_LOG").is_some() {
                    eprintln!("[redis:{port}] {line}");
                }
            }
        });
        let ready = ready_rx.recv_timeout(Duration::from_secs(20)).is_ok();
        self.child = Some(child);
        if !ready {
            self.stop();
        }
        ready
    }

    /// The URL of database `db` (`rediss://` with the password for a TLS server).
    pub fn url(&self, db: u32) -> String {
        match &self.tls_password {
            Some(password) => format!("rediss://:{password}@127.0.0.1:{}/{db}", self.port),
            None => format!("redis://127.0.0.1:{}/{db}", self.port),
        }
    }

    /// The PEM file of the CA that issued a TLS server's certificate.
    pub fn ca_file(&self) -> std::path::PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The arguments that make a server speak only TLS and ask for its password (the
    /// later `--port 0` turns off the plain port given before).
    fn tls_args(&self) -> Vec<String> {
        let Some(password) = &self.tls_password else {
            return Vec::new();
        };
        let file = |name: &str| self.dir.path().join(name).display().to_string();
        [
            "--port",
            "0",
            "--tls-port",
            &self.port.to_string(),
            "--tls-cert-file",
            &file("server.pem"),
            "--tls-key-file",
            &file("server.key"),
            "--tls-ca-cert-file",
            &file("ca.pem"),
            "--tls-auth-clients",
            "no",
            "--requirepass",
            password,
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// Its loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (SIGKILL, as a crash or an evicted pod would).
    pub fn stop(&mut self) {
        kill(&mut self.child);
    }

    /// Freezes the server (SIGSTOP, as a hung node or a partition looks from outside):
    /// its port still accepts connections, and nothing answers on them. Killing it
    /// ([`RedisServer::stop`], or the drop) ends it.
    pub fn freeze(&mut self) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args(["-STOP", &child.id().to_string()])
                .status();
        }
    }

    /// Lets a frozen server run again (SIGCONT): it then answers what it was sent
    /// meanwhile.
    pub fn thaw(&mut self) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
    }

    /// Starts the server again on the same port with the same data, and waits until it
    /// accepts connections.
    pub fn restart(&mut self) {
        self.stop();
        let port = self.port;
        respawn("redis-server", port, || self.spawn());
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The access key of every [`S3Server`].
pub const S3_ACCESS_KEY: &str = "kubedav-test";
/// The secret key of every [`S3Server`].
pub const S3_SECRET_KEY: &str = "kubedav-test-secret";
/// The region every [`S3Server`] signs for.
pub const S3_REGION: &str = "us-east-1";

/// A real S3 server: versitygw (the Versity S3 Gateway) with its posix backend, on a
/// free loopback port, over a temporary directory, with one bucket made. It checks
/// signatures and headers as strictly as S3 does. `scripts/need-versitygw.sh` builds it;
/// the binary is taken from `KUBEDAV_VERSITYGW`, else the tools cache, else `PATH`.
pub struct S3Server {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    bucket: String,
    /// Whether it speaks TLS (see [`S3Server::start_tls`]).
    tls: bool,
    /// Whether it writes new data beside the object and renames it into place
    /// ([`S3Server::restart_renaming_into_place`]).
    rename_into_place: bool,
}

impl S3Server {
    /// Starts a server with the bucket `bucket`, and waits until it answers.
    pub fn start(bucket: &str) -> S3Server {
        let mut refused = String::new();
        for _ in 0..5 {
            let mut server = S3Server {
                child: None,
                port: free_port(),
                dir: tempfile::tempdir().expect("a temporary directory"),
                bucket: bucket.to_owned(),
                tls: false,
                rename_into_place: false,
            };
            if server.spawn() {
                match server.create_bucket() {
                    Ok(()) => return server,
                    // Another process bound the port between `free_port` and versitygw,
                    // and answered in its place (seen in CI as a bare 404): try another.
                    Err(answer) => refused = answer,
                }
                server.stop();
            }
        }
        panic!("versitygw did not start on any of 5 free ports (last CreateBucket answer: {refused})");
    }

    /// Starts a server with the bucket `bucket` that speaks only TLS, with a certificate
    /// for `127.0.0.1` and `localhost` issued by a CA made for it, whose certificate
    /// [`S3Server::ca_bundle`] names (the bucket is made over plain HTTP first).
    pub fn start_tls(bucket: &str) -> S3Server {
        let mut server = Self::start(bucket);
        write_certificates(server.dir.path());
        server.tls = true;
        server.restart();
        server
    }

    /// Starts the server again on its port and data, writing each object's new data
    /// under the bucket's `.sgwtmp/` and renaming it into place (versitygw's
    /// `posix --disableotmp`) instead of linking an `O_TMPFILE` into the object's
    /// directory. An S3 part then takes longer from its last byte received to its
    /// answer, which is where a part completes after its upload was aborted
    /// (docs/architecture.md, "The S3 server the tests run on"). Clients reconnect.
    pub fn restart_renaming_into_place(&mut self) {
        self.rename_into_place = true;
        self.restart();
    }

    /// The PEM file of the CA that issued a TLS server's certificate; `None` for a
    /// plain HTTP server.
    pub fn ca_bundle(&self) -> Option<std::path::PathBuf> {
        self.tls.then(|| self.dir.path().join("ca.pem"))
    }

    /// The versitygw binary.
    fn binary() -> std::path::PathBuf {
        if let Some(path) = std::env::var_os("KUBEDAV_VERSITYGW") {
            return path.into();
        }
        let cache = std::env::var_os("KUBEDAV_TOOLS_CACHE")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_CACHE_HOME").map(|c| std::path::Path::new(&c).join("kubedav-tools"))
            })
            .or_else(|| {
                std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache/kubedav-tools"))
            });
        match cache.map(|c| c.join("bin/versitygw")) {
            Some(path) if path.exists() => path,
            _ => "versitygw".into(),
        }
    }

    /// Spawns versitygw on `self.port`; true once it accepts connections, false if it
    /// exited (the port was taken).
    fn spawn(&mut self) -> bool {
        let data = self.dir.path().join("data");
        std::fs::create_dir_all(&data).expect("the server's data directory");
        let mut command = Command::new(Self::binary());
        if self.tls {
            let file = |name: &str| self.dir.path().join(name);
            command.arg("--cert").arg(file("server.pem"));
            command.arg("--key").arg(file("server.key"));
        }
        let child = command
            .args(["--access", S3_ACCESS_KEY, "--secret", S3_SECRET_KEY])
            .args(["--port", &format!("127.0.0.1:{}", self.port)])
            .arg("posix")
            .args(self.rename_into_place.then_some("--disableotmp"))
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run versitygw ({e}): `make test` builds it, or run scripts/need-versitygw.sh")
            });
        self.child = Some(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return true;
            }
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop();
        false
    }

    /// Makes the bucket (CreateBucket, signed); the status and body of any answer but 200.
    fn create_bucket(&self) -> Result<(), String> {
        let bucket = self.signing_bucket();
        let credentials = rusty_s3::Credentials::new(S3_ACCESS_KEY, S3_SECRET_KEY);
        let url = rusty_s3::S3Action::sign(
            &rusty_s3::actions::CreateBucket::new(&bucket, &credentials),
            Duration::from_secs(60),
        );
        let (status, body) = self.send("PUT", &url, &[], b"");
        if status == 200 {
            return Ok(());
        }
        Err(format!(
            "{status} for bucket {}: {}",
            self.bucket,
            String::from_utf8_lossy(&body)
        ))
    }

    /// The bucket, for signing requests to it (path-style).
    pub fn signing_bucket(&self) -> rusty_s3::Bucket {
        rusty_s3::Bucket::new(
            self.endpoint().parse().expect("a URL"),
            rusty_s3::UrlStyle::Path,
            self.bucket.clone(),
            S3_REGION,
        )
        .expect("a bucket")
    }

    /// Sends one request to a (presigned) `url` of this server, with `headers` and
    /// `body`: the status and the body of the answer. Plain HTTP/1.1, one connection per
    /// request, as another S3 client writing into the bucket would.
    pub fn send(
        &self,
        method: &str,
        url: &url::Url,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        use std::io::{Read, Write};
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        let mut head = format!(
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.port,
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut stream =
            std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("the S3 server answers");
        stream.write_all(head.as_bytes()).expect("a request");
        stream.write_all(body).expect("a body");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("an answer");
        let end = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP answer");
        let status = String::from_utf8_lossy(&answer[9..12])
            .parse()
            .expect("a status code");
        let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
        let mut body = answer[end + 4..].to_vec();
        if head.contains("transfer-encoding: chunked") {
            body = dechunk(&body);
        }
        (status, body)
    }

    /// The server's URL, `http://127.0.0.1:PORT` (`https://` when it speaks TLS).
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The bucket's name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Where the posix backend keeps the bucket's objects (one file per object).
    pub fn bucket_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("data").join(&self.bucket)
    }

    /// Kills the server (SIGKILL).
    pub fn stop(&mut self) {
        kill(&mut self.child);
    }

    /// Starts the server again on the same port over the same data.
    pub fn restart(&mut self) {
        self.stop();
        let port = self.port;
        respawn("versitygw", port, || self.spawn());
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Writes into `dir` a CA (`ca.pem`) and a server certificate it issued for `127.0.0.1`
/// and `localhost` (`server.pem`, its key `server.key`).
fn write_certificates(dir: &std::path::Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "kubedav test CA");
    let ca_certificate = ca.self_signed(&ca_key).expect("a CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let server_key = KeyPair::generate().expect("a server key");
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("server parameters")
        .signed_by(&server_key, &issuer)
        .expect("a server certificate");
    std::fs::write(dir.join("ca.pem"), ca_certificate.pem()).expect("ca.pem");
    std::fs::write(dir.join("server.pem"), server.pem()).expect("server.pem");
    std::fs::write(dir.join("server.key"), server_key.serialize_pem()).expect("server.key");
}

/// Kills a peer's process, if it runs, and reaps it.
fn kill(child: &mut Option<Child>) {
    if let Some(mut child) = child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Calls `spawn` until the peer `what` is up again on `port`: right after a kill the
/// port may take a moment to be free.
fn respawn(what: &str, port: u16, mut spawn: impl FnMut() -> bool) {
    for _ in 0..20 {
        if spawn() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} did not start again on port {port}");
}

/// The payload of an HTTP/1.1 chunked body.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&body[..line_end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = line_end + 2;
        out.extend_from_slice(&body[start..start + size]);
        body = &body[start + size + 2..];
    }
    out
}
