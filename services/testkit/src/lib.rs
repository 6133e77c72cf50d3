//! Test helpers shared by kubedav's suites: real peers started on free ports in
//! temporary directories, and stopped when dropped, and [`eventually`], the one way the
//! suites wait for a state instead of sleeping.

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
}

impl RedisServer {
    /// Starts a server and waits until it accepts connections.
    pub fn start() -> RedisServer {
        for _ in 0..5 {
            let mut server = RedisServer {
                child: None,
                port: free_port(),
                dir: tempfile::tempdir().expect("a temporary directory"),
            };
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

    /// The URL of database `db`.
    pub fn url(&self, db: u32) -> String {
        format!("redis://127.0.0.1:{}/{db}", self.port)
    }

    /// Kills the server (SIGKILL, as a crash or an evicted pod would).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port with the same data, and waits until it
    /// accepts connections.
    pub fn restart(&mut self) {
        self.stop();
        for _ in 0..20 {
            if self.spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("redis-server did not start again on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
