//! `kubedav smoke URL`: the WebDAV smoke test that `helm test` runs against a release (and
//! the chart's wiring test runs against processes started from the rendered manifests).
//! In a fresh collection it runs MKCOL, PUT, PROPFIND, GET, a PUT and GET of 2 MiB (a
//! body large enough to be written through the volume's incoming area and sent from the
//! gateways' mount, where they mount it), LOCK, a PUT without the token (which must get
//! 423), UNLOCK and DELETE, printing one line per step, and stops at the first answer
//! that is not the expected one.

use base64::Engine;
use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

const CONTENT: &str = "hello from kubedav smoke\n";
/// The size of the large file PUT and read back.
const LARGE_BYTES: usize = 2 << 20;
const LOCKINFO: &str = r#"<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>kubedav smoke</D:owner></D:lockinfo>"#;

struct Smoke {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    authorization: Option<String>,
}

/// One answer: status, headers and body.
struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: String,
}

impl Smoke {
    async fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Answer, String> {
        let url = format!("{}{path}", self.base);
        let mut request = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).expect("a valid method"))
            .uri(&url);
        if let Some(authorization) = &self.authorization {
            request = request.header(header::AUTHORIZATION, authorization);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .map_err(|e| format!("{method} {url}: cannot build the request: {e}"))?;
        let response = tokio::time::timeout(std::time::Duration::from_secs(30), self.client.request(request))
            .await
            .map_err(|_| format!("{method} {url}: no answer within 30 s"))?
            .map_err(|e| format!("{method} {url}: {e} (is the server up, and the URL right?)"))?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{method} {url}: the body broke off: {e}"))?
            .to_bytes();
        Ok(Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }

    /// Runs one step and checks its status.
    async fn step(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
        expected: &[StatusCode],
    ) -> Result<Answer, String> {
        let answer = self.call(method, path, headers, body).await?;
        if !expected.contains(&answer.status) {
            let hint = if answer.status == StatusCode::UNAUTHORIZED {
                " (set KUBEDAV_SMOKE_USER and KUBEDAV_SMOKE_PASSWORD to a user that may write)"
            } else {
                ""
            };
            return Err(format!(
                "{method} {path}: expected {}, got {}{hint}: {}",
                expected
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" or "),
                answer.status,
                answer.body.trim()
            ));
        }
        println!("ok  {method} {path} -> {}", answer.status.as_u16());
        Ok(answer)
    }
}

/// Runs the smoke test against `url` (the server's root, or any collection).
pub(crate) async fn run(url: &str, user: Option<String>, password: Option<String>) -> Result<(), String> {
    let base = url.trim_end_matches('/').to_owned();
    if !base.starts_with("http://") {
        return Err(format!("{url} is not an http:// URL"));
    }
    let authorization = user.map(|user| {
        let credentials = format!("{user}:{}", password.unwrap_or_default());
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(credentials)
        )
    });
    let smoke = Smoke {
        client: Client::builder(TokioExecutor::new()).build_http(),
        base,
        authorization,
    };
    let mut random = [0u8; 6];
    getrandom::fill(&mut random).map_err(|e| format!("no randomness: {e}"))?;
    let dir = format!(
        "/kubedav-smoke-{}",
        random.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    let file = format!("{dir}/hello.txt");
    let no = &[][..];
    smoke
        .step("MKCOL", &format!("{dir}/"), no, "", &[StatusCode::CREATED])
        .await?;
    smoke
        .step("PUT", &file, no, CONTENT, &[StatusCode::CREATED])
        .await?;
    let listing = smoke
        .step(
            "PROPFIND",
            &format!("{dir}/"),
            &[("depth", "1")],
            "",
            &[StatusCode::MULTI_STATUS],
        )
        .await?;
    if !listing.body.contains("hello.txt") {
        return Err(format!(
            "PROPFIND {dir}/ does not list hello.txt: {}",
            listing.body
        ));
    }
    let got = smoke.step("GET", &file, no, "", &[StatusCode::OK]).await?;
    if got.body != CONTENT {
        return Err(format!("GET {file} answered {:?}, not what was PUT", got.body));
    }
    let large_file = format!("{dir}/large.txt");
    let large: String = CONTENT.repeat(LARGE_BYTES / CONTENT.len() + 1)[..LARGE_BYTES].to_owned();
    smoke
        .step("PUT", &large_file, no, &large, &[StatusCode::CREATED])
        .await?;
    let got = smoke.step("GET", &large_file, no, "", &[StatusCode::OK]).await?;
    if got.body != large {
        return Err(format!(
            "GET {large_file} answered {} other bytes, not the {LARGE_BYTES} PUT",
            got.body.len()
        ));
    }
    let locked = smoke
        .step(
            "LOCK",
            &file,
            &[("timeout", "Second-60")],
            LOCKINFO,
            &[StatusCode::OK],
        )
        .await?;
    let token = locked
        .headers
        .get("lock-token")
        .and_then(|v| v.to_str().ok())
        .ok_or("LOCK answered without a Lock-Token header")?
        .to_owned();
    smoke
        .step("PUT", &file, no, "intruder", &[StatusCode::LOCKED])
        .await?;
    smoke
        .step(
            "UNLOCK",
            &file,
            &[("lock-token", &token)],
            "",
            &[StatusCode::NO_CONTENT],
        )
        .await?;
    smoke
        .step("DELETE", &format!("{dir}/"), no, "", &[StatusCode::NO_CONTENT])
        .await?;
    println!("kubedav smoke: every step passed against {url}");
    Ok(())
}
