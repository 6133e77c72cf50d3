//! fileio's side of a `Read`: the request decoded, and the response body framed by
//! hand ([`ReadBody`]).

use super::{MAX_WHOLE_MESSAGE, PREFIX_BYTES, chunk_head, whole_message};
use bytes::{Buf, Bytes, BytesMut};
use futures_util::StreamExt;
use http_body::Frame;
use kubedav_api::BoxStream;
use kubedav_api::fileio::{ReadChunk, ReadHeader, ReadRequest};
use kubedav_api::pb::fileio::v1 as pb;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::Status;

/// The `ReadRequest` a call's body carries: one uncompressed gRPC message of at most
/// [`MAX_WHOLE_MESSAGE`] bytes.
pub async fn request<B>(mut body: B) -> Result<ReadRequest, Status>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut gathered = BytesMut::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| Status::from_error(e.into()))?;
        if let Ok(data) = frame.into_data() {
            if gathered.len() + data.len() > PREFIX_BYTES + MAX_WHOLE_MESSAGE {
                return Err(Status::resource_exhausted(format!(
                    "a Read request may be at most {MAX_WHOLE_MESSAGE} bytes"
                )));
            }
            gathered.extend_from_slice(&data);
        }
    }
    if gathered.len() < PREFIX_BYTES {
        return Err(Status::invalid_argument(
            "the Read call carried no request message",
        ));
    }
    if gathered[0] != 0 {
        return Err(Status::unimplemented(
            "fileio accepts no compressed Read request: send it uncompressed",
        ));
    }
    let len = gathered[1..PREFIX_BYTES].as_ref().get_u32() as usize;
    if gathered.len() != PREFIX_BYTES + len {
        return Err(Status::invalid_argument(
            "the Read call must carry exactly one request message",
        ));
    }
    prost::Message::decode(&gathered[PREFIX_BYTES..])
        .map_err(|e| Status::invalid_argument(format!("the Read request does not decode: {e}")))
}

/// A `Read` response body: the header message, then each chunk as its head
/// ([`chunk_head`]) and its data in two frames, then the status in the trailers (OK, or
/// the error that ended the chunks).
pub struct ReadBody {
    header: Option<Bytes>,
    /// The data of the chunk whose head went out last.
    data: Option<Bytes>,
    chunks: Option<BoxStream<ReadChunk>>,
}

impl ReadBody {
    /// The body of a read that answered `header` and streams `chunks`.
    pub fn new(header: ReadHeader, chunks: BoxStream<ReadChunk>) -> Self {
        let header = whole_message(&pb::ReadResponse {
            item: Some(pb::read_response::Item::Header(header)),
        });
        Self {
            header: Some(header),
            data: None,
            chunks: Some(chunks),
        }
    }
}

/// The trailers that end a call with `status`.
fn trailers(status: &Status) -> http::HeaderMap {
    let mut trailers = http::HeaderMap::with_capacity(2);
    if status.add_header(&mut trailers).is_err() {
        trailers.insert(Status::GRPC_STATUS, http::HeaderValue::from_static("13"));
    }
    trailers
}

impl http_body::Body for ReadBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(next) = self.header.take().or_else(|| self.data.take()) {
            return Poll::Ready(Some(Ok(Frame::data(next))));
        }
        let Some(chunks) = self.chunks.as_mut() else {
            return Poll::Ready(None);
        };
        let status = loop {
            match futures_util::ready!(chunks.poll_next_unpin(cx)) {
                Some(Ok(chunk)) if chunk.data.is_empty() => continue,
                Some(Ok(chunk)) => {
                    let head = chunk_head(chunk.range_index, chunk.data.len());
                    self.data = Some(chunk.data);
                    return Poll::Ready(Some(Ok(Frame::data(head))));
                }
                Some(Err(status)) => break status,
                None => break Status::ok(""),
            }
        };
        self.chunks = None;
        Poll::Ready(Some(Ok(Frame::trailers(trailers(&status)))))
    }

    fn is_end_stream(&self) -> bool {
        self.header.is_none() && self.data.is_none() && self.chunks.is_none()
    }
}
