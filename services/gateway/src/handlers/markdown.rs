//! The Markdown variant of HTML resources, for agents that prefer `text/markdown`.

use crate::Gateway;
use crate::http::conditional::{Validators, read_preconditions, validator_headers};
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures_util::TryStreamExt;
use http::{HeaderMap, HeaderValue, header};
use kubedav_api::BoxStream;
use kubedav_api::fileio::{FileInfo, ReadChunk, ReadRequest};
use kubedav_api::markdown::{CONVERTER_VERSION, ConvertHeader, LookupRequest};
use kubedav_api::path::VolumePath;

/// The Markdown variant's etag: the source's, marked with the converter version, so a
/// client's If-None-Match is answered with 304 without converting anything.
pub(super) fn variant_etag(source_etag: &str) -> String {
    format!("{source_etag}-md{CONVERTER_VERSION}")
}

/// Serves the Markdown variant of `path`: from the cache, or converting `chunks` (read
/// again for HEAD). `Err` carries why it could not, for the HTML fallback.
pub(super) async fn serve(
    gateway: &Gateway,
    path: &VolumePath,
    info: &FileInfo,
    content_type: &str,
    headers: &HeaderMap,
    head: bool,
    chunks: BoxStream<ReadChunk>,
) -> Result<Response, String> {
    let markdown = gateway.markdown.as_ref().ok_or("no markdown service")?;
    let etag = variant_etag(&info.etag);
    let validators = Validators::new(&etag, info.modified_unix_ns);
    let not_modified = |headers: &mut HeaderMap| variant_headers(gateway, headers, info, &etag);
    if let Some(stopped) = read_preconditions(headers, &validators, not_modified).transpose() {
        return Ok(stopped.unwrap_or_else(IntoResponse::into_response));
    }
    let base_url = page_url(&gateway.base_path(), headers, path);
    let lookup = LookupRequest {
        source_etag: info.etag.clone(),
        options: None,
        base_url: base_url.clone(),
    };
    let rendered = match markdown
        .lookup(lookup)
        .await
        .map_err(|s| s.message().to_owned())?
    {
        Some(hit) => hit,
        None => {
            let chunks = if head {
                gateway
                    .fileio
                    .read(ReadRequest {
                        path: path.as_str().to_owned(),
                        ..Default::default()
                    })
                    .await
                    .map_err(|s| s.message().to_owned())?
                    .chunks
            } else {
                chunks
            };
            let header = ConvertHeader {
                source_etag: info.etag.clone(),
                content_type: content_type.to_owned(),
                source_path: path.to_string(),
                source_size: info.size,
                options: None,
                base_url,
            };
            let html = Box::pin(chunks.map_ok(|chunk| chunk.data));
            markdown
                .convert(header, html)
                .await
                .map_err(|s| s.message().to_owned())?
        }
    };
    let length = rendered.markdown.len();
    let mut response = Response::new(if head {
        Body::empty()
    } else {
        Body::from(rendered.markdown)
    });
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/markdown; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    h.insert(
        "x-markdown-tokens",
        HeaderValue::from(rendered.summary.token_estimate),
    );
    // Made from a user's file: in the same sandbox as the file's own bytes.
    h.insert(header::CONTENT_SECURITY_POLICY, super::get::SANDBOX);
    variant_headers(gateway, h, info, &etag);
    Ok(response)
}

/// Serves the Markdown listing of collection `path`: the same validators as a
/// Markdown file (the collection's etag, marked as the variant; it changes when a member
/// does), `Vary: Accept`, and a 304 answered before any member is listed.
pub(super) async fn listing(
    gateway: &Gateway,
    path: &VolumePath,
    info: &FileInfo,
    headers: &HeaderMap,
    head: bool,
    viewer: Option<&crate::access::Viewer>,
) -> Result<Response, crate::http::errors::HttpError> {
    let etag = variant_etag(&info.etag);
    let validators = Validators::new(&etag, info.modified_unix_ns);
    let not_modified = |headers: &mut HeaderMap| variant_headers(gateway, headers, info, &etag);
    if let Some(response) = read_preconditions(headers, &validators, not_modified)? {
        return Ok(response);
    }
    let members = super::get::members(gateway, path, viewer).await?;
    let markdown = super::agent_listing::render(&gateway.base_path(), path, members);
    let tokens = markdown.chars().count().div_ceil(4);
    let length = markdown.len();
    let mut response = Response::new(if head { Body::empty() } else { Body::from(markdown) });
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/markdown; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    h.insert("x-markdown-tokens", HeaderValue::from(tokens));
    variant_headers(gateway, h, info, &etag);
    Ok(response)
}

/// The page's absolute URL, for resolving its relative links: the scheme from
/// `X-Forwarded-Proto` (`http` or `https`, as an Ingress sets it; else `http`), the
/// request's Host, the served path under `--base-path`. Empty without a valid Host. A
/// client that sends a false Host or scheme only changes its own answer: the URL is
/// part of the conversion's cache key.
pub(super) fn page_url(
    base: &crate::http::paths::BasePath,
    headers: &HeaderMap,
    path: &VolumePath,
) -> String {
    let Some(host) = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.parse::<http::uri::Authority>().ok())
        .filter(|a| a.as_str().len() <= 255 && !a.as_str().contains('@'))
    else {
        return String::new();
    };
    let scheme = match headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()) {
        Some(p) if p.trim().eq_ignore_ascii_case("https") => "https",
        _ => "http",
    };
    format!("{scheme}://{host}{}", base.href(path, false))
}

fn variant_headers(gateway: &Gateway, headers: &mut HeaderMap, info: &FileInfo, etag: &str) {
    validator_headers(headers, etag, info.modified_unix_ns);
    headers.insert(header::VARY, HeaderValue::from_static("Accept"));
    if let Some(signal) = &gateway.config.content_signal {
        headers.insert("content-signal", signal.clone());
    }
}
