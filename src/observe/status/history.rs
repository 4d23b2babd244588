//! The last minutes of each worker's counters, sampled once a second off the
//! request path, so the status page can show rates and small charts.
//!
//! A [`Sampler`] (owned by the status thread, the only writer) reads every
//! worker's counters, turns the differences into rates, and publishes an
//! immutable [`Recent`] through an `ArcSwap`; a status request loads that `Arc`
//! without a lock, and the workers never see any of it.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::quantile::quantile_ms;
use crate::observe::latency::LATENCY_BOUNDS;
use crate::observe::metrics::{Registry, WorkerStats};

/// Request-duration buckets of one worker (see [`WorkerStats::duration_buckets`]).
type Buckets = [u64; LATENCY_BOUNDS.len() + 1];

/// Samples of the whole process kept: three minutes at one a second.
pub const PROCESS_POINTS: usize = 180;
/// Samples kept per worker (one chart per worker row).
pub const WORKER_POINTS: usize = 60;

/// Rates of one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Connections accepted per second.
    pub accept_per_s: f64,
    /// Requests answered per second.
    pub requests_per_s: f64,
    /// Error answers per second (see [`WorkerStats::errors_total`]).
    pub errors_per_s: f64,
    /// Median request duration in the interval, in milliseconds (none
    /// without requests).
    pub p50_ms: Option<f64>,
    /// 99th percentile request duration in the interval, in milliseconds.
    pub p99_ms: Option<f64>,
}

/// One worker's recent state.
#[derive(Debug, Clone, Default)]
pub struct WorkerRecent {
    /// Rates over the last interval.
    pub now: Rates,
    /// Requests per second, oldest first, up to [`WORKER_POINTS`].
    pub requests_per_s: Vec<f64>,
}

/// The whole process's recent state and its charts, oldest first.
#[derive(Debug, Clone, Default)]
pub struct Recent {
    /// Seconds the last interval lasted (0 before the second sample).
    pub interval_s: f64,
    /// Rates over the last interval, all workers together.
    pub now: Rates,
    /// All workers together, one point per sample.
    pub charts: Charts,
    /// Per worker, by index.
    pub workers: Vec<WorkerRecent>,
    /// Per upstream server, by group (filled by [`super::StatusState::sample`]).
    pub upstreams: super::upstream_rates::UpstreamRecent,
}

/// The process's charts, oldest first, up to [`PROCESS_POINTS`]: kept by the
/// sampler, and served in `/status.json` with the rates to two decimals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Charts {
    /// Open connections at each sample.
    pub open: Vec<u64>,
    /// Connections accepted per second.
    pub accept_per_s: Vec<f64>,
    /// Requests answered per second.
    pub requests_per_s: Vec<f64>,
    /// Error answers per second.
    pub errors_per_s: Vec<f64>,
    /// 99th percentile request duration in milliseconds (none, `null`, in a
    /// second without requests).
    pub p99_ms: Vec<Option<f64>>,
}

/// Cumulative counters of one worker at one instant.
#[derive(Debug, Clone, Copy, Default)]
struct Reading {
    accepted: u64,
    requests: u64,
    errors: u64,
    durations: Buckets,
}

impl Reading {
    fn of(w: &WorkerStats) -> Reading {
        Reading {
            accepted: w.accepted.get(),
            requests: w.requests_total(),
            errors: w.errors_total(),
            durations: w.duration_buckets(),
        }
    }

    /// Request durations recorded since `earlier`, by bucket.
    fn durations_since(&self, earlier: &Reading) -> Buckets {
        let mut out = self.durations;
        for (o, e) in out.iter_mut().zip(&earlier.durations) {
            *o = o.wrapping_sub(*e);
        }
        out
    }

    /// Rates from `earlier` to `self` over `secs`.
    fn rates_since(&self, earlier: &Reading, secs: f64) -> Rates {
        let per_s = |now: u64, then: u64| now.wrapping_sub(then) as f64 / secs;
        let durations = self.durations_since(earlier);
        Rates {
            accept_per_s: per_s(self.accepted, earlier.accepted),
            requests_per_s: per_s(self.requests, earlier.requests),
            errors_per_s: per_s(self.errors, earlier.errors),
            p50_ms: quantile_ms(&durations, &LATENCY_BOUNDS, 0.5),
            p99_ms: quantile_ms(&durations, &LATENCY_BOUNDS, 0.99),
        }
    }
}

/// The single writer of the history: keeps the previous reading and the rings.
#[derive(Debug, Default)]
pub struct Sampler {
    last: Option<(Instant, Vec<Reading>)>,
    charts: Charts,
    per_worker: Vec<Vec<f64>>,
    /// The upstream servers' previous readings.
    pub upstreams: super::upstream_rates::UpstreamSampler,
}

/// Appends `v` to a chart of at most `cap` points, dropping the oldest (a few
/// hundred points once a second: shifting them costs nothing worth a ring).
fn push<T>(chart: &mut Vec<T>, cap: usize, v: T) {
    if chart.len() == cap {
        chart.remove(0);
    }
    chart.push(v);
}

impl Sampler {
    /// Reads every worker's counters at `now` and returns what the page shows.
    pub fn sample(&mut self, registry: &Registry, now: Instant) -> Recent {
        let readings: Vec<Reading> = registry.workers.iter().map(|w| Reading::of(w)).collect();
        let open = registry
            .workers
            .iter()
            .map(|w| w.open.get())
            .fold(0, u64::wrapping_add);
        self.per_worker.resize_with(readings.len(), Vec::new);
        let mut recent = Recent {
            workers: vec![WorkerRecent::default(); readings.len()],
            ..Recent::default()
        };
        if let Some((then, before)) = &self.last {
            let secs = now.duration_since(*then).as_secs_f64();
            if secs > 0.0 {
                recent.interval_s = secs;
                let mut all: Buckets = [0; LATENCY_BOUNDS.len() + 1];
                for (i, (r, b)) in readings.iter().zip(before).enumerate() {
                    for (a, d) in all.iter_mut().zip(r.durations_since(b)) {
                        *a = a.wrapping_add(d);
                    }
                    let rates = r.rates_since(b, secs);
                    recent.workers[i].now = rates;
                    recent.now.accept_per_s += rates.accept_per_s;
                    recent.now.requests_per_s += rates.requests_per_s;
                    recent.now.errors_per_s += rates.errors_per_s;
                    push(&mut self.per_worker[i], WORKER_POINTS, rates.requests_per_s);
                }
                recent.now.p50_ms = quantile_ms(&all, &LATENCY_BOUNDS, 0.5);
                recent.now.p99_ms = quantile_ms(&all, &LATENCY_BOUNDS, 0.99);
                let c = &mut self.charts;
                push(&mut c.accept_per_s, PROCESS_POINTS, recent.now.accept_per_s);
                push(
                    &mut c.requests_per_s,
                    PROCESS_POINTS,
                    recent.now.requests_per_s,
                );
                push(&mut c.errors_per_s, PROCESS_POINTS, recent.now.errors_per_s);
                push(&mut c.p99_ms, PROCESS_POINTS, recent.now.p99_ms);
            }
        }
        push(&mut self.charts.open, PROCESS_POINTS, open);
        self.last = Some((now, readings));
        recent.charts = self.charts.clone();
        for (w, chart) in recent.workers.iter_mut().zip(&self.per_worker) {
            w.requests_per_s = chart.clone();
        }
        recent
    }
}

/// Publishes [`Recent`] for readers on other threads.
pub type Published = arc_swap::ArcSwap<Recent>;

/// An empty history, before the first sample.
pub fn empty() -> Arc<Recent> {
    Arc::new(Recent::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::metrics::HandlerKind;
    use std::time::Duration;

    #[test]
    fn rates_are_differences_over_the_interval_and_errors_count_5xx_and_refusals() {
        let r = Registry::new(2, vec![]);
        let mut s = Sampler::default();
        let t0 = Instant::now();
        let first = s.sample(&r, t0);
        assert_eq!(first.interval_s, 0.0);
        assert!(first.charts.requests_per_s.is_empty());
        for _ in 0..10 {
            r.workers[0].request(HandlerKind::Static, 200);
        }
        r.workers[1].request(HandlerKind::Proxy, 502);
        r.workers[1].request(HandlerKind::Error, 400);
        r.workers[1].request(HandlerKind::NoRoute, 404);
        r.workers[1].accepted.add(4);
        let second = s.sample(&r, t0 + Duration::from_secs(2));
        assert_eq!(second.interval_s, 2.0);
        assert_eq!(second.workers[0].now.requests_per_s, 5.0);
        assert_eq!(second.workers[1].now.requests_per_s, 1.5);
        assert_eq!(second.workers[1].now.errors_per_s, 1.0);
        assert_eq!(second.now.requests_per_s, 6.5);
        assert_eq!(second.now.accept_per_s, 2.0);
        assert_eq!(second.charts.requests_per_s, [6.5]);
        assert_eq!(second.workers[0].now.p50_ms, None, "no durations recorded");
        for ms in [1, 2, 2, 2, 40] {
            r.workers[0].request_duration(0, 200, Duration::from_millis(ms));
        }
        let third = s.sample(&r, t0 + Duration::from_secs(3));
        // Three of five in (1 ms, 2.5 ms]: the median is in that bucket; the
        // slowest sets p99 in (25 ms, 50 ms].
        let p50 = third.now.p50_ms.unwrap();
        assert!(p50 > 1.0 && p50 <= 2.5, "{p50}");
        let p99 = third.workers[0].now.p99_ms.unwrap();
        assert!(p99 > 25.0 && p99 <= 50.0, "{p99}");
        assert_eq!(third.workers[1].now.p99_ms, None);
        assert_eq!(second.workers[1].requests_per_s, [1.5]);
    }

    #[test]
    fn charts_keep_only_the_last_points() {
        let r = Registry::new(1, vec![]);
        let mut s = Sampler::default();
        let t0 = Instant::now();
        let mut last = Recent::default();
        for i in 0..(PROCESS_POINTS as u64 + 5) {
            r.workers[0].request(HandlerKind::Respond, 200);
            last = s.sample(&r, t0 + Duration::from_secs(i));
        }
        assert_eq!(last.charts.requests_per_s.len(), PROCESS_POINTS);
        assert_eq!(last.charts.open.len(), PROCESS_POINTS);
        assert_eq!(last.workers[0].requests_per_s.len(), WORKER_POINTS);
        assert!(last.charts.requests_per_s.iter().all(|&v| v == 1.0));
    }
}
