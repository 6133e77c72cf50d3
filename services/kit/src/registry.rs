//! The registry of service replicas in Redis: how the replicas of fileio (serving the
//! same storage) and of the locks service (sharing one lock store), and the gateways in
//! front of them, know of each other.
//!
//! * A replica [`Registry::keep_registered`] its address (a sorted set member whose score
//!   is its expiry by Redis' clock, renewed every [`RENEW`], lapsing after [`TTL`]) and
//!   learns from the returned [`Standing`] when it may answer changes: only after every
//!   gateway's view of the registry has been read again since it (re)registered, and
//!   only while its registration is known to be current.
//! * A gateway [`Registry::follow`]s the set of replicas (read every [`POLL`], each read
//!   trusted for [`VIEW_FRESHNESS`]), routes calls to them and holds a lease from each.
//!
//! Together: a gateway that keeps copies holds a lease from every replica that may
//! change anything, because a replica that its view does not show yet either answers no
//! change yet or is seen by a view read since. docs/architecture.md has the argument.

use crate::redis::Redis;
use ::redis::Script;
use std::future::Future;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// How long a registration lasts in Redis after its last renewal.
pub const TTL: Duration = Duration::from_secs(3);
/// How often a replica renews its registration.
pub const RENEW: Duration = Duration::from_secs(1);
/// How long a gateway trusts what it read of the registry, from when it asked.
pub const VIEW_FRESHNESS: Duration = Duration::from_secs(1);
/// How often a gateway reads the registry.
pub const POLL: Duration = Duration::from_millis(250);
/// The allowance for two clocks running at slightly different rates.
const CLOCK_MARGIN: Duration = Duration::from_millis(100);

/// Adds or renews a member, dropping the lapsed ones; answers whether it was there.
static REGISTER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local present = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
if present then return 1 else return 0 end",
    )
});
/// The members whose registration has not lapsed.
static MEMBERS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')",
    )
});

/// The replicas of one service registered in one Redis under one key prefix.
#[derive(Clone)]
pub struct Registry {
    connection: Redis,
    prefix: String,
    service: &'static str,
    /// `<prefix><service>:replicas`.
    key: String,
}

/// A replica's standing: when it may answer changes.
#[derive(Clone, Copy, Debug)]
pub struct Standing {
    /// Counts registrations begun anew (the first, and each after a lapse): a change
    /// that spans two has to wait for the second's grace before it is answered.
    pub generation: u64,
    /// Changes are answered from then on: every gateway view read before the
    /// registration has gone stale by then.
    pub open_from: Instant,
    /// ... until then, when the registration may have lapsed in Redis unless renewed.
    pub open_until: Instant,
}

impl Standing {
    /// Whether changes may be answered at `now`.
    pub fn open_at(&self, now: Instant) -> bool {
        self.open_from <= now && now < self.open_until
    }
}

/// A replica's registration, kept by a task until [`Registration::leave`].
pub struct Registration {
    registry: Registry,
    standing: watch::Receiver<Standing>,
    address: Arc<OnceLock<String>>,
    task: tokio::task::AbortHandle,
}

impl Registration {
    /// The replica's standing, as it changes.
    pub fn standing(&self) -> watch::Receiver<Standing> {
        self.standing.clone()
    }

    /// Stops renewing and removes the registration (a replica that has stopped answering
    /// calls), so gateways stop waiting for a lease from it.
    pub async fn leave(self) {
        self.task.abort();
        if let Some(address) = self.address.get() {
            self.registry.deregister(address).await;
        }
    }
}

/// What a gateway read of the registry.
#[derive(Clone, Debug)]
pub struct View {
    /// The registered replicas' addresses (`host:port`), sorted.
    pub addresses: Vec<String>,
    /// Until then the addresses may be relied on; `None` before the first read.
    pub fresh_until: Option<Instant>,
}

impl View {
    /// Whether the view may be relied on at `now`.
    pub fn fresh_at(&self, now: Instant) -> bool {
        self.fresh_until.is_some_and(|until| now < until)
    }
}

impl Registry {
    /// The registry at `url` (a Redis URL; TLS trusting `ca_file` when given), under
    /// `<prefix><service>:replicas`.
    pub fn connect(
        url: &str,
        ca_file: Option<&std::path::Path>,
        prefix: &str,
        service: &'static str,
    ) -> Result<Self, String> {
        Ok(Self::on(
            crate::redis::connect_trusting(url, ca_file)?,
            prefix,
            service,
        ))
    }

    /// The same Redis, for the replicas of another service.
    pub fn of(&self, service: &'static str) -> Self {
        Self::on(self.connection.clone(), &self.prefix, service)
    }

    fn on(connection: Redis, prefix: &str, service: &'static str) -> Self {
        Self {
            connection,
            prefix: prefix.to_owned(),
            service,
            key: format!("{prefix}{service}:replicas"),
        }
    }

    async fn register(&self, address: &str) -> Result<bool, ::redis::RedisError> {
        let mut connection = self.connection.clone();
        let present: i64 = REGISTER
            .key(&self.key)
            .arg(address)
            .arg(TTL.as_millis() as u64)
            .invoke_async(&mut connection)
            .await?;
        Ok(present == 1)
    }

    /// Removes `address` at once (a replica stopping), so gateways stop waiting for it.
    pub async fn deregister(&self, address: &str) {
        let mut connection = self.connection.clone();
        let removed: Result<i64, _> = ::redis::cmd("ZREM")
            .arg(&self.key)
            .arg(address)
            .query_async(&mut connection)
            .await;
        if let Err(e) = removed {
            tracing::warn!(
                "cannot remove {address} from the {} registry: {e}; it lapses in {TTL:?}",
                self.service
            );
        }
    }

    /// The addresses registered now.
    pub async fn members(&self) -> Result<Vec<String>, ::redis::RedisError> {
        let mut connection = self.connection.clone();
        let mut members: Vec<String> = MEMBERS.key(&self.key).invoke_async(&mut connection).await?;
        members.sort_unstable();
        Ok(members)
    }

    /// Registers the address `address` gives (`host:port`; `None`: not at all) and keeps
    /// it registered until [`Registration::leave`], publishing the replica's [`Standing`].
    /// A registration that begins anew (the first, one found gone from Redis, or one
    /// renewed too late) opens only [`VIEW_FRESHNESS`] after it was made.
    pub fn keep_registered(
        &self,
        address: impl Future<Output = Option<String>> + Send + 'static,
    ) -> Registration {
        let now = Instant::now();
        let (publish, standing) = watch::channel(Standing {
            generation: 0,
            open_from: now,
            open_until: now,
        });
        let registry = self.clone();
        let registered = Arc::new(OnceLock::new());
        let known = registered.clone();
        let task = tokio::spawn(async move {
            let Some(address) = address.await else { return };
            let _ = known.set(address.clone());
            let mut told_failure = false;
            loop {
                let asked = Instant::now();
                let renewed = tokio::select! {
                    renewed = registry.register(&address) => renewed,
                    _ = publish.closed() => return,
                };
                match renewed {
                    Ok(present) => {
                        let answered = Instant::now();
                        let current = *publish.borrow();
                        let anew = current.generation == 0 || !present || asked >= current.open_until;
                        let next = Standing {
                            generation: current.generation + u64::from(anew),
                            open_from: if anew {
                                answered + VIEW_FRESHNESS + CLOCK_MARGIN
                            } else {
                                current.open_from
                            },
                            open_until: asked + TTL - CLOCK_MARGIN,
                        };
                        if anew {
                            tracing::info!(
                                "registered as {} replica {address}; answering changes in {:?}",
                                registry.service,
                                next.open_from - answered
                            );
                        }
                        if told_failure {
                            told_failure = false;
                            tracing::info!("the {} registry answers again", registry.service);
                        }
                        publish.send_replace(next);
                    }
                    Err(e) if !told_failure => {
                        told_failure = true;
                        tracing::warn!(
                            "cannot renew this replica's registration ({e}): changes wait, then get 503, \
                             once it lapses; is Redis reachable?"
                        );
                    }
                    Err(e) => tracing::debug!(error = %e, kind = ?e.kind(), "registration not renewed"),
                }
                tokio::time::sleep(RENEW).await;
            }
        });
        Registration {
            registry: self.clone(),
            standing,
            address: registered,
            task: task.abort_handle(),
        }
    }

    /// Reads the registry every [`POLL`] (a task, until the receiver and its clones are
    /// dropped), publishing what it read.
    pub fn follow(&self) -> watch::Receiver<View> {
        let (publish, view) = watch::channel(View {
            addresses: Vec::new(),
            fresh_until: None,
        });
        let registry = self.clone();
        tokio::spawn(async move {
            let mut told_failure = false;
            loop {
                let asked = Instant::now();
                let read = tokio::select! {
                    read = registry.members() => read,
                    _ = publish.closed() => return,
                };
                match read {
                    Ok(addresses) => {
                        told_failure = false;
                        publish.send_if_modified(|view| {
                            let changed = view.addresses != addresses;
                            if changed {
                                tracing::info!(replicas = ?addresses, "{} replicas", registry.service);
                            }
                            view.addresses = addresses;
                            view.fresh_until = Some(asked + VIEW_FRESHNESS);
                            // Freshness alone is read where it is used: wake the
                            // followers only for a change of members.
                            changed
                        });
                    }
                    Err(e) if !told_failure => {
                        told_failure = true;
                        tracing::warn!(
                            "cannot read the {} registry ({e}): the gateway keeps nothing of it until it can",
                            registry.service
                        );
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(POLL).await;
            }
        });
        view
    }
}
