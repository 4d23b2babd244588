//! The Prometheus text format (0.0.4) pieces every renderer of `/metrics`
//! writes: a family's `# HELP`/`# TYPE` head and a latency histogram. One place,
//! so the worker, upstream, process and ACME families cannot drift apart.

use std::fmt::Write as _;

use crate::observe::latency::LATENCY_BOUNDS;

/// Writes the `# HELP` and `# TYPE` lines that open the family `name`.
pub fn family_head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Writes one histogram series of the family `name`: cumulative `_bucket`
/// lines at each [`LATENCY_BOUNDS`] bound and `+Inf`, then `_sum` (seconds)
/// and `_count`. `buckets` holds the per-bucket counts (not cumulative), the
/// last one `+Inf`; `labels` is the series' label list without braces, or "".
pub fn latency_histogram(out: &mut String, name: &str, labels: &str, buckets: &[u64], sum_us: u64) {
    let before_le = if labels.is_empty() {
        String::new()
    } else {
        format!("{labels},")
    };
    let mut cumulative = 0u64;
    for (i, v) in buckets.iter().enumerate() {
        cumulative = cumulative.wrapping_add(*v);
        let le = LATENCY_BOUNDS
            .get(i)
            .map_or_else(|| "+Inf".to_string(), f64::to_string);
        let _ = writeln!(out, "{name}_bucket{{{before_le}le=\"{le}\"}} {cumulative}");
    }
    let braced = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let _ = writeln!(out, "{name}_sum{braced} {}", sum_us as f64 / 1e6);
    let _ = writeln!(out, "{name}_count{braced} {cumulative}");
}
