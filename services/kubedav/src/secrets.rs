//! `kubedav ensure-secrets`: creates the Secrets a Helm release needs but must not render,
//! each one only when it is missing, so its values never change once made.
//!
//! A chart that renders a generated password (`randAlphaNum`) changes it on every
//! render where `lookup` cannot see the cluster, as under `helm template` and so under
//! Argo CD: every sync would change the admin password and restart every pod. The chart
//! instead runs this in a pre-install/pre-upgrade hook Job, with a Role allowed to get,
//! create and patch Secrets, and the pods read Secrets the chart never renders.
//!
//! It talks to the API server the way a pod does: the service account's token and CA
//! from `/var/run/secrets/kubernetes.io/serviceaccount`, the address from
//! `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` (each can be given instead,
//! which the chart test does from outside the cluster).
//!
//! A Secret that a chart before this one rendered is still owned by the Helm release,
//! and Helm would delete it on the upgrade that stops rendering it. Such a Secret is
//! annotated `helm.sh/resource-policy: keep`, which Helm reads on the live object before
//! deleting, so the password survives the upgrade.

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Where the service account's files are mounted in every pod.
pub(crate) const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const LETTERS_AND_DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// One Secret to make when it is missing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Wanted {
    /// A users file with one generated login, `admin`: keys `users` (the file),
    /// `username` and `password` (for NOTES.txt and `helm test`).
    Users { name: String },
    /// One key holding 48 random letters and digits (tokens, HMAC keys, passwords).
    Random { name: String, key: String },
}

impl Wanted {
    /// Parses `NAME/KEY` (a `--random` argument, as clap reads it).
    pub(crate) fn random(argument: &str) -> Result<Self, String> {
        match argument.split_once('/') {
            Some((name, key)) if !name.is_empty() && !key.is_empty() => Ok(Self::Random {
                name: name.to_owned(),
                key: key.to_owned(),
            }),
            _ => Err("expected NAME/KEY, e.g. kubedav-grpc-token/token".into()),
        }
    }

    fn name(&self) -> &str {
        match self {
            Self::Users { name } | Self::Random { name, .. } => name,
        }
    }

    /// The Secret's `data`, base64 values, freshly generated.
    fn generate(&self) -> Result<serde_json::Map<String, Value>, String> {
        let mut data = serde_json::Map::new();
        match self {
            Self::Users { .. } => {
                let password = random_text(24)?;
                let users = format!("admin:{}\n", kubedav_auth::passwd::sha512_crypt(&password)?);
                data.insert("users".into(), encode(&users));
                data.insert("username".into(), encode("admin"));
                data.insert("password".into(), encode(&password));
            }
            Self::Random { key, .. } => {
                data.insert(key.clone(), encode(&random_text(48)?));
            }
        }
        Ok(data)
    }
}

/// How to reach the API server.
pub(crate) struct Connection {
    /// `https://host:port`, no trailing slash.
    pub server: String,
    pub token_file: PathBuf,
    pub ca_file: PathBuf,
    pub namespace: String,
}

impl Connection {
    /// The in-cluster connection, with any of its parts given instead.
    pub(crate) fn in_cluster(
        server: Option<String>,
        token_file: Option<PathBuf>,
        ca_file: Option<PathBuf>,
        namespace: Option<String>,
    ) -> Result<Self, String> {
        let dir = Path::new(SERVICE_ACCOUNT_DIR);
        let server = match server {
            Some(server) => server.trim_end_matches('/').to_owned(),
            None => {
                let host = std::env::var("KUBERNETES_SERVICE_HOST").map_err(|_| {
                    "KUBERNETES_SERVICE_HOST is not set: outside a pod, give --api-server".to_owned()
                })?;
                let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
                let host = if host.contains(':') {
                    format!("[{host}]")
                } else {
                    host
                };
                format!("https://{host}:{port}")
            }
        };
        let namespace = match namespace {
            Some(namespace) => namespace,
            None => std::fs::read_to_string(dir.join("namespace"))
                .map(|n| n.trim().to_owned())
                .map_err(|e| {
                    format!(
                        "{}/namespace: {e}; outside a pod, give --namespace",
                        dir.display()
                    )
                })?,
        };
        Ok(Self {
            server,
            token_file: token_file.unwrap_or_else(|| dir.join("token")),
            ca_file: ca_file.unwrap_or_else(|| dir.join("ca.crt")),
            namespace,
        })
    }
}

/// What happened to one Secret.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    Created,
    Kept,
    /// Kept, and annotated so that Helm no longer deletes it.
    TakenOverFromHelm,
}

/// Makes each wanted Secret that is missing, labelled with `labels`; prints one line
/// per Secret. Fails at the first answer it cannot act on, naming what to do.
pub(crate) async fn ensure(
    connection: &Connection,
    wanted: &[Wanted],
    labels: &[(String, String)],
) -> Result<Vec<(String, Outcome)>, String> {
    let api = Api::connect(connection)?;
    let mut outcomes = Vec::new();
    for secret in wanted {
        let outcome = api.ensure(secret, labels).await?;
        outcomes.push((secret.name().to_owned(), outcome));
    }
    Ok(outcomes)
}

struct Api {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// The CA the API server's certificate must be issued by.
    ca_file: PathBuf,
    secrets_url: String,
    authorization: String,
    namespace: String,
}

impl Api {
    fn connect(connection: &Connection) -> Result<Self, String> {
        let token = std::fs::read_to_string(&connection.token_file).map_err(|e| {
            format!(
                "the service account token {}: {e}",
                connection.token_file.display()
            )
        })?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(cluster_tls(&connection.ca_file)?)
            .https_only()
            .enable_http1()
            .build();
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            ca_file: connection.ca_file.clone(),
            secrets_url: format!(
                "{}/api/v1/namespaces/{}/secrets",
                connection.server, connection.namespace
            ),
            authorization: format!("Bearer {}", token.trim()),
            namespace: connection.namespace.clone(),
        })
    }

    async fn ensure(&self, wanted: &Wanted, labels: &[(String, String)]) -> Result<Outcome, String> {
        let name = wanted.name();
        let url = format!("{}/{name}", self.secrets_url);
        let (status, existing) = self.call(Method::GET, &url, None, "").await?;
        match status {
            StatusCode::OK => {
                let annotations = &existing["metadata"]["annotations"];
                let helm_owned = annotations.get("meta.helm.sh/release-name").is_some();
                let kept_by_helm = annotations.get("helm.sh/resource-policy") == Some(&json!("keep"));
                if !helm_owned || kept_by_helm {
                    return Ok(Outcome::Kept);
                }
                let patch = json!({"metadata": {"annotations": {"helm.sh/resource-policy": "keep"}}});
                let (status, answer) = self
                    .call(Method::PATCH, &url, Some(patch), "application/merge-patch+json")
                    .await?;
                self.expect(status, &answer, &[StatusCode::OK], "patch", name)?;
                Ok(Outcome::TakenOverFromHelm)
            }
            StatusCode::NOT_FOUND => {
                let mut all_labels: serde_json::Map<String, Value> =
                    labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                all_labels.insert("app.kubernetes.io/managed-by".into(), json!("kubedav"));
                let body = json!({
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": name, "labels": all_labels},
                    "type": "Opaque",
                    "data": wanted.generate()?,
                });
                let (status, answer) = self
                    .call(Method::POST, &self.secrets_url, Some(body), "application/json")
                    .await?;
                if status == StatusCode::CONFLICT {
                    // Made by another run of this hook meanwhile: theirs stands.
                    return Ok(Outcome::Kept);
                }
                self.expect(status, &answer, &[StatusCode::CREATED], "create", name)?;
                Ok(Outcome::Created)
            }
            _ => self
                .expect(status, &existing, &[], "get", name)
                .map(|_| Outcome::Kept),
        }
    }

    /// An error for any status not in `expected`, saying what the service account needs.
    fn expect(
        &self,
        status: StatusCode,
        answer: &Value,
        expected: &[StatusCode],
        verb: &str,
        name: &str,
    ) -> Result<(), String> {
        if expected.contains(&status) {
            return Ok(());
        }
        let message = answer["message"].as_str().unwrap_or("");
        let hint = match status {
            StatusCode::UNAUTHORIZED => {
                "the service account token was refused: is it this cluster's?".to_owned()
            }
            StatusCode::FORBIDDEN => format!(
                "the service account may not {verb} Secrets in {}: it needs a Role with get, create \
                 and patch on secrets (the chart's secrets hook makes one)",
                self.namespace
            ),
            _ => "see the API server's message".to_owned(),
        };
        Err(format!(
            "{verb} Secret {}/{name}: {status} {message}; {hint}",
            self.namespace
        ))
    }

    async fn call(
        &self,
        method: Method,
        url: &str,
        body: Option<Value>,
        content_type: &str,
    ) -> Result<(StatusCode, Value), String> {
        let mut request = Request::builder()
            .method(method.clone())
            .uri(url)
            .header(header::AUTHORIZATION, &self.authorization)
            .header(header::ACCEPT, "application/json");
        if !content_type.is_empty() {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("{method} {url}: {e}"))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| format!("{method} {url}: {}", self.with_causes(&e)))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{method} {url}: reading the answer: {e}"))?
            .to_bytes();
        Ok((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }

    /// An error and its causes (hyper's own message does not say why a connection
    /// failed), with what to do when the cause is the API server's certificate.
    fn with_causes(&self, error: &dyn std::error::Error) -> String {
        let mut text = kubedav_kit::errors::with_causes(error);
        if kubedav_kit::tls::untrusted_certificate(&text) {
            text.push_str(&format!(
                " (the API server's certificate is not issued by the CA in {}: give the \
                 cluster's CA with --ca-file)",
                self.ca_file.display()
            ));
        }
        text
    }
}

/// TLS that trusts only the cluster's CA, as a pod's client does.
fn cluster_tls(ca_file: &Path) -> Result<rustls::ClientConfig, String> {
    use kubedav_kit::tls::{TlsError, Trust, client_config};
    client_config(Trust::Only(ca_file)).map_err(|e| match e {
        TlsError::Protocols(_) => format!("TLS to the API server: {e}"),
        _ => format!("the cluster CA {e}"),
    })
}

fn encode(text: &str) -> Value {
    use base64::Engine;
    json!(base64::engine::general_purpose::STANDARD.encode(text))
}

/// `length` letters and digits, uniformly drawn (bytes of 248 and over are redrawn).
fn random_text(length: usize) -> Result<String, String> {
    let mut text = String::with_capacity(length);
    let mut buffer = [0u8; 64];
    while text.len() < length {
        getrandom::fill(&mut buffer).map_err(|e| format!("no randomness: {e}"))?;
        for &byte in &buffer {
            if byte < 248 && text.len() < length {
                text.push(char::from(LETTERS_AND_DIGITS[usize::from(byte % 62)]));
            }
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_text_is_letters_and_digits_of_the_length_asked() {
        let a = random_text(48).unwrap();
        assert_eq!(a.len(), 48);
        assert!(a.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(a, random_text(48).unwrap());
    }

    #[test]
    fn random_arguments_need_a_name_and_a_key() {
        assert_eq!(
            Wanted::random("kubedav-grpc-token/token").unwrap(),
            Wanted::Random {
                name: "kubedav-grpc-token".into(),
                key: "token".into()
            }
        );
        for bad in ["token", "/token", "name/", ""] {
            assert!(Wanted::random(bad).unwrap_err().contains("NAME/KEY"), "{bad}");
        }
    }

    #[test]
    fn a_users_secret_holds_a_login_that_verifies() {
        let data = Wanted::Users { name: "u".into() }.generate().unwrap();
        let decode = |key: &str| {
            use base64::Engine;
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(data[key].as_str().unwrap())
                    .unwrap(),
            )
            .unwrap()
        };
        let users = kubedav_auth::users::parse(&decode("users"), false);
        assert!(users.problems.is_empty(), "{:?}", users.problems);
        assert_eq!(decode("username"), "admin");
        let password = decode("password");
        assert_eq!(password.len(), 24);
        assert!(users.users["admin"].verify(&password));
        assert!(!users.users["admin"].verify("not the password"));
    }
}
