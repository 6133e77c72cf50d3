//! The markdown service core: [`MarkdownCore`] implements the [`Markdown`] port, with a
//! byte-bounded cache of results keyed by the source's strong etag, the options and the
//! converter version.

use crate::{CONVERTER_VERSION, ConvertError, Options, convert};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::markdown::{
    ConvertHeader, ConvertOptions, ConvertSummary, LookupRequest, Markdown, Rendered,
};
use kubedav_metrics::{Counter, CounterFamily, Histogram};
use moka::sync::Cache;
use std::sync::{Arc, LazyLock};
use tonic::Status;

static CONVERSIONS: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_markdown_conversions_total",
        "Conversions run, by outcome.",
        &["outcome"],
    )
});
static DURATION: LazyLock<Histogram> = LazyLock::new(|| {
    kubedav_metrics::histogram(
        "kubedav_markdown_conversion_duration_seconds",
        "Time to convert one document.",
        &[0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0],
    )
});
static INPUT_BYTES: LazyLock<Counter> =
    LazyLock::new(|| kubedav_metrics::counter("kubedav_markdown_input_bytes_total", "HTML bytes converted."));
static TOKENS: LazyLock<Counter> =
    LazyLock::new(|| kubedav_metrics::counter("kubedav_markdown_tokens_total", "Estimated tokens produced."));
static CACHE_HITS: LazyLock<Counter> = LazyLock::new(|| kubedav_metrics::cache_lookups("markdown", "hit"));
static CACHE_MISSES: LazyLock<Counter> = LazyLock::new(|| kubedav_metrics::cache_lookups("markdown", "miss"));

/// The markdown core.
#[derive(Clone)]
pub struct MarkdownCore {
    defaults: Options,
    cache: Cache<String, Arc<Rendered>>,
}

impl MarkdownCore {
    /// A core with these default options and a result cache of `cache_bytes`.
    pub fn new(defaults: Options, cache_bytes: u64) -> Self {
        let cache = Cache::builder()
            .weigher(|key: &String, value: &Arc<Rendered>| {
                (key.len() + value.markdown.len()).try_into().unwrap_or(u32::MAX)
            })
            .max_capacity(cache_bytes)
            .build();
        Self { defaults, cache }
    }

    fn options(&self, requested: Option<&ConvertOptions>) -> Options {
        let mut options = self.defaults.clone();
        if let Some(requested) = requested {
            if !requested.prune_elements.is_empty() {
                options.prune = requested.prune_elements.clone();
            }
            if requested.chars_per_token > 0.0 {
                options.chars_per_token = requested.chars_per_token;
            }
        }
        options
    }

    /// The options of one request: the service's, with the request's choices and its
    /// page URL (empty: none).
    fn request_options(&self, requested: Option<&ConvertOptions>, base_url: &str, etag: &str) -> Options {
        let mut options = self.options(requested);
        options.base_url = (!base_url.is_empty()).then(|| base_url.to_owned());
        options.source_etag = (!etag.is_empty()).then(|| etag.to_owned());
        options
    }

    fn key(etag: &str, options: &Options) -> String {
        format!(
            "{CONVERTER_VERSION}\0{etag}\0{}\0{}\0{}\0{}\0{}",
            options.prune.join(","),
            options.chars_per_token,
            options.content.as_str(),
            options.front_matter,
            options.base_url.as_deref().unwrap_or("")
        )
    }
}

#[async_trait::async_trait]
impl Markdown for MarkdownCore {
    async fn lookup(&self, request: LookupRequest) -> Result<Option<Rendered>, Status> {
        if request.source_etag.is_empty() {
            return Ok(None);
        }
        let options = self.request_options(request.options.as_ref(), &request.base_url, &request.source_etag);
        Ok(self
            .cache
            .get(&Self::key(&request.source_etag, &options))
            .inspect(|_| {
                CACHE_HITS.inc();
            })
            .or_else(|| {
                CACHE_MISSES.inc();
                None
            })
            .map(|hit| {
                let mut rendered = (*hit).clone();
                rendered.summary.cached = true;
                rendered
            }))
    }

    async fn convert(&self, header: ConvertHeader, mut html: BoxStream<Bytes>) -> Result<Rendered, Status> {
        let options = self.request_options(header.options.as_ref(), &header.base_url, &header.source_etag);
        let limit = options.max_input_bytes;
        let mut input = BytesMut::new();
        while let Some(chunk) = html.next().await {
            let chunk = chunk?;
            if input.len() + chunk.len() > limit {
                CONVERSIONS.with_label_values(&["too_large"]).inc();
                return Err(Status::resource_exhausted(
                    ConvertError::TooLarge(limit).to_string(),
                ));
            }
            input.extend_from_slice(&chunk);
        }
        if header.source_size > 0 && input.len() as u64 != header.source_size {
            return Err(Status::invalid_argument(format!(
                "received {} of the {} bytes announced; nothing converted",
                input.len(),
                header.source_size
            )));
        }
        let key = Self::key(&header.source_etag, &options);
        let content_type = header.content_type.clone();
        let started = std::time::Instant::now();
        let span = tracing::Span::current();
        let converted = tokio::task::spawn_blocking(move || {
            let _in_the_call = span.enter();
            convert(&input, &content_type, &options).map(|c| (c, input.len()))
        })
        .await
        .map_err(|_| Status::internal("the conversion panicked"))?;
        DURATION.observe(started.elapsed().as_secs_f64());
        let (converted, input_len) = converted.map_err(|e| {
            CONVERSIONS.with_label_values(&["refused"]).inc();
            match e {
                ConvertError::TooSlow(_) => Status::deadline_exceeded(e.to_string()),
                _ => Status::resource_exhausted(e.to_string()),
            }
        })?;
        CONVERSIONS.with_label_values(&["converted"]).inc();
        INPUT_BYTES.inc_by(input_len as u64);
        TOKENS.inc_by(converted.tokens);
        let rendered = Rendered {
            summary: ConvertSummary {
                cached: false,
                markdown_bytes: converted.markdown.len() as u64,
                token_estimate: converted.tokens,
                converter_version: CONVERTER_VERSION.into(),
            },
            markdown: Bytes::from(converted.markdown),
        };
        if !header.source_etag.is_empty() {
            self.cache.insert(key, Arc::new(rendered.clone()));
        }
        Ok(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(parts: &[&'static str]) -> BoxStream<Bytes> {
        let parts: Vec<_> = parts
            .iter()
            .map(|p| Ok(Bytes::from_static(p.as_bytes())))
            .collect();
        futures_util::stream::iter(parts).boxed()
    }

    #[tokio::test]
    async fn converts_caches_and_refuses_truncated_input() {
        let core = MarkdownCore::new(Options::default(), 1 << 20);
        let header = ConvertHeader {
            source_etag: "e1".into(),
            source_size: 14,
            ..Default::default()
        };
        let lookup = LookupRequest {
            source_etag: "e1".into(),
            ..Default::default()
        };
        assert!(core.lookup(lookup.clone()).await.unwrap().is_none());
        let out = core
            .convert(header.clone(), body(&["<h1>", "Title</h1>"]))
            .await
            .unwrap();
        assert_eq!(out.markdown, "# Title\n");
        assert!(!out.summary.cached);
        let hit = core.lookup(lookup).await.unwrap().expect("cached by etag");
        assert!(hit.summary.cached);
        let other_options = LookupRequest {
            source_etag: "e1".into(),
            options: Some(ConvertOptions {
                chars_per_token: 2.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let other_page = LookupRequest {
            source_etag: "e1".into(),
            base_url: "https://elsewhere.example/a.html".into(),
            ..Default::default()
        };
        assert!(
            core.lookup(other_page).await.unwrap().is_none(),
            "the page URL is part of the key: links resolve against it"
        );
        assert!(
            core.lookup(other_options).await.unwrap().is_none(),
            "the options are part of the key"
        );
        let short = ConvertHeader {
            source_etag: "e2".into(),
            source_size: 100,
            ..Default::default()
        };
        assert_eq!(
            core.convert(short, body(&["<p>cut"])).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        assert!(
            core.lookup(LookupRequest {
                source_etag: "e2".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .is_none()
        );
    }
}
