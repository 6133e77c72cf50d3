//! Recording a call's end: [`ObservedBody`] finishes its [`Completion`] when the gRPC
//! status arrives, or as cancelled when it is dropped first.

use super::metrics::{EndMetrics, MethodMetrics, status_in};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// What is left to record when a call ends.
pub(super) struct Completion {
    metrics: &'static EndMetrics,
    method: &'static MethodMetrics,
    started: Instant,
    span: tracing::Span,
    /// Whether a non-OK status marks the span as an error (always on the client side;
    /// on the server side only for the codes that mean the server failed).
    client: bool,
}

impl Completion {
    pub(super) fn start(metrics: &'static EndMetrics, path: &str, span: tracing::Span, client: bool) -> Self {
        let method = metrics.of(path);
        method.started.inc();
        Self {
            metrics,
            method,
            started: Instant::now(),
            span,
            client,
        }
    }

    pub(super) fn finish(self, code: tonic::Code) {
        self.method.handled(self.metrics, code).inc();
        self.method.handling.observe(
            self.started.elapsed().as_secs_f64(),
            super::sampled_trace_id(&self.span),
        );
        self.span.record("rpc.grpc.status_code", code as i64);
        let failed = match code {
            tonic::Code::Ok => false,
            tonic::Code::Unknown
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Unimplemented
            | tonic::Code::Internal
            | tonic::Code::Unavailable
            | tonic::Code::DataLoss => true,
            _ => self.client,
        };
        if failed {
            self.span.record("otel.status_code", "ERROR");
        }
    }
}

/// A response body that records its call's completion when the status arrives (in the
/// trailers, or in the headers of a trailers-only response), or `Canceled` if it is
/// dropped before. While it is polled its span is entered, so the work of a streaming
/// response is part of its call.
pub struct ObservedBody<B> {
    inner: B,
    completion: Option<Completion>,
}

impl<B> ObservedBody<B> {
    pub(super) fn new(inner: B, completion: Completion, headers: &http::HeaderMap) -> Self {
        let mut body = Self {
            inner,
            completion: Some(completion),
        };
        if let Some(code) = status_in(headers) {
            body.finish(code);
        }
        body
    }

    fn finish(&mut self, code: tonic::Code) {
        if let Some(completion) = self.completion.take() {
            completion.finish(code);
        }
    }
}

impl<B> Drop for ObservedBody<B> {
    fn drop(&mut self) {
        self.finish(tonic::Code::Cancelled);
    }
}

impl<B> Body for ObservedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let span = self.completion.as_ref().map(|c| c.span.clone());
        let _entered = span.as_ref().map(|span| span.enter());
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(status_in) {
                    self.finish(code);
                }
            }
            Poll::Ready(Some(Err(_))) => self.finish(tonic::Code::Unavailable),
            // A stream that ends without a status is a broken call.
            Poll::Ready(None) => self.finish(tonic::Code::Unknown),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
