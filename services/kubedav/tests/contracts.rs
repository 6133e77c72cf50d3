//! The gRPC contracts, checked on the wire against a real fileio process: what a client
//! other than the gateway (or a gateway cut off mid-stream) can and cannot make it do.

mod common;

use common::{Mode, Server, names_in};
use kubedav_api::pb::fileio::v1::{
    WriteEnd, WriteHeader, WriteRequest, file_io_client::FileIoClient, write_request::Item,
};

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
