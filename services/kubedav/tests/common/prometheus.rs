//! A real Prometheus (Debian's package, which `make test` installs) on a free port,
//! scraping kubedav's admin ports every second, with exemplar storage on; stopped on drop.

use super::client;
use kubedav_testkit::free_port;
use reqwest::StatusCode;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A real Prometheus on a free port, scraping `targets` every second; stopped on drop.
pub(crate) struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    pub(crate) async fn start(targets: &[(&str, std::net::SocketAddr)]) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let mut config = String::from(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n  - job_name: kubedav\n    static_configs:\n",
        );
        for (service, addr) in targets {
            config.push_str(&format!(
                "      - targets: ['{addr}']\n        labels: {{namespace: kubedav-test, service: {service}}}\n"
            ));
        }
        let file = dir.path().join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // Scrapes then ask for OpenMetrics, and exemplars are kept.
            .arg("--enable-feature=exemplar-storage")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run prometheus ({e}): `make test` installs it (Debian package prometheus)")
            });
        let prometheus = Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = client().get(format!("{}/-/ready", prometheus.url)).send().await
                && r.status() == StatusCode::OK
            {
                return prometheus;
            }
            assert!(Instant::now() < deadline, "prometheus did not become ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The `data` of Prometheus's answer to the API call `path_and_query` (under
    /// /api/v1/), which must succeed; `what` names it in a failure.
    async fn api(&self, path_and_query: &str, what: &str) -> serde_json::Value {
        let body = client()
            .get(format!("{}/api/v1/{path_and_query}", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let mut reply: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(reply["status"], "success", "{what}: {reply}");
        reply["data"].take()
    }

    /// The exemplars Prometheus holds for the series `selector` over the last ten minutes,
    /// as `(series labels, exemplar labels)` pairs.
    pub(crate) async fn exemplars(&self, selector: &str) -> Vec<(serde_json::Value, serde_json::Value)> {
        let encoded = percent_encoding::utf8_percent_encode(selector, percent_encoding::NON_ALPHANUMERIC);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let query = format!(
            "query_exemplars?query={encoded}&start={}&end={}",
            now - 600,
            now + 60
        );
        let data = self.api(&query, selector).await;
        let mut found = Vec::new();
        for series in data.as_array().into_iter().flatten() {
            for exemplar in series["exemplars"].as_array().into_iter().flatten() {
                found.push((series["seriesLabels"].clone(), exemplar["labels"].clone()));
            }
        }
        found
    }

    /// The result vector of an instant query (empty when the query has no data).
    pub(crate) async fn query(&self, expr: &str) -> Vec<serde_json::Value> {
        let encoded = percent_encoding::utf8_percent_encode(expr, percent_encoding::NON_ALPHANUMERIC);
        let data = self.api(&format!("query?query={encoded}"), expr).await;
        data["result"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
