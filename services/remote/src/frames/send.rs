//! Sending the calls by hand: a stream of messages as an HTTP/2 body ([`Framed`]).

use super::{Streamed, whole_message};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body::Frame;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::Status;

/// A call's body: each message of `messages` as gRPC frames, a [`Streamed`] message's
/// bytes in a frame of their own ([`Streamed::split`]). A response body ends with its
/// status in the trailers (OK, or the error that ended the messages). A request body
/// ends when its messages do, and fails on their error, which resets the call's stream:
/// never a clean end the service could take for a complete request.
pub struct Framed<S> {
    messages: Option<S>,
    /// The bytes of the message whose framing went out last.
    bytes: Option<Bytes>,
    /// Whether to end with the status (a response).
    trailers: bool,
}

impl<S> Framed<S> {
    /// A response body: `messages`, then the status.
    pub fn response(messages: S) -> Self {
        Self {
            messages: Some(messages),
            bytes: None,
            trailers: true,
        }
    }

    /// A request body: `messages`, which end it when they end.
    pub fn request(messages: S) -> Self {
        Self {
            messages: Some(messages),
            bytes: None,
            trailers: false,
        }
    }
}

/// The trailers that end a call with `status`.
fn trailers(status: &Status) -> http::HeaderMap {
    let mut trailers = http::HeaderMap::with_capacity(2);
    if status.add_header(&mut trailers).is_err() {
        trailers.insert(Status::GRPC_STATUS, http::HeaderValue::from_static("13"));
    }
    trailers
}

impl<S, M> http_body::Body for Framed<S>
where
    S: Stream<Item = Result<M, Status>> + Unpin,
    M: Streamed,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(bytes) = self.bytes.take() {
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        let Some(messages) = self.messages.as_mut() else {
            return Poll::Ready(None);
        };
        let status = match futures_util::ready!(messages.poll_next_unpin(cx)) {
            Some(Ok(message)) => {
                let head = match message.split() {
                    Ok((head, bytes)) => {
                        self.bytes = Some(bytes);
                        head
                    }
                    Err(message) => whole_message(&message),
                };
                return Poll::Ready(Some(Ok(Frame::data(head))));
            }
            Some(Err(status)) => status,
            None => Status::ok(""),
        };
        self.messages = None;
        match (self.trailers, status.code()) {
            (true, _) => Poll::Ready(Some(Ok(Frame::trailers(trailers(&status))))),
            (false, tonic::Code::Ok) => Poll::Ready(None),
            (false, _) => Poll::Ready(Some(Err(status))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_none() && self.messages.is_none()
    }
}

/// A response of `messages` (a stream of results), ready to return from a service.
pub fn response<S, M>(messages: S) -> http::Response<tonic::body::Body>
where
    S: Stream<Item = Result<M, Status>> + Unpin + Send + 'static,
    M: Streamed + 'static,
{
    let mut response = http::Response::new(tonic::body::Body::new(Framed::response(messages)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}
