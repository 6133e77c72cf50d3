//! Operability of every process: the admin port (`/metrics`, `/healthz`, `/readyz`) and,
//! on gRPC services, the standard health protocol and server reflection.

mod common;

use common::{Mode, Server, client};
use reqwest::StatusCode;

async fn admin_get(addr: std::net::SocketAddr, path: &str) -> (StatusCode, String) {
    let response = client().get(format!("http://{addr}{path}")).send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

async fn admin_endpoints(mode: Mode) {
    let mut server = Server::start(mode).await;
    // Traffic so that the request metrics have samples.
    let listing = client().get(server.url("/")).send().await.unwrap();
    assert_eq!(listing.status(), StatusCode::OK);
    let listing_bytes = listing.bytes().await.unwrap().len();
    let put = client()
        .put(server.url("/1k.bin"))
        .body(vec![7u8; 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    for (name, addr) in server.admin.clone() {
        assert_eq!(
            admin_get(addr, "/healthz").await.0,
            StatusCode::OK,
            "{name} /healthz"
        );
        assert_eq!(
            admin_get(addr, "/readyz").await.0,
            StatusCode::OK,
            "{name} /readyz"
        );
        let (status, metrics) = admin_get(addr, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            metrics.contains("process_resident_memory_bytes"),
            "{name} exports process metrics"
        );
        // Which build each process runs: the commit this test was built from.
        let commit = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map_or("unknown".to_owned(), |o| {
                String::from_utf8_lossy(&o.stdout).trim().to_owned()
            });
        let build_info = format!(
            "kubedav_build_info{{version=\"{}\",commit=\"{commit}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        assert!(
            metrics.contains(&build_info),
            "{name} exports {build_info}: {metrics}"
        );
        if name == "gateway" || name == "all" {
            assert!(
                metrics.contains(&format!(
                    "kubedav_http_response_body_bytes_total{{method=\"GET\"}} {listing_bytes}"
                )),
                "{name} counts bytes out: {metrics}"
            );
            assert!(
                metrics.contains("kubedav_http_request_body_bytes_total{method=\"PUT\"} 1024"),
                "{name} counts bytes in: {metrics}"
            );
            assert!(
                metrics.contains(
                    "kubedav_http_requests_total{method=\"GET\",code=\"200\",status_class=\"2xx\"} 1"
                ),
                "{name} counts requests: {metrics}"
            );
        }
        if name == "fileio" || name == "all" {
            assert!(
                metrics.contains("kubedav_fileio_scans_total{path=\"fallback\"} 1"),
                "{name} counts listings: {metrics}"
            );
            assert!(
                metrics.contains("kubedav_fileio_io_uring_available "),
                "{name} says whether io_uring may be used: {metrics}"
            );
        }
    }
    // Answers of one class are told apart by their code: a 404 and a 423 (a write to a
    // locked file without its token) are two series, not one "4xx".
    let missing = client().get(server.url("/missing.txt")).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let lock = client()
        .request(reqwest::Method::from_bytes(b"LOCK").unwrap(), server.url("/1k.bin"))
        .body(r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#)
        .send()
        .await
        .unwrap();
    assert_eq!(lock.status(), StatusCode::OK);
    let locked = client()
        .put(server.url("/1k.bin"))
        .body("no token")
        .send()
        .await
        .unwrap();
    assert_eq!(locked.status(), StatusCode::LOCKED);
    let edge = server.edge_admin();
    let metrics = admin_get(edge, "/metrics").await.1;
    for series in [
        "kubedav_http_requests_total{method=\"GET\",code=\"404\",status_class=\"4xx\"} 1",
        "kubedav_http_requests_total{method=\"PUT\",code=\"423\",status_class=\"4xx\"} 1",
        "kubedav_http_requests_total{method=\"PUT\",code=\"201\",status_class=\"2xx\"} 1",
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
    if mode == Mode::Microservices {
        // The gateway is not ready while fileio is away.
        let gateway_admin = server.admin_of("gateway");
        server.process("fileio").child.kill().await.unwrap();
        let (status, body) = admin_get(gateway_admin, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("fileio"), "the reason names the dependency: {body}");
        assert_eq!(
            admin_get(gateway_admin, "/healthz").await.0,
            StatusCode::OK,
            "but it is alive"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_endpoints_all_in_one() {
    admin_endpoints(Mode::AllInOne).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_endpoints_microservices() {
    admin_endpoints(Mode::Microservices).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_and_reflection() {
    let server = Server::start(Mode::Microservices).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.grpc.unwrap()))
        .unwrap()
        .connect()
        .await
        .unwrap();

    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    for service in ["", "kubedav.fileio.v1.FileIo"] {
        let reply = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            reply.status(),
            tonic_health::pb::health_check_response::ServingStatus::Serving,
            "{service:?}"
        );
    }
    let unknown = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "nope".into(),
        })
        .await;
    assert_eq!(unknown.unwrap_err().code(), tonic::Code::NotFound);

    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut replies = reflection
        .server_reflection_info(futures_util::stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let reply = replies.message().await.unwrap().expect("a reflection answer");
    let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else {
        panic!("{reply:?}")
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"kubedav.fileio.v1.FileIo"), "{names:?}");
    assert!(names.contains(&"grpc.health.v1.Health"), "{names:?}");
}
