//! A body wrapper that counts the bytes it carries into a Prometheus counter, for the
//! gateway's bytes-in and bytes-out metrics. It adds no copy: frames pass through as
//! they are, and only their length is read.

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use kubedav_metrics::Counter;
use std::pin::Pin;
use std::task::{Context, Poll};

/// `inner`, counting its data bytes into `counter` as they pass.
pub struct CountingBody<B> {
    inner: B,
    counter: Counter,
}

impl<B> CountingBody<B> {
    /// Wraps `inner`.
    pub fn new(inner: B, counter: Counter) -> Self {
        Self { inner, counter }
    }
}

impl<B> Body for CountingBody<B>
where
    B: Body + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.counter.inc_by(data.remaining() as u64);
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
