//! The metrics, the Grafana dashboards and the alerts the chart ships, checked against
//! real data: a real Prometheus scrapes the admin port of every process of a
//! microservices run (auth with the shared cache, locks on Redis, markdown) during a
//! mixed workload. Through Prometheus's HTTP API:
//!
//! * every PromQL expression of every dashboard panel returns data;
//! * every metric of the catalogue in docs/observability.md exists, and the counters the
//!   workload drives have moved;
//! * every alert expression of the chart's PrometheusRule parses and evaluates.

mod common;

use common::prometheus::Prometheus;
use common::{Server, client};
use kubedav_testkit::{RedisServer, free_port};
use reqwest::{Method, StatusCode};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Every panel expression of every dashboard in `dir`, with Grafana's variables set as a
/// dashboard user would: the namespace and job its variables list, a one-minute rate
/// window; and the variables' own queries.
fn dashboard_expressions(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let dashboard: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        // As a user would pick them: the namespace and job the variables list (the test
        // Prometheus has no cluster label, so the cluster is "All", `.*`).
        let chosen = |expr: &str| {
            expr.replace("$cluster", ".*")
                .replace("$namespace", "kubedav-test")
                .replace("$job", "kubedav")
                .replace("$__rate_interval", "1m")
        };
        for panel in dashboard["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = chosen(target["expr"].as_str().unwrap());
                out.push((format!("{} / {}", dashboard["title"], panel["title"]), expr));
            }
        }
        // The namespace and job variables must list kubedav's: label_values(SERIES,
        // LABEL) is `group by (LABEL) (SERIES)` in PromQL.
        for variable in dashboard["templating"]["list"].as_array().unwrap() {
            let (Some(query), Some(name)) = (variable["definition"].as_str(), variable["name"].as_str())
            else {
                continue;
            };
            let Some((series, label)) = query
                .strip_prefix("label_values(")
                .and_then(|q| q.strip_suffix(')'))
                .and_then(|q| q.rsplit_once(", "))
            else {
                continue;
            };
            if name != "cluster" {
                out.push((
                    format!("{} / variable {name}", dashboard["title"]),
                    chosen(&format!("group by ({label}) ({series})")),
                ));
            }
        }
    }
    assert!(!out.is_empty(), "no dashboards in {}", dir.display());
    out
}

/// One round of the mixed workload: writes, reads, listings, locks, Markdown, and in the
/// first round a refused login (once: more would lock the client out).
async fn workload(server: &Server, first: bool) {
    let c = client();
    let as_alice = |method: &str, path: &str| {
        c.request(Method::from_bytes(method.as_bytes()).unwrap(), server.url(path))
            .basic_auth("alice", Some("alice-pw"))
    };
    let html = "<html><body><h1>Dashboards</h1><p>checked against <b>real</b> data.</p></body></html>";
    assert!(
        as_alice("PUT", "/page.html")
            .body(html)
            .send()
            .await
            .unwrap()
            .status()
            .is_success()
    );
    for _ in 0..2 {
        let md = as_alice("GET", "/page.html")
            .header("accept", "text/markdown")
            .send()
            .await
            .unwrap();
        assert_eq!(md.status(), StatusCode::OK);
    }
    let propfind = as_alice("PROPFIND", "/")
        .header("depth", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(propfind.status(), StatusCode::MULTI_STATUS);
    let lockinfo = r#"<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#;
    let lock = as_alice("LOCK", "/page.html")
        .body(lockinfo)
        .send()
        .await
        .unwrap();
    assert_eq!(lock.status(), StatusCode::OK);
    let token = lock.headers()["lock-token"].to_str().unwrap().to_owned();
    let blocked = as_alice("PUT", "/page.html").body("x").send().await.unwrap();
    assert_eq!(blocked.status(), StatusCode::LOCKED);
    let unlock = as_alice("UNLOCK", "/page.html")
        .header("lock-token", token)
        .send()
        .await
        .unwrap();
    assert_eq!(unlock.status(), StatusCode::NO_CONTENT);
    let missing = as_alice("GET", "/no-such-page.html").send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    if first {
        let wrong = c
            .get(server.url("/"))
            .basic_auth("mallory", Some("guess"))
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_panel_returns_data_from_a_real_prometheus() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    // The export metrics exist whenever an endpoint is set; nothing listens there and
    // nothing is sampled.
    let collector = format!("http://127.0.0.1:{}", free_port());
    let server = Server::start_on_redis(
        &redis,
        dir.path(),
        &[("alice", "alice-pw")],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector),
            ("OTEL_TRACES_SAMPLER", "always_off"),
        ],
    )
    .await;
    let prometheus = Prometheus::start(&server.admin).await;
    let dashboards = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/kubedav/dashboards");
    let expressions = dashboard_expressions(&dashboards);

    // Rates need two scrapes of moving counters: keep the workload going until every
    // panel answers, or give up after a minute and name the silent ones.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut silent: Vec<String>;
    let mut first = true;
    loop {
        workload(&server, first).await;
        first = false;
        silent = Vec::new();
        for (panel, expr) in &expressions {
            if prometheus.query(expr).await.is_empty() {
                silent.push(format!("{panel}: {expr}"));
            }
        }
        if silent.is_empty() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        silent.is_empty(),
        "dashboard queries without data:\n{}",
        silent.join("\n")
    );
    let scraped = prometheus.query("up == 1").await.len();
    assert_eq!(scraped, server.admin.len(), "Prometheus scrapes every process");

    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut absent = Vec::new();
    for metric in catalogue(&repo.join("docs/observability.md")) {
        let expr = format!("count({{__name__=~\"{metric}|{metric}_count\"}})");
        if prometheus.query(&expr).await.is_empty() {
            absent.push(metric);
        }
    }
    assert!(
        absent.is_empty(),
        "catalogued metrics that no process exports: {absent:?}"
    );
    let mut still = Vec::new();
    for counter in MOVED_BY_THE_WORKLOAD {
        if prometheus.query(&format!("sum({counter}) > 0")).await.is_empty() {
            still.push(counter);
        }
    }
    assert!(
        still.is_empty(),
        "counters the workload should have moved: {still:?}"
    );

    let alerts = alert_expressions(&repo.join("charts/kubedav"));
    assert!(alerts.len() >= 9, "the alerts: {alerts:?}");
    // Alerts that must stay quiet on this healthy run (the others depend on the machine's
    // disk and speed, or on the one refused login).
    let quiet = [
        "KubedavTargetDown",
        "KubedavHighErrorRate",
        "KubedavLockStoreUnreachable",
        "KubedavBackendUnavailable",
    ];
    for (alert, expr) in alerts {
        // query() asserts that Prometheus accepted (parsed and evaluated) the expression.
        let firing = prometheus.query(&expr).await;
        assert!(
            !quiet.contains(&alert.as_str()) || firing.is_empty(),
            "{alert} would fire on a healthy run: {firing:?}"
        );
    }
}

/// Counters that the workload must have moved from zero.
const MOVED_BY_THE_WORKLOAD: &[&str] = &[
    "kubedav_http_requests_total",
    "kubedav_http_request_duration_seconds_count",
    "kubedav_http_request_body_bytes_total",
    "kubedav_http_response_body_bytes_total",
    "kubedav_grpc_server_started_total",
    "kubedav_grpc_server_handled_total",
    "kubedav_grpc_server_handling_seconds_count",
    "kubedav_grpc_client_started_total",
    "kubedav_grpc_client_handled_total{grpc_code=\"NotFound\"}",
    "kubedav_grpc_client_handling_seconds_count",
    "kubedav_auth_attempts_total{outcome=\"denied\"}",
    "kubedav_cache_lookups_total{cache=\"auth\",result=\"hit\"}",
    "kubedav_cache_lookups_total{cache=\"auth\",result=\"miss\"}",
    "kubedav_auth_crypt_verifications_total",
    "kubedav_cache_stores_total{cache=\"auth_shared\"}",
    "kubedav_locks_conflicts_total",
    "kubedav_fileio_read_bytes_total",
    "kubedav_fileio_written_bytes_total",
    "kubedav_fileio_scans_total",
    "kubedav_fileio_scan_batch_entries_count",
    "kubedav_markdown_conversions_total",
    "kubedav_markdown_conversion_duration_seconds_count",
    "kubedav_markdown_input_bytes_total",
    "kubedav_markdown_tokens_total",
    "kubedav_cache_lookups_total{cache=\"markdown\",result=\"hit\"}",
    "kubedav_fileio_volume_size_bytes",
    "kubedav_cache_lookups_total{cache=~\"gateway_.*\",result=\"hit\"}",
    "kubedav_lease_invalidation_wait_seconds_count",
];

/// The `kubedav_*` metric names of the catalogue table in docs/observability.md.
fn catalogue(doc: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(doc).unwrap();
    let mut names = Vec::new();
    // Metrics only fileio on object storage exports are left to tests/objects.rs, which
    // runs on it: this server serves a volume.
    let rows = text
        .lines()
        .filter(|l| l.starts_with("| `kubedav_") && !l.contains("(`--storage s3://`)"));
    for line in rows {
        let first_cell = line.split('|').nth(1).unwrap_or_default();
        names.extend(
            first_cell
                .split('`')
                .filter(|part| part.starts_with("kubedav_"))
                .map(str::to_owned),
        );
    }
    assert!(
        names.len() > 20,
        "the catalogue in {} lists the metrics",
        doc.display()
    );
    names
}

/// Every alert's expression in the chart's PrometheusRule, rendered as Helm would for
/// namespace `kubedav-test` with the default thresholds of values.yaml.
fn alert_expressions(chart: &Path) -> Vec<(String, String)> {
    let values = std::fs::read_to_string(chart.join("values.yaml")).unwrap();
    let threshold = |name: &str| -> String {
        values
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("values.yaml has no {name}"))
            .trim()
            .to_owned()
    };
    let template = std::fs::read_to_string(chart.join("templates/monitoring.yaml")).unwrap();
    let render = |expr: &str| -> String {
        let mut out = expr
            .replace("{{ .Release.Namespace }}", "kubedav-test")
            .replace("{{ include \"kubedav.fullname\" . }}", "kd-kubedav");
        while let Some(start) = out.find("{{ $thresholds.") {
            let end = start + out[start..].find("}}").unwrap() + 2;
            let name = out[start + "{{ $thresholds.".len()..end - 2].trim().to_owned();
            out.replace_range(start..end, &threshold(&name));
        }
        assert!(!out.contains("{{"), "unrendered template in {out}");
        out
    };
    let lines: Vec<&str> = template.lines().collect();
    let mut alerts = Vec::new();
    let mut name = String::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if let Some(alert) = trimmed.strip_prefix("- alert: ") {
            name = alert.trim().to_owned();
        } else if let Some(expr) = trimmed.strip_prefix("expr:") {
            let expr = expr.trim();
            let text = if expr == "|" {
                let indent = line.len() - trimmed.len();
                lines[i + 1..]
                    .iter()
                    .take_while(|l| l.len() - l.trim_start().len() > indent)
                    .map(|l| l.trim())
                    .collect::<Vec<_>>()
                    .join(" ")
            } else {
                expr.to_owned()
            };
            alerts.push((name.clone(), render(&text)));
        }
    }
    alerts
}
