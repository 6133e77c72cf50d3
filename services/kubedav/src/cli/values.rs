//! Typed values of flags. Each is parsed as the command line is read, so a mistyped
//! value stops the process at start with clap's message (which flag, what it takes)
//! before anything is opened or bound, instead of failing later or being taken for a
//! default.

use clap::ValueEnum;
use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use kubedav_kit::redis::RedisUrl;
use std::ffi::OsStr;

/// A value that may be left empty, as `--auth-url ""` says "no auth service": empty is
/// `None`, anything else must parse.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OrEmpty<T>(pub Option<T>);

impl<T> OrEmpty<T> {
    /// The value, if one was given.
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_ref()
    }
}

/// `parse`, with the empty value taken as none.
fn or_empty<T>(value: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<OrEmpty<T>, String> {
    if value.is_empty() {
        return Ok(OrEmpty(None));
    }
    parse(value).map(|parsed| OrEmpty(Some(parsed)))
}

/// A `host:port` address to listen on or to be reached at (`127.0.0.1:8080`, `[::]:9091`,
/// `localhost:0`; port 0 picks a free port when bound). The host is resolved when it is
/// bound, as the address is passed on as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostPort(String);

impl HostPort {
    /// The address as written.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether only this machine can reach it: a loopback address, or `localhost`.
    pub(crate) fn is_loopback(&self) -> bool {
        self.0
            .parse::<std::net::SocketAddr>()
            .map(|at| at.ip().is_loopback())
            .unwrap_or_else(|_| self.0.starts_with("localhost:"))
    }

    /// Whether it is every address of the machine (`0.0.0.0`, `[::]`).
    pub(crate) fn is_unspecified(&self) -> bool {
        self.0
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|at| at.ip().is_unspecified())
    }
}

impl std::str::FromStr for HostPort {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        if value.parse::<std::net::SocketAddr>().is_ok() {
            return Ok(Self(value.to_owned()));
        }
        match value.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(Self(value.to_owned()))
            }
            _ => Err(
                "expected HOST:PORT, such as 127.0.0.1:8080, [::]:8080 or localhost:8080 \
                      (port 0 picks a free port)"
                    .into(),
            ),
        }
    }
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The URL the gateway calls a service at (`http://fileio:9091`): `http://` or
/// `https://`, a host, and nothing tonic's endpoint would refuse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServiceUrl(String);

impl ServiceUrl {
    /// The URL as written.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// `--auth-url` and `--markdown-url`: a URL, or empty for none.
    pub(crate) fn or_empty(value: &str) -> Result<OrEmpty<Self>, String> {
        or_empty(value, str::parse)
    }
}

impl std::str::FromStr for ServiceUrl {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        let expected = "expected http://HOST:PORT, such as http://127.0.0.1:9091";
        let uri: http::Uri = value.parse().map_err(|e| format!("{e}: {expected}"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none_or(str::is_empty) {
            return Err(expected.into());
        }
        tonic::transport::Endpoint::from_shared(value.to_owned()).map_err(|e| format!("{e}: {expected}"))?;
        Ok(Self(value.to_owned()))
    }
}

/// Where `--lock-store` keeps the locks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LockStore {
    /// In this process only.
    Memory,
    /// In Redis, shared by every locks replica and kept across their restarts.
    Redis(RedisUrl),
}

impl LockStore {
    /// `memory`, or a Redis URL.
    pub(crate) fn parse(value: &str) -> Result<Self, String> {
        if value == "memory" {
            return Ok(Self::Memory);
        }
        if !value.contains("://") {
            return Err(
                "expected `memory` or a Redis URL such as redis://127.0.0.1:6379/0 \
                        (redis+sentinel://s1:26379,s2:26379/MASTER/0 behind Sentinel, \
                        redis+unix:///path/to/redis.sock for a socket)"
                    .into(),
            );
        }
        RedisUrl::parse(value).map(Self::Redis)
    }

    /// Whether the locks are kept in this process.
    pub(crate) fn is_memory(&self) -> bool {
        matches!(self, Self::Memory)
    }
}

/// `--registry` and `--auth-cache-redis`: a Redis URL, or empty for none.
pub(super) fn redis_url_or_empty(value: &str) -> Result<OrEmpty<RedisUrl>, String> {
    or_empty(value, RedisUrl::parse)
}

/// A Redis key prefix: visible ASCII, since a gateway names the registry it follows
/// (`<prefix><service>:replicas`) in gRPC metadata.
pub(super) fn redis_prefix(value: &str) -> Result<String, String> {
    if value.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(value.to_owned())
    } else {
        Err("a Redis key prefix is visible ASCII, without spaces (as `kubedav:` or `team-a:`)".to_owned())
    }
}

/// A value parser from `parse` for values that may hold a password (Redis URLs): its
/// message shows the value with the password as `***`, where clap's own would show it
/// as given (and so in the logs of a Pod that failed to start).
#[derive(Clone, Copy)]
pub(super) struct Redacting<T>(pub fn(&str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Redacting<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let Some(text) = value.to_str() else {
            return Err(clap::Error::new(ErrorKind::InvalidUtf8).with_cmd(cmd));
        };
        (self.0)(text).map_err(|reason| {
            let arg = arg.map_or_else(|| "...".to_owned(), ToString::to_string);
            let shown = kubedav_kit::redis::redacted(text);
            // As clap words its own.
            clap::Error::raw(
                ErrorKind::ValueValidation,
                format!(
                    "invalid value '{shown}' for '{arg}': {reason}\n\nFor more information, try '--help'.\n"
                ),
            )
            .with_cmd(cmd)
        })
    }
}

/// A browser origin allowed by CORS: scheme, host and port only
/// (`https://app.example.com`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Origin(pub http::HeaderValue);

impl std::str::FromStr for Origin {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        let origin = value.trim();
        let refused =
            || "not an origin: give scheme, host and port only, such as https://app.example.com".to_owned();
        let Some(rest) = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"))
        else {
            return Err(refused());
        };
        if rest.contains('/') {
            return Err(refused());
        }
        http::HeaderValue::from_str(origin)
            .map(Self)
            .map_err(|_| refused())
    }
}

/// `--content-signal`: a header value (visible ASCII), sent as it is with every Markdown
/// answer.
pub(super) fn header_value(value: &str) -> Result<http::HeaderValue, String> {
    http::HeaderValue::from_str(value)
        .map_err(|_| "not a header value: use visible ASCII, such as \"ai-train=no, search=yes\"".into())
}

/// What of an HTML page agents get (`--markdown-content`, `kubedav convert --content`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MarkdownContent {
    // The page's main content (the flag's help says what that is).
    #[default]
    Main,
    // The whole body.
    Full,
}

impl From<MarkdownContent> for kubedav_markdown::Content {
    fn from(content: MarkdownContent) -> Self {
        match content {
            MarkdownContent::Main => kubedav_markdown::Content::Main,
            MarkdownContent::Full => kubedav_markdown::Content::Full,
        }
    }
}

/// The most a public link may allow where the policy does not say (`--links`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LinkCap {
    /// No public links.
    Off,
    /// Links that read.
    Read,
    /// Links that only take uploads (drop boxes).
    Upload,
    /// Links that read and write, and drop boxes.
    Write,
}

impl From<LinkCap> for kubedav_policy::LinkCap {
    fn from(cap: LinkCap) -> Self {
        match cap {
            LinkCap::Off => kubedav_policy::LinkCap::Off,
            LinkCap::Read => kubedav_policy::LinkCap::Read,
            LinkCap::Upload => kubedav_policy::LinkCap::Upload,
            LinkCap::Write => kubedav_policy::LinkCap::Write,
        }
    }
}

/// `kubedav ensure-secrets --label KEY=VALUE`.
pub(super) fn label(value: &str) -> Result<(String, String), String> {
    value
        .split_once('=')
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .ok_or_else(|| "expected KEY=VALUE".into())
}

/// Log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// What a change to the volume waits for before it is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Durability {
    /// fdatasync the file, fsync its directory: an answered change survives a power loss.
    Fsync,
    /// Wait for nothing (as nginx and Apache): atomic still, but a crash may lose the last
    /// changes.
    None,
}

impl From<Durability> for kubedav_fileio::Durability {
    fn from(durability: Durability) -> Self {
        match durability {
            Durability::Fsync => kubedav_fileio::Durability::Fsync,
            Durability::None => kubedav_fileio::Durability::None,
        }
    }
}
