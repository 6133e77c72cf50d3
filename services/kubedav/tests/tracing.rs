//! Traces and the logs that point at them, against a real OTLP/gRPC trace receiver
//! (built here from the opentelemetry-proto service definitions) and an OTLP/HTTP one
//! (protobuf bodies on POST /v1/traces, decoded with the same definitions):
//!
//! * a PROPFIND, a PUT under auth and a Markdown GET each make one trace, in which every
//!   process's spans hang parent to child below the gateway's request span, with the
//!   OpenTelemetry HTTP and RPC attributes;
//! * a slow or missing collector costs spans (dropped and counted), never requests;
//! * JSON log lines carry the trace id, span id and request id, the same in every process;
//! * `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf` exports over HTTP, `OTEL_SDK_DISABLED`
//!   exports nothing, and an unknown protocol stops kubedav with a message naming it.

#[macro_use]
mod common;

use common::{Mode, Server, client, metric_sum};
use kubedav_testkit::{RedisServer, free_port};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use reqwest::{Method, StatusCode};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An OTLP trace receiver that keeps every span with its process's `service.name`.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<(String, Span)>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.keep(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl Receiver {
    /// Keeps every span of an export, with its process's `service.name`.
    fn keep(&self, request: ExportTraceServiceRequest) {
        let mut spans = self.spans.lock().unwrap();
        for resource_spans in request.resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref()?.value.clone())
                .map(|v| match v {
                    Value::StringValue(s) => s,
                    other => format!("{other:?}"),
                })
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                spans.extend(scope.spans.into_iter().map(|span| (service.clone(), span)));
            }
        }
    }

    /// Starts an OTLP/HTTP receiver on a free port: protobuf exports POSTed to
    /// /v1/traces are kept, anything else gets a 404 or a 415. Returns it with its
    /// endpoint URL (the exporter appends /v1/traces).
    async fn start_http() -> (Receiver, String) {
        use http_body_util::BodyExt;
        use prost::Message;
        let receiver = Receiver::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let keeper = receiver.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let keeper = keeper.clone();
                let service =
                    hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                        let keeper = keeper.clone();
                        async move {
                            let status = if request.method() != hyper::Method::POST
                                || request.uri().path() != "/v1/traces"
                            {
                                404
                            } else if request
                                .headers()
                                .get("content-type")
                                .and_then(|v| v.to_str().ok())
                                != Some("application/x-protobuf")
                            {
                                415
                            } else {
                                let body = request.into_body().collect().await?.to_bytes();
                                match ExportTraceServiceRequest::decode(body) {
                                    Ok(export) => {
                                        keeper.keep(export);
                                        200
                                    }
                                    Err(_) => 400,
                                }
                            };
                            let body = ExportTraceServiceResponse {
                                partial_success: None,
                            }
                            .encode_to_vec();
                            let mut response =
                                hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)));
                            *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                            Ok::<_, hyper::Error>(response)
                        }
                    });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        (receiver, endpoint)
    }

    /// Starts the receiver on a free port; returns it with its endpoint URL.
    async fn start() -> (Receiver, String) {
        let receiver = Receiver::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(receiver.clone()))
                .serve_with_incoming(incoming),
        );
        (receiver, endpoint)
    }

    /// The spans of `trace_id` once the trace is whole: every span named in `wanted` has
    /// arrived, every span's parent has (but the root's, the caller's), and every gRPC
    /// client span has its server span.
    async fn trace(&self, trace_id: &str, wanted: &[&str]) -> Vec<(String, Span)> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let spans: Vec<(String, Span)> = self
                .spans
                .lock()
                .unwrap()
                .iter()
                .filter(|(_, s)| hex(&s.trace_id) == trace_id)
                .cloned()
                .collect();
            let ids: BTreeSet<&[u8]> = spans.iter().map(|(_, s)| s.span_id.as_slice()).collect();
            let mut missing: Vec<String> = wanted
                .iter()
                .filter(|name| !spans.iter().any(|(_, s)| s.name == **name))
                .map(|name| name.to_string())
                .collect();
            let orphans = spans
                .iter()
                .filter(|(_, s)| !ids.contains(s.parent_span_id.as_slice()))
                .count();
            if orphans > 1 {
                missing.push(format!("the parents of {} spans", orphans - 1));
            }
            for (_, call) in spans
                .iter()
                .filter(|(_, s)| s.kind == SpanKind::Client as i32 && attribute(s, "rpc.system").is_some())
            {
                if !spans.iter().any(|(_, s)| s.parent_span_id == call.span_id) {
                    missing.push(format!("the server span of {}", call.name));
                }
            }
            if missing.is_empty() {
                return spans;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "spans {missing:?} of trace {trace_id} never arrived; got {:?}",
                spans
                    .iter()
                    .map(|(p, s)| format!("{p}: {}", s.name))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute(span: &Span, name: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == name)
        .and_then(|kv| kv.value.as_ref()?.value.clone())
}

fn text(span: &Span, name: &str) -> String {
    match attribute(span, name) {
        Some(Value::StringValue(s)) => s,
        other => panic!("span {} has no string {name}: {other:?}", span.name),
    }
}

/// Checks one request's trace: its root is the gateway's request span under the client's
/// span `parent`, every other span's parent is in the trace, each gRPC hop is a client
/// span in the caller and a server span in the callee with the RPC attributes, and
/// `processes` all took part.
fn check_trace(
    spans: &[(String, Span)],
    method: &str,
    path: &str,
    status: i64,
    parent: &str,
    processes: &[&str],
) {
    let ids: BTreeSet<Vec<u8>> = spans.iter().map(|(_, s)| s.span_id.clone()).collect();
    let by_id = |id: &[u8]| spans.iter().find(|(_, s)| s.span_id == id);
    let roots: Vec<_> = spans
        .iter()
        .filter(|(_, s)| !ids.contains(&s.parent_span_id))
        .collect();
    assert_eq!(roots.len(), 1, "one root: {roots:?}");
    let (root_process, root) = roots[0];
    assert_eq!(root_process, "kubedav-gateway");
    assert_eq!(
        hex(&root.parent_span_id),
        parent,
        "the client's span is the parent"
    );
    assert_eq!(root.name, method);
    assert_eq!(root.kind, SpanKind::Server as i32);
    assert_eq!(text(root, "http.request.method"), method);
    assert_eq!(text(root, "url.path"), path);
    assert_eq!(text(root, "client.address"), "127.0.0.1", "the client's address");
    assert_eq!(
        attribute(root, "http.response.status_code"),
        Some(Value::IntValue(status))
    );

    let present: BTreeSet<&str> = spans.iter().map(|(p, _)| p.as_str()).collect();
    for process in processes {
        assert!(
            present.contains(process),
            "{process} has spans in the {method} trace: {present:?}"
        );
    }
    for (process, span) in spans {
        if span.kind == SpanKind::Server as i32 && process != "kubedav-gateway" {
            let (caller, client_span) = by_id(&span.parent_span_id).unwrap();
            assert_eq!(
                caller, "kubedav-gateway",
                "{process}'s {} is called by the gateway",
                span.name
            );
            assert_eq!(client_span.kind, SpanKind::Client as i32);
            assert_eq!(
                client_span.name, span.name,
                "the client and server spans name the same call"
            );
            for hop in [span, client_span] {
                assert_eq!(text(hop, "rpc.system"), "grpc");
                assert_eq!(
                    format!("{}/{}", text(hop, "rpc.service"), text(hop, "rpc.method")),
                    span.name
                );
                assert_eq!(text(hop, "server.address"), "127.0.0.1");
                assert_eq!(attribute(hop, "rpc.grpc.status_code"), Some(Value::IntValue(0)));
            }
        }
    }
}

/// The span named `name` in `process`; its parent chain must reach a gRPC server span
/// in the same process (the work of a call hangs below the call).
fn inside_a_call<'a>(spans: &'a [(String, Span)], process: &str, name: &str) -> &'a Span {
    let (_, span) = spans
        .iter()
        .find(|(p, s)| p == process && s.name == name)
        .unwrap_or_else(|| panic!("no {name} span in {process}"));
    let mut parent = span.parent_span_id.clone();
    while let Some((p, ancestor)) = spans.iter().find(|(_, s)| s.span_id == parent) {
        assert_eq!(p, process);
        if ancestor.kind == SpanKind::Server as i32 {
            return span;
        }
        parent = ancestor.parent_span_id.clone();
    }
    panic!("{name} in {process} is not inside a gRPC call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_one_trace_through_every_process() {
    let (receiver, endpoint) = Receiver::start().await;
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_on_redis(
        &redis,
        dir.path(),
        &[("alice", "alice-pw")],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("OTEL_TRACES_SAMPLER", "parentbased_always_on"),
        ],
    )
    .await;
    let request = |method: &str, path: &str, trace: &str| {
        client()
            .request(Method::from_bytes(method.as_bytes()).unwrap(), server.url(path))
            .basic_auth("alice", Some("alice-pw"))
            .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"))
    };

    // A PUT under auth: the password is checked (crypt, then stored in the shared cache
    // on Redis), the lock check runs on Redis, fileio writes.
    let put_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let html = "<html><body><h1>Traced</h1><p>one trace per request</p></body></html>";
    let put = request("PUT", "/page.html", put_trace)
        .body(html)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let spans = receiver
        .trace(
            put_trace,
            &["PUT", "auth.crypt", "fileio.write", "EVALSHA check_write"],
        )
        .await;
    check_trace(
        &spans,
        "PUT",
        "/page.html",
        201,
        "00f067aa0ba902b7",
        &[
            "kubedav-gateway",
            "kubedav-auth",
            "kubedav-locks",
            "kubedav-fileio",
        ],
    );
    inside_a_call(&spans, "kubedav-auth", "auth.crypt");
    let redis_call = inside_a_call(&spans, "kubedav-locks", "EVALSHA check_write");
    assert_eq!(text(redis_call, "db.system.name"), "redis");
    assert_eq!(redis_call.kind, SpanKind::Client as i32);
    inside_a_call(&spans, "kubedav-fileio", "fileio.write");

    // A PROPFIND: lock discovery on Redis, fileio's listing. The auth service is asked
    // only if the gateway no longer remembers the credential (edge::verdicts: a second),
    // so its spans are not required here; the PUT showed they join the trace.
    let propfind_trace = "0af7651916cd43dd8448eb211c80319c";
    let propfind = request("PROPFIND", "/", propfind_trace)
        .header("depth", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(propfind.status(), StatusCode::MULTI_STATUS);
    let spans = receiver
        .trace(propfind_trace, &["PROPFIND", "fileio.list", "EVALSHA discover"])
        .await;
    check_trace(
        &spans,
        "PROPFIND",
        "/",
        207,
        "00f067aa0ba902b7",
        &["kubedav-gateway", "kubedav-locks", "kubedav-fileio"],
    );
    inside_a_call(&spans, "kubedav-fileio", "fileio.list");

    // A Markdown GET: fileio reads the page, markdown decodes and converts it.
    let markdown_trace = "5b8efff798038103d269b633813fc60c";
    let markdown = request("GET", "/page.html", markdown_trace)
        .header("accept", "text/markdown")
        .send()
        .await
        .unwrap();
    assert_eq!(markdown.status(), StatusCode::OK);
    assert!(markdown.text().await.unwrap().contains("# Traced"));
    let spans = receiver
        .trace(
            markdown_trace,
            &["GET", "markdown.decode", "markdown.convert", "fileio.read"],
        )
        .await;
    check_trace(
        &spans,
        "GET",
        "/page.html",
        200,
        "00f067aa0ba902b7",
        &["kubedav-gateway", "kubedav-fileio", "kubedav-markdown"],
    );
    inside_a_call(&spans, "kubedav-markdown", "markdown.decode");
    inside_a_call(&spans, "kubedav-markdown", "markdown.convert");
}

/// Accepts connections and never answers: a collector that hangs.
async fn stalled_collector() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    endpoint
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_or_missing_collector_costs_spans_never_requests() {
    let stalled = stalled_collector().await;
    let missing = format!("http://127.0.0.1:{}", free_port());
    for (mode, endpoint, reason) in [
        (Mode::AllInOne, stalled, "queue_full"),
        (Mode::Microservices, missing, "export_failed"),
    ] {
        let server = Server::start_full(
            mode,
            &[],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
                ("OTEL_TRACES_SAMPLER", "always_on"),
                ("OTEL_BSP_SCHEDULE_DELAY", "50"),
                ("OTEL_BSP_MAX_QUEUE_SIZE", "16"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "60000"),
            ],
        )
        .await;
        std::fs::write(server.disk("f.txt"), b"still served").unwrap();
        let admin = server.edge_admin();
        let dropped = format!("kubedav_otel_spans_dropped_total{{reason=\"{reason}\"}}");
        assert_eq!(
            metric_sum(admin, &dropped).await,
            0.0,
            "{mode:?}: nothing dropped yet"
        );
        let c = client();
        let mut counted = 0.0;
        for _ in 0..100 {
            for _ in 0..20 {
                let response = c.get(server.url("/f.txt")).send().await.unwrap();
                assert_eq!(response.status(), StatusCode::OK);
                assert_eq!(response.text().await.unwrap(), "still served");
            }
            counted = metric_sum(admin, &dropped).await;
            if counted > 0.0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(counted > 0.0, "{mode:?}: spans dropped for {reason} are counted");
    }
}

/// The first JSON log line of `process` that `wanted` accepts, waiting up to 10 s.
async fn log_line(
    server: &mut Server,
    process: &str,
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let line = text_line(server, process, |line| {
        serde_json::from_str(line).is_ok_and(|parsed| wanted(&parsed))
    })
    .await;
    serde_json::from_str(&line).unwrap()
}

/// The first log line of `process` that `wanted` accepts, waiting up to 10 s.
async fn text_line(server: &mut Server, process: &str, wanted: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let lines = server.process(process).log_so_far();
        if let Some(line) = lines.iter().find(|l| wanted(l)) {
            return line.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{process} never logged the line; it logged:\n{}",
            lines.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// fileio's debug lines on, the rest at the default level.
const FILEIO_DEBUG: &str = "info,kubedav_fileio=debug";

/// A server in `mode` logging in `format` at `levels` (`RUST_LOG`) with the access log
/// on, after one PUT of 6 bytes to /logged.txt with request id `request_id` (and the
/// caller's `trace`, if given); with the names of the processes that log the gateway's
/// and fileio's lines.
async fn logged_put(
    mode: Mode,
    format: &str,
    levels: &str,
    request_id: &str,
    trace: Option<&str>,
) -> (Server, &'static str, &'static str) {
    let server = Server::start_full(
        mode,
        &["--access-log"],
        &[("KUBEDAV_LOG_FORMAT", format), ("RUST_LOG", levels)],
    )
    .await;
    let mut put = client()
        .put(server.url("/logged.txt"))
        .header("x-request-id", request_id)
        .body("logged");
    if let Some(trace) = trace {
        put = put.header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"));
    }
    let response = put.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let (gateway, fileio) = match mode {
        Mode::AllInOne => ("all", "all"),
        Mode::Microservices => ("gateway", "fileio"),
    };
    (server, gateway, fileio)
}

/// With text logs and no trace export, nothing reads the request spans, so they are not
/// made (they cost 1.7 µs of a PROPFIND's 19): every line still names its request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_name_the_request_in_every_process() {
    for mode in [Mode::AllInOne, Mode::Microservices] {
        let (mut server, gateway, fileio) = logged_put(mode, "text", FILEIO_DEBUG, "req-44", None).await;
        let access = text_line(&mut server, gateway, |l| l.contains("kubedav::access")).await;
        assert!(
            access.contains(
                " INFO kubedav::access: request method=\"PUT\" path=/logged.txt client=127.0.0.1 status=201"
            ),
            "{mode:?}: no request span at the default level: {access}"
        );
        assert!(access.ends_with(" request_id=req-44"), "{mode:?}: {access}");
        let committed = text_line(&mut server, fileio, |l| l.contains("upload committed")).await;
        assert!(
            committed.contains(
                " DEBUG fileio.write: kubedav_fileio: upload committed bytes=6 created=true request_id=req-44"
            ),
            "{mode:?}: fileio's own span, and the request: {committed}"
        );
    }
}

/// Where debug lines are on, the request spans are made, and lines name them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_name_the_spans_where_debug_lines_are_on() {
    let levels = "info,kubedav_gateway=debug,kubedav_remote=debug,kubedav_fileio=debug";
    for mode in [Mode::AllInOne, Mode::Microservices] {
        let (mut server, gateway, fileio) = logged_put(mode, "text", levels, "req-43", None).await;
        let access = text_line(&mut server, gateway, |l| l.contains("kubedav::access")).await;
        assert!(
            access.contains(
                " INFO http.request: kubedav::access: request method=\"PUT\" path=/logged.txt client=127.0.0.1 status=201"
            ),
            "{mode:?}: {access}"
        );
        assert!(access.ends_with(" request_id=req-43"), "{mode:?}: {access}");
        let committed = text_line(&mut server, fileio, |l| l.contains("upload committed")).await;
        let outer = match mode {
            Mode::AllInOne => "http.request",
            Mode::Microservices => "grpc.server",
        };
        assert!(
            committed.contains(&format!(
                " DEBUG {outer}:fileio.write: kubedav_fileio: upload committed bytes=6 created=true request_id=req-43"
            )),
            "{mode:?}: the spans are named, their fields not repeated: {committed}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_trace_and_request_ids_in_every_process() {
    for mode in [Mode::AllInOne, Mode::Microservices] {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let (mut server, gateway, fileio) =
            logged_put(mode, "json", FILEIO_DEBUG, "req-42", Some(trace)).await;
        let access = log_line(&mut server, gateway, |l| l["target"] == "kubedav::access").await;
        assert_eq!(access["method"], "PUT", "{access}");
        assert_eq!(access["path"], "/logged.txt");
        assert_eq!(access["status"], 201);
        assert_eq!(access["request_id"], "req-42");
        assert_eq!(
            access["trace_id"], trace,
            "{mode:?}: the caller's trace continues"
        );
        let span_id = access["span_id"].as_str().unwrap();
        assert_eq!(span_id.len(), 16, "{access}");
        assert_ne!(span_id, "00f067aa0ba902b7", "the gateway's own span");
        let committed = log_line(&mut server, fileio, |l| l["message"] == "upload committed").await;
        assert_eq!(committed["trace_id"], trace, "{mode:?}: {committed}");
        assert_eq!(committed["request_id"], "req-42", "{mode:?}: {committed}");
        assert_eq!(committed["bytes"], 6);
        assert_ne!(committed["span_id"], access["span_id"]);
    }
}

/// With no collector, a request that continues no trace gets no request spans, so its
/// JSON lines carry no trace id that would name nothing; every line still names the
/// request, in every process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_of_a_request_that_continues_no_trace_carry_its_request_id() {
    for mode in [Mode::AllInOne, Mode::Microservices] {
        let (mut server, gateway, fileio) = logged_put(mode, "json", FILEIO_DEBUG, "req-45", None).await;
        let access = log_line(&mut server, gateway, |l| l["target"] == "kubedav::access").await;
        assert_eq!(access["request_id"], "req-45", "{mode:?}: {access}");
        assert_eq!(access["status"], 201);
        assert!(access.get("trace_id").is_none(), "{mode:?}: {access}");
        let committed = log_line(&mut server, fileio, |l| l["message"] == "upload committed").await;
        assert_eq!(committed["request_id"], "req-45", "{mode:?}: {committed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sampler_is_the_one_the_environment_names() {
    let (receiver, endpoint) = Receiver::start().await;
    // New traces are never sampled; continued ones follow the caller's decision.
    let server = Server::start_full(
        Mode::AllInOne,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0"),
        ],
    )
    .await;
    std::fs::write(server.disk("s.txt"), b"sampled?").unwrap();
    let get = |traceparent: Option<String>| {
        let mut request = client().get(server.url("/s.txt"));
        if let Some(value) = traceparent {
            request = request.header("traceparent", value);
        }
        request.send()
    };
    let unsampled = "11111111111111111111111111111111";
    let sampled = "22222222222222222222222222222222";
    assert_eq!(get(None).await.unwrap().status(), StatusCode::OK);
    let declined = get(Some(format!("00-{unsampled}-00f067aa0ba902b7-00")))
        .await
        .unwrap();
    assert_eq!(declined.status(), StatusCode::OK);
    let chosen = get(Some(format!("00-{sampled}-00f067aa0ba902b7-01")))
        .await
        .unwrap();
    assert_eq!(chosen.status(), StatusCode::OK);
    // Spans are exported in the order they end: once the sampled request's span is in,
    // the two earlier requests' spans would be too, had they been sampled.
    receiver.trace(sampled, &["GET"]).await;
    let traces: BTreeSet<String> = receiver
        .spans
        .lock()
        .unwrap()
        .iter()
        .map(|(_, s)| hex(&s.trace_id))
        .collect();
    assert_eq!(traces, BTreeSet::from([sampled.to_owned()]));
}

/// A PUT's trace, whole, with the processes it crossed.
async fn traced_put(server: &Server, receiver: &Receiver, trace: &str) -> BTreeSet<String> {
    let put = client()
        .put(server.url("/otlp-http.txt"))
        .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"))
        .body("exported over HTTP")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let spans = receiver.trace(trace, &["PUT", "fileio.write"]).await;
    spans.iter().map(|(process, _)| process.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_over_http_protobuf_when_the_protocol_says_so() {
    for (mode, processes) in [
        (Mode::AllInOne, vec!["kubedav-all"]),
        (Mode::Microservices, vec!["kubedav-fileio", "kubedav-gateway"]),
    ] {
        let (receiver, endpoint) = Receiver::start_http().await;
        let server = Server::start_full(
            mode,
            &[],
            &[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
                ("OTEL_BSP_SCHEDULE_DELAY", "50"),
                ("OTEL_TRACES_SAMPLER", "parentbased_always_on"),
            ],
        )
        .await;
        let seen = traced_put(&server, &receiver, "5cf92f3577b34da6a3ce929d0e0e4737").await;
        for process in processes {
            assert!(
                seen.contains(process),
                "{mode:?}: no span of {process} over HTTP: {seen:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_traces_protocol_variable_wins_over_the_general_one() {
    // OTEL_EXPORTER_OTLP_TRACES_PROTOCOL says gRPC; the general one's http/protobuf would
    // send to a path the gRPC receiver does not serve.
    let (receiver, endpoint) = Receiver::start().await;
    let server = Server::start_full(
        Mode::AllInOne,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
            ("OTEL_TRACES_SAMPLER", "parentbased_always_on"),
        ],
    )
    .await;
    let seen = traced_put(&server, &receiver, "6df92f3577b34da6a3ce929d0e0e4738").await;
    assert!(seen.contains("kubedav-all"), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otel_sdk_disabled_exports_nothing() {
    let (receiver, endpoint) = Receiver::start().await;
    let mut server = Server::start_full(
        Mode::AllInOne,
        &[],
        &[
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
            ("OTEL_TRACES_SAMPLER", "always_on"),
        ],
    )
    .await;
    let put = client()
        .put(server.url("/not-exported.txt"))
        .body("no trace")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    // Exporting processes count their spans; a disabled SDK registers no such metric.
    let metrics = client()
        .get(format!("http://{}/metrics", server.admin[0].1))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!metrics.contains("kubedav_otel_spans"), "{metrics}");
    // A graceful stop flushes whatever an SDK holds: still nothing arrives.
    for process in &mut server.processes {
        common::signal(process.child.id().unwrap(), rustix::process::Signal::TERM);
        process.child.wait().await.unwrap();
    }
    assert!(
        receiver.spans.lock().unwrap().is_empty(),
        "spans were exported with OTEL_SDK_DISABLED=TRUE"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_protocol_stops_kubedav_with_a_message_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubedav"))
        .args([
            "--target=all",
            "--listen=127.0.0.1:0",
            "--admin-listen=127.0.0.1:0",
            "--allow-unauthenticated",
        ])
        .arg("--root")
        .arg(dir.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("kubedav started serving with OTEL_EXPORTER_OTLP_PROTOCOL=http/json instead of refusing it")
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL=http/json") && stderr.contains("http/protobuf"),
        "{stderr}"
    );
}

/// Waits until the receiver holds a span of `trace_id`, and returns the names of the
/// processes it came from.
async fn processes_of(receiver: &Receiver, trace_id: &str) -> BTreeSet<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let seen: BTreeSet<String> = receiver
            .spans
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, s)| hex(&s.trace_id) == trace_id)
            .map(|(process, _)| process.clone())
            .collect();
        if !seen.is_empty() {
            return seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the collector never received trace {trace_id}, which an exemplar names"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The request duration histograms (and, between processes, the gRPC handling ones) keep
/// the trace ids of sampled requests as exemplars, which a real Prometheus with exemplar
/// storage scrapes (it asks for OpenMetrics) and answers for: each names a trace the
/// OTLP receiver got, and never one that was not sampled.
async fn exemplars_name_traces_the_collector_received(mode: Mode) {
    let (receiver, endpoint) = Receiver::start().await;
    let server = Server::start_full(
        mode,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            // Only requests whose caller sampled them are traced: the test chooses.
            ("OTEL_TRACES_SAMPLER", "parentbased_always_off"),
        ],
    )
    .await;
    let prometheus = common::prometheus::Prometheus::start(&server.admin).await;
    let mut histograms = vec!["kubedav_http_request_duration_seconds_bucket"];
    if mode == Mode::Microservices {
        histograms.push("kubedav_grpc_server_handling_seconds_bucket");
    }
    let mut sampled = BTreeSet::new();
    let mut unsampled = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let found = loop {
        for (flags, ids) in [("01", &mut sampled), ("00", &mut unsampled)] {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let trace = format!("{nanos:032x}");
            let propfind = client()
                .request(Method::from_bytes(b"PROPFIND").unwrap(), server.url("/"))
                .header("depth", "1")
                .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-{flags}"))
                .send()
                .await
                .unwrap();
            assert_eq!(propfind.status(), StatusCode::MULTI_STATUS);
            ids.insert(trace);
        }
        let mut found = Vec::new();
        for histogram in &histograms {
            found.push(prometheus.exemplars(histogram).await);
        }
        if found.iter().all(|exemplars| !exemplars.is_empty()) {
            break found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{mode:?}: Prometheus holds no exemplar of {histograms:?} after a minute of sampled requests"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for (histogram, exemplars) in histograms.iter().zip(found) {
        for (series, labels) in exemplars {
            let trace = labels["trace_id"].as_str().unwrap_or_default().to_owned();
            assert!(
                sampled.contains(&trace),
                "{mode:?}: {histogram} {series} has an exemplar of trace {trace:?}, not one of the sampled \
                 requests (unsampled: {})",
                unsampled.contains(&trace)
            );
            let processes = processes_of(&receiver, &trace).await;
            assert!(!processes.is_empty(), "{mode:?}: {histogram}: {processes:?}");
        }
    }
}

in_both_modes!(exemplars_name_traces_the_collector_received);
