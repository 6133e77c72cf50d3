//! A Redis replicated and watched by Sentinel, as operators run it (bitnami's and
//! Valkey's charts): three real `redis-server`s, a master and two replicas, and three
//! real `redis-sentinel`s (Debian's package) that fail over when the master dies.

use super::{RedisServer, free_port, kill};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The name the Sentinels monitor the master by.
pub const MASTER_NAME: &str = "kubedav";

/// Three servers and three Sentinels on free loopback ports; stopped when dropped.
pub struct SentinelGroup {
    servers: Vec<RedisServer>,
    sentinels: Vec<(Option<Child>, u16)>,
    _dir: tempfile::TempDir,
}

impl SentinelGroup {
    /// Starts the master, its two replicas and three Sentinels, and waits until every
    /// Sentinel knows both replicas and the two other Sentinels (until then a failover
    /// could not be agreed on). A silent master is judged down after two seconds: with
    /// one (Sentinel's ping and reconnection period), a Sentinel now and then judged the
    /// master it had just switched to down before its first answer, and failed over again
    /// (docs/benchmarks.md, "2026-12-06 (3)").
    pub fn start() -> SentinelGroup {
        Self::start_noticing_after(Duration::from_secs(2))
    }

    /// [`SentinelGroup::start`], with Sentinels that judge a silent master down after
    /// `down_after` (`down-after-milliseconds`; bitnami's chart waits 60 s).
    pub fn start_noticing_after(down_after: Duration) -> SentinelGroup {
        let master = RedisServer::start();
        let servers = vec![
            RedisServer::start_replica_of(master.port()),
            RedisServer::start_replica_of(master.port()),
        ];
        let servers = std::iter::once(master).chain(servers).collect::<Vec<_>>();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let sentinels = (0..3)
            .map(|n| {
                let dir = dir.path().join(format!("sentinel-{n}"));
                spawn_sentinel(&dir, servers[0].port(), down_after)
            })
            .collect();
        let group = SentinelGroup {
            servers,
            sentinels,
            _dir: dir,
        };
        group.wait_until(
            Duration::from_secs(30),
            "every Sentinel knows the others",
            |group| {
                group.sentinels.iter().all(|(_, port)| {
                    let asks = |what: &str| {
                        sentinel_query(*port, &["SENTINEL", what, MASTER_NAME])
                            .map(|value| matches!(value, redis::Value::Array(items) if items.len() == 2))
                            .unwrap_or(false)
                    };
                    asks("replicas") && asks("sentinels")
                }) && group.servers[1..].iter().all(|replica| synced(replica.port()))
            },
        );
        group
    }

    /// The URL of database `db` through the Sentinels, as kubedav takes it.
    pub fn url(&self, db: u32) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|(_, port)| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}/{db}", hosts.join(","))
    }

    /// The port of the server the Sentinels call master now (the first that answers).
    pub fn master_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|(_, port)| {
            let value = sentinel_query(*port, &["SENTINEL", "get-master-addr-by-name", MASTER_NAME]).ok()?;
            let (_, master): (String, String) = redis::from_redis_value(value).ok()?;
            master.parse().ok()
        })
    }

    /// Kills the master (SIGKILL, as a crashed node), and waits until the Sentinels made
    /// a replica master and it answers as one: how long that took.
    pub fn kill_master(&mut self) -> Duration {
        self.fail_master(RedisServer::stop)
    }

    /// Freezes the master (SIGSTOP: a hung node, whose port still takes connections that
    /// nothing answers), and waits as [`SentinelGroup::kill_master`] does.
    pub fn freeze_master(&mut self) -> Duration {
        self.fail_master(RedisServer::freeze)
    }

    /// Has the Sentinels hand the master's role to a replica at once (`SENTINEL
    /// FAILOVER`, as an operator does before maintenance: nothing is lost, and it takes
    /// well under a registration's lifetime), and waits as [`SentinelGroup::kill_master`]
    /// does.
    pub fn hand_over(&mut self) -> Duration {
        let port = self.sentinels[0].1;
        self.fail_master(|_| {
            sentinel_query(port, &["SENTINEL", "FAILOVER", MASTER_NAME]).expect("SENTINEL FAILOVER");
        })
    }

    fn fail_master(&mut self, fail: impl FnOnce(&mut RedisServer)) -> Duration {
        let old = self.master_port().expect("a master");
        let started = Instant::now();
        if let Some(server) = self.servers.iter_mut().find(|s| s.port() == old) {
            fail(server);
        }
        self.wait_until(Duration::from_secs(60), "a replica became master", |group| {
            group
                .master_port()
                .filter(|port| *port != old)
                .is_some_and(|port| role(port).as_deref() == Some("master"))
        });
        started.elapsed()
    }

    /// A direct URL of the server on `port`, to look at it without the Sentinels.
    pub fn server_url(port: u16, db: u32) -> String {
        format!("redis://127.0.0.1:{port}/{db}")
    }

    fn wait_until(&self, limit: Duration, what: &str, holds: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + limit;
        while !holds(self) {
            assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for SentinelGroup {
    fn drop(&mut self) {
        for (child, _) in &mut self.sentinels {
            kill(child);
        }
    }
}

/// Starts a Sentinel watching the master on `master`, its config in `dir` (Sentinel
/// rewrites it), and waits until it monitors it.
fn spawn_sentinel(dir: &std::path::Path, master: u16, down_after: Duration) -> (Option<Child>, u16) {
    std::fs::create_dir_all(dir).expect("the Sentinel's directory");
    for _ in 0..5 {
        let port = free_port();
        let config = dir.join("sentinel.conf");
        std::fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir {}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} {}\n\
                 sentinel failover-timeout {MASTER_NAME} 10000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                dir.display(),
                down_after.as_millis()
            ),
        )
        .expect("sentinel.conf");
        let mut child = Command::new("redis-sentinel")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run redis-sentinel ({e}): `make test` installs it, or apt-get install redis-sentinel")
            });
        let stdout = child.stdout.take().expect("stdout is piped");
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("+monitor master") {
                    let _ = ready_tx.send(());
                }
                if std::env::var_os("KUBEDAV_TEST_REDIS_LOG").is_some() {
                    eprintln!("[sentinel:{port}] {line}");
                }
            }
        });
        if ready_rx.recv_timeout(Duration::from_secs(20)).is_ok() {
            return (Some(child), port);
        }
        kill(&mut Some(child));
    }
    panic!("redis-sentinel did not start on any of 5 free ports");
}

/// One command to the Sentinel on `port`.
fn sentinel_query(port: u16, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))?;
    let mut connection = client.get_connection_with_timeout(Duration::from_secs(1))?;
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query(&mut connection)
}

/// What the server on `port` says it is (`master`, `slave`), if it answers.
pub fn role(port: u16) -> Option<String> {
    redis::from_redis_value(role_reply(port)?.into_iter().next()?).ok()
}

/// Whether the replica on `port` has synced with its master (ROLE's state `connected`).
fn synced(port: u16) -> bool {
    role_reply(port)
        .and_then(|items| redis::from_redis_value::<String>(items.into_iter().nth(3)?).ok())
        .is_some_and(|state| state == "connected")
}

/// The items of the server's answer to ROLE.
fn role_reply(port: u16) -> Option<Vec<redis::Value>> {
    let client = redis::Client::open(SentinelGroup::server_url(port, 0)).ok()?;
    let mut connection = client.get_connection_with_timeout(Duration::from_secs(1)).ok()?;
    match redis::cmd("ROLE").query(&mut connection).ok()? {
        redis::Value::Array(items) => Some(items),
        _ => None,
    }
}
