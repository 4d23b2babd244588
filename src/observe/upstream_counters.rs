//! Per-server counters of upstream groups, the figures HAProxy's stats page and
//! nginx's upstream metrics give operators: requests in flight, requests sent,
//! responses by status class, failures by cause, and response latency.
//!
//! Each worker registers one block of counters per group when it takes a
//! configuration ([`GroupCounters::register`]) and is the only writer of its
//! block, so counting is a relaxed load and store on memory no other core
//! writes: no lock and no contended read-modify-write on the request path. The
//! admin thread sums the blocks when `/metrics` (`upstream_exposition.rs`) or
//! `/status.json` is asked for. The blocks belong to the group, so they live
//! exactly as long as the configuration generation that holds it: a reload
//! starts every group at zero, and a replaced group's counters stay readable
//! while its last requests finish, then go with it.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use crate::observe::latency::{latency_bucket, whole_micros, LATENCY_BOUNDS};
use crate::observe::metrics::Counter;
use crate::upstream::error::{ErrorKind, ProxyError};

/// Why an attempt on a server failed: the `cause` label, a fixed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamFailure {
    /// The connection was refused or unreachable, or its TLS handshake failed.
    Connect,
    /// Connecting (and the TLS handshake) took longer than `connect_timeout`.
    ConnectTimeout,
    /// The server closed or reset the connection before its response head.
    Reset,
    /// The response head (or a read or write on the way) did not come in time.
    Timeout,
    /// The server answered with bytes that are not an HTTP/1.1 response.
    BadResponse,
}

impl UpstreamFailure {
    /// Every cause, in label order.
    pub const ALL: [UpstreamFailure; 5] = [
        UpstreamFailure::Connect,
        UpstreamFailure::ConnectTimeout,
        UpstreamFailure::Reset,
        UpstreamFailure::Timeout,
        UpstreamFailure::BadResponse,
    ];

    /// The Prometheus label value (and the `/status.json` key).
    pub fn label(self) -> &'static str {
        match self {
            UpstreamFailure::Connect => "connect",
            UpstreamFailure::ConnectTimeout => "connect_timeout",
            UpstreamFailure::Reset => "reset",
            UpstreamFailure::Timeout => "timeout",
            UpstreamFailure::BadResponse => "bad_response",
        }
    }

    /// The cause of a proxy failure; `connecting` says whether it happened
    /// while connecting, where a timeout is a connect timeout.
    pub fn of(e: &ProxyError, connecting: bool) -> UpstreamFailure {
        match e.kind {
            ErrorKind::Timeout if connecting => UpstreamFailure::ConnectTimeout,
            ErrorKind::Timeout => UpstreamFailure::Timeout,
            ErrorKind::Connect => UpstreamFailure::Connect,
            ErrorKind::Malformed => UpstreamFailure::BadResponse,
            _ if connecting => UpstreamFailure::Connect,
            _ => UpstreamFailure::Reset,
        }
    }
}

/// Latency buckets: one per [`LATENCY_BOUNDS`] bound, then `+Inf`.
const BUCKETS: usize = LATENCY_BOUNDS.len() + 1;

/// One worker's counters for one server. Aligned to a cache line so two
/// workers' blocks never share one.
#[repr(align(64))]
#[derive(Debug, Default)]
pub struct ServerCounters {
    in_flight: Counter,
    requests: Counter,
    responses: [Counter; 5],
    failures: [Counter; UpstreamFailure::ALL.len()],
    latency: [Counter; BUCKETS],
    latency_sum_us: Counter,
    /// Until when this worker keeps the server out after `max_fails`
    /// failures, as [`epoch_ms`]; 0 when it does not.
    marked_down_until: Counter,
}

/// Milliseconds from the first call in the process to `t`, plus one, so 0
/// can mean "never". Workers and the admin thread compare instants this way
/// through a plain integer.
pub fn epoch_ms(t: Instant) -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(t.saturating_duration_since(epoch).as_millis())
        .unwrap_or(u64::MAX - 1)
        .saturating_add(1)
}

impl ServerCounters {
    /// Passive health took the server out in this worker until `until`.
    pub fn marked_down(&self, until: Instant) {
        self.marked_down_until.set(epoch_ms(until));
    }

    /// The server answered: this worker gives it requests again.
    pub fn marked_up(&self) {
        self.marked_down_until.set(0);
    }

    /// An attempt on the server starts: one more request, one more in flight.
    #[inline]
    pub fn started(&self) {
        self.requests.add(1);
        self.in_flight.add(1);
    }

    /// A request started with [`ServerCounters::started`] is no longer in flight.
    #[inline]
    pub fn finished(&self) {
        self.in_flight.set(self.in_flight.get().saturating_sub(1));
    }

    /// The server sent a final response head with `status`, `elapsed` after
    /// the attempt started.
    #[inline]
    pub fn answered(&self, status: u16, elapsed: Duration) {
        let class = usize::from((status / 100).clamp(1, 5)) - 1;
        self.responses[class].add(1);
        self.latency[latency_bucket(elapsed)].add(1);
        self.latency_sum_us.add(whole_micros(elapsed));
    }

    /// The attempt failed for `cause`.
    #[inline]
    pub fn failed(&self, cause: UpstreamFailure) {
        self.failures[cause as usize].add(1);
    }
}

/// One server's counters summed over every worker.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ServerTotals {
    /// Requests in flight on the server now.
    pub in_flight: u64,
    /// Attempts sent to the server (a retried request counts on each server tried).
    pub requests: u64,
    /// Final responses by status class, `1xx` to `5xx`.
    pub responses: [u64; 5],
    /// Failed attempts by [`UpstreamFailure`].
    pub failures: [u64; UpstreamFailure::ALL.len()],
    /// Time to the response head, by [`LATENCY_BOUNDS`] bucket (not cumulative).
    pub latency: [u64; BUCKETS],
    /// Sum of those times, microseconds.
    pub latency_sum_us: u64,
    /// Workers keeping the server out now after `max_fails` failures.
    pub marked_down_workers: u64,
}

impl ServerTotals {
    /// Failed attempts of every cause.
    pub fn failures_total(&self) -> u64 {
        self.failures.iter().sum()
    }

    fn add(&mut self, c: &ServerCounters, now_ms: u64) {
        self.in_flight += c.in_flight.get();
        self.marked_down_workers += u64::from(c.marked_down_until.get() > now_ms);
        self.requests += c.requests.get();
        for (t, c) in self.responses.iter_mut().zip(&c.responses) {
            *t += c.get();
        }
        for (t, c) in self.failures.iter_mut().zip(&c.failures) {
            *t += c.get();
        }
        for (t, c) in self.latency.iter_mut().zip(&c.latency) {
            *t += c.get();
        }
        self.latency_sum_us += c.latency_sum_us.get();
    }
}

/// Every worker's counter blocks of one group. Workers add theirs once per
/// configuration they take (a short copy-on-write, never on the request path);
/// the admin thread loads the list without a lock.
#[derive(Debug)]
pub struct GroupCounters {
    blocks: ArcSwap<Vec<Arc<WorkerCounters>>>,
}

/// One worker's counters of a group, one per server slot; the worker adds
/// one when its group gains a server, and the blocks never move.
pub type WorkerCounters = boxcar::Vec<ServerCounters>;

impl Default for GroupCounters {
    fn default() -> Self {
        GroupCounters {
            blocks: ArcSwap::from_pointee(Vec::new()),
        }
    }
}

impl GroupCounters {
    /// A fresh block of `servers` counters for one worker, which only that
    /// worker writes.
    pub fn register(&self, servers: usize) -> Arc<WorkerCounters> {
        let block = Arc::new(WorkerCounters::new());
        for _ in 0..servers {
            block.push(ServerCounters::default());
        }
        self.blocks.rcu(|list| {
            let mut list = Vec::clone(list);
            list.push(block.clone());
            list
        });
        block
    }

    /// Each of `servers` servers' counters summed over the workers.
    pub fn totals(&self, servers: usize) -> Vec<ServerTotals> {
        let mut out = vec![ServerTotals::default(); servers];
        let now_ms = epoch_ms(Instant::now());
        for block in self.blocks.load().iter() {
            for (t, (_, c)) in out.iter_mut().zip(block.iter()) {
                t.add(c, now_ms);
            }
        }
        out
    }
}

/// An attempt on one server, counted in flight until dropped.
#[derive(Debug)]
pub struct ServerAttempt<'a> {
    counters: Option<&'a ServerCounters>,
    started: Instant,
}

impl<'a> ServerAttempt<'a> {
    /// Counts an attempt on the server whose counters are `counters` (none:
    /// counted nowhere), started at `started`.
    pub fn start(counters: Option<&'a ServerCounters>, started: Instant) -> Self {
        if let Some(c) = counters {
            c.started();
        }
        ServerAttempt { counters, started }
    }

    /// The server sent a final response head: counts its class and latency.
    pub fn answered(&self, status: u16) {
        self.answered_at(status, Instant::now());
    }

    /// [`ServerAttempt::answered`] with the head's arrival read already
    /// (`at`), so the caller's clock read serves the latency too.
    pub fn answered_at(&self, status: u16, at: Instant) {
        if let Some(c) = self.counters {
            c.answered(status, at.saturating_duration_since(self.started));
        }
    }

    /// The attempt failed with `e` (`connecting`: while connecting).
    pub fn failed(&self, e: &ProxyError, connecting: bool) {
        if let Some(c) = self.counters {
            c.failed(UpstreamFailure::of(e, connecting));
        }
    }
}

impl Drop for ServerAttempt<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.counters {
            c.finished();
        }
    }
}

/// Whether a server is down: its active check fails, or every one of
/// `workers` workers keeps it out after `max_fails` failures.
pub fn server_down(actively_up: bool, t: &ServerTotals, workers: usize) -> bool {
    !actively_up || t.marked_down_workers >= workers.max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::error::Side;

    fn error(kind: ErrorKind) -> ProxyError {
        ProxyError {
            side: Side::Upstream,
            kind,
            cause: "x".into(),
        }
    }

    #[test]
    fn failures_map_to_their_cause_by_phase() {
        let of = UpstreamFailure::of;
        assert_eq!(
            of(&error(ErrorKind::Timeout), true),
            UpstreamFailure::ConnectTimeout
        );
        assert_eq!(
            of(&error(ErrorKind::Timeout), false),
            UpstreamFailure::Timeout
        );
        assert_eq!(
            of(&error(ErrorKind::Connect), true),
            UpstreamFailure::Connect
        );
        assert_eq!(of(&error(ErrorKind::Reset), false), UpstreamFailure::Reset);
        assert_eq!(
            of(&error(ErrorKind::Malformed), false),
            UpstreamFailure::BadResponse
        );
    }

    #[test]
    fn each_worker_block_is_summed_and_in_flight_ends_with_the_attempt() {
        let group = GroupCounters::default();
        let (a, b) = (group.register(2), group.register(2));
        let t0 = Instant::now();
        {
            let first = ServerAttempt::start(a.get(0), t0);
            let second = ServerAttempt::start(b.get(0), t0);
            let third = ServerAttempt::start(b.get(1), t0);
            assert_eq!(group.totals(2)[0].in_flight, 2);
            first.answered(200);
            second.answered(503);
            third.failed(&error(ErrorKind::Reset), false);
        }
        // Past the end of a block (a server the worker does not know): nothing counted.
        drop(ServerAttempt::start(a.get(7), t0));
        b[1].failed(UpstreamFailure::Connect);
        let t = group.totals(2);
        assert_eq!(t[0].in_flight, 0);
        assert_eq!(t[0].requests, 2);
        assert_eq!(t[0].responses, [0, 1, 0, 0, 1]);
        assert_eq!(t[0].latency.iter().sum::<u64>(), 2);
        assert_eq!(t[1].requests, 1);
        assert_eq!(t[1].failures_total(), 2);
        assert_eq!(t[1].failures[UpstreamFailure::Reset as usize], 1);
        assert_eq!(t[1].failures[UpstreamFailure::Connect as usize], 1);
        assert_eq!(t[1].responses, [0; 5]);
    }

    #[test]
    fn latency_lands_in_its_bucket() {
        let c = ServerCounters::default();
        c.answered(200, Duration::from_micros(700));
        c.answered(200, Duration::from_millis(30));
        c.answered(200, Duration::from_secs(30));
        let mut t = ServerTotals::default();
        t.add(&c, epoch_ms(Instant::now()));
        assert_eq!(t.latency[0], 1);
        assert_eq!(t.latency[5], 1, "30 ms is in (25 ms, 50 ms]");
        assert_eq!(t.latency[LATENCY_BOUNDS.len()], 1);
        assert_eq!(t.latency_sum_us, 30_030_700);
    }
}
