//! Configuration in two stages, as ripgrep does it: [`raw`] mirrors the TOML and
//! checks only its shape; [`build`] turns it into a frozen [`Config`] with real
//! objects (socket addresses, opened roots, TLS configs), shared by `Arc`. Every
//! error names the file, the line and the key.
//!
//! This file holds the frozen types the workers read. Reading the file into
//! raw tables (each route's handler keys through the handlers' registry) and
//! the second stage, which calls every handler's configurator, sit apart in
//! `build.rs`, so nothing a worker reads depends on the handlers'
//! configuration code.

pub mod build;
pub mod error;
pub mod file_replace;
pub mod flags;
pub mod http2;
pub mod http3;
mod listener;
pub mod raw;
pub mod resolver;
pub mod route_raw;
pub mod site;
pub mod site_raw;
pub mod trace;
pub mod upstream_server;
pub mod value;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::file_io::FileIoPool;
use crate::http::client_address::ClientAddress;
use crate::http1::parse::Limits;
use crate::observe::access_log::AccessLogConfig;
use crate::proxy_protocol;
use crate::route::RouteTable;
pub use crate::tls::ListenerTls;
use crate::upstream::group::UpstreamGroup;
pub use error::{ConfigError, Locator};
pub use flags::Overrides;
pub use http2::Http2Config;
pub use http3::Http3Config;
pub use value::{
    duration, int, is_host_name, parse_duration, parse_size, read_named_file, unknown_choice,
    MAX_PEM_FILE,
};

/// The configuration used when `pier serve` runs without `--config`.
pub const EMBEDDED_DEFAULT: &str = include_str!("default.toml");

/// HTTP/1.1 limits and timeouts, frozen.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Head size, field count and URI limits for the parser.
    pub limits: Limits,
    /// Deadline for a whole request head, from its first byte (408 after).
    pub header_read_timeout: Duration,
    /// Idle time between keep-alive requests before a silent close.
    pub keepalive_timeout: Duration,
    /// Longest wait for the next piece of a request body (408 after).
    pub body_read_timeout: Duration,
    /// Longest stall of a response write before the connection is dropped.
    pub write_timeout: Duration,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            limits: Limits::default(),
            header_read_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            max_body_bytes: 1024 * 1024,
        }
    }
}

/// One listener, frozen.
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// Address to bind (every worker binds it with SO_REUSEPORT).
    pub addr: SocketAddr,
    /// The name sites and routes call it by, if it has one.
    pub name: Option<String>,
    /// Kernel accept backlog.
    pub backlog: u32,
    /// TLS termination, if any.
    pub tls: Option<ListenerTls>,
    /// A PROXY protocol header (v1 or v2) must open every connection (from a
    /// trusted proxy, when `client_address` lists any); its source address
    /// becomes the client address.
    pub accept_proxy_protocol: bool,
    /// The proxies trusted to report the client address (PROXY header,
    /// `X-Forwarded-For`, `Forwarded`): the listener's, or `[http]`'s.
    pub client_address: Arc<ClientAddress>,
    /// Stream forwarding instead of HTTP, for `kind = "tcp"`.
    pub tcp: Option<TcpForward>,
    /// Kernel socket options, set on every worker's listening socket.
    pub socket: crate::sockopt::SocketOptions,
    /// Plain TCP takes HTTP/2 with prior knowledge (`http2 = true`); on TLS,
    /// whether ALPN offers `h2`.
    pub http2: bool,
    /// HTTP/3 over QUIC on the same address and port (UDP): on by default
    /// for TLS HTTP listeners, off with `http3 = false`.
    pub http3: bool,
}

/// A `kind = "tcp"` listener's forwarding settings.
#[derive(Debug, Clone)]
pub struct TcpForward {
    /// Where streams go.
    pub group: Arc<UpstreamGroup>,
    /// PROXY protocol header sent to the upstream first, if any.
    pub send_proxy_protocol: Option<proxy_protocol::ProxyVersion>,
    /// A stream idle this long in both directions is closed.
    pub idle_timeout: Duration,
}

/// The validated, frozen configuration shared read-only by all workers.
#[derive(Debug)]
pub struct Config {
    /// Where it came from.
    pub source: String,
    /// Worker threads.
    pub workers: usize,
    /// Pin worker N to CPU N.
    pub pin_cpus: bool,
    /// Graceful shutdown deadline.
    pub drain_timeout: Duration,
    /// Open connections allowed across all workers (0: no limit); each worker
    /// gets an even share, see [`Config::max_connections_per_worker`].
    pub max_connections: usize,
    /// HTTP settings.
    pub http: HttpConfig,
    /// HTTP/2 limits.
    pub http2: Http2Config,
    /// QUIC and HTTP/3 limits.
    pub http3: Http3Config,
    /// Listeners.
    pub listeners: Vec<ListenerConfig>,
    /// Routes.
    pub routes: RouteTable,
    /// Upstream groups, in config order (indexes each worker's proxy state).
    pub upstreams: Vec<Arc<UpstreamGroup>>,
    /// Where the admin listener (`/metrics`, `/status`) binds; `None` when off.
    pub admin: Option<SocketAddr>,
    /// The access log; `None` when off (the default), which costs one branch per request.
    pub access_log: Option<AccessLogConfig>,
    /// OpenTelemetry trace export; `None` when off (the default), which costs
    /// one branch per request.
    pub trace: Option<crate::observe::trace::TraceConfig>,
    /// The blocking pool that file work which would wait on a disk runs on,
    /// shared by all workers.
    pub file_io: FileIoPool,
    /// HTTP cache zones, shared by every worker and the routes that name them.
    pub caches: Vec<Arc<crate::cache::zone::CacheZone>>,
    /// Problems a server runs with but `pier check` fails on (an error page
    /// whose file is missing), each located.
    pub findings: Vec<ConfigError>,
    /// Where upstream names are looked up (`[resolver]`).
    pub resolver: crate::upstream::resolution::ResolverSettings,
    /// The bearer token changes through the admin API must carry
    /// (`[admin] token_file`); without one, changes are taken from loopback
    /// admin listeners only.
    pub admin_token: Option<Arc<str>>,
    /// Whether `POST /api/config` writes the configuration file
    /// (`[admin] allow_config_write`).
    pub allow_config_write: bool,
    /// The text this configuration was loaded from, as `GET /api/config`
    /// shows it.
    pub text: Arc<str>,
    /// What a server runs with and `pier check` warns about without failing
    /// (an upstream name that does not resolve yet).
    pub warnings: Vec<String>,
}

impl Config {
    /// One worker's share of `max_connections`, rounded up so the workers
    /// together allow at least the configured total; 0 means no limit.
    pub fn max_connections_per_worker(&self) -> usize {
        self.max_connections.div_ceil(self.workers.max(1))
    }
}

/// For tests: both stages over `text`, read as the file `t.toml`.
#[cfg(test)]
pub fn check_text(text: &str) -> Result<Config, ConfigError> {
    build::load_str("t.toml", text)
}

#[cfg(test)]
mod tests;
