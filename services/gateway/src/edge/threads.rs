//! Connection threads: every client connection is served, for its whole life, on one of
//! `--http-threads` threads, each running a single-threaded tokio runtime with a reactor
//! (epoll) of its own. The accept loop stays on the shared runtime and hands each new
//! connection to the thread holding the fewest.
//!
//! Why not the shared work-stealing runtime: with another busy process on the machine
//! its workers got a smaller share of the CPU than nginx's processes, at the same cost
//! per request. The likely cause: they share one reactor, so a worker that finds work
//! wakes another to help, and the kernel tends to queue both beside the thread that
//! woke them. A thread per
//! connection group that sleeps only in its own epoll, as nginx's worker processes do,
//! keeps the share nginx gets (docs/benchmarks.md, "2026-11-26 (6)"). The price is nginx's
//! too: a connection cannot move to an idle thread while its own is busy, so CPU-heavy
//! work (password hashing, HTML conversion, directory scans) runs on the blocking pool.
//! In a gateway process, calls to the gRPC services made on a connection thread go over
//! connections of that thread's own (`kubedav_remote::balance`), so a call does not
//! wake the shared runtime's workers (docs/benchmarks.md, "2026-12-07").

use futures_util::FutureExt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// How long a connection thread, once told to stop, waits for its blocking tasks.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// A connection's serving future, made on its thread (where its socket is registered).
type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// The threads connections are served on. Dropping it stops them: each closes the
/// connections it still holds and ends.
pub struct ConnectionThreads {
    threads: Vec<ConnectionThread>,
}

struct ConnectionThread {
    jobs: mpsc::UnboundedSender<Job>,
    /// Connections this thread holds.
    held: Arc<AtomicUsize>,
}

impl ConnectionThreads {
    /// Starts `count` threads; 0 serves connections on the shared runtime instead.
    pub fn start(count: usize) -> Result<Self, String> {
        let threads = (0..count)
            .map(|index| {
                let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start HTTP connection thread {index}: {e}"))?;
                std::thread::Builder::new()
                    .name(format!("kubedav-http-{index}"))
                    .spawn(move || {
                        // Calls to other services made here get connections of their own.
                        kubedav_kit::connection_thread::mark();
                        runtime.block_on(async move {
                            while let Some(job) = queue.recv().await {
                                tokio::spawn(job());
                            }
                        });
                        runtime.shutdown_timeout(STOP_GRACE);
                    })
                    .map_err(|e| format!("cannot start HTTP connection thread {index}: {e}"))?;
                Ok(ConnectionThread {
                    jobs,
                    held: Arc::default(),
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { threads })
    }

    /// Serves `stream` with `serve` on the thread holding the fewest connections (the
    /// shared runtime when there are no threads).
    pub fn serve<F, Fut>(&self, stream: TcpStream, serve: F)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some(thread) = self
            .threads
            .iter()
            .min_by_key(|thread| thread.held.load(Ordering::Relaxed))
        else {
            tokio::spawn(serve(stream));
            return;
        };
        // The socket leaves this runtime's reactor and joins the thread's.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!("cannot hand a connection to its thread: {e}");
                return;
            }
        };
        let held = Held::new(thread.held.clone());
        // The serving future is made here, on the thread, and counted until it ends: a
        // combinator, not an `async` block awaiting it, which would hold the closure and
        // the future it makes side by side for the connection's whole life.
        let job: Job = Box::new(move || match TcpStream::from_std(stream) {
            Ok(stream) => Box::pin(serve(stream).map(move |()| drop(held))),
            Err(e) => {
                tracing::warn!("cannot register a connection on its thread: {e}");
                Box::pin(std::future::ready(()))
            }
        });
        // A thread ends only when this is dropped, so the send cannot fail.
        let _ = thread.jobs.send(job);
    }

    /// Connections each thread holds, in thread order.
    pub fn held(&self) -> Vec<usize> {
        self.threads
            .iter()
            .map(|thread| thread.held.load(Ordering::Relaxed))
            .collect()
    }
}

/// One connection counted on its thread until it ends (or is dropped unserved).
struct Held(Arc<AtomicUsize>);

impl Held {
    fn new(count: Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The number of connection threads when none is configured: one per CPU this process
/// may use (a cgroup CPU limit counts, rounded up).
pub fn default_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio::sync::oneshot;

    /// A connected pair: (the server's end, the client's end).
    async fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (accepted, client) = tokio::join!(listener.accept(), client);
        (accepted.unwrap().0, client.unwrap())
    }

    /// Serves a connection by echoing bytes until the client closes, after telling
    /// `names` which thread it runs on.
    fn echo(
        index: usize,
        names: mpsc::UnboundedSender<(usize, String)>,
    ) -> impl FnOnce(TcpStream) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        move |mut stream| {
            Box::pin(async move {
                let thread = std::thread::current().name().unwrap_or_default().to_owned();
                let _ = names.send((index, thread));
                let mut byte = [0u8; 1];
                while matches!(stream.read(&mut byte).await, Ok(1)) {
                    let _ = stream.write_all(&byte).await;
                }
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_go_to_the_thread_holding_the_fewest_and_are_served_there() {
        let threads = ConnectionThreads::start(2).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (names, mut named) = mpsc::unbounded_channel();
        let mut clients = Vec::new();
        for index in 0..4 {
            let (server, client) = pair(&listener).await;
            threads.serve(server, echo(index, names.clone()));
            clients.push(client);
        }
        let mut seen = vec![String::new(); 4];
        for _ in 0..4 {
            let (index, thread) = named.recv().await.unwrap();
            seen[index] = thread;
        }
        assert_eq!(
            seen,
            [
                "kubedav-http-0",
                "kubedav-http-1",
                "kubedav-http-0",
                "kubedav-http-1"
            ]
        );
        assert_eq!(threads.held(), [2, 2]);
        for client in &mut clients {
            client.write_all(b"x").await.unwrap();
            let mut byte = [0u8; 1];
            client.read_exact(&mut byte).await.unwrap();
            assert_eq!(&byte, b"x");
        }
        // Both connections of thread 0 end: the next two go there.
        drop(clients.remove(2));
        drop(clients.remove(0));
        while threads.held() != [0, 2] {
            tokio::task::yield_now().await;
        }
        for index in 4..6 {
            let (server, client) = pair(&listener).await;
            threads.serve(server, echo(index, names.clone()));
            clients.push(client);
            assert_eq!(named.recv().await.unwrap(), (index, "kubedav-http-0".to_owned()));
        }
        assert_eq!(threads.held(), [2, 2]);
    }

    #[tokio::test]
    async fn without_threads_connections_are_served_on_the_shared_runtime() {
        let threads = ConnectionThreads::start(0).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (server, _client) = pair(&listener).await;
        let (done, finished) = oneshot::channel();
        threads.serve(server, move |_| async move {
            let _ = done.send(std::thread::current().name().map(str::to_owned));
        });
        let name = finished.await.unwrap();
        assert_ne!(name.as_deref(), Some("kubedav-http-0"));
        assert!(threads.held().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_threads_closes_the_connections_they_hold() {
        let threads = ConnectionThreads::start(1).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (server, mut client) = pair(&listener).await;
        let (started, running) = oneshot::channel();
        threads.serve(server, move |stream| async move {
            let _ = started.send(());
            let _stream = stream;
            std::future::pending::<()>().await;
        });
        running.await.unwrap();
        drop(threads);
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut rest)).await;
        assert!(
            matches!(read, Ok(Ok(0))),
            "the connection was not closed: {read:?}"
        );
    }
}
