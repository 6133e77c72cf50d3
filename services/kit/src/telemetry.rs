//! Logs and traces.
//!
//! Logs go to stderr through `tracing-subscriber`, filtered by `RUST_LOG` (default
//! `info`), as text or, on request, JSON. Traces are exported over OTLP/gRPC when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; the
//! exporter and sampler read the standard `OTEL_*` variables. Export runs on a batch
//! processor with a bounded queue: spans are dropped, never waited for, when the collector
//! is slow or down. The W3C trace-context propagator is installed globally.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::io::IsTerminal;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

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
}

/// Installs logging and, when configured, trace export. `service` names the process in
/// traces unless `OTEL_SERVICE_NAME` says otherwise. Must run inside the tokio runtime.
pub fn init(service: &str, format: LogFormat) -> Result<TelemetryGuard, String> {
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Text => fmt.with_ansi(std::io::stderr().is_terminal()).boxed(),
        LogFormat::Json => fmt.json().flatten_event(true).with_current_span(false).boxed(),
    };
    let (provider, otel) = if otlp_configured() {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()
            .map_err(|e| format!("cannot build the OTLP exporter: {e}"))?;
        let processor =
            opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
                exporter,
                opentelemetry_sdk::runtime::Tokio,
            )
            .build();
        let mut resource = opentelemetry_sdk::Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(format!("kubedav-{service}"));
        }
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("kubedav");
        opentelemetry::global::set_tracer_provider(provider.clone());
        (
            Some(provider),
            Some(tracing_opentelemetry::layer().with_tracer(tracer)),
        )
    } else {
        (None, None)
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init()
        .map_err(|e| format!("cannot install logging: {e}"))?;
    Ok(TelemetryGuard { provider })
}
