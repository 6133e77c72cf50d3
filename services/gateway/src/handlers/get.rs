//! GET and HEAD: files with conditional requests and byte ranges, and HTML listings of
//! collections.

use crate::Gateway;
use crate::access::Viewer;
use crate::http::conditional::{Validators, if_range_holds, read_preconditions, validator_headers};
use crate::http::errors::{HttpError, HttpResult};
use crate::http::paths::request_path;
use crate::request::{Principal, SENDFILE_ABOVE, Sendfile};
use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{Stream, StreamExt, TryStreamExt};
use http::{HeaderName, HeaderValue, StatusCode, header};
use kubedav_api::BoxStream;
use kubedav_api::fileio::{FileInfo, ListRequest, ReadChunk, ReadReply, ReadRequest, StatRequest};
use kubedav_api::path::VolumePath;
use kubedav_api::pb::fileio::v1::{ByteRangeSpec, ResolvedRange};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Serves a file or a collection listing. `head` sends the headers only.
///
/// The steps: which ranges were asked for ([`asked_ranges`]); the read, opened before
/// the preconditions are evaluated ([`open`] says why); the Markdown variant for agents
/// ([`markdown_variant`]); the preconditions ([`read_preconditions`]); then the listing of a
/// collection, or the file's body ([`body`]) with its representation headers
/// ([`representation_headers`]).
pub(super) async fn get(gateway: &Gateway, request: Request, head: bool) -> HttpResult {
    let target = request_path(&gateway.base_path(), &request)?;
    let headers = request.headers();
    let asked = asked_ranges(headers, head)?;
    let content_type = crate::http::mediatype::of_name(target.path.name());
    // HTML may be converted to Markdown, which reads it: only other files go to the
    // connection untouched, and may be sent from the page cache.
    let sending = Sending {
        untouched: request.extensions().get::<Sendfile>().is_some()
            && !crate::http::negotiate::is_html(content_type),
    };
    let ReadReply {
        header: read_header,
        chunks,
    } = open(gateway, &target.path, head, asked.clone(), sending).await?;
    let info = read_header
        .info
        .ok_or_else(|| HttpError::from(tonic::Status::internal("read without metadata")))?;
    if target.trailing_slash && !info.is_collection {
        return Err(HttpError::new(
            StatusCode::NOT_FOUND,
            format!("{} is a file, not a collection", target.path),
        ));
    }
    // HTML has a Markdown variant for agents; both variants say they vary on Accept.
    let negotiable = !info.is_collection && crate::http::negotiate::is_html(content_type);
    let (chunks, markdown_note) = if negotiable {
        let html = Html {
            info: &info,
            content_type,
            chunks,
        };
        match markdown_variant(gateway, &target.path, headers, head, html).await? {
            Variant::Markdown(response) => return Ok(response),
            Variant::Html { chunks, note } => (chunks, note),
        }
    } else {
        (chunks, None)
    };
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    if info.is_collection && crate::http::negotiate::prefers_markdown(accept) {
        let viewer = Viewer::of(&request);
        return super::markdown::listing(gateway, &target.path, &info, headers, head, viewer).await;
    }
    let validators = Validators::new(&info.etag, info.modified_unix_ns);
    let not_modified = |headers: &mut http::HeaderMap| {
        validator_headers(headers, &info.etag, info.modified_unix_ns);
        if negotiable || info.is_collection {
            headers.insert(header::VARY, HeaderValue::from_static("Accept"));
        }
    };
    if let Some(response) = read_preconditions(headers, &validators, not_modified)? {
        return Ok(response);
    }
    if info.is_collection {
        let viewer = Viewer::of(&request);
        let principal = Principal::of(&request);
        let offers = crate::handlers::listing::Offers {
            write: may_write(gateway, &request, viewer, &target.path),
            account: gateway.auth.is_some()
                && !principal.name().is_empty()
                && !matches!(principal.kind(), "app-password" | "link"),
            sign_out: principal.kind() == "session",
            shares: gateway.shares.is_some()
                && !principal.name().is_empty()
                && !matches!(principal.kind(), "app-password" | "link"),
            manage: gateway.shares.is_some()
                && !matches!(principal.kind(), "app-password" | "link")
                && !principal.read_only()
                && viewer.is_some_and(|viewer| viewer.manages(&target.path)),
            keep: gateway.keep.is_some() && principal.kind() != "link",
            uploads: principal.kind() != "link" && gateway.offers_uploads().await,
        };
        return listing(gateway, &target.path, head, offers, viewer).await;
    }
    let (ranges, chunks) = match asked {
        Some(_) if !if_range_holds(headers, &validators) => {
            // The representation changed since the client's partial copy: send it whole.
            let whole = read(gateway, &target.path, Vec::new(), sending).await?;
            (None, whole.chunks)
        }
        Some(_) => (Some(read_header.ranges), chunks),
        None => (None, chunks),
    };
    let wanted = crate::dav::sync::wanted_digest(headers, crate::dav::sync::WANT_REPR_DIGEST);
    let mut response = body(&info, ranges, content_type, chunks, head).await?;
    if let Some(algorithm) = wanted
        && let Some(sums) = stored_checksums(gateway, &target.path, &info.etag).await
        && let Some(value) = crate::dav::sync::repr_digest(&sums, &[algorithm])
    {
        insert(
            response.headers_mut(),
            HeaderName::from_static("repr-digest"),
            value,
        );
    }
    let headers = response.headers_mut();
    representation_headers(headers, &info, content_type, negotiable, markdown_note);
    Ok(response)
}

/// A kept version of the file at `path` (`handlers::keep`), served as a GET of a file
/// serves its bytes: ranges, validators and the file's type.
pub(super) async fn version(
    gateway: &Gateway,
    path: &VolumePath,
    id: &str,
    headers: &http::HeaderMap,
    head: bool,
) -> HttpResult {
    let asked = asked_ranges(headers, head)?;
    let content_type = crate::http::mediatype::of_name(path.name());
    let read = |ranges: Vec<ByteRangeSpec>| {
        gateway.fileio.read(ReadRequest {
            path: path.as_str().to_owned(),
            ranges,
            version: id.to_owned(),
        })
    };
    let ReadReply { header, chunks } = read(asked.clone().unwrap_or_default()).await?;
    let info = header
        .info
        .ok_or_else(|| HttpError::from(tonic::Status::internal("read without metadata")))?;
    let validators = Validators::new(&info.etag, info.modified_unix_ns);
    let not_modified =
        |headers: &mut http::HeaderMap| validator_headers(headers, &info.etag, info.modified_unix_ns);
    if let Some(response) = read_preconditions(headers, &validators, not_modified)? {
        return Ok(response);
    }
    let (ranges, chunks) = match asked {
        Some(_) if !if_range_holds(headers, &validators) => (None, read(Vec::new()).await?.chunks),
        Some(_) => (Some(header.ranges), chunks),
        None => (None, chunks),
    };
    let mut response = body(&info, ranges, content_type, chunks, head).await?;
    representation_headers(response.headers_mut(), &info, content_type, false, None);
    Ok(response)
}

/// The checksums fileio keeps for the content whose etag is `etag`, if any (one
/// listing of the file, asked only when a client wants a digest).
async fn stored_checksums(
    gateway: &Gateway,
    path: &VolumePath,
    etag: &str,
) -> Option<Vec<kubedav_api::checksums::Checksum>> {
    use kubedav_api::pb::fileio::v1::{PropertySelection, property_selection};
    let request = ListRequest {
        path: path.as_str().to_owned(),
        depth: kubedav_api::fileio::Depth::Zero as i32,
        max_entries: 0,
        properties: Some(PropertySelection {
            mode: property_selection::Mode::Selected as i32,
            names: vec![kubedav_api::checksums::checksums_property_name()],
        }),
    };
    let mut batches = gateway.fileio.list(request).await.ok()?;
    let batch = batches.next().await?.ok()?;
    let entry = batch.entries.into_iter().next()?;
    kubedav_api::checksums::Stored::find(&entry.properties)?.valid_for(etag)
}

/// The byte ranges a GET asks for, if it asks for any that parse (HEAD never reads
/// ranges); 416 when it asks for more than [`crate::http::range::MAX_RANGES`].
fn asked_ranges(headers: &http::HeaderMap, head: bool) -> Result<Option<Vec<ByteRangeSpec>>, HttpError> {
    if head {
        return Ok(None);
    }
    let range_header = headers.get(header::RANGE).and_then(|v| v.to_str().ok());
    if range_header.is_some_and(crate::http::range::too_many) {
        return Err(HttpError::new(
            StatusCode::RANGE_NOT_SATISFIABLE,
            format!(
                "at most {} ranges are served per request; ask for fewer, larger ranges",
                crate::http::range::MAX_RANGES
            ),
        ));
    }
    Ok(range_header.and_then(crate::http::range::parse))
}

/// The resource's metadata and, for GET, its data: one Read call, opened *before* the
/// preconditions are evaluated. The trade: a conditional GET that ends in 304 or 412
/// has opened a read it drops unread, while every other GET, by far the most, costs
/// one round trip to fileio instead of a Stat followed by a Read. HEAD asks for the
/// metadata alone.
async fn open(
    gateway: &Gateway,
    path: &VolumePath,
    head: bool,
    ranges: Option<Vec<ByteRangeSpec>>,
    sending: Sending,
) -> Result<ReadReply, HttpError> {
    if !head {
        return read(gateway, path, ranges.unwrap_or_default(), sending).await;
    }
    let info = gateway
        .fileio
        .stat(StatRequest {
            path: path.as_str().to_owned(),
        })
        .await?;
    let ranges = if info.size > 0 {
        vec![ResolvedRange {
            first: 0,
            last: info.size - 1,
        }]
    } else {
        vec![]
    };
    Ok(ReadReply {
        header: kubedav_api::fileio::ReadHeader {
            info: Some(info),
            ranges,
        },
        chunks: futures_util::stream::empty().boxed(),
    })
}

/// An HTML file being served, which has a Markdown variant.
struct Html<'a> {
    info: &'a FileInfo,
    content_type: &'a str,
    chunks: BoxStream<ReadChunk>,
}

/// What [`markdown_variant`] decided.
enum Variant {
    /// The Markdown, served.
    Markdown(Response),
    /// The HTML is served: its data, and why it is not the Markdown when an agent asked
    /// for that (the `X-Markdown-Error` header).
    Html {
        chunks: BoxStream<ReadChunk>,
        note: Option<String>,
    },
}

/// Serves the Markdown variant of an HTML file to an agent that prefers it, when it can
/// be made: not for a range request, not past `--markdown-max-bytes`, and not when the
/// conversion fails (then the HTML is served, or 502 with `--markdown-fail-closed`).
async fn markdown_variant(
    gateway: &Gateway,
    path: &VolumePath,
    headers: &http::HeaderMap,
    head: bool,
    html: Html<'_>,
) -> Result<Variant, HttpError> {
    let Html {
        info,
        content_type,
        chunks,
    } = html;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    if gateway.markdown.is_none() || !crate::http::negotiate::prefers_markdown(accept) {
        return Ok(Variant::Html { chunks, note: None });
    }
    if headers.contains_key(header::RANGE) {
        let note = Some("range requests are answered with the HTML".into());
        return Ok(Variant::Html { chunks, note });
    }
    if info.size > gateway.config.markdown_max_bytes {
        let note = Some(format!(
            "the HTML is larger than the {} bytes converted",
            gateway.config.markdown_max_bytes
        ));
        return Ok(Variant::Html { chunks, note });
    }
    let reason = match super::markdown::serve(gateway, path, info, content_type, headers, head, chunks).await
    {
        Ok(response) => return Ok(Variant::Markdown(response)),
        Err(reason) => reason,
    };
    tracing::warn!(%path, "Markdown conversion failed, serving the HTML: {reason}");
    if gateway.config.markdown_fail_closed {
        return Err(HttpError::new(
            StatusCode::BAD_GATEWAY,
            format!("the Markdown conversion failed: {reason}"),
        ));
    }
    // The conversion took the data: read the HTML again.
    let chunks = if head {
        futures_util::stream::empty().boxed()
    } else {
        read(gateway, path, Vec::new(), Sending::READ).await?.chunks
    };
    let note = Some(format!("conversion failed: {reason}"));
    Ok(Variant::Html { chunks, note })
}

/// The file's body: whole (`ranges` is `None`), one range (206), several (206
/// multipart); 416 when no asked range lies within the file.
async fn body(
    info: &FileInfo,
    ranges: Option<Vec<ResolvedRange>>,
    content_type: &str,
    chunks: BoxStream<ReadChunk>,
    head: bool,
) -> Result<Response, HttpError> {
    Ok(match ranges {
        None => full(info, chunks, head).await,
        Some(ranges) if ranges.is_empty() => {
            let mut response = HttpError::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                format!(
                    "no requested range lies within the {} bytes of the file",
                    info.size
                ),
            )
            .into_response();
            insert(
                response.headers_mut(),
                header::CONTENT_RANGE,
                format!("bytes */{}", info.size),
            );
            return Err(HttpError::respond(response));
        }
        Some(ranges) if ranges.len() == 1 => {
            let range = &ranges[0];
            let mut response = full(info, chunks, head).await;
            *response.status_mut() = StatusCode::PARTIAL_CONTENT;
            let length = range.last - range.first + 1;
            insert(response.headers_mut(), header::CONTENT_LENGTH, length.to_string());
            insert(
                response.headers_mut(),
                header::CONTENT_RANGE,
                format!("bytes {}-{}/{}", range.first, range.last, info.size),
            );
            response
        }
        Some(ranges) => multipart(info, ranges, content_type, chunks),
    })
}

/// The headers of a file's representation: its type, validators, `Accept-Ranges`,
/// `Vary: Accept` for a negotiable one, and why an agent got HTML instead of Markdown.
fn representation_headers(
    headers: &mut http::HeaderMap,
    info: &FileInfo,
    content_type: &'static str,
    negotiable: bool,
    markdown_note: Option<String>,
) {
    if !headers.contains_key(header::CONTENT_TYPE) {
        // A media type from `mediatype::of_name`: kept as it is, not copied per request.
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Some(policy) = user_content_policy(content_type) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    validator_headers(headers, &info.etag, info.modified_unix_ns);
    if negotiable {
        headers.insert(header::VARY, HeaderValue::from_static("Accept"));
    }
    if let Some(note) = markdown_note {
        let ascii: String = note
            .chars()
            .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' })
            .collect();
        if let Ok(value) = HeaderValue::from_str(&ascii) {
            headers.insert("x-markdown-error", value);
        }
    }
}

/// The Content Security Policy of a file's bytes: `sandbox`, so that no script in an
/// uploaded page or image runs in the server's origin, where the file manager runs and a
/// reader's credentials are cached (docs/security.md, "Files run no script"). The
/// browser shows the file as it is, in an origin of its own, with no script, form,
/// pop-up or plugin. PDFs alone go without: Chromium refuses to start its PDF viewer in
/// a sandboxed document, and a PDF's own scripts run in the viewer's isolated world, not
/// in the origin.
fn user_content_policy(content_type: &str) -> Option<HeaderValue> {
    (content_type != "application/pdf").then_some(SANDBOX)
}

/// The policy of user content (see [`user_content_policy`]).
pub(super) const SANDBOX: HeaderValue = HeaderValue::from_static("sandbox");

/// Where a read's data goes.
#[derive(Clone, Copy, Debug)]
struct Sending {
    /// Straight to a [`Sendfile`] connection, which nothing before it reads: large
    /// files may come as mappings sent from the page cache (`edge::sendfile`).
    untouched: bool,
}

impl Sending {
    /// Data the gateway reads (to convert it).
    const READ: Self = Self { untouched: false };
}

async fn read(
    gateway: &Gateway,
    path: &VolumePath,
    ranges: Vec<ByteRangeSpec>,
    sending: Sending,
) -> Result<ReadReply, HttpError> {
    let request = ReadRequest {
        path: path.as_str().to_owned(),
        ranges,
        version: String::new(),
    };
    Ok(if sending.untouched {
        gateway.fileio.read_to_send(request, SENDFILE_ABOVE).await?
    } else {
        gateway.fileio.read(request).await?
    })
}

fn insert(headers: &mut http::HeaderMap, name: header::HeaderName, value: String) {
    if let Ok(value) = HeaderValue::try_from(value) {
        headers.insert(name, value);
    }
}

/// A 200 with the whole file (or a single range; the caller fixes the status). A body
/// that fits in its first chunk is sent as one buffer, larger ones stream.
async fn full(info: &FileInfo, mut chunks: BoxStream<ReadChunk>, head: bool) -> Response {
    let length = info.size;
    let body = if head {
        Body::empty()
    } else {
        match chunks.next().await {
            None => Body::empty(),
            Some(Err(status)) => return crate::http::errors::HttpError::from(status).into_response(),
            Some(Ok(first)) => {
                let rest = chunks.map_ok(|chunk| chunk.data);
                let first_data = first.data;
                Body::from_stream(
                    futures_util::stream::iter([Ok(first_data)])
                        .chain(rest)
                        .map_err(status_to_io),
                )
            }
        }
    };
    let mut response = Response::new(body);
    // Room for the representation's and the edge's headers up front: grown one by one,
    // the map was reallocated as it filled.
    response.headers_mut().reserve(12);
    response
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    response
}

fn status_to_io(status: tonic::Status) -> std::io::Error {
    tracing::warn!(code = ?status.code(), message = status.message(), "response body failed midway; closing the connection");
    std::io::Error::other(status.message().to_owned())
}

/// A 206 `multipart/byteranges` response for several ranges, with an exact
/// Content-Length.
fn multipart(
    info: &FileInfo,
    ranges: Vec<ResolvedRange>,
    content_type: &str,
    chunks: BoxStream<ReadChunk>,
) -> Response {
    let boundary = format!("kubedav-{:016x}", fastrand::u64(..));
    let part_headers: Vec<Bytes> = ranges
        .iter()
        .map(|r| {
            Bytes::from(format!(
                "\r\n--{boundary}\r\nContent-Type: {content_type}\r\nContent-Range: bytes {}-{}/{}\r\n\r\n",
                r.first, r.last, info.size
            ))
        })
        .collect();
    let closing = Bytes::from(format!("\r\n--{boundary}--\r\n"));
    let length: u64 = ranges
        .iter()
        .zip(&part_headers)
        .map(|(r, h)| h.len() as u64 + r.last - r.first + 1)
        .sum::<u64>()
        + closing.len() as u64;
    let body = MultipartBody {
        chunks,
        part_headers,
        closing: Some(closing),
        next_part: 0,
        held: None,
    };
    let mut response = Response::new(Body::from_stream(body.map_err(status_to_io)));
    *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    let headers = response.headers_mut();
    insert(headers, header::CONTENT_LENGTH, length.to_string());
    insert(
        headers,
        header::CONTENT_TYPE,
        format!("multipart/byteranges; boundary={boundary}"),
    );
    response
}

/// Interleaves part headers with the data of each range, then the closing boundary.
struct MultipartBody {
    chunks: BoxStream<ReadChunk>,
    part_headers: Vec<Bytes>,
    closing: Option<Bytes>,
    next_part: usize,
    held: Option<Bytes>,
}

impl Stream for MultipartBody {
    type Item = Result<Bytes, tonic::Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(data) = self.held.take() {
            return Poll::Ready(Some(Ok(data)));
        }
        match self.chunks.poll_next_unpin(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Err(status))) => Poll::Ready(Some(Err(status))),
            Poll::Ready(Some(Ok(chunk))) => {
                let index = chunk.range_index as usize;
                if index >= self.next_part {
                    self.next_part = index + 1;
                    self.held = Some(chunk.data);
                    let header = self.part_headers.get(index).cloned().unwrap_or_default();
                    Poll::Ready(Some(Ok(header)))
                } else {
                    Poll::Ready(Some(Ok(chunk.data)))
                }
            }
            Poll::Ready(None) => Poll::Ready(self.closing.take().map(Ok)),
        }
    }
}

/// Whether the page offers write actions: without authentication anyone writes; with
/// it, an authenticated user who is not read-only; under a policy, one it lets write
/// in the collection. The server enforces it either way.
fn may_write(gateway: &Gateway, request: &Request, viewer: Option<&Viewer>, collection: &VolumePath) -> bool {
    let principal = Principal::of(request);
    let user = principal.name();
    let by_policy = viewer.is_none_or(|viewer| viewer.may_write(collection));
    by_policy
        && !principal.read_only()
        && (gateway.auth.is_none() || (!user.is_empty() && !gateway.config.read_only_users.contains(user)))
}

/// The page's script or style sheet, when the request is for one of them (below `base`).
pub(super) fn asset(base: &crate::http::paths::BasePath, path: &str, head: bool) -> Option<Response> {
    let below = path.strip_prefix(base.as_str())?;
    let (_, content_type, body) = crate::handlers::listing::ASSETS
        .into_iter()
        .find(|(name, _, _)| *name == below)?;
    let mut response = if head {
        Response::new(Body::empty())
    } else {
        Response::new(Body::from(body))
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Some(response)
}

/// The members of a collection, as listings show them (`--hide-dotfiles` applied).
/// Under a policy, the members hidden from `viewer` are left out.
pub(super) async fn members(
    gateway: &Gateway,
    path: &VolumePath,
    viewer: Option<&Viewer>,
) -> Result<Vec<FileInfo>, HttpError> {
    let mut batches = gateway
        .fileio
        .list(ListRequest {
            path: path.as_str().to_owned(),
            depth: kubedav_api::fileio::Depth::One as i32,
            max_entries: 0,
            properties: None,
        })
        .await?;
    let mut members = Vec::new();
    while let Some(batch) = batches.next().await {
        members.extend(batch?.entries.into_iter().filter_map(|entry| entry.info));
    }
    // The first entry is the collection itself.
    let hide = gateway.config.hide_dotfiles;
    let hidden_from = viewer
        .filter(|viewer| !viewer.sees_all_of(path))
        .map(|viewer| (viewer, viewer.members(path)));
    let members = members
        .into_iter()
        .skip(1)
        .filter(|m| !(hide && kubedav_api::path::last_name(&m.path).starts_with('.')))
        .filter(|m| {
            hidden_from
                .as_ref()
                .is_none_or(|(viewer, members)| viewer.sees_listed(members, path, &m.path))
        })
        .collect();
    Ok(members)
}

/// The HTML listing of a collection (it varies on Accept: agents get Markdown).
async fn listing(
    gateway: &Gateway,
    path: &VolumePath,
    head: bool,
    offers: crate::handlers::listing::Offers,
    viewer: Option<&Viewer>,
) -> HttpResult {
    let members = members(gateway, path, viewer).await?;
    let html = crate::handlers::listing::render(&gateway.base_path(), path, members, offers);
    let mut response = if head {
        Response::new(Body::empty())
    } else {
        Response::new(Body::from(html))
    };
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(crate::handlers::listing::POLICY),
    );
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    Ok(response)
}
