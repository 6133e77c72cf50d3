//! The markdown port: [`Markdown`], its gRPC client adapter [`RemoteMarkdown`] and its
//! gRPC server adapter [`MarkdownGrpc`].

use crate::deadline;
use crate::pb::markdown::v1 as pb;
use crate::rpc::ObservedChannel;
use crate::{BoxStream, MAX_CHUNK_BYTES};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use std::sync::Arc;
use tonic::Status;

pub use pb::{ConvertHeader, ConvertSummary, LookupRequest, Options as ConvertOptions};

/// The converter's version: part of the cache key and of the Markdown variant's etag.
/// Bump it whenever the converter's output changes for the same input.
pub const CONVERTER_VERSION: &str = "1";

/// The service's name in deadline errors.
const CALLEE: &str = "markdown";

/// A conversion's result.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// Sizes, token estimate, whether it came from the cache.
    pub summary: ConvertSummary,
    /// The Markdown, UTF-8.
    pub markdown: Bytes,
}

/// HTML to Markdown conversion, as the gateway sees it. See
/// `proto/kubedav/markdown/v1/markdown.proto` for the calls and error codes.
#[async_trait::async_trait]
pub trait Markdown: Send + Sync + 'static {
    /// The cached conversion of a source, if there is one.
    async fn lookup(&self, request: LookupRequest) -> Result<Option<Rendered>, Status>;
    /// Converts streamed HTML.
    async fn convert(&self, header: ConvertHeader, html: BoxStream<Bytes>) -> Result<Rendered, Status>;
}

type Client = pb::markdown_client::MarkdownClient<ObservedChannel>;

/// [`Markdown`] over gRPC: what a gateway uses in microservices mode.
#[derive(Clone)]
pub struct RemoteMarkdown {
    client: Client,
}

impl RemoteMarkdown {
    /// A client on `channel`: one connection, or a balanced set of them
    /// (`kubedav_kit::balance::channel`), observed ([`ObservedChannel`]).
    pub fn new(channel: ObservedChannel) -> Self {
        let client =
            pb::markdown_client::MarkdownClient::new(channel).max_decoding_message_size(4 * 1024 * 1024);
        Self { client }
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
        let t = deadline::call_timeout();
        deadline::within(CALLEE, t, async {
            collect(
                self.client
                    .clone()
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
        deadline::within(CALLEE, deadline::call_timeout(), async {
            let reply = self.client.clone().convert(first.chain(body)).await?.into_inner();
            collect(reply)
                .await?
                .ok_or_else(|| Status::internal("markdown answered Convert with nothing"))
        })
        .await
    }
}

/// Exposes any [`Markdown`] implementation as the `kubedav.markdown.v1.Markdown` gRPC
/// service.
pub struct MarkdownGrpc {
    inner: Arc<dyn Markdown>,
}

impl MarkdownGrpc {
    /// Wraps a markdown core.
    pub fn new(inner: Arc<dyn Markdown>) -> Self {
        Self { inner }
    }

    /// The tonic service, ready to be added to a server.
    pub fn into_service(self) -> pb::markdown_server::MarkdownServer<Self> {
        pb::markdown_server::MarkdownServer::new(self).max_decoding_message_size(4 * 1024 * 1024)
    }
}

fn respond(rendered: Option<Rendered>) -> BoxStream<pb::ConvertResponse> {
    let Some(rendered) = rendered else {
        return futures_util::stream::empty().boxed();
    };
    let summary = pb::ConvertResponse {
        item: Some(pb::convert_response::Item::Summary(rendered.summary)),
    };
    let markdown = rendered.markdown;
    let chunks = (0..markdown.len()).step_by(MAX_CHUNK_BYTES).map(move |at| {
        let end = (at + MAX_CHUNK_BYTES).min(markdown.len());
        Ok(pb::ConvertResponse {
            item: Some(pb::convert_response::Item::Markdown(markdown.slice(at..end))),
        })
    });
    futures_util::stream::iter(std::iter::once(Ok(summary)).chain(chunks)).boxed()
}

#[async_trait::async_trait]
impl pb::markdown_server::Markdown for MarkdownGrpc {
    type LookupStream = BoxStream<pb::ConvertResponse>;
    type ConvertStream = BoxStream<pb::ConvertResponse>;

    async fn lookup(
        &self,
        request: tonic::Request<LookupRequest>,
    ) -> Result<tonic::Response<Self::LookupStream>, Status> {
        Ok(tonic::Response::new(respond(
            self.inner.lookup(request.into_inner()).await?,
        )))
    }

    async fn convert(
        &self,
        request: tonic::Request<tonic::Streaming<pb::ConvertRequest>>,
    ) -> Result<tonic::Response<Self::ConvertStream>, Status> {
        let mut stream = request.into_inner();
        let header = match stream.message().await? {
            Some(pb::ConvertRequest {
                item: Some(pb::convert_request::Item::Header(header)),
            }) => header,
            _ => {
                return Err(Status::invalid_argument(
                    "the first Convert message must be the header",
                ));
            }
        };
        let html = stream
            .map(|message| match message?.item {
                Some(pb::convert_request::Item::Html(chunk)) => Ok(chunk),
                _ => Err(Status::invalid_argument(
                    "only HTML may follow the Convert header",
                )),
            })
            .boxed();
        Ok(tonic::Response::new(respond(Some(
            self.inner.convert(header, html).await?,
        ))))
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
