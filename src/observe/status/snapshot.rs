//! What the status page shows, gathered in one pass: the live counters every
//! worker publishes, the history the sampler last published, and the running
//! configuration (listeners, upstream groups, certificates).
//!
//! Gathering takes no lock: counters are relaxed atomic loads, the history and
//! the configuration are `Arc`s loaded from `ArcSwap`s. The same [`Snapshot`]
//! feeds `/status.json` (serialized as it is) and the HTML page.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::history::{Charts, Recent};
use super::upstream_rates::ServerRates;
use super::ConfigView;
use crate::config::Config;
use crate::observe::metrics::{H2Event, Registry, WorkerStats};
use crate::observe::upstream_counters::{server_down, UpstreamFailure};
use crate::upstream::balance::{Balance, HashKey};
use crate::upstream::group::{CheckKind, UpstreamGroup};
use crate::upstream::resolution::ResolutionResult;
use crate::upstream::server_table::ServerMode;

/// Certificates closer to expiry than this are shown in red.
pub const EXPIRY_WARNING: Duration = Duration::from_secs(14 * 86400);

/// The whole page's data, in the shape of `/status.json`.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// Pier's version.
    pub version: &'static str,
    /// Process ID.
    pub pid: u32,
    /// When this snapshot was taken, seconds since the Unix epoch.
    pub now_unix: u64,
    /// Seconds since the process started serving.
    pub uptime_s: u64,
    /// Configuration generation: 1 at start, one more for each applied reload.
    pub generation: u64,
    /// Where the running configuration came from.
    pub config_source: String,
    /// The last reload (`SIGHUP`), if there was one.
    pub last_reload: Option<ReloadRecord>,
    /// Listener URLs as bound.
    pub listeners: Vec<String>,
    /// Worker threads.
    pub worker_count: usize,
    /// Each worker's share of `max_connections` (0: no limit).
    pub max_connections_per_worker: usize,
    /// A key of everything whose count can change (a reload): the page reloads
    /// its tables when it differs from the one it was rendered with.
    pub layout: String,
    /// All workers together.
    pub total: WorkerView,
    /// The last minutes, all workers together, oldest first.
    pub history: HistoryView,
    /// Per worker, by index.
    pub workers: Vec<WorkerView>,
    /// Upstream groups of the running configuration, then those of replaced
    /// configurations still finishing requests (their servers are `draining`).
    pub upstreams: Vec<GroupView>,
    /// Certificates served by TLS listeners.
    pub certificates: Vec<CertView>,
    /// Cache zones of the running configuration: counters and tiers.
    pub cache_zones: Vec<crate::cache::status_view::CacheZoneView>,
}

/// The outcome of one reload.
#[derive(Debug, Clone, Serialize)]
pub struct ReloadRecord {
    /// When it happened, seconds since the Unix epoch.
    pub at_unix: u64,
    /// Whether the new configuration was applied.
    pub ok: bool,
    /// What the log said: why it failed, or where the configuration came from.
    pub message: String,
}

/// One worker's figures (or all workers' together).
#[derive(Debug, Default, Serialize)]
pub struct WorkerView {
    /// Worker index; absent for the total.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<usize>,
    /// Downstream connections open now.
    pub open: u64,
    /// Connections accepted since start.
    pub accepted: u64,
    /// Connections accepted per second over the last interval.
    pub accept_per_s: f64,
    /// Requests answered since start.
    pub requests: u64,
    /// Requests answered per second over the last interval.
    pub requests_per_s: f64,
    /// Error answers since start: 5xx and requests the driver refused.
    pub errors: u64,
    /// Error answers per second over the last interval.
    pub errors_per_s: f64,
    /// Errors over requests in the last interval (0 without requests).
    pub error_ratio: f64,
    /// Median request duration over the last interval, in milliseconds,
    /// interpolated in the request-duration histogram; none without requests.
    pub latency_p50_ms: Option<f64>,
    /// 99th percentile request duration over the last interval, in milliseconds.
    pub latency_p99_ms: Option<f64>,
    /// Accepting paused at `max_connections` now (for the total: workers paused).
    pub shedding: u64,
    /// Times accepting paused since start.
    pub shed_total: u64,
    /// HTTP bytes from clients.
    pub bytes_in: u64,
    /// HTTP bytes to clients.
    pub bytes_out: u64,
    /// TLS handshakes.
    pub tls: TlsView,
    /// HTTP/2 and HTTP/3 figures.
    pub protocols: ProtocolsView,
    /// Requests per second, oldest first (per worker only; the total's chart
    /// is in [`Snapshot::history`]).
    pub chart: Vec<f64>,
}

/// TLS handshake counts.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct TlsView {
    /// Full handshakes.
    pub full: u64,
    /// Resumed sessions (ticket or cache).
    pub resumed: u64,
    /// Failed or timed out.
    pub failed: u64,
}

/// Requests by protocol and the QUIC transport's figures.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct ProtocolsView {
    /// Requests answered over HTTP/2.
    pub http2_requests: u64,
    /// Requests answered over HTTP/3.
    pub http3_requests: u64,
    /// QUIC connections accepted for HTTP/3.
    pub quic_connections: u64,
    /// QUIC packets declared lost.
    pub quic_packets_lost: u64,
    /// Mean smoothed RTT of QUIC connections over the samples since start,
    /// in milliseconds; none before the first.
    pub quic_rtt_ms: Option<f64>,
    #[serde(skip)]
    rtt_sum_us: u64,
    #[serde(skip)]
    rtt_samples: u64,
}

impl ProtocolsView {
    fn of(w: &WorkerStats) -> ProtocolsView {
        let q = &w.quic;
        ProtocolsView {
            http2_requests: w.h2_count(H2Event::Request),
            http3_requests: q.requests.get(),
            quic_connections: q.connections.get(),
            quic_packets_lost: q.packets_lost.get(),
            quic_rtt_ms: None,
            rtt_sum_us: q.rtt_sum_us.get(),
            rtt_samples: q.rtt_samples.get(),
        }
        .with_mean_rtt()
    }

    fn add(&mut self, o: &ProtocolsView) {
        self.http2_requests += o.http2_requests;
        self.http3_requests += o.http3_requests;
        self.quic_connections += o.quic_connections;
        self.quic_packets_lost += o.quic_packets_lost;
        self.rtt_sum_us += o.rtt_sum_us;
        self.rtt_samples += o.rtt_samples;
        *self = self.with_mean_rtt();
    }

    fn with_mean_rtt(mut self) -> ProtocolsView {
        let mean_us = self.rtt_sum_us as f64 / self.rtt_samples as f64;
        self.quic_rtt_ms = micros_rounded((self.rtt_samples > 0).then_some(mean_us / 1e3));
        self
    }
}

/// The process's charts, one point per second, oldest first.
#[derive(Debug, Serialize)]
pub struct HistoryView {
    /// Seconds between points.
    pub interval_s: f64,
    /// Points a chart holds when full.
    pub capacity: usize,
    /// The charts, rates to two decimals.
    #[serde(flatten)]
    pub charts: Charts,
}

/// One upstream group.
#[derive(Debug, Serialize)]
pub struct GroupView {
    /// Name from the configuration.
    pub name: String,
    /// Configuration generation the group belongs to.
    pub generation: u64,
    /// Whether it belongs to a replaced configuration that is still draining.
    pub draining: bool,
    /// Balancing method.
    pub balance: String,
    /// How servers are checked (`GET /health every 2s`), if they are.
    pub health_check: Option<String>,
    /// The names and SRV records its servers come from, as written; empty
    /// when every server is an address.
    pub resolves: Vec<String>,
    /// Seconds since the entry resolved longest ago last resolved; `None`
    /// without names or while one never resolved.
    pub resolution_age_s: Option<f64>,
    /// Resolutions so far by result: an answer, no records, no answer.
    pub resolutions: ResolutionCounts,
    /// The servers: those configured by address, then those resolutions
    /// found (a server that left stays listed while it drains).
    pub servers: Vec<ServerView>,
}

/// A group's resolutions by result.
#[derive(Debug, Serialize)]
pub struct ResolutionCounts {
    /// An answer with at least one address.
    pub ok: u64,
    /// An answer without any (NXDOMAIN, no records).
    pub empty: u64,
    /// No answer (timeout, refused, server failure).
    pub failed: u64,
}

/// One upstream server.
#[derive(Debug, Serialize)]
pub struct ServerView {
    /// `host:port` as configured.
    pub name: String,
    /// The resolved address connected to.
    pub address: String,
    /// Relative share of requests.
    pub weight: u32,
    /// SRV priority: a higher number is a backup (0 outside SRV).
    pub priority: u32,
    /// Where it came from: `configured`, `dns` or `srv`.
    pub origin: &'static str,
    /// `up`, `down` (its active health check fails, or every worker keeps it
    /// out after `max_fails` failures), `draining` (its group belongs to a
    /// replaced configuration, an operator drains it, or its address left the
    /// DNS answer and requests are still in flight on it), `maintenance` (an
    /// operator set it aside) or `removed` (left the DNS answer, and idle).
    pub state: &'static str,
    /// `state` is `down`, for the page to flag the row.
    pub down: bool,
    /// Workers keeping the server out now after `max_fails` failures
    /// (passive health is each worker's own).
    pub marked_down_workers: u64,
    /// Recent active check results, oldest first (`true` passed); empty
    /// without checks.
    pub checks: Vec<bool>,
    /// Why the last failed check failed.
    pub last_check_error: Option<String>,
    /// Requests in flight on the server now, all workers together.
    pub in_flight: u64,
    /// Attempts sent since the configuration was loaded (a retried request
    /// counts on every server tried).
    pub requests: u64,
    /// Final responses since then, by status class.
    pub responses: ResponseClasses,
    /// Failed attempts since then, every cause together (5xx responses are
    /// answers, counted in `responses`).
    pub errors: u64,
    /// Failed attempts since then, by cause.
    pub failures: FailureCauses,
    /// Rates and latency over the last interval (rounded; in the JSON, the
    /// server's own `requests_per_s`, `errors_per_s`, `latency_p50_ms` and
    /// `latency_p99_ms`).
    #[serde(flatten)]
    pub recent: ServerRates,
}

/// Responses by status class.
#[derive(Debug, Default, Serialize)]
pub struct ResponseClasses {
    /// Informational (a `101` upgrade).
    #[serde(rename = "1xx")]
    pub informational: u64,
    /// Success.
    #[serde(rename = "2xx")]
    pub success: u64,
    /// Redirects and not-modified.
    #[serde(rename = "3xx")]
    pub redirect: u64,
    /// Client errors.
    #[serde(rename = "4xx")]
    pub client_error: u64,
    /// Server errors.
    #[serde(rename = "5xx")]
    pub server_error: u64,
}

/// Failed attempts by cause (see [`UpstreamFailure`]).
#[derive(Debug, Default, Serialize)]
pub struct FailureCauses {
    /// Refused, unreachable, or the TLS handshake failed.
    pub connect: u64,
    /// Connecting took longer than `connect_timeout`.
    pub connect_timeout: u64,
    /// Closed or reset before the response head.
    pub reset: u64,
    /// The response head did not come in time.
    pub timeout: u64,
    /// Not an HTTP/1.1 response.
    pub bad_response: u64,
}

/// One certificate of a TLS listener.
#[derive(Debug, Serialize)]
pub struct CertView {
    /// The listener's configured address.
    pub listener: String,
    /// Names it is chosen for.
    pub names: Vec<String>,
    /// Served to clients without SNI or with an unknown name.
    pub default: bool,
    /// Its `notAfter`, seconds since the Unix epoch.
    pub not_after_unix: Option<i64>,
    /// Seconds until then (negative once expired).
    pub expires_in_s: Option<i64>,
    /// Expires within 14 days (or has expired).
    pub expiring: bool,
    /// SHA-256 of the certificate (empty for an ACME name not issued yet).
    pub sha256: String,
    /// Ordered through ACME (and renewed by Pier).
    pub acme: bool,
}

/// Rounds a rate for the JSON: two decimals are more than a person reads.
fn two_decimals(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// `charts` with every rate to two decimals.
fn rounded(charts: &Charts) -> Charts {
    let rates = |chart: &[f64]| chart.iter().map(|&x| two_decimals(x)).collect();
    Charts {
        open: charts.open.clone(),
        accept_per_s: rates(&charts.accept_per_s),
        requests_per_s: rates(&charts.requests_per_s),
        errors_per_s: rates(&charts.errors_per_s),
        p99_ms: charts.p99_ms.iter().map(|x| x.map(two_decimals)).collect(),
    }
}

fn worker_view(id: Option<usize>, w: &WorkerStats) -> WorkerView {
    WorkerView {
        id,
        open: w.open.get(),
        accepted: w.accepted.get(),
        requests: w.requests_total(),
        errors: w.errors_total(),
        shedding: w.shedding.get(),
        shed_total: w.shed.get(),
        bytes_in: w.bytes_in.get(),
        bytes_out: w.bytes_out.get(),
        tls: TlsView {
            full: w.tls_full.get(),
            resumed: w.tls_resumed.get(),
            failed: w.tls_failed.get(),
        },
        protocols: ProtocolsView::of(w),
        ..WorkerView::default()
    }
}

/// Rounds a latency for the JSON: to the microsecond.
fn micros_rounded(ms: Option<f64>) -> Option<f64> {
    ms.map(|x| (x * 1000.0).round() / 1000.0)
}

fn set_rates(v: &mut WorkerView, r: &super::history::Rates) {
    v.accept_per_s = two_decimals(r.accept_per_s);
    v.requests_per_s = two_decimals(r.requests_per_s);
    v.errors_per_s = two_decimals(r.errors_per_s);
    v.latency_p50_ms = micros_rounded(r.p50_ms);
    v.latency_p99_ms = micros_rounded(r.p99_ms);
    v.error_ratio = if r.requests_per_s > 0.0 {
        (r.errors_per_s / r.requests_per_s * 10_000.0).round() / 10_000.0
    } else {
        0.0
    };
}

fn add(total: &mut WorkerView, w: &WorkerView) {
    total.open += w.open;
    total.accepted += w.accepted;
    total.requests += w.requests;
    total.errors += w.errors;
    total.shedding += w.shedding;
    total.shed_total += w.shed_total;
    total.bytes_in += w.bytes_in;
    total.bytes_out += w.bytes_out;
    total.tls.full += w.tls.full;
    total.tls.resumed += w.tls.resumed;
    total.tls.failed += w.tls.failed;
    total.protocols.add(&w.protocols);
}

fn balance_label(b: &Balance) -> String {
    match b {
        Balance::RoundRobin => "round_robin".into(),
        Balance::LeastConn => "least_conn".into(),
        Balance::Hash(HashKey::ClientIp) => "hash client_ip".into(),
        Balance::Hash(HashKey::Path) => "hash path".into(),
        Balance::Hash(HashKey::Uri) => "hash uri".into(),
        Balance::Hash(HashKey::Header(h)) => format!("hash header:{h}"),
    }
}

pub(crate) fn group_view(
    g: &UpstreamGroup,
    generation: u64,
    draining: bool,
    rates: Option<&Vec<ServerRates>>,
    workers: usize,
) -> GroupView {
    let health_check = g.health_check.as_ref().map(|hc| {
        let what = match &hc.kind {
            CheckKind::Http(path) => format!("GET {path}"),
            CheckKind::Tcp => "TCP connect".to_string(),
        };
        format!("{what} every {}", super::human::interval(hc.interval))
    });
    let totals = g.counters.totals(g.servers.len());
    let servers = g
        .servers
        .iter()
        .zip(totals)
        .enumerate()
        .map(|(i, (s, t))| {
            let mode = s.mode();
            let state = if draining
                || (!s.listed() && t.in_flight > 0)
                || (s.listed() && mode == ServerMode::Drain)
            {
                "draining"
            } else if !s.listed() {
                "removed"
            } else if mode == ServerMode::Maintenance {
                "maintenance"
            } else if server_down(s.actively_up(), &t, workers) {
                "down"
            } else {
                "up"
            };
            let r = rates.and_then(|r| r.get(i)).copied().unwrap_or_default();
            let [c1, c2, c3, c4, c5] = t.responses;
            let f = |cause: UpstreamFailure| t.failures[cause as usize];
            ServerView {
                name: s.authority.clone(),
                address: s.addr.to_string(),
                weight: s.weight(),
                priority: s.priority(),
                origin: s.origin.label(),
                state,
                down: state == "down",
                marked_down_workers: t.marked_down_workers,
                checks: s.checks.recent(),
                last_check_error: s.checks.current_failure().map(|e| e.to_string()),
                in_flight: t.in_flight,
                requests: t.requests,
                responses: ResponseClasses {
                    informational: c1,
                    success: c2,
                    redirect: c3,
                    client_error: c4,
                    server_error: c5,
                },
                errors: t.failures_total(),
                failures: FailureCauses {
                    connect: f(UpstreamFailure::Connect),
                    connect_timeout: f(UpstreamFailure::ConnectTimeout),
                    reset: f(UpstreamFailure::Reset),
                    timeout: f(UpstreamFailure::Timeout),
                    bad_response: f(UpstreamFailure::BadResponse),
                },
                recent: ServerRates {
                    requests_per_s: two_decimals(r.requests_per_s),
                    errors_per_s: two_decimals(r.errors_per_s),
                    p50_ms: micros_rounded(r.p50_ms),
                    p99_ms: micros_rounded(r.p99_ms),
                },
            }
        })
        .collect();
    GroupView {
        name: g.name.clone(),
        generation,
        draining,
        balance: balance_label(&g.balance),
        health_check,
        resolves: g
            .discovery
            .entries
            .iter()
            .map(|e| e.written.clone())
            .collect(),
        resolution_age_s: g.resolutions.oldest_age().map(two_decimals),
        resolutions: ResolutionCounts {
            ok: g.resolutions.count(ResolutionResult::Ok),
            empty: g.resolutions.count(ResolutionResult::Empty),
            failed: g.resolutions.count(ResolutionResult::Failed),
        },
        servers,
    }
}

fn cert_view(
    listener: &str,
    names: Vec<String>,
    default: bool,
    not_after_unix: Option<i64>,
    sha256: String,
    acme: bool,
    now_unix: i64,
) -> CertView {
    let expires_in_s = not_after_unix.map(|t| t - now_unix);
    CertView {
        listener: listener.to_string(),
        names,
        default,
        not_after_unix,
        expires_in_s,
        expiring: expires_in_s.is_some_and(|s| s < EXPIRY_WARNING.as_secs() as i64),
        sha256,
        acme,
    }
}

fn cert_views(config: &Config, now_unix: i64) -> Vec<CertView> {
    let mut out = Vec::new();
    for l in &config.listeners {
        let Some(tls) = &l.tls else { continue };
        let listener = l.addr.to_string();
        let acme = tls.listener.acme();
        for c in tls.listener.certificates() {
            out.push(cert_view(
                &listener,
                c.names,
                c.default,
                c.not_after_unix,
                c.fingerprint,
                acme.is_some(),
                now_unix,
            ));
        }
        // ACME names still waiting for their first certificate. The ACME
        // table's mutex is shared with the ACME thread only (a few writes a
        // day), never with a worker.
        for name in acme.iter().flat_map(|a| a.certs.names()) {
            if acme.is_some_and(|a| a.certs.current(name).is_none()) {
                out.push(cert_view(
                    &listener,
                    vec![name.clone()],
                    false,
                    None,
                    String::new(),
                    true,
                    now_unix,
                ));
            }
        }
    }
    out
}

/// Gathers everything the page shows.
pub fn take(registry: &Registry, view: &ConfigView, recent: &Recent, now: SystemTime) -> Snapshot {
    let now_unix = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut total = WorkerView::default();
    let mut workers = Vec::with_capacity(registry.workers.len());
    for (i, w) in registry.workers.iter().enumerate() {
        let mut v = worker_view(Some(i), w);
        if let Some(r) = recent.workers.get(i) {
            set_rates(&mut v, &r.now);
            v.chart = r.requests_per_s.iter().map(|&x| two_decimals(x)).collect();
        }
        add(&mut total, &v);
        workers.push(v);
    }
    set_rates(&mut total, &recent.now);
    let config = &view.current;
    let mut upstreams: Vec<GroupView> = config
        .upstreams
        .iter()
        .map(|g| {
            let rates = recent.upstreams.get(&(view.generation, g.index));
            group_view(g, view.generation, false, rates, config.workers)
        })
        .collect();
    for (generation, old) in &view.retired {
        if let Some(old) = old.upgrade() {
            upstreams.extend(old.upstreams.iter().map(|g| {
                let rates = recent.upstreams.get(&(*generation, g.index));
                group_view(g, *generation, true, rates, config.workers)
            }));
        }
    }
    let certificates = cert_views(config, now_unix as i64);
    let layout = format!(
        "{}/{}/{}/{}/{}/{}",
        view.generation,
        workers.len(),
        view.listeners.len(),
        upstreams
            .iter()
            .map(|g| format!("{}{}", g.servers.len(), if g.draining { "d" } else { "" }))
            .collect::<Vec<_>>()
            .join(","),
        certificates.len(),
        config
            .caches
            .iter()
            .map(|z| z.tiers().count().to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    Snapshot {
        version: env!("CARGO_PKG_VERSION"),
        pid: std::process::id(),
        now_unix,
        uptime_s: registry.started.elapsed().as_secs(),
        generation: view.generation,
        config_source: config.source.clone(),
        last_reload: view.last_reload.clone(),
        listeners: view.listeners.clone(),
        worker_count: workers.len(),
        max_connections_per_worker: config.max_connections_per_worker(),
        layout,
        total,
        history: HistoryView {
            interval_s: two_decimals(recent.interval_s),
            capacity: super::history::PROCESS_POINTS,
            charts: rounded(&recent.charts),
        },
        workers,
        upstreams,
        certificates,
        cache_zones: crate::cache::status_view::zone_views(&config.caches),
    }
}
