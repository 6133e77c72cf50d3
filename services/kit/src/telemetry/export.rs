//! Span export that never holds up a request.
//!
//! Spans go through OpenTelemetry's batch processor to the OTLP exporter. Ending a span
//! only hands it to a bounded queue: when the queue is full (the collector is slow or
//! down), the span is dropped at once and counted. The queue's length is the standard
//! `OTEL_BSP_MAX_QUEUE_SIZE` (default 2048).
//!
//! Metrics: `kubedav_otel_spans_exported_total`, and `kubedav_otel_spans_dropped_total`
//! by `reason`: `queue_full` (dropped on ending) or `export_failed` (the collector
//! refused or did not answer within `OTEL_EXPORTER_OTLP_TIMEOUT`).

use kubedav_metrics::{Counter, CounterFamily};
use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

static EXPORTED: LazyLock<Counter> = LazyLock::new(|| {
    kubedav_metrics::counter(
        "kubedav_otel_spans_exported_total",
        "Spans the OTLP collector accepted.",
    )
});
static DROPPED: LazyLock<CounterFamily> = LazyLock::new(|| {
    CounterFamily::new(
        "kubedav_otel_spans_dropped_total",
        "Spans dropped instead of exported, by reason (queue_full, export_failed).",
        &["reason"],
    )
});

/// Room the batch processor keeps beyond [`queue_length`] for its own control messages,
/// so that it never drops a span itself: every drop happens, counted, in [`Bounded`].
pub const CONTROL_ROOM: usize = 64;

/// The queue's length: `OTEL_BSP_MAX_QUEUE_SIZE`, or OpenTelemetry's default.
pub fn queue_length() -> usize {
    std::env::var(opentelemetry_sdk::trace::OTEL_BSP_MAX_QUEUE_SIZE)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(opentelemetry_sdk::trace::OTEL_BSP_MAX_QUEUE_SIZE_DEFAULT)
}

/// Starts the export metrics at zero.
pub fn register_metrics() {
    EXPORTED.get();
    for reason in ["queue_full", "export_failed"] {
        DROPPED.with_label_values(&[reason]);
    }
}

/// The spans ended and not yet handed to the exporter.
#[derive(Debug)]
struct Backlog {
    queued: AtomicUsize,
    limit: usize,
}

/// A span processor (the batch processor) behind a counted, bounded queue.
#[derive(Debug)]
pub struct Bounded<P> {
    inner: P,
    backlog: Arc<Backlog>,
}

/// An exporter that counts what it exports and what it fails to.
#[derive(Debug)]
pub struct Counted<E> {
    inner: E,
    backlog: Arc<Backlog>,
}

/// Wraps `exporter` (give the result to the batch processor) and the processor made from
/// it (`processor`, whose own queue must hold at least `limit` + [`CONTROL_ROOM`]
/// messages), with `limit` spans of backlog.
pub fn bounded<E, P>(exporter: E, limit: usize, processor: impl FnOnce(Counted<E>) -> P) -> Bounded<P> {
    let backlog = Arc::new(Backlog {
        queued: AtomicUsize::new(0),
        limit,
    });
    let counted = Counted {
        inner: exporter,
        backlog: backlog.clone(),
    };
    Bounded {
        inner: processor(counted),
        backlog,
    }
}

impl<P: SpanProcessor> SpanProcessor for Bounded<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.backlog.queued.fetch_add(1, Ordering::AcqRel) >= self.backlog.limit {
            self.backlog.queued.fetch_sub(1, Ordering::AcqRel);
            DROPPED.with_label_values(&["queue_full"]).inc();
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        self.backlog.queued.fetch_sub(spans, Ordering::AcqRel);
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => {
                EXPORTED.inc_by(spans as u64);
            }
            Err(_) => {
                DROPPED.with_label_values(&["export_failed"]).inc_by(spans as u64);
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
