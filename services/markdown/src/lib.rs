//! kubedav's markdown service core: HTML to Markdown (CommonMark with GFM tables) for
//! agents that send `Accept: text/markdown`.
//!
//! [`convert`] decodes the bytes ([`charset`]), parses them with html5ever (the
//! spec-compliant HTML5 parser, so malformed HTML is repaired as browsers do), and renders
//! the tree ([`render`]) within limits on input size, nesting depth and time.

pub mod charset;
pub mod render;
pub mod service;

pub use render::{CONVERTER_VERSION, ConvertError, Converted, Options, convert};
pub use service::MarkdownCore;
