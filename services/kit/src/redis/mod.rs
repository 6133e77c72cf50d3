//! Redis connections for the services that share state through Redis (the locks store,
//! the shared auth cache and the replicas' registry): one multiplexed connection per
//! process that reconnects by itself, with short timeouts, so that an unreachable Redis
//! fails a request quickly instead of hanging it.

use ::redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use ::redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one Redis command may take before it counts as failed.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long connecting to Redis may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// What [`Redis::eval_acknowledged`]'s error for too few acknowledgements says.
const UNACKNOWLEDGED: &str = "a write was not acknowledged by enough replicas";

/// Whether `error` is [`Redis::eval_acknowledged`]'s for a write too few replicas
/// acknowledged: the master made it, and it may or may not survive a failover.
pub fn unacknowledged(error: &RedisError) -> bool {
    error.kind() == ErrorKind::Client && error.to_string().contains(UNACKNOWLEDGED)
}

/// How long a write waits for its replicas' acknowledgement ([`Redis::eval_acknowledged`]).
pub const REPLICA_ACK_TIMEOUT: Duration = Duration::from_millis(250);

mod sentinel;

/// A connection to one Redis, shared by clones: redis's `ConnectionManager`, which
/// reconnects by itself after an I/O error, replaced by a new one after any other failure
/// that is not Redis's answer to the command. The manager keeps such a failure of its
/// connection attempt (a peer that does not speak Redis's protocol, as a Service address
/// before kube-proxy has programmed it can be; a refused handshake) and returns it to
/// every later command without trying again; this type tries again. Behind Sentinel,
/// the manager is of the server the Sentinels call master, and is dropped for a new
/// question to them when that server goes away or answers as a replica.
#[derive(Clone)]
pub struct Redis {
    target: Arc<Target>,
    current: Arc<Mutex<Generation>>,
    /// How many replicas must acknowledge a write made with [`Redis::eval_acknowledged`].
    replica_acks: u32,
    /// Whether a task is asking the Sentinels whether the master moved.
    rechecking: Arc<std::sync::atomic::AtomicBool>,
}

/// Which server a [`Redis`] talks to.
enum Target {
    /// The one a `redis://` URL names.
    Direct(::redis::Client),
    /// The master the Sentinels of a `redis+sentinel://` URL name.
    Sentinel(sentinel::Sentinels),
}

/// The manager in use (none yet behind Sentinel, until they named the master), and how
/// many were replaced before it.
#[derive(Clone)]
struct Generation {
    number: u64,
    manager: Option<ConnectionManager>,
    /// Behind Sentinel: the address of the master the manager talks to, and when the
    /// Sentinels were last asked whether it still is.
    /// Shared, as the generation is cloned for every command.
    master: Option<(Arc<str>, tokio::time::Instant)>,
}

/// How often a connection behind Sentinel asks them whether its server is still master.
/// A failover the Sentinels are asked for (`SENTINEL FAILOVER`) leaves the old master
/// answering as master until the Sentinels reconfigure it (seconds), and writes made
/// there meanwhile are lost: each connection notices within this instead.
pub const MASTER_RECHECK: Duration = Duration::from_secs(1);

impl Redis {
    fn new(target: Target) -> Result<Self, RedisError> {
        let manager = match &target {
            Target::Direct(client) => Some(manager(client)?),
            Target::Sentinel(_) => None,
        };
        // Behind Sentinel a failover promotes a replica: a write counts once one has it.
        let replica_acks = u32::from(matches!(target, Target::Sentinel(_)));
        Ok(Self {
            target: Arc::new(target),
            current: Arc::new(Mutex::new(Generation {
                number: 0,
                manager,
                master: None,
            })),
            rechecking: Arc::default(),
            replica_acks,
        })
    }

    /// The same connection, with writes made through [`Redis::eval_acknowledged`] counted
    /// only once `acks` replicas acknowledged them (0: once the master has them). The
    /// default is 1 behind Sentinel, 0 for one server.
    pub fn with_replica_acks(mut self, acks: u32) -> Self {
        self.replica_acks = acks;
        self
    }

    /// Runs `script` with `keys` and `args`, and then, when writes must reach replicas
    /// ([`Redis::with_replica_acks`]), `WAIT` in the same pipeline on the same connection:
    /// the reply is returned only once that many replicas have everything the script
    /// wrote, within [`REPLICA_ACK_TIMEOUT`]; otherwise an error says so, and the write
    /// may or may not survive a failover.
    pub async fn eval_acknowledged<T: ::redis::FromRedisValue>(
        &self,
        script: &::redis::Script,
        keys: &[&str],
        args: &[Vec<u8>],
    ) -> RedisResult<T> {
        let mut connection = self.clone();
        if self.replica_acks == 0 {
            let mut invocation = script.prepare_invoke();
            for key in keys {
                invocation.key(*key);
            }
            for arg in args {
                invocation.arg(arg);
            }
            return invocation.invoke_async(&mut connection).await;
        }
        let mut pipeline = ::redis::pipe();
        pipeline
            .cmd("EVALSHA")
            .arg(script.get_hash())
            .arg(keys.len())
            .arg(keys)
            .arg(args)
            .cmd("WAIT")
            .arg(self.replica_acks)
            .arg(REPLICA_ACK_TIMEOUT.as_millis() as u64);
        let sent = pipeline.query_async::<(T, u32)>(&mut connection).await;
        let (reply, acknowledged) = match sent {
            Err(e) if e.kind() == ErrorKind::Server(::redis::ServerErrorKind::NoScript) => {
                script.prepare_invoke().load_async(&mut connection).await?;
                pipeline.query_async::<(T, u32)>(&mut connection).await?
            }
            sent => sent?,
        };
        if acknowledged < self.replica_acks {
            return Err(RedisError::from((
                ErrorKind::Client,
                UNACKNOWLEDGED,
                format!(
                    "{acknowledged} of {} replicas acknowledged it within {REPLICA_ACK_TIMEOUT:?}; \
                     are the master's replicas connected? (--redis-replica-acks sets how many must)",
                    self.replica_acks
                ),
            )));
        }
        Ok(reply)
    }

    fn current(&self) -> Generation {
        self.current.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `send` on the manager in use; a failure that leaves it stuck replaces it.
    async fn on_current<T, F>(&self, send: impl FnOnce(ConnectionManager) -> F) -> RedisResult<T>
    where
        F: Future<Output = RedisResult<T>>,
    {
        let (number, manager) = match self.current() {
            Generation {
                number,
                manager: Some(manager),
                master,
            } => {
                if let Some((address, checked)) = master
                    && checked.elapsed() >= MASTER_RECHECK
                {
                    self.recheck(number, address);
                }
                (number, manager)
            }
            Generation { manager: None, .. } => self.resolve().await?,
        };
        let result = send(manager).await;
        if let Err(e) = &result {
            self.replace_after(number, e);
        }
        result
    }

    /// The manager of the server the Sentinels call master, and its generation: one
    /// another command made meanwhile if there is one. One command at a time asks the
    /// Sentinels, and a command waits for that, the question and the check of the master
    /// together at most twice the connection timeout.
    async fn resolve(&self) -> RedisResult<(u64, ConnectionManager)> {
        let Target::Sentinel(sentinels) = &*self.target else {
            unreachable!("a direct connection always has its manager")
        };
        let asked = tokio::time::timeout(CONNECT_TIMEOUT * 2, async {
            let mut asking = sentinels.ask().await;
            if let Generation {
                number,
                manager: Some(manager),
                ..
            } = self.current()
            {
                return Ok((number, manager));
            }
            let client = asking.async_get_client().await?;
            let address: Arc<str> = client.get_connection_info().addr().to_string().into();
            let made = manager(&client)?;
            let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
            current.master = Some((address, tokio::time::Instant::now()));
            let manager = current.manager.get_or_insert(made).clone();
            Ok((current.number, manager))
        })
        .await;
        asked.unwrap_or_else(|_| {
            Err(RedisError::from((
                ErrorKind::Io,
                "no Sentinel named the master in time",
            )))
        })
    }

    /// Asks the Sentinels, in a task of its own, whether generation `number`'s server
    /// (at `address`) is still the master, and drops its manager if not: the next
    /// command asks them again. One task at a time, at most every [`MASTER_RECHECK`].
    fn recheck(&self, number: u64, address: Arc<str>) {
        use std::sync::atomic::Ordering;
        if self.rechecking.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            let named = tokio::time::timeout(CONNECT_TIMEOUT * 2, async {
                let Target::Sentinel(sentinels) = &*this.target else {
                    return None;
                };
                let client = sentinels.ask().await.async_get_client().await.ok()?;
                Some(client.get_connection_info().addr().to_string())
            })
            .await
            .ok()
            .flatten();
            let mut current = this.current.lock().unwrap_or_else(|e| e.into_inner());
            if current.number == number {
                match named {
                    Some(named) if *named != *address => {
                        tracing::info!(old = %address, new = %named, "the Sentinels name another Redis master");
                        *current = Generation {
                            number: number + 1,
                            manager: None,
                            master: None,
                        };
                    }
                    // Still master, or the Sentinels did not answer: asked again later
                    // (a master that went away fails its commands meanwhile).
                    _ => current.master = Some((address, tokio::time::Instant::now())),
                }
            }
            drop(current);
            this.rechecking.store(false, Ordering::Release);
        });
    }

    /// Replaces generation `number`'s manager if `error` is one it does not recover from
    /// (behind Sentinel: also one that says the master may have moved) and no other
    /// command has replaced it meanwhile.
    fn replace_after(&self, number: u64, error: &RedisError) {
        let replace = match &*self.target {
            Target::Direct(_) => leaves_manager_stuck(error),
            Target::Sentinel(_) => leaves_manager_stuck(error) || sentinel::master_may_have_moved(error),
        };
        if !replace {
            return;
        }
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.number != number {
            return;
        }
        let manager = match &*self.target {
            Target::Direct(client) => match manager(client) {
                Ok(manager) => Some(manager),
                Err(e) => {
                    tracing::warn!("cannot set up a new Redis connection: {e}");
                    return;
                }
            },
            // The next command asks the Sentinels.
            Target::Sentinel(_) => None,
        };
        tracing::debug!(%error, "Redis connection replaced");
        *current = Generation {
            number: number + 1,
            manager,
            master: None,
        };
    }
}

/// Whether the manager that returned `error` keeps returning it: an I/O error makes it
/// reconnect, and Redis's own answer to a command (an error reply, or a reply of another
/// type than asked for) says nothing about the connection; anything else does.
fn leaves_manager_stuck(error: &RedisError) -> bool {
    !matches!(
        error.kind(),
        ErrorKind::Io | ErrorKind::Server(_) | ErrorKind::UnexpectedReturnType
    )
}

fn manager(client: &::redis::Client) -> Result<ConnectionManager, RedisError> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500));
    ConnectionManager::new_lazy_with_config(client.clone(), config)
}

impl ConnectionLike for Redis {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(self.on_current(move |mut manager| async move { manager.send_packed_command(cmd).await }))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(self.on_current(move |mut manager| async move {
            manager.send_packed_commands(pipeline, offset, count).await
        }))
    }

    fn get_db(&self) -> i64 {
        match &*self.target {
            Target::Sentinel(sentinels) => sentinels.db,
            Target::Direct(client) => client.get_connection_info().redis_settings().db(),
        }
    }
}

/// A connection to `url` (`redis://[user:password@]host:port/db`, `rediss://` for TLS
/// with the public CAs, `redis+sentinel://` behind Sentinel). It connects on first use;
/// when Redis goes away or answers garbage, the failing command returns an error at once
/// and the next one reconnects, so service resumes by itself when Redis is back.
pub fn connect(url: &str) -> Result<Redis, String> {
    connect_trusting(url, None)
}

/// [`connect`], trusting for `rediss://` the CA certificates of the PEM file `ca_file`
/// instead of the public CAs (a managed Redis whose CA is its own, as Memorystore's).
pub fn connect_trusting(url: &str, ca_file: Option<&Path>) -> Result<Redis, String> {
    let target = match url.starts_with(sentinel::SCHEME) {
        true => {
            let parsed = sentinel::parse(url)
                .map_err(|e| format!("{} is not a usable Sentinel URL: {e}", redacted(url)))?;
            Target::Sentinel(
                sentinel::Sentinels::new(&parsed)
                    .map_err(|e| format!("cannot set up the Sentinels of {}: {e}", redacted(url)))?,
            )
        }
        false => Target::Direct(client(url, ca_file)?),
    };
    Redis::new(target).map_err(|e| format!("cannot set up the Redis connection to {}: {e}", redacted(url)))
}

/// The client of the one server `url` names, trusting `ca_file` when given.
fn client(url: &str, ca_file: Option<&Path>) -> Result<::redis::Client, String> {
    let Some(ca_file) = ca_file else {
        return ::redis::Client::open(url).map_err(|e| format!("{} is {}", redacted(url), unusable(e)));
    };
    let pem = std::fs::read(ca_file)
        .map_err(|e| format!("cannot read the Redis CA file {}: {e}", ca_file.display()))?;
    let certificates = ::redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(pem),
    };
    ::redis::Client::build_with_tls(url, certificates).map_err(|e| {
        format!(
            "{} with the CA file {} is {}",
            redacted(url),
            ca_file.display(),
            unusable(e)
        )
    })
}

/// Why a URL is no Redis URL (`redis`'s parse error holds no part of the URL).
fn unusable(error: ::redis::RedisError) -> String {
    format!("not a usable Redis URL: {error} (expected redis://host:port/db, rediss:// for TLS)")
}

/// A Redis URL that parses as one (`redis://[user:password@]host:port/db`, `rediss://`
/// for TLS, `redis+unix:///path/to/redis.sock`, `redis+sentinel://` behind Sentinel), checked as a flag is
/// read so that a mistyped one stops the process at start, before anything connects.
/// Shown (`Display`, `Debug`) with its password redacted ([`redacted`]).
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(String);

impl RedisUrl {
    /// `url` if it parses as a Redis URL; the error says why, without the URL.
    pub fn parse(url: &str) -> Result<Self, String> {
        match url.starts_with(sentinel::SCHEME) {
            true => drop(sentinel::parse(url)?),
            false => drop(::redis::Client::open(url).map_err(unusable)?),
        }
        Ok(Self(url.to_owned()))
    }

    /// The URL as given, password included: for [`connect`], not for messages.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redacted(&self.0))
    }
}

impl std::fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RedisUrl({:?})", redacted(&self.0))
    }
}

/// `url` with any password replaced by `***`, for logs and messages.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The last '@': a password may hold one.
    let shown = match rest.rsplit_once('@') {
        Some((credentials, host)) => {
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    };
    // A socket URL's password is a query parameter (`redis+unix:///s.sock?pass=…`).
    match shown.split_once('?') {
        Some((before, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some(("pass" | "password", _)) => {
                        format!("{}=***", pair.split('=').next().unwrap_or_default())
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{before}?{}", query.join("&"))
        }
        None => shown,
    }
}

/// The client span of one Redis command, after OpenTelemetry's database conventions:
/// `command` (`EVALSHA`, `SET`, ...) is `db.operation.name` and `summary` says what the
/// call does for kubedav (`db.query.summary`, also the span's name).
pub fn span(command: &'static str, summary: &str) -> tracing::Span {
    tracing::info_span!(
        "redis",
        otel.name = %format_args!("{command} {summary}"),
        otel.kind = "client",
        db.system.name = "redis",
        db.operation.name = command,
        db.query.summary = %summary,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            super::redacted("redis://:s3cret@h:6379/0"),
            "redis://:***@h:6379/0"
        );
        assert_eq!(super::redacted("redis://u:s3cret@h/1"), "redis://u:***@h/1");
        assert_eq!(super::redacted("redis://h:6379/0"), "redis://h:6379/0");
        assert_eq!(
            super::redacted("redis+unix:///run/r.sock?db=1&pass=s3cret"),
            "redis+unix:///run/r.sock?db=1&pass=***"
        );
        let error = super::connect("redis://:s3cret@").err().unwrap_or_default();
        assert!(!error.contains("s3cret"), "{error}");
        let error = super::RedisUrl::parse("redis://:s3cret@")
            .err()
            .unwrap_or_default();
        assert!(!error.contains("s3cret"), "{error}");
        let url = super::RedisUrl::parse("redis://u:s3cret@h:6379/0").unwrap();
        assert_eq!(url.as_str(), "redis://u:s3cret@h:6379/0");
        assert_eq!(url.to_string(), "redis://u:***@h:6379/0");
        assert!(!format!("{url:?}").contains("s3cret"));
    }
}
