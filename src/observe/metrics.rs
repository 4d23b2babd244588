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

pub use crate::observe::counter::Counter;
use crate::observe::exposition::{family_head, latency_histogram};
use crate::observe::latency::{latency_bucket, whole_micros, LATENCY_BOUNDS};
use crate::observe::quic_stats::QuicStats;

/// Which part of Pier answered a request: the `handler` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerKind {
    /// A fixed `respond` route.
    Respond,
    /// A `static` files route.
    Static,
    /// A `proxy` route (including the proxy's own 502/503/504 answers).
    Proxy,
    /// A `redirect` route.
    Redirect,
    /// No route matched (404).
    NoRoute,
    /// The connection driver refused the request before or instead of a handler
    /// (malformed head, limits, timeouts) and closed the connection.
    Error,
}

impl HandlerKind {
    /// Every kind, in label order.
    pub const ALL: [HandlerKind; 6] = [
        HandlerKind::Respond,
        HandlerKind::Static,
        HandlerKind::Proxy,
        HandlerKind::Redirect,
        HandlerKind::NoRoute,
        HandlerKind::Error,
    ];

    /// The Prometheus label value.
    pub fn label(self) -> &'static str {
        match self {
            HandlerKind::Respond => "respond",
            HandlerKind::Static => "static",
            HandlerKind::Proxy => "proxy",
            HandlerKind::Redirect => "redirect",
            HandlerKind::NoRoute => "none",
            HandlerKind::Error => "error",
        }
    }
}

/// Why a downstream TLS handshake failed: the `cause` label, a fixed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFailure {
    /// Not done within `handshake_timeout`.
    Timeout,
    /// A plain HTTP request on the TLS port (answered with a 400).
    PlainHttp,
    /// The client closed or reset the connection during the handshake.
    Closed,
    /// No protocol version, cipher suite or key exchange in common, or no
    /// certificate for the name asked (`sni_required`).
    Incompatible,
    /// The client's certificate was missing or did not verify (mTLS).
    ClientCertificate,
    /// The client sent bytes that are not valid TLS, or misbehaved.
    Protocol,
    /// Anything else (an alert from the client, an IO error).
    Other,
}

impl TlsFailure {
    /// Every cause, in label order.
    pub const ALL: [TlsFailure; 7] = [
        TlsFailure::Timeout,
        TlsFailure::PlainHttp,
        TlsFailure::Closed,
        TlsFailure::Incompatible,
        TlsFailure::ClientCertificate,
        TlsFailure::Protocol,
        TlsFailure::Other,
    ];

    /// The Prometheus label value.
    pub fn label(self) -> &'static str {
        match self {
            TlsFailure::Timeout => "timeout",
            TlsFailure::PlainHttp => "plain_http",
            TlsFailure::Closed => "closed",
            TlsFailure::Incompatible => "incompatible",
            TlsFailure::ClientCertificate => "client_certificate",
            TlsFailure::Protocol => "protocol",
            TlsFailure::Other => "other",
        }
    }

    /// The cause of a failed handshake, from the error tokio-rustls returned.
    pub fn of(e: &std::io::Error) -> TlsFailure {
        use std::io::ErrorKind as K;
        if matches!(
            e.kind(),
            K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe
        ) {
            return TlsFailure::Closed;
        }
        let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
            return TlsFailure::Other;
        };
        match tls {
            rustls::Error::PeerIncompatible(_) => TlsFailure::Incompatible,
            rustls::Error::NoCertificatesPresented
            | rustls::Error::InvalidCertificate(_)
            | rustls::Error::InvalidCertRevocationList(_) => TlsFailure::ClientCertificate,
            rustls::Error::General(m) if m.contains("certificate") => TlsFailure::Incompatible,
            rustls::Error::InvalidMessage(_)
            | rustls::Error::PeerMisbehaved(_)
            | rustls::Error::InappropriateMessage { .. }
            | rustls::Error::InappropriateHandshakeMessage { .. } => TlsFailure::Protocol,
            _ => TlsFailure::Other,
        }
    }
}

/// TLS versions counted apart: the `version` label.
const TLS_VERSIONS: [&str; 2] = ["TLSv1.2", "TLSv1.3"];

/// Route slots of the request-duration histogram: one per configured route up to
/// this many, then one shared by the rest (`other`) and one for requests no route
/// matched (`none`). Keeps the label set bounded whatever the configuration.
pub const ROUTE_SLOTS: usize = 32;
const ROUTE_OTHER: usize = ROUTE_SLOTS;
/// Slot of requests that matched no route.
pub const ROUTE_NONE: usize = ROUTE_SLOTS + 1;

/// Request durations by route slot and status class, in `LATENCY_BOUNDS` buckets.
#[derive(Debug)]
struct RouteDurations {
    /// `[slot][class][bucket]`.
    buckets: Vec<[[Counter; LATENCY_BOUNDS.len() + 1]; 5]>,
    /// `[slot][class]`, microseconds.
    sum_us: Vec<[Counter; 5]>,
}

impl Default for RouteDurations {
    fn default() -> Self {
        RouteDurations {
            buckets: (0..ROUTE_SLOTS + 2).map(|_| Default::default()).collect(),
            sum_us: (0..ROUTE_SLOTS + 2).map(|_| Default::default()).collect(),
        }
    }
}

/// Status classes `1xx` to `5xx`.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// A `/metrics` family that is one [`WorkerStats`] figure summed over the
/// workers: name, type, the figure, and help.
type SummedFamily = (
    &'static str,
    &'static str,
    fn(&WorkerStats) -> u64,
    &'static str,
);

/// The summed families shown after the process's own, in `/metrics` order.
#[rustfmt::skip]
const SUMMED_FAMILIES: [SummedFamily; 11] = [
    ("pier_connections_open",           "gauge",   |w| w.open.get(),              "Downstream connections open now."),
    ("pier_connections_accepted_total", "counter", |w| w.accepted.get(),          "Downstream connections accepted."),
    ("pier_connections_shed_total",     "counter", |w| w.shed.get(),              "Times accepting paused at max_connections (new connections wait in the kernel backlog)."),
    ("pier_received_bytes_total",       "counter", |w| w.bytes_in.get(),          "HTTP bytes read from downstream clients."),
    ("pier_sent_bytes_total",           "counter", |w| w.bytes_out.get(),         "HTTP bytes written to downstream clients."),
    ("pier_upstream_requests_total",    "counter", |w| w.upstream_requests.get(), "Proxied requests sent towards an upstream."),
    ("pier_upstream_errors_total",      "counter", |w| w.upstream_errors.get(),   "Proxied requests that failed on the upstream side."),
    ("pier_upstream_rejected_total",    "counter", |w| w.upstream_rejected.get(), "Proxied requests and tcp streams refused at an upstream group's max_in_flight."),
    ("pier_log_lines_dropped_total",    "counter", |w| w.log_dropped.get(),       "Access-log lines dropped because the writer fell behind."),
    ("pier_trace_spans_dropped_total",  "counter", |w| w.trace_dropped.get(),     "Trace spans dropped because the exporter's queue was full."),
    ("pier_download_turns_waited_total", "counter", |w| w.download_turns_waited.get(), "Pool sends of downloads that waited for their turn while the worker answered other requests."),
];

/// The summed HTTP/2 families, shown after the TLS ones.
#[rustfmt::skip]
const HTTP2_FAMILIES: [SummedFamily; 4] = [
    ("pier_http2_connections_total",  "counter", |w| w.h2_count(H2Event::Connection), "Downstream connections that spoke HTTP/2."),
    ("pier_http2_requests_total",     "counter", |w| w.h2_count(H2Event::Request),    "Requests answered over HTTP/2 (pier_requests_total counts every protocol)."),
    ("pier_http2_streams_open",       "gauge",   |w| w.h2_streams_open.get(),         "HTTP/2 streams being answered now."),
    ("pier_http2_goaways_sent_total", "counter", |w| w.h2_count(H2Event::Goaway),     "HTTP/2 GOAWAY frames sent (drain, idle, max_requests, floods)."),
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
    requests: [[Counter; 5]; HandlerKind::ALL.len()],
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
    /// Trace spans dropped because the exporter's queue was full.
    pub trace_dropped: Counter,
    /// Pool sends of downloads that waited for their turn
    /// (`server::download_pacing`).
    pub download_turns_waited: Counter,
    /// Completed handshakes by `[version][resumed]` (see `TLS_VERSIONS`).
    tls_by_version: [[Counter; 2]; 2],
    /// Failed handshakes by [`TlsFailure`].
    tls_failures: [Counter; 7],
    durations: RouteDurations,
    /// HTTP/2 streams being answered now (a gauge).
    pub h2_streams_open: Counter,
    /// HTTP/2 connection and stream events by [`H2Event`].
    h2_events: [Counter; H2Event::ALL.len()],
    /// HTTP/3 and QUIC figures.
    pub quic: QuicStats,
}

/// What the HTTP/2 driver counts: requests and connections by protocol, the
/// GOAWAYs it sends and streams reset by cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H2Event {
    /// A connection that spoke HTTP/2.
    Connection,
    /// A request answered over HTTP/2.
    Request,
    /// A GOAWAY sent (drain, idle, max requests, a flood).
    Goaway,
    /// A stream reset by the client before its answer.
    ClientReset,
    /// A connection closed for too many client resets (rapid reset).
    ResetFlood,
    /// A connection closed for too many PING or SETTINGS frames.
    ControlFlood,
    /// A stream reset because the client took no data for the write timeout.
    WriteTimeout,
    /// A stream reset because its answer could not be sent whole.
    ServerReset,
}

impl H2Event {
    /// Every event, in counter order.
    pub const ALL: [H2Event; 8] = [
        H2Event::Connection,
        H2Event::Request,
        H2Event::Goaway,
        H2Event::ClientReset,
        H2Event::ResetFlood,
        H2Event::ControlFlood,
        H2Event::WriteTimeout,
        H2Event::ServerReset,
    ];
}

impl WorkerStats {
    /// Counts an HTTP/2 event.
    pub fn h2_event(&self, event: H2Event) {
        self.h2_events[event as usize].add(1);
    }

    /// How many times `event` happened on this worker.
    pub fn h2_count(&self, event: H2Event) -> u64 {
        self.h2_events[event as usize].get()
    }

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

    /// Counts a completed handshake by version (`TLSv1.2` or `TLSv1.3`) and kind.
    pub fn tls_handshake(&self, version: Option<&str>, resumed: bool) {
        if resumed {
            self.tls_resumed.add(1);
        } else {
            self.tls_full.add(1);
        }
        if let Some(v) = TLS_VERSIONS.iter().position(|&n| Some(n) == version) {
            self.tls_by_version[v][usize::from(resumed)].add(1);
        }
    }

    /// Counts a failed handshake by its cause.
    pub fn tls_failure(&self, cause: TlsFailure) {
        self.tls_failed.add(1);
        self.tls_failures[cause as usize].add(1);
    }

    /// Request durations of every route and status class together, by
    /// [`LATENCY_BOUNDS`] bucket (not cumulative): what the status page's
    /// percentiles come from.
    pub fn duration_buckets(&self) -> [u64; LATENCY_BOUNDS.len() + 1] {
        let mut out = [0u64; LATENCY_BOUNDS.len() + 1];
        for slot in &self.durations.buckets {
            for class in slot {
                for (o, c) in out.iter_mut().zip(class) {
                    *o = o.wrapping_add(c.get());
                }
            }
        }
        out
    }

    /// Records a request's duration (complete head to response written) under
    /// its route's slot (`Route::index`, or [`ROUTE_NONE`]) and status class.
    #[inline]
    pub fn request_duration(&self, route: usize, status: u16, elapsed: Duration) {
        let slot = if route == ROUTE_NONE {
            ROUTE_NONE
        } else {
            route.min(ROUTE_OTHER)
        };
        let class = usize::from((status / 100).clamp(1, 5)) - 1;
        self.durations.buckets[slot][class][latency_bucket(elapsed)].add(1);
        self.durations.sum_us[slot][class].add(whole_micros(elapsed));
    }

    /// Records how long an upstream took to send its response head.
    pub fn upstream_latency(&self, elapsed: Duration) {
        self.latency_buckets[latency_bucket(elapsed)].add(1);
        self.latency_sum_us.add(whole_micros(elapsed));
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
    /// `host/prefix` of each configured route, for the `route` label; replaced
    /// on reload (read only when scraped).
    pub routes: arc_swap::ArcSwap<Vec<String>>,
    /// Batches of spans the trace collector did not take (written by the
    /// exporter thread, whichever one runs).
    pub trace_export_failures: Arc<AtomicU64>,
}

impl Registry {
    /// A registry with fresh counters for `workers` workers.
    pub fn new(workers: usize, listeners: Vec<String>) -> Self {
        Registry {
            started: Instant::now(),
            workers: (0..workers).map(|_| Arc::default()).collect(),
            listeners,
            routes: Default::default(),
            trace_export_failures: Arc::default(),
        }
    }

    /// The label of a route slot: its `host/prefix`, `other` or `none`.
    fn route_label(&self, slot: usize, routes: &[String]) -> String {
        match slot {
            ROUTE_NONE => "none".into(),
            ROUTE_OTHER => "other".into(),
            i => routes.get(i).cloned().unwrap_or_else(|| format!("#{i}")),
        }
    }

    fn render_durations(&self, out: &mut String) {
        let name = "pier_request_duration_seconds";
        family_head(
            out,
            name,
            "histogram",
            "Time from a request's complete head to its response written, by route and status class.",
        );
        let routes = self.routes.load();
        for slot in 0..ROUTE_SLOTS + 2 {
            for (c, class) in CLASSES.iter().enumerate() {
                let count = |i: usize| self.sum(|w| w.durations.buckets[slot][c][i].get());
                let total: u64 = (0..=LATENCY_BOUNDS.len()).map(count).sum();
                if total == 0 {
                    // A series appears with its first request: unused slots and
                    // classes stay out of the exposition.
                    continue;
                }
                let route = prom_escape(&self.route_label(slot, &routes));
                let labels = format!("route=\"{route}\",class=\"{class}\"");
                let buckets: Vec<u64> = (0..=LATENCY_BOUNDS.len()).map(count).collect();
                let sum_us = self.sum(|w| w.durations.sum_us[slot][c].get());
                latency_histogram(out, name, &labels, &buckets, sum_us);
            }
        }
    }

    fn sum(&self, f: impl Fn(&WorkerStats) -> u64) -> u64 {
        self.workers.iter().map(|w| f(w)).fold(0, u64::wrapping_add)
    }

    /// The Prometheus text exposition (format 0.0.4) of the merged counters.
    pub fn render_prometheus(&self) -> String {
        let mut out = String::with_capacity(4096);
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
            family_head(&mut out, name, kind, help);
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
        for (name, kind, figure, help) in SUMMED_FAMILIES {
            metric(name, kind, help, &one(self.sum(figure)));
        }
        metric(
            "pier_trace_export_failures_total",
            "counter",
            "Batches of trace spans the collector refused, failed or could not be reached for (the spans are lost).",
            &one(self.trace_export_failures.load(Ordering::Relaxed)),
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
        let mut by_version = Vec::new();
        for (v, version) in TLS_VERSIONS.iter().enumerate() {
            for (r, kind) in ["full", "resumed"].iter().enumerate() {
                by_version.push((
                    format!("{{version=\"{version}\",kind=\"{kind}\"}}"),
                    self.sum(|w| w.tls_by_version[v][r].get()),
                ));
            }
        }
        metric(
            "pier_tls_handshakes_by_version_total",
            "counter",
            "Completed downstream TLS handshakes, by protocol version and full or resumed.",
            &by_version,
        );
        let failures: Vec<(String, u64)> = TlsFailure::ALL
            .iter()
            .map(|&f| {
                (
                    format!("{{cause=\"{}\"}}", f.label()),
                    self.sum(|w| w.tls_failures[f as usize].get()),
                )
            })
            .collect();
        metric(
            "pier_tls_handshake_failures_total",
            "counter",
            "Failed downstream TLS handshakes, by cause.",
            &failures,
        );
        for (name, kind, figure, help) in HTTP2_FAMILIES {
            metric(name, kind, help, &one(self.sum(figure)));
        }
        let resets: Vec<(String, u64)> = [
            ("client", H2Event::ClientReset),
            ("client_flood", H2Event::ResetFlood),
            ("control_flood", H2Event::ControlFlood),
            ("write_timeout", H2Event::WriteTimeout),
            ("server", H2Event::ServerReset),
        ]
        .iter()
        .map(|&(cause, e)| {
            (
                format!("{{cause=\"{cause}\"}}"),
                self.sum(|w| w.h2_count(e)),
            )
        })
        .collect();
        metric(
            "pier_http2_resets_total",
            "counter",
            "HTTP/2 streams reset, by cause (client_flood and control_flood count connections closed for them).",
            &resets,
        );
        crate::observe::quic_stats::render(&mut out, &|f| self.sum(|w| f(&w.quic)));
        let name = "pier_upstream_latency_seconds";
        family_head(
            &mut out,
            name,
            "histogram",
            "Time from sending a request upstream to its response head.",
        );
        let buckets: Vec<u64> = (0..=LATENCY_BOUNDS.len())
            .map(|i| self.sum(|w| w.latency_buckets[i].get()))
            .collect();
        let sum_us = self.sum(|w| w.latency_sum_us.get());
        latency_histogram(&mut out, name, "", &buckets, sum_us);
        self.render_durations(&mut out);
        family_head(
            &mut out,
            "pier_build_info",
            "gauge",
            "The running build: its version as the label, value 1.",
        );
        let _ = writeln!(
            out,
            "pier_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        crate::observe::process::render_process(&mut out);
        out.push_str(&crate::tls::acme::metrics::render_acme_metrics());
        crate::filter::access::rate_store::render_store_metrics(&mut out);
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
        let stores = crate::filter::access::rate_store::store_status_lines();
        if !stores.is_empty() {
            let _ = writeln!(out);
            for line in stores {
                let _ = writeln!(out, "rate-limit store {line}");
            }
        }
        out
    }
}

/// A label value as the exposition format wants it: `\\`, `\"` and newlines escaped.
fn prom_escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the sample `series` (name and labels) in `text`.
    fn sample(text: &str, series: &str) -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn request_durations_by_route_stay_within_their_slots() {
        let r = Registry::new(2, vec![]);
        r.routes
            .store(Arc::new(vec!["/".into(), "a.test/api\"".into()]));
        r.workers[0].request_duration(0, 200, Duration::from_micros(800));
        r.workers[1].request_duration(0, 200, Duration::from_millis(20));
        r.workers[1].request_duration(1, 503, Duration::from_secs(9));
        r.workers[0].request_duration(ROUTE_NONE, 404, Duration::from_micros(10));
        // Routes past the slots share `other`: the label set stays bounded.
        r.workers[0].request_duration(500, 200, Duration::from_micros(10));
        r.workers[0].request_duration(ROUTE_SLOTS + 7, 200, Duration::from_micros(10));
        let text = r.render_prometheus();
        let d = "pier_request_duration_seconds";
        assert!(
            text.contains(&format!(
                "{d}_bucket{{route=\"/\",class=\"2xx\",le=\"0.001\"}} 1\n"
            )),
            "{text}"
        );
        assert!(text.contains(&format!(
            "{d}_bucket{{route=\"/\",class=\"2xx\",le=\"0.025\"}} 2\n"
        )));
        assert!(text.contains(&format!("{d}_count{{route=\"/\",class=\"2xx\"}} 2\n")));
        assert!(text.contains(&format!(
            "{d}_bucket{{route=\"a.test/api\\\"\",class=\"5xx\",le=\"5\"}} 0\n"
        )));
        assert!(text.contains(&format!(
            "{d}_bucket{{route=\"a.test/api\\\"\",class=\"5xx\",le=\"+Inf\"}} 1\n"
        )));
        assert!(text.contains(&format!("{d}_count{{route=\"none\",class=\"4xx\"}} 1\n")));
        assert!(text.contains(&format!("{d}_count{{route=\"other\",class=\"2xx\"}} 2\n")));
        assert!(!text.contains(&format!("{d}_count{{route=\"/\",class=\"5xx\"}}")));
        assert!(text.contains("pier_build_info{version=\""));
    }

    #[test]
    fn durations_around_the_first_bound_land_in_their_buckets_and_sum() {
        let r = Registry::new(1, vec![]);
        r.routes.store(Arc::new(vec!["/".into()]));
        for us in [0, 999, 1000, 1001] {
            r.workers[0].request_duration(0, 200, Duration::from_micros(us));
        }
        let text = r.render_prometheus();
        let d = "pier_request_duration_seconds";
        for (le, n) in [("0.001", 3), ("0.0025", 4)] {
            let line = format!("{d}_bucket{{route=\"/\",class=\"2xx\",le=\"{le}\"}} {n}\n");
            assert!(text.contains(&line), "{line}{text}");
        }
        assert!(
            text.contains(&format!("{d}_sum{{route=\"/\",class=\"2xx\"}} 0.003\n")),
            "{text}"
        );
    }

    #[test]
    fn tls_handshakes_count_by_version_kind_and_cause() {
        let r = Registry::new(1, vec![]);
        let w = &r.workers[0];
        w.tls_handshake(Some("TLSv1.3"), false);
        w.tls_handshake(Some("TLSv1.3"), true);
        w.tls_handshake(Some("TLSv1.2"), false);
        w.tls_failure(TlsFailure::PlainHttp);
        w.tls_failure(TlsFailure::of(&std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::PeerIncompatible(rustls::PeerIncompatible::NoCipherSuitesInCommon),
        )));
        w.tls_failure(TlsFailure::of(&std::io::ErrorKind::UnexpectedEof.into()));
        let text = r.render_prometheus();
        for line in [
            "pier_tls_handshakes_by_version_total{version=\"TLSv1.3\",kind=\"full\"} 1\n",
            "pier_tls_handshakes_by_version_total{version=\"TLSv1.3\",kind=\"resumed\"} 1\n",
            "pier_tls_handshakes_by_version_total{version=\"TLSv1.2\",kind=\"full\"} 1\n",
            "pier_tls_handshake_failures_total{cause=\"plain_http\"} 1\n",
            "pier_tls_handshake_failures_total{cause=\"incompatible\"} 1\n",
            "pier_tls_handshake_failures_total{cause=\"closed\"} 1\n",
            "pier_tls_handshake_failures_total{cause=\"timeout\"} 0\n",
            "pier_tls_handshakes_total{result=\"failed\"} 3\n",
            "pier_tls_handshakes_total{result=\"full\"} 2\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn merged_counts_sum_over_workers_by_class_and_handler() {
        let r = Registry::new(2, vec![]);
        r.workers[0].request(HandlerKind::Static, 200);
        r.workers[1].request(HandlerKind::Static, 204);
        r.workers[1].request(HandlerKind::NoRoute, 404);
        r.workers[0].request(HandlerKind::Error, 999);
        let text = r.render_prometheus();
        let requests = |labels: &str| sample(&text, &format!("pier_requests_total{{{labels}}}"));
        assert_eq!(requests("handler=\"static\",class=\"2xx\""), Some(2));
        assert_eq!(requests("handler=\"none\",class=\"4xx\""), Some(1));
        assert_eq!(requests("handler=\"error\",class=\"5xx\""), Some(1));
        assert_eq!(requests("handler=\"proxy\",class=\"2xx\""), Some(0));
    }

    #[test]
    fn latency_buckets_are_cumulative_with_inf_equal_to_count() {
        let r = Registry::new(1, vec![]);
        r.workers[0].upstream_latency(Duration::from_micros(500));
        r.workers[0].upstream_latency(Duration::from_millis(30));
        r.workers[0].upstream_latency(Duration::from_secs(60));
        let text = r.render_prometheus();
        let bucket = |le: &str| {
            sample(
                &text,
                &format!("pier_upstream_latency_seconds_bucket{{le=\"{le}\"}}"),
            )
        };
        let cumulative = ["0.001", "0.025", "0.05", "5", "+Inf"].map(bucket);
        assert_eq!(cumulative, [1, 1, 2, 2, 3].map(Some), "{text}");
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
