//! Large PUTs written by the gateway into fileio's incoming area (`--fileio-incoming`,
//! microservices mode on a volume) and landed by fileio: the client sees what a PUT
//! streamed to fileio gives it (statuses, bytes, conditions, refusals), and nothing is
//! left behind, also when a body is cut short. All-in-one writes its bodies itself, and a
//! bucket has no incoming area, so these cases run in microservices mode on a volume.

#[macro_use]
mod common;

use common::{Backend, Mode, Server, client, eventually_async};
use reqwest::StatusCode;
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

const WRITTEN: &str = "kubedav_gateway_direct_writes_total";
const MIB: usize = 1 << 20;

fn patterned(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Microservices on a volume, the gateway writing into the incoming area (reached
/// through a link made once the root exists).
async fn start(links: &Path) -> Server {
    let incoming = links.join("incoming");
    let arg = incoming.to_str().unwrap().to_owned();
    Server::start_prepared(Mode::Microservices, &["--fileio-incoming", &arg], &|root| {
        std::fs::create_dir_all(root.join(".kubedav/incoming")).unwrap();
        std::os::unix::fs::symlink(root.join(".kubedav/incoming"), &incoming).unwrap();
    })
    .await
}

async fn written(server: &Server) -> f64 {
    common::metric_sum(server.admin_of("gateway"), WRITTEN).await
}

async fn put(server: &Server, path: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> StatusCode {
    let mut request = client().put(server.url(path)).body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap().status()
}

async fn get(server: &Server, path: &str) -> (StatusCode, Vec<u8>) {
    let response = client().get(server.url(path)).send().await.unwrap();
    (response.status(), response.bytes().await.unwrap().to_vec())
}

/// What the incoming area and the landing folder hold.
fn left(server: &Server) -> Vec<String> {
    ["incoming", "landing"]
        .iter()
        .flat_map(|folder| common::names_in(&server.root.join(".kubedav").join(folder)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_puts_are_written_by_the_gateway_and_landed_by_fileio() {
    if common::backend() != Backend::Volume {
        return;
    }
    let links = tempfile::tempdir().unwrap();
    let server = start(links.path()).await;
    let made = client()
        .request(
            reqwest::Method::from_bytes(b"MKCOL").unwrap(),
            server.url("/photos/"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);

    let data = patterned(3 * MIB, 1);
    assert_eq!(
        put(&server, "/photos/big.bin", data.clone(), &[]).await,
        StatusCode::CREATED
    );
    assert_eq!(written(&server).await, 1.0, "not written into the incoming area");
    let (status, body) = get(&server, "/photos/big.bin").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body == data, "other bytes");

    let newer = patterned(2 * MIB, 2);
    assert_eq!(
        put(&server, "/photos/big.bin", newer.clone(), &[]).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(written(&server).await, 2.0);
    assert!(
        get(&server, "/photos/big.bin").await.1 == newer,
        "the old bytes stayed"
    );

    // Small bodies, and bodies whose checksum fileio computes, stream as before.
    assert_eq!(
        put(&server, "/photos/small.bin", patterned(100_000, 3), &[]).await,
        StatusCode::CREATED
    );
    let sha1 = "OC-Checksum";
    let wrong = "SHA1:0000000000000000000000000000000000000000";
    assert_eq!(
        put(&server, "/photos/checked.bin", data.clone(), &[(sha1, wrong)]).await,
        StatusCode::BAD_REQUEST,
        "a wrong checksum was not checked"
    );
    assert_eq!(
        written(&server).await,
        2.0,
        "small or checked bodies went through the area"
    );

    // Refusals are those of a streamed PUT, and change nothing.
    assert_eq!(
        put(&server, "/missing/big.bin", data.clone(), &[]).await,
        StatusCode::CONFLICT
    );
    assert_eq!(
        put(
            &server,
            "/photos/big.bin",
            data.clone(),
            &[("If-Match", "\"not-its-etag\"")]
        )
        .await,
        StatusCode::PRECONDITION_FAILED
    );
    // Over a collection: as a small body that streams is answered.
    let streamed = put(&server, "/photos", patterned(1000, 6), &[]).await;
    assert!(streamed.is_client_error(), "{streamed}");
    assert_eq!(put(&server, "/photos", data.clone(), &[]).await, streamed);
    assert!(
        get(&server, "/photos/big.bin").await.1 == newer,
        "a refused PUT changed the file"
    );
    assert_eq!(written(&server).await, 2.0);
    assert!(left(&server).is_empty(), "left behind: {:?}", left(&server));
}

/// A body cut short (the client goes away after a third of it) replaces nothing, and its
/// file goes from the incoming area.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_short_leaves_nothing() {
    if common::backend() != Backend::Volume {
        return;
    }
    let links = tempfile::tempdir().unwrap();
    let server = start(links.path()).await;
    let before = patterned(MIB, 4);
    assert_eq!(
        put(&server, "/doc.bin", before.clone(), &[]).await,
        StatusCode::CREATED
    );

    let mut connection = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "PUT /doc.bin HTTP/1.1\r\nHost: kubedav\r\nContent-Length: {}\r\n\r\n",
        3 * MIB
    );
    connection.write_all(head.as_bytes()).await.unwrap();
    connection.write_all(&patterned(MIB, 5)).await.unwrap();
    let started = eventually_async(Duration::from_secs(10), || async {
        !common::names_in(&server.root.join(".kubedav/incoming")).is_empty()
    })
    .await;
    assert!(started, "the body was not being written into the incoming area");
    drop(connection);

    let cleaned = eventually_async(Duration::from_secs(10), || async { left(&server).is_empty() }).await;
    assert!(cleaned, "left behind: {:?}", left(&server));
    assert!(
        get(&server, "/doc.bin").await.1 == before,
        "a cut body replaced the file"
    );
    assert_eq!(written(&server).await, 1.0);
}

/// A gateway told of an incoming area it cannot write into does not start, and says
/// what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_incoming_area_stops_the_gateway_with_advice() {
    let said = common::gateway_refusal(&["--fileio-incoming", "/nonexistent/kubedav-incoming"]);
    assert!(
        said.contains("--fileio-incoming")
            && said.contains("/nonexistent/kubedav-incoming")
            && said.contains("mount"),
        "{said}"
    );
}
