//! JSON log lines that say which request and which trace they belong to.
//!
//! Each line is one object: `timestamp`, `level`, `target`, `message` and the event's
//! own fields, then `span` (the innermost span's name), `request_id` (from the nearest
//! span that has one: the gateway's request span, or a service's gRPC span, which gets
//! it from the caller) and `trace_id` / `span_id` (W3C, hex) of the innermost span.

use opentelemetry::trace::TraceContextExt;
use serde_json::{Map, Value};
use std::fmt;
use std::sync::{Arc, OnceLock};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The dispatcher the formatter asks for trace ids; set once logging is installed.
pub type DispatchCell = Arc<OnceLock<tracing::dispatcher::WeakDispatch>>;

/// The request id a span carries.
struct RequestId(String);

/// A layer that remembers each span's `request_id` field for the log lines inside it.
pub struct RequestIds;

impl<S: Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for RequestIds {
    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut found = FindRequestId(None);
        attributes.record(&mut found);
        if let (Some(value), Some(span)) = (found.0, ctx.span(id))
            && !value.is_empty()
        {
            span.extensions_mut().insert(RequestId(value));
        }
    }
}

struct FindRequestId(Option<String>);

impl Visit for FindRequestId {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "request_id" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "request_id" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

/// The event formatter.
pub struct JsonLines {
    dispatch: DispatchCell,
}

impl JsonLines {
    /// A formatter that reads trace ids through the dispatcher put into `dispatch`.
    pub fn new(dispatch: DispatchCell) -> Self {
        Self { dispatch }
    }
}

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), format!("{value:?}").into());
    }
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        let mut timestamp = String::new();
        tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        line.insert("timestamp".into(), timestamp.into());
        let metadata = event.metadata();
        line.insert("level".into(), metadata.level().as_str().into());
        line.insert("target".into(), metadata.target().into());
        event.record(&mut Fields(&mut line));
        if let Some(leaf) = ctx.event_scope().and_then(|mut scope| scope.next()) {
            line.insert("span".into(), leaf.name().into());
            if let Some(dispatch) = self.dispatch.get().and_then(|weak| weak.upgrade())
                && let Some(context) = tracing_opentelemetry::get_otel_context(&leaf.id(), &dispatch)
            {
                let span = context.span();
                let ids = span.span_context();
                if ids.is_valid() {
                    line.insert("trace_id".into(), ids.trace_id().to_string().into());
                    line.insert("span_id".into(), ids.span_id().to_string().into());
                }
            }
            let request_id = leaf
                .scope()
                .find_map(|span| span.extensions().get::<RequestId>().map(|id| id.0.clone()));
            if let Some(id) = request_id {
                line.insert("request_id".into(), id.into());
            }
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}
