//! A service target serving as one replica of several (`--registry`): registered in Redis
//! under the address it is bound to, answering changes only while its registration
//! stands, and removed once it stopped answering.

use super::{RunError, grpc};
use crate::cli::{Cli, HostPort};
use kubedav_kit::admin::ReadinessCheck;
use kubedav_kit::shutdown::Shutdown;
use kubedav_lease::Leases;
use std::sync::Arc;

/// The registry of `service`'s replicas that `--registry` names, if any.
pub(super) fn registry(
    cli: &Cli,
    service: &'static str,
) -> Result<Option<kubedav_kit::registry::Registry>, RunError> {
    let Some(url) = cli.replicas.registry.get() else {
        return Ok(None);
    };
    let prefix = &cli.replicas.redis_prefix;
    let connection = cli.replicas.redis(url).map_err(RunError::Registry)?;
    let registry = kubedav_kit::registry::Registry::on(connection, prefix, service);
    tracing::info!(
        target: "kubedav",
        "{service} replicas registered in Redis at {url} under {prefix}{service}:"
    );
    Ok(Some(registry))
}

/// Serves one replica of several: registered under the address it is bound to (or
/// `--advertise-address`), answering changes only while the registration is open, and
/// removed from the registry once it has stopped answering calls.
pub(super) async fn serve_registered<S>(
    cli: &Cli,
    registry: kubedav_kit::registry::Registry,
    leases: Arc<Leases>,
    service: S,
    beside: grpc::Beside,
    ready: ReadinessCheck,
    shutdown: Shutdown,
) -> Result<(), RunError>
where
    S: grpc::GrpcService,
{
    let advertised = cli.replicas.advertise_address.as_ref().map(HostPort::to_string);
    let unspecified = cli
        .serve
        .grpc_listen
        .as_ref()
        .is_some_and(HostPort::is_unspecified);
    if advertised.is_none() && unspecified {
        return Err(RunError::NoAdvertiseAddress(cli.grpc_listen().to_owned()));
    }
    let mut listen = cli.listen();
    let (bound, address) = tokio::sync::oneshot::channel();
    listen.on_bound = Some(Box::new(move |at| {
        let _ = bound.send(at);
    }));
    let registration = registry.keep_registered(async move {
        let bound = address.await.ok()?;
        Some(advertised.unwrap_or_else(|| bound.to_string()))
    });
    leases.admit_through(registration.standing(), registry.key());
    let ready = registered_and(ready, registration.standing());
    let served = grpc::serve_target_with(listen, service, beside, ready, shutdown)
        .await
        .map_err(RunError::Serve);
    // Only now, with no call left to answer: gateways stop waiting for it.
    registration.leave().await;
    served
}

/// Ready when `storage` is and the replica's registration lets it answer changes.
fn registered_and(
    storage: ReadinessCheck,
    standing: tokio::sync::watch::Receiver<kubedav_kit::registry::Standing>,
) -> ReadinessCheck {
    Arc::new(move || {
        let storage = storage.clone();
        let open = standing.borrow().open_at(tokio::time::Instant::now());
        Box::pin(async move {
            if !open {
                return Err("this replica is not registered yet (or Redis is out of reach)".to_owned());
            }
            storage().await
        })
    })
}
