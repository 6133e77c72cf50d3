//! [`Fetcher`]: the HTTPS client the auth service reads its identity provider with
//! (discovery and the JWKS), bounded in time and size so that a slow or hostile
//! provider costs a bounded amount.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use std::time::Duration;

/// Largest document read from the provider (a discovery document or a JWKS).
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// Longest a fetch may take, connection included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a document could not be had; the message names the URL and what to check.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No connection, a TLS failure or a time-out.
    #[error("{url}: {message}")]
    Unreachable {
        /// The URL asked for.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The provider answered, but not with a document kubedav can use.
    #[error("{url}: {message}")]
    Invalid {
        /// The URL asked for.
        url: String,
        /// What was wrong with the answer.
        message: String,
    },
}

/// Fetches JSON documents over HTTP(S), trusting the public roots and an optional CA file.
#[derive(Clone)]
pub struct Fetcher {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Fetcher {
    /// A client trusting the public roots and, if given, the PEM certificates of `ca_file`
    /// (a private identity provider's CA).
    pub fn new(ca_file: Option<&std::path::Path>) -> Result<Self, String> {
        let tls = kubedav_kit::tls::client_config(kubedav_kit::tls::Trust::PublicRoots { extra_ca: ca_file })
            .map_err(|e| format!("--oidc-ca-file {e}"))?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Ok(Self { client })
    }

    /// GETs `url` and parses its JSON body as `T`.
    pub async fn json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, FetchError> {
        let request = http::Request::get(url)
            .header(http::header::ACCEPT, "application/json")
            .body(Full::default());
        let (status, body) = self.send(url, request).await?;
        if !status.is_success() {
            return Err(FetchError::Unreachable {
                url: url.to_owned(),
                message: format!("answered {status}"),
            });
        }
        parse(url, &body)
    }

    /// POSTs `form` (`application/x-www-form-urlencoded`) to `url` as the client
    /// `client_id` with `client_secret` (HTTP Basic, RFC 6749 2.3.1), and answers the
    /// status and the JSON body: a token endpoint answers errors as JSON too.
    pub async fn post_form(
        &self,
        url: &str,
        form: &[(&str, &str)],
        client_id: &str,
        client_secret: &str,
    ) -> Result<(http::StatusCode, serde_json::Value), FetchError> {
        use base64::Engine;
        let encoded = |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            encoded(client_id),
            encoded(client_secret)
        ));
        let request = http::Request::post(url)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(http::header::AUTHORIZATION, format!("Basic {basic}"))
            .body(Full::new(Bytes::from(body)));
        let (status, body) = self.send(url, request).await?;
        Ok((status, parse(url, &body)?))
    }

    async fn send(
        &self,
        url: &str,
        request: Result<http::Request<Full<Bytes>>, http::Error>,
    ) -> Result<(http::StatusCode, Bytes), FetchError> {
        let unreachable = |message: String| FetchError::Unreachable {
            url: url.to_owned(),
            message,
        };
        let request = request.map_err(|e| FetchError::Invalid {
            url: url.to_owned(),
            message: format!("not a URL kubedav can ask: {e}"),
        })?;
        let fetch = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| unreachable(describe(&e)))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_DOCUMENT_BYTES)
                .collect()
                .await
                .map_err(|e| {
                    unreachable(format!(
                        "the answer broke off or passed {MAX_DOCUMENT_BYTES} bytes: {e}"
                    ))
                })?
                .to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(FETCH_TIMEOUT, fetch)
            .await
            .map_err(|_| unreachable(format!("no answer within {} s", FETCH_TIMEOUT.as_secs())))?
    }
}

fn parse<T: serde::de::DeserializeOwned>(url: &str, body: &[u8]) -> Result<T, FetchError> {
    serde_json::from_slice(body).map_err(|e| FetchError::Invalid {
        url: url.to_owned(),
        message: format!("not the JSON expected: {e}"),
    })
}

/// A client error with its causes, which hold what went wrong (refused, TLS, DNS).
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
