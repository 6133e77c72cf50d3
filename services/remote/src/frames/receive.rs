//! Reading the calls by hand: a call made on a channel ([`call`]), and an HTTP/2 body
//! read as messages as its frames come ([`Frames`]), the bytes of [`Streamed`] messages
//! passed on as slices of those frames.

use super::{MAX_WHOLE_MESSAGE, PREFIX_BYTES, Read, Streamed, value};
use bytes::{Buf, Bytes, BytesMut};
use http_body::Body;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::Status;

/// Makes the call `path` on `channel` with the request `messages` (framed by
/// [`super::send::Framed`]), and reads the response's messages with [`Frames`]: what a
/// generated client does, without tonic's encoder and decoder. A status in the
/// response's headers (a call that failed before its first message) is the error.
pub async fn call<S, B, Q, R, M>(
    mut channel: S,
    path: &'static str,
    messages: Q,
) -> Result<Frames<B, M>, Status>
where
    S: tower_service::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<B>,
            Error = Box<dyn std::error::Error + Send + Sync>,
        >,
    Q: futures_util::Stream<Item = Result<R, Status>> + Unpin + Send + 'static,
    R: Streamed + 'static,
{
    let body = tonic::body::Body::new(super::send::Framed::request(messages));
    let request = http::Request::builder()
        .method(http::Method::POST)
        .version(http::Version::HTTP_2)
        .uri(path)
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .body(body)
        .map_err(|e| Status::internal(format!("cannot make the request of {path}: {e}")))?;
    std::future::poll_fn(|cx| channel.poll_ready(cx))
        .await
        .map_err(Status::from_error)?;
    let response = channel.call(request).await.map_err(Status::from_error)?;
    if let Some(status) = Status::from_header_map(response.headers()) {
        return Err(match status.code() {
            tonic::Code::Ok => Status::internal(format!("fileio answered {path} with no message")),
            _ => status,
        });
    }
    if response.status() != http::StatusCode::OK {
        return Err(Status::unknown(format!(
            "fileio answered {path} with HTTP status {}",
            response.status()
        )));
    }
    Ok(Frames::responses(response.into_body()))
}

/// The one message of a unary request or response, or the status that ended it.
pub async fn unary<B, M>(mut frames: Frames<B, M>) -> Result<M, Status>
where
    Frames<B, M>: futures_util::Stream<Item = Result<M, Status>> + Unpin,
{
    use futures_util::StreamExt;
    let message = frames
        .next()
        .await
        .ok_or_else(|| Status::invalid_argument("the call carried no message where one was due"))??;
    match frames.next().await {
        None => Ok(message),
        Some(Err(status)) => Err(status),
        Some(Ok(_)) => Err(Status::invalid_argument(
            "the call carried two messages where one was due",
        )),
    }
}

/// The messages of an HTTP/2 body, as a stream. A [`Streamed`] message whose bytes came
/// in several frames comes out as several messages, each with a piece of them
/// ([`Streamed::piece`]). A response ends after its status in the trailers, or with it
/// when it is not OK; a request ends with its body.
pub struct Frames<B, M> {
    body: B,
    /// Whether this is a request's body, which ends without trailers.
    request: bool,
    /// What is left of the last frame.
    pending: Bytes,
    /// The start of a message whose framing spans frames (a few dozen bytes at most:
    /// see [`decide`]).
    head: BytesMut,
    state: State,
    ended: bool,
    message: PhantomData<fn() -> M>,
}

/// Where in the stream of messages the reader is.
enum State {
    /// At the start of a message.
    Head,
    /// In a message's bytes: `left` more of them, to pieces tagged `tag`.
    Bytes { tag: u32, left: usize },
    /// Gathering a message of `len` bytes to decode it whole.
    Whole { len: usize, gathered: BytesMut },
}

/// What the start of a message says.
enum Decision {
    /// Bytes to stream, which start `at` bytes in.
    Bytes { at: usize, tag: u32, len: usize },
    /// A message of `len` bytes (after its prefix) to decode whole.
    Whole { len: usize },
}

impl<B, M> Frames<B, M> {
    /// Reads the messages of a response's `body`, up to its status.
    pub fn responses(body: B) -> Self {
        Self::new(body, false)
    }

    /// Reads the messages of a request's `body`.
    pub fn requests(body: B) -> Self {
        Self::new(body, true)
    }

    fn new(body: B, request: bool) -> Self {
        Self {
            body,
            request,
            pending: Bytes::new(),
            head: BytesMut::new(),
            state: State::Head,
            ended: false,
            message: PhantomData,
        }
    }

    /// Whether the body stopped inside a message.
    fn inside_a_message(&self) -> bool {
        !matches!(self.state, State::Head) || !self.head.is_empty() || !self.pending.is_empty()
    }

    /// How the stream ends when the body ends, after `trailers` if any.
    fn end(&self, trailers: Option<&http::HeaderMap>) -> Option<Result<M, Status>> {
        if self.inside_a_message() {
            return Some(Err(Status::internal("the call's body ended inside a message")));
        }
        if self.request {
            return None;
        }
        match trailers.and_then(Status::from_header_map) {
            Some(status) if status.code() == tonic::Code::Ok => None,
            Some(status) => Some(Err(status)),
            None => Some(Err(Status::internal("fileio's answer ended without a status"))),
        }
    }
}

impl<B, M: Streamed> Frames<B, M> {
    /// The next message that `pending` completes, consuming what it reads; `None` when
    /// it needs the next frame.
    fn next_message(&mut self) -> Result<Option<M>, Status> {
        loop {
            match &mut self.state {
                State::Head if self.pending.is_empty() => return Ok(None),
                State::Head => self.read_head()?,
                State::Bytes { .. } if self.pending.is_empty() => return Ok(None),
                State::Bytes { tag, left } => {
                    let data = self.pending.split_to((*left).min(self.pending.len()));
                    let tag = *tag;
                    *left -= data.len();
                    if *left == 0 {
                        self.state = State::Head;
                    }
                    return Ok(Some(M::piece(tag, data)));
                }
                State::Whole { len, gathered } => {
                    let wanted = *len - gathered.len();
                    let message = if gathered.is_empty() && self.pending.len() >= wanted {
                        // All in this frame (or empty): decoded in place, the bytes
                        // fields sharing the frame.
                        self.pending.split_to(wanted)
                    } else if self.pending.is_empty() {
                        return Ok(None);
                    } else {
                        let taken = self.pending.split_to(wanted.min(self.pending.len()));
                        gathered.extend_from_slice(&taken);
                        if gathered.len() < *len {
                            continue;
                        }
                        std::mem::take(gathered).freeze()
                    };
                    self.state = State::Head;
                    return M::decode(message).map(Some).map_err(|e| {
                        Status::internal(format!("a message of the call does not decode: {e}"))
                    });
                }
            }
        }
    }

    /// Reads the start of a message from `head` and `pending`: on a decision it moves to
    /// the message's state, past what it read; otherwise it keeps the bytes in `head`.
    fn read_head(&mut self) -> Result<(), Status> {
        let seen = Seen {
            head: &self.head,
            pending: &self.pending,
        };
        let Some(decision) = decide::<M>(&seen)? else {
            // A few bytes in all: see `decide`.
            self.head.extend_from_slice(&self.pending);
            self.pending.clear();
            return Ok(());
        };
        let (at, next) = match decision {
            Decision::Bytes { at, tag, len } => (at, State::Bytes { tag, left: len }),
            Decision::Whole { len } if len > MAX_WHOLE_MESSAGE => {
                return Err(Status::resource_exhausted(format!(
                    "a message of {len} bytes, more than the {MAX_WHOLE_MESSAGE} allowed"
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
        let mut state = next;
        if let State::Whole { gathered, .. } = &mut state {
            gathered.extend_from_slice(&self.head[from_head..]);
        }
        self.head.clear();
        self.pending.advance(at - from_head);
        self.state = match state {
            State::Bytes { left: 0, .. } => State::Head,
            state => state,
        };
        Ok(())
    }
}

impl<B, M> futures_util::Stream for Frames<B, M>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    M: Streamed,
{
    type Item = Result<M, Status>;

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
                        Some(trailers) => self.end(Some(trailers)),
                        None => continue,
                    },
                },
                Some(Err(e)) => Some(Err(Status::from_error(e.into()))),
                None => self.end(None),
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
/// is only while its prefix and the keys and varints before its bytes are not all seen,
/// at most 38 bytes, and never once the whole message is). Bytes are streamed only in
/// the shape [`Streamed::read_up_to_bytes`] reads; anything else is decoded whole.
fn decide<M: Streamed>(seen: &Seen<'_>) -> Result<Option<Decision>, Status> {
    if seen.len() < PREFIX_BYTES {
        return Ok(None);
    }
    if seen.at(0) != Some(0) {
        return Err(Status::internal(
            "a compressed message, which kubedav's services neither send nor read",
        ));
    }
    let byte = |i| seen.at(i).unwrap_or_default();
    let len = u32::from_be_bytes([byte(1), byte(2), byte(3), byte(4)]) as usize;
    let mut fields = FieldReader {
        seen,
        at: PREFIX_BYTES,
        end: PREFIX_BYTES + len,
    };
    let streamed = (|| {
        let tag = value!(M::read_up_to_bytes(&mut fields));
        let bytes = value!(fields.varint());
        match fields.ends_after(bytes) {
            true => Read::Value((tag, bytes as usize)),
            false => Read::Other,
        }
    })();
    Ok(match streamed {
        Read::Value((tag, len)) => Some(Decision::Bytes {
            at: fields.at,
            tag,
            len,
        }),
        Read::More => None,
        Read::Other => Some(Decision::Whole { len }),
    })
}

/// Reads bytes and varints of a message, within its end.
pub struct FieldReader<'a, 'b> {
    seen: &'a Seen<'b>,
    at: usize,
    end: usize,
}

impl FieldReader<'_, '_> {
    /// The next byte.
    pub fn byte(&mut self) -> Read<u8> {
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

    /// The next varint, of at most 10 bytes.
    pub fn varint(&mut self) -> Read<u64> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = value!(self.byte());
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Read::Value(value);
            }
        }
        Read::Other
    }

    /// Whether the message ends exactly `len` bytes after what was read.
    pub fn ends_after(&self, len: u64) -> bool {
        self.at as u64 + len == self.end as u64
    }
}
