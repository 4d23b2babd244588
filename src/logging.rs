//! Diagnostic logs through `tracing` to stderr, as text or JSON lines.

use std::io::IsTerminal;

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
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    let _ = match format {
        StderrLogFormat::Text => builder.try_init(),
        StderrLogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
