//! Client-side balancing for gRPC in Kubernetes. A long-lived HTTP/2 connection to a
//! ClusterIP Service pins every call to the one pod behind it; over a headless Service
//! the name resolves to every pod, so the client keeps one connection per pod and
//! spreads calls over them (round-robin: every call is a stream on an HTTP/2 connection,
//! so the pods' loads even out). [`channel`] re-resolves the name every few seconds, adds
//! new pods and drops gone ones.

pub use backends::{Backends, Usable};
mod backends;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// How often the name is resolved again.
pub const REFRESH: Duration = Duration::from_secs(2);

/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A channel to `endpoint` that connects on first use and reconnects with backoff
/// ([`crate::backoff`]).
pub fn lazy(endpoint: &Endpoint) -> Channel {
    lazy_checked(endpoint).0
}

/// [`lazy`], and the check of whether its pod accepts connections: false from a failed
/// attempt to connect until one succeeds ([`crate::backoff::Connector::accepting`]).
pub fn lazy_checked(endpoint: &Endpoint) -> (Channel, Usable) {
    let connector = crate::backoff::Connector::new(CONNECT_TIMEOUT);
    let checked = connector.clone();
    let usable: Usable = Arc::new(move || checked.accepting());
    (endpoint.connect_with_connector_lazy(connector), usable)
}

/// The backends of `url` (`http://host:port`). An IP address gets one channel. A name
/// gets one channel per address it resolves to, calls spread round-robin, re-resolved
/// every [`REFRESH`]; while it resolves to nothing, calls go to the name itself and fail
/// fast (UNAVAILABLE) instead of waiting. Every channel reconnects by itself with
/// backoff ([`crate::backoff`]); calls skip an address that refused a connection while
/// another accepts. `endpoint` makes the endpoint, with its settings, for a URL.
pub fn channel(
    url: &str,
    endpoint: impl Fn(&str) -> Result<Endpoint, String> + Send + 'static,
) -> Result<Arc<Backends>, String> {
    let named = endpoint(url)?;
    let uri = named.uri().clone();
    let (Some(host), Some(port)) = (uri.host().map(str::to_owned), uri.port_u16()) else {
        return Ok(Backends::single(lazy(&named)));
    };
    if host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok() {
        return Ok(Backends::single(lazy(&named)));
    }
    let scheme = uri.scheme_str().unwrap_or("http").to_owned();
    let backends = Backends::single(lazy(&named));
    let updated = backends.clone();
    tokio::spawn(async move {
        let mut current: HashMap<Target, (Channel, Usable)> =
            HashMap::from([(Target::Name, lazy_checked(&named))]);
        loop {
            let mut wanted: Vec<Target> = match tokio::net::lookup_host((host.as_str(), port)).await {
                Ok(addresses) => addresses.map(Target::Address).collect(),
                Err(e) => {
                    tracing::debug!(%host, error = %e, "cannot resolve; calls go to the name until it resolves");
                    Vec::new()
                }
            };
            wanted.sort_unstable();
            wanted.dedup();
            if wanted.is_empty() {
                wanted.push(Target::Name);
            }
            let mut changed = wanted.len() != current.len();
            let mut next: HashMap<Target, (Channel, Usable)> = HashMap::with_capacity(wanted.len());
            for target in &wanted {
                let channel = match current.remove(target) {
                    Some(kept) => kept,
                    None => {
                        changed = true;
                        let url = match target {
                            Target::Address(address) => format!("{scheme}://{address}"),
                            Target::Name => format!("{scheme}://{host}:{port}"),
                        };
                        match endpoint(&url) {
                            Ok(made) => lazy_checked(&made),
                            Err(e) => {
                                tracing::warn!("{e}");
                                continue;
                            }
                        }
                    }
                };
                next.insert(target.clone(), channel);
            }
            if changed && !next.is_empty() {
                let channels = wanted.iter().filter_map(|t| next.get(t).cloned()).collect();
                updated.replace_checked(channels);
                tracing::info!(target: "kubedav", %host, backends = next.len(), "gRPC backends changed");
            }
            current = next;
            if Arc::strong_count(&updated) == 1 {
                return; // nobody calls this service any more
            }
            tokio::time::sleep(REFRESH).await;
        }
    });
    Ok(backends)
}

/// The backends of the replicas a registry shows (`kubedav_kit::registry`): one channel
/// per registered address, following `view`; while none is registered, calls go to
/// `url` (and fail or succeed as it does). Replicas announce their own addresses there,
/// so a gateway reaches a new replica as soon as it may change anything, without
/// waiting for DNS. Calls skip a replica for which `answering(address)` is false (its
/// lease has lapsed or its stream ended: it stops, died or hangs) or that refused a
/// connection, while another answers, instead of waiting for its registration to lapse.
pub fn registered(
    url: &str,
    mut view: tokio::sync::watch::Receiver<kubedav_kit::registry::View>,
    endpoint: impl Fn(&str) -> Result<Endpoint, String> + Send + 'static,
    answering: Arc<dyn Fn(&str) -> bool + Send + Sync>,
) -> Result<Arc<Backends>, String> {
    let named = endpoint(url)?;
    let scheme = named.uri().scheme_str().unwrap_or("http").to_owned();
    let fallback = lazy(&named);
    let backends = Backends::single(fallback.clone());
    let updated = Arc::downgrade(&backends);
    tokio::spawn(async move {
        let mut current: HashMap<String, (Channel, Usable)> = HashMap::new();
        loop {
            let addresses = view.borrow_and_update().addresses.clone();
            let Some(updated) = updated.upgrade() else { return };
            let mut next = HashMap::with_capacity(addresses.len());
            let mut channels: Vec<(Channel, Usable)> = Vec::with_capacity(addresses.len());
            for address in addresses {
                let (channel, accepting) = match current.remove(&address) {
                    Some(kept) => kept,
                    None => match endpoint(&format!("{scheme}://{address}")) {
                        Ok(made) => lazy_checked(&made),
                        Err(e) => {
                            tracing::warn!("registered replica {address}: {e}");
                            continue;
                        }
                    },
                };
                let answering = answering.clone();
                let at = address.clone();
                let checked = accepting.clone();
                channels.push((channel.clone(), Arc::new(move || checked() && answering(&at))));
                next.insert(address, (channel, accepting));
            }
            if channels.is_empty() {
                updated.replace(vec![fallback.clone()]);
            } else {
                updated.replace_checked(channels);
            }
            current = next;
            drop(updated);
            if view.changed().await.is_err() {
                return;
            }
        }
    });
    Ok(backends)
}

/// One balanced backend: an address the name resolved to, or the name itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Target {
    Address(SocketAddr),
    Name,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;

    /// A gRPC server (the health service alone) on `listener`, until the task ends.
    fn serve(listener: tokio::net::TcpListener) -> tokio::task::JoinHandle<()> {
        let (_, health) = tonic_health::server::health_reporter();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(health)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await
                .unwrap();
        })
    }

    async fn check(backends: &Backends) -> Result<(), tonic::Status> {
        HealthClient::new(backends.pick())
            .check(HealthCheckRequest::default())
            .await
            .map(|_| ())
    }

    /// A pod that went away costs one failed call, not one in every N: the calls after it
    /// go to the pod that answers. Its connector then dials it by itself, and once it
    /// accepts again it is back in turn, without a client's call spent on finding out.
    #[tokio::test]
    async fn calls_skip_a_backend_that_refused_until_it_accepts_again() {
        let gone = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let live = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let live_at = live.local_addr().unwrap();
        let _live = serve(live);
        let endpoint = |at: std::net::SocketAddr| Endpoint::from_shared(format!("http://{at}")).unwrap();
        let (to_gone, gone_accepting) = lazy_checked(&endpoint(gone));
        let (to_live, live_accepting) = lazy_checked(&endpoint(live_at));
        let backends = Backends::single(to_live.clone());
        backends.replace_checked(vec![(to_gone, gone_accepting.clone()), (to_live, live_accepting)]);

        let mut failed = 0;
        for _ in 0..20 {
            if check(&backends).await.is_err() {
                failed += 1;
            }
        }
        assert_eq!(failed, 1, "only the call that found the pod gone fails");
        assert!(!gone_accepting(), "the gone pod is skipped");

        let back = tokio::net::TcpListener::bind(gone).await.unwrap();
        let _back = serve(back);
        let mut waited = Duration::ZERO;
        while !gone_accepting() {
            assert!(
                waited < Duration::from_secs(5),
                "the connector finds the pod back by itself"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
            waited += Duration::from_millis(20);
        }
        for _ in 0..4 {
            check(&backends).await.expect("both pods answer");
        }
    }
}
