//! Client connections that send mapped file data with `sendfile(2)`: the zero-copy path
//! of large GET bodies over HTTP/1.
//!
//! hyper writes a response as a list of buffers (`writev`): the head it formatted, then
//! the body's chunks as they are. A GET of a large file on a volume, in one process,
//! asks fileio for chunks that are mappings of the file ([`kubedav_zerocopy`]), which
//! nothing reads. [`SendfileStream`] recognises those buffers by their address and
//! sends them from the file with `sendfile` instead, the head before them. Everything else is written as
//! before. Only HTTP/1 responses carry such chunks ([`Sendfile`](crate::request::Sendfile)): HTTP/2 copies data
//! into frames, which would read the mapping.

use kubedav_zerocopy::{self as mapped, FileSpan};
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// A client's TCP connection that sends mapped chunks with sendfile.
pub struct SendfileStream {
    inner: TcpStream,
}

impl SendfileStream {
    /// Wraps an accepted connection.
    pub fn new(inner: TcpStream) -> Self {
        Self { inner }
    }

    /// Writes `head` (buffers in ordinary memory) and then the mapped `span` of
    /// `length` bytes, once the socket is writable; the count written, as `writev`
    /// would say.
    fn send(&self, head: &[IoSlice<'_>], span: FileSpan, length: usize) -> io::Result<usize> {
        let socket = self.inner.as_raw_fd();
        let head_length: usize = head.iter().map(|b| b.len()).sum();
        if head_length > 0 {
            let written = send_head(socket, head)?;
            if written < head_length {
                return Ok(written);
            }
        }
        match send_file(socket, span, length) {
            Ok(0) if head_length > 0 => Ok(head_length),
            Ok(0) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file shrank while it was being sent; closing the connection",
            )),
            Ok(sent) => Ok(head_length + sent),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && head_length > 0 => Ok(head_length),
            Err(e) => Err(e),
        }
    }
}

/// `sendmsg` of `buffers` (as `writev`, without raising SIGPIPE). Not with `MSG_MORE`:
/// holding the head back for the file's pages cost more CPU per 1 MiB GET than sending
/// it at once, as nginx does (docs/benchmarks.md).
fn send_head(socket: RawFd, buffers: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is ABI-compatible with iovec on Unix; the kernel only reads them.
    message.msg_iov = buffers.as_ptr() as *mut libc::iovec;
    message.msg_iovlen = buffers.len() as _;
    // SAFETY: the message refers to `buffers`, alive for the call.
    let sent = unsafe { libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// `sendfile` of `length` bytes of `span` to `socket`.
fn send_file(socket: RawFd, span: FileSpan, length: usize) -> io::Result<usize> {
    let mut offset = libc::off_t::try_from(span.offset).map_err(io::Error::other)?;
    let length = length.min(span.available);
    // SAFETY: both descriptors are open: the socket is ours, and the file is kept open
    // by the mapping, whose bytes the caller is writing.
    let sent = unsafe { libc::sendfile(socket, span.fd, &mut offset, length) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

impl AsyncRead for SendfileStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for SendfileStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mapped = if mapped::any_alive() {
            bufs.iter()
                .enumerate()
                .find_map(|(i, b)| mapped::locate(b.as_ptr()).map(|span| (i, span)))
        } else {
            None
        };
        let Some((at, span)) = mapped else {
            return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        };
        let (head, length) = (&bufs[..at], bufs[at].len());
        loop {
            ready!(self.inner.poll_write_ready(cx))?;
            match self
                .inner
                .try_io(Interest::WRITABLE, || self.send(head, span, length))
            {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                done => return Poll::Ready(done),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
