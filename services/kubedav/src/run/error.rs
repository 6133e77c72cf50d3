//! Why a target did not start, or stopped: [`RunError`].

use crate::cli::HostPort;

/// Why a target did not start (or stopped serving). Its message says what to change,
/// naming the flag or variable; `main` prints it after `kubedav: ` and logs it.
///
/// A value that is wrong on its face (a mistyped URL, address or mode) never gets here:
/// clap refuses it as the command line is read. These are what only running finds:
/// flags that do not go together, files and buckets that cannot be opened, addresses
/// that cannot be bound.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// Logging or trace export could not be set up (the message names the variable).
    #[error("{0}")]
    Telemetry(String),

    /// The policy file could not be read or was refused.
    #[error("--policy {file}: {reason}")]
    Policy {
        /// The file as given.
        file: String,
        /// What is wrong, naming the rule to fix.
        reason: String,
    },

    /// `--policy` on a gateway that authenticates nobody.
    #[error(
        "--policy decides per user, so the gateway must know who asks: give --users-file \
         or --auth-url (KUBEDAV_USERS_FILE, KUBEDAV_AUTH_URL)"
    )]
    PolicyWithoutAuth,

    /// `--target=auth` with nobody to verify.
    #[error(
        "--target=auth needs --users-file (KUBEDAV_USERS_FILE), --oidc-issuer (KUBEDAV_OIDC_ISSUER), or both"
    )]
    AuthWithoutUsers,

    /// The users file could not be read.
    #[error("{0} (set --users-file or KUBEDAV_USERS_FILE)")]
    UsersFile(String),

    /// `--secret-key` is too short.
    #[error(
        "--secret-key has {0} bytes; give at least 32 random bytes, e.g. `openssl rand -base64 48` (KUBEDAV_SECRET_KEY, from a Secret)"
    )]
    SecretKey(usize),

    /// The identity provider's settings are wrong (the message names the flag).
    #[error("{0}")]
    IdentityProvider(String),

    /// `--auth-cache-redis` without the secret its keys are made with.
    #[error(
        "--auth-cache-redis needs --auth-cache-secret (or KUBEDAV_AUTH_CACHE_SECRET): \
         the same secret on every auth replica"
    )]
    AuthCacheWithoutSecret,

    /// `--auth-cache-secret` is unusable (too short).
    #[error("--auth-cache-secret: {0}")]
    AuthCacheSecret(String),

    /// The Redis of `--auth-cache-redis` could not be set up.
    #[error("--auth-cache-redis: {0}")]
    AuthCacheRedis(String),

    /// The Redis of `--lock-store` could not be set up.
    #[error("--lock-store: {0}")]
    LockStore(String),

    /// `--registry` on a locks target that keeps its locks in memory.
    #[error(
        "--registry: locks kept in memory belong to this process alone, so it cannot \
         be one of several replicas: give --lock-store redis://... (or no --registry)"
    )]
    RegistryWithMemoryLocks,

    /// `--registry` on target all.
    #[error(
        "--registry is for replicas of fileio and locks and the gateways in front of \
         them (targets fileio, locks, gateway); all-in-one processes sharing a volume \
         or a bucket need only --lock-store redis://..."
    )]
    RegistryInOneProcess,

    /// The Redis of `--registry` could not be set up.
    #[error("--registry: {0}")]
    Registry(String),

    /// A registered replica listening on every address, with nothing to tell gateways.
    #[error(
        "--registry: gateways cannot reach {0} (listening on every address): \
         give --advertise-address host:port (in Kubernetes, the pod's IP and port)"
    )]
    NoAdvertiseAddress(String),

    /// The directory of `--root` could not be opened.
    #[error("{0} (set --root or KUBEDAV_ROOT to an existing directory)")]
    Root(String),

    /// The directory of `--fileio-volume` could not be opened.
    #[error(
        "--fileio-volume: {0}; mount fileio's volume there (read only is enough), or leave \
         --fileio-volume (KUBEDAV_FILEIO_VOLUME) unset to have fileio send every file"
    )]
    FileioVolume(String),

    /// The directory of `--fileio-incoming` could not be written into.
    #[error(
        "--fileio-incoming: {0}; mount the incoming area of fileio's volume (its \
         .kubedav/incoming, which fileio makes) there read-write, or leave \
         --fileio-incoming (KUBEDAV_FILEIO_INCOMING) unset to stream every body to fileio"
    )]
    FileioIncoming(String),

    /// The bucket of `--storage` could not be reached or used (the message names the
    /// flag or the `AWS_` variable to check).
    #[error("{0}")]
    Storage(String),

    /// A service's URL (`--fileio-url`, ...) could not be made a channel.
    #[error("--{service}-url: {reason}")]
    ServiceUrl {
        /// The service: fileio, locks, auth or markdown.
        service: &'static str,
        /// What was wrong.
        reason: String,
    },

    /// `--grpc-token` cannot be sent in a header.
    #[error("--grpc-token: {0}")]
    GrpcToken(String),

    /// A gateway reachable from the network, without authentication, not allowed to.
    #[error(
        "refusing to serve {0} without authentication: give --users-file (all) or --auth-url (gateway), \
         or --allow-unauthenticated to do it anyway"
    )]
    Unauthenticated(HostPort),

    /// An address of `flag` could not be bound.
    #[error("{message} (set {flag})")]
    Bind {
        /// The flag naming the address.
        flag: &'static str,
        /// What the system said.
        message: String,
    },

    /// A server failed while serving (or a service target could not bind its
    /// addresses: the message names them).
    #[error("{0}")]
    Serve(String),
}
