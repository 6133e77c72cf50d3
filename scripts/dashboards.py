#!/usr/bin/env python3
"""Writes the Grafana dashboards the chart ships (charts/kubedav/dashboards/*.json): the
overview and one per service. Edit the panels here and run it again; the JSON files are
its output, committed so that the chart carries them. tests/dashboards.rs checks every
panel query against a real Prometheus.

usage: python3 scripts/dashboards.py
"""

import json
import os

OUT = os.path.join(os.path.dirname(__file__), "..", "charts", "kubedav", "dashboards")
# Every query is limited to the chosen clusters, namespaces and jobs. A Prometheus of one
# cluster has no `cluster` label; "All" is then `.*`, which matches the empty label.
NS = 'cluster=~"$cluster", namespace=~"$namespace", job=~"$job"'
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def rate(metric, labels="", by=""):
    selector = f"{{{NS}{', ' + labels if labels else ''}}}"
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping} (rate({metric}{selector}[$__rate_interval]))"


def quantile(q, metric, by="", labels=""):
    keys = "le" + (f", {by}" if by else "")
    selector = f"{{{NS}{', ' + labels if labels else ''}}}"
    return f"histogram_quantile({q}, sum by ({keys}) (rate({metric}_bucket{selector}[$__rate_interval])))"


# Histograms whose buckets carry the trace id of a sampled request as an exemplar: their
# panels show them, so a dot over a slow bucket opens the trace (docs/observability.md).
TRACED = ("kubedav_http_request_duration_seconds", "kubedav_grpc_client_handling_seconds",
          "kubedav_grpc_server_handling_seconds")


def traced(expr):
    return any(f"{metric}_bucket" in expr for metric in TRACED)


def process(service, metric):
    return f'sum({metric}{{{NS}, service=~".*{service}.*"}})'


def variable(name, label, series):
    """A query variable listing the values of label `name` on `series`: only where kubedav
    runs (kubedav_build_info), not every namespace of the cluster. "All" is `.*`."""
    query = f"label_values({series}, {name})"
    return {"name": name, "type": "query", "label": label, "datasource": DATASOURCE,
            "query": {"query": query, "refId": name}, "definition": query,
            "includeAll": True, "allValue": ".*", "multi": True, "refresh": 2, "sort": 1}


class Dashboard:
    def __init__(self, uid, title, description):
        self.uid, self.title, self.description = uid, title, description
        self.panels = []
        self.x = self.y = 0

    def panel(self, title, targets, unit="short"):
        self.panels.append({
            "id": len(self.panels) + 1,
            "type": "timeseries",
            "title": title,
            "datasource": DATASOURCE,
            "gridPos": {"x": self.x, "y": self.y, "w": 12, "h": 8},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
            "targets": [{"refId": chr(65 + i), "expr": expr, "legendFormat": legend, "datasource": DATASOURCE,
                         "exemplar": traced(expr)}
                        for i, (expr, legend) in enumerate(targets)],
        })
        self.advance()

    def text(self, title, markdown):
        self.panels.append({
            "id": len(self.panels) + 1,
            "type": "text",
            "title": title,
            "gridPos": {"x": self.x, "y": self.y, "w": 12, "h": 8},
            "options": {"mode": "markdown", "content": markdown},
        })
        self.advance()

    def advance(self):
        self.x = 12 - self.x
        if self.x == 0:
            self.y += 8

    def write(self):
        dashboard = {
            "title": self.title, "uid": self.uid, "description": self.description,
            "schemaVersion": 39, "version": 1, "tags": ["kubedav"], "timezone": "browser",
            "refresh": "30s", "editable": True, "time": {"from": "now-1h", "to": "now"},
            "links": [{"title": "kubedav dashboards", "type": "dashboards", "tags": ["kubedav"], "asDropdown": True}],
            "templating": {"list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
                variable("cluster", "Cluster", "kubedav_build_info"),
                variable("namespace", "Namespace", 'kubedav_build_info{cluster=~"$cluster"}'),
                variable("job", "Job", 'kubedav_build_info{cluster=~"$cluster", namespace=~"$namespace"}'),
            ]},
            "panels": self.panels,
        }
        with open(os.path.join(OUT, f"{self.uid}.json"), "w") as f:
            f.write(json.dumps(dashboard, indent=2) + "\n")


def overview():
    d = Dashboard("kubedav-overview", "kubedav overview", "The gateway's RED metrics and every service at a glance.")
    http = "kubedav_http_requests_total"
    d.panel("Requests by method", [(rate(http, by="method"), "{{method}}")], "reqps")
    d.panel("Errors (5xx share)", [
        (f'({rate(http, "status_class=" + chr(34) + "5xx" + chr(34))} or vector(0)) / {rate(http)}', "5xx")],
        "percentunit")
    d.panel("Refusals and errors by status code", [
        (rate(http, 'status_class=~"4xx|5xx"', by="code"), "{{code}}")], "reqps")
    d.panel("Latency p50 / p99 by method", [
        (quantile(0.99, "kubedav_http_request_duration_seconds", "method"), "p99 {{method}}"),
        (quantile(0.5, "kubedav_http_request_duration_seconds", "method"), "p50 {{method}}")], "s")
    d.panel("gRPC calls from the gateway by method", [
        (rate("kubedav_grpc_client_handled_total", by="grpc_method"), "{{grpc_method}}"),
        (rate("kubedav_grpc_client_handled_total", 'grpc_code!="OK"', by="grpc_service, grpc_code"),
         "{{grpc_service}} {{grpc_code}}")], "reqps")
    d.panel("gRPC p99 latency, gateway side, by method", [
        (quantile(0.99, "kubedav_grpc_client_handling_seconds", "grpc_method"), "p99 {{grpc_method}}")], "s")
    d.panel("Gateway cache: answers kept under the services' leases", [
        (rate("kubedav_cache_lookups_total", 'cache=~"gateway_.*"', by="cache, result"), "{{cache}} {{result}}")], "reqps")
    d.panel("Bytes: HTTP in and out, volume read and written", [
        (rate("kubedav_fileio_read_bytes_total"), "read"),
        (rate("kubedav_fileio_written_bytes_total"), "written"),
        (rate("kubedav_http_request_body_bytes_total"), "HTTP in"),
        (rate("kubedav_http_response_body_bytes_total"), "HTTP out")], "Bps")
    d.panel("Locks", [
        (f"max(kubedav_locks_active{{{NS}}})", "active"),
        (rate("kubedav_locks_conflicts_total"), "conflicts/s"),
        (rate("kubedav_locks_store_errors_total"), "store errors/s")])
    d.panel("Auth", [
        (rate("kubedav_cache_lookups_total", 'cache="auth", result="hit"'), "cache hits/s"),
        (rate("kubedav_auth_crypt_verifications_total"), "crypt/s"),
        (rate("kubedav_cache_lookups_total", 'cache="auth_shared"', by="result"), "shared {{result}}/s"),
        (rate("kubedav_auth_attempts_total", by="outcome"), "{{outcome}}/s")])
    d.panel("Markdown conversions", [
        (rate("kubedav_markdown_conversions_total"), "conversions/s"),
        (rate("kubedav_cache_lookups_total", 'cache="markdown", result="hit"'), "cache hits/s")])
    d.panel("Requests in flight", [(f"sum(kubedav_http_requests_in_flight{{{NS}}})", "in flight")])
    d.panel("Trace export", [(rate("kubedav_otel_spans_exported_total"), "spans exported/s"),
                             (rate("kubedav_otel_spans_dropped_total", by="reason"), "dropped ({{reason}})/s")])
    d.text("Traces", "Every request is one trace (OTLP; `otel.endpoint`). In Grafana, open **Explore** "
           "with your Tempo or Jaeger data source and search `service.name = kubedav-gateway`; "
           "every response carries `x-request-id`, recorded on the request span as `request_id`. "
           "See docs/observability.md.")
    d.write()


def grpc_served(d, package):
    """The calls a service answers: by method and status, and their p99."""
    served = f'grpc_service=~"kubedav.{package}.v1.*"'
    d.panel("gRPC calls served by method and status", [
        (rate("kubedav_grpc_server_handled_total", served, by="grpc_method, grpc_code"),
         "{{grpc_method}} {{grpc_code}}")], "reqps")
    d.panel("gRPC p99 time to status by method", [
        (quantile(0.99, "kubedav_grpc_server_handling_seconds", "grpc_method", served), "p99 {{grpc_method}}")], "s")


def memory_and_cpu(d, service):
    d.panel("Memory (resident)", [(process(service, "process_resident_memory_bytes"), "RSS")], "bytes")
    d.panel("CPU", [(f'sum(rate(process_cpu_seconds_total{{{NS}, service=~".*{service}.*"}}[$__rate_interval]))',
                     "cores")])


def auth():
    d = Dashboard("kubedav-auth", "kubedav auth", "Credential checks: outcomes, caches, crypt work, lockouts.")
    d.panel("Verifications by outcome", [(rate("kubedav_auth_attempts_total", by="outcome"), "{{outcome}}")], "reqps")
    d.panel("Local cache", [(rate("kubedav_cache_lookups_total", 'cache="auth"', by="result"), "{{result}}")], "reqps")
    d.panel("Crypt verifications and queue", [
        (rate("kubedav_auth_crypt_verifications_total"), "crypt/s"),
        (f"max(kubedav_auth_crypt_queue_depth{{{NS}}})", "queued")])
    d.panel("Shared cache (Redis)", [(rate("kubedav_cache_lookups_total", 'cache="auth_shared"', by="result"), "{{result}}"),
                                     (rate("kubedav_cache_stores_total", 'cache="auth_shared"'), "stored")], "reqps")
    d.panel("Lockouts", [(rate("kubedav_auth_lockouts_total"), "lockouts/s")])
    grpc_served(d, "auth")
    memory_and_cpu(d, "auth")
    d.write()


def locks():
    d = Dashboard("kubedav-locks", "kubedav locks", "The lock manager: held locks, conflicts, the Redis store.")
    d.panel("Active locks", [(f"max(kubedav_locks_active{{{NS}}})", "active")])
    d.panel("Conflicts (423)", [(rate("kubedav_locks_conflicts_total"), "conflicts/s")])
    d.panel("Store errors by operation", [(rate("kubedav_locks_store_errors_total", by="operation"), "{{operation}}")])
    d.panel("PROPFIND with empty lockdiscovery", [(rate("kubedav_gateway_lockdiscovery_unavailable_total"), "degraded/s")])
    grpc_served(d, "locks")
    memory_and_cpu(d, "locks")
    d.write()


def fileio():
    d = Dashboard("kubedav-fileio", "kubedav fileio", "The volume: bytes, listings, io_uring, space.")
    d.panel("Bytes read and written", [(rate("kubedav_fileio_read_bytes_total"), "read"),
                                       (rate("kubedav_fileio_written_bytes_total"), "written")], "Bps")
    d.panel("Listings by path (io_uring or fallback)", [(rate("kubedav_fileio_scans_total", by="path"), "{{path}}")],
            "reqps")
    d.panel("Entries per scan step p50 / p99", [
        (quantile(0.99, "kubedav_fileio_scan_batch_entries", "path"), "p99 {{path}}"),
        (quantile(0.5, "kubedav_fileio_scan_batch_entries", "path"), "p50 {{path}}")])
    d.panel("io_uring available", [(f"min(kubedav_fileio_io_uring_available{{{NS}}})", "available")])
    d.panel("Volume space", [(f"min(kubedav_fileio_volume_available_bytes{{{NS}}})", "available"),
                             (f"max(kubedav_fileio_volume_size_bytes{{{NS}}})", "size")], "bytes")
    d.panel("Gateways holding a lease", [(f"sum(kubedav_lease_holders{{{NS}}})", "holders")])
    # Each replica reports the whole tree's trash and versions: the max per root, summed.
    d.panel("Trash and versions kept", [
        (f"sum(max by (root) (kubedav_fileio_trash_bytes{{{NS}}}))", "trash"),
        (f"sum(max by (root) (kubedav_fileio_version_bytes{{{NS}}}))", "versions")], "bytes")
    d.panel("Trash items and versions purged, by reason",
            [(rate("kubedav_fileio_purges_total", by="reason"), "{{reason}}")])
    d.panel("Changes waiting for the gateways' leases p50 / p99", [
        (quantile(0.99, "kubedav_lease_invalidation_wait_seconds"), "p99"),
        (quantile(0.5, "kubedav_lease_invalidation_wait_seconds"), "p50")], "s")
    grpc_served(d, "fileio")
    memory_and_cpu(d, "fileio")
    d.write()


def markdown():
    d = Dashboard("kubedav-markdown", "kubedav markdown", "HTML to Markdown for agents.")
    d.panel("Conversions by outcome", [(rate("kubedav_markdown_conversions_total", by="outcome"), "{{outcome}}")],
            "reqps")
    d.panel("Conversion time p50 / p99", [
        (quantile(0.99, "kubedav_markdown_conversion_duration_seconds"), "p99"),
        (quantile(0.5, "kubedav_markdown_conversion_duration_seconds"), "p50")], "s")
    d.panel("Input and tokens", [(rate("kubedav_markdown_input_bytes_total"), "input bytes/s"),
                                 (rate("kubedav_markdown_tokens_total"), "tokens/s")])
    d.panel("Cache lookups", [(rate("kubedav_cache_lookups_total", 'cache="markdown"', by="result"), "{{result}}")], "reqps")
    grpc_served(d, "markdown")
    memory_and_cpu(d, "markdown")
    d.write()


if __name__ == "__main__":
    for make in (overview, auth, locks, fileio, markdown):
        make()
