//! What one gRPC call over loopback costs (tonic-health's `Check`, which does no work),
//! by client transport: tonic's `Channel` (a `tower` buffer in front of hyper's HTTP/2
//! client), hyper's HTTP/2 `SendRequest` called from the caller's own task (`raw`), or
//! one thread per caller with a runtime and a connection of its own (`threads`). It
//! prints calls a second and the CPU time a call of the client and of the server
//! (`/proc/PID/stat`). docs/benchmarks.md, "2026-12-06 (7)", has the figures.
//!
//! ```text
//! TOKIO_WORKER_THREADS=1 target/release/examples/hop server 127.0.0.1:0   # prints ADDR
//! target/release/examples/hop channel|raw|threads ADDR CALLS IN_FLIGHT SERVER_PID
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// utime + stime of a process (`self` or a pid), in clock ticks (10 ms).
fn cpu_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// hyper's HTTP/2 client, called directly.
#[derive(Clone)]
struct Raw(
    hyper::client::conn::http2::SendRequest<tonic::body::Body>,
    http::Uri,
);

impl tower_service::Service<http::Request<tonic::body::Body>> for Raw {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> Self::Future {
        let mut parts = self.1.clone().into_parts();
        parts.path_and_query = request.uri().path_and_query().cloned();
        *request.uri_mut() = http::Uri::from_parts(parts).expect("uri");
        Box::pin(self.0.send_request(request))
    }
}

async fn run<S>(client: HealthClient<S>, calls: usize, tasks: usize)
where
    S: tonic::client::GrpcService<tonic::body::Body> + Clone + Send + 'static,
    S::Future: Send,
    S::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <S::ResponseBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let mut client = client.clone();
        handles.push(tokio::spawn(async move {
            for _ in 0..calls / tasks {
                client
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await
                    .expect("check");
            }
        }));
    }
    for handle in handles {
        handle.await.expect("task");
    }
}

/// `tasks` threads, each with a runtime of its own and its own connection to the
/// server: a call and its connection's task never leave the caller's thread.
fn per_thread(addr: &str, calls: usize, tasks: usize, server: &str) {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(tasks + 1));
    let threads: Vec<_> = (0..tasks)
        .map(|_| {
            let (url, barrier) = (format!("http://{addr}"), barrier.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async move {
                    let client = HealthClient::new(connect(url).await);
                    run(client.clone(), 1000, 1).await;
                    barrier.wait();
                    run(client, calls / tasks, 1).await;
                    barrier.wait();
                });
            })
        })
        .collect();
    barrier.wait();
    let (own, theirs, start) = (cpu_ticks("self"), cpu_ticks(server), Instant::now());
    barrier.wait();
    report("threads", calls, (own, theirs, start), server);
    for thread in threads {
        thread.join().expect("thread");
    }
}

/// A tonic channel to `url`, connected.
async fn connect(url: String) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(url)
        .expect("url")
        .tcp_nodelay(true)
        .connect()
        .await
        .expect("connect")
}

/// Prints the calls a second and the CPU time a call, since `before` (this process's
/// ticks, the server's, the time).
fn report(mode: &str, calls: usize, before: (u64, u64, Instant), server: &str) {
    let (own, theirs, start) = before;
    let elapsed = start.elapsed();
    let own = (cpu_ticks("self") - own) as f64 * 10_000.0 / calls as f64;
    let theirs = (cpu_ticks(server) - theirs) as f64 * 10_000.0 / calls as f64;
    println!(
        "{mode:8} calls/s {:8.0}  client µs/call {own:6.1}  server µs/call {theirs:6.1}",
        calls as f64 / elapsed.as_secs_f64()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args[1] == "threads" {
        per_thread(
            &args[2],
            args[3].parse().expect("calls"),
            args[4].parse().expect("tasks"),
            &args[5],
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime
        .block_on(async move {
            match args[1].as_str() {
                "server" => {
                    let (_reporter, service) = tonic_health::server::health_reporter();
                    let listener = tokio::net::TcpListener::bind(&args[2]).await.expect("bind");
                    println!("{}", listener.local_addr().expect("addr"));
                    let incoming =
                        tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
                    tonic::transport::Server::builder()
                        .add_service(service)
                        .serve_with_incoming(incoming)
                        .await
                        .expect("serve");
                }
                mode => {
                    let addr = args[2].clone();
                    let calls: usize = args[3].parse().expect("calls");
                    let tasks: usize = args[4].parse().expect("tasks");
                    let server = args[5].clone();
                    let url = format!("http://{addr}");
                    let (own, theirs, start) = match mode {
                        "channel" => {
                            let client = HealthClient::new(connect(url).await);
                            run(client.clone(), 1000, tasks).await;
                            let (own, theirs, start) =
                                (cpu_ticks("self"), cpu_ticks(&server), Instant::now());
                            run(client, calls, tasks).await;
                            (own, theirs, start)
                        }
                        _ => {
                            let stream = tokio::net::TcpStream::connect(&addr).await.expect("connect");
                            stream.set_nodelay(true).expect("nodelay");
                            let (sender, connection) = hyper::client::conn::http2::handshake(
                                hyper_util::rt::TokioExecutor::new(),
                                hyper_util::rt::TokioIo::new(stream),
                            )
                            .await
                            .expect("handshake");
                            tokio::spawn(connection);
                            let origin: http::Uri = url.parse().expect("uri");
                            let service = Raw(sender, origin);
                            let client = HealthClient::new(service);
                            run(client.clone(), 1000, tasks).await;
                            let (own, theirs, start) =
                                (cpu_ticks("self"), cpu_ticks(&server), Instant::now());
                            run(client, calls, tasks).await;
                            (own, theirs, start)
                        }
                    };
                    report(mode, calls, (own, theirs, start), &server);
                }
            }
            Ok::<(), Infallible>(())
        })
        .expect("run");
}
