//! The hand framing against prost's encoding, and against tonic's own client and server.

use super::receive::Frames;
use super::*;
use crate::observe::ObservedChannel;
use crate::stubs::fileio::{file_io_client::FileIoClient, file_io_server::FileIoServer};
use futures_util::StreamExt;
use http_body::Frame;
use kubedav_api::fileio::{FileIo, ReadRequest};
use kubedav_api::pb::fileio::v1 as pb;
use pb::ByteRangeSpec;
use prost::Message;
use std::convert::Infallible;
use std::sync::Arc;

fn header(size: u64) -> pb::ReadResponse {
    pb::ReadResponse {
        item: Some(pb::read_response::Item::Header(pb::ReadHeader {
            info: Some(kubedav_api::fileio::FileInfo {
                path: "/a/b.bin".into(),
                size,
                ..Default::default()
            }),
            ranges: vec![pb::ResolvedRange {
                first: 0,
                last: size - 1,
            }],
        })),
    }
}

/// A chunk message in another field order than prost's (data before the range index):
/// valid protobuf, which must be decoded whole.
fn reordered_chunk(range_index: u32, data: &[u8]) -> Bytes {
    let mut inner = Vec::new();
    inner.push(DATA_KEY);
    prost::encoding::encode_varint(data.len() as u64, &mut inner);
    inner.extend_from_slice(data);
    inner.push(RANGE_INDEX_KEY);
    prost::encoding::encode_varint(u64::from(range_index), &mut inner);
    let mut message = vec![CHUNK_KEY];
    prost::encoding::encode_varint(inner.len() as u64, &mut message);
    message.extend_from_slice(&inner);
    let mut framed = vec![0];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(&message);
    framed.into()
}

fn ok_trailers() -> http::HeaderMap {
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    trailers
}

/// A body of `frames`, then `trailers`.
fn body(
    frames: Vec<Bytes>,
    trailers: Option<http::HeaderMap>,
) -> http_body_util::StreamBody<impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin> {
    let frames = frames
        .into_iter()
        .map(Frame::data)
        .chain(trailers.map(Frame::trailers))
        .map(Ok);
    http_body_util::StreamBody::new(futures_util::stream::iter(frames))
}

/// `stream` cut into frames of `size` bytes.
fn cut(stream: &[u8], size: usize) -> Vec<Bytes> {
    stream.chunks(size).map(Bytes::copy_from_slice).collect()
}

/// What a reader made of a body: the header, every range's data, and how it ended.
#[derive(Debug, Default, PartialEq)]
struct Read {
    header: Option<pb::ReadHeader>,
    data: Vec<Vec<u8>>,
    end: Option<tonic::Code>,
}

async fn read_all<S>(mut messages: S) -> Read
where
    S: futures_util::Stream<Item = Result<pb::ReadResponse, tonic::Status>> + Unpin,
{
    let mut read = Read::default();
    while let Some(message) = messages.next().await {
        match message.map(|m| m.item) {
            Ok(Some(pb::read_response::Item::Header(header))) => read.header = Some(header),
            Ok(Some(pb::read_response::Item::Chunk(chunk))) => {
                let index = chunk.range_index as usize;
                if read.data.len() <= index {
                    read.data.resize(index + 1, Vec::new());
                }
                read.data[index].extend_from_slice(&chunk.data);
            }
            Ok(None) => panic!("a message without an item"),
            Err(status) => {
                read.end = Some(status.code());
                return read;
            }
        }
    }
    read
}

#[tokio::test]
async fn every_way_of_cutting_the_frames_reads_the_same_messages() {
    let first: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let second: Vec<u8> = (0..300u32).map(|i| (i % 7) as u8).collect();
    let mut stream = whole_message(&header(70_300)).to_vec();
    for piece in first.chunks(30_000) {
        stream.extend_from_slice(&chunk_head(0, piece.len()));
        stream.extend_from_slice(piece);
    }
    stream.extend_from_slice(&chunk_head(1, 100));
    stream.extend_from_slice(&second[..100]);
    stream.extend_from_slice(&reordered_chunk(1, &second[100..]));
    let expected = Read {
        header: match header(70_300).item {
            Some(pb::read_response::Item::Header(h)) => Some(h),
            _ => None,
        },
        data: vec![first, second],
        end: None,
    };
    for size in [1, 2, 3, 5, 6, 7, 11, 33, 64, 1000, 16_384, stream.len()] {
        let frames = Frames::<_, pb::ReadResponse>::responses(body(cut(&stream, size), Some(ok_trailers())));
        assert_eq!(read_all(frames).await, expected, "frames of {size} bytes");
    }
}

#[tokio::test]
async fn a_chunk_in_one_frame_is_passed_on_without_a_copy() {
    let data = Bytes::from(vec![7u8; 100_000]);
    let mut frame = chunk_head(0, data.len()).to_vec();
    frame.extend_from_slice(&data);
    let frame = Bytes::from(frame);
    let span = frame.as_ptr_range();
    let stream = whole_message(&header(100_000));
    let mut messages =
        Frames::<_, pb::ReadResponse>::responses(body(vec![stream, frame], Some(ok_trailers())));
    messages.next().await.unwrap().unwrap();
    let Some(pb::read_response::Item::Chunk(chunk)) = messages.next().await.unwrap().unwrap().item else {
        panic!("no chunk");
    };
    assert_eq!(chunk.data.len(), 100_000);
    assert!(
        span.contains(&chunk.data.as_ptr()),
        "the data is a slice of the frame"
    );
    assert!(messages.next().await.is_none());
}

#[tokio::test]
async fn an_empty_message_is_read() {
    // The request of a read of the root: no path, no ranges, zero bytes.
    let root = ReadRequest::default();
    assert_eq!(whole_message(&root).len(), 5);
    for size in [1, 5] {
        let frames = Frames::<_, ReadRequest>::requests(body(cut(&whole_message(&root), size), None));
        assert_eq!(
            receive::unary(frames).await.unwrap(),
            root,
            "frames of {size} bytes"
        );
    }
}

#[tokio::test]
async fn how_a_read_ends_is_reported() {
    let mut stream = whole_message(&header(10)).to_vec();
    stream.extend_from_slice(&chunk_head(0, 10));
    stream.extend_from_slice(b"0123456789");
    let mut failed = http::HeaderMap::new();
    tonic::Status::not_found("gone meanwhile")
        .add_header(&mut failed)
        .unwrap();
    let cases = [
        (stream.clone(), Some(failed), Some(tonic::Code::NotFound)),
        (
            stream[..stream.len() - 1].to_vec(),
            Some(ok_trailers()),
            Some(tonic::Code::Internal),
        ),
        (stream.clone(), None, Some(tonic::Code::Internal)),
        (
            [&[1u8, 0, 0, 0, 1, 0][..], &stream[..]].concat(),
            Some(ok_trailers()),
            Some(tonic::Code::Internal),
        ),
    ];
    for (stream, trailers, end) in cases {
        let read = read_all(Frames::<_, pb::ReadResponse>::responses(body(
            cut(&stream, 4),
            trailers,
        )))
        .await;
        assert_eq!(read.end, end);
    }
    let huge = [
        &[0u8][..],
        &((MAX_WHOLE_MESSAGE + 1) as u32).to_be_bytes()[..],
        &[0x0a],
    ]
    .concat();
    let read = read_all(Frames::<_, pb::ReadResponse>::responses(body(
        vec![huge.into()],
        Some(ok_trailers()),
    )))
    .await;
    assert_eq!(read.end, Some(tonic::Code::ResourceExhausted));
}

/// A fileio core over a directory holding `b.bin` of `size` bytes.
fn core(size: usize) -> (tempfile::TempDir, Arc<dyn FileIo>, Vec<u8>) {
    let root = tempfile::tempdir().unwrap();
    let content: Vec<u8> = (0..size).map(|i| (i * 31 % 256) as u8).collect();
    std::fs::write(root.path().join("b.bin"), &content).unwrap();
    let core = kubedav_fileio::LocalFileIo::open(root.path()).unwrap();
    (root, Arc::new(core), content)
}

/// Serves `service` on a free port; the URL to call it at.
async fn serve<S: crate::serve::GrpcService>(service: S) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming),
    );
    url
}

fn read_request(ranges: Vec<ByteRangeSpec>) -> ReadRequest {
    ReadRequest {
        path: "b.bin".into(),
        ranges,
        version: String::new(),
    }
}

fn two_ranges() -> Vec<ByteRangeSpec> {
    vec![
        ByteRangeSpec {
            first: Some(5),
            last: Some(300_004),
        },
        ByteRangeSpec {
            first: None,
            last: Some(1000),
        },
    ]
}

/// What [`two_ranges`] reads of `content`.
fn in_two_ranges(content: &[u8]) -> Vec<Vec<u8>> {
    vec![
        content[5..300_005].to_vec(),
        content[content.len() - 1000..].to_vec(),
    ]
}

fn missing_file() -> ReadRequest {
    ReadRequest {
        path: "none".into(),
        ranges: vec![],
        version: String::new(),
    }
}

#[tokio::test]
async fn tonics_own_client_reads_what_the_hand_framing_sends() {
    let (_root, core, content) = core(3 << 20);
    let url = serve(crate::server::FileIoGrpc::new(core).into_service()).await;
    let mut client = FileIoClient::connect(url).await.unwrap();
    let read = read_all(client.read(read_request(vec![])).await.unwrap().into_inner()).await;
    assert_eq!(read.end, None);
    assert_eq!(read.header.unwrap().info.unwrap().size, 3 << 20);
    assert_eq!(read.data, vec![content.clone()]);
    let read = read_all(
        client
            .read(read_request(two_ranges()))
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    assert_eq!(read.data, in_two_ranges(&content));
    let missing = client.read(missing_file()).await.unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
}

/// Reads `request` with the hand reader: what [`crate::client::RemoteFileIo`] calls.
async fn read_by_hand(channel: &ObservedChannel, request: ReadRequest) -> Result<Read, tonic::Status> {
    let request = futures_util::stream::iter([Ok(request)]);
    let frames = receive::call::<_, _, _, _, pb::ReadResponse>(channel.clone(), READ_PATH, request);
    Ok(read_all(frames.await?).await)
}

#[tokio::test]
async fn the_hand_reader_reads_what_tonics_own_server_sends() {
    let (_root, core, content) = core(3 << 20);
    let url = serve(FileIoServer::new(crate::server::FileIoGrpc::new(core))).await;
    let channel = observed(&url);
    let read = read_by_hand(&channel, read_request(vec![])).await.unwrap();
    assert_eq!(read.end, None);
    assert_eq!(read.data, vec![content.clone()]);
    let read = read_by_hand(&channel, read_request(two_ranges())).await.unwrap();
    assert_eq!(read.data, in_two_ranges(&content));
    let missing = read_by_hand(&channel, missing_file()).await.err().unwrap();
    assert_eq!(missing.code(), tonic::Code::NotFound);
}

fn observed(url: &str) -> ObservedChannel {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
        .unwrap()
        .connect_lazy();
    ObservedChannel::new(channel, url)
}

/// The messages of an upload of `body` to `b.bin`: the header, the data, the end.
fn upload(body: &[Bytes]) -> Vec<pb::WriteRequest> {
    let size = body.iter().map(|b| b.len() as u64).sum();
    let header = pb::WriteHeader {
        path: "up.bin".into(),
        expected_size: Some(size),
        ..Default::default()
    };
    std::iter::once(pb::write_request::Item::Header(header))
        .chain(body.iter().cloned().map(pb::write_request::Item::Data))
        .chain([pb::write_request::Item::End(pb::WriteEnd { size })])
        .map(|item| pb::WriteRequest { item: Some(item) })
        .collect()
}

fn upload_body(size: usize) -> Vec<Bytes> {
    let content: Vec<u8> = (0..size).map(|i| (i * 7 % 253) as u8).collect();
    content.chunks(100_000).map(Bytes::copy_from_slice).collect()
}

#[tokio::test]
async fn every_way_of_cutting_an_upload_reads_the_same_messages() {
    let messages = upload(&upload_body(250_000));
    let stream: Vec<u8> = messages.iter().flat_map(|m| whole_message(m).to_vec()).collect();
    for size in [1, 3, 5, 6, 7, 13, 64, 16_384, stream.len()] {
        let read: Vec<pb::WriteRequest> =
            Frames::<_, pb::WriteRequest>::requests(body(cut(&stream, size), None))
                .map(Result::unwrap)
                .collect()
                .await;
        // Data may come in more pieces than it was sent in: compare the content.
        let data = |ms: &[pb::WriteRequest]| -> Vec<u8> {
            ms.iter()
                .filter_map(|m| match &m.item {
                    Some(pb::write_request::Item::Data(d)) => Some(d.to_vec()),
                    _ => None,
                })
                .flatten()
                .collect()
        };
        assert_eq!(data(&read), data(&messages), "frames of {size} bytes");
        assert_eq!(read.first(), messages.first());
        assert_eq!(read.last(), messages.last());
    }
}

#[tokio::test]
async fn a_request_body_that_fails_does_not_end_cleanly() {
    let messages = futures_util::stream::iter([
        Ok(upload(&[])[0].clone()),
        Err(tonic::Status::cancelled("the client went away")),
    ]);
    let mut framed = send::Framed::request(messages);
    let mut frames = Vec::new();
    while let Some(frame) =
        std::future::poll_fn(|cx| http_body::Body::poll_frame(std::pin::Pin::new(&mut framed), cx)).await
    {
        frames.push(frame.map(|_| ()).map_err(|status| status.code()));
    }
    assert_eq!(frames, vec![Ok(()), Err(tonic::Code::Cancelled)]);
}

#[tokio::test]
async fn tonics_own_client_writes_through_the_hand_framing() {
    let (root, core, _) = core(0);
    let url = serve(crate::server::FileIoGrpc::new(core).into_service()).await;
    let mut client = FileIoClient::connect(url).await.unwrap();
    let body = upload_body(1 << 20);
    let reply = client
        .write(futures_util::stream::iter(upload(&body)))
        .await
        .unwrap()
        .into_inner();
    assert!(reply.created);
    assert_eq!(std::fs::read(root.path().join("up.bin")).unwrap(), body.concat());
}

/// Uploads with the hand writer to `url`, which serves `root`: a whole body, and one that
/// breaks off, which must leave nothing.
async fn write_by_hand(url: &str, root: &std::path::Path) {
    let remote = crate::client::RemoteFileIo::new(observed(url));
    let body = upload_body(1 << 20);
    let Some(pb::write_request::Item::Header(header)) = upload(&body)[0].item.clone() else {
        unreachable!()
    };
    let data = futures_util::stream::iter(body.clone().into_iter().map(Ok)).boxed();
    let reply = remote.write(header.clone(), data).await.unwrap();
    assert!(reply.created);
    assert_eq!(std::fs::read(root.join("up.bin")).unwrap(), body.concat());

    let broken = futures_util::stream::iter([
        Ok(Bytes::from_static(b"only this much")),
        Err(tonic::Status::cancelled("the client went away")),
    ])
    .boxed();
    let header = pb::WriteHeader {
        path: "broken.bin".into(),
        ..header
    };
    let failed = remote.write(header, broken).await.unwrap_err();
    assert_eq!(failed.code(), tonic::Code::Cancelled);
    assert!(!root.join("broken.bin").exists());
}

#[tokio::test]
async fn the_hand_writer_writes_to_tonics_own_server_and_a_broken_body_writes_nothing() {
    let (root, core, _) = core(0);
    let url = serve(FileIoServer::new(crate::server::FileIoGrpc::new(core))).await;
    write_by_hand(&url, root.path()).await;
}

#[tokio::test]
async fn the_hand_writer_writes_through_the_hand_framing_and_a_broken_body_writes_nothing() {
    let (root, core, _) = core(0);
    let url = serve(crate::server::FileIoGrpc::new(core).into_service()).await;
    write_by_hand(&url, root.path()).await;
}

fn chunk_message(range_index: u32, data: &[u8]) -> pb::ReadResponse {
    pb::ReadResponse {
        item: Some(pb::read_response::Item::Chunk(pb::ReadChunk {
            range_index,
            data: Bytes::copy_from_slice(data),
        })),
    }
}

#[test]
fn a_chunk_head_and_its_data_are_what_prost_encodes() {
    for range_index in [0, 1, 127, 128, 300_000, u32::MAX] {
        for len in [1, 127, 128, 16_383, 16_384, 262_144, 1 << 21] {
            let data = vec![0x5a; len];
            let mut by_hand = chunk_head(range_index, len).to_vec();
            by_hand.extend_from_slice(&data);
            let by_prost = whole_message(&chunk_message(range_index, &data));
            assert_eq!(by_hand, by_prost, "range {range_index}, {len} bytes");
            assert!(chunk_head(range_index, len).len() <= MAX_HEAD);
        }
    }
}

#[test]
fn a_whole_message_decodes_back() {
    let message = chunk_message(3, b"abc");
    let framed = whole_message(&message);
    assert_eq!(framed[0], 0);
    assert_eq!(
        u32::from_be_bytes(framed[1..5].try_into().unwrap()) as usize,
        framed.len() - 5
    );
    assert_eq!(pb::ReadResponse::decode(&framed[5..]).unwrap(), message);
}
