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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// How often the name is resolved again.
pub const REFRESH: Duration = Duration::from_secs(2);

/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A channel to `endpoint` that connects on first use and reconnects with backoff
/// ([`crate::backoff`]).
pub fn lazy(endpoint: &Endpoint) -> Channel {
    lazy_checked(endpoint).channel
}

/// A channel to one pod made by [`lazy_checked`]: the channel, the check of whether its
/// pod is answering, and what a connection thread needs to open a channel of its own to
/// the same pod ([`Backends`]).
#[derive(Clone)]
pub struct Dialed {
    /// The shared channel.
    pub channel: Channel,
    /// Whether calls may be sent to the pod now.
    pub usable: Usable,
    redial: Redial,
}

/// How to open another channel to the pod of a [`Dialed`], sharing its connector.
#[derive(Clone)]
struct Redial {
    /// Names the pod's channel among a thread's own (unique in the process).
    id: u64,
    endpoint: Endpoint,
    connector: crate::backoff::Connector,
    /// Held by every copy of the [`Dialed`]: a thread's own channel to the pod is
    /// dropped once none is left.
    held: Arc<()>,
}

impl Redial {
    /// A new lazily connecting channel to the same pod, on the current runtime.
    fn open(&self) -> Channel {
        self.endpoint.connect_with_connector_lazy(self.connector.clone())
    }

    /// A reference that lapses when no copy of the [`Dialed`] is left.
    fn held(&self) -> std::sync::Weak<()> {
        Arc::downgrade(&self.held)
    }
}

/// [`lazy`], and the check of whether its pod accepts connections: false from a failed
/// attempt to connect until one succeeds ([`crate::backoff::Connector::accepting`]).
pub fn lazy_checked(endpoint: &Endpoint) -> Dialed {
    static IDS: AtomicU64 = AtomicU64::new(0);
    let connector = crate::backoff::Connector::new(CONNECT_TIMEOUT);
    let checked = connector.clone();
    let usable: Usable = Arc::new(move || checked.accepting());
    Dialed {
        channel: endpoint.connect_with_connector_lazy(connector.clone()),
        usable,
        redial: Redial {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            endpoint: endpoint.clone(),
            connector,
            held: Arc::default(),
        },
    }
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
        return Ok(Backends::dialed(vec![lazy_checked(&named)]));
    };
    if host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok() {
        return Ok(Backends::dialed(vec![lazy_checked(&named)]));
    }
    let scheme = uri.scheme_str().unwrap_or("http").to_owned();
    let first = lazy_checked(&named);
    let backends = Backends::dialed(vec![first.clone()]);
    let updated = backends.clone();
    tokio::spawn(async move {
        let mut current: HashMap<Target, Dialed> = HashMap::from([(Target::Name, first)]);
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
            let mut next: HashMap<Target, Dialed> = HashMap::with_capacity(wanted.len());
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
    let fallback = lazy_checked(&named);
    let backends = Backends::dialed(vec![fallback.clone()]);
    let updated = Arc::downgrade(&backends);
    tokio::spawn(async move {
        let mut current: HashMap<String, Dialed> = HashMap::new();
        loop {
            let addresses = view.borrow_and_update().addresses.clone();
            let Some(updated) = updated.upgrade() else { return };
            let mut next = HashMap::with_capacity(addresses.len());
            let mut channels: Vec<Dialed> = Vec::with_capacity(addresses.len());
            for address in addresses {
                let dialed = match current.remove(&address) {
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
                let checked = dialed.usable.clone();
                channels.push(Dialed {
                    usable: Arc::new(move || checked() && answering(&at)),
                    ..dialed.clone()
                });
                next.insert(address, dialed);
            }
            if channels.is_empty() {
                updated.replace_checked(vec![fallback.clone()]);
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

    /// Runs `test` on a connection thread: a thread of its own, marked as the gateway's
    /// connection threads are, with a single-threaded runtime.
    fn on_connection_thread<F, Fut>(test: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()>,
    {
        std::thread::spawn(move || {
            kubedav_kit::connection_thread::mark();
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(test());
        })
        .join()
        .expect("the test on a connection thread passes");
    }

    /// A pod that went away costs one failed call, not one in every N: the calls after it
    /// go to the pod that answers. Its connector then dials it by itself, and once it
    /// accepts again it is back in turn, without a client's call spent on finding out.
    #[tokio::test]
    async fn calls_skip_a_backend_that_refused_until_it_accepts_again() {
        skip_a_refused_backend().await;
    }

    /// The same on a connection thread, whose calls go over channels of its own that
    /// share the shared channels' connectors.
    #[test]
    fn on_a_connection_thread_calls_skip_a_backend_that_refused_too() {
        on_connection_thread(skip_a_refused_backend);
    }

    async fn skip_a_refused_backend() {
        let gone = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let live = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let live_at = live.local_addr().unwrap();
        let _live = serve(live);
        let endpoint = |at: std::net::SocketAddr| Endpoint::from_shared(format!("http://{at}")).unwrap();
        let to_gone = lazy_checked(&endpoint(gone));
        let gone_accepting = to_gone.usable.clone();
        let to_live = lazy_checked(&endpoint(live_at));
        let backends = Backends::dialed(vec![to_live.clone()]);
        backends.replace_checked(vec![to_gone, to_live]);

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

    /// A connection thread drops its channel to a pod once the pod is no longer among
    /// the backends, so its connection closes instead of being kept and redialled.
    #[test]
    fn a_connection_thread_drops_its_channels_to_pods_no_longer_called() {
        on_connection_thread(|| async {
            let dial =
                |port: u16| lazy_checked(&Endpoint::from_shared(format!("http://127.0.0.1:{port}")).unwrap());
            let backends = Backends::dialed(vec![dial(1), dial(2)]);
            backends.pick();
            backends.pick();
            assert_eq!(
                backends::thread_channels(),
                2,
                "one channel of its own per pod called"
            );
            backends.replace_checked(vec![dial(3)]);
            backends.pick();
            assert_eq!(
                backends::thread_channels(),
                1,
                "the channels to the pods replaced are dropped"
            );
        });
    }

    /// Each connection thread calls a pod over one connection of its own, kept for its
    /// later calls, so a call's I/O runs on the thread that makes it; calls from the
    /// shared runtime share one connection.
    #[test]
    fn each_connection_thread_calls_over_a_connection_of_its_own() {
        let server = tokio::runtime::Runtime::new().unwrap();
        let listener = server
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let at = listener.local_addr().unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = accepted.clone();
        server.spawn(async move {
            use futures_util::StreamExt;
            let (_, health) = tonic_health::server::health_reporter();
            let incoming = tonic::transport::server::TcpIncoming::from(listener).inspect(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
            });
            tonic::transport::Server::builder()
                .add_service(health)
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        });
        let shared = tokio::runtime::Runtime::new().unwrap();
        let backends = shared
            .block_on(async {
                channel(&format!("http://{at}"), |url| {
                    Ok(Endpoint::from_shared(url.to_owned()).unwrap())
                })
            })
            .unwrap();
        let connections = || accepted.load(Ordering::SeqCst);

        for _ in 0..3 {
            shared
                .block_on(check(&backends))
                .expect("the shared runtime's call");
        }
        assert_eq!(connections(), 1, "the shared runtime's calls share a connection");
        for thread in 1..=2 {
            let backends = backends.clone();
            on_connection_thread(move || async move {
                for _ in 0..3 {
                    check(&backends).await.expect("a connection thread's call");
                }
            });
            assert_eq!(
                connections(),
                1 + thread,
                "connection thread {thread} opened one connection of its own"
            );
        }
        shared
            .block_on(check(&backends))
            .expect("the shared runtime's call");
        assert_eq!(
            connections(),
            3,
            "the shared runtime's connection is still the one it used"
        );
    }
}
