//! HTTP errors: a status and a message the client can act on, and the mapping from the
//! services' gRPC codes.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use tonic::Code;

/// Seconds a client is asked to wait after a 503.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// An error answered with `status` and a plain-text body saying what was wrong, or
/// with a response built for it (a 423 naming the locks in the way, a WebDAV error
/// body), so that handlers pass every refusal on with `?`.
#[derive(Debug)]
pub struct HttpError {
    /// The HTTP status.
    pub status: StatusCode,
    /// One sentence for the client (empty for a prebuilt response).
    pub message: String,
    /// The whole answer, when it is more than a status and a sentence.
    prebuilt: Option<Box<Response>>,
}

impl HttpError {
    /// An error with this status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            prebuilt: None,
        }
    }

    /// An error answered with `response` as it is.
    pub fn respond(response: Response) -> Self {
        Self {
            status: response.status(),
            message: String::new(),
            prebuilt: Some(Box::new(response)),
        }
    }

    /// 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
}

/// The HTTP status for a service's gRPC code, where the method does not decide
/// otherwise (see `docs/architecture.md`).
pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists => StatusCode::CONFLICT,
        Code::FailedPrecondition => StatusCode::CONFLICT,
        Code::Aborted => StatusCode::PRECONDITION_FAILED,
        Code::InvalidArgument | Code::Cancelled => StatusCode::BAD_REQUEST,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::ResourceExhausted => StatusCode::INSUFFICIENT_STORAGE,
        Code::OutOfRange => StatusCode::FORBIDDEN,
        // Only the shared token between services is refused this way: the gateway's
        // configuration, never the client's credentials.
        Code::Unauthenticated => StatusCode::BAD_GATEWAY,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Internal | Code::Unknown | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<tonic::Status> for HttpError {
    fn from(status: tonic::Status) -> Self {
        let http = http_status(status.code());
        let message = match status.code() {
            Code::Unavailable => "a backend service is unavailable; retry shortly".to_owned(),
            Code::DeadlineExceeded => "a backend service did not answer in time".to_owned(),
            Code::Unauthenticated => {
                tracing::error!(
                    message = status.message(),
                    "a backend service refused the gateway's token"
                );
                "a backend service refused this gateway (a --grpc-token mismatch); the server log says which"
                    .to_owned()
            }
            Code::Internal | Code::Unknown | Code::DataLoss => {
                tracing::error!(code = ?status.code(), message = status.message(), "backend error");
                "internal error; the server log has the details under this request's id".to_owned()
            }
            _ => status.message().to_owned(),
        };
        if status.code() == Code::Unavailable {
            tracing::warn!(message = status.message(), "backend unavailable");
        }
        Self::new(http, message)
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        if let Some(response) = self.prebuilt {
            return *response;
        }
        let mut response = (
            self.status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            )],
            format!("{}\n", self.message),
        )
            .into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        response
    }
}

/// The result type of every handler.
pub type HttpResult = Result<Response, HttpError>;
