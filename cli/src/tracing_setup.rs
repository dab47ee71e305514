//! The `tracing` subscriber of the `tcc` binary: messages of the libraries (tuning-cache warnings,
//! skipped records, an unreachable shared cache) go to stderr as `warning: ...` lines, like the
//! command's own messages, filtered by `TCC_LOG` (for example `TCC_LOG=debug` or
//! `TCC_LOG=tcc_autotune=info`); warnings and errors by default. Colours only on a terminal, and
//! never with `NO_COLOR` set.

use std::fmt;
use std::io::IsTerminal;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Environment variable with the log filter.
pub const LOG_ENV: &str = "TCC_LOG";

/// Installs the subscriber (once; a second call does nothing). An invalid filter falls back to
/// warnings, with a warning saying so.
pub fn install() {
    let (filter, bad) = match std::env::var(LOG_ENV) {
        Ok(text) if !text.trim().is_empty() => match EnvFilter::try_new(text.trim()) {
            Ok(f) => (f, None),
            Err(e) => (EnvFilter::new("warn"), Some(format!("ignoring {LOG_ENV}=`{text}`: {e}"))),
        },
        _ => (EnvFilter::new("warn"), None),
    };
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let installed = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .event_format(Plain)
        .try_init()
        .is_ok();
    if let (true, Some(message)) = (installed, bad) {
        tracing::warn!("{message}");
    }
}

/// `warning: message key=value` (the level in words, then the fields).
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        write!(writer, "{level}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
