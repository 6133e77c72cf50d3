//! GET from a bucket: the object streamed as S3 sends it, cut into chunks of at most
//! [`MAX_CHUNK_BYTES`]; byte ranges as ranged GETs, each only of the version the
//! header described (`If-Match`), so the ranges of one answer never mix two versions.

use super::find::{Found, collection, validated_file_info};
use super::keys::Keys;
use crate::s3::S3Client;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::BodyDataStream;
use kubedav_api::MAX_CHUNK_BYTES;
use kubedav_api::fileio::{ReadChunk, ReadHeader, ReadReply};
use kubedav_api::path::VolumePath;
use kubedav_api::pb::fileio::v1::{ByteRangeSpec, ResolvedRange};
use kubedav_api::ranges::resolve_ranges;
use tonic::Status;

/// A read of `path`: the whole file in one GET, or its `ranges` after one HEAD.
pub async fn read(
    s3: &S3Client,
    keys: &Keys,
    path: &VolumePath,
    ranges: &[ByteRangeSpec],
) -> Result<ReadReply, Status> {
    if !path.is_root()
        && let Some(reply) = read_object(s3, &keys.object(path), path, ranges).await?
    {
        return Ok(reply);
    }
    not_a_file(s3, keys, path).await
}

/// A read of the object `key`, described as the file `path` (a file's own object, or
/// one of its versions); `None` when there is no such object.
pub async fn read_object(
    s3: &S3Client,
    key: &str,
    path: &VolumePath,
    ranges: &[ByteRangeSpec],
) -> Result<Option<ReadReply>, Status> {
    if ranges.is_empty() {
        let Some(opened) = s3.open(key, None, None).await? else {
            return Ok(None);
        };
        let info = validated_file_info(path, &opened.info);
        let ranges = resolve_ranges(&[], info.size);
        let chunks = chunked(0, opened.body).boxed();
        return Ok(Some(ReadReply {
            header: ReadHeader {
                info: Some(info),
                ranges,
            },
            chunks,
        }));
    }
    let Some(object) = s3.head(key).await? else {
        return Ok(None);
    };
    let info = validated_file_info(path, &object);
    let resolved = resolve_ranges(ranges, info.size);
    let chunks = ranged(s3.clone(), key.to_owned(), object.etag, resolved.clone()).boxed();
    Ok(Some(ReadReply {
        header: ReadHeader {
            info: Some(info),
            ranges: resolved,
        },
        chunks,
    }))
}

/// The answer for a path that is no file: a collection's header alone, or NOT_FOUND.
async fn not_a_file(s3: &S3Client, keys: &Keys, path: &VolumePath) -> Result<ReadReply, Status> {
    match collection(s3, keys, path).await? {
        found @ Found::Collection => Ok(ReadReply {
            header: ReadHeader {
                info: found.describe(s3, keys, path).await?,
                ranges: Vec::new(),
            },
            chunks: futures_util::stream::empty().boxed(),
        }),
        _ => Err(Status::not_found(format!("{path} does not exist"))),
    }
}

/// The bytes of one answer's body as chunks of range `index`.
fn chunked(
    index: u32,
    body: hyper::body::Incoming,
) -> impl Stream<Item = Result<ReadChunk, Status>> + Send + 'static {
    BodyDataStream::new(body).flat_map(move |data| {
        let chunks: Vec<Result<ReadChunk, Status>> = match data {
            Ok(data) => split(data)
                .map(|data| {
                    crate::metrics::read_bytes(data.len() as u64);
                    Ok(ReadChunk {
                        range_index: index,
                        data,
                    })
                })
                .collect(),
            Err(e) => vec![Err(Status::unavailable(format!(
                "the S3 server's answer broke off: {e}"
            )))],
        };
        futures_util::stream::iter(chunks)
    })
}

/// `data` in pieces of at most [`MAX_CHUNK_BYTES`] (slices, no copies).
fn split(mut data: Bytes) -> impl Iterator<Item = Bytes> {
    std::iter::from_fn(move || {
        if data.is_empty() {
            return None;
        }
        let len = data.len().min(MAX_CHUNK_BYTES);
        Some(data.split_to(len))
    })
}

/// Each range in turn, each from its own GET of the version `etag`.
fn ranged(
    s3: S3Client,
    key: String,
    etag: String,
    ranges: Vec<ResolvedRange>,
) -> impl Stream<Item = Result<ReadChunk, Status>> + Send + 'static {
    futures_util::stream::iter(ranges.into_iter().enumerate())
        .then(move |(index, range)| {
            let (s3, key, etag) = (s3.clone(), key.clone(), etag.clone());
            async move {
                match s3.open(&key, Some((range.first, range.last)), Some(&etag)).await {
                    Ok(Some(opened)) => chunked(index as u32, opened.body).boxed(),
                    Ok(None) => futures_util::stream::iter([Err(Status::aborted(format!(
                        "{key} was removed while it was being read"
                    )))])
                    .boxed(),
                    Err(status) => futures_util::stream::iter([Err(status)]).boxed(),
                }
            }
        })
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_frames_are_cut_into_chunks() {
        let data = Bytes::from(vec![7u8; MAX_CHUNK_BYTES * 2 + 1]);
        let sizes: Vec<usize> = split(data).map(|chunk| chunk.len()).collect();
        assert_eq!(sizes, vec![MAX_CHUNK_BYTES, MAX_CHUNK_BYTES, 1]);
        assert_eq!(split(Bytes::new()).count(), 0);
    }
}
