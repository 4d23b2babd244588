//! Each upstream server's rates over the last interval (requests and errors
//! per second, p50 and p99 latency), sampled by the status thread along with
//! the workers' history so the page shows what a server does now, not an
//! average since the configuration was loaded.
//!
//! Groups are told apart by configuration generation and position, so a
//! reload's fresh groups never take the replaced ones' readings as their own.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::history::quantile_ms;
use super::ConfigView;
use crate::handler::proxy::upstream::UpstreamGroup;
use crate::observe::metrics::LATENCY_BOUNDS;
use crate::observe::upstream_stats::ServerTotals;

/// A group: its configuration generation and its index in that configuration.
pub type GroupKey = (u64, usize);

/// One server's figures over the last interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerRates {
    /// Attempts sent per second.
    pub requests_per_s: f64,
    /// Failed attempts per second.
    pub errors_per_s: f64,
    /// Median time to the response head, milliseconds; none without answers.
    pub p50_ms: Option<f64>,
    /// 99th percentile time to the response head, milliseconds.
    pub p99_ms: Option<f64>,
}

/// Every group's servers' rates, by group.
pub type UpstreamRecent = HashMap<GroupKey, Vec<ServerRates>>;

/// The single writer: the previous reading of every group.
#[derive(Debug, Default)]
pub struct UpstreamSampler {
    last: Option<(Instant, HashMap<GroupKey, Vec<ServerTotals>>)>,
}

/// The groups a view shows: the running ones, then those still draining.
fn groups(view: &ConfigView) -> Vec<(GroupKey, Arc<UpstreamGroup>)> {
    let mut out: Vec<(GroupKey, Arc<UpstreamGroup>)> = view
        .current
        .upstreams
        .iter()
        .map(|g| ((view.generation, g.index), g.clone()))
        .collect();
    for (generation, old) in &view.retired {
        if let Some(old) = old.upgrade() {
            out.extend(
                old.upstreams
                    .iter()
                    .map(|g| ((*generation, g.index), g.clone())),
            );
        }
    }
    out
}

impl UpstreamSampler {
    /// Reads every shown group's counters at `now`; the rates since the last
    /// reading (empty at the first).
    pub fn sample(&mut self, view: &ConfigView, now: Instant) -> UpstreamRecent {
        let readings: HashMap<GroupKey, Vec<ServerTotals>> = groups(view)
            .into_iter()
            .map(|(key, g)| (key, g.counters.totals(g.servers.len())))
            .collect();
        let mut out = UpstreamRecent::new();
        if let Some((then, before)) = &self.last {
            let secs = now.duration_since(*then).as_secs_f64();
            if secs > 0.0 {
                for (key, servers) in &readings {
                    let Some(earlier) = before.get(key) else {
                        continue;
                    };
                    let rates = servers
                        .iter()
                        .zip(earlier)
                        .map(|(n, e)| rates(n, e, secs))
                        .collect();
                    out.insert(*key, rates);
                }
            }
        }
        self.last = Some((now, readings));
        out
    }
}

fn rates(now: &ServerTotals, earlier: &ServerTotals, secs: f64) -> ServerRates {
    let mut latency = now.latency;
    for (n, e) in latency.iter_mut().zip(earlier.latency) {
        *n = n.wrapping_sub(e);
    }
    ServerRates {
        requests_per_s: now.requests.wrapping_sub(earlier.requests) as f64 / secs,
        errors_per_s: now.failures_total().wrapping_sub(earlier.failures_total()) as f64 / secs,
        p50_ms: quantile_ms(&latency, &LATENCY_BOUNDS, 0.5),
        p99_ms: quantile_ms(&latency, &LATENCY_BOUNDS, 0.99),
    }
}
