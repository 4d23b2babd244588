//! What Pier tells operators about itself: per-worker counters that only their own
//! worker writes, the admin listener that merges them when scraped, the status
//! page built from them, and the access log that workers hand lines to without
//! waiting.

pub mod access_log;
pub mod admin;
pub mod admin_answer;
pub mod admin_auth;
pub mod config_api;
pub mod counter;
pub mod exposition;
pub mod latency;
pub mod log_limit;
pub mod metrics;
pub mod process;
pub mod quic_stats;
pub mod runtime_changes;
pub mod status;
pub mod trace;
pub mod upstream_api;
pub mod upstream_counters;
pub mod upstream_exposition;
