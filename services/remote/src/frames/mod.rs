//! fileio's `Read` and `Write` calls, framed by hand on both ends so that a file's bytes
//! are never copied in user space on their way between fileio and the gateway.
//!
//! tonic's codecs copy every message twice: the sender encodes it into the stream's
//! buffer, and the receiver gathers the HTTP/2 frames into another before decoding. For a
//! GET of a large file in microservices mode those two copies were 19 % of all the CPU
//! both processes spent (docs/benchmarks.md, "GET 10 MiB"); a PUT paid the same in the
//! other direction. Everything else about the calls stays gRPC: the same paths, headers,
//! status trailers and messages, so any gRPC client or server can still talk to either
//! end (tests below prove both directions).
//!
//! * [`send`]: a stream of messages as an HTTP/2 body ([`send::Framed`]). A message that
//!   carries file bytes leaves as two body frames: its gRPC and protobuf framing (at most
//!   33 bytes, [`Streamed::split`]), then the bytes' own [`Bytes`], which h2 hands to the
//!   socket with the framing in one vectored write.
//! * [`receive`]: an HTTP/2 body as a stream of messages ([`receive::Frames`]). It reads
//!   the framing of each message that carries file bytes and passes the bytes on as the
//!   slices of the HTTP/2 frames that carried them.
//!
//! A message is streamed only in exactly the shape prost gives it ([`Streamed`]); any
//! other message is gathered whole and decoded with prost.

pub mod receive;
pub mod send;

use bytes::{BufMut, Bytes, BytesMut};
use kubedav_api::pb::fileio::v1 as pb;

/// The `Read` method's path.
pub const READ_PATH: &str = "/kubedav.fileio.v1.FileIo/Read";

/// The `Write` method's path.
pub const WRITE_PATH: &str = "/kubedav.fileio.v1.FileIo/Write";

/// The largest message that is gathered whole (a header, or an oddly framed chunk): the
/// same bound as the decoders of fileio's generated client and server.
pub const MAX_WHOLE_MESSAGE: usize = 4 * 1024 * 1024;

/// The gRPC prefix of a message: not compressed, then its length.
const PREFIX_BYTES: usize = 5;

/// Protobuf keys: field 2 of `ReadResponse` (`chunk`), of `ReadChunk` (`data`) and of
/// `WriteRequest` (`data`), all length-delimited, and field 1 of `ReadChunk`
/// (`range_index`), a varint.
const CHUNK_KEY: u8 = (2 << 3) | 2;
const DATA_KEY: u8 = (2 << 3) | 2;
const RANGE_INDEX_KEY: u8 = 1 << 3;

/// The longest framing [`Streamed::split`] makes: the prefix, two keys with their
/// 10-byte length varints (at most), and the range index's key and 5-byte varint.
pub const MAX_HEAD: usize = PREFIX_BYTES + (1 + 10) + (1 + 5) + (1 + 10);

/// A message type of which one bytes field, the last in the message, is passed through
/// without copies.
pub trait Streamed: prost::Message + Default + Sized {
    /// The framing that precedes the message's bytes (its gRPC prefix included), and
    /// the bytes; or the message itself when it carries none.
    fn split(self) -> Result<(Bytes, Bytes), Self>;

    /// Reads a message's fields up to the length of its bytes field, as [`Self::split`]
    /// writes them: the tag to give the bytes ([`Self::piece`]). [`Read::Other`] for a
    /// message in any other shape.
    fn read_up_to_bytes(fields: &mut receive::FieldReader<'_, '_>) -> Read<u32>;

    /// A message holding `data`, a piece of the bytes of a message whose tag was `tag`.
    fn piece(tag: u32, data: Bytes) -> Self;
}

/// A step of reading a message's framing.
pub enum Read<T> {
    /// What was read.
    Value(T),
    /// Not seen yet.
    More,
    /// Not in the shape a [`Streamed`] message passes its bytes in.
    Other,
}

/// Unwraps a [`Read::Value`], returning any other step.
macro_rules! value {
    ($step:expr) => {
        match $step {
            Read::Value(value) => value,
            Read::More => return Read::More,
            Read::Other => return Read::Other,
        }
    };
}
pub(crate) use value;

impl Streamed for pb::ReadResponse {
    fn split(self) -> Result<(Bytes, Bytes), Self> {
        match self.item {
            Some(pb::read_response::Item::Chunk(chunk)) if !chunk.data.is_empty() => {
                Ok((chunk_head(chunk.range_index, chunk.data.len()), chunk.data))
            }
            item => Err(Self { item }),
        }
    }

    fn read_up_to_bytes(fields: &mut receive::FieldReader<'_, '_>) -> Read<u32> {
        if value!(fields.byte()) != CHUNK_KEY {
            return Read::Other;
        }
        let inner = value!(fields.varint());
        if !fields.ends_after(inner) {
            return Read::Other;
        }
        let mut key = value!(fields.byte());
        let mut range_index = 0;
        if key == RANGE_INDEX_KEY {
            range_index = match u32::try_from(value!(fields.varint())) {
                Ok(index) => index,
                Err(_) => return Read::Other,
            };
            key = value!(fields.byte());
        }
        if key != DATA_KEY {
            return Read::Other;
        }
        Read::Value(range_index)
    }

    fn piece(range_index: u32, data: Bytes) -> Self {
        let chunk = pb::ReadChunk { range_index, data };
        Self {
            item: Some(pb::read_response::Item::Chunk(chunk)),
        }
    }
}

impl Streamed for pb::WriteRequest {
    fn split(self) -> Result<(Bytes, Bytes), Self> {
        match self.item {
            Some(pb::write_request::Item::Data(data)) if !data.is_empty() => {
                Ok((data_head(data.len()), data))
            }
            item => Err(Self { item }),
        }
    }

    fn read_up_to_bytes(fields: &mut receive::FieldReader<'_, '_>) -> Read<u32> {
        match value!(fields.byte()) {
            DATA_KEY => Read::Value(0),
            _ => Read::Other,
        }
    }

    fn piece(_: u32, data: Bytes) -> Self {
        Self {
            item: Some(pb::write_request::Item::Data(data)),
        }
    }
}

/// Messages that carry no file bytes: always gathered whole.
macro_rules! never_streamed {
    ($($message:ty),*) => {$(
        impl Streamed for $message {
            fn split(self) -> Result<(Bytes, Bytes), Self> {
                Err(self)
            }

            fn read_up_to_bytes(_: &mut receive::FieldReader<'_, '_>) -> Read<u32> {
                Read::Other
            }

            fn piece(_: u32, _: Bytes) -> Self {
                unreachable!("this message is never streamed")
            }
        }
    )*};
}

never_streamed!(pb::ReadRequest, pb::WriteResponse);

/// The gRPC prefix of a message of `len` bytes, into `head`.
fn put_prefix(head: &mut BytesMut, len: usize) {
    head.put_u8(0);
    // Chunks are at most 8 MiB (a mapping) or hyper's read buffer: a u32 holds them.
    head.put_u32(u32::try_from(len).expect("a chunk fits a gRPC message"));
}

/// The bytes that precede `data_len` bytes of data of range `range_index` in a `Read`
/// response: the gRPC message prefix and the protobuf framing of
/// `ReadResponse { chunk: ReadChunk { range_index, data } }`, exactly as prost encodes it.
pub fn chunk_head(range_index: u32, data_len: usize) -> Bytes {
    let index_len = if range_index == 0 {
        0
    } else {
        1 + prost::encoding::encoded_len_varint(u64::from(range_index))
    };
    let inner_len = index_len + 1 + prost::encoding::encoded_len_varint(data_len as u64) + data_len;
    let message_len = 1 + prost::encoding::encoded_len_varint(inner_len as u64) + inner_len;
    let mut head = BytesMut::with_capacity(MAX_HEAD);
    put_prefix(&mut head, message_len);
    head.put_u8(CHUNK_KEY);
    prost::encoding::encode_varint(inner_len as u64, &mut head);
    if range_index != 0 {
        head.put_u8(RANGE_INDEX_KEY);
        prost::encoding::encode_varint(u64::from(range_index), &mut head);
    }
    head.put_u8(DATA_KEY);
    prost::encoding::encode_varint(data_len as u64, &mut head);
    head.freeze()
}

/// The bytes that precede `data_len` bytes of a body in a `Write` request: the gRPC
/// message prefix and the protobuf framing of `WriteRequest { data }`, as prost encodes it.
pub fn data_head(data_len: usize) -> Bytes {
    let message_len = 1 + prost::encoding::encoded_len_varint(data_len as u64) + data_len;
    let mut head = BytesMut::with_capacity(MAX_HEAD);
    put_prefix(&mut head, message_len);
    head.put_u8(DATA_KEY);
    prost::encoding::encode_varint(data_len as u64, &mut head);
    head.freeze()
}

/// `message` with its gRPC prefix, encoded by prost: for the small messages.
pub fn whole_message(message: &impl prost::Message) -> Bytes {
    let len = message.encoded_len();
    let mut framed = BytesMut::with_capacity(PREFIX_BYTES + len);
    put_prefix(&mut framed, len);
    message
        .encode(&mut framed)
        .expect("the buffer was sized for the message");
    framed.freeze()
}

#[cfg(test)]
mod tests;
