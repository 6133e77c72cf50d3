//! One request is one trace across processes: kubedav exports its spans over OTLP/gRPC to
//! a real OTLP trace receiver, and the gateway's and fileio's spans continue the client's
//! `traceparent`.

mod common;

use common::{Mode, Server, client};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::trace::v1::Span;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An OTLP trace receiver that keeps every span with its service name.
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
        let mut spans = self.spans.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref())
                .map(|v| format!("{:?}", v.value))
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                spans.extend(scope.spans.into_iter().map(|span| (service.clone(), span)));
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_request_is_one_trace_across_services() {
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let service = TraceServiceServer::new(receiver.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming),
    );

    let envs = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_TRACES_SAMPLER", "parentbased_always_on"),
    ];
    let server = Server::start_full(Mode::Microservices, &[], &envs).await;
    std::fs::write(server.disk("t.txt"), b"traced").unwrap();
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let response = client()
        .get(server.url("/t.txt"))
        .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let spans = loop {
        let spans: Vec<(String, Span)> = receiver
            .spans
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, s)| hex(&s.trace_id) == trace_id)
            .cloned()
            .collect();
        let services: std::collections::BTreeSet<_> =
            spans.iter().map(|(service, _)| service.clone()).collect();
        if spans.iter().any(|(_, s)| s.name == "fileio.read") && services.len() >= 2 {
            break spans;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "spans of the trace never arrived: {spans:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let by_id = |id: &[u8]| spans.iter().find(|(_, s)| s.span_id == id);
    let http = spans
        .iter()
        .find(|(_, s)| s.name == "GET")
        .expect("the gateway's server span");
    assert!(
        http.0.contains("kubedav-gateway"),
        "named after its target: {}",
        http.0
    );
    assert_eq!(
        hex(&http.1.parent_span_id),
        "00f067aa0ba902b7",
        "the client's span is the parent"
    );
    // OTel semantic conventions: the method and path as strings, the status as an integer.
    let attribute = |name: &str| {
        http.1
            .attributes
            .iter()
            .find(|kv| kv.key == name)
            .and_then(|kv| kv.value.as_ref())
            .and_then(|v| v.value.clone())
            .unwrap_or_else(|| panic!("the request span has no {name}: {:?}", http.1.attributes))
    };
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    assert_eq!(attribute("http.response.status_code"), Value::IntValue(200));
    assert_eq!(attribute("http.request.method"), Value::StringValue("GET".into()));
    assert_eq!(attribute("url.path"), Value::StringValue("/t.txt".into()));
    // fileio's read span hangs, through the gRPC server span, below the gateway's span.
    let read = spans.iter().find(|(_, s)| s.name == "fileio.read").unwrap();
    assert!(read.0.contains("kubedav-fileio"), "{}", read.0);
    let mut ancestor = read.1.parent_span_id.clone();
    let mut chain = Vec::new();
    while let Some((service, span)) = by_id(&ancestor) {
        chain.push((service.clone(), span.name.clone()));
        ancestor = span.parent_span_id.clone();
    }
    assert!(
        chain.iter().any(|(_, name)| name == "GET"),
        "fileio.read descends from the gateway's request span: {chain:?}"
    );
}
