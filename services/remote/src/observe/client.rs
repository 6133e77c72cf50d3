//! The client end: [`ObservedChannel`].

use super::body::{Completion, ObservedBody};
use super::metrics::CLIENT;
use crate::balance::Backends;
use kubedav_kit::telemetry::propagation::{HeaderInjector, REQUEST_ID, REQUEST_ID_HEADER};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::transport::Channel;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// A gRPC channel whose calls are observed: the client end of [the module](super). Each
/// call takes the next of the service's [`Backends`].
#[derive(Debug)]
pub struct ObservedChannel {
    backends: Arc<Backends>,
    /// `Bearer <the shared token>`, sent with every call when set.
    token: Option<http::HeaderValue>,
    /// The channel `poll_ready` chose for the next call.
    picked: Option<Channel>,
    address: Arc<str>,
    port: i64,
}

impl Clone for ObservedChannel {
    fn clone(&self) -> Self {
        Self {
            backends: self.backends.clone(),
            token: self.token.clone(),
            picked: None,
            address: self.address.clone(),
            port: self.port,
        }
    }
}

impl ObservedChannel {
    /// Observes the calls on `channel`, which was made for `url` (`http://host:port`): the
    /// host and port become the spans' `server.address` and `server.port`.
    pub fn new(channel: Channel, url: &str) -> Self {
        Self::balanced(Backends::single(channel), url)
    }

    /// Observes the calls spread over `backends`, made for `url`.
    pub fn balanced(backends: Arc<Backends>, url: &str) -> Self {
        let uri: Option<http::Uri> = url.parse().ok();
        let address = uri
            .as_ref()
            .and_then(|u| u.host())
            .unwrap_or(url)
            .trim_matches(['[', ']'])
            .into();
        let port = uri.and_then(|u| u.port_u16()).map_or(-1, i64::from);
        Self {
            backends,
            token: None,
            picked: None,
            address,
            port,
        }
    }

    /// Sends `token` (the services' `--grpc-token`) with every call; `None` or an empty
    /// token sends none.
    pub fn with_token(mut self, token: Option<&str>) -> Result<Self, String> {
        self.token = match token.filter(|t| !t.is_empty()) {
            Some(token) => {
                let mut value = http::HeaderValue::try_from(format!("Bearer {token}"))
                    .map_err(|_| "the gRPC token must be printable ASCII".to_owned())?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        Ok(self)
    }
}

impl ObservedChannel {
    /// The span of one outgoing call. None when nothing would read it
    /// ([`super::span_wanted`]: it continues a trace when a span was made above it).
    fn client_span(&self, path: &str) -> tracing::Span {
        let continues = !tracing::Span::current().is_none();
        if !super::span_wanted(continues) && !tracing::enabled!(tracing::Level::DEBUG) {
            return tracing::Span::none();
        }
        rpc_span!("grpc.client", "client", path, self.address, self.port)
    }
}

impl tower_service::Service<http::Request<tonic::body::Body>> for ObservedChannel {
    type Response = http::Response<ObservedBody<tonic::body::Body>>;
    /// A [`tonic::Status`] (UNAVAILABLE) in a box, which the generated clients pass on
    /// as the call's status.
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let backends = &self.backends;
        self.picked
            .get_or_insert_with(|| backends.pick())
            .poll_ready(cx)
            .map_err(connection_failed)
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> Self::Future {
        let path = request.uri().path().to_owned();
        let span = self.client_span(&path);
        if !span.is_disabled() {
            let context = span.context();
            opentelemetry::global::get_text_map_propagator(|propagator| {
                propagator.inject_context(&context, &mut HeaderInjector(request.headers_mut()))
            });
        }
        if let Ok(Ok(id)) = REQUEST_ID.try_with(|id| http::HeaderValue::from_str(id)) {
            request.headers_mut().insert(REQUEST_ID_HEADER, id);
        }
        if let Some(token) = &self.token {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, token.clone());
        }
        let completion = Completion::start(&CLIENT, &path, span.clone(), true);
        let call = match self.picked.take() {
            Some(mut channel) => channel.call(request),
            // Called without poll_ready (tower's contract forbids it): the channel's
            // own buffer then refuses the call.
            None => self.backends.pick().call(request),
        };
        Box::pin(
            async move {
                match call.await {
                    Ok(response) => {
                        let (parts, body) = response.into_parts();
                        let body = ObservedBody::new(body, completion, &parts.headers);
                        Ok(http::Response::from_parts(parts, body))
                    }
                    Err(e) => {
                        completion.finish(tonic::Code::Unavailable);
                        Err(connection_failed(e))
                    }
                }
            }
            .instrument(span),
        )
    }
}

/// The status of a call the channel failed, as tonic reads it (a refused connection
/// is UNAVAILABLE), except that a connection broken while the call was on it or on its
/// way to it (the service stopped or restarted) is UNAVAILABLE too: a 503 with
/// Retry-After. tonic calls the first UNKNOWN (a 500 at the gateway) and the second, a
/// call hyper had queued for a connection that then closed, CANCELLED (a 400). Only
/// tonic's own `grpc-timeout` stays CANCELLED, which [`crate::deadline`] turns into
/// DEADLINE_EXCEEDED.
fn connection_failed(error: tonic::transport::Error) -> Box<dyn std::error::Error + Send + Sync> {
    Box::new(broken_call_status(Box::new(error)))
}

fn broken_call_status(error: Box<dyn std::error::Error + Send + Sync>) -> tonic::Status {
    use std::error::Error as _;
    let status = tonic::Status::from_error(error);
    let broken = match status.code() {
        tonic::Code::Unknown => true,
        tonic::Code::Cancelled => !caused_by::<tonic::TimeoutExpired>(&status),
        _ => false,
    };
    if !broken {
        return status;
    }
    let cause = status
        .source()
        .and_then(|error| error.source())
        .map(|cause| format!(": {cause}"))
        .unwrap_or_default();
    tonic::Status::unavailable(format!(
        "the connection to the service broke ({}{cause}); retry shortly",
        status.message()
    ))
}

/// Whether an error of type `E` is in `error`'s chain of sources.
fn caused_by<E: std::error::Error + 'static>(error: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(error), |error| error.source()).any(|error| error.is::<E>())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call hyper queued for a connection that closed before taking it.
    async fn call_on_a_closed_connection() -> hyper::Error {
        let (near, _far) = tokio::io::duplex(64);
        let (mut sender, connection) = hyper::client::conn::http2::handshake::<_, _, String>(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(near),
        )
        .await
        .expect("the handshake is sent lazily");
        drop(connection);
        let request = http::Request::post("http://fileio/kubedav.FileIo/Read")
            .body(String::new())
            .unwrap();
        sender.send_request(request).await.unwrap_err()
    }

    #[tokio::test]
    async fn a_call_cancelled_by_a_closing_connection_is_unavailable() {
        let error = call_on_a_closed_connection().await;
        assert!(error.is_canceled(), "{error:?}");
        let status = broken_call_status(Box::new(error));
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert!(status.message().contains("retry shortly"), "{status:?}");
    }

    #[test]
    fn tonics_own_timeout_stays_cancelled_for_the_deadline_to_read() {
        let status = broken_call_status(Box::new(tonic::TimeoutExpired(())));
        assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
    }

    #[test]
    fn a_refused_connection_is_unavailable() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let status = broken_call_status(Box::new(tonic::ConnectError(Box::new(refused))));
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    }
}
