//! The gateway's side of a `Read`: the call made by hand ([`call`]) and its messages
//! read from the HTTP/2 frames as they come ([`ReadFrames`]), a chunk's data passed on
//! as slices of those frames.

use super::{
    CHUNK_KEY, DATA_KEY, MAX_WHOLE_MESSAGE, PREFIX_BYTES, RANGE_INDEX_KEY, READ_PATH, whole_message,
};
use bytes::{Buf, Bytes, BytesMut};
use http_body::Body;
use kubedav_api::fileio::{ReadChunk, ReadRequest};
use kubedav_api::pb::fileio::v1 as pb;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::Status;

/// Makes the `Read` call on `channel`: what `FileIoClient::read` does, with the response
/// read by [`ReadFrames`] instead of tonic's decoder. A status in the response's headers
/// (a call that failed before its first message) is the error.
pub async fn call<S, B>(mut channel: S, request: ReadRequest) -> Result<ReadFrames<B>, Status>
where
    S: tower_service::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<B>,
            Error = Box<dyn std::error::Error + Send + Sync>,
        >,
{
    let body = tonic::body::Body::new(http_body_util::Full::new(whole_message(&request)));
    let request = http::Request::builder()
        .method(http::Method::POST)
        .version(http::Version::HTTP_2)
        .uri(READ_PATH)
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .body(body)
        .map_err(|e| Status::internal(format!("cannot make the Read request: {e}")))?;
    std::future::poll_fn(|cx| channel.poll_ready(cx))
        .await
        .map_err(Status::from_error)?;
    let response = channel.call(request).await.map_err(Status::from_error)?;
    if let Some(status) = Status::from_header_map(response.headers()) {
        return Err(match status.code() {
            tonic::Code::Ok => Status::internal("fileio answered Read with no message"),
            _ => status,
        });
    }
    if response.status() != http::StatusCode::OK {
        return Err(Status::unknown(format!(
            "fileio answered Read with HTTP status {}",
            response.status()
        )));
    }
    Ok(ReadFrames::new(response.into_body()))
}

/// The messages of a `Read` response body, as a stream: the header, then chunks, whose
/// data are the slices of the HTTP/2 frames that carried them (a chunk sent in several
/// frames comes out as several chunks of the same range). The stream ends after the
/// status, or with it when it is not OK.
pub struct ReadFrames<B> {
    body: B,
    /// What is left of the last frame.
    pending: Bytes,
    /// The start of a message whose framing spans frames (a few dozen bytes at most:
    /// see [`decide`]).
    head: BytesMut,
    state: State,
    ended: bool,
}

/// Where in the stream of messages the reader is.
enum State {
    /// At the start of a message.
    Head,
    /// In a chunk's data: `left` more bytes of range `range_index`.
    Data { range_index: u32, left: usize },
    /// Gathering a message of `len` bytes to decode it whole.
    Whole { len: usize, gathered: BytesMut },
}

/// What the start of a message says.
enum Decision {
    /// A chunk whose data starts `at` bytes in.
    Chunk { at: usize, range_index: u32, len: usize },
    /// A message of `len` bytes (after its prefix) to decode whole.
    Whole { len: usize },
}

impl<B> ReadFrames<B> {
    /// Reads the messages of `body`.
    pub fn new(body: B) -> Self {
        Self {
            body,
            pending: Bytes::new(),
            head: BytesMut::new(),
            state: State::Head,
            ended: false,
        }
    }

    /// The next message that `pending` completes, consuming what it reads; `None` when
    /// it needs the next frame.
    fn next_message(&mut self) -> Result<Option<pb::ReadResponse>, Status> {
        while !self.pending.is_empty() {
            match &mut self.state {
                State::Head => self.read_head()?,
                State::Data { range_index, left } => {
                    let data = self.pending.split_to((*left).min(self.pending.len()));
                    let range_index = *range_index;
                    *left -= data.len();
                    if *left == 0 {
                        self.state = State::Head;
                    }
                    let chunk = pb::read_response::Item::Chunk(ReadChunk { range_index, data });
                    return Ok(Some(pb::ReadResponse { item: Some(chunk) }));
                }
                State::Whole { len, gathered } => {
                    let wanted = *len - gathered.len();
                    let message = if gathered.is_empty() && self.pending.len() >= wanted {
                        // All in this frame: decoded in place, the bytes fields sharing it.
                        self.pending.split_to(wanted)
                    } else {
                        let taken = self.pending.split_to(wanted.min(self.pending.len()));
                        gathered.extend_from_slice(&taken);
                        if gathered.len() < *len {
                            continue;
                        }
                        std::mem::take(gathered).freeze()
                    };
                    self.state = State::Head;
                    return prost::Message::decode(message).map(Some).map_err(|e| {
                        Status::internal(format!("fileio sent a Read message that does not decode: {e}"))
                    });
                }
            }
        }
        Ok(None)
    }

    /// Reads the start of a message from `head` and `pending`: on a decision it moves to
    /// the message's state, past what it read; otherwise it keeps the bytes in `head`.
    fn read_head(&mut self) -> Result<(), Status> {
        let seen = Seen {
            head: &self.head,
            pending: &self.pending,
        };
        let Some(decision) = decide(&seen)? else {
            // A few bytes in all: see `decide`.
            self.head.extend_from_slice(&self.pending);
            self.pending.clear();
            return Ok(());
        };
        let (at, next) = match decision {
            Decision::Chunk { at, range_index, len } => (
                at,
                State::Data {
                    range_index,
                    left: len,
                },
            ),
            Decision::Whole { len } if len > MAX_WHOLE_MESSAGE => {
                return Err(Status::resource_exhausted(format!(
                    "fileio sent a Read message of {len} bytes, more than the {MAX_WHOLE_MESSAGE} allowed"
                )));
            }
            Decision::Whole { len } => (
                PREFIX_BYTES,
                State::Whole {
                    len,
                    gathered: BytesMut::new(),
                },
            ),
        };
        // `head` holds fewer bytes than any decision reads, except the message bytes a
        // whole message had gathered there while its start was undecided.
        let from_head = self.head.len().min(at);
        let from_pending = at - from_head;
        let mut state = next;
        if let State::Whole { gathered, .. } = &mut state {
            gathered.extend_from_slice(&self.head[from_head..]);
        }
        self.head.clear();
        self.pending.advance(from_pending);
        self.state = match state {
            State::Data { left: 0, .. } => State::Head,
            state => state,
        };
        Ok(())
    }

    /// The end of the call: its status, in `trailers`.
    fn end(&self, trailers: &http::HeaderMap) -> Option<Result<pb::ReadResponse, Status>> {
        let inside = !matches!(self.state, State::Head) || !self.head.is_empty() || !self.pending.is_empty();
        if inside {
            return Some(Err(Status::internal("fileio's Read ended inside a message")));
        }
        match Status::from_header_map(trailers) {
            Some(status) if status.code() == tonic::Code::Ok => None,
            Some(status) => Some(Err(status)),
            None => Some(Err(Status::internal("fileio's Read ended without a status"))),
        }
    }
}

impl<B> futures_util::Stream for ReadFrames<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Item = Result<pb::ReadResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.ended {
                return Poll::Ready(None);
            }
            match self.next_message() {
                Ok(Some(message)) => return Poll::Ready(Some(Ok(message))),
                Ok(None) => {}
                Err(status) => {
                    self.ended = true;
                    return Poll::Ready(Some(Err(status)));
                }
            }
            let frame = futures_util::ready!(Pin::new(&mut self.body).poll_frame(cx));
            let ending = match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        self.pending = data;
                        continue;
                    }
                    Err(frame) => match frame.trailers_ref() {
                        Some(trailers) => self.end(trailers),
                        None => continue,
                    },
                },
                Some(Err(e)) => Some(Err(Status::from_error(e.into()))),
                None => Some(Err(Status::internal("fileio's Read ended without a status"))),
            };
            self.ended = true;
            return Poll::Ready(ending);
        }
    }
}

/// The bytes of a message's start seen so far: `head`, then `pending`.
struct Seen<'a> {
    head: &'a [u8],
    pending: &'a [u8],
}

impl Seen<'_> {
    fn len(&self) -> usize {
        self.head.len() + self.pending.len()
    }

    fn at(&self, i: usize) -> Option<u8> {
        match i.checked_sub(self.head.len()) {
            None => Some(self.head[i]),
            Some(j) => self.pending.get(j).copied(),
        }
    }
}

/// What a message starting at `seen` is, once enough of it is seen (`None` before: that
/// is only while its prefix and the keys and varints before a chunk's data are not all
/// seen, at most 38 bytes, and never once the whole message is). A chunk is recognised only in prost's shape (see [the module](super));
/// anything else is decoded whole.
fn decide(seen: &Seen<'_>) -> Result<Option<Decision>, Status> {
    if seen.len() < PREFIX_BYTES {
        return Ok(None);
    }
    if seen.at(0) != Some(0) {
        return Err(Status::internal(
            "fileio sent a compressed Read message, which a gateway does not read",
        ));
    }
    let byte = |i| seen.at(i).unwrap_or_default();
    let len = u32::from_be_bytes([byte(1), byte(2), byte(3), byte(4)]) as usize;
    let end = PREFIX_BYTES + len;
    let whole = Ok(Some(Decision::Whole { len }));
    let mut reader = FieldReader {
        seen,
        at: PREFIX_BYTES,
        end,
    };
    macro_rules! read {
        ($step:expr) => {
            match $step {
                Read::Value(value) => value,
                Read::More => return Ok(None),
                Read::Other => return whole,
            }
        };
    }
    if read!(reader.byte()) != CHUNK_KEY {
        return whole;
    }
    let inner = read!(reader.varint());
    if reader.at as u64 + inner != end as u64 {
        return whole;
    }
    let mut key = read!(reader.byte());
    let mut range_index = 0;
    if key == RANGE_INDEX_KEY {
        range_index = match u32::try_from(read!(reader.varint())) {
            Ok(index) => index,
            Err(_) => return whole,
        };
        key = read!(reader.byte());
    }
    if key != DATA_KEY {
        return whole;
    }
    let data = read!(reader.varint());
    if reader.at as u64 + data != end as u64 {
        return whole;
    }
    Ok(Some(Decision::Chunk {
        at: reader.at,
        range_index,
        len: data as usize,
    }))
}

/// A step of reading a chunk's framing.
enum Read<T> {
    Value(T),
    /// Not seen yet.
    More,
    /// Not a chunk in prost's shape.
    Other,
}

/// Reads bytes and varints of a message that ends at `end`.
struct FieldReader<'a, 'b> {
    seen: &'a Seen<'b>,
    at: usize,
    end: usize,
}

impl FieldReader<'_, '_> {
    fn byte(&mut self) -> Read<u8> {
        if self.at >= self.end {
            return Read::Other;
        }
        match self.seen.at(self.at) {
            Some(byte) => {
                self.at += 1;
                Read::Value(byte)
            }
            None => Read::More,
        }
    }

    /// A varint of at most 10 bytes.
    fn varint(&mut self) -> Read<u64> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = match self.byte() {
                Read::Value(byte) => byte,
                Read::More => return Read::More,
                Read::Other => return Read::Other,
            };
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Read::Value(value);
            }
        }
        Read::Other
    }
}
