//! Upstream groups: the frozen, shared description of a group of servers (built
//! once from `[[upstream]]` by `configure.rs`), and each worker's own view of it
//! (pool, passive health, balancer state), which needs no lock because only that
//! worker touches it.
//!
//! Health is split the way it is observed: passive health (failures seen by
//! requests) is per worker, since each worker sees its own requests and marking a
//! server down there costs nothing; active health checks run in one background
//! thread per process (the health checker, `health.rs`) and publish each server's
//! state through an atomic that workers read without a lock.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;

use super::balance::{Balance, Ring, SmoothWrr};
use super::pool::Pool;

/// One server of a group.
#[derive(Debug)]
pub struct Server {
    /// Where to connect.
    pub addr: SocketAddr,
    /// The `host:port` as written, for logs and the default SNI / Host.
    pub authority: String,
    /// Relative share of requests.
    pub weight: u32,
    /// Published by the active health checker; always true without one.
    pub active_up: AtomicBool,
    /// Recent active check results, for the status page.
    pub checks: crate::observe::status::checks::CheckLog,
}

impl Server {
    /// Whether the active health check (if any) currently passes.
    pub fn actively_up(&self) -> bool {
        self.active_up.load(Ordering::Relaxed)
    }
}

/// TLS towards a group's servers.
#[derive(Clone)]
pub struct UpstreamTls {
    /// Shared client configuration (aws-lc-rs provider).
    pub config: Arc<rustls::ClientConfig>,
    /// Name sent as SNI and verified; `None` means the server's host.
    pub sni: Option<ServerName<'static>>,
}

impl std::fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("sni", &self.sni)
            .finish()
    }
}

/// The protocol spoken to a group's servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamProtocol {
    /// HTTP/1.1, one request at a time per pooled connection.
    Http1,
    /// HTTP/2 (ALPN `h2` over TLS, prior knowledge over TCP), requests
    /// multiplexed as streams over a few pooled connections; what gRPC needs.
    H2,
}

/// How a server is checked actively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckKind {
    /// `GET path`; a 2xx or 3xx status is healthy.
    Http(String),
    /// A TCP connect that succeeds is healthy.
    Tcp,
}

/// Active health check settings.
#[derive(Debug, Clone)]
pub struct HealthCheck {
    /// What a check does.
    pub kind: CheckKind,
    /// Time between checks of a server.
    pub interval: Duration,
    /// Deadline of one check.
    pub timeout: Duration,
    /// Consecutive successes that bring a server back.
    pub rise: u32,
    /// Consecutive failures that take it out.
    pub fall: u32,
}

/// A validated `[[upstream]]`, shared read-only by every worker.
#[derive(Debug)]
pub struct UpstreamGroup {
    /// Name given in the config.
    pub name: String,
    /// Position in the configuration's `upstreams` list; indexes each worker's state.
    pub index: usize,
    /// The servers, in config order.
    pub servers: Vec<Server>,
    /// Balancing method.
    pub balance: Balance,
    /// Consistent-hash ring, for `balance = "hash"`.
    pub ring: Option<Ring>,
    /// TLS towards the servers.
    pub tls: Option<UpstreamTls>,
    /// TCP (and TLS) connect deadline.
    pub connect_timeout: Duration,
    /// Deadline for the response head once the request is sent.
    pub response_timeout: Duration,
    /// Longest gap between reads or writes of a body.
    pub read_timeout: Duration,
    /// Further attempts after a connect failure or an early reset.
    pub retries: u32,
    /// Idle connections kept per server per worker.
    pub max_idle: usize,
    /// Lifetime of an idle pooled connection.
    pub idle_timeout: Duration,
    /// Consecutive failures that mark a server down (0: never).
    pub max_fails: u32,
    /// How long such a server stays down.
    pub fail_timeout: Duration,
    /// Active checks, if configured.
    pub health_check: Option<HealthCheck>,
    /// Requests (and tcp streams) in flight allowed across all workers (0: no
    /// limit); each worker gets an even share, see [`UpstreamGroup::max_in_flight_per_worker`].
    pub max_in_flight: u32,
    /// Whole seconds sent in `Retry-After` with the 503 of a refused request.
    pub retry_after: Box<str>,
    /// Kernel socket options of connections to the servers.
    pub socket: crate::sockopt::SocketOptions,
    /// Per-server counters, one block per worker, for `/metrics` and the
    /// status page; they live and die with this group.
    pub counters: crate::observe::upstream_stats::GroupCounters,
    /// HTTP/1.1 or HTTP/2 to the servers.
    pub protocol: UpstreamProtocol,
    /// h2: streams at most on one connection (fewer if the server says so);
    /// a request beyond that opens another connection.
    pub max_streams: u32,
}

impl UpstreamGroup {
    /// One worker's share of `max_in_flight`, rounded up (as `max_connections`
    /// is) so the workers together allow at least the configured total; 0
    /// means no limit. Each worker counts only its own requests, so the limit
    /// costs no shared state on the request path.
    pub fn max_in_flight_per_worker(&self, workers: usize) -> u32 {
        let workers = u32::try_from(workers.max(1)).unwrap_or(u32::MAX);
        self.max_in_flight.div_ceil(workers)
    }
}

/// A worker's state for one server: passive health and open requests.
#[derive(Debug, Default)]
pub struct ServerState {
    /// Consecutive failures seen by this worker.
    pub fails: Cell<u32>,
    /// Down (for this worker) until then, after `max_fails` failures.
    pub down_until: Cell<Option<Instant>>,
    /// Requests in flight on this server from this worker (least_conn).
    pub active: Cell<u32>,
}

/// A worker's state for one group.
pub struct GroupState {
    /// Per-server state, parallel to [`UpstreamGroup::servers`].
    pub servers: Vec<ServerState>,
    /// Keep-alive connections.
    pub pool: Pool,
    /// Multiplexed connections of an h2 group.
    pub h2: super::h2_pool::H2Pool,
    /// Smooth weighted round-robin state.
    pub wrr: RefCell<SmoothWrr>,
    /// Requests (and tcp streams) this worker has in flight to the group.
    pub in_flight: Cell<u32>,
    /// This worker's share of `max_in_flight` (0: no limit).
    pub max_in_flight: u32,
    /// This worker's per-server counters, parallel to [`UpstreamGroup::servers`].
    pub counters: Arc<[crate::observe::upstream_stats::ServerCounters]>,
}

impl GroupState {
    /// Fresh state for one of `workers` workers: everything up, nothing pooled.
    pub fn new(group: &UpstreamGroup, workers: usize) -> Self {
        GroupState {
            in_flight: Cell::new(0),
            max_in_flight: group.max_in_flight_per_worker(workers),
            servers: group
                .servers
                .iter()
                .map(|_| ServerState::default())
                .collect(),
            pool: Pool::new(group.servers.len(), group.max_idle, group.idle_timeout),
            h2: super::h2_pool::H2Pool::new(group),
            wrr: RefCell::new(SmoothWrr::new(group.servers.iter().map(|s| s.weight))),
            counters: group.counters.register(group.servers.len()),
        }
    }

    /// Whether server `i` may be given requests now.
    pub fn is_up(&self, group: &UpstreamGroup, i: usize, now: Instant) -> bool {
        if !group.servers[i].actively_up() {
            return false;
        }
        match self.servers[i].down_until.get() {
            Some(t) if now < t => false,
            Some(_) => {
                // The down time is over: give it a chance again (nginx's fail_timeout).
                self.servers[i].down_until.set(None);
                self.servers[i].fails.set(0);
                true
            }
            None => true,
        }
    }

    /// Records a failure of server `i`; returns true if it is now marked down.
    /// The only server of a group is never marked down (as in nginx): there is
    /// no other to send its requests to, and each worker marking it down on its
    /// own would make it flap long after a blip.
    pub fn record_failure(&self, group: &UpstreamGroup, i: usize, now: Instant) -> bool {
        let s = &self.servers[i];
        let fails = s.fails.get().saturating_add(1);
        s.fails.set(fails);
        if group.servers.len() > 1
            && group.max_fails > 0
            && fails >= group.max_fails
            && s.down_until.get().is_none()
        {
            s.down_until.set(Some(now + group.fail_timeout));
            if let Some(c) = self.counters.get(i) {
                c.marked_down(now + group.fail_timeout);
            }
            return true;
        }
        false
    }

    /// Records a success of server `i`: it answered, so it is up again even
    /// if it was marked down and tried because every server was.
    pub fn record_success(&self, i: usize) {
        self.servers[i].fails.set(0);
        if self.servers[i].down_until.take().is_some() {
            if let Some(c) = self.counters.get(i) {
                c.marked_up();
            }
        }
    }

    /// Counts one more request in flight to the group while the guard lives, or
    /// `None` when this worker's share of `max_in_flight` is taken.
    pub fn admit(&self) -> Option<GroupAdmission<'_>> {
        let n = self.in_flight.get();
        if self.max_in_flight > 0 && n >= self.max_in_flight {
            return None;
        }
        self.in_flight.set(n + 1);
        Some(GroupAdmission(&self.in_flight))
    }

    /// Picks a server for a request: up, not in `exclude`, by the group's method.
    /// `key` is the request's hash key (used by `hash` only). When every server not
    /// yet tried is down by passive health (failed requests), one of them is tried
    /// anyway, by the same method: a request answered 503 with nothing tried helps
    /// no one, and a server back from a blip is found at once rather than after
    /// `fail_timeout` (nginx likewise forgets its failure counts when all servers of
    /// a group failed). Servers an active health check reports down stay out: that
    /// is the operator's own probe saying so.
    pub fn pick_server(
        &self,
        group: &UpstreamGroup,
        key: u64,
        exclude: &[usize],
        now: Instant,
    ) -> Option<usize> {
        self.pick_among(group, key, |i| {
            !exclude.contains(&i) && self.is_up(group, i, now)
        })
        .or_else(|| {
            self.pick_among(group, key, |i| {
                !exclude.contains(&i) && group.servers[i].actively_up()
            })
        })
    }

    /// The group's method over the servers `eligible` allows.
    fn pick_among(
        &self,
        group: &UpstreamGroup,
        key: u64,
        eligible: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        match &group.balance {
            Balance::RoundRobin => self.wrr.borrow_mut().next(eligible),
            Balance::LeastConn => self
                .wrr
                .borrow_mut()
                .least_conn(|i| self.servers[i].active.get(), eligible),
            Balance::Hash(_) => group.ring.as_ref()?.first_eligible(key, eligible),
        }
    }
}

/// A request (or tcp stream) counted in its group's `in_flight` until dropped.
pub struct GroupAdmission<'a>(&'a Cell<u32>);

impl Drop for GroupAdmission<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Host part of `host:port` (brackets of an IPv6 literal removed).
pub fn host_of(authority: &str) -> &str {
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_of_strips_port_and_brackets() {
        assert_eq!(host_of("example.com:443"), "example.com");
        assert_eq!(host_of("[::1]:8080"), "::1");
        assert_eq!(host_of("127.0.0.1:80"), "127.0.0.1");
    }
}
