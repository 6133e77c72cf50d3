//! kubedav's markdown service core: HTML to Markdown (CommonMark with GFM tables) for
//! agents that send `Accept: text/markdown`.
//!
//! [`convert`] decodes the bytes ([`charset`]), splits them into tokens ([`tokenizer`],
//! byte-level, WHATWG states), applies the tree-construction rules Markdown needs as the
//! tokens come ([`builder`]: implied end tags, tables with foster parenting, formatting
//! carried across blocks, the head) and writes Markdown in the same pass ([`writer`]),
//! within limits on input size, nesting depth and time. No tree is built: memory follows
//! the input, not its element count. `docs/markdown.md` explains the choices.

#![forbid(unsafe_code)]

pub mod builder;
pub mod charset;
pub mod convert;
pub mod service;
pub mod tokenizer;
pub mod writer;

pub use convert::{CONVERTER_VERSION, Content, ConvertError, Converted, Options, convert};
/// Escaping for Markdown, shared with the gateway: [`kubedav_api::markdown::escape`].
pub use kubedav_api::markdown::escape;
pub use service::MarkdownCore;
