//! Client-side balancing for gRPC in Kubernetes. A long-lived HTTP/2 connection to a
//! ClusterIP Service pins every call to the one pod behind it; over a headless Service
//! the name resolves to every pod, so the client keeps one connection per pod and
//! spreads calls over them. [`channel`] re-resolves the name every few seconds, adds new
//! pods and drops gone ones.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;
use tonic::transport::channel::Change;
use tonic::transport::{Channel, Endpoint};

/// How often the name is resolved again.
pub const REFRESH: Duration = Duration::from_secs(5);

/// A channel to `url` (`http://host:port`). An IP address gets one connection. A name
/// gets one connection per address it resolves to, balanced (power of two choices), and
/// re-resolved every [`REFRESH`]; while it resolves to nothing, calls go to the name
/// itself and fail fast (UNAVAILABLE) instead of waiting. `endpoint` makes the endpoint,
/// with its settings, for a URL.
pub fn channel(
    url: &str,
    endpoint: impl Fn(&str) -> Result<Endpoint, String> + Send + 'static,
) -> Result<Channel, String> {
    let named = endpoint(url)?;
    let uri = named.uri().clone();
    let (Some(host), Some(port)) = (uri.host().map(str::to_owned), uri.port_u16()) else {
        return Ok(named.connect_lazy());
    };
    if host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok() {
        return Ok(named.connect_lazy());
    }
    let scheme = uri.scheme_str().unwrap_or("http").to_owned();
    let (channel, changes) = Channel::balance_channel::<Target>(64);
    tokio::spawn(async move {
        let mut current: HashSet<Target> = HashSet::new();
        loop {
            let resolved: HashSet<Target> = match tokio::net::lookup_host((host.as_str(), port)).await {
                Ok(addresses) => addresses.map(Target::Address).collect(),
                Err(e) => {
                    tracing::debug!(%host, error = %e, "cannot resolve; calls go to the name until it resolves");
                    HashSet::new()
                }
            };
            let wanted = if resolved.is_empty() {
                HashSet::from([Target::Name])
            } else {
                resolved
            };
            for gone in current.difference(&wanted) {
                if changes.send(Change::Remove(gone.clone())).await.is_err() {
                    return;
                }
            }
            for new in wanted.difference(&current) {
                let url = match new {
                    Target::Address(address) => format!("{scheme}://{address}"),
                    Target::Name => format!("{scheme}://{host}:{port}"),
                };
                match endpoint(&url) {
                    Ok(made) => {
                        if changes.send(Change::Insert(new.clone(), made)).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => tracing::warn!("{e}"),
                }
            }
            if wanted != current {
                tracing::info!(target: "kubedav", %host, backends = wanted.len(), "gRPC backends changed");
            }
            current = wanted;
            tokio::time::sleep(REFRESH).await;
        }
    });
    Ok(channel)
}

/// One balanced backend: an address the name resolved to, or the name itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Target {
    Address(SocketAddr),
    Name,
}
