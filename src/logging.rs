//! Diagnostic logs through `tracing` to stderr, as text or JSON lines. Every
//! line leaves without Rust's ` (os error N)` suffixes, whichever call site
//! put an IO error in it: log lines are sentences for operators.

use std::io::{IsTerminal, Write};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// Format of the diagnostic log on stderr (the access log has its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum StderrLogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber; `PIER_LOG` (or `RUST_LOG`) overrides the `info` level.
pub fn init(format: StderrLogFormat) {
    let filter = std::env::var("PIER_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(SentenceStderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    let _ = match format {
        StderrLogFormat::Text => builder.try_init(),
        StderrLogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Stderr for the formatter, which writes each event whole in one `write_all`:
/// the event's text goes out without ` (os error N)`.
struct SentenceStderr;

impl<'a> MakeWriter<'a> for SentenceStderr {
    type Writer = SentenceStderr;

    fn make_writer(&'a self) -> Self::Writer {
        SentenceStderr
    }
}

impl Write for SentenceStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let clean = crate::io_text::strip_os_error_numbers(&text);
        std::io::stderr().write_all(clean.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
