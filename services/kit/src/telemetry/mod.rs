//! Logs and traces.
//!
//! Logs go to stderr through `tracing-subscriber`, filtered by `RUST_LOG` (default
//! `info`), as text or, on request, JSON ([`json`]: with trace, span and request ids).
//! Traces are exported over OTLP/gRPC when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; the exporter and sampler read the
//! standard `OTEL_*` variables. Export runs behind a bounded queue ([`export`]): spans
//! are dropped and counted, never waited for, when the collector is slow or down. The
//! W3C trace-context propagator is installed globally.

pub mod export;
pub mod json;
pub mod propagation;
pub mod scope;
pub mod text;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The log target of the access log.
pub const ACCESS: &str = "kubedav::access";

/// The log target of the access policy's audit lines (one per request under
/// `--policy`: principal, method, path, decision and what decided it).
pub const AUDIT: &str = "kubedav::audit";

/// Whether traces are exported; true until [`init`] finds otherwise ([`span_wanted`]).
static EXPORTED: AtomicBool = AtomicBool::new(true);
/// Whether log lines carry span and trace ids (JSON); see [`span_wanted`].
static LINES_CARRY_SPAN_IDS: AtomicBool = AtomicBool::new(true);

/// Whether a request's span (the gateway's `http.request`, a gRPC call's `grpc.client`
/// or `grpc.server`) is read by anything but the text lines written inside it: always
/// when traces are exported; when log lines carry span and trace ids (JSON), if the
/// request `continues_a_trace` (an incoming `traceparent`, or a span made above it), so
/// that its lines carry the caller's trace id. Before [`init`] has run, always.
///
/// The callers make the span when this is true or debug lines are on where they make
/// it, so that text lines name it then. Otherwise it is not made: making, entering and
/// closing one cost 1.7 µs of the 19 µs a PROPFIND Depth 0 takes (docs/benchmarks.md,
/// "2026-11-26 (3)"), for a name in a line that is seldom written, or for a trace id
/// that would name nothing beyond the request id. The lines keep their request id
/// either way ([`scope::REQUEST_ID`]).
pub fn span_wanted(continues_a_trace: bool) -> bool {
    EXPORTED.load(Ordering::Relaxed) || (continues_a_trace && LINES_CARRY_SPAN_IDS.load(Ordering::Relaxed))
}

/// Log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Flushes pending spans when dropped; keep it alive for the process's lifetime.
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("kubedav: flushing traces failed: {e}");
        }
    }
}

fn otlp_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
        && std::env::var("OTEL_TRACES_EXPORTER").map_or(true, |v| v != "none")
        && !sdk_disabled()
}

/// `OTEL_SDK_DISABLED=true` (any case, as the specification says): nothing is exported.
fn sdk_disabled() -> bool {
    std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The OTLP transports kubedav exports traces over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/gRPC, usually on port 4317 (kubedav's default).
    Grpc,
    /// OTLP/HTTP with protobuf bodies, usually on port 4318 (`/v1/traces` is appended
    /// to OTEL_EXPORTER_OTLP_ENDPOINT).
    HttpProtobuf,
}

/// The protocol from `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else
/// `OTEL_EXPORTER_OTLP_PROTOCOL`, else gRPC. The specification's default is
/// http/protobuf; kubedav keeps gRPC, what it exported over before the variable was
/// honoured, so an endpoint on :4317 keeps working.
pub fn otlp_protocol(traces: Option<&str>, general: Option<&str>) -> Result<OtlpProtocol, String> {
    let (name, value) = match (traces, general) {
        (Some(v), _) if !v.trim().is_empty() => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", v),
        (_, Some(v)) if !v.trim().is_empty() => ("OTEL_EXPORTER_OTLP_PROTOCOL", v),
        _ => return Ok(OtlpProtocol::Grpc),
    };
    match value.trim() {
        "grpc" => Ok(OtlpProtocol::Grpc),
        "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
        other => Err(format!(
            "{name}={other} is not a protocol kubedav exports over: use grpc (port 4317) or \
             http/protobuf (port 4318)"
        )),
    }
}

/// Installs logging and, when configured, trace export. `service` names the process in
/// traces unless `OTEL_SERVICE_NAME` says otherwise; `access_log` turns on the log
/// target [`ACCESS`] (one line per HTTP request), `audit_log` the target [`AUDIT`].
/// Must run inside the tokio runtime.
///
/// Spans get OpenTelemetry ids when traces are exported or logs are JSON (whose lines
/// carry them), so the same trace id follows a request through every process's logs
/// even with no collector.
pub fn init(
    service: &str,
    format: LogFormat,
    access_log: bool,
    audit_log: bool,
) -> Result<TelemetryGuard, String> {
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let dispatch = scope::DispatchCell::default();
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info"))
        .add_directive(
            format!("{ACCESS}={}", if access_log { "info" } else { "off" })
                .parse()
                .expect("a valid directive"),
        )
        .add_directive(
            format!("{AUDIT}={}", if audit_log { "info" } else { "off" })
                .parse()
                .expect("a valid directive"),
        );
    // The formatters see events only: spans are looked up when a line is written
    // (`scope`), never formatted as they begin.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(format == LogFormat::Text && std::io::stderr().is_terminal());
    let fmt = match format {
        LogFormat::Text => fmt.event_format(text::TextLines::new(dispatch.clone())).boxed(),
        LogFormat::Json => fmt.event_format(json::JsonLines::new(dispatch.clone())).boxed(),
    }
    .with_filter(tracing_subscriber::filter::filter_fn(formats_line));
    let provider = if otlp_configured() {
        Some(exporting_provider(service)?)
    } else if format == LogFormat::Json {
        Some(SdkTracerProvider::builder().build())
    } else {
        None
    };
    EXPORTED.store(otlp_configured(), Ordering::Relaxed);
    LINES_CARRY_SPAN_IDS.store(format == LogFormat::Json, Ordering::Relaxed);
    let otel = provider.as_ref().map(|provider| {
        opentelemetry::global::set_tracer_provider(provider.clone());
        tracing_opentelemetry::layer().with_tracer(provider.tracer("kubedav"))
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(otel)
        .with(scope::RequestIds)
        .with(fmt)
        .try_init()
        .map_err(|e| format!("cannot install logging: {e}"))?;
    let _ = dispatch.set(tracing::dispatcher::get_default(|current| current.downgrade()));
    Ok(TelemetryGuard { provider })
}

/// Whether the line formatter wants what `metadata` describes: events, and the hints
/// `tracing::enabled!` asks about them, never spans. Refusing the hints too would lose
/// the next event: a per-layer filter that answers no to an `enabled!` hint keeps that
/// no for the thread's next event (tokio-rs/tracing#2519), which is how every audit
/// line, written right after its `enabled!` check, went missing.
fn formats_line(metadata: &tracing::Metadata<'_>) -> bool {
    !metadata.is_span()
}

/// A tracer provider exporting over OTLP (gRPC or HTTP/protobuf, [`otlp_protocol`])
/// through a bounded, counted queue.
fn exporting_provider(service: &str) -> Result<SdkTracerProvider, String> {
    let variable = |name: &str| std::env::var(name).ok();
    let protocol = otlp_protocol(
        variable("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").as_deref(),
        variable("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref(),
    )?;
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let exporter = match protocol {
        OtlpProtocol::Grpc => builder.with_tonic().build(),
        // hyper's client (already kubedav's), plain HTTP as the gRPC exporter is.
        OtlpProtocol::HttpProtobuf => builder
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build(),
    }
    .map_err(|e| format!("cannot build the OTLP exporter (check OTEL_EXPORTER_OTLP_*): {e}"))?;
    export::register_metrics();
    let limit = export::queue_length();
    let processor = export::bounded(exporter, limit, |exporter| {
        use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
        BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio)
            .with_batch_config(
                opentelemetry_sdk::trace::BatchConfigBuilder::default()
                    .with_max_queue_size(limit + export::CONTROL_ROOM)
                    .build(),
            )
            .build()
    });
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(format!("kubedav-{service}"));
    }
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource.build())
        .build())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;

    /// A writer keeping what the formatter wrote.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Kept {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// An event written right after asking `enabled!` about it reaches the log.
    #[test]
    fn an_event_after_its_enabled_check_is_written() {
        let kept = Kept::default();
        let writer = kept.clone();
        let lines = tracing_subscriber::fmt::layer()
            .with_writer(move || writer.clone())
            .with_filter(tracing_subscriber::filter::filter_fn(super::formats_line));
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new("info"))
            .with(lines);
        tracing::subscriber::with_default(subscriber, || {
            if tracing::enabled!(target: "kubedav::audit", tracing::Level::INFO) {
                tracing::info!(target: "kubedav::audit", "the line after the check");
            }
        });
        let written = String::from_utf8(kept.0.lock().unwrap().clone()).unwrap();
        assert!(written.contains("the line after the check"), "{written:?}");
    }
}
