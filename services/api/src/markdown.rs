//! The markdown port: [`Markdown`], HTML to Markdown conversion as the gateway sees it.
//! The gRPC adapters are `kubedav_remote::client::RemoteMarkdown` and
//! `kubedav_remote::server::MarkdownGrpc`. Beside it, the rules both sides write Markdown
//! by ([`escape`]): the converter, and the gateway's Markdown listing of a collection.

pub mod escape;

use crate::BoxStream;
use crate::pb::markdown::v1 as pb;
use bytes::Bytes;
use tonic::Status;

pub use pb::{ConvertHeader, ConvertSummary, LookupRequest, Options as ConvertOptions};

/// The converter's version: part of the cache key and of the Markdown variant's etag.
/// Bump it whenever the converter's output changes for the same input.
pub const CONVERTER_VERSION: &str = "2";

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
