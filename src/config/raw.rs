//! The configuration file as written: serde structs that mirror the TOML and only
//! check its shape. Values that validation may reject keep their source span, so an
//! error can name the line. A route's handler keys are that handler's own struct,
//! beside its configurator in `src/handler/`, read by the [`HandlerSpec`] the
//! route's `handler` names.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use serde::de::IntoDeserializer;
use serde::Deserialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::value::one_of;
pub use super::value::{RawDuration, RawSize};
use crate::handler::configure::{HandlerSpec, RawHandler};

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
    /// `[[listener]]`: sockets to accept on.
    #[serde(default)]
    pub listener: Vec<Spanned<RawListener>>,
    /// `[[route]]`: (host, path prefix) -> handler; read apart by
    /// [`RawRoute::from_toml`], as each handler has its own keys.
    #[serde(skip)]
    pub route: Vec<Spanned<RawRoute>>,
    /// `[[upstream]]`: named groups of servers for proxy routes and tcp listeners.
    #[serde(default)]
    pub upstream: Vec<Spanned<RawUpstream>>,
    /// `[admin]`: the metrics and status listener (off when absent).
    pub admin: Option<Spanned<RawAdmin>>,
    /// `[access_log]`: one line per answered request (off when absent).
    pub access_log: Option<Spanned<RawAccessLog>>,
    /// `[mime]`: file extension -> Content-Type, ahead of the built-in table.
    pub mime: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// `[cache.NAME]`: HTTP cache zones that proxy routes name.
    pub cache: Option<Spanned<crate::cache::configure::RawCaches>>,
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
}

/// A listener with every key absent and an empty address, for flags to fill in.
impl Default for RawListener {
    fn default() -> Self {
        RawListener {
            listen: Spanned::new(0..0, String::new()),
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

/// One `[[route]]`: where it matches, and its handler with that handler's own keys.
/// Read by [`RawRoute::from_toml`] rather than a derive, so every value keeps its
/// span (serde's tagged enums buffer the input and lose them).
#[derive(Debug)]
pub struct RawRoute {
    /// Host to match (exact, case-insensitive, port ignored); absent matches any.
    pub host: Option<Spanned<String>>,
    /// Path prefix; the longest matching prefix wins.
    pub path: Option<Spanned<String>>,
    /// The `handler` key and the keys of that handler, read into the struct
    /// its [`HandlerSpec`] names; the span is the `handler` value's.
    pub handler: Spanned<Box<dyn RawHandler>>,
    /// The filters around the handler, whatever the handler.
    pub filters: RawRouteFilters,
}

/// Route keys that apply whatever the handler: the filters around it
/// (`src/filter/`), each read into its own field.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRouteFilters {
    /// Fields set, added and removed on the route's responses.
    pub response_headers: Option<Spanned<RawHeaderRules>>,
    /// Fields set, added and removed on the request sent upstream (proxy routes).
    pub request_headers: Option<Spanned<RawHeaderRules>>,
    /// Addresses and networks answered (access control).
    pub allow: Option<Spanned<Vec<Spanned<String>>>>,
    /// Addresses and networks refused with 403.
    pub deny: Option<Spanned<Vec<Spanned<String>>>>,
    /// HTTP basic authentication from an htpasswd file.
    pub basic_auth: Option<Spanned<RawBasicAuth>>,
    /// Requests per second per client.
    pub rate_limit: Option<Spanned<RawRateLimit>>,
    /// Compression of responses: `true`, or a table of settings
    /// ([`RawCompressSettings`]), read by `filter::compress_configure`.
    pub compress: Option<Spanned<toml::Value>>,
}

/// The `compress` table of a route.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCompressSettings {
    /// On (the default once the table is written) or off.
    pub enabled: Option<bool>,
    /// Codings on offer, in the order preferred on equal weights.
    pub codings: Option<Vec<String>>,
    /// Media types compressed (`text/*`, `application/*+json`).
    pub types: Option<Vec<String>>,
    /// Known-length bodies shorter than this are sent as they are.
    pub min_length: Option<crate::config::value::RawSize>,
    /// Level per coding: `{ gzip = 5, br = 4, zstd = 3 }`.
    pub levels: Option<BTreeMap<String, i64>>,
}

/// `basic_auth = { htpasswd = "...", realm = "..." }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBasicAuth {
    /// File of `user:hash` lines.
    pub htpasswd: Spanned<String>,
    /// Realm named in the challenge.
    pub realm: Option<Spanned<String>>,
}

/// `rate_limit = { rate = "10/s", burst = 20, key = "...", max_keys = ... }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRateLimit {
    /// Requests per second, or `"N/s"`, `"N/m"`, `"N/h"`.
    pub rate: Spanned<RawRate>,
    /// Requests that may arrive at once.
    pub burst: Option<Spanned<i64>>,
    /// `remote_addr` (default) or `header:Name`.
    pub key: Option<Spanned<String>>,
    /// Clients tracked at most.
    pub max_keys: Option<Spanned<i64>>,
}

/// A rate as written: a number per second, or text with a unit.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawRate {
    /// Whole requests per second.
    PerSecond(i64),
    /// Fractional requests per second.
    Fraction(f64),
    /// `"N/s"`, `"N/m"` or `"N/h"`.
    Text(String),
}

/// The keys of [`RawRouteFilters`], which a route reads apart from its handler's.
pub const ROUTE_FILTER_KEYS: &[&str] = &[
    "response_headers",
    "request_headers",
    "allow",
    "deny",
    "basic_auth",
    "rate_limit",
    "compress",
];

/// `response_headers = { ... }` or `request_headers = { ... }` of a route.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHeaderRules {
    /// Name -> value: every field of the name is replaced by this one.
    pub set: Option<BTreeMap<String, Spanned<RawFieldValues>>>,
    /// Name -> value (or list of values): sent beside fields of the same name.
    pub add: Option<BTreeMap<String, Spanned<RawFieldValues>>>,
    /// Names of fields dropped.
    pub remove: Option<Vec<Spanned<String>>>,
    /// Error answers (4xx, 5xx) get the rules too.
    pub always: Option<bool>,
}

/// One value, or several (`add` sends one field per value).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawFieldValues {
    /// One field.
    One(String),
    /// A field per element.
    Many(Vec<String>),
}

/// The keys every route has, whatever its handler.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouteMatch {
    host: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    handler: Option<Spanned<String>>,
}

impl RawRoute {
    /// Reads one `[[route]]` element: the match keys, then the keys of the handler
    /// it names (one of `handlers`), each into its own struct with its own
    /// unknown-key check.
    pub fn from_toml<'i>(
        v: Spanned<DeValue<'i>>,
        handlers: &[HandlerSpec],
    ) -> Result<Spanned<RawRoute>, RouteError> {
        let span = v.span();
        let DeValue::Table(table) = v.into_inner() else {
            return Err(de_error("a route is a table", span, ""));
        };
        let (common, own): (DeTable<'i>, DeTable<'i>) = table
            .into_iter()
            .partition(|(k, _)| matches!(k.get_ref().as_ref(), "host" | "path" | "handler"));
        let (filters, own): (DeTable<'i>, DeTable<'i>) = own
            .into_iter()
            .partition(|(k, _)| ROUTE_FILTER_KEYS.contains(&k.get_ref().as_ref()));
        let table_of = |t: DeTable<'i>| Spanned::new(span.clone(), DeValue::Table(t));
        let m = RawRouteMatch::deserialize(table_of(common).into_deserializer())?;
        let filters = RawRouteFilters::deserialize(table_of(filters).into_deserializer())?;
        let Some(handler) = m.handler else {
            // A misspelt `handler` is the likely cause: point at it.
            if let Some((k, _)) = own
                .iter()
                .find(|(k, _)| super::error::edit_distance(k.get_ref(), "handler") <= 2)
            {
                return Err(RouteError::Key {
                    message: format!(
                        "unknown field `{}`: not a key of a route; did you mean `handler`?",
                        k.get_ref()
                    ),
                    span: k.span(),
                    key: k.get_ref().to_string(),
                });
            }
            return Err(de_error(
                &format!("a route needs `handler`: {}", handler_names(handlers)),
                span,
                "handler",
            ));
        };
        let name = handler.get_ref().as_str();
        let Some(spec) = handlers.iter().find(|h| h.name == name) else {
            return Err(de_error(
                &format!(
                    "unknown handler {name:?}; expected {}",
                    handler_names(handlers)
                ),
                handler.span(),
                "handler",
            ));
        };
        let raw = match spec.read(table_of(own.clone())) {
            Ok(raw) => raw,
            Err(e) => return Err(foreign_key(name, &own, e, handlers)),
        };
        Ok(Spanned::new(
            span,
            RawRoute {
                host: m.host,
                path: m.path,
                handler: Spanned::new(handler.span(), raw),
                filters,
            },
        ))
    }
}

/// The handlers a route may name, for the errors that list them.
fn handler_names(handlers: &[HandlerSpec]) -> String {
    one_of(handlers.iter().map(|h| h.name))
}

/// An unknown key that is a key of another handler says so; other errors pass.
fn foreign_key(
    handler: &str,
    own: &DeTable<'_>,
    e: toml::de::Error,
    handlers: &[HandlerSpec],
) -> RouteError {
    let unknown = e
        .message()
        .strip_prefix("unknown field `")
        .and_then(|r| r.split_once('`'))
        .map(|(k, _)| k);
    let Some((key, value)) = unknown.and_then(|k| own.get_key_value(k)) else {
        return RouteError::Toml(e);
    };
    let alone: DeTable<'_> = std::iter::once((key.clone(), value.clone())).collect();
    let owner = handlers.iter().find(|other| {
        other.name != handler
            && other
                .read(Spanned::new(value.span(), DeValue::Table(alone.clone())))
                .is_ok()
    });
    match owner {
        Some(owner) => RouteError::Key {
            message: format!(
                "`{}` is a key of the `{}` handler; this route's handler is `{handler}`",
                key.get_ref(),
                owner.name
            ),
            span: key.span(),
            key: key.get_ref().to_string(),
        },
        None => RouteError::Toml(e),
    }
}

/// Why a `[[route]]` element could not be read.
#[derive(Debug)]
pub enum RouteError {
    /// A key or value the deserializer rejected (it carries its span).
    Toml(toml::de::Error),
    /// A route-level problem at `span`, about the route's key `key` (empty: the
    /// route itself).
    At {
        /// What is wrong.
        message: String,
        /// Where.
        span: Range<usize>,
        /// The route's key it is about, e.g. `handler`.
        key: &'static str,
    },
    /// A key the route's handler does not take, but another handler does.
    Key {
        /// What is wrong.
        message: String,
        /// The key's span.
        span: Range<usize>,
        /// The key.
        key: String,
    },
}

impl RouteError {
    /// The route's key this error is about, if it is not the route itself.
    pub fn key(&self) -> Option<&str> {
        match self {
            RouteError::Toml(_) => None,
            RouteError::At { key, .. } => Some(key),
            RouteError::Key { key, .. } => Some(key),
        }
    }
}

impl From<toml::de::Error> for RouteError {
    fn from(e: toml::de::Error) -> Self {
        RouteError::Toml(e)
    }
}

fn de_error(message: &str, span: Range<usize>, key: &'static str) -> RouteError {
    RouteError::At {
        message: message.to_string(),
        span,
        key,
    }
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

/// A group with every key absent, no name and no servers, for flags to fill in.
impl Default for RawUpstream {
    fn default() -> Self {
        RawUpstream {
            name: Spanned::new(0..0, String::new()),
            balance: None,
            hash_key: None,
            servers: Spanned::new(0..0, Vec::new()),
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
        for u in &mut self.upstream {
            if let Some(tls) = u.get_mut().tls.as_mut() {
                fix_opt(&mut tls.get_mut().ca);
            }
        }
        for r in &mut self.route {
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
