//! The configuration file as written: serde structs that mirror the TOML and only
//! check its shape. Values that validation may reject keep their source span, so an
//! error can name the line. A route's handler keys are that handler's own struct,
//! beside its configurator in `src/handler/`, read by the [`HandlerSpec`] the
//! route's `handler` names.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

pub use super::route_raw::{
    RawBasicAuth, RawCompressSettings, RawConditions, RawFieldValues, RawHeaderRules, RawRate,
    RawRateLimit, RawRoute, RawRouteFilters, RawStrings, RouteError, ROUTE_FILTER_KEYS,
};
pub use super::value::{RawDuration, RawSize};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// `[server]`: process-wide settings.
    #[serde(default)]
    pub server: RawServer,
    /// `[http]`: HTTP/1.1 limits and timeouts.
    #[serde(default)]
    pub http: RawHttp,
    /// `[http2]`: HTTP/2 limits.
    #[serde(default)]
    pub http2: super::http2::RawHttp2,
    /// `[http3]`: QUIC and HTTP/3 limits.
    #[serde(default)]
    pub http3: super::http3::RawHttp3,
    /// `[[listener]]`: sockets to accept on.
    #[serde(default)]
    pub listener: Vec<Spanned<RawListener>>,
    /// `[[route]]`: (host, path prefix) -> handler; read apart by
    /// [`RawRoute::from_toml`], as each handler has its own keys.
    #[serde(skip)]
    pub route: Vec<Spanned<RawRoute>>,
    /// `[[site]]`: host names, listeners and the routes that serve them; read
    /// apart by [`super::site_raw::RawSite::from_toml`].
    #[serde(skip)]
    pub site: Vec<Spanned<super::site_raw::RawSite>>,
    /// `[[upstream]]`: named groups of servers for proxy routes and tcp listeners.
    #[serde(default)]
    pub upstream: Vec<Spanned<RawUpstream>>,
    /// `[admin]`: the metrics and status listener (off when absent).
    pub admin: Option<Spanned<RawAdmin>>,
    /// `[resolver]`: where upstream names are looked up.
    pub resolver: Option<Spanned<RawResolver>>,
    /// `[access_log]`: one line per answered request (off when absent).
    pub access_log: Option<Spanned<RawAccessLog>>,
    /// `[trace]`: OpenTelemetry trace export (off when absent).
    pub trace: Option<Spanned<super::trace::RawTrace>>,
    /// `[mime]`: file extension -> Content-Type, ahead of the built-in table.
    pub mime: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// `[cache.NAME]`: HTTP cache zones that proxy routes name.
    pub cache: Option<Spanned<crate::cache::configure::RawCaches>>,
}

/// `[resolver]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawResolver {
    /// `ip` or `ip:port` (port 53 by default), asked in turn.
    pub nameservers: Option<Spanned<Vec<Spanned<String>>>>,
    /// Deadline of one query.
    pub timeout: Option<Spanned<RawDuration>>,
    /// Queries sent before a lookup fails.
    pub attempts: Option<Spanned<i64>>,
}

/// `[access_log]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAccessLog {
    /// File to append to, or `-` for standard output.
    pub path: Spanned<String>,
    /// `combined` (default) or `json`.
    pub format: Option<Spanned<String>>,
    /// Per-worker buffer: bytes, or `"64KiB"`, `"1MiB"`.
    pub buffer: Option<Spanned<RawSize>>,
    /// Longest time a line waits in a worker's buffer.
    pub flush_interval: Option<Spanned<RawDuration>>,
}

/// `[admin]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// `ip:port` serving `/metrics` and `/status`.
    pub listen: Spanned<String>,
    /// Accept a non-loopback `listen` address (metrics reveal traffic and topology).
    pub allow_remote: Option<bool>,
    /// A file holding the bearer token the runtime API's changes must carry.
    pub token_file: Option<Spanned<String>>,
    /// Whether `POST /api/config` writes the configuration file.
    pub allow_config_write: Option<bool>,
}

/// `[server]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// Worker threads; 0 or absent means one per available core.
    pub workers: Option<Spanned<i64>>,
    /// Pin worker N to CPU N.
    pub pin_cpus: Option<bool>,
    /// How long SIGTERM waits for in-flight requests.
    pub drain_timeout: Option<Spanned<RawDuration>>,
    /// Open connections allowed across all workers; 0 or absent means no limit.
    pub max_connections: Option<Spanned<i64>>,
    /// Threads of the blocking pool for file work that would wait on a disk.
    pub file_io_threads: Option<Spanned<i64>>,
    /// File jobs that may wait for a pool thread before connections wait.
    pub file_io_queue: Option<Spanned<i64>>,
    /// Longest wait for one file operation before its response ends.
    pub file_io_timeout: Option<Spanned<RawDuration>>,
}

/// `[http]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    /// Whole request head must arrive within this.
    pub header_read_timeout: Option<Spanned<RawDuration>>,
    /// Idle time allowed between keep-alive requests.
    pub keepalive_timeout: Option<Spanned<RawDuration>>,
    /// Longest gap between two reads of a request body.
    pub body_read_timeout: Option<Spanned<RawDuration>>,
    /// Longest time a response write may stall.
    pub write_timeout: Option<Spanned<RawDuration>>,
    /// Request head limit in bytes (431 beyond).
    pub max_head_bytes: Option<Spanned<RawSize>>,
    /// Header field count limit (431 beyond).
    pub max_headers: Option<Spanned<i64>>,
    /// Request-target length limit (414 beyond).
    pub max_uri_bytes: Option<Spanned<RawSize>>,
    /// Request body limit (413 beyond).
    pub max_body_bytes: Option<Spanned<RawSize>>,
    /// Proxies trusted to report the client address (PROXY header, `client_address_header`).
    pub trusted_proxies: Option<Spanned<Vec<Spanned<String>>>>,
    /// The header trusted proxies put the client address in.
    pub client_address_header: Option<Spanned<String>>,
}

/// One `[[listener]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListener {
    /// `ip:port`.
    pub listen: Spanned<String>,
    /// A name sites and routes may use for it (`listeners = ["public"]`).
    pub name: Option<Spanned<String>>,
    /// Kernel accept backlog.
    pub backlog: Option<Spanned<i64>>,
    /// TLS on this listener.
    pub tls: Option<Spanned<RawTls>>,
    /// `http` (default) or `tcp` (stream forwarding to `upstream`).
    pub kind: Option<Spanned<String>>,
    /// tcp: the upstream group connections are forwarded to.
    pub upstream: Option<Spanned<String>>,
    /// tcp: PROXY protocol header sent to the upstream (`v1` or `v2`).
    pub proxy_protocol: Option<Spanned<String>>,
    /// tcp: close a stream idle this long in both directions.
    pub idle_timeout: Option<Spanned<RawDuration>>,
    /// Expect a PROXY protocol v1 or v2 header first on every connection.
    pub accept_proxy_protocol: Option<bool>,
    /// Kernel socket options (buffers, keepalive, deferred accept, ...).
    pub socket: Option<Spanned<crate::sockopt::RawSocketOptions>>,
    /// This listener's proxies trusted to report the client address (instead
    /// of `[http]`'s).
    pub trusted_proxies: Option<Spanned<Vec<Spanned<String>>>>,
    /// The header this listener's trusted proxies put the client address in.
    pub client_address_header: Option<Spanned<String>>,
    /// TLS: protocols offered by ALPN, in order of preference.
    pub alpn: Option<Spanned<Vec<Spanned<String>>>>,
    /// Plain TCP: take HTTP/2 with prior knowledge beside HTTP/1.
    pub http2: Option<bool>,
    /// TLS: serve HTTP/3 over QUIC on the same address and port (UDP).
    pub http3: Option<bool>,
}

/// A listener with every key absent and an empty address, for flags to fill in.
impl Default for RawListener {
    fn default() -> Self {
        RawListener {
            listen: Spanned::new(0..0, String::new()),
            name: None,
            backlog: None,
            tls: None,
            kind: None,
            upstream: None,
            proxy_protocol: None,
            idle_timeout: None,
            accept_proxy_protocol: None,
            socket: None,
            trusted_proxies: None,
            client_address_header: None,
            alpn: None,
            http2: None,
            http3: None,
        }
    }
}

/// `tls = { ... }` (or `[listener.tls]`) of a listener.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    /// PEM certificate chain (shorthand for a one-entry `certificate` list).
    pub cert: Option<Spanned<String>>,
    /// PEM private key matching `cert`.
    pub key: Option<Spanned<String>>,
    /// DER OCSP response stapled with `cert`.
    pub ocsp_response: Option<Spanned<String>>,
    /// More certificates, chosen by SNI.
    pub certificate: Option<Vec<Spanned<RawCertificate>>>,
    /// Generate a self-signed certificate for localhost at start.
    pub self_signed: Option<bool>,
    /// Reject clients without SNI or with a name no certificate covers.
    pub sni_required: Option<bool>,
    /// PEM CA certificates that client certificates must chain to.
    pub client_ca: Option<Spanned<String>>,
    /// `none`, `optional` or `required`.
    pub client_auth: Option<Spanned<String>>,
    /// Stateless session tickets on or off.
    pub session_tickets: Option<bool>,
    /// Secret that ticket keys derive from, shared by a fleet.
    pub ticket_key_file: Option<Spanned<String>>,
    /// How often ticket keys change.
    pub ticket_rotation: Option<Spanned<RawDuration>>,
    /// Sessions cached per worker for resumption without tickets (0: none).
    pub session_cache: Option<Spanned<i64>>,
    /// How long a handshake may take.
    pub handshake_timeout: Option<Spanned<RawDuration>>,
    /// Accept 0-RTT early data on QUIC resumptions (safe methods only).
    pub early_data: Option<Spanned<bool>>,
    /// Certificates ordered by ACME (its own raw struct beside the ACME code).
    pub acme: Option<Spanned<crate::tls::acme::settings::RawAcme>>,
}

/// One entry of a listener's `certificate` list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCertificate {
    /// PEM certificate chain, leaf first.
    pub cert: Spanned<String>,
    /// PEM private key.
    pub key: Spanned<String>,
    /// DER OCSP response to staple.
    pub ocsp_response: Option<Spanned<String>>,
    /// SNI names served; default: the certificate's DNS names.
    pub names: Option<Spanned<Vec<String>>>,
    /// Served to clients without SNI or with an unknown name.
    pub default: Option<bool>,
}

/// One `[[upstream]]`: a named group of servers and how to use them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    /// Name routes and listeners refer to.
    pub name: Spanned<String>,
    /// `round_robin` (default), `least_conn` or `hash`.
    pub balance: Option<Spanned<String>>,
    /// hash: `client_ip`, `path` or `header:Name`.
    pub hash_key: Option<Spanned<String>>,
    /// The servers.
    #[serde(default = "no_servers")]
    pub servers: Spanned<Vec<Spanned<RawUpstreamServer>>>,
    /// An SRV record set whose targets are servers too.
    pub srv: Option<Spanned<String>>,
    /// Shortest time a DNS answer is kept.
    pub min_ttl: Option<Spanned<RawDuration>>,
    /// Longest time a DNS answer is kept.
    pub max_ttl: Option<Spanned<RawDuration>>,
    /// TLS towards the servers.
    pub tls: Option<Spanned<RawUpstreamTls>>,
    /// Deadline for a TCP (and TLS) connect.
    pub connect_timeout: Option<Spanned<RawDuration>>,
    /// Deadline for the response head after the request was sent.
    pub response_timeout: Option<Spanned<RawDuration>>,
    /// Longest gap between two reads (or writes) of a body.
    pub read_timeout: Option<Spanned<RawDuration>>,
    /// Further servers tried after a connect failure or early reset.
    pub retries: Option<Spanned<i64>>,
    /// Idle keep-alive connections kept per server, per worker.
    pub max_idle: Option<Spanned<i64>>,
    /// Idle connections kept per server, per worker, when recent load needed
    /// more than `max_idle`.
    pub max_idle_peak: Option<Spanned<i64>>,
    /// How long a peak of load is held before the idle limit halves.
    pub idle_peak_window: Option<Spanned<RawDuration>>,
    /// How long an idle pooled connection is kept.
    pub idle_timeout: Option<Spanned<RawDuration>>,
    /// Consecutive failures that mark a server down (0 = never).
    pub max_fails: Option<Spanned<i64>>,
    /// How long a server marked down by failures stays down.
    pub fail_timeout: Option<Spanned<RawDuration>>,
    /// Active health checks.
    pub health_check: Option<Spanned<RawHealthCheck>>,
    /// Requests (and tcp streams) in flight to the group, all workers together;
    /// 0 or absent means no limit.
    pub max_in_flight: Option<Spanned<i64>>,
    /// `Retry-After` sent with the 503 of a request refused at `max_in_flight`.
    pub retry_after: Option<Spanned<RawDuration>>,
    /// Kernel socket options of connections to the servers.
    pub socket: Option<Spanned<crate::sockopt::RawSocketOptions>>,
    /// `http1` (default) or `h2`: HTTP/2 by ALPN over TLS, prior knowledge
    /// over TCP.
    pub protocol: Option<Spanned<String>>,
    /// h2: streams at most on one connection before another is opened.
    pub max_streams: Option<Spanned<i64>>,
}

/// `servers` absent (a group of `srv` alone).
fn no_servers() -> Spanned<Vec<Spanned<RawUpstreamServer>>> {
    Spanned::new(0..0, Vec::new())
}

/// A group with every key absent, no name and no servers, for flags to fill in.
impl Default for RawUpstream {
    fn default() -> Self {
        RawUpstream {
            name: Spanned::new(0..0, String::new()),
            balance: None,
            hash_key: None,
            servers: no_servers(),
            srv: None,
            min_ttl: None,
            max_ttl: None,
            tls: None,
            connect_timeout: None,
            response_timeout: None,
            read_timeout: None,
            retries: None,
            max_idle: None,
            max_idle_peak: None,
            idle_peak_window: None,
            idle_timeout: None,
            max_fails: None,
            fail_timeout: None,
            health_check: None,
            max_in_flight: None,
            retry_after: None,
            socket: None,
            protocol: None,
            max_streams: None,
        }
    }
}

/// One server of an upstream group: `"host:port"`, a URL or a table, read by
/// `upstream_server.rs`.
#[derive(Debug)]
pub struct RawUpstreamServer {
    /// `host:port`, `http://host[:port]` or `https://host[:port]`, resolved at start.
    pub address: Spanned<String>,
    /// Relative share of requests (default 1).
    pub weight: Option<Spanned<i64>>,
}

/// `tls = { ... }` of an upstream group.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamTls {
    /// Server name sent (SNI) and verified; default: the server's host.
    pub sni: Option<Spanned<String>>,
    /// PEM file of trusted CA certificates; default: the system store.
    pub ca: Option<Spanned<String>>,
    /// Verify the server's certificate (default true).
    pub verify: Option<bool>,
}

/// `health_check = { ... }` of an upstream group.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHealthCheck {
    /// `http` (GET `path`, 2xx/3xx is healthy) or `tcp` (connect only).
    pub kind: Option<Spanned<String>>,
    /// http: path requested.
    pub path: Option<Spanned<String>>,
    /// Time between checks.
    pub interval: Option<Spanned<RawDuration>>,
    /// Deadline of one check.
    pub timeout: Option<Spanned<RawDuration>>,
    /// Consecutive successes that bring a server back.
    pub rise: Option<Spanned<i64>>,
    /// Consecutive failures that take a server out.
    pub fall: Option<Spanned<i64>>,
}

impl RawConfig {
    /// Every route: the top-level ones, then each site's.
    pub fn routes_mut(&mut self) -> impl Iterator<Item = &mut Spanned<RawRoute>> {
        let site_routes = self
            .site
            .iter_mut()
            .flat_map(|s| s.get_mut().routes.iter_mut().map(|(r, _)| r));
        self.route.iter_mut().chain(site_routes)
    }

    /// Makes each relative path the file names relative to `dir`, the file's own
    /// directory, so a configuration means the same whatever directory Pier is
    /// started from. A key that names a file belongs in this list.
    pub fn resolve_paths(&mut self, dir: &Path) {
        let fix = |p: &mut Spanned<String>| {
            let path = Path::new(p.get_ref());
            if !p.get_ref().is_empty() && path.is_relative() {
                *p.get_mut() = dir.join(path).display().to_string();
            }
        };
        let fix_opt = |p: &mut Option<Spanned<String>>| {
            if let Some(p) = p {
                fix(p)
            }
        };
        for l in &mut self.listener {
            let Some(tls) = l.get_mut().tls.as_mut() else {
                continue;
            };
            let tls = tls.get_mut();
            fix_opt(&mut tls.cert);
            fix_opt(&mut tls.key);
            fix_opt(&mut tls.ocsp_response);
            fix_opt(&mut tls.client_ca);
            fix_opt(&mut tls.ticket_key_file);
            if let Some(acme) = tls.acme.as_mut() {
                let acme = acme.get_mut();
                fix_opt(&mut acme.state_dir);
                fix_opt(&mut acme.ca);
            }
            for c in tls.certificate.iter_mut().flatten() {
                let c = c.get_mut();
                fix(&mut c.cert);
                fix(&mut c.key);
                fix_opt(&mut c.ocsp_response);
            }
        }
        if let Some(a) = self.admin.as_mut() {
            fix_opt(&mut a.get_mut().token_file);
        }
        for u in &mut self.upstream {
            if let Some(tls) = u.get_mut().tls.as_mut() {
                fix_opt(&mut tls.get_mut().ca);
            }
        }
        for r in self.routes_mut() {
            r.get_mut().handler.get_mut().resolve_paths(&fix);
            if let Some(auth) = r.get_mut().filters.basic_auth.as_mut() {
                fix(&mut auth.get_mut().htpasswd);
            }
        }
        if let Some(a) = self.access_log.as_mut() {
            let path = &mut a.get_mut().path;
            if path.get_ref() != "-" {
                fix(path);
            }
        }
    }
}
