//! Large PUT bodies written by the gateway itself into the incoming area of fileio's
//! volume (`--fileio-incoming`; fileio's `incoming` module lands them and explains the
//! checks), so their bytes never cross gRPC.
//!
//! The gateway makes a new file there and calls fileio's `Write` at once, naming the file
//! (`WriteHeader.incoming`); the call's stream carries no bytes. fileio checks the header
//! while the gateway writes the body into the file, double buffered on the blocking pool;
//! a refusal (no parent, no room) ends both. Once the body is whole and of its declared
//! size, the gateway closes the file and ends the stream, and fileio lands the file.
//! Whatever ends otherwise (a refusal, a body cut short or too long, a dropped request)
//! removes the file.

use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::fileio::{FileIo, IncomingArea, IncomingFile, WriteHeader, WriteResponse};
use kubedav_metrics::Counter;
use std::sync::{Arc, LazyLock};
use tokio::task::JoinHandle;
use tonic::Status;

/// The smallest declared body written into the incoming area. Below it the gRPC stream
/// costs less than a file of its own, and a gateway's kept copies (up to 1 MiB) are made
/// of bodies that stream.
pub(super) const INCOMING_FROM: u64 = 1 << 20;

/// Bytes received before they are handed to the blocking pool to write.
const BATCH_BYTES: usize = 1 << 20;

static WRITTEN: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter(
        "kubedav_gateway_direct_writes_total",
        "Large PUT bodies the gateway wrote into fileio's incoming area and fileio landed \
         (--fileio-incoming).",
    )
});

pub(super) fn register_metrics() {
    LazyLock::force(&WRITTEN);
}

/// Whether the body of a write with `header` goes into the incoming area: a plain write
/// of a declared size of at least [`INCOMING_FROM`] whose checksums no one computes.
/// Checksums are computed by fileio while a body streams; a body written here would have
/// to be read back for them.
pub(super) fn suits(header: &WriteHeader) -> bool {
    header.from_upload.is_none()
        && header.incoming.is_empty()
        && header.checksums.is_empty()
        && header.compute.is_empty()
        && header.expected_size.is_some_and(|size| size >= INCOMING_FROM)
}

/// Writes `body` into a new file of `area` and has fileio (`inner`) land it as the
/// write `header` asks.
pub(super) async fn write_through<F: FileIo>(
    inner: &F,
    area: &Arc<dyn IncomingArea>,
    mut header: WriteHeader,
    body: BoxStream<Bytes>,
) -> Result<WriteResponse, Status> {
    let creating = area.clone();
    let file = tokio::task::spawn_blocking(move || creating.create())
        .await
        .map_err(|e| Status::internal(format!("making an incoming file failed: {e}")))??;
    header.incoming = file.name().to_owned();
    let size = header.expected_size.unwrap_or(0);
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    // Ends once the file is closed; fails (and so cancels the call) if the body failed.
    let closed: BoxStream<Bytes> = Box::pin(futures_util::stream::once(closed_rx).filter_map(|closed| {
        std::future::ready(
            closed
                .is_err()
                .then(|| Err(Status::cancelled("the body was not written whole"))),
        )
    }));
    let call = inner.write(header, closed);
    tokio::pin!(call);
    let filled = tokio::select! {
        // fileio answered before the body was written: a refusal (the parent, the room).
        answered = &mut call => {
            return answered.and_then(|_| Err(Status::internal("fileio answered a write from the incoming area before its file was written")));
        }
        filled = fill(file, body, size) => filled,
    };
    // On an error the file is gone, and the call, dropped, is cancelled.
    let file = filled?;
    let _ = closed_tx.send(());
    let answered = call.await;
    if answered.is_ok() {
        WRITTEN.inc();
    }
    drop(file);
    answered
}

/// Writes `body`, which must have `size` bytes, into `file` and closes it.
async fn fill(
    file: Box<dyn IncomingFile>,
    mut body: BoxStream<Bytes>,
    size: u64,
) -> Result<Box<dyn IncomingFile>, Status> {
    // Double buffering: while one batch is written on the blocking pool, the next is
    // received. Memory per upload is bounded by two batches.
    let mut slot = Slot::Ready(file);
    let (mut batch, mut batch_len, mut received) = (Vec::new(), 0usize, 0u64);
    loop {
        let next = body.next().await;
        let end = next.is_none();
        if let Some(chunk) = next {
            let chunk = chunk?;
            received += chunk.len() as u64;
            if received > size {
                return Err(Status::invalid_argument(format!(
                    "the body is longer than the {size} bytes declared; nothing was written"
                )));
            }
            batch_len += chunk.len();
            batch.push(chunk);
        }
        if batch_len >= BATCH_BYTES || (end && batch_len > 0) {
            let mut file = slot.wait().await?;
            let chunks = std::mem::take(&mut batch);
            batch_len = 0;
            slot = Slot::Writing(tokio::task::spawn_blocking(move || {
                file.write_chunks(&chunks)?;
                Ok(file)
            }));
        }
        if end {
            break;
        }
    }
    let mut file = slot.wait().await?;
    if received != size {
        return Err(Status::cancelled(format!(
            "the body had {received} bytes but {size} were declared; nothing was written"
        )));
    }
    file.close()?;
    Ok(file)
}

/// The file, idle or busy writing a batch on the blocking pool.
enum Slot {
    Ready(Box<dyn IncomingFile>),
    Writing(JoinHandle<Result<Box<dyn IncomingFile>, Status>>),
}

impl Slot {
    async fn wait(self) -> Result<Box<dyn IncomingFile>, Status> {
        match self {
            Slot::Ready(file) => Ok(file),
            Slot::Writing(handle) => handle
                .await
                .map_err(|e| Status::internal(format!("writing an incoming file failed: {e}")))?,
        }
    }
}
