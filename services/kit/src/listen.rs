//! Binding listeners and announcing them.

use std::net::SocketAddr;
use tokio::net::TcpListener;

/// Binds `addr` (`host:port`; port 0 picks a free port) and logs
/// `"<what> listening on <address>"` with the address actually bound, which is how
/// scripts and tests find a port picked by the kernel.
pub async fn bind(what: &str, addr: &str) -> Result<(TcpListener, SocketAddr), String> {
    let listener = TcpListener::bind(addr).await.map_err(|e| {
        format!("cannot listen for {what} on {addr}: {e} (is the address in use, or the port privileged?)")
    })?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot read the {what} address: {e}"))?;
    tracing::info!(target: "kubedav", "{what} listening on {local}");
    Ok((listener, local))
}
