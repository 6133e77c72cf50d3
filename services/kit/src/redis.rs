//! Redis connections for the services that share state through Redis (the locks store
//! and the shared auth cache): one multiplexed connection per process that reconnects by
//! itself, with short timeouts, so that an unreachable Redis fails a request quickly
//! instead of hanging it.

use ::redis::aio::ConnectionManagerConfig;
use std::time::Duration;

pub use ::redis::aio::ConnectionManager;

/// How long one Redis command may take before it counts as failed.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long connecting to Redis may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A connection manager for `url` (`redis://[user:password@]host:port/db`, or
/// `rediss://` for TLS when built with it). It connects on first use; when Redis goes
/// away, the failing command returns an error at once and the next one reconnects, so
/// service resumes by itself when Redis is back.
pub fn connect(url: &str) -> Result<ConnectionManager, String> {
    let client = ::redis::Client::open(url).map_err(|e| {
        format!(
            "{} is not a usable Redis URL: {e} (expected redis://host:port/db)",
            redacted(url)
        )
    })?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500));
    ConnectionManager::new_lazy_with_config(client, config)
        .map_err(|e| format!("cannot set up the Redis connection to {}: {e}", redacted(url)))
}

/// `url` with any password replaced by `***`, for logs and messages.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((credentials, host)) => {
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

/// The client span of one Redis command, after OpenTelemetry's database conventions:
/// `command` (`EVALSHA`, `SET`, ...) is `db.operation.name` and `summary` says what the
/// call does for kubedav (`db.query.summary`, also the span's name).
pub fn span(command: &'static str, summary: &str) -> tracing::Span {
    tracing::info_span!(
        "redis",
        otel.name = %format_args!("{command} {summary}"),
        otel.kind = "client",
        db.system.name = "redis",
        db.operation.name = command,
        db.query.summary = %summary,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            super::redacted("redis://:s3cret@h:6379/0"),
            "redis://:***@h:6379/0"
        );
        assert_eq!(super::redacted("redis://u:s3cret@h/1"), "redis://u:***@h/1");
        assert_eq!(super::redacted("redis://h:6379/0"), "redis://h:6379/0");
        let error = super::connect("redis://:s3cret@").err().unwrap_or_default();
        assert!(!error.contains("s3cret"), "{error}");
    }
}
