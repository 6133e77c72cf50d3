//! What the flags make: the gateway's settings, the Markdown core and the auth core's
//! settings, each from the flags that configure it.

use super::{AuthArgs, Cli, MarkdownArgs};
use std::path::PathBuf;
use std::time::Duration;

impl Cli {
    /// The gateway's settings, from the gateway's flags and the gateway's side of
    /// authentication and Markdown.
    pub(crate) fn gateway_config(&self) -> kubedav_gateway::GatewayConfig {
        let gateway = &self.gateway;
        kubedav_gateway::GatewayConfig {
            max_body_bytes: (gateway.max_body_bytes > 0).then_some(gateway.max_body_bytes),
            max_header_bytes: gateway.max_header_bytes,
            header_read_timeout: Duration::from_secs(gateway.header_read_timeout_seconds.max(1)),
            max_connections: gateway.max_connections.max(1),
            max_connections_per_address: gateway.max_connections_per_address.max(1),
            http_threads: gateway
                .http_threads
                .unwrap_or_else(kubedav_gateway::edge::threads::default_count),
            trusted_proxies: gateway.trusted_proxies.clone(),
            max_lock_owner_bytes: gateway.max_lock_owner_bytes,
            propfind_infinity: gateway.propfind_depth_infinity,
            propfind_max_entries: gateway.propfind_max_entries,
            auth_realm: self.auth.auth_realm.clone(),
            anonymous_read: self.auth.anonymous_read,
            bearer_tokens: self.oidc.enabled(),
            sign_in: self.oidc.gateway_sign_in(),
            read_only_users: self
                .auth
                .read_only_users
                .iter()
                .map(|u| u.trim().to_owned())
                .filter(|u| !u.is_empty())
                .collect(),
            // Read and compiled by `run`, which can say why a file is refused.
            policy: None,
            markdown_max_bytes: self.markdown.markdown_max_bytes,
            markdown_fail_closed: self.markdown.markdown_fail_closed,
            content_signal: self.markdown.content_signal.clone(),
            cors_origins: gateway
                .cors_origins
                .iter()
                .map(|origin| origin.0.clone())
                .collect(),
            upload_digests: gateway.upload_digests.clone(),
            hide_dotfiles: gateway.hide_dotfiles,
            refuse_macos_metadata: gateway.refuse_macos_metadata,
            max_headers: kubedav_gateway::GatewayConfig::default().max_headers,
            base_path: gateway.base_path.clone().unwrap_or_default(),
            links: kubedav_gateway::links::LinkSettings {
                default_cap: self.auth.links.into(),
                max_bytes: self.auth.link_max_bytes,
                admins: self
                    .auth
                    .admins
                    .iter()
                    .map(|u| u.trim().to_owned())
                    .filter(|u| !u.is_empty())
                    .collect(),
            },
        }
    }
}

impl MarkdownArgs {
    /// The markdown core for the markdown settings.
    pub(crate) fn core(&self) -> kubedav_markdown::MarkdownCore {
        let options = kubedav_markdown::Options {
            prune: self
                .markdown_prune
                .iter()
                .map(|p| p.trim().to_ascii_lowercase())
                .filter(|p| !p.is_empty())
                .collect(),
            chars_per_token: self.markdown_chars_per_token,
            max_input_bytes: usize::try_from(self.markdown_max_bytes).unwrap_or(usize::MAX),
            max_depth: self.markdown_max_depth,
            max_time: Duration::from_secs(self.markdown_timeout_seconds.max(1)),
            content: self.markdown_content.into(),
            front_matter: self.markdown_front_matter,
            base_url: None,
            source_etag: None,
        };
        kubedav_markdown::MarkdownCore::new(options, self.markdown_cache_bytes)
    }
}

impl Cli {
    /// The auth core's settings: the users file (if any) and the identity provider.
    pub(crate) fn auth_config(&self) -> Result<kubedav_auth::AuthConfig, String> {
        Ok(self
            .auth
            .config(self.auth.users_file.clone(), self.oidc.config()?))
    }
}

impl AuthArgs {
    /// The auth core's settings for `users_file` and the provider `oidc`.
    pub(crate) fn config(
        &self,
        users_file: Option<PathBuf>,
        oidc: Option<kubedav_auth::oidc::OidcConfig>,
    ) -> kubedav_auth::AuthConfig {
        kubedav_auth::AuthConfig {
            users_file,
            oidc,
            allow_plaintext: self.allow_plaintext_passwords,
            cache_ttl: Duration::from_secs(self.auth_cache_ttl_seconds),
            cache_capacity: 100_000,
            workers: self.auth_workers.unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get() / 2)
                    .unwrap_or(1)
                    .max(1)
            }),
            queue: self.auth_queue,
            max_failures_per_user: self.auth_max_failures,
            max_failures_per_address: self.auth_max_failures_per_address,
            lockout: Duration::from_secs(self.auth_lockout_seconds.max(1)),
        }
    }
}
