//! Where a gateway finds the services, and how it calls them: their URLs, its mounts of
//! fileio's volume, the call timeout and the shared token.

use super::values::{OrEmpty, ServiceUrl};
use clap::Args;

/// Where a gateway finds the services, and how it calls them.
#[derive(Debug, Args)]
#[command(next_help_heading = "Calls between services (target gateway; --grpc-token every target but all)")]
pub(crate) struct RemoteArgs {
    /// Where the gateway finds fileio.
    #[arg(long, env = "KUBEDAV_FILEIO_URL", default_value = "http://127.0.0.1:9091")]
    pub fileio_url: ServiceUrl,

    /// Where fileio's volume (its --root) is mounted in the gateway too, read only is
    /// enough (target gateway). Set, a GET of a large file no gateway keeps is sent from
    /// here with sendfile, as in one process, once fileio has named that very version
    /// of the file; else fileio streams it over gRPC (docs/architecture.md, "Large
    /// files from the gateway's mount"). The gateway does not start if it cannot open it.
    #[arg(long, env = "KUBEDAV_FILEIO_VOLUME")]
    pub fileio_volume: Option<std::path::PathBuf>,

    /// Where the incoming area of fileio's volume (its `.kubedav/incoming`) is mounted in
    /// the gateway, read-write (target gateway; fileio on a volume). Set, the body of a
    /// PUT of 1 MiB or more whose checksums no one computes is written here by the
    /// gateway and landed by fileio, instead of streamed to fileio over gRPC
    /// (docs/architecture.md, "Large uploads into the gateway's mount"). The gateway does
    /// not start if it cannot make files here.
    #[arg(long, env = "KUBEDAV_FILEIO_INCOMING")]
    pub fileio_incoming: Option<std::path::PathBuf>,

    /// Where the gateway finds locks.
    #[arg(long, env = "KUBEDAV_LOCKS_URL", default_value = "http://127.0.0.1:9093")]
    pub locks_url: ServiceUrl,

    /// Where the gateway finds auth (e.g. http://127.0.0.1:9092). Set, the gateway requires
    /// credentials; empty, it serves without authentication.
    #[arg(long, env = "KUBEDAV_AUTH_URL", default_value = "", value_parser = ServiceUrl::or_empty)]
    pub auth_url: OrEmpty<ServiceUrl>,

    /// Where the gateway finds markdown.
    #[arg(
        long,
        env = "KUBEDAV_MARKDOWN_URL",
        default_value = "http://127.0.0.1:9094",
        value_parser = ServiceUrl::or_empty
    )]
    pub markdown_url: OrEmpty<ServiceUrl>,

    /// Seconds the gateway gives a service to answer a call, or to send the next part of
    /// a streamed answer (target gateway); DELETE, COPY and MOVE of trees get ten times
    /// as long. A service that misses it gets the request 504.
    #[arg(long, env = "KUBEDAV_RPC_TIMEOUT_SECONDS", default_value_t = 30)]
    pub rpc_timeout_seconds: u64,

    /// A shared token between the gateway and the gRPC services (targets gateway, auth,
    /// locks, fileio, markdown): every call carries it, and a service refuses calls
    /// without it (UNAUTHENTICATED; the gRPC health service stays open for probes). Give
    /// every process the same one, through the environment (a flag's value shows in the
    /// process list). Unset, the services trust whoever reaches them: then only a
    /// NetworkPolicy keeps other pods out. Not used by --target=all.
    #[arg(long, env = "KUBEDAV_GRPC_TOKEN", hide_env_values = true)]
    pub grpc_token: Option<String>,
}
