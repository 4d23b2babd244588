//! Upstream groups: the frozen, shared description of a group of servers (built
//! once from `[[upstream]]`), and each worker's own view of it (pool, passive
//! health, balancer state), which needs no lock because only that worker touches it.
//!
//! Health is split the way it is observed: passive health (failures seen by
//! requests) is per worker, since each worker sees its own requests and marking a
//! server down there costs nothing; active health checks run in one background
//! thread per process (see [`super::health`]) and publish each server's state
//! through an atomic that workers read without a lock.

use std::cell::{Cell, RefCell};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use toml::Spanned;

use super::balance::{Balance, HashKey, Ring, SmoothWrr};
use super::pool::Pool;
use crate::config::error::{ConfigError, Locator};
use crate::config::raw::{RawHealthCheck, RawUpstream, RawUpstreamTls};
use crate::config::value::{duration, int, unknown_choice};
use crate::tls::any_server_cert::{AnyServerCert, HandshakeSignatures};

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
}

/// A request (or tcp stream) counted in its group's `in_flight` until dropped.
pub struct GroupAdmission<'a>(&'a Cell<u32>);

impl Drop for GroupAdmission<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Validates one `[[upstream]]` (servers resolved, TLS built).
pub fn from_raw(
    loc: &Locator<'_>,
    key: &str,
    index: usize,
    u: &Spanned<RawUpstream>,
) -> Result<UpstreamGroup, ConfigError> {
    let raw = u.get_ref();
    let name = raw.name.get_ref().clone();
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(loc.error(
            raw.name.span(),
            &format!("{key}.name"),
            format!("{name:?} is not a name (letters, digits, '-', '_', '.')"),
        ));
    }
    if raw.servers.get_ref().is_empty() {
        return Err(loc.error(
            raw.servers.span(),
            &format!("{key}.servers"),
            "an upstream needs at least one server",
        ));
    }
    let mut servers = Vec::new();
    for (i, s) in raw.servers.get_ref().iter().enumerate() {
        let skey = format!("{key}.servers[{}]", i + 1);
        let rs = s.get_ref();
        let text = rs.address.get_ref().trim().to_string();
        let addr = resolve(&text)
            .map_err(|m| loc.error(rs.address.span(), &format!("{skey}.address"), m))?;
        let weight = int(loc, &rs.weight, &format!("{skey}.weight"), 1..=1000, 1)? as u32;
        servers.push(Server {
            addr,
            authority: text,
            weight,
            active_up: AtomicBool::new(true),
            checks: Default::default(),
        });
    }
    if servers.len() > 1024 {
        return Err(loc.error(
            raw.servers.span(),
            &format!("{key}.servers"),
            "at most 1024 servers per group",
        ));
    }

    let balance = match raw.balance.as_ref().map(|b| b.get_ref().as_str()) {
        None | Some("round_robin") => Balance::RoundRobin,
        Some("least_conn") => Balance::LeastConn,
        Some("hash") => {
            let Some(k) = &raw.hash_key else {
                return Err(loc.error(
                    u.span(),
                    &format!("{key}.hash_key"),
                    "balance = \"hash\" needs hash_key (\"client_ip\", \"path\" or \"header:Name\")",
                ));
            };
            let hk = HashKey::parse(k.get_ref())
                .map_err(|m| loc.error(k.span(), &format!("{key}.hash_key"), m))?;
            Balance::Hash(hk)
        }
        Some(_) => {
            return Err(unknown_choice(
                loc,
                &raw.balance,
                &format!("{key}.balance"),
                "balance",
                &["round_robin", "least_conn", "hash"],
            ))
        }
    };
    if let (Some(k), false) = (&raw.hash_key, matches!(balance, Balance::Hash(_))) {
        return Err(loc.error(
            k.span(),
            &format!("{key}.hash_key"),
            "hash_key needs balance = \"hash\"",
        ));
    }
    let ring = matches!(balance, Balance::Hash(_))
        .then(|| Ring::new(servers.iter().map(|s| (s.authority.as_str(), s.weight))));

    let protocol = match raw.protocol.as_ref().map(|p| p.get_ref().as_str()) {
        None | Some("http1") => UpstreamProtocol::Http1,
        Some("h2") => UpstreamProtocol::H2,
        Some(other) => {
            let p = raw.protocol.as_ref().expect("matched Some");
            return Err(loc.error(
                p.span(),
                &format!("{key}.protocol"),
                format!("unknown protocol {other:?}; expected \"http1\" or \"h2\""),
            ));
        }
    };
    if let (Some(m), UpstreamProtocol::Http1) = (&raw.max_streams, protocol) {
        return Err(loc.error(
            m.span(),
            &format!("{key}.max_streams"),
            "max_streams needs protocol = \"h2\"",
        ));
    }
    let tls = match &raw.tls {
        None => None,
        Some(t) => {
            let mut tls = upstream_tls(loc, &format!("{key}.tls"), t)?;
            if protocol == UpstreamProtocol::H2 {
                // ALPN is how a TLS server agrees to HTTP/2; one that does
                // not is refused at connect rather than sent h2 frames.
                let mut config = (*tls.config).clone();
                config.alpn_protocols = vec![b"h2".to_vec()];
                tls.config = Arc::new(config);
            }
            Some(tls)
        }
    };
    let health_check = match &raw.health_check {
        None => None,
        Some(h) => Some(health_check(loc, &format!("{key}.health_check"), h)?),
    };
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let socket = crate::sockopt::options_from_raw(
        loc,
        &format!("{key}.socket"),
        raw.socket.as_ref(),
        crate::sockopt::SocketSide::Upstream(&addrs),
    )?;

    Ok(UpstreamGroup {
        name,
        index,
        servers,
        balance,
        ring,
        tls,
        connect_timeout: duration(
            loc,
            &raw.connect_timeout,
            &format!("{key}.connect_timeout"),
            Duration::from_secs(3),
        )?,
        response_timeout: duration(
            loc,
            &raw.response_timeout,
            &format!("{key}.response_timeout"),
            Duration::from_secs(60),
        )?,
        read_timeout: duration(
            loc,
            &raw.read_timeout,
            &format!("{key}.read_timeout"),
            Duration::from_secs(60),
        )?,
        retries: int(loc, &raw.retries, &format!("{key}.retries"), 0..=16, 1)? as u32,
        max_idle: int(
            loc,
            &raw.max_idle,
            &format!("{key}.max_idle"),
            0..=10_000,
            64,
        )? as usize,
        idle_timeout: duration(
            loc,
            &raw.idle_timeout,
            &format!("{key}.idle_timeout"),
            Duration::from_secs(60),
        )?,
        max_fails: int(
            loc,
            &raw.max_fails,
            &format!("{key}.max_fails"),
            0..=1000,
            1,
        )? as u32,
        fail_timeout: duration(
            loc,
            &raw.fail_timeout,
            &format!("{key}.fail_timeout"),
            Duration::from_secs(10),
        )?,
        health_check,
        max_in_flight: int(
            loc,
            &raw.max_in_flight,
            &format!("{key}.max_in_flight"),
            0..=10_000_000,
            0,
        )? as u32,
        retry_after: retry_after(loc, &raw.retry_after, &format!("{key}.retry_after"))?,
        socket,
        counters: Default::default(),
        protocol,
        max_streams: int(
            loc,
            &raw.max_streams,
            &format!("{key}.max_streams"),
            1..=10_000,
            100,
        )? as u32,
    })
}

/// `retry_after` as the whole seconds `Retry-After` carries (rounded up), 0s..1h.
fn retry_after(
    loc: &Locator<'_>,
    v: &Option<Spanned<crate::config::raw::RawDuration>>,
    key: &str,
) -> Result<Box<str>, ConfigError> {
    let d = duration(loc, v, key, Duration::from_secs(1))?;
    if let Some(v) = v.as_ref().filter(|_| d > Duration::from_secs(3600)) {
        return Err(loc.error(v.span(), key, "at most 1h"));
    }
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    Ok(secs.to_string().into_boxed_str())
}

/// `host:port` -> the first address it resolves to (at start, as nginx does).
fn resolve(text: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    let has_port = text
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
    if !has_port {
        return Err(format!("{text:?} is not host:port"));
    }
    text.to_socket_addrs()
        .map_err(|e| format!("cannot resolve {text:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{text:?} resolves to no address"))
}

/// Host part of `host:port` (brackets of an IPv6 literal removed).
pub fn host_of(authority: &str) -> &str {
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

fn upstream_tls(
    loc: &Locator<'_>,
    key: &str,
    t: &Spanned<RawUpstreamTls>,
) -> Result<UpstreamTls, ConfigError> {
    let raw = t.get_ref();
    let sni = match &raw.sni {
        None => None,
        Some(s) => Some(
            ServerName::try_from(s.get_ref().clone())
                .map_err(|e| loc.error(s.span(), &format!("{key}.sni"), e.to_string()))?,
        ),
    };
    let builder = rustls::ClientConfig::builder_with_provider(crate::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| loc.error(t.span(), key, e.to_string()))?;
    let config = if raw.verify.unwrap_or(true) {
        let mut roots = rustls::RootCertStore::empty();
        let (path, span) = match &raw.ca {
            Some(ca) => (ca.get_ref().clone(), ca.span()),
            None => (SYSTEM_CA_BUNDLE.to_string(), t.span()),
        };
        let certs = crate::tls::read_pem_certs(&path)
            .map_err(|e| loc.error(span.clone(), &format!("{key}.ca"), e))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(loc.error(
                span,
                &format!("{key}.ca"),
                format!("{path}: no usable CA certificate"),
            ));
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        // `verify = false`, for upstreams on a trusted network: any certificate,
        // but a real handshake.
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCert::new(
                crate::tls::provider(),
                HandshakeSignatures::Checked,
            )))
            .with_no_client_auth()
    };
    Ok(UpstreamTls {
        config: Arc::new(config),
        sni,
    })
}

/// Debian's bundle of the system's trusted CAs, used when `ca` is not given.
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

fn health_check(
    loc: &Locator<'_>,
    key: &str,
    h: &Spanned<RawHealthCheck>,
) -> Result<HealthCheck, ConfigError> {
    let raw = h.get_ref();
    let kind = match raw.kind.as_ref().map(|k| k.get_ref().as_str()) {
        None | Some("http") => {
            let path = raw
                .path
                .as_ref()
                .map_or_else(|| "/".to_string(), |p| p.get_ref().clone());
            if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
                let span = raw.path.as_ref().map_or(h.span(), |p| p.span());
                return Err(loc.error(
                    span,
                    &format!("{key}.path"),
                    "a path starting with '/' without spaces or control characters",
                ));
            }
            CheckKind::Http(path)
        }
        Some("tcp") => {
            if let Some(p) = &raw.path {
                return Err(loc.error(p.span(), &format!("{key}.path"), "a tcp check has no path"));
            }
            CheckKind::Tcp
        }
        Some(_) => {
            return Err(unknown_choice(
                loc,
                &raw.kind,
                &format!("{key}.kind"),
                "check kind",
                &["http", "tcp"],
            ))
        }
    };
    let interval = duration(
        loc,
        &raw.interval,
        &format!("{key}.interval"),
        Duration::from_secs(2),
    )?;
    if interval < Duration::from_millis(10) {
        let span = raw.interval.as_ref().map_or(h.span(), |i| i.span());
        return Err(loc.error(span, &format!("{key}.interval"), "at least 10ms"));
    }
    Ok(HealthCheck {
        kind,
        interval,
        timeout: duration(
            loc,
            &raw.timeout,
            &format!("{key}.timeout"),
            Duration::from_secs(1),
        )?,
        rise: int(loc, &raw.rise, &format!("{key}.rise"), 1..=100, 2)? as u32,
        fall: int(loc, &raw.fall, &format!("{key}.fall"), 1..=100, 3)? as u32,
    })
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

    #[test]
    fn resolve_needs_a_port() {
        assert!(resolve("127.0.0.1:3000").is_ok());
        assert!(resolve("localhost:3000").is_ok());
        assert!(resolve("localhost").is_err());
        assert!(resolve("127.0.0.1:99999").is_err());
    }
}
