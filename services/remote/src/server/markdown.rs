//! [`MarkdownGrpc`]: any [`Markdown`] as the `kubedav.markdown.v1.Markdown` gRPC service.

use crate::stubs::markdown as stubs;
use futures_util::StreamExt;
use kubedav_api::markdown::*;
use kubedav_api::pb::markdown::v1 as pb;
use kubedav_api::{BoxStream, MAX_CHUNK_BYTES};
use std::sync::Arc;
use tonic::Status;

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
    pub fn into_service(self) -> stubs::markdown_server::MarkdownServer<Self> {
        stubs::markdown_server::MarkdownServer::new(self).max_decoding_message_size(4 * 1024 * 1024)
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
impl stubs::markdown_server::Markdown for MarkdownGrpc {
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
