//! The tools `kubedav` runs besides serving: `passwd`, `smoke`, `convert`,
//! `ensure-secrets`.

use super::*;

/// Tools.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Add a user to a users file, or change their password (SHA-512 crypt). The password
    /// is read from standard input (one line), or prompted for on a terminal.
    Passwd {
        /// The users file (created if missing).
        file: PathBuf,
        /// The user.
        user: String,
    },
    /// Run the WebDAV smoke test (MKCOL, PUT, PROPFIND, GET, LOCK, UNLOCK, DELETE) against
    /// a running server, as `helm test` does; exits non-zero at the first failed step.
    Smoke {
        /// The server's URL, e.g. http://kubedav-gateway/.
        url: String,
        /// The user to log in as.
        #[arg(long, env = "KUBEDAV_SMOKE_USER")]
        user: Option<String>,
        /// Their password.
        #[arg(long, env = "KUBEDAV_SMOKE_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Wait until the folder exists, then exit (an init container's step: a gateway pod
    /// waits for fileio to make the incoming area it mounts, `--fileio-incoming`, since
    /// the kubelet would make a missing one as root).
    AwaitFolder {
        /// The folder, e.g. /data/.kubedav/incoming.
        folder: PathBuf,
        /// Give up after this many seconds (0: never).
        #[arg(long, default_value_t = 0)]
        timeout_seconds: u64,
    },
    /// Print the Markdown of a local HTML file (`-` for standard input), as agents get it,
    /// and write the token estimate to standard error.
    Convert {
        /// The HTML file, or `-`.
        file: PathBuf,
        /// The Content-Type the HTML would be served with (its charset is used).
        #[arg(long, default_value = "text/html")]
        content_type: String,
        /// `main` (the page's main content, as agents get by default) or `full`.
        #[arg(long, value_enum, default_value = "main")]
        content: MarkdownContent,
        /// Start with YAML front matter (title, description, URL).
        #[arg(long)]
        front_matter: bool,
        /// The page's URL: relative links are resolved against it.
        #[arg(long)]
        base_url: Option<String>,
    },
    /// Create the Secrets a Helm release needs but does not render, each only when it is
    /// missing (the chart's pre-install and pre-upgrade hook runs this in a pod; see
    /// docs/deploy.md, "GitOps"). Prints what it did with each.
    EnsureSecrets {
        /// A users-file Secret with a generated `admin` login (keys users, username,
        /// password).
        #[arg(long = "users", value_name = "NAME")]
        users: Vec<String>,
        /// A Secret holding KEY with 48 random letters and digits.
        #[arg(long = "random", value_name = "NAME/KEY", value_parser = crate::secrets::Wanted::random)]
        random: Vec<crate::secrets::Wanted>,
        /// A label for the Secrets it creates.
        #[arg(long = "label", value_name = "KEY=VALUE", value_parser = values::label)]
        labels: Vec<(String, String)>,
        /// The API server [default: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT].
        #[arg(long)]
        api_server: Option<String>,
        /// A bearer token file [default: the pod's service account token].
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// The API server's CA [default: the pod's service account ca.crt].
        #[arg(long)]
        ca_file: Option<PathBuf>,
        /// The namespace [default: the pod's].
        #[arg(long)]
        namespace: Option<String>,
    },
}
