//! Wiring each target: which cores or clients, which servers.

mod credentials;
mod error;
mod policy;
mod registered;
mod storage;

pub(crate) use error::RunError;

use crate::cli::{Cli, LockStore, LogFormat, Target};
use kubedav_api::auth::Auth;
use kubedav_api::fileio::FileIo;
use kubedav_api::fileio::MountedVolume;
use kubedav_api::locks::Locks;
use kubedav_api::markdown::Markdown;
use kubedav_auth::AuthCore;
use kubedav_fileio::direct::VolumeReader;
use kubedav_fileio::incoming::IncomingFolder;
use kubedav_gateway::cache::{CacheConfig, CachedFileIo, CachedLocks};
use kubedav_gateway::direct::DirectIo;
use kubedav_gateway::{Gateway, Ports};
use kubedav_kit::admin::ReadinessCheck;
use kubedav_kit::shutdown::Shutdown;
use kubedav_kit::{admin, listen, telemetry};
use kubedav_lease::{Leases, OpenAt, ReplicaLeases, View, Watch};
use kubedav_locks::{MemoryLocks, RedisLocks};
use kubedav_remote::client::{
    RemoteAuth, RemoteFileIo, RemoteKeep, RemoteLocks, RemoteMarkdown, RemoteRecords, RemoteUploads,
};
use kubedav_remote::observe::ObservedChannel;
use kubedav_remote::serve as grpc;
use kubedav_remote::server::{
    AuthGrpc, FileIoGrpc, KeepGrpc, LocksGrpc, MarkdownGrpc, RecordsGrpc, UploadsGrpc,
};
use registered::{registry, serve_registered};

use kubedav_zerocopy::CopyStore;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tonic::transport::Endpoint;

/// Runs the target until SIGTERM or SIGINT.
pub(crate) async fn run(cli: Cli) -> Result<(), RunError> {
    let format = match cli.telemetry.log_format {
        LogFormat::Text => telemetry::LogFormat::Text,
        LogFormat::Json => telemetry::LogFormat::Json,
    };
    let _telemetry = telemetry::init(
        cli.target.name(),
        format,
        cli.telemetry.access_log,
        cli.telemetry.audit_log,
    )
    .map_err(RunError::Telemetry)?;
    let shutdown = Shutdown::install();
    tracing::info!(
        target: "kubedav",
        "kubedav {} ({}) starting target {}",
        env!("CARGO_PKG_VERSION"),
        env!("KUBEDAV_COMMIT"),
        cli.target.name()
    );
    kubedav_kit::register_build_info(env!("CARGO_PKG_VERSION"), env!("KUBEDAV_COMMIT"));
    match cli.target {
        Target::All => run_gateway(&cli, local_ports(&cli).await?, shutdown).await,
        Target::Gateway => run_gateway(&cli, remote_ports(&cli)?, shutdown).await,
        Target::Locks => {
            let (locks, ready) = lock_store(&cli)?;
            let registry = registry(&cli, "locks")?;
            if registry.is_some() && cli.locks.lock_store.is_memory() {
                return Err(RunError::RegistryWithMemoryLocks);
            }
            let mut service = LocksGrpc::new(locks);
            // Leases on the gateways' copies of lock discovery: while this service is the
            // sole keeper of its locks, or when every replica sharing the Redis store
            // registers (each then announces its changes to every gateway).
            if cli.locks.lock_store.is_memory() || registry.is_some() {
                service = service.with_leases();
            }
            if let Some(leases) = service.leases() {
                close_on_shutdown(leases, &shutdown);
            }
            match (registry, service.leases()) {
                (Some(registry), Some(leases)) => {
                    let service = service.into_service();
                    serve_registered(
                        &cli,
                        registry,
                        leases,
                        service,
                        grpc::Beside::new(),
                        ready,
                        shutdown,
                    )
                    .await
                }
                _ => serve(&cli, service.into_service(), ready, shutdown).await,
            }
        }
        Target::Fileio => {
            let storage::Storage {
                fileio,
                records,
                keep,
                uploads,
                ready,
                ..
            } = storage::open_storage(&cli).await?;
            let service = FileIoGrpc::new(fileio);
            let leases = service.leases();
            close_on_shutdown(leases.clone(), &shutdown);
            // The records kept with the data are served beside the files, and so are the
            // trash and versions (their restores announced on the files' leases).
            let keep = keep.map(|keep| {
                KeepGrpc::new(Arc::new(kubedav_lease::LeasedKeep::new(keep, leases.clone()))).into_service()
            });
            let beside = grpc::Beside::new()
                .with(RecordsGrpc::new(records).into_service())
                .with_some(keep)
                .with(UploadsGrpc::new(uploads).into_service());
            match registry(&cli, "fileio")? {
                Some(registry) => {
                    let service = service.into_service();
                    serve_registered(&cli, registry, leases, service, beside, ready, shutdown).await
                }
                None => {
                    grpc::serve_target_with(cli.listen(), service.into_service(), beside, ready, shutdown)
                        .await
                        .map_err(RunError::Serve)
                }
            }
        }
        Target::Auth => {
            if cli.auth.users_file.is_none() && !cli.oidc.enabled() {
                return Err(RunError::AuthWithoutUsers);
            }
            let core = auth_core(&cli)?;
            if cli.credentials.secret_key.is_some() {
                // App passwords are kept with the data, which fileio serves.
                let token = cli.remote.grpc_token.as_deref();
                let timeout = Duration::from_secs(cli.remote.rpc_timeout_seconds.max(1));
                let records = RemoteRecords::new(channel("fileio", cli.remote.fileio_url.as_str(), token)?)
                    .with_call_timeout(timeout);
                credentials::keep_app_passwords(&cli, &core, Arc::new(records), false)?;
            } else {
                credentials::without_key();
            }
            core.start_identity_provider();
            let ready = identity_provider_note(core.clone());
            let service = AuthGrpc::new(Arc::new(core)).into_service();
            serve(&cli, service, ready, shutdown).await
        }
        Target::Markdown => {
            let service = MarkdownGrpc::new(Arc::new(cli.markdown.core())).into_service();
            serve(&cli, service, grpc::always_ready(), shutdown).await
        }
    }
}

/// Serves a service target on its addresses (`--grpc-listen`, `--admin-listen`).
async fn serve<S: grpc::GrpcService>(
    cli: &Cli,
    service: S,
    ready: ReadinessCheck,
    shutdown: Shutdown,
) -> Result<(), RunError> {
    grpc::serve_target(cli.listen(), service, ready, shutdown)
        .await
        .map_err(RunError::Serve)
}

/// The ports of `--target=all`: every core in this process.
async fn local_ports(cli: &Cli) -> Result<Ports, RunError> {
    if cli.replicas.registry.get().is_some() {
        return Err(RunError::RegistryInOneProcess);
    }
    let storage::Storage {
        mut fileio,
        records,
        mut keep,
        uploads,
        ..
    } = storage::open_storage(cli).await?;
    let records_for_gateway = records.clone();
    // The gateway keeps what fileio told it, under an in-process lease, as it does from a
    // remote fileio: a kept answer costs no statx, no read and no listing, which is what
    // makes a hot GET or PROPFIND cheaper than nginx's (docs/benchmarks.md, issue 30). A
    // change made behind kubedav's back shows within --gateway-cache-freshness-ms, as in
    // microservices mode. Not when locks are shared through Redis: then other processes
    // share the volume or the bucket, and they announce nothing to this one.
    let keeps = cli.cache.gateway_cache_mib > 0;
    let shared = !cli.locks.lock_store.is_memory();
    if keeps && shared {
        tracing::info!(target: "kubedav", "locks shared through Redis: other processes may change the files, so the gateway keeps nothing of them");
    }
    if keeps && !shared {
        kubedav_gateway::cache::register_metrics();
        let leased = kubedav_lease::LeasedFileIo::new(fileio);
        keep = keep.map(|keep| {
            Arc::new(kubedav_lease::LeasedKeep::new(keep, leased.leases()))
                as Arc<dyn kubedav_api::keep::Keep>
        });
        // Files of up to 1 MiB are kept as in microservices mode, those over 64 KiB once
        // asked for twice: sent from a kept copy, one cost less CPU than opened, checked
        // and sent from the volume (docs/benchmarks.md, "2026-11-26 (5)").
        fileio = Arc::new(CachedFileIo::new(
            leased,
            cache_config(cli, kubedav_gateway::cache::MAX_FILE_BYTES),
        ));
    }
    let (locks, _) = lock_store(cli)?;
    let markdown = Some(Arc::new(cli.markdown.core()) as Arc<dyn Markdown>);
    let auth = if cli.auth.users_file.is_some() || cli.oidc.enabled() {
        let core = auth_core(cli)?;
        credentials::keep_app_passwords(cli, &core, records, true)?;
        core.start_identity_provider();
        // /readyz says when the provider cannot be reached; it never fails for that.
        let _ = identity_provider_note(core.clone());
        Some(Arc::new(core) as Arc<dyn Auth>)
    } else {
        None
    };
    Ok(Ports {
        fileio,
        locks,
        auth,
        markdown,
        records: Some(records_for_gateway),
        keep,
        uploads: Some(uploads),
        readiness: None,
    })
}

/// The ports of `--target=gateway`: gRPC clients of the services, with the gateway's
/// cache of their answers unless `--gateway-cache-mib 0`.
fn remote_ports(cli: &Cli) -> Result<Ports, RunError> {
    kubedav_remote::observe::register_client_metrics();
    // The deadline of every call to a service (--rpc-timeout-seconds), held by each client.
    let call_timeout = Duration::from_secs(cli.remote.rpc_timeout_seconds.max(1));
    let token = cli.remote.grpc_token.as_deref();
    // With --registry: the replicas of fileio and locks, where calls go and whose
    // leases the caches hold (which of them answer is known once the caches hold them).
    let registry = registry(cli, "fileio")?;
    let fileio_replicas = registry.as_ref().map(|r| r.follow());
    let locks_replicas = registry.as_ref().map(|r| r.of("locks").follow());
    let fileio_leases: Arc<OnceLock<Arc<ReplicaLeases>>> = Arc::default();
    let locks_leases: Arc<OnceLock<Arc<ReplicaLeases>>> = Arc::default();
    let fileio = RemoteFileIo::new(service_channel(
        "fileio",
        cli.remote.fileio_url.as_str(),
        &fileio_replicas,
        &fileio_leases,
        token,
    )?)
    .with_call_timeout(call_timeout);
    // /readyz asks fileio itself: a kept answer would say ready after fileio went away.
    let readiness: Arc<dyn FileIo> = Arc::new(fileio.clone());
    // With --fileio-volume, large files no gateway keeps are sent from the mount, once
    // fileio (through what the gateway keeps of its answers) names the version.
    let mount = match &cli.remote.fileio_volume {
        None => None,
        Some(root) => Some((
            Arc::new(VolumeReader::open(root).map_err(RunError::FileioVolume)?) as Arc<dyn MountedVolume>,
            root.clone(),
        )),
    };
    let mut fileio = DirectIo::new(fileio, mount);
    // With --fileio-incoming, large bodies are written into fileio's incoming area here,
    // and fileio lands them.
    if let Some(root) = &cli.remote.fileio_incoming {
        // Synced by fileio at the landing with --durability fsync (each process reads it).
        let writeback = cli.fileio.durability == crate::cli::Durability::Fsync;
        let area = IncomingFolder::open(root, writeback).map_err(RunError::FileioIncoming)?;
        fileio = fileio.with_incoming(Arc::new(area));
        tracing::info!(target: "kubedav", "large bodies are written into fileio's incoming area at {}", root.display());
    }
    let versions = fileio.versions();
    let locks = RemoteLocks::new(service_channel(
        "locks",
        cli.remote.locks_url.as_str(),
        &locks_replicas,
        &locks_leases,
        token,
    )?)
    .with_call_timeout(call_timeout);
    if let Some(view) = &locks_replicas {
        require_shared_locks(locks.clone(), view.clone());
    }
    // What the gateway keeps of fileio's and the locks service's answers, under
    // their leases: off with --gateway-cache-mib 0.
    let (fileio, locks): (Arc<dyn FileIo>, Arc<dyn Locks>) = if cli.cache.gateway_cache_mib == 0 {
        (Arc::new(fileio), Arc::new(locks))
    } else {
        kubedav_gateway::cache::register_metrics();
        let fileio = match registry.as_ref().zip(fileio_replicas) {
            None => CachedFileIo::new(fileio, cache_config(cli, kubedav_gateway::cache::MAX_FILE_BYTES)),
            Some((registry, view)) => {
                let followed = registry.key().to_owned();
                let open = replica_watch("fileio", token, move |channel, requests| {
                    RemoteFileIo::new(channel).watch_following(&followed, requests)
                });
                let cached = CachedFileIo::over_replicas(
                    Arc::new(fileio),
                    view,
                    open,
                    cache_config(cli, kubedav_gateway::cache::MAX_FILE_BYTES),
                );
                if let Some(leases) = cached.replica_leases() {
                    let _ = fileio_leases.set(leases);
                }
                cached
            }
        };
        let locks = match registry.as_ref().zip(locks_replicas) {
            None => CachedLocks::new(locks),
            Some((registry, view)) => {
                let followed = registry.of("locks").key().to_owned();
                let open = replica_watch("locks", token, move |channel, requests| {
                    RemoteLocks::new(channel).watch_following(&followed, requests)
                });
                let cached = CachedLocks::over_replicas(Arc::new(locks), view, open);
                if let Some(leases) = cached.replica_leases() {
                    let _ = locks_leases.set(leases);
                }
                cached
            }
        };
        // Large GETs sent from the mount ask this cache which version is current.
        let fileio = Arc::new(fileio);
        versions.set(&fileio);
        (fileio, Arc::new(locks))
    };
    let auth = match cli.remote.auth_url.get() {
        None => None,
        Some(url) => Some(Arc::new(
            RemoteAuth::new(channel("auth", url.as_str(), token)?).with_call_timeout(call_timeout),
        ) as Arc<dyn Auth>),
    };
    let markdown = match cli.remote.markdown_url.get() {
        None => None,
        Some(url) => Some(Arc::new(
            RemoteMarkdown::new(channel("markdown", url.as_str(), token)?).with_call_timeout(call_timeout),
        ) as Arc<dyn Markdown>),
    };
    // The records the gateway keeps shares in, and the trash and versions (where fileio
    // keeps them), which fileio serves beside the files: one channel for both.
    let beside_files = channel("fileio", cli.remote.fileio_url.as_str(), token)?;
    let records = RemoteRecords::new(beside_files.clone()).with_call_timeout(call_timeout);
    let keep = RemoteKeep::new(beside_files.clone()).with_call_timeout(call_timeout);
    // Any fileio replica serves any upload (their state is with the data).
    let uploads = RemoteUploads::new(beside_files).with_call_timeout(call_timeout);
    Ok(Ports {
        fileio,
        locks,
        auth,
        markdown,
        records: Some(Arc::new(records)),
        keep: Some(Arc::new(keep)),
        uploads: Some(Arc::new(uploads)),
        readiness: Some(readiness),
    })
}

/// The channel to a service: its registered replicas with `--registry` (skipping those
/// whose lease has lapsed, once `leases` knows them), or else the pods its URL resolves to.
fn service_channel(
    service: &'static str,
    url: &str,
    replicas: &Option<tokio::sync::watch::Receiver<View>>,
    leases: &Arc<OnceLock<Arc<ReplicaLeases>>>,
    token: Option<&str>,
) -> Result<ObservedChannel, RunError> {
    let Some(view) = replicas else {
        return channel(service, url, token);
    };
    let known = leases.clone();
    let answering = Arc::new(move |address: &str| known.get().is_none_or(|l| l.answering(address)));
    let backends =
        kubedav_remote::balance::registered(url, view.clone(), move |url| endpoint(service, url), answering)
            .map_err(|reason| RunError::ServiceUrl { service, reason })?;
    ObservedChannel::balanced(backends, url)
        .with_token(token)
        .map_err(RunError::GrpcToken)
}

/// Opens a lease stream to the replica of `service` at an address, through `watch` on a
/// channel to it alone.
fn replica_watch(
    service: &'static str,
    token: Option<&str>,
    watch: impl Fn(
        ObservedChannel,
        kubedav_lease::Requests,
    ) -> futures_util::future::BoxFuture<
        'static,
        Result<kubedav_api::BoxStream<kubedav_api::lease::WatchEvent>, tonic::Status>,
    > + Send
    + Sync
    + 'static,
) -> OpenAt {
    let token = token.map(str::to_owned);
    Arc::new(move |address: &str, requests| {
        let url = format!("http://{address}");
        let channel = endpoint(service, &url).and_then(|made| {
            ObservedChannel::new(kubedav_remote::balance::lazy(&made), &url).with_token(token.as_deref())
        });
        match channel {
            Ok(channel) => watch(channel, requests),
            Err(e) => Box::pin(async move { Err(tonic::Status::internal(e)) }),
        }
    })
}

/// Exits the process if the locks service keeps its locks in memory while fileio has
/// replicas: one locks process would be the single point of failure that replicas are
/// meant to remove (the chart runs locks replicas on Redis). A locks service offers
/// leases on memory, or on Redis when its replicas register; one on Redis that does not
/// register offers none. Checked in the background until the locks service answers.
fn require_shared_locks(locks: RemoteLocks, registered: tokio::sync::watch::Receiver<View>) {
    tokio::spawn(async move {
        loop {
            let (_requests, stream) = tokio::sync::mpsc::unbounded_channel();
            match locks.watch(kubedav_lease::Requests::from(stream)).await {
                Ok(_) => {
                    // Offered to this probe, which names no registry: registered replicas
                    // refuse it (FAILED_PRECONDITION, below), so this is the memory
                    // store, unless the registry shows replicas by now or soon.
                    let deadline = tokio::time::Instant::now() + 2 * kubedav_kit::registry::TTL;
                    while tokio::time::Instant::now() < deadline {
                        if !registered.borrow().addresses.is_empty() {
                            return;
                        }
                        tokio::time::sleep(kubedav_kit::registry::POLL).await;
                    }
                    let message = "--registry: fileio has replicas, but the locks service keeps its \
                                   locks in memory: run it with --lock-store redis://... and --registry \
                                   (the chart does, with Redis)";
                    tracing::error!(target: "kubedav", "{message}");
                    eprintln!("kubedav: {message}");
                    std::process::exit(1);
                }
                Err(status) if status.code() == tonic::Code::FailedPrecondition => return,
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    });
}

/// What `--gateway-cache-mib`, `--gateway-cache-freshness-ms` and `--gateway-cache-dir`
/// say a gateway keeps, of files up to `max_file_bytes`.
fn cache_config(cli: &Cli, max_file_bytes: u64) -> CacheConfig {
    let copies = if max_file_bytes > kubedav_gateway::SENDFILE_ABOVE {
        copy_store(
            cli.cache
                .gateway_cache_dir
                .clone()
                .unwrap_or_else(std::env::temp_dir),
        )
    } else {
        CopyStore::Memory
    };
    CacheConfig {
        capacity_bytes: cli.cache.gateway_cache_mib << 20,
        freshness: Duration::from_millis(cli.cache.gateway_cache_freshness_ms),
        max_file_bytes,
        copies,
    }
}

/// Where kept copies of files over 64 KiB go: unnamed files in `dir`, or memory where
/// that cannot be; said once at start.
fn copy_store(dir: std::path::PathBuf) -> CopyStore {
    let (store, why_memory) = CopyStore::in_directory(&dir);
    match why_memory {
        None => {
            tracing::info!(target: "kubedav", "the gateway keeps copies of files over 64 KiB as unnamed files in {}", dir.display())
        }
        Some(why) => {
            tracing::info!(target: "kubedav", "the gateway keeps copies of files over 64 KiB in memory: {why} (--gateway-cache-dir names a directory on a disk filesystem, where sendfile sends them for less CPU)")
        }
    }
    store
}

/// The auth core: the users file (watched for changes) and the identity provider (its
/// keys fetched in the background), sharing verifications through Redis when configured.
fn auth_core(cli: &Cli) -> Result<AuthCore, RunError> {
    let config = cli.auth_config().map_err(RunError::IdentityProvider)?;
    let shared = if let Some(url) = cli.auth.auth_cache_redis.get() {
        let secret = cli
            .auth
            .auth_cache_secret
            .as_deref()
            .ok_or(RunError::AuthCacheWithoutSecret)?;
        let connection = cli.replicas.redis(url).map_err(RunError::AuthCacheRedis)?;
        let cache = kubedav_auth::shared::SharedCache::new(
            connection,
            secret.as_bytes(),
            &cli.replicas.redis_prefix,
            config.cache_ttl,
        )
        .map_err(RunError::AuthCacheSecret)?;
        tracing::info!(target: "kubedav", "auth cache shared through Redis at {url}");
        Some(cache)
    } else {
        None
    };
    // The core's errors about the provider name their --oidc flag; the others are the
    // users file's.
    let core = AuthCore::with_shared_cache(config, shared).map_err(|e| {
        if e.starts_with("--oidc") {
            RunError::IdentityProvider(e)
        } else {
            RunError::UsersFile(e)
        }
    })?;
    core.watch(Duration::from_secs(cli.auth.users_reload_seconds.max(1)));
    Ok(core)
}

/// The auth target's readiness: always ready (passwords and app passwords work without
/// the identity provider), with the provider's trouble, if any, noted on `/readyz`.
fn identity_provider_note(core: AuthCore) -> ReadinessCheck {
    kubedav_kit::admin::note_while(
        "identity provider",
        Arc::new(move || core.identity_provider_trouble()),
    );
    grpc::always_ready()
}

/// Ends the lease streams when the service begins to stop: they never end by themselves,
/// and the gRPC server waits for every open call before it exits.
fn close_on_shutdown(leases: Arc<Leases>, shutdown: &Shutdown) {
    let requested = shutdown.clone().requested();
    tokio::spawn(async move {
        requested.await;
        leases.close();
    });
}

/// The lock store `--lock-store` names, and the readiness check of the locks target.
fn lock_store(cli: &Cli) -> Result<(Arc<dyn Locks>, ReadinessCheck), RunError> {
    let locks = &cli.locks;
    let max_timeout = Duration::from_secs(locks.lock_max_timeout_seconds);
    let url = match &locks.lock_store {
        LockStore::Memory => {
            let store =
                MemoryLocks::new(max_timeout).with_max_locks_per_principal(locks.max_locks_per_principal);
            return Ok((Arc::new(store), grpc::always_ready()));
        }
        LockStore::Redis(url) => url,
    };
    let prefix = &cli.replicas.redis_prefix;
    let connection = cli.replicas.redis(url).map_err(RunError::LockStore)?;
    let store = Arc::new(
        RedisLocks::new(connection, prefix, max_timeout)
            .with_max_locks_per_principal(locks.max_locks_per_principal),
    );
    tracing::info!(target: "kubedav", "locks kept in Redis at {url} under {prefix}locks:");
    let checked = store.clone();
    let ready: ReadinessCheck = Arc::new(move || {
        let store = checked.clone();
        Box::pin(async move { store.ready().await })
    });
    Ok((store, ready))
}

/// A channel to a service: balanced over every pod when the URL names a headless
/// Service, reconnecting with backoff (see `kubedav_remote::balance`).
fn channel(service: &'static str, url: &str, token: Option<&str>) -> Result<ObservedChannel, RunError> {
    let backends = kubedav_remote::balance::channel(url, move |url| endpoint(service, url))
        .map_err(|reason| RunError::ServiceUrl { service, reason })?;
    ObservedChannel::balanced(backends, url)
        .with_token(token)
        .map_err(RunError::GrpcToken)
}

/// A gRPC endpoint to a service, tuned for bulk streaming on a local network. (A
/// `String` error, as `kubedav_remote::balance` calls it for every address it finds;
/// [`RunError::ServiceUrl`] when it comes back.)
fn endpoint(service: &str, url: &str) -> Result<Endpoint, String> {
    Ok(Endpoint::from_shared(url.to_owned())
        .map_err(|e| format!("{url} is not a valid URL for {service}: {e}"))?
        // The connection itself (timeout, no delay, backoff) is kubedav_remote::backoff's.
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(true)
        .initial_stream_window_size(Some(4 << 20))
        .initial_connection_window_size(Some(16 << 20))
        .max_frame_size(Some(kubedav_remote::serve::MAX_FRAME_BYTES))
        // A call the gateway ends early (a 304, a client gone) resets its stream, and
        // frames fileio had already sent for it arrive after the reset. HTTP/2 ignores
        // them while it remembers the stream; hyper remembers 10, and a frame for a
        // forgotten stream counts toward a limit of 1,024 after which the connection is
        // closed with every call on it (507 "h2 protocol error" under load).
        .http2_max_concurrent_reset_streams(REMEMBERED_RESETS))
}

/// How many reset streams a gRPC connection remembers (a few hundred bytes each, for
/// at most hyper's 30 s): thousands of resets a second stay remembered until their
/// late frames have come.
const REMEMBERED_RESETS: usize = 4096;

async fn run_gateway(cli: &Cli, ports: Ports, shutdown: Shutdown) -> Result<(), RunError> {
    let listen = &cli.serve.listen;
    if ports.auth.is_none() {
        if !listen.is_loopback() && !cli.auth.allow_unauthenticated {
            return Err(RunError::Unauthenticated(listen.clone()));
        }
        tracing::warn!(target: "kubedav", "serving WITHOUT authentication: anyone who can reach {listen} can read and write");
    }
    let mut config = cli.gateway_config();
    if let Some(file) = &cli.auth.policy {
        if ports.auth.is_none() {
            return Err(RunError::PolicyWithoutAuth);
        }
        config.policy = Some(policy::load(file, ports.fileio.clone()).await?);
    }
    let gateway = Gateway::new(ports, config.clone());
    if let Some(file) = &cli.auth.policy {
        policy::watch_for_gateway(file.clone(), gateway.clone());
    }
    let checked = gateway.clone();
    let ready: ReadinessCheck = Arc::new(move || {
        let gateway = checked.clone();
        Box::pin(async move { gateway.ready().await })
    });
    let (http_listener, http_addr) =
        listen::bind("gateway HTTP", listen.as_str())
            .await
            .map_err(|message| RunError::Bind {
                flag: "--listen",
                message,
            })?;
    let (admin_listener, _) = listen::bind(&format!("{} admin", cli.target.name()), cli.admin_listen())
        .await
        .map_err(|message| RunError::Bind {
            flag: "--admin-listen",
            message,
        })?;
    tracing::info!(target: "kubedav", "WebDAV at http://{http_addr}/");
    // On SIGTERM /readyz answers "draining" at once; after --shutdown-delay-seconds the
    // HTTP port closes (new connections are refused) and in-flight requests finish.
    let delay = Duration::from_secs(cli.serve.shutdown_delay_seconds);
    gateway.drain_on({
        let shutdown = shutdown.clone();
        Arc::new(move || shutdown.is_requested())
    });
    let stop_serving = {
        let shutdown = shutdown.clone();
        let gateway = gateway.clone();
        async move {
            shutdown.requested().await;
            gateway.start_draining();
            if !delay.is_zero() {
                tracing::info!(target: "kubedav", "serving {} s more while balancers take this process out", delay.as_secs());
                tokio::time::sleep(delay).await;
            }
        }
    };
    let main = kubedav_gateway::edge::server::serve(http_listener, gateway.service(), &config, stop_serving);
    admin::serve_beside(admin_listener, ready, shutdown, main)
        .await
        .map_err(RunError::Serve)
}

#[cfg(test)]
mod tests;
