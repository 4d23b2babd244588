//! Per-worker counters and their Prometheus rendering.
//!
//! Each worker owns one [`WorkerStats`] and is its only writer, so an update is a
//! relaxed load and store on a cache line no other core writes: no lock, no
//! contended read-modify-write on the request path. The admin thread reads every
//! worker's counters and sums them only when `/metrics` or `/status` is requested.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One monotonic counter (or gauge) with a single writer.
#[derive(Default, Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning worker calls this, so load-then-store loses nothing
    /// and avoids a locked instruction.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// Sets the value (for gauges such as open connections).
    #[inline]
    pub fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }

    /// Reads the value; any thread may.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Which part of Pier answered a request: the `handler` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerKind {
    /// A fixed `respond` route.
    Respond,
    /// A `static` files route.
    Static,
    /// A `proxy` route (including the proxy's own 502/503/504 answers).
    Proxy,
    /// No route matched (404).
    NoRoute,
    /// The connection driver refused the request before or instead of a handler
    /// (malformed head, limits, timeouts) and closed the connection.
    Error,
}

impl HandlerKind {
    /// Every kind, in label order.
    pub const ALL: [HandlerKind; 5] = [
        HandlerKind::Respond,
        HandlerKind::Static,
        HandlerKind::Proxy,
        HandlerKind::NoRoute,
        HandlerKind::Error,
    ];

    /// The Prometheus label value.
    pub fn label(self) -> &'static str {
        match self {
            HandlerKind::Respond => "respond",
            HandlerKind::Static => "static",
            HandlerKind::Proxy => "proxy",
            HandlerKind::NoRoute => "none",
            HandlerKind::Error => "error",
        }
    }
}

/// Status classes `1xx` to `5xx`.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Upper bounds (seconds) of the upstream latency buckets; one more bucket is `+Inf`.
pub const LATENCY_BOUNDS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// The counters of one worker.
#[derive(Default, Debug)]
pub struct WorkerStats {
    /// Downstream connections accepted.
    pub accepted: Counter,
    /// Times accepting paused at `max_connections`: load is shed by leaving new
    /// connections in the kernel backlog, not by refusing them.
    pub shed: Counter,
    /// 1 while accepting is paused at `max_connections`, else 0 (a gauge).
    pub shedding: Counter,
    /// Downstream connections open now (a gauge).
    pub open: Counter,
    requests: [[Counter; 5]; 5],
    /// HTTP bytes read from downstream (after TLS decryption).
    pub bytes_in: Counter,
    /// HTTP bytes written to downstream (before TLS encryption).
    pub bytes_out: Counter,
    /// TLS handshakes completed without resumption.
    pub tls_full: Counter,
    /// TLS handshakes that resumed a session (ticket or cache).
    pub tls_resumed: Counter,
    /// TLS handshakes that failed or timed out.
    pub tls_failed: Counter,
    /// Proxied requests that reached the upstream phase.
    pub upstream_requests: Counter,
    /// Proxied requests answered with an error because of the upstream side.
    pub upstream_errors: Counter,
    /// Proxied requests (and tcp streams) refused without touching an upstream
    /// because the group's `max_in_flight` was reached.
    pub upstream_rejected: Counter,
    latency_buckets: [Counter; LATENCY_BOUNDS.len() + 1],
    latency_sum_us: Counter,
    /// Access-log lines dropped because the writer fell behind.
    pub log_dropped: Counter,
}

impl WorkerStats {
    /// Counts one answered request.
    #[inline]
    pub fn request(&self, handler: HandlerKind, status: u16) {
        let class = usize::from((status / 100).clamp(1, 5)) - 1;
        self.requests[handler as usize][class].add(1);
    }

    /// Every answered request, of any handler and status.
    pub fn requests_total(&self) -> u64 {
        self.requests
            .iter()
            .flatten()
            .map(Counter::get)
            .fold(0, u64::wrapping_add)
    }

    /// Answers that count as errors on the status page: every 5xx, and every
    /// request the connection driver refused (bad head, limits, timeouts).
    pub fn errors_total(&self) -> u64 {
        let refused = self.requests[HandlerKind::Error as usize]
            .iter()
            .map(Counter::get)
            .fold(0, u64::wrapping_add);
        let server = HandlerKind::ALL
            .iter()
            .filter(|&&h| h != HandlerKind::Error)
            .map(|&h| self.requests[h as usize][4].get())
            .fold(0, u64::wrapping_add);
        refused.wrapping_add(server)
    }

    /// Answered requests of one handler and status class (`1` to `5`).
    pub fn requests(&self, handler: HandlerKind, class: usize) -> u64 {
        self.requests[handler as usize][class - 1].get()
    }

    /// Records how long an upstream took to send its response head.
    pub fn upstream_latency(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let i = LATENCY_BOUNDS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(LATENCY_BOUNDS.len());
        self.latency_buckets[i].add(1);
        self.latency_sum_us
            .add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
    }
}

/// What the admin listener reads: every worker's counters and what to show about
/// the process. Built once at start; the workers keep their own `Arc`s.
#[derive(Debug)]
pub struct Registry {
    /// When the process started serving.
    pub started: Instant,
    /// One entry per worker, by worker index.
    pub workers: Vec<Arc<WorkerStats>>,
    /// Listener URLs as bound (`http://127.0.0.1:8080`).
    pub listeners: Vec<String>,
}

impl Registry {
    /// A registry with fresh counters for `workers` workers.
    pub fn new(workers: usize, listeners: Vec<String>) -> Self {
        Registry {
            started: Instant::now(),
            workers: (0..workers).map(|_| Arc::default()).collect(),
            listeners,
        }
    }

    fn sum(&self, f: impl Fn(&WorkerStats) -> u64) -> u64 {
        self.workers.iter().map(|w| f(w)).fold(0, u64::wrapping_add)
    }

    /// The Prometheus text exposition (format 0.0.4) of the merged counters.
    pub fn render_prometheus(&self) -> String {
        let mut out = String::with_capacity(4096);
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (labels, v) in samples {
                let _ = writeln!(out, "{name}{labels} {v}");
            }
        };
        let one = |v: u64| [(String::new(), v)];
        metric(
            "pier_workers",
            "gauge",
            "Worker threads.",
            &one(self.workers.len() as u64),
        );
        metric(
            "pier_uptime_seconds",
            "gauge",
            "Seconds since the process started serving.",
            &one(self.started.elapsed().as_secs()),
        );
        metric(
            "pier_connections_open",
            "gauge",
            "Downstream connections open now.",
            &one(self.sum(|w| w.open.get())),
        );
        metric(
            "pier_connections_accepted_total",
            "counter",
            "Downstream connections accepted.",
            &one(self.sum(|w| w.accepted.get())),
        );
        metric(
            "pier_connections_shed_total",
            "counter",
            "Times accepting paused at max_connections (new connections wait in the kernel backlog).",
            &one(self.sum(|w| w.shed.get())),
        );
        let mut requests = Vec::new();
        for h in HandlerKind::ALL {
            for (c, class) in CLASSES.iter().enumerate() {
                let v = self.sum(|w| w.requests(h, c + 1));
                requests.push((
                    format!("{{handler=\"{}\",class=\"{class}\"}}", h.label()),
                    v,
                ));
            }
        }
        metric(
            "pier_requests_total",
            "counter",
            "Requests answered, by handler and status class.",
            &requests,
        );
        metric(
            "pier_received_bytes_total",
            "counter",
            "HTTP bytes read from downstream clients.",
            &one(self.sum(|w| w.bytes_in.get())),
        );
        metric(
            "pier_sent_bytes_total",
            "counter",
            "HTTP bytes written to downstream clients.",
            &one(self.sum(|w| w.bytes_out.get())),
        );
        metric(
            "pier_tls_handshakes_total",
            "counter",
            "Downstream TLS handshakes, by result.",
            &[
                ("{result=\"full\"}".into(), self.sum(|w| w.tls_full.get())),
                (
                    "{result=\"resumed\"}".into(),
                    self.sum(|w| w.tls_resumed.get()),
                ),
                (
                    "{result=\"failed\"}".into(),
                    self.sum(|w| w.tls_failed.get()),
                ),
            ],
        );
        metric(
            "pier_upstream_requests_total",
            "counter",
            "Proxied requests sent towards an upstream.",
            &one(self.sum(|w| w.upstream_requests.get())),
        );
        metric(
            "pier_upstream_errors_total",
            "counter",
            "Proxied requests that failed on the upstream side.",
            &one(self.sum(|w| w.upstream_errors.get())),
        );
        metric(
            "pier_upstream_rejected_total",
            "counter",
            "Proxied requests and tcp streams refused at an upstream group's max_in_flight.",
            &one(self.sum(|w| w.upstream_rejected.get())),
        );
        let mut buckets = Vec::new();
        let mut cumulative = 0u64;
        for (i, bound) in LATENCY_BOUNDS.iter().enumerate() {
            cumulative += self.sum(|w| w.latency_buckets[i].get());
            buckets.push((format!("_bucket{{le=\"{bound}\"}}"), cumulative));
        }
        cumulative += self.sum(|w| w.latency_buckets[LATENCY_BOUNDS.len()].get());
        buckets.push(("_bucket{le=\"+Inf\"}".into(), cumulative));
        let _ = writeln!(
            out,
            "# HELP pier_upstream_latency_seconds Time from sending a request upstream to its response head."
        );
        let _ = writeln!(out, "# TYPE pier_upstream_latency_seconds histogram");
        for (suffix, v) in &buckets {
            let _ = writeln!(out, "pier_upstream_latency_seconds{suffix} {v}");
        }
        let sum_us = self.sum(|w| w.latency_sum_us.get());
        let _ = writeln!(
            out,
            "pier_upstream_latency_seconds_sum {}",
            sum_us as f64 / 1e6
        );
        let _ = writeln!(out, "pier_upstream_latency_seconds_count {cumulative}");
        let mut metric = |name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {v}");
        };
        metric(
            "pier_log_lines_dropped_total",
            "Access-log lines dropped because the writer fell behind.",
            self.sum(|w| w.log_dropped.get()),
        );
        out
    }

    /// A plain-text page for people: uptime, listeners, and each worker's load.
    pub fn render_status(&self) -> String {
        let mut out = String::with_capacity(1024);
        let up = self.started.elapsed().as_secs();
        let _ = writeln!(out, "pier {}", env!("CARGO_PKG_VERSION"));
        let _ = writeln!(
            out,
            "uptime     {}d {:02}h {:02}m {:02}s",
            up / 86400,
            up / 3600 % 24,
            up / 60 % 60,
            up % 60
        );
        let _ = writeln!(out, "workers    {}", self.workers.len());
        let _ = writeln!(out, "listeners  {}", self.listeners.join(" "));
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:>6} {:>10} {:>12} {:>14}",
            "worker", "open", "accepted", "requests"
        );
        let total = |w: &WorkerStats| -> u64 {
            HandlerKind::ALL
                .iter()
                .flat_map(|&h| (1..=5).map(move |c| (h, c)))
                .map(|(h, c)| w.requests(h, c))
                .sum()
        };
        for (i, w) in self.workers.iter().enumerate() {
            let _ = writeln!(
                out,
                "{i:>6} {:>10} {:>12} {:>14}",
                w.open.get(),
                w.accepted.get(),
                total(w)
            );
        }
        let _ = writeln!(
            out,
            "{:>6} {:>10} {:>12} {:>14}",
            "all",
            self.sum(|w| w.open.get()),
            self.sum(|w| w.accepted.get()),
            self.sum(total)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_counts_sum_over_workers_by_class_and_handler() {
        let r = Registry::new(2, vec![]);
        r.workers[0].request(HandlerKind::Static, 200);
        r.workers[1].request(HandlerKind::Static, 204);
        r.workers[1].request(HandlerKind::NoRoute, 404);
        r.workers[0].request(HandlerKind::Error, 999);
        let text = r.render_prometheus();
        assert!(text.contains("pier_requests_total{handler=\"static\",class=\"2xx\"} 2\n"));
        assert!(text.contains("pier_requests_total{handler=\"none\",class=\"4xx\"} 1\n"));
        assert!(text.contains("pier_requests_total{handler=\"error\",class=\"5xx\"} 1\n"));
        assert!(text.contains("pier_requests_total{handler=\"proxy\",class=\"2xx\"} 0\n"));
    }

    #[test]
    fn latency_buckets_are_cumulative_with_inf_equal_to_count() {
        let r = Registry::new(1, vec![]);
        r.workers[0].upstream_latency(Duration::from_micros(500));
        r.workers[0].upstream_latency(Duration::from_millis(30));
        r.workers[0].upstream_latency(Duration::from_secs(60));
        let text = r.render_prometheus();
        assert!(text.contains("pier_upstream_latency_seconds_bucket{le=\"0.001\"} 1\n"));
        assert!(text.contains("pier_upstream_latency_seconds_bucket{le=\"0.025\"} 1\n"));
        assert!(text.contains("pier_upstream_latency_seconds_bucket{le=\"0.05\"} 2\n"));
        assert!(text.contains("pier_upstream_latency_seconds_bucket{le=\"5\"} 2\n"));
        assert!(text.contains("pier_upstream_latency_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(text.contains("pier_upstream_latency_seconds_count 3\n"));
    }

    #[test]
    fn status_lists_each_worker_and_the_total() {
        let r = Registry::new(2, vec!["http://127.0.0.1:1".into()]);
        r.workers[1].open.set(3);
        r.workers[1].request(HandlerKind::Respond, 200);
        let page = r.render_status();
        assert!(page.contains("listeners  http://127.0.0.1:1"));
        let row = page
            .lines()
            .find(|l| l.trim_start().starts_with("1 "))
            .unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols, ["1", "3", "0", "1"]);
    }
}
