//! What Pier tells operators about itself: per-worker counters that only their own
//! worker writes, and the admin listener that merges them when scraped.

pub mod admin;
pub mod metrics;
