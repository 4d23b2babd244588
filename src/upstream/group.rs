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

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;

use super::balance::Balance;
use super::resolution::{Discovery, ResolutionStats};
pub use super::server_table::{Server, ServerOrigin, ServerTable};

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
    /// The servers: those configured by address, in config order, then
    /// those resolutions add.
    pub servers: ServerTable,
    /// Names and SRV records whose answers make up the rest of the servers,
    /// re-resolved as their TTLs say (`discovery.rs`).
    pub discovery: Discovery,
    /// How its resolutions went, for `/metrics` and the status page.
    pub resolutions: ResolutionStats,
    /// Balancing method.
    pub balance: Balance,
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
    /// Idle connections kept per server per worker, whatever the load.
    pub max_idle: usize,
    /// Idle connections kept per server per worker when the recent peak of
    /// requests in flight asks for more than `max_idle`.
    pub max_idle_peak: usize,
    /// How long that peak is held before it halves, each such window.
    pub idle_peak_window: Duration,
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
    pub counters: crate::observe::upstream_counters::GroupCounters,
    /// HTTP/1.1 or HTTP/2 to the servers.
    pub protocol: UpstreamProtocol,
    /// h2: streams at most on one connection (fewer if the server says so);
    /// a request beyond that opens another connection.
    pub max_streams: u32,
}

impl UpstreamGroup {
    /// The one name logs, metrics and the status page give the server at
    /// `addr`: its address as configured (`localhost:3000`), not what it
    /// resolved to. Looked up by address for the logging paths that hold only
    /// the address.
    pub fn server_name(&self, addr: SocketAddr) -> &str {
        self.servers
            .iter()
            .find(|s| s.addr == addr)
            .map_or("", |s| s.authority.as_str())
    }

    /// One worker's share of `max_in_flight`, rounded up (as `max_connections`
    /// is) so the workers together allow at least the configured total; 0
    /// means no limit. Each worker counts only its own requests, so the limit
    /// costs no shared state on the request path.
    pub fn max_in_flight_per_worker(&self, workers: usize) -> u32 {
        let workers = u32::try_from(workers.max(1)).unwrap_or(u32::MAX);
        self.max_in_flight.div_ceil(workers)
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
