//! What a run counts: latencies in an HdrHistogram (so p99.9 and max are exact to
//! three significant digits, not averaged away), connect times and times to the
//! first byte per connection as h2load counts them, responses by status, errors by
//! kind, bytes. Each client thread owns one [`Stats`] and touches nothing shared;
//! the threads' copies are merged once at the end.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// Largest latency kept exactly: one hour, in microseconds. Longer ones are
/// clamped to it rather than dropped.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Why a request (or a connection attempt) failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// TCP connect refused or failed.
    Connect,
    /// TLS handshake failed (certificate, protocol).
    Tls,
    /// No progress within `--timeout`.
    Timeout,
    /// Connection reset (RST, broken pipe) with requests outstanding.
    Reset,
    /// Server closed the connection (FIN) with requests outstanding.
    Closed,
    /// Response that does not parse or frames its body wrongly.
    Malformed,
}

impl FailureKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [FailureKind; 6] = [
        FailureKind::Connect,
        FailureKind::Tls,
        FailureKind::Timeout,
        FailureKind::Reset,
        FailureKind::Closed,
        FailureKind::Malformed,
    ];

    /// The kind's name in reports (a JSON key, a word of the text report).
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Connect => "connect",
            FailureKind::Tls => "tls",
            FailureKind::Timeout => "timeout",
            FailureKind::Reset => "reset",
            FailureKind::Closed => "closed",
            FailureKind::Malformed => "malformed",
        }
    }

    /// What happened, as a sentence a user can act on.
    pub fn explain(self) -> &'static str {
        match self {
            FailureKind::Connect => "connecting failed (refused, or no route to the server)",
            FailureKind::Tls => "the TLS handshake failed",
            FailureKind::Timeout => "the server did not answer within --timeout",
            FailureKind::Reset => "the server reset the connection",
            FailureKind::Closed => "the server closed the connection before answering",
            FailureKind::Malformed => "the answer was not a valid HTTP/1.1 response",
        }
    }
}

/// Error counts by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Errors {
    /// Counts in the order of [`FailureKind::ALL`] (indexed by the kind).
    counts: [u64; FailureKind::ALL.len()],
    /// The kind of the first error counted, to explain a run without a response.
    pub first: Option<FailureKind>,
}

impl Errors {
    /// Adds `n` errors of `kind`.
    pub fn add(&mut self, kind: FailureKind, n: u64) {
        self.counts[kind as usize] += n;
        if n > 0 && self.first.is_none() {
            self.first = Some(kind);
        }
    }

    /// Errors of `kind`.
    pub fn count(&self, kind: FailureKind) -> u64 {
        self.counts[kind as usize]
    }

    /// All errors.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    fn merge(&mut self, o: &Errors) {
        for (a, b) in self.counts.iter_mut().zip(o.counts) {
            *a += b;
        }
        self.first = self.first.or(o.first);
    }

    fn pairs(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        FailureKind::ALL.iter().map(|&k| (k.name(), self.count(k)))
    }

    /// As a JSON object with every kind present.
    pub fn to_json(&self) -> Value {
        let map: serde_json::Map<String, Value> = self
            .pairs()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        Value::Object(map)
    }
}

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.pairs().map(|(k, v)| format!("{k} {v}")).collect();
        f.write_str(&parts.join(", "))
    }
}

/// One client thread's counts; merged across threads at the end.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Response latency in microseconds.
    pub latency: Histogram<u64>,
    /// Per connection, microseconds from the start of the connect until it is
    /// usable (TCP connected and, with TLS, the handshake done).
    pub connect: Histogram<u64>,
    /// Per connection, microseconds from the start of the connect to the first
    /// response byte read, h2load's "time to 1st byte".
    pub first_byte: Histogram<u64>,
    /// Responses by status code (index = status, 100..=999).
    pub status: Vec<u64>,
    /// Responses completed (any status).
    pub requests: u64,
    /// Failures by kind.
    pub errors: Errors,
    /// Bytes read from sockets (TLS: plaintext).
    pub bytes_read: u64,
    /// Bytes written to sockets (TLS: plaintext).
    pub bytes_written: u64,
    /// TLS handshakes completed.
    pub handshakes: u64,
    /// Of those, resumed sessions.
    pub resumed: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    /// Empty counts.
    pub fn new() -> Stats {
        let histogram = || match Histogram::new_with_bounds(1, MAX_LATENCY_US, 3) {
            Ok(h) => h,
            // Constant bounds, valid for every input: not reachable.
            Err(e) => unreachable!("histogram bounds: {e}"),
        };
        Stats {
            latency: histogram(),
            connect: histogram(),
            first_byte: histogram(),
            status: vec![0; 1000],
            requests: 0,
            errors: Errors::default(),
            bytes_read: 0,
            bytes_written: 0,
            handshakes: 0,
            resumed: 0,
        }
    }

    /// Counts one response.
    #[inline]
    pub fn record(&mut self, status: u16, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.latency.saturating_record(us.clamp(1, MAX_LATENCY_US));
        if let Some(n) = self.status.get_mut(usize::from(status)) {
            *n += 1;
        }
        self.requests += 1;
    }

    /// Counts one connection made, `took` after its connect started.
    pub fn record_connect(&mut self, took: Duration) {
        record_us(&mut self.connect, took);
    }

    /// Counts one TLS handshake completed, `resumed` or full.
    pub fn record_handshake(&mut self, resumed: bool) {
        self.handshakes += 1;
        self.resumed += u64::from(resumed);
    }

    /// Counts one connection's first response byte, `took` after its connect started.
    pub fn record_first_byte(&mut self, took: Duration) {
        record_us(&mut self.first_byte, took);
    }

    /// Adds another thread's counts to these.
    pub fn merge(&mut self, other: &Stats) {
        merge_histogram(&mut self.latency, &other.latency);
        merge_histogram(&mut self.connect, &other.connect);
        merge_histogram(&mut self.first_byte, &other.first_byte);
        for (a, b) in self.status.iter_mut().zip(&other.status) {
            *a += b;
        }
        self.requests += other.requests;
        self.errors.merge(&other.errors);
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.handshakes += other.handshakes;
        self.resumed += other.resumed;
    }

    /// (status, count) for every status seen, ascending.
    pub fn statuses(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(s, &n)| (s as u16, n))
    }

    /// The percentiles every report shows.
    pub fn percentiles(&self) -> Percentiles {
        Percentiles::of(&self.latency)
    }
}

fn record_us(h: &mut Histogram<u64>, took: Duration) {
    let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
    h.saturating_record(us.clamp(1, MAX_LATENCY_US));
}

fn merge_histogram(into: &mut Histogram<u64>, other: &Histogram<u64>) {
    if into.add(other).is_err() {
        for v in other.iter_recorded() {
            into.saturating_record_n(v.value_iterated_to(), v.count_at_value());
        }
    }
}

/// Latency summary in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest seen.
    pub max: u64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
}

impl Percentiles {
    /// The summary of one histogram of microseconds; all zero when it is empty.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: h.mean(),
            stdev: h.stdev(),
        }
    }

    /// As the `latency_us` JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
            "p99_9": self.p999,
            "max": self.max,
            "mean": round2(self.mean),
            "stdev": round2(self.stdev),
        })
    }
}

/// Two decimals are all a report needs.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Seconds to the millisecond.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Microseconds as a short human figure (`850us`, `12.34ms`, `1.50s`).
pub fn human_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us}us")
    } else if us < 1_000_000 {
        format!("{:.2}ms", us as f64 / 1e3)
    } else {
        format!("{:.2}s", us as f64 / 1e6)
    }
}

/// Bytes as a short human figure in SI units (MB = 10^6 bytes).
pub fn human_bytes(b: u64) -> String {
    let b = b as f64;
    if b < 1e3 {
        format!("{b:.0} B")
    } else if b < 1e6 {
        format!("{:.1} kB", b / 1e3)
    } else if b < 1e9 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.2} GB", b / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_histograms_statuses_errors_and_bytes() {
        let mut a = Stats::new();
        let mut b = Stats::new();
        for ms in 1..=100u64 {
            a.record(200, Duration::from_millis(ms));
        }
        b.record(404, Duration::from_millis(5));
        b.record(200, Duration::from_secs(2));
        b.errors.add(FailureKind::Timeout, 3);
        b.errors.add(FailureKind::Closed, 1);
        a.bytes_read = 10;
        b.bytes_read = 5;
        b.handshakes = 2;
        b.resumed = 1;
        a.record_connect(Duration::from_micros(300));
        b.record_connect(Duration::from_micros(500));
        b.record_first_byte(Duration::from_millis(2));
        a.merge(&b);
        assert_eq!((a.connect.len(), a.first_byte.len()), (2, 1));
        assert_eq!(Percentiles::of(&a.connect).max, 500);
        assert_eq!(Percentiles::of(&a.first_byte).p50, 2000);
        assert_eq!(a.requests, 102);
        assert_eq!(a.latency.len(), 102);
        assert_eq!(a.statuses().collect::<Vec<_>>(), vec![(200, 101), (404, 1)]);
        assert_eq!(a.errors.count(FailureKind::Timeout), 3);
        assert_eq!(a.errors.total(), 4);
        assert_eq!(a.bytes_read, 15);
        assert_eq!((a.handshakes, a.resumed), (2, 1));
        let p = a.percentiles();
        // The one 2 s response is the max and shows in the tail, not in the median.
        assert!((1_999_000..=2_001_000).contains(&p.max), "{p:?}");
        assert!((49_000..=52_000).contains(&p.p50), "{p:?}");
        assert!(p.p999 >= 1_999_000, "{p:?}");
        assert!(p.p90 < 100_000, "{p:?}");
    }

    #[test]
    fn merge_of_threads_equals_one_histogram_of_everything() {
        let mut whole = Stats::new();
        let mut parts: Vec<Stats> = (0..4).map(|_| Stats::new()).collect();
        for i in 0..10_000u64 {
            let d = Duration::from_micros(1 + (i * 7919) % 50_000);
            whole.record(200, d);
            parts[(i % 4) as usize].record(200, d);
        }
        let mut merged = Stats::new();
        for p in &parts {
            merged.merge(p);
        }
        assert_eq!(merged.percentiles(), whole.percentiles());
        assert_eq!(merged.requests, 10_000);
    }

    #[test]
    fn extreme_latencies_are_clamped_not_lost() {
        let mut s = Stats::new();
        s.record(200, Duration::ZERO);
        s.record(200, Duration::from_secs(100_000));
        s.record(1000, Duration::from_millis(1));
        assert_eq!(s.latency.len(), 3);
        assert_eq!(s.requests, 3);
        assert!(s.percentiles().max >= MAX_LATENCY_US / 1000 * 999);
        assert_eq!(s.statuses().count(), 1);
    }

    #[test]
    fn errors_are_counted_in_their_kinds_own_slot() {
        for (i, kind) in FailureKind::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, i, "{kind:?}");
            let mut e = Errors::default();
            e.add(kind, 2);
            assert_eq!(e.count(kind), 2);
            assert_eq!(e.total(), 2);
            assert_eq!(e.first, Some(kind));
        }
    }

    #[test]
    fn json_has_every_error_kind_and_percentile() {
        let mut e = Errors::default();
        e.add(FailureKind::Malformed, 2);
        let j = e.to_json();
        for k in ["connect", "tls", "timeout", "reset", "closed", "malformed"] {
            assert!(j.get(k).is_some(), "{k}");
        }
        assert_eq!(j["malformed"], 2);
        let p = Stats::new().percentiles().to_json();
        for k in ["p50", "p90", "p99", "p99_9", "max"] {
            assert_eq!(p[k], 0, "{k}");
        }
        assert_eq!(human_us(999), "999us");
        assert_eq!(human_us(1500), "1.50ms");
        assert_eq!(human_bytes(2_500_000), "2.5 MB");
    }
}
