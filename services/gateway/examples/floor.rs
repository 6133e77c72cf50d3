//! The floor of kubedav's HTTP stack: hyper-util's server, as `server.rs` configures it,
//! answering every request with a fixed 1 KiB body and nothing else (no routing, no
//! middleware, no file). `make bench` measures it beside kubedav and nginx, so the table
//! shows how much of a gap to nginx is the stack's own and how much is kubedav's work.
//!
//! `cargo run --release -p kubedav-gateway --example floor` prints the address it
//! listens on (a free port on 127.0.0.1) and serves until killed.

use bytes::Bytes;
use http_body_util::Full;
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
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder.http1().timer(TokioTimer::new()).keep_alive(true);
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let body = body.clone();
            let service = hyper::service::service_fn(move |_request| {
                let response = http::Response::builder()
                    .header("content-type", "application/octet-stream")
                    .body(Full::new(body.clone()))
                    .expect("a response");
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = builder
                .serve_connection(TokioIo::new(stream), service)
                .into_owned();
            tokio::spawn(connection);
        }
    });
}
