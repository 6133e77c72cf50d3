//! The floor of kubedav's HTTP stack: hyper-util's server, as `server.rs` configures it,
//! answering every request with a fixed 1 KiB body and nothing else (no routing, no
//! middleware, no file). `make bench` measures it beside kubedav and nginx, so the table
//! shows how much of a gap to nginx is the stack's own and how much is kubedav's work.
//!
//! `cargo run --release -p kubedav-gateway --example floor` prints the address it
//! listens on (a free port on 127.0.0.1) and serves until killed.
//!
//! Two settings, read once at start, turn it into an experiment on the stack:
//! `FLOOR_READ_BODY=1` reads each request's body before answering, and
//! `FLOOR_WORK_NS=N` spins N ns of wall-clock time per request, standing in for a
//! server's own work (docs/benchmarks.md, "2026-11-26 (3)": how much system time a
//! server's own user time brings with it when its client shares the cores).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::convert::Infallible;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        println!("http://{}/", listener.local_addr().expect("an address"));
        let body = Bytes::from(vec![b'x'; 1024]);
        let read_body = std::env::var_os("FLOOR_READ_BODY").is_some();
        let work = std::time::Duration::from_nanos(
            std::env::var("FLOOR_WORK_NS")
                .ok()
                .and_then(|ns| ns.parse().ok())
                .unwrap_or(0),
        );
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder.http1().timer(TokioTimer::new()).keep_alive(true);
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let body = body.clone();
            let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
                let response = http::Response::builder()
                    .header("content-type", "application/octet-stream")
                    .body(Full::new(body.clone()))
                    .expect("a response");
                async move {
                    if read_body {
                        let _ = request.into_body().collect().await;
                    }
                    spin(work);
                    Ok::<_, Infallible>(response)
                }
            });
            let connection = builder
                .serve_connection(TokioIo::new(stream), service)
                .into_owned();
            tokio::spawn(connection);
        }
    });
}

/// Keeps the thread busy for `work` of wall-clock time (nothing when it is zero).
fn spin(work: std::time::Duration) {
    if work.is_zero() {
        return;
    }
    let started = std::time::Instant::now();
    while started.elapsed() < work {
        std::hint::spin_loop();
    }
}
