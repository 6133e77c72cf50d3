//! The gRPC contracts, checked on the wire against a real fileio process: what a client
//! other than the gateway (or a gateway cut off mid-stream) can and cannot make it do.

mod common;

use common::{Mode, Server, names_in};
use kubedav_api::pb::fileio::v1::{WriteEnd, WriteHeader, WriteRequest, write_request::Item};
use kubedav_remote::stubs::fileio::file_io_client::FileIoClient;

fn header(path: &str) -> WriteRequest {
    WriteRequest {
        item: Some(Item::Header(WriteHeader {
            path: path.into(),
            ..Default::default()
        })),
    }
}

fn data(bytes: &[u8]) -> WriteRequest {
    WriteRequest {
        item: Some(Item::Data(bytes.to_vec().into())),
    }
}

fn end(size: u64) -> WriteRequest {
    WriteRequest {
        item: Some(Item::End(WriteEnd { size })),
    }
}

/// tonic hands a server a client's RST_STREAM CANCEL as a clean end of stream, so a
/// Write commits only after its end message: an upload cut off anywhere leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fileio_commits_only_uploads_that_reached_their_end() {
    let server = Server::start(Mode::Microservices).await;
    let mut client = FileIoClient::connect(format!("http://{}", server.grpc.unwrap()))
        .await
        .unwrap();

    let cut_off = client
        .write(futures_util::stream::iter([
            header("cut.txt"),
            data(b"half of it"),
        ]))
        .await
        .unwrap_err();
    assert_eq!(cut_off.code(), tonic::Code::Cancelled, "{cut_off:?}");

    let wrong_size = client
        .write(futures_util::stream::iter([
            header("size.txt"),
            data(b"four"),
            end(5),
        ]))
        .await
        .unwrap_err();
    assert_eq!(wrong_size.code(), tonic::Code::InvalidArgument, "{wrong_size:?}");

    let after_end = client
        .write(futures_util::stream::iter([
            header("late.txt"),
            end(0),
            data(b"late"),
        ]))
        .await
        .unwrap_err();
    assert_eq!(after_end.code(), tonic::Code::InvalidArgument, "{after_end:?}");
    assert!(
        names_in(&server.root).is_empty(),
        "nothing was committed, and no temporary file is left: {:?}",
        names_in(&server.root)
    );

    let whole = client
        .write(futures_util::stream::iter([
            header("whole.txt"),
            data(b"all "),
            data(b"of it"),
            end(9),
        ]))
        .await
        .unwrap()
        .into_inner();
    assert!(whole.created);
    assert_eq!(
        std::fs::read_to_string(server.disk("whole.txt")).unwrap(),
        "all of it"
    );
}

/// With `--grpc-token` (KUBEDAV_GRPC_TOKEN) the services refuse any caller without the
/// shared token, the health service stays open for probes, the gateway that has the
/// token serves as before, and a gateway with the wrong one answers 502 saying why
/// (never 401, which would blame the user's password).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_refuse_callers_without_the_shared_token() {
    let token = ("KUBEDAV_GRPC_TOKEN", "s3cret-between-services");
    let server = Server::start_full(Mode::Microservices, &[], &[token]).await;
    let put = common::client()
        .put(server.url("/t.txt"))
        .body("through the gateway")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);

    let url = format!("http://{}", server.grpc.unwrap());
    let channel = tonic::transport::Endpoint::from_shared(url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let stat = kubedav_api::pb::fileio::v1::StatRequest { path: "t.txt".into() };
    let mut client = FileIoClient::new(channel.clone());
    let refused = client.stat(stat.clone()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    assert!(
        refused.message().contains("--grpc-token"),
        "{}",
        refused.message()
    );
    let mut wrong = tonic::Request::new(stat.clone());
    wrong
        .metadata_mut()
        .insert("authorization", "Bearer guess".parse().unwrap());
    assert_eq!(
        client.stat(wrong).await.unwrap_err().code(),
        tonic::Code::Unauthenticated
    );
    let mut right = tonic::Request::new(stat);
    right
        .metadata_mut()
        .insert("authorization", format!("Bearer {}", token.1).parse().unwrap());
    assert_eq!(
        client.stat(right).await.unwrap().into_inner().info.unwrap().size,
        19
    );

    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let probe = tonic_health::pb::HealthCheckRequest {
        service: String::new(),
    };
    assert!(health.check(probe).await.is_ok(), "probes need no token");

    let (mut gateway, addr, _) = common::start_gateway(
        "gateway-wrong-token",
        &["--fileio-url".into(), url],
        &[("KUBEDAV_GRPC_TOKEN".into(), "not-the-token".into())],
    )
    .await;
    let response = common::client()
        .get(format!("http://{addr}/t.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    assert!(response.text().await.unwrap().contains("--grpc-token"));
    let _ = gateway.child.kill().await;
}
