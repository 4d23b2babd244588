//! The configuration file as written: serde structs that mirror the TOML and only
//! check its shape. Values that validation may reject keep their source span, so an
//! error can name the line.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

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
    /// `[[listener]]`: sockets to accept on.
    #[serde(default)]
    pub listener: Vec<Spanned<RawListener>>,
    /// `[[route]]`: (host, path prefix) -> handler.
    #[serde(default)]
    pub route: Vec<Spanned<RawRoute>>,
    /// `[[upstream]]`: named groups of servers for proxy routes and tcp listeners.
    #[serde(default)]
    pub upstream: Vec<Spanned<RawUpstream>>,
    /// `[admin]`: the metrics and status listener (off when absent).
    pub admin: Option<Spanned<RawAdmin>>,
    /// `[access_log]`: one line per answered request (off when absent).
    pub access_log: Option<Spanned<RawAccessLog>>,
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

/// A size written as a number of bytes or with a unit (`"64KiB"`, `"1MiB"`, `"512B"`).
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
pub enum RawSize {
    /// Bytes.
    Bytes(i64),
    /// Number with a unit suffix.
    Text(String),
}

/// `[admin]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// `ip:port` serving `/metrics` and `/status`.
    pub listen: Spanned<String>,
    /// Accept a non-loopback `listen` address (metrics reveal traffic and topology).
    pub allow_remote: Option<bool>,
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
    pub max_head_bytes: Option<Spanned<i64>>,
    /// Header field count limit (431 beyond).
    pub max_headers: Option<Spanned<i64>>,
    /// Request-target length limit (414 beyond).
    pub max_uri_bytes: Option<Spanned<i64>>,
    /// Request body limit (413 beyond).
    pub max_body_bytes: Option<Spanned<i64>>,
}

/// One `[[listener]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListener {
    /// `ip:port`.
    pub listen: Spanned<String>,
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
    /// Certificates ordered by ACME (its own raw struct beside the ACME code).
    pub acme: Option<Spanned<crate::tls::acme::RawAcme>>,
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

/// One `[[route]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoute {
    /// Host to match (exact, case-insensitive, port ignored); absent matches any.
    pub host: Option<Spanned<String>>,
    /// Path prefix; the longest matching prefix wins.
    pub path: Option<Spanned<String>>,
    /// `static` or `respond`.
    pub handler: Spanned<String>,
    /// static: document root.
    pub root: Option<Spanned<String>>,
    /// static: index file names tried for a directory.
    pub index: Option<Vec<String>>,
    /// static: HTML listing for directories without an index.
    pub autoindex: Option<bool>,
    /// static: allow symlinks that lead outside the root.
    pub allow_symlinks_outside: Option<bool>,
    /// static: how long a worker reuses an opened file before opening its path again.
    pub open_file_cache_valid: Option<Spanned<RawDuration>>,
    /// respond: status code.
    pub status: Option<Spanned<i64>>,
    /// respond: body.
    pub body: Option<String>,
    /// respond: extra header fields.
    pub headers: Option<Spanned<BTreeMap<String, String>>>,
    /// proxy: name of the `[[upstream]]` group.
    pub upstream: Option<Spanned<String>>,
    /// proxy: which forwarding headers to add (`x-forwarded`, `forwarded`, `both`, `none`).
    pub forwarded: Option<Spanned<String>>,
    /// proxy: add `Via: 1.1 pier`.
    pub via: Option<bool>,
    /// proxy: keep the client's Host (else the server's address is sent).
    pub preserve_host: Option<bool>,
    /// proxy: header carrying the client address (incoming copies removed).
    pub client_addr_header: Option<Spanned<String>>,
    /// proxy: header carrying the client certificate subject (incoming copies removed).
    pub client_cert_header: Option<Spanned<String>>,
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
    pub servers: Spanned<Vec<Spanned<RawUpstreamServer>>>,
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
}

/// One server of an upstream group.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamServer {
    /// `host:port`, resolved at start.
    pub address: Spanned<String>,
    /// Relative share of requests (default 1).
    pub weight: Option<Spanned<i64>>,
}

/// `tls = { ... }` of an upstream group.
#[derive(Debug, Deserialize)]
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

/// A duration written as `"10s"`, `"500ms"`, `"2m"`, `"1h"` or a number of seconds.
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
pub enum RawDuration {
    /// Whole seconds.
    Seconds(i64),
    /// Number with a unit suffix.
    Text(String),
}
