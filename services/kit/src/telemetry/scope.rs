//! Which spans a log line was written in, found when a line is written rather than
//! prepared for every span.
//!
//! The log formatters ([`super::text`], [`super::json`]) see events only: a span that
//! logs nothing (almost every request's) is never formatted. A line written inside spans
//! looks them up in the registry through the installed dispatcher, and takes the request
//! id from the nearest span that carries one, which [`RequestIds`] noted when the span
//! began (the gateway's request span, or a service's gRPC span, which gets it from the
//! caller), or else from the task's [`REQUEST_ID`]: with text logs and no trace export
//! those spans are often not made at all ([`super::span_wanted`]).

use std::fmt;
use std::sync::{Arc, OnceLock};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::{LookupSpan, Registry, SpanRef};

/// The dispatcher the formatters look spans up through; set once logging is installed.
/// (A formatter runs inside the dispatcher, where `tracing::dispatcher::get_default`
/// answers with no subscriber, so it keeps its own handle.)
pub type DispatchCell = Arc<OnceLock<tracing::dispatcher::WeakDispatch>>;

tokio::task_local! {
    /// The id of the HTTP request being served (its `x-request-id`). The gateway sets it
    /// around each request, and a service around each call it serves; gRPC calls made
    /// inside carry it on, and log lines written inside name it.
    pub static REQUEST_ID: Arc<str>;
}

/// The request id a span carries.
struct RequestId(Arc<str>);

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

/// Finds the `request_id` field: best given as a `&str`, which is copied once.
struct FindRequestId(Option<Arc<str>>);

impl Visit for FindRequestId {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "request_id" {
            self.0 = Some(Arc::from(value));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "request_id" {
            self.0 = Some(Arc::from(format!("{value:?}")));
        }
    }
}

/// What a log line says about the spans it was written in.
pub struct LineScope<'a> {
    /// The innermost span first.
    pub spans: Vec<SpanRef<'a, Registry>>,
    /// The request id of the nearest span that has one, else the task's
    /// [`REQUEST_ID`].
    pub request_id: Option<Arc<str>>,
    /// The dispatcher, for the OpenTelemetry context of a span.
    pub dispatch: &'a tracing::Dispatch,
}

/// Calls `f` with the spans `event` was written in (its explicit parent, or the
/// current span of this thread), innermost first; with `None` when logging is not
/// installed through `cell` (tests that format lines alone).
pub fn with_event_scope<R>(
    cell: &DispatchCell,
    event: &Event<'_>,
    f: impl FnOnce(Option<&LineScope<'_>>) -> R,
) -> R {
    let Some(dispatch) = cell.get().and_then(|weak| weak.upgrade()) else {
        return f(None);
    };
    let Some(registry) = dispatch.downcast_ref::<Registry>() else {
        return f(None);
    };
    let parent = if event.is_contextual() {
        dispatch.current_span().id().cloned()
    } else {
        event.parent().cloned()
    };
    let spans: Vec<_> = parent
        .and_then(|id| registry.span(&id))
        .map(|leaf| leaf.scope().collect())
        .unwrap_or_default();
    let request_id = spans
        .iter()
        .find_map(|span| span.extensions().get::<RequestId>().map(|id| id.0.clone()))
        .or_else(|| REQUEST_ID.try_with(Arc::clone).ok());
    f(Some(&LineScope {
        spans,
        request_id,
        dispatch: &dispatch,
    }))
}
