//! The per-server upstream counters of a configuration's groups as a
//! Prometheus text exposition (`/metrics`): one series per server of each
//! group, summed over the workers' blocks (`upstream_counters.rs`, which the
//! workers write and the status page reads too).

use std::fmt::Write as _;
use std::sync::Arc;

use crate::observe::exposition::{family_head, latency_histogram};
use crate::observe::upstream_counters::{server_down, ServerTotals, UpstreamFailure};
use crate::upstream::group::UpstreamGroup;
use crate::upstream::resolution::ResolutionResult;

/// Status classes, the `class` label.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// A label value as the exposition format wants it.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Appends the per-server metrics of `groups` (the running configuration's,
/// served by `workers` workers) to a Prometheus text exposition.
pub fn render_prometheus(out: &mut String, groups: &[Arc<UpstreamGroup>], workers: usize) {
    struct Row {
        labels: String,
        up: bool,
        totals: ServerTotals,
        checks_passed: u64,
        checks_failed: u64,
        listed: bool,
    }
    let mut rows = Vec::new();
    for g in groups {
        let totals = g.counters.totals(g.servers.len());
        for (i, (s, t)) in g.servers.iter().zip(totals).enumerate() {
            let (checks_passed, checks_failed) = s.checks.counts();
            // A server listed twice in a group gets `#2` on its second
            // entry: two series with one label set would spoil the scrape.
            let nth = g
                .servers
                .iter()
                .take(i)
                .filter(|o| o.authority == s.authority)
                .count();
            let server = match nth {
                0 => label(&s.authority),
                n => format!("{}#{}", label(&s.authority), n + 1),
            };
            rows.push(Row {
                labels: format!("group=\"{}\",server=\"{server}\"", label(&g.name)),
                up: !server_down(s.actively_up(), &t, workers),
                totals: t,
                checks_passed,
                checks_failed,
                listed: s.listed(),
            });
        }
    }
    /// The families with one value per server row: name, type, help, value.
    type RowFamily = (&'static str, &'static str, &'static str, fn(&Row) -> u64);
    const ROW_FAMILIES: [RowFamily; 4] = [
        (
            "pier_upstream_server_up",
            "gauge",
            "0 while the server fails its active health check or every worker keeps it out after max_fails failures, else 1.",
            |r| u64::from(r.up),
        ),
        (
            "pier_upstream_server_marked_down_workers",
            "gauge",
            "Workers keeping the server out now after max_fails failures (passive health, per worker).",
            |r| r.totals.marked_down_workers,
        ),
        (
            "pier_upstream_server_in_flight",
            "gauge",
            "Requests in flight on the server now.",
            |r| r.totals.in_flight,
        ),
        (
            "pier_upstream_server_requests_total",
            "counter",
            "Attempts sent to the server; a retried request counts on every server tried.",
            |r| r.totals.requests,
        ),
    ];
    for (name, kind, help, value) in ROW_FAMILIES {
        family_head(out, name, kind, help);
        for r in &rows {
            let _ = writeln!(out, "{name}{{{}}} {}", r.labels, value(r));
        }
    }
    let name = "pier_upstream_server_responses_total";
    family_head(
        out,
        name,
        "counter",
        "Final response heads from the server, by status class.",
    );
    for r in &rows {
        for (class, v) in CLASSES.iter().zip(r.totals.responses) {
            let _ = writeln!(out, "{name}{{{},class=\"{class}\"}} {v}", r.labels);
        }
    }
    let name = "pier_upstream_server_errors_total";
    family_head(
        out,
        name,
        "counter",
        "Failed attempts on the server, by cause: connect (refused, unreachable or TLS handshake failed), connect_timeout, reset (closed before the response head), timeout, bad_response.",
    );
    for r in &rows {
        for (cause, v) in UpstreamFailure::ALL.iter().zip(r.totals.failures) {
            let _ = writeln!(
                out,
                "{name}{{{},cause=\"{}\"}} {v}",
                r.labels,
                cause.label()
            );
        }
    }
    let name = "pier_upstream_server_latency_seconds";
    family_head(
        out,
        name,
        "histogram",
        "Time from the start of an attempt on the server (connecting included) to its response head.",
    );
    for r in &rows {
        let t = &r.totals;
        latency_histogram(out, name, &r.labels, &t.latency, t.latency_sum_us);
    }
    let name = "pier_upstream_server_in_group";
    family_head(
        out,
        name,
        "gauge",
        "1 while the last resolution of its name lists the server (always, for an address as configured); 0 while it drains or after.",
    );
    for r in &rows {
        let _ = writeln!(out, "{name}{{{}}} {}", r.labels, u64::from(r.listed));
    }
    let name = "pier_upstream_server_health_checks_total";
    family_head(
        out,
        name,
        "counter",
        "Active health checks of the server, by result.",
    );
    for r in &rows {
        let _ = writeln!(
            out,
            "{name}{{{},result=\"passed\"}} {}",
            r.labels, r.checks_passed
        );
        let _ = writeln!(
            out,
            "{name}{{{},result=\"failed\"}} {}",
            r.labels, r.checks_failed
        );
    }
    render_resolutions(out, groups);
}

/// The groups whose servers come from names or SRV records: how their
/// resolutions ended, and how old the stalest answer is.
fn render_resolutions(out: &mut String, groups: &[Arc<UpstreamGroup>]) {
    let resolving: Vec<&Arc<UpstreamGroup>> = groups
        .iter()
        .filter(|g| !g.discovery.entries.is_empty())
        .collect();
    let name = "pier_upstream_resolutions_total";
    family_head(
        out,
        name,
        "counter",
        "Resolutions of the group's names and SRV records, by result: ok, empty (no records; the last servers are kept), failed (no answer; the last servers are kept).",
    );
    for g in &resolving {
        for result in ResolutionResult::ALL {
            let _ = writeln!(
                out,
                "{name}{{group=\"{}\",result=\"{}\"}} {}",
                label(&g.name),
                result.label(),
                g.resolutions.count(result)
            );
        }
    }
    let name = "pier_upstream_resolution_age_seconds";
    family_head(
        out,
        name,
        "gauge",
        "Seconds since the group's stalest name last resolved (absent until every name resolved once).",
    );
    for g in &resolving {
        if let Some(age) = g.resolutions.oldest_age() {
            let _ = writeln!(out, "{name}{{group=\"{}\"}} {age}", label(&g.name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_listed_twice_gets_distinct_series() {
        let config = crate::config::build::load_str(
            "t.toml",
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[upstream]]\nname = \"a\\\"b\"\nservers = [{ address = \"127.0.0.1:9\" }, { address = \"127.0.0.1:9\" }]\n[[route]]\nhandler = \"proxy\"\nupstream = \"a\\\"b\"\n",
        );
        // Group names are letters, digits and `-_.`: the quote is refused.
        assert!(config.is_err());
        let config = crate::config::build::load_str(
            "t.toml",
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[upstream]]\nname = \"a\"\nservers = [{ address = \"127.0.0.1:9\" }, { address = \"127.0.0.1:9\" }]\n[[route]]\nhandler = \"proxy\"\nupstream = \"a\"\n",
        )
        .unwrap();
        let block = config.upstreams[0].counters.register(2);
        block[1].started();
        let mut out = String::new();
        render_prometheus(&mut out, &config.upstreams, 1);
        let r = "pier_upstream_server_requests_total";
        assert!(
            out.contains(&format!("{r}{{group=\"a\",server=\"127.0.0.1:9\"}} 0\n")),
            "{out}"
        );
        assert!(out.contains(&format!("{r}{{group=\"a\",server=\"127.0.0.1:9#2\"}} 1\n")));
        assert!(out.contains("pier_upstream_server_up{group=\"a\",server=\"127.0.0.1:9\"} 1\n"));
        assert!(out
            .contains("pier_upstream_server_in_flight{group=\"a\",server=\"127.0.0.1:9#2\"} 1\n"));
    }
}
