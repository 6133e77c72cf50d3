//! [`RemoteMarkdown`]: the [`Markdown`] port over gRPC.

use super::Caller;
use crate::deadline;
use crate::observe::ObservedChannel;
use crate::stubs::markdown as stubs;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::markdown::*;
use kubedav_api::pb::markdown::v1 as pb;
use tonic::Status;

type Client = stubs::markdown_client::MarkdownClient<ObservedChannel>;

/// The service's name in deadline errors.
const CALLEE: &str = "markdown";

/// [`Markdown`] over gRPC: what a gateway uses in microservices mode.
#[derive(Clone)]
pub struct RemoteMarkdown {
    calls: Caller<Client>,
}

impl RemoteMarkdown {
    /// A client on `channel`: one connection, or a balanced set of them
    /// ([`crate::balance::channel`]), observed ([`ObservedChannel`]).
    pub fn new(channel: ObservedChannel) -> Self {
        let client =
            stubs::markdown_client::MarkdownClient::new(channel).max_decoding_message_size(4 * 1024 * 1024);
        Self {
            calls: Caller::new(client, CALLEE),
        }
    }

    /// Gives every call `timeout` (`--rpc-timeout-seconds`) instead of
    /// [`crate::deadline::DEFAULT_CALL_TIMEOUT`].
    pub fn with_call_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.calls.set_timeout(timeout);
        self
    }
}

/// Reads a summary and the Markdown chunks after it; `None` for an empty stream.
async fn collect(mut stream: tonic::Streaming<pb::ConvertResponse>) -> Result<Option<Rendered>, Status> {
    let summary = match stream.message().await? {
        None => return Ok(None),
        Some(pb::ConvertResponse {
            item: Some(pb::convert_response::Item::Summary(summary)),
        }) => summary,
        Some(_) => return Err(Status::internal("markdown answered without a summary first")),
    };
    let mut markdown = BytesMut::with_capacity(summary.markdown_bytes as usize);
    while let Some(message) = stream.message().await? {
        match message.item {
            Some(pb::convert_response::Item::Markdown(chunk)) => markdown.extend_from_slice(&chunk),
            _ => return Err(Status::internal("markdown sent a second summary")),
        }
    }
    Ok(Some(Rendered {
        summary,
        markdown: markdown.freeze(),
    }))
}

#[async_trait::async_trait]
impl Markdown for RemoteMarkdown {
    async fn lookup(&self, request: LookupRequest) -> Result<Option<Rendered>, Status> {
        let t = self.calls.timeout();
        deadline::within(CALLEE, t, async {
            collect(
                self.calls
                    .client()
                    .lookup(deadline::request(request, t))
                    .await?
                    .into_inner(),
            )
            .await
        })
        .await
    }

    async fn convert(&self, header: ConvertHeader, html: BoxStream<Bytes>) -> Result<Rendered, Status> {
        let first = futures_util::stream::iter([pb::ConvertRequest {
            item: Some(pb::convert_request::Item::Header(header)),
        }]);
        // A failing source ends the upload early; the service then answers for what it
        // got, and the gateway serves the HTML instead (fail-open), so nothing is lost.
        let body = UntilError { html, done: false };
        // The whole conversion, sending the HTML included, within one deadline.
        deadline::within(CALLEE, self.calls.timeout(), async {
            let reply = self.calls.client().convert(first.chain(body)).await?.into_inner();
            collect(reply)
                .await?
                .ok_or_else(|| Status::internal("markdown answered Convert with nothing"))
        })
        .await
    }
}

/// HTML chunks as Convert messages, ending at the source's first error.
struct UntilError {
    html: BoxStream<Bytes>,
    done: bool,
}

impl futures_util::Stream for UntilError {
    type Item = pb::ConvertRequest;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        if self.done {
            return Poll::Ready(None);
        }
        match self.html.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => Poll::Ready(Some(pb::ConvertRequest {
                item: Some(pb::convert_request::Item::Html(chunk)),
            })),
            Poll::Ready(Some(Err(_)) | None) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
