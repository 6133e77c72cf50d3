//! The `Read` call's messages, framed by hand on both ends so that a chunk's bytes are
//! never copied in user space on their way from fileio's read to the gateway's client.
//!
//! tonic's codecs copy every message twice: the server encodes it into the stream's
//! buffer, and the client gathers the HTTP/2 frames into another before decoding. For a
//! GET of a large file in microservices mode those two copies were 19 % of all the CPU
//! both processes spent (docs/benchmarks.md, "GET 10 MiB"). Everything else about the
//! call stays gRPC: the same path, headers, status trailers and messages, so any gRPC
//! client or server can still talk to either end (tests below prove both directions).
//!
//! * [`send`]: fileio's side. A chunk leaves as two HTTP/2 body frames: its gRPC and
//!   protobuf framing (at most 33 bytes, [`chunk_head`]), then the chunk's own
//!   [`Bytes`], which h2 hands to the socket with the head in one vectored write.
//! * [`receive`]: the gateway's side. It reads the framing of each chunk and passes the
//!   data on as the slices of the HTTP/2 frames that carried it.
//!
//! A chunk message has exactly the shape prost gives it: the `chunk` field of
//! `ReadResponse`, holding `range_index` (left out when 0) and then `data`, which ends
//! the message. Any other message (the header, or a chunk framed otherwise) is gathered
//! whole and decoded with prost.

pub mod receive;
pub mod send;

use bytes::{BufMut, Bytes, BytesMut};

/// The `Read` method's path.
pub const READ_PATH: &str = "/kubedav.fileio.v1.FileIo/Read";

/// The largest message that is gathered whole (the header, or an oddly framed chunk):
/// the same bound as the decoders of fileio's generated client and server.
pub const MAX_WHOLE_MESSAGE: usize = 4 * 1024 * 1024;

/// The gRPC prefix of a message: not compressed, then its length.
const PREFIX_BYTES: usize = 5;

/// Protobuf keys: field 2 of `ReadResponse` (`chunk`) and of `ReadChunk` (`data`), both
/// length-delimited, and field 1 of `ReadChunk` (`range_index`), a varint.
const CHUNK_KEY: u8 = (2 << 3) | 2;
const DATA_KEY: u8 = (2 << 3) | 2;
const RANGE_INDEX_KEY: u8 = 1 << 3;

/// The longest [`chunk_head`]: the prefix, two keys with their 10-byte length varints
/// (at most), and the range index's key and 5-byte varint.
pub const MAX_CHUNK_HEAD: usize = PREFIX_BYTES + (1 + 10) + (1 + 5) + (1 + 10);

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
    let mut head = BytesMut::with_capacity(MAX_CHUNK_HEAD);
    head.put_u8(0);
    // A chunk is at most 8 MiB (a mapping) or 256 KiB (a read): its message fits a u32.
    head.put_u32(u32::try_from(message_len).expect("a Read chunk fits a gRPC message"));
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

/// `message` with its gRPC prefix, encoded by prost: for the small messages.
pub fn whole_message(message: &impl prost::Message) -> Bytes {
    let len = message.encoded_len();
    let mut framed = BytesMut::with_capacity(PREFIX_BYTES + len);
    framed.put_u8(0);
    framed.put_u32(u32::try_from(len).expect("a small message fits a gRPC message"));
    message
        .encode(&mut framed)
        .expect("the buffer was sized for the message");
    framed.freeze()
}

#[cfg(test)]
mod tests;
