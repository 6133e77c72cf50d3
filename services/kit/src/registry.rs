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

/// What both scripts begin with: Redis's time in milliseconds (`now`), and the registry's
/// epoch (`epoch`, `<began ms>:<master replication id>`), begun anew (and kept in
/// `KEYS[2]`) when the key is gone (`FLUSHALL`, a master that restarted empty) or
/// another server is master (a failover: a promoted replica takes a new replication id).
/// Registrations made in an earlier epoch may be lost, so what was read of the registry
/// then is not relied on until [`TTL`] into the new one.
const EPOCH: &str = r"local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local info = redis.pcall('INFO', 'replication')
local replid = type(info) == 'string' and string.match(info, 'master_replid:(%w+)') or ''
local epoch = redis.call('GET', KEYS[2])
local began, of = nil, nil
if epoch then began, of = string.match(epoch, '^(%d+):(%w*)$') end
if not began or of ~= replid then
  epoch = now .. ':' .. replid
  redis.call('SET', KEYS[2], epoch)
end
";

/// Adds or renews a member, dropping the lapsed ones; answers whether it was there, and
/// the epoch.
static REGISTER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{EPOCH}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local present = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
if present then return {{1, epoch}} else return {{0, epoch}} end"
    ))
});
/// The epoch, Redis's time, and the members whose registration has not lapsed.
static MEMBERS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{EPOCH}
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
table.insert(members, 1, tostring(now))
table.insert(members, 1, epoch)
return members"
    ))
});

/// The replicas of one service registered in one Redis under one key prefix.
#[derive(Clone)]
pub struct Registry {
    connection: Redis,
    prefix: String,
    service: &'static str,
    /// `<prefix><service>:replicas`.
    key: String,
    /// `<prefix>registry:epoch`, shared by every service's registry.
    epoch_key: String,
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
    /// Counts the registry epochs this gateway has seen (1 after the first read): a new
    /// one may have lost registrations (a failover, `FLUSHALL`).
    pub epoch: u64,
    /// Not relied on before then: [`TTL`] into the epoch, when every replica that may
    /// still answer changes has renewed its registration in it.
    pub settled_from: Instant,
}

impl View {
    /// Whether the view may be relied on at `now`.
    pub fn fresh_at(&self, now: Instant) -> bool {
        self.fresh_until.is_some_and(|until| now < until) && self.settled_from <= now
    }
}

/// One read of the registry: its epoch, how long it has run, and the members.
struct Read {
    epoch: String,
    epoch_age: Duration,
    addresses: Vec<String>,
}

/// When a view of an epoch that had run `age` when Redis answered at `answered` may be
/// relied on: [`TTL`] into the epoch, by then every replica answering changes has renewed
/// its registration in it (a registration lasts [`TTL`]; one renewed in the epoch before
/// has lapsed, and the replica stopped answering changes, if it has not renewed since).
fn settled_from(answered: Instant, age: Duration) -> Instant {
    match TTL.checked_sub(age) {
        Some(left) => answered + left + CLOCK_MARGIN,
        None => answered,
    }
}

fn malformed(what: &'static str) -> ::redis::RedisError {
    ::redis::RedisError::from((
        ::redis::ErrorKind::UnexpectedReturnType,
        "the registry script answered",
        what.to_owned(),
    ))
}

impl Registry {
    /// The key the replicas are registered under (`<prefix><service>:replicas`): what a
    /// gateway following this registry names when it asks a replica for a lease.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The same Redis, for the replicas of another service.
    pub fn of(&self, service: &'static str) -> Self {
        Self::on(self.connection.clone(), &self.prefix, service)
    }

    /// The registry of `service` on `connection`, under `<prefix><service>:replicas`.
    pub fn on(connection: Redis, prefix: &str, service: &'static str) -> Self {
        Self {
            connection,
            prefix: prefix.to_owned(),
            service,
            key: format!("{prefix}{service}:replicas"),
            epoch_key: format!("{prefix}registry:epoch"),
        }
    }

    /// Adds or renews `address`: whether it was there, and the epoch. Behind Sentinel
    /// (or with `--redis-replica-acks`) the renewal counts only once a replica has it, so
    /// that a failover keeps it and a master cut off from its replicas renews nothing.
    async fn register(&self, address: &str) -> Result<(bool, String), ::redis::RedisError> {
        let (present, epoch): (i64, String) = self
            .connection
            .eval_acknowledged(
                &REGISTER,
                &[&self.key, &self.epoch_key],
                &[
                    address.as_bytes().to_vec(),
                    TTL.as_millis().to_string().into_bytes(),
                ],
            )
            .await?;
        Ok((present == 1, epoch))
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
        Ok(self.read().await?.addresses)
    }

    async fn read(&self) -> Result<Read, ::redis::RedisError> {
        let mut connection = self.connection.clone();
        let reply: Vec<String> = MEMBERS
            .key(&self.key)
            .key(&self.epoch_key)
            .invoke_async(&mut connection)
            .await?;
        let mut reply = reply.into_iter();
        let (Some(epoch), Some(now)) = (reply.next(), reply.next()) else {
            return Err(malformed("no epoch and time"));
        };
        let began = epoch.split(':').next().and_then(|ms| ms.parse::<u64>().ok());
        let (Some(began), Ok(now)) = (began, now.parse::<u64>()) else {
            return Err(malformed("an epoch or time that is not a number"));
        };
        let mut addresses: Vec<String> = reply.collect();
        addresses.sort_unstable();
        Ok(Read {
            epoch,
            epoch_age: Duration::from_millis(now.saturating_sub(began)),
            addresses,
        })
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
            let mut epoch = String::new();
            loop {
                let asked = Instant::now();
                let renewed = tokio::select! {
                    renewed = registry.register(&address) => renewed,
                    _ = publish.closed() => return,
                };
                match renewed {
                    Ok((present, now_epoch)) => {
                        let answered = Instant::now();
                        let current = *publish.borrow();
                        // In a new epoch gateways may have read the registry without this
                        // replica: it begins anew even where its registration survived.
                        let new_epoch = now_epoch != epoch;
                        if new_epoch && current.generation != 0 {
                            tracing::info!(
                                "the {} registry began a new epoch (a Redis failover, or its data lost)",
                                registry.service
                            );
                        }
                        epoch = now_epoch;
                        let anew =
                            current.generation == 0 || !present || new_epoch || asked >= current.open_until;
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
            epoch: 0,
            settled_from: Instant::now(),
        });
        let registry = self.clone();
        tokio::spawn(async move {
            let mut told_failure = false;
            let mut epoch = String::new();
            loop {
                let asked = Instant::now();
                let read = tokio::select! {
                    read = registry.read() => read,
                    _ = publish.closed() => return,
                };
                match read {
                    Ok(read) => {
                        told_failure = false;
                        let answered = Instant::now();
                        let new_epoch = read.epoch != epoch;
                        if new_epoch {
                            epoch = read.epoch;
                        }
                        publish.send_if_modified(|view| {
                            let changed = view.addresses != read.addresses;
                            if changed {
                                tracing::info!(replicas = ?read.addresses, "{} replicas", registry.service);
                            }
                            if new_epoch {
                                view.epoch += 1;
                                view.settled_from = settled_from(answered, read.epoch_age);
                                if view.epoch > 1 {
                                    tracing::info!(
                                        "the {} registry began a new epoch (a Redis failover, or its data \
                                         lost): nothing kept is served until {:?} from now",
                                        registry.service,
                                        view.settled_from.saturating_duration_since(answered)
                                    );
                                }
                            }
                            view.addresses = read.addresses;
                            view.fresh_until = Some(asked + VIEW_FRESHNESS);
                            // Freshness alone is read where it is used: wake the
                            // followers only for a change of members or epoch.
                            changed || new_epoch
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
