//! Faults on purpose: what happens to requests, uploads and readiness when processes are
//! stopped under load, in both modes.

#[macro_use]
mod common;

use common::{BACKEND, Backend, Mode, Server, client, signal, stop};
use std::time::Duration;

fn terminate(pid: u32) {
    signal(pid, rustix::process::Signal::TERM);
}

/// SIGTERM to the gateway while an upload is in flight: the HTTP port refuses new
/// connections at once, `/readyz` answers 503 "draining" while the upload finishes, the
/// upload completes with all its bytes, and then the process exits cleanly.
async fn sigterm_drains_in_flight_requests(mode: Mode) {
    sigterm_drains(mode, &[]).await;
}

/// The same with every connection on one connection thread, which meanwhile answers a
/// GET on another connection.
async fn one_connection_thread_serves_and_drains_many_connections(mode: Mode) {
    sigterm_drains(mode, &["--http-threads", "1"]).await;
}

/// The same with connections on the shared runtime (`--http-threads 0`).
async fn the_shared_runtime_serves_and_drains_connections(mode: Mode) {
    sigterm_drains(mode, &["--http-threads", "0"]).await;
}

async fn sigterm_drains(mode: Mode, args: &[&str]) {
    let mut server = Server::start_with(mode, args).await;
    std::fs::write(server.disk("doc.txt"), b"old content").unwrap();
    let edge = match mode {
        Mode::AllInOne => "all",
        Mode::Microservices => "gateway",
    };
    let admin = server.admin_of(edge);

    // An upload whose body the test hands over piece by piece.
    let (body_tx, body_rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let chunks = 10usize;
    let chunk = vec![b'n'; 64 * 1024];
    let upload = tokio::spawn({
        let url = server.url("/doc.txt");
        let stream =
            futures_util::stream::unfold(body_rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
        async move {
            client()
                .put(url)
                .header("content-length", chunks * 64 * 1024)
                .body(reqwest::Body::wrap_stream(stream))
                .send()
                .await
        }
    });
    body_tx.send(Ok(chunk.clone())).await.unwrap();
    // The upload has reached the gateway once a request is in flight there.
    let in_flight = || async move { common::metric_sum(admin, "kubedav_http_requests_in_flight").await };
    assert!(
        common::eventually_async(Duration::from_secs(10), || async { in_flight().await >= 1.0 }).await,
        "the upload never started"
    );

    // Another connection is served while the upload holds its own.
    let other = reqwest::Client::new()
        .get(server.url("/doc.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    assert_eq!(other.bytes().await.unwrap(), &b"old content"[..]);

    terminate(server.process(edge).pid());

    // New connections are refused while the upload is still open.
    let refused = common::eventually_async(Duration::from_secs(10), || async {
        tokio::net::TcpStream::connect(server.addr).await.is_err()
    })
    .await;
    assert!(refused, "the HTTP port still accepts connections after SIGTERM");
    let ready = client()
        .get(format!("http://{admin}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    assert!(ready.text().await.unwrap().contains("draining"));

    for _ in 1..chunks {
        body_tx.send(Ok(chunk.clone())).await.unwrap();
    }
    drop(body_tx);
    let response = upload.await.unwrap().expect("the in-flight upload is answered");
    assert!(response.status().is_success(), "{}", response.status());
    assert_eq!(
        std::fs::read(server.disk("doc.txt")).unwrap(),
        vec![b'n'; chunks * 64 * 1024]
    );

    let exited = tokio::time::timeout(Duration::from_secs(10), server.process(edge).child.wait())
        .await
        .expect("the process exits once drained")
        .unwrap();
    assert!(exited.success(), "{exited:?}");
}

/// With `--shutdown-delay-seconds`, SIGTERM turns `/readyz` to 503 "draining" at once
/// while the HTTP port keeps serving new requests for the delay (Kubernetes Endpoints and
/// balancers take time to stop sending), each answer with `Connection: close` so
/// keep-alive clients move on; then the port closes and the process exits.
async fn shutdown_delay_keeps_serving_while_balancers_catch_up(mode: Mode) {
    let mut server = Server::start_with(mode, &["--shutdown-delay-seconds", "3"]).await;
    std::fs::write(server.disk("doc.txt"), b"content").unwrap();
    let edge = match mode {
        Mode::AllInOne => "all",
        Mode::Microservices => "gateway",
    };
    let admin = server.admin_of(edge);
    let signalled = tokio::time::Instant::now();
    terminate(server.process(edge).pid());
    let draining = common::eventually_async(Duration::from_secs(2), || async {
        match client().get(format!("http://{admin}/readyz")).send().await {
            Ok(ready) => ready.status() == 503 && ready.text().await.unwrap().contains("draining"),
            Err(e) => {
                eprintln!("/readyz: {e:?}");
                false
            }
        }
    })
    .await;
    assert!(
        draining,
        "/readyz says draining right after SIGTERM; log: {:#?}",
        server.process(edge).log_so_far()
    );
    let response = client()
        .get(server.url("/doc.txt"))
        .send()
        .await
        .expect("a new connection is still served during the delay");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers().get("connection").map(|v| v.to_str().unwrap()),
        Some("close"),
        "keep-alive clients are told to reconnect (elsewhere)"
    );
    assert!(
        signalled.elapsed() < Duration::from_secs(3),
        "checked within the delay"
    );

    let refused = common::eventually_async(Duration::from_secs(10), || async {
        tokio::net::TcpStream::connect(server.addr).await.is_err()
    })
    .await;
    assert!(refused, "the port closes after the delay");
    assert!(
        signalled.elapsed() >= Duration::from_secs(3),
        "not before the delay"
    );
    let exited = tokio::time::timeout(Duration::from_secs(10), server.process(edge).child.wait())
        .await
        .expect("the process exits")
        .unwrap();
    assert!(exited.success(), "{exited:?}");
}

/// A gRPC service given `--shutdown-delay-seconds` (the chart's for services of several
/// pods) keeps accepting calls for the delay after SIGTERM while its `/readyz` already
/// says draining, so a gateway that still lists it (a headless Service's DNS answer, a
/// registry view) is not refused: a write through the gateway in the delay is stored.
/// Then its port closes and it exits.
async fn a_grpc_service_serves_through_its_shutdown_delay() {
    let delay = Duration::from_secs(3);
    let mut server = Server::start_full(
        Mode::Microservices,
        &[],
        &[("KUBEDAV_SHUTDOWN_DELAY_SECONDS", "3")],
    )
    .await;
    let admin = server.admin_of("fileio");
    let grpc = server.grpc.expect("fileio's gRPC address");
    let signalled = tokio::time::Instant::now();
    terminate(server.process("fileio").pid());
    let draining = common::eventually_async(Duration::from_secs(2), || async {
        match client().get(format!("http://{admin}/readyz")).send().await {
            Ok(ready) => ready.status() == 503 && ready.text().await.unwrap().contains("draining"),
            Err(_) => false,
        }
    })
    .await;
    assert!(draining, "fileio's /readyz says draining right after SIGTERM");
    let stored = client()
        .put(server.url("/written-while-draining.txt"))
        .body("stored")
        .send()
        .await
        .unwrap();
    assert_eq!(
        stored.status(),
        201,
        "a write in the delay reaches fileio: {}",
        stored.text().await.unwrap()
    );
    assert!(signalled.elapsed() < delay, "checked within the delay");
    assert_eq!(
        std::fs::read(server.disk("written-while-draining.txt")).unwrap(),
        b"stored"
    );

    let refused = common::eventually_async(Duration::from_secs(10), || async {
        tokio::net::TcpStream::connect(grpc).await.is_err()
    })
    .await;
    assert!(refused, "the gRPC port closes after the delay");
    assert!(signalled.elapsed() >= delay, "not before the delay");
    let exited = tokio::time::timeout(Duration::from_secs(10), server.process("fileio").child.wait())
        .await
        .expect("fileio exits")
        .unwrap();
    assert!(exited.success(), "{exited:?}");
}

/// The temporary upload files in the root.
fn temporaries(server: &Server) -> Vec<String> {
    common::names_in(&server.root)
        .into_iter()
        .filter(|name| name.starts_with(kubedav_api::path::TEMPORARY_PREFIX))
        .collect()
}

/// kill -9 of the process holding the volume (fileio, or the whole all-in-one server) in
/// the middle of 8 concurrent uploads: no partial file ever becomes visible, every target
/// keeps its previous content, the gateway answers 503 with Retry-After while fileio is
/// down, and once it is started again it removes the temporary files the crash left and
/// serves again by itself.
async fn kill_during_uploads_loses_nothing(mode: Mode) {
    const UPLOADS: usize = 8;
    let mut server = Server::start(mode).await;
    let volume = match mode {
        Mode::AllInOne => "all",
        Mode::Microservices => "fileio",
    };
    for i in 0..UPLOADS {
        std::fs::write(server.disk(&format!("f{i}.txt")), format!("old content {i}")).unwrap();
    }
    let mut senders = Vec::new();
    let mut uploads = Vec::new();
    for i in 0..UPLOADS {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
        let url = server.url(&format!("/f{i}.txt"));
        let stream =
            futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
        uploads.push(tokio::spawn(async move {
            client()
                .put(url)
                .header("content-length", 4 << 20)
                .body(reqwest::Body::wrap_stream(stream))
                .send()
                .await
        }));
        tx.send(Ok(vec![b'n'; 1 << 20])).await.unwrap();
        senders.push(tx);
    }
    // Every upload has its temporary file and part of its body on disk.
    assert!(
        common::eventually(Duration::from_secs(10), || temporaries(&server).len() == UPLOADS).await,
        "the uploads never started: {:?}",
        common::names_in(&server.root)
    );
    server.process(volume).child.kill().await.unwrap();
    drop(senders);
    for upload in uploads {
        if let Ok(response) = upload.await.unwrap() {
            assert!(
                !response.status().is_success(),
                "an interrupted upload succeeded: {}",
                response.status()
            );
        }
    }
    for i in 0..UPLOADS {
        assert_eq!(
            std::fs::read_to_string(server.disk(&format!("f{i}.txt"))).unwrap(),
            format!("old content {i}"),
            "a target lost its previous content"
        );
    }
    if mode == Mode::Microservices {
        let response = client().get(server.url("/f0.txt")).send().await.unwrap();
        assert_eq!(response.status(), 503);
        assert!(response.headers().contains_key("retry-after"));
    }
    assert_eq!(
        temporaries(&server).len(),
        UPLOADS,
        "the crash left its temporary files"
    );

    let restarted = tokio::time::Instant::now();
    server.process(volume).restart().await;
    let recovered = common::eventually_async(Duration::from_secs(20), || async {
        let response = client().get(server.url("/f0.txt")).send().await;
        matches!(response, Ok(r) if r.status() == 200)
    })
    .await;
    assert!(recovered, "the gateway did not recover by itself");
    eprintln!(
        "{mode:?}: first success {:?} after {volume} was started again",
        restarted.elapsed()
    );
    assert!(
        common::eventually(Duration::from_secs(10), || temporaries(&server).is_empty()).await,
        "the restarted {volume} left {:?}",
        temporaries(&server)
    );
    for i in 0..UPLOADS {
        assert_eq!(
            std::fs::read_to_string(server.disk(&format!("f{i}.txt"))).unwrap(),
            format!("old content {i}")
        );
    }
}

/// Each service stopped in turn affects only what needs it: without auth, requests with
/// credentials get 503 (never let through); without locks, writes get 503 while reads
/// (PROPFIND included) work; without markdown, agents get the HTML. Each recovers by
/// itself once its service is back; the time to the first success is printed.
async fn each_service_down_affects_only_its_operations() {
    let mode = Mode::Microservices;
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("ann", "Ann-s3cret-pw")]);
    let mut server = Server::start_auth(mode, Some(&users), &[], &[], &[]).await;
    std::fs::write(
        server.disk("page.html"),
        b"<html><body><h1>Title</h1><p>text</p></body></html>",
    )
    .unwrap();
    let base = server.url("");
    let get = |path: &'static str, accept: &'static str| {
        let url = format!("{base}{path}");
        async move {
            client()
                .get(url)
                .basic_auth("ann", Some("Ann-s3cret-pw"))
                .header("accept", accept)
                .send()
                .await
                .unwrap()
        }
    };
    let put = |path: &'static str| {
        let url = format!("{base}{path}");
        async move {
            client()
                .put(url)
                .basic_auth("ann", Some("Ann-s3cret-pw"))
                .body("new")
                .send()
                .await
                .unwrap()
        }
    };
    let propfind = || {
        let url = format!("{base}/");
        async move {
            client()
                .request(reqwest::Method::from_bytes(b"PROPFIND").unwrap(), url)
                .basic_auth("ann", Some("Ann-s3cret-pw"))
                .header("depth", "1")
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(get("/page.html", "*/*").await.status(), 200);

    // Auth down: 503, never served without a verification, once the gateway's memory of
    // the credential accepted a moment ago (at most a second, edge::verdicts) has passed.
    server.process("auth").child.kill().await.unwrap();
    let killed = tokio::time::Instant::now();
    assert!(
        common::eventually_async(Duration::from_secs(5), || async {
            get("/page.html", "*/*").await.status() == 503
        })
        .await,
        "served without the auth service"
    );
    assert!(
        killed.elapsed() <= Duration::from_millis(1500),
        "served {:?} without auth",
        killed.elapsed()
    );
    let response = get("/page.html", "*/*").await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let anonymous = client().get(server.url("/page.html")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "no credentials, no access, auth or not");
    let restarted = tokio::time::Instant::now();
    server.process("auth").restart().await;
    let ok = common::eventually_async(Duration::from_secs(20), || async {
        get("/page.html", "*/*").await.status() == 200
    })
    .await;
    assert!(ok, "not recovered after auth came back");
    eprintln!(
        "auth: first success {:?} after it was started again",
        restarted.elapsed()
    );

    // Locks down: writes 503, reads work.
    server.process("locks").child.kill().await.unwrap();
    let response = put("/new.txt").await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert!(!server.disk("new.txt").exists());
    assert_eq!(get("/page.html", "*/*").await.status(), 200);
    assert_eq!(propfind().await.status(), 207, "a listing is a read");
    let restarted = tokio::time::Instant::now();
    server.process("locks").restart().await;
    let ok = common::eventually_async(Duration::from_secs(20), || async {
        put("/new.txt").await.status() == 201
    })
    .await;
    assert!(ok, "not recovered after locks came back");
    eprintln!(
        "locks: first success {:?} after it was started again",
        restarted.elapsed()
    );

    // Markdown down: the HTML is served.
    server.process("markdown").child.kill().await.unwrap();
    let response = get("/page.html", "text/markdown").await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let restarted = tokio::time::Instant::now();
    server.process("markdown").restart().await;
    let ok = common::eventually_async(Duration::from_secs(20), || async {
        let response = get("/page.html", "text/markdown").await;
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/markdown")
    })
    .await;
    assert!(ok, "not recovered after markdown came back");
    eprintln!(
        "markdown: first success {:?} after it was started again",
        restarted.elapsed()
    );
}

/// A stuck service (stopped with SIGSTOP: alive, connected, silent) gets the requests
/// that need it a 504 within the deadline (`--rpc-timeout-seconds 1` here), an upload
/// included, and the service is used again as soon as it answers.
async fn stuck_services_give_504() {
    let mode = Mode::Microservices;
    use rustix::process::Signal;
    let mut server = Server::start_with(mode, &["--rpc-timeout-seconds", "1"]).await;
    std::fs::write(server.disk("f.txt"), b"content").unwrap();
    let timed = |request: reqwest::RequestBuilder| async move {
        let started = tokio::time::Instant::now();
        let response = tokio::time::timeout(Duration::from_secs(15), request.send())
            .await
            .expect("an answer, not a hung request")
            .unwrap();
        let status = response.status().as_u16();
        if status >= 300 {
            eprintln!("{status}: {}", response.text().await.unwrap_or_default());
        }
        (status, started.elapsed())
    };

    // The gateway holds its lease from fileio (it serves a kept copy), is ready, and
    // would have kept fileio's answer for the root if the probe went through its cache.
    let gateway_admin = server.admin_of("gateway");
    let leased = kubedav_testkit::eventually(Duration::from_secs(10), || async {
        client().get(server.url("/f.txt")).send().await.unwrap();
        common::metric_text(gateway_admin).await.lines().any(|line| {
            line.starts_with("kubedav_cache_lookups_total{cache=\"gateway_file\",result=\"hit\"}")
                && !line.ends_with(" 0")
        })
    })
    .await;
    assert!(leased, "the gateway never served a kept copy");
    let readyz = format!("http://{gateway_admin}/readyz");
    let ready = |readyz: String| async move {
        let response = tokio::time::timeout(Duration::from_secs(15), client().get(readyz).send())
            .await
            .expect("an answer, not a hung probe")
            .unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    };
    assert_eq!(ready(readyz.clone()).await.0, 200);
    let fileio = server.process("fileio").pid();
    stop(fileio);
    // Not ready while fileio is stuck: the probe asks fileio itself, never what the
    // gateway kept (which its lease lets it serve for another half second).
    let (status, body) = ready(readyz).await;
    assert_eq!(status, 503, "/readyz with fileio stuck: {body}");
    assert!(body.contains("fileio"), "the reason names fileio: {body}");
    for (what, request) in [
        ("GET", client().get(server.url("/f.txt"))),
        (
            "PROPFIND",
            client()
                .request(reqwest::Method::from_bytes(b"PROPFIND").unwrap(), server.url("/"))
                .header("depth", "1"),
        ),
        ("PUT", client().put(server.url("/g.txt")).body("new")),
    ] {
        let (status, took) = timed(request).await;
        assert_eq!(status, 504, "{what} with fileio stuck");
        assert!(took < Duration::from_secs(5), "{what} took {took:?}");
    }
    signal(fileio, Signal::CONT);
    let (status, _) = timed(client().get(server.url("/f.txt"))).await;
    assert_eq!(status, 200, "fileio answers again");

    // An upload under way when fileio gets stuck.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(4);
    let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    let upload = tokio::spawn(timed(
        client()
            .put(server.url("/f.txt"))
            .header("content-length", 64 << 20)
            .body(reqwest::Body::wrap_stream(stream)),
    ));
    tx.send(Ok(vec![b'n'; 1 << 20])).await.unwrap();
    stop(fileio);
    // The client keeps sending until the windows are full.
    let feeder = tokio::spawn(async move { while tx.send(Ok(vec![b'n'; 1 << 20])).await.is_ok() {} });
    let (status, took) = upload.await.unwrap();
    feeder.abort();
    assert_eq!(status, 504, "an upload to a stuck fileio");
    assert!(took < Duration::from_secs(8), "took {took:?}");
    signal(fileio, Signal::CONT);
    let (status, _) = timed(client().get(server.url("/f.txt"))).await;
    assert_eq!(status, 200);
    assert_eq!(
        std::fs::read(server.disk("f.txt")).unwrap(),
        b"content",
        "the old content is kept"
    );

    // The locks service stuck: a write without an If header into a tree it found free of
    // locks may still be allowed by the gateway itself, while its lease from the service
    // holds (500 ms; a stuck service takes no lock either). Once the lease has run out,
    // every write asks, and gets 504 within the deadline.
    let locks = server.process("locks").pid();
    stop(locks);
    let stopped = tokio::time::Instant::now();
    loop {
        let (status, took) = timed(client().put(server.url("/g.txt")).body("new")).await;
        assert!(took < Duration::from_secs(5), "took {took:?}");
        if status == 504 {
            break;
        }
        assert!(status == 201 || status == 204, "PUT with locks stuck: {status}");
        assert!(
            stopped.elapsed() < Duration::from_secs(3),
            "writes were still let through {:?} after the locks service stopped",
            stopped.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _) = timed(client().get(server.url("/f.txt"))).await;
    assert_eq!(status, 200, "reads do not need locks");
    signal(locks, Signal::CONT);
    let (status, _) = timed(client().put(server.url("/g.txt")).body("new")).await;
    assert!(status == 201 || status == 204, "{status}");
}

/// fileio killed while a read is on its connection: the answer is 503 with
/// Retry-After, as when it is down from the start, not a 500 (the broken connection's
/// own error).
async fn a_service_dying_mid_call_gives_503() {
    let mut server = Server::start(Mode::Microservices).await;
    std::fs::write(server.disk("f.txt"), b"content").unwrap();
    let gateway = server.admin_of("gateway");
    let fileio = server.process("fileio").pid();
    stop(fileio);
    let get = tokio::spawn(client().get(server.url("/f.txt")).send());
    // The request has reached the gateway, whose call now waits on fileio.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while common::metric_sum(gateway, "kubedav_http_requests_in_flight").await < 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the GET never reached the gateway"
        );
        tokio::task::yield_now().await;
    }
    signal(fileio, rustix::process::Signal::KILL);
    let response = tokio::time::timeout(Duration::from_secs(20), get)
        .await
        .expect("an answer, not a hang")
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let body = response.text().await.unwrap();
    assert!(body.contains("retry"), "{body}");
}

/// A client that gives up on a request while the gateway waits for it (here on a stopped
/// fileio) is no longer counted in `kubedav_http_requests_in_flight` once its connection
/// closes: the gauge dashboards and alerts read goes back to 0 instead of keeping the
/// abandoned request for good.
async fn an_abandoned_request_leaves_the_in_flight_gauge() {
    use tokio::io::AsyncWriteExt;
    let mut server = Server::start_with(Mode::Microservices, &["--rpc-timeout-seconds", "600"]).await;
    std::fs::write(server.disk("f.txt"), b"content").unwrap();
    let gateway = server.admin_of("gateway");
    let fileio = server.process("fileio").pid();
    stop(fileio);
    let mut connection = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    connection
        .write_all(b"GET /f.txt HTTP/1.1\r\nHost: kubedav\r\n\r\n")
        .await
        .unwrap();
    let in_flight = || async move { common::metric_sum(gateway, "kubedav_http_requests_in_flight").await };
    assert!(
        common::eventually_async(Duration::from_secs(10), || async { in_flight().await >= 1.0 }).await,
        "the GET never reached the gateway"
    );
    drop(connection);
    let left = common::eventually_async(Duration::from_secs(10), || async { in_flight().await == 0.0 }).await;
    assert!(
        left,
        "the abandoned GET is still counted in flight: {}",
        in_flight().await
    );

    signal(fileio, rustix::process::Signal::CONT);
    let response = client().get(server.url("/f.txt")).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

in_both_modes!(
    sigterm_drains_in_flight_requests,
    one_connection_thread_serves_and_drains_many_connections,
    the_shared_runtime_serves_and_drains_connections,
    shutdown_delay_keeps_serving_while_balancers_catch_up,
    kill_during_uploads_loses_nothing
);
// On S3 a killed upload is a multipart upload, not a temporary file:
// tests/objects.rs has that case.
on_s3!(
    sigterm_drains_in_flight_requests,
    shutdown_delay_keeps_serving_while_balancers_catch_up,
);
microservices_only!(
    a_grpc_service_serves_through_its_shutdown_delay,
    stuck_services_give_504,
    a_service_dying_mid_call_gives_503,
    an_abandoned_request_leaves_the_in_flight_gauge,
    each_service_down_affects_only_its_operations
);
