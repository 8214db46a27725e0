//! Diagnostics for the CLI: `tracing` events to standard error, filtered by `-q`/`-v`/`-vv`
//! or `RUST_LOG` (which wins when set, with `tracing-subscriber`'s `EnvFilter` syntax).
//!
//! At the default verbosity the driver's notes and warnings read as before (`note: ...`,
//! `warning: ...`, no timestamps); with `-v` every line carries its time, level and module.

use std::fmt;
use std::io::Write;
use std::sync::Mutex;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The filter for a verbosity: -1 (`-q`: errors only), 0 (notes and warnings of
/// nums-cloud, warnings of the crates under it), 1 (`-v`: nums-cloud's debug events),
/// 2 or more (`-vv`: nums-cloud's trace events, the other crates' debug).
pub(crate) fn filter_for(verbosity: i8) -> &'static str {
    match verbosity {
        i8::MIN..=-1 => "error",
        // aws_config warns of every credential source it tried (instance metadata, ...)
        // before the store's own error says the one thing a user needs.
        0 => "warn,aws_config=error,nums_cloud=info,nums_function=info,nums_layout=info",
        1 => "warn,nums_cloud=debug,nums_function=debug,nums_layout=debug",
        _ => "debug,nums_cloud=trace,nums_function=trace,nums_layout=trace",
    }
}

/// `note: ...` lines, as a compiler prints them, for people rather than log files.
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let label = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "note",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        write!(w, "{label}: ")?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

/// The progress bar on screen, if any: lines logged while it shows go above it.
static BAR: Mutex<Option<indicatif::ProgressBar>> = Mutex::new(None);

/// Prints what is logged from now on above `bar` while it shows (rather than over it).
pub(crate) fn above(bar: &indicatif::ProgressBar) {
    *BAR.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar.clone());
}

/// One event's text, written to standard error whole when dropped: through the bar's
/// `suspend` while a bar shows, so the bar is cleared, the line printed, the bar redrawn.
struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let bar = BAR.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let print = || {
            let _ = std::io::stderr().write_all(&self.0);
        };
        match bar {
            Some(b) if !b.is_hidden() && !b.is_finished() => b.suspend(print),
            _ => print(),
        }
    }
}

/// Sends `tracing` events to standard error. `RUST_LOG`, when set, replaces the filter
/// chosen by `verbosity` (see [`filter_for`]). Called once, by the CLI; a second call
/// (a library user's own subscriber already set) changes nothing.
pub(crate) fn init(verbosity: i8) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(s) if !s.trim().is_empty() => EnvFilter::try_new(&s).unwrap_or_else(|e| {
            // Not `eprintln!`, which panics when standard error is a closed pipe.
            let _ = writeln!(
                std::io::stderr(),
                "warning: RUST_LOG={s:?} is not a valid filter ({e}); using the default"
            );
            EnvFilter::new(filter_for(verbosity))
        }),
        _ => EnvFilter::new(filter_for(verbosity)),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| Line(Vec::new()))
        .with_ansi(false);
    let _ = if verbosity >= 1 {
        builder.try_init()
    } else {
        builder.event_format(Plain).try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every verbosity's filter parses, and louder means more.
    #[test]
    fn filters_parse_and_grow() {
        let lvl = |v: i8| {
            EnvFilter::try_new(filter_for(v))
                .unwrap()
                .max_level_hint()
                .unwrap()
        };
        assert_eq!(lvl(-1), tracing::level_filters::LevelFilter::ERROR);
        assert_eq!(lvl(0), tracing::level_filters::LevelFilter::INFO);
        assert_eq!(lvl(1), tracing::level_filters::LevelFilter::DEBUG);
        assert_eq!(lvl(2), tracing::level_filters::LevelFilter::TRACE);
    }
}
