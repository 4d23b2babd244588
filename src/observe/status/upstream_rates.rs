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

use serde::Serialize;

use super::quantile::quantile_ms;
use super::ConfigView;
use crate::observe::latency::LATENCY_BOUNDS;
use crate::observe::upstream_counters::ServerTotals;
use crate::upstream::group::UpstreamGroup;

/// A group: its configuration generation and its index in that configuration.
pub type GroupKey = (u64, usize);

/// One server's figures over the last interval; `/status.json` shows them
/// rounded, in each server's object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ServerRates {
    /// Attempts sent per second.
    pub requests_per_s: f64,
    /// Failed attempts per second.
    pub errors_per_s: f64,
    /// Median time to the response head, milliseconds; none without answers.
    #[serde(rename = "latency_p50_ms")]
    pub p50_ms: Option<f64>,
    /// 99th percentile time to the response head, milliseconds.
    #[serde(rename = "latency_p99_ms")]
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use serde_json::Value;

    use super::super::history::Sampler;
    use super::super::json;

    /// `n` attempts on `server`, each answered 200 after 3 ms.
    fn answer_in_3ms(server: &crate::observe::upstream_counters::ServerCounters, n: usize) {
        for _ in 0..n {
            server.started();
            server.answered(200, Duration::from_millis(3));
            server.finished();
        }
    }

    /// The status page's JSON of `state` now, parsed.
    fn snapshot_json(state: &super::super::StatusState) -> Value {
        serde_json::from_str(&json::render_json(&state.snapshot())).unwrap()
    }

    #[test]
    fn a_reloaded_group_takes_no_rate_from_the_group_it_replaced() {
        let state = json::tests::state_with_traffic();
        let old = state.snapshot();
        assert_eq!(old.upstreams[0].servers[1].recent.requests_per_s, 1.0);
        let config = crate::config::build::load_str(
            "next.toml",
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:1\" }, { address = \"127.0.0.1:2\" }]\n[[route]]\nhandler = \"proxy\"\nupstream = \"app\"\n",
        )
        .unwrap();
        let config = Arc::new(config);
        let fresh = config.upstreams[0].counters.register(2);
        // The sampler has read the replaced group (7 requests on server 1)
        // when the reload comes.
        let mut sampler = Sampler::default();
        let t0 = Instant::now();
        state.sample(&mut sampler, t0);
        state.reloaded(config, Vec::new());
        answer_in_3ms(&fresh[1], 3);
        // Its first reading has nothing of its own to compare with: no rate
        // yet (and none made from the replaced group's 7).
        state.sample(&mut sampler, t0 + Duration::from_secs(1));
        let v = snapshot_json(&state);
        let running = &v["upstreams"][0];
        assert_eq!(running["generation"], 2);
        assert_eq!(running["servers"][1]["requests"], 3, "fresh counters");
        assert_eq!(running["servers"][1]["requests_per_s"], 0.0);
        answer_in_3ms(&fresh[1], 2);
        state.sample(&mut sampler, t0 + Duration::from_secs(2));
        let v = snapshot_json(&state);
        let server = &v["upstreams"][0]["servers"][1];
        assert_eq!(server["requests_per_s"], 2.0);
        let p50 = server["latency_p50_ms"].as_f64().unwrap();
        assert!(p50 > 2.5 && p50 <= 5.0, "{p50}");
    }
}
