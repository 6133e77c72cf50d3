//! Text log lines: the time, the level, the names of the spans the line was written in
//! (outermost first), the target, the event's fields, and the request id when the line
//! belongs to a request:
//!
//! ```text
//! 2026-11-23T07:16:18.680913Z  WARN http.request:fileio.write: kubedav_fileio: upload aborted path=a/b request_id=4f2c...
//! ```
//!
//! Spans are named, not formatted with their fields: formatting every span's fields when
//! it begins (as `tracing-subscriber`'s default format does) cost 5 to 7 % of the CPU
//! of a small request, for lines that are almost never written.

use super::scope::{DispatchCell, with_event_scope};
use std::fmt;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The event formatter.
pub struct TextLines {
    dispatch: DispatchCell,
}

impl TextLines {
    /// A formatter that looks spans up through the dispatcher put into `dispatch`.
    pub fn new(dispatch: DispatchCell) -> Self {
        Self { dispatch }
    }
}

/// The ANSI colour of a level, as `tracing-subscriber` colours it.
fn colour(level: Level) -> &'static str {
    match level {
        Level::TRACE => "\x1b[35m",
        Level::DEBUG => "\x1b[34m",
        Level::INFO => "\x1b[32m",
        Level::WARN => "\x1b[33m",
        Level::ERROR => "\x1b[31m",
    }
}

impl<S, N> FormatEvent<S, N> for TextLines
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
        let ansi = writer.has_ansi_escapes();
        let metadata = event.metadata();
        if ansi {
            writer.write_str("\x1b[2m")?;
        }
        SystemTime.format_time(&mut writer)?;
        let level = *metadata.level();
        if ansi {
            write!(writer, "\x1b[0m {}{level:>5}\x1b[0m ", colour(level))?;
        } else {
            write!(writer, " {level:>5} ")?;
        }
        let request_id = with_event_scope(&self.dispatch, event, |scope| {
            let scope = scope?;
            for span in scope.spans.iter().rev() {
                write!(writer, "{}:", span.name()).ok()?;
            }
            if !scope.spans.is_empty() {
                writer.write_char(' ').ok()?;
            }
            scope.request_id.clone()
        });
        write!(writer, "{}: ", metadata.target())?;
        ctx.format_fields(writer.by_ref(), event)?;
        if let Some(id) = request_id {
            write!(writer, " request_id={id}")?;
        }
        writeln!(writer)
    }
}
