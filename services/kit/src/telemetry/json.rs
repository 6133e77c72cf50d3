//! JSON log lines that say which request and which trace they belong to.
//!
//! Each line is one object: `timestamp`, `level`, `target`, `message` and the event's
//! own fields, then `request_id` (from the nearest span that has one, or the task's, see
//! [`super::scope`]), and, when the line was written in a span, `span` (the innermost
//! span's name) and its `trace_id` / `span_id` (W3C, hex).

use super::scope::{DispatchCell, with_event_scope};
use opentelemetry::trace::TraceContextExt;
use serde_json::{Map, Value};
use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

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
        _ctx: &FmtContext<'_, S, N>,
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
        with_event_scope(&self.dispatch, event, |scope| {
            let Some(scope) = scope else { return };
            if let Some(id) = &scope.request_id {
                line.insert("request_id".into(), id.as_ref().into());
            }
            let Some(leaf) = scope.spans.first() else { return };
            line.insert("span".into(), leaf.name().into());
            if let Some(context) = tracing_opentelemetry::get_otel_context(&leaf.id(), scope.dispatch) {
                let span = context.span();
                let ids = span.span_context();
                if ids.is_valid() {
                    line.insert("trace_id".into(), ids.trace_id().to_string().into());
                    line.insert("span_id".into(), ids.span_id().to_string().into());
                }
            }
        });
        writeln!(writer, "{}", Value::Object(line))
    }
}
