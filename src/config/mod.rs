//! Configuration in two stages, as ripgrep does it: [`raw`] mirrors the TOML and
//! checks only its shape; [`validate`] turns it into a frozen [`Config`] with real
//! objects (socket addresses, opened roots, TLS configs), shared by `Arc`. Every
//! error names the file, the line and the key.

pub mod raw;

use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use toml::Spanned;

use crate::cli::{ServeArgs, TunnelArgs};
use crate::handler::proxy::upstream::{self, UpstreamGroup};
use crate::http1::parse::Limits;
use crate::observe::access_log::{AccessLogConfig, LogFormat, LogTarget};
use crate::proxy_protocol;
use crate::route::{BoxedHandler, RouteTable};
use raw::{
    RawAccessLog, RawAdmin, RawConfig, RawDuration, RawListener, RawRoute, RawSize, RawTls,
    RawUpstream, RawUpstreamServer,
};

/// The configuration used when `pier serve` runs without `--config`.
pub const EMBEDDED_DEFAULT: &str = include_str!("default.toml");

/// Span given to values that came from command-line flags rather than the file.
const FLAG_SPAN: Range<usize> = usize::MAX..usize::MAX;

/// A configuration error: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// File name, or `command line` for flags, or `embedded default`.
    pub file: String,
    /// 1-based line; 0 when the error is not tied to a line.
    pub line: usize,
    /// Dotted key path, e.g. `route[2].root`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "{}:{}: {}: {}",
                self.file, self.line, self.key, self.message
            )
        } else {
            write!(f, "{}: {}: {}", self.file, self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

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

/// A TLS listener's ready-to-use server configuration.
#[derive(Clone)]
pub struct ListenerTls {
    /// Certificates and rustls configuration.
    pub listener: Arc<crate::tls::TlsListener>,
    /// SHA-256 fingerprint of the default certificate, for the startup log.
    pub fingerprint: String,
    /// Where the certificate came from, for the startup log.
    pub origin: String,
    /// Deadline for a full handshake.
    pub handshake_timeout: Duration,
}

impl fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerTls")
            .field("fingerprint", &self.fingerprint)
            .field("origin", &self.origin)
            .finish()
    }
}

/// One listener, frozen.
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// Address to bind (every worker binds it with SO_REUSEPORT).
    pub addr: SocketAddr,
    /// Kernel accept backlog.
    pub backlog: u32,
    /// TLS termination, if any.
    pub tls: Option<ListenerTls>,
    /// A PROXY protocol header (v1 or v2) must open every connection; its source
    /// address becomes the client address.
    pub accept_proxy_protocol: bool,
    /// Stream forwarding instead of HTTP, for `kind = "tcp"`.
    pub tcp: Option<TcpForward>,
    /// Kernel socket options, set on every worker's listening socket.
    pub socket: crate::sockopt::SocketOptions,
}

/// A `kind = "tcp"` listener's forwarding settings.
#[derive(Debug, Clone)]
pub struct TcpForward {
    /// Where streams go.
    pub group: Arc<UpstreamGroup>,
    /// PROXY protocol header sent to the upstream first, if any.
    pub send_proxy_protocol: Option<proxy_protocol::Version>,
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
}

impl Config {
    /// One worker's share of `max_connections`, rounded up so the workers
    /// together allow at least the configured total; 0 means no limit.
    pub fn max_connections_per_worker(&self) -> usize {
        self.max_connections.div_ceil(self.workers.max(1))
    }
}

/// Loads the file named by `args.config`, or the embedded default, and applies flags.
pub fn load(args: &ServeArgs) -> Result<Config, ConfigError> {
    let (name, text) = match &args.config {
        Some(path) => (path.display().to_string(), read_file(path)?),
        None => ("embedded default".to_string(), EMBEDDED_DEFAULT.to_string()),
    };
    let mut raw = parse(&name, &text)?;
    apply_flags(&mut raw, args, args.config.is_none())?;
    validate(&name, &text, raw)
}

/// Builds the configuration of `pier tunnel` from its flags: one `tcp` listener
/// (TLS when a certificate is given) forwarding to one upstream. It goes through
/// the same validation as a file, so errors name the flag's key.
pub fn tunnel(args: &TunnelArgs) -> Result<Config, ConfigError> {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut text = String::from("[server]\n");
    if let Some(w) = args.workers {
        text.push_str(&format!("workers = {w}\n"));
    }
    if args.pin_cpus {
        text.push_str("pin_cpus = true\n");
    }
    text.push_str(&format!(
        "[[listener]]\nlisten = {}\nkind = \"tcp\"\nupstream = \"tunnel\"\n",
        q(&args.listen.to_string())
    ));
    if let (Some(c), Some(k)) = (&args.tls_cert, &args.tls_key) {
        text.push_str(&format!(
            "tls = {{ cert = {}, key = {} }}\n",
            q(&c.display().to_string()),
            q(&k.display().to_string())
        ));
    }
    if let Some(v) = &args.proxy_protocol {
        text.push_str(&format!("proxy_protocol = {}\n", q(v)));
    }
    if let Some(d) = &args.idle_timeout {
        text.push_str(&format!("idle_timeout = {}\n", q(d)));
    }
    text.push_str(&format!(
        "[[upstream]]\nname = \"tunnel\"\nservers = [{{ address = {} }}]\n",
        q(&args.to)
    ));
    let name = "pier tunnel flags";
    let raw = parse(name, &text)?;
    validate(name, &text, raw)
}

/// Loads and validates a file without flags (for `pier check`).
pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
    let name = path.display().to_string();
    let text = read_file(path)?;
    load_str(&name, &text)
}

/// Parses and validates configuration text; `name` is the origin that errors
/// name (a file name, or whatever the text came from).
pub fn load_str(name: &str, text: &str) -> Result<Config, ConfigError> {
    let raw = parse(name, text)?;
    validate(name, text, raw)
}

fn read_file(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.display().to_string(),
        line: 0,
        key: "--config".into(),
        message: format!("cannot read: {e}"),
    })
}

/// Largest certificate chain, key or CA bundle a configuration may name (the
/// system CA bundle is about 200 KiB).
pub const MAX_PEM_FILE: u64 = 8 << 20;

/// Reads a file the configuration names (certificate, key, CA bundle, OCSP
/// response, ticket key) whole. It must be a regular file of at most `limit`
/// bytes, so a path such as `/dev/zero`, `/dev/stdin` or a FIFO is an error
/// rather than an endless read or a hang.
pub fn read_named_file(path: &str, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    if !std::fs::metadata(path)?.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(bytes)
}

/// Parses TOML text into the raw structs, mapping syntax and shape errors to a line and key.
pub fn parse(name: &str, text: &str) -> Result<RawConfig, ConfigError> {
    toml::from_str::<RawConfig>(text).map_err(|e| {
        let offset = e.span().map(|s| s.start).unwrap_or(0);
        let (line, key) = locate_key(text, offset);
        ConfigError {
            file: name.to_string(),
            line,
            key,
            message: e.message().trim().to_string(),
        }
    })
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The line of `offset` and the dotted key written there: the nearest table
/// header above it joined with the `key =` on that line.
fn locate_key(text: &str, offset: usize) -> (usize, String) {
    let line = line_of(text, offset);
    let lines: Vec<&str> = text.lines().collect();
    let mut table = String::new();
    // Elements seen per array of tables, by dotted path; a nested array
    // (`[[listener.tls.certificate]]`) counts afresh in each parent element.
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    for l in lines.iter().take(line) {
        let t = l.trim();
        if let Some(name) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let name = name.trim().to_string();
            let nested = format!("{name}.");
            counts.retain(|k, _| !k.starts_with(&nested));
            *counts.entry(name.clone()).or_insert(0) += 1;
            table = qualify(&name, &counts);
        } else if let Some(name) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
            table = qualify(name.trim(), &counts);
        }
    }
    let here = lines
        .get(line.saturating_sub(1))
        .copied()
        .unwrap_or("")
        .trim();
    let key = if here.starts_with('[') {
        String::new()
    } else {
        here.split('=')
            .next()
            .unwrap_or("")
            .trim()
            .trim_matches('"')
            .to_string()
    };
    let full = match (table.is_empty(), key.is_empty()) {
        (true, true) => "(top level)".to_string(),
        (true, false) => key,
        (false, true) => table,
        (false, false) => format!("{table}.{key}"),
    };
    (line, full)
}

/// `listener.tls.certificate` -> `listener[2].tls.certificate[1]`: each array
/// of tables on the path gets the index of its current element.
fn qualify(path: &str, counts: &std::collections::HashMap<String, usize>) -> String {
    let mut raw = String::new();
    let mut out = String::new();
    for part in path.split('.') {
        let part = part.trim();
        if !raw.is_empty() {
            raw.push('.');
            out.push('.');
        }
        raw.push_str(part);
        out.push_str(part);
        if let Some(n) = counts.get(&raw) {
            out.push_str(&format!("[{n}]"));
        }
    }
    out
}

fn flag<T>(value: T) -> Spanned<T> {
    Spanned::new(FLAG_SPAN, value)
}

/// Applies command-line overrides to the raw configuration.
fn apply_flags(raw: &mut RawConfig, args: &ServeArgs, embedded: bool) -> Result<(), ConfigError> {
    if !args.listen.is_empty() {
        raw.listener.retain(|l| l.get_ref().tls.is_some());
        let plain = args.listen.iter().map(|a| {
            flag(RawListener {
                listen: flag(a.to_string()),
                backlog: None,
                tls: None,
                kind: None,
                upstream: None,
                proxy_protocol: None,
                idle_timeout: None,
                accept_proxy_protocol: None,
                socket: None,
            })
        });
        let tls: Vec<_> = std::mem::take(&mut raw.listener);
        raw.listener = plain.chain(tls).collect();
    }
    if embedded {
        if args.no_tls {
            raw.listener.retain(|l| l.get_ref().tls.is_none());
        }
        for l in raw.listener.iter_mut() {
            let l = l.get_mut();
            if let Some(tls) = l.tls.as_mut() {
                if let Some(addr) = args.tls_listen {
                    l.listen = flag(addr.to_string());
                }
                if let (Some(c), Some(k)) = (&args.tls_cert, &args.tls_key) {
                    *tls = flag(RawTls {
                        cert: Some(flag(c.display().to_string())),
                        key: Some(flag(k.display().to_string())),
                        ..Default::default()
                    });
                }
            }
        }
    }
    if let Some(root) = &args.root {
        for r in raw.route.iter_mut() {
            let r = r.get_mut();
            if r.handler.get_ref() == "static" {
                r.root = Some(flag(root.display().to_string()));
            }
        }
    }
    if let Some(w) = args.workers {
        raw.server.workers = Some(flag(w as i64));
    }
    if args.pin_cpus {
        raw.server.pin_cpus = Some(true);
    }
    if let Some(url) = &args.proxy {
        apply_proxy_flag(raw, url)?;
    }
    if let Some(path) = &args.access_log {
        let kept = raw.access_log.take().map(|a| a.into_inner());
        raw.access_log = Some(flag(RawAccessLog {
            path: flag(path.clone()),
            format: args
                .access_log_format
                .map(|f| flag(f.as_config().to_string()))
                .or_else(|| kept.as_ref().and_then(|k| k.format.clone())),
            buffer: kept.as_ref().and_then(|k| k.buffer.clone()),
            flush_interval: kept.and_then(|k| k.flush_interval),
        }));
    }
    if let Some(addr) = args.admin {
        let allow_remote = raw.admin.as_ref().and_then(|a| a.get_ref().allow_remote);
        raw.admin = Some(flag(RawAdmin {
            listen: flag(addr.to_string()),
            allow_remote,
        }));
    }
    Ok(())
}

/// `--proxy http://host:port` (or `https://`): every request goes to that server.
fn apply_proxy_flag(raw: &mut RawConfig, url: &str) -> Result<(), ConfigError> {
    let bad = |m: &str| ConfigError {
        file: "command line".into(),
        line: 0,
        key: "--proxy".into(),
        message: format!("{url:?}: {m}"),
    };
    let (tls, rest) = if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else {
        return Err(bad("expected http://host:port or https://host:port"));
    };
    let authority = rest.split('/').next().unwrap_or("");
    if authority.is_empty() {
        return Err(bad("no host"));
    }
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && !h.ends_with('[') && p.parse::<u16>().is_ok());
    let address = if has_port {
        authority.to_string()
    } else if tls {
        format!("{authority}:443")
    } else {
        format!("{authority}:80")
    };
    let name = "proxy".to_string();
    raw.upstream.retain(|u| u.get_ref().name.get_ref() != &name);
    raw.upstream.push(flag(RawUpstream {
        name: flag(name.clone()),
        balance: None,
        hash_key: None,
        servers: flag(vec![flag(RawUpstreamServer {
            address: flag(address),
            weight: None,
        })]),
        tls: tls.then(|| {
            flag(raw::RawUpstreamTls {
                sni: None,
                ca: None,
                verify: None,
            })
        }),
        connect_timeout: None,
        response_timeout: None,
        read_timeout: None,
        retries: None,
        max_idle: None,
        idle_timeout: None,
        max_fails: None,
        fail_timeout: None,
        health_check: None,
        max_in_flight: None,
        retry_after: None,
        socket: None,
    }));
    raw.route = vec![flag(RawRoute {
        host: None,
        path: None,
        handler: flag("proxy".to_string()),
        root: None,
        index: None,
        autoindex: None,
        allow_symlinks_outside: None,
        open_file_cache_valid: None,
        status: None,
        body: None,
        headers: None,
        upstream: Some(flag(name)),
        forwarded: None,
        via: None,
        preserve_host: None,
        client_addr_header: None,
        client_cert_header: None,
    })];
    Ok(())
}

/// Builds errors that point into one source text.
pub struct Locator<'a> {
    name: &'a str,
    text: &'a str,
}

impl Locator<'_> {
    /// An error at `span` about `key`.
    pub fn error(&self, span: Range<usize>, key: &str, message: impl Into<String>) -> ConfigError {
        if span == FLAG_SPAN {
            return ConfigError {
                file: "command line".into(),
                line: 0,
                key: key.to_string(),
                message: message.into(),
            };
        }
        ConfigError {
            file: self.name.to_string(),
            line: line_of(self.text, span.start),
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// A duration setting, or `default` when absent.
pub fn duration(
    loc: &Locator<'_>,
    v: &Option<Spanned<RawDuration>>,
    key: &str,
    default: Duration,
) -> Result<Duration, ConfigError> {
    let Some(v) = v else { return Ok(default) };
    parse_duration(v.get_ref()).map_err(|m| loc.error(v.span(), key, m))
}

/// Parses `"10s"`, `"250ms"`, `"2m"`, `"1h"` or whole seconds.
pub fn parse_duration(v: &RawDuration) -> Result<Duration, String> {
    match v {
        RawDuration::Seconds(s) if *s >= 0 => Ok(Duration::from_secs(*s as u64)),
        RawDuration::Seconds(s) => Err(format!("duration must not be negative, got {s}")),
        RawDuration::Text(t) => {
            let t = t.trim();
            let split = t
                .find(|c: char| !c.is_ascii_digit() && c != '.')
                .unwrap_or(t.len());
            let (num, unit) = t.split_at(split);
            let n: f64 = num.parse().map_err(|_| {
                format!("invalid duration {t:?}; write e.g. \"10s\", \"250ms\", \"2m\"")
            })?;
            let secs = match unit.trim() {
                "ms" => n / 1000.0,
                "s" | "" => n,
                "m" => n * 60.0,
                "h" => n * 3600.0,
                u => return Err(format!("unknown duration unit {u:?}; use ms, s, m or h")),
            };
            if !secs.is_finite() || secs > 1e9 {
                return Err(format!("duration {t:?} out of range"));
            }
            Ok(Duration::from_secs_f64(secs))
        }
    }
}

/// An integer setting within `range`, or `default` when absent.
pub fn int(
    loc: &Locator<'_>,
    v: &Option<Spanned<i64>>,
    key: &str,
    range: std::ops::RangeInclusive<i64>,
    default: i64,
) -> Result<i64, ConfigError> {
    let Some(v) = v else { return Ok(default) };
    let n = *v.get_ref();
    if !range.contains(&n) {
        return Err(loc.error(
            v.span(),
            key,
            format!("{n} is out of range {}..={}", range.start(), range.end()),
        ));
    }
    Ok(n)
}

/// Second stage: raw -> frozen, building real objects and checking every value.
pub fn validate(name: &str, text: &str, raw: RawConfig) -> Result<Config, ConfigError> {
    let loc = Locator { name, text };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = match int(&loc, &raw.server.workers, "server.workers", 0..=1024, 0)? {
        0 => cores,
        n => n as usize,
    };
    let drain_timeout = duration(
        &loc,
        &raw.server.drain_timeout,
        "server.drain_timeout",
        Duration::from_secs(10),
    )?;
    let max_connections = int(
        &loc,
        &raw.server.max_connections,
        "server.max_connections",
        0..=100_000_000,
        0,
    )? as usize;

    let d = HttpConfig::default();
    let h = &raw.http;
    let http = HttpConfig {
        limits: Limits {
            max_head_bytes: int(
                &loc,
                &h.max_head_bytes,
                "http.max_head_bytes",
                1024..=(1 << 24),
                d.limits.max_head_bytes as i64,
            )? as usize,
            max_headers: int(
                &loc,
                &h.max_headers,
                "http.max_headers",
                1..=10_000,
                d.limits.max_headers as i64,
            )? as usize,
            max_uri_bytes: int(
                &loc,
                &h.max_uri_bytes,
                "http.max_uri_bytes",
                16..=(1 << 20),
                d.limits.max_uri_bytes as i64,
            )? as usize,
        },
        header_read_timeout: duration(
            &loc,
            &h.header_read_timeout,
            "http.header_read_timeout",
            d.header_read_timeout,
        )?,
        keepalive_timeout: duration(
            &loc,
            &h.keepalive_timeout,
            "http.keepalive_timeout",
            d.keepalive_timeout,
        )?,
        body_read_timeout: duration(
            &loc,
            &h.body_read_timeout,
            "http.body_read_timeout",
            d.body_read_timeout,
        )?,
        write_timeout: duration(
            &loc,
            &h.write_timeout,
            "http.write_timeout",
            d.write_timeout,
        )?,
        max_body_bytes: int(
            &loc,
            &h.max_body_bytes,
            "http.max_body_bytes",
            0..=i64::MAX,
            d.max_body_bytes as i64,
        )? as u64,
    };

    let mut upstreams: Vec<Arc<UpstreamGroup>> = Vec::new();
    for (i, u) in raw.upstream.iter().enumerate() {
        let key = format!("upstream[{}]", i + 1);
        let group = upstream::from_raw(&loc, &key, i, u)?;
        if upstreams.iter().any(|g| g.name == group.name) {
            return Err(loc.error(
                u.get_ref().name.span(),
                &format!("{key}.name"),
                format!("upstream {:?} is defined twice", group.name),
            ));
        }
        upstreams.push(Arc::new(group));
    }

    if raw.listener.is_empty() {
        return Err(loc.error(0..0, "listener", "no [[listener]] configured"));
    }
    let mut listeners = Vec::new();
    for (i, l) in raw.listener.iter().enumerate() {
        let key = format!("listener[{}]", i + 1);
        listeners.push(validate_listener(&loc, &key, l, &upstreams)?);
    }
    for (i, a) in listeners.iter().enumerate() {
        if listeners[..i]
            .iter()
            .any(|b| b.addr == a.addr && a.addr.port() != 0)
        {
            let span = raw.listener[i].get_ref().listen.span();
            return Err(loc.error(
                span,
                &format!("listener[{}].listen", i + 1),
                format!("{} is listed twice", a.addr),
            ));
        }
    }

    let mut routes = RouteTable::default();
    routes.insert_pre_route(crate::handler::acme_challenge::AcmeChallenge::pre_route());
    let http_listeners = listeners.iter().any(|l| l.tcp.is_none());
    if raw.route.is_empty() && http_listeners {
        return Err(loc.error(0..0, "route", "no [[route]] configured"));
    }
    for (i, r) in raw.route.iter().enumerate() {
        let key = format!("route[{}]", i + 1);
        let (host, path, handler) = validate_route(&loc, &key, r, &upstreams)?;
        if let Err(msg) = routes.insert(host, path, handler) {
            return Err(loc.error(r.span(), &key, msg));
        }
    }

    let admin = raw
        .admin
        .as_ref()
        .map(|a| validate_admin(&loc, a.get_ref()))
        .transpose()?;
    let access_log = raw
        .access_log
        .as_ref()
        .map(|a| validate_access_log(&loc, a.get_ref()))
        .transpose()?;

    Ok(Config {
        source: name.to_string(),
        workers,
        pin_cpus: raw.server.pin_cpus.unwrap_or(false),
        drain_timeout,
        max_connections,
        http,
        listeners,
        routes,
        upstreams,
        admin,
        access_log,
    })
}

/// `[access_log]`: the target must be named; format, buffer and interval have defaults.
fn validate_access_log(
    loc: &Locator<'_>,
    raw: &RawAccessLog,
) -> Result<AccessLogConfig, ConfigError> {
    let target = match raw.path.get_ref().as_str() {
        "" => {
            return Err(loc.error(
                raw.path.span(),
                "access_log.path",
                "must name a file, or \"-\" for standard output",
            ))
        }
        "-" => LogTarget::Stdout,
        p => LogTarget::File(p.into()),
    };
    let format = match raw
        .format
        .as_ref()
        .map(|f| (f.get_ref().as_str(), f.span()))
    {
        None | Some(("combined", _)) => LogFormat::Combined,
        Some(("json", _)) => LogFormat::Json,
        Some((other, span)) => {
            return Err(loc.error(
                span,
                "access_log.format",
                format!("unknown format {other:?}; use \"combined\" or \"json\""),
            ))
        }
    };
    let buffer = match &raw.buffer {
        None => 64 * 1024,
        Some(b) => parse_size(b.get_ref())
            .and_then(|n| {
                if (1..=64 << 20).contains(&n) {
                    Ok(n as usize)
                } else {
                    Err(format!("{n} bytes is out of range 1..=64MiB"))
                }
            })
            .map_err(|m| loc.error(b.span(), "access_log.buffer", m))?,
    };
    let flush_interval = duration(
        loc,
        &raw.flush_interval,
        "access_log.flush_interval",
        Duration::from_secs(1),
    )?;
    if flush_interval.is_zero() {
        let span = raw.flush_interval.as_ref().map_or(0..0, |f| f.span());
        return Err(loc.error(span, "access_log.flush_interval", "must be above zero"));
    }
    Ok(AccessLogConfig {
        target,
        format,
        buffer,
        flush_interval,
    })
}

/// Parses `65536`, `"512B"`, `"64KiB"` (or `"64K"`, `"64k"`), `"1MiB"` (or `"1M"`).
pub fn parse_size(v: &RawSize) -> Result<u64, String> {
    match v {
        RawSize::Bytes(n) if *n >= 0 => Ok(*n as u64),
        RawSize::Bytes(n) => Err(format!("size must not be negative, got {n}")),
        RawSize::Text(t) => {
            let t = t.trim();
            let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
            let (num, unit) = t.split_at(split);
            let n: u64 = num
                .parse()
                .map_err(|_| format!("invalid size {t:?}; write e.g. \"64KiB\" or 65536"))?;
            let mult: u64 = match unit.trim() {
                "" | "B" => 1,
                "K" | "k" | "KB" | "KiB" => 1 << 10,
                "M" | "m" | "MB" | "MiB" => 1 << 20,
                u => return Err(format!("unknown size unit {u:?}; use B, KiB or MiB")),
            };
            n.checked_mul(mult)
                .ok_or_else(|| format!("size {t:?} out of range"))
        }
    }
}

/// `[admin]`: metrics expose traffic and topology, so only loopback unless the
/// file says otherwise in so many words.
fn validate_admin(loc: &Locator<'_>, raw: &RawAdmin) -> Result<SocketAddr, ConfigError> {
    let addr: SocketAddr = raw.listen.get_ref().parse().map_err(|_| {
        loc.error(
            raw.listen.span(),
            "admin.listen",
            format!("`{}` is not an ip:port address", raw.listen.get_ref()),
        )
    })?;
    if !addr.ip().is_loopback() && raw.allow_remote != Some(true) {
        return Err(loc.error(
            raw.listen.span(),
            "admin.listen",
            format!(
                "{addr} is not a loopback address; set admin.allow_remote = true to serve metrics beyond this host"
            ),
        ));
    }
    Ok(addr)
}

fn validate_listener(
    loc: &Locator<'_>,
    key: &str,
    l: &Spanned<RawListener>,
    upstreams: &[Arc<UpstreamGroup>],
) -> Result<ListenerConfig, ConfigError> {
    let raw = l.get_ref();
    let addr: SocketAddr = raw.listen.get_ref().parse().map_err(|_| {
        loc.error(
            raw.listen.span(),
            &format!("{key}.listen"),
            format!("{:?} is not an ip:port address", raw.listen.get_ref()),
        )
    })?;
    let backlog = int(
        loc,
        &raw.backlog,
        &format!("{key}.backlog"),
        1..=65535,
        4096,
    )? as u32;
    let tls = match &raw.tls {
        None => None,
        Some(t) => Some(crate::tls::listener_tls(loc, &format!("{key}.tls"), t)?),
    };
    let tcp = match raw.kind.as_ref().map(|k| k.get_ref().as_str()) {
        None | Some("http") => {
            for (present, name) in [
                (raw.upstream.as_ref().map(|u| u.span()), "upstream"),
                (
                    raw.proxy_protocol.as_ref().map(|u| u.span()),
                    "proxy_protocol",
                ),
                (raw.idle_timeout.as_ref().map(|u| u.span()), "idle_timeout"),
            ] {
                if let Some(span) = present {
                    return Err(loc.error(
                        span,
                        &format!("{key}.{name}"),
                        "only a kind = \"tcp\" listener takes this key",
                    ));
                }
            }
            None
        }
        Some("tcp") => {
            let Some(name) = &raw.upstream else {
                return Err(loc.error(
                    l.span(),
                    &format!("{key}.upstream"),
                    "a tcp listener needs `upstream`",
                ));
            };
            let Some(group) = upstreams.iter().find(|g| g.name == *name.get_ref()) else {
                return Err(loc.error(
                    name.span(),
                    &format!("{key}.upstream"),
                    format!("no [[upstream]] named {:?}", name.get_ref()),
                ));
            };
            let send_proxy_protocol = match &raw.proxy_protocol {
                None => None,
                Some(v) => Some(
                    proxy_protocol::Version::parse(v.get_ref())
                        .map_err(|m| loc.error(v.span(), &format!("{key}.proxy_protocol"), m))?,
                ),
            };
            let idle_timeout = match &raw.idle_timeout {
                None => Duration::from_secs(300),
                Some(d) => parse_duration(d.get_ref())
                    .map_err(|m| loc.error(d.span(), &format!("{key}.idle_timeout"), m))?,
            };
            Some(TcpForward {
                group: group.clone(),
                send_proxy_protocol,
                idle_timeout,
            })
        }
        Some(other) => {
            let k = raw.kind.as_ref().expect("matched Some");
            return Err(loc.error(
                k.span(),
                &format!("{key}.kind"),
                format!("unknown listener kind {other:?}; expected \"http\" or \"tcp\""),
            ));
        }
    };
    Ok(ListenerConfig {
        addr,
        backlog,
        tls,
        accept_proxy_protocol: raw.accept_proxy_protocol.unwrap_or(false),
        tcp,
        socket: crate::sockopt::from_raw(
            loc,
            &format!("{key}.socket"),
            raw.socket.as_ref(),
            crate::sockopt::SocketSide::Listener(addr),
        )?,
    })
}

fn validate_route(
    loc: &Locator<'_>,
    key: &str,
    r: &Spanned<RawRoute>,
    upstreams: &[Arc<UpstreamGroup>],
) -> Result<(Option<String>, String, BoxedHandler), ConfigError> {
    let raw = r.get_ref();
    let host = match &raw.host {
        None => None,
        Some(h) => {
            let v = h.get_ref().trim().to_ascii_lowercase();
            if v.is_empty()
                || !v
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
            {
                return Err(loc.error(
                    h.span(),
                    &format!("{key}.host"),
                    format!("{:?} is not a host name", h.get_ref()),
                ));
            }
            Some(v)
        }
    };
    let path = match &raw.path {
        None => "/".to_string(),
        Some(p) => {
            if !p.get_ref().starts_with('/') {
                return Err(loc.error(
                    p.span(),
                    &format!("{key}.path"),
                    "a path prefix must start with '/'",
                ));
            }
            p.get_ref().clone()
        }
    };
    let handler = crate::handler::from_raw(loc, key, r, upstreams)?;
    Ok((host, path, handler))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<Config, ConfigError> {
        let raw = parse("t.toml", text)?;
        validate("t.toml", text, raw)
    }

    #[test]
    fn files_named_by_the_config_are_read_bounded() {
        // Each of these once read /dev/zero until memory ran out.
        let listener = "[[listener]]\nlisten = \"127.0.0.1:1\"\n";
        let route = "[[route]]\nhandler = \"respond\"\n";
        for (tls, key) in [
            (
                "{ self_signed = true, ticket_key_file = \"/dev/zero\" }",
                "listener[1].tls.ticket_key_file",
            ),
            (
                "{ cert = \"/dev/zero\", key = \"/dev/zero\" }",
                "listener[1].tls.cert",
            ),
            (
                "{ self_signed = true, client_auth = \"required\", client_ca = \"/dev/zero\" }",
                "listener[1].tls.client_ca",
            ),
        ] {
            let text = format!("{listener}tls = {tls}\n{route}");
            let e = check(&text).unwrap_err();
            assert_eq!((e.line, e.key.as_str()), (3, key), "{e}");
            assert!(e.message.contains("not a regular file"), "{e}");
        }
        let text = format!(
            "{listener}{route}[[upstream]]\nname = \"u\"\nservers = [{{ address = \"127.0.0.1:2\" }}]\ntls = {{ ca = \"/dev/zero\" }}\n"
        );
        let e = check(&text).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (8, "upstream[1].tls.ca"), "{e}");

        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.key");
        std::fs::write(&big, vec![b'k'; 5000]).unwrap();
        let e = check(&format!(
            "{listener}tls = {{ self_signed = true, ticket_key_file = {:?} }}\n{route}",
            big.display().to_string()
        ))
        .unwrap_err();
        assert!(e.message.contains("larger than 4096 bytes"), "{e}");
        let e = read_named_file("/dev/null", 10).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(
            read_named_file(big.to_str().unwrap(), 5000).unwrap().len(),
            5000
        );
    }

    #[test]
    fn syntax_error_names_line_and_key() {
        let e = check("[server]\nworkers = 2\n\n[http]\nmax_headers = \"many\"\n").unwrap_err();
        assert_eq!(e.file, "t.toml");
        assert_eq!(e.line, 5);
        assert_eq!(e.key, "http.max_headers");
    }

    #[test]
    fn unknown_key_is_rejected_with_its_line() {
        let e = check("[[listener]]\nlisten = \"127.0.0.1:1\"\nlisen = 3\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert_eq!(e.key, "listener[1].lisen");
        assert!(e.message.contains("unknown field"), "{}", e.message);
    }

    #[test]
    fn unknown_key_in_nested_tables_names_the_element() {
        let text = "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[listener]]\nlisten = \"127.0.0.1:2\"\n\
                    [listener.tls]\nself_signed = true\n[[listener.tls.certificate]]\ncert = \"a\"\nkey = \"k\"\n\
                    [[listener.tls.certificate]]\ncert = \"b\"\nkey = \"k\"\nbogus = 1\n";
        let e = check(text).unwrap_err();
        assert_eq!(e.line, 13);
        assert_eq!(e.key, "listener[2].tls.certificate[2].bogus");
        let e = check("[[listener]]\nlisten = \"127.0.0.1:1\"\n[listener.tls]\nbogus = 1\n")
            .unwrap_err();
        assert_eq!(e.key, "listener[1].tls.bogus");
    }

    #[test]
    fn bad_listen_address_names_the_listener() {
        let text = "[[listener]]\nlisten = \"127.0.0.1:1\"\n\n[[listener]]\nlisten = \"nowhere\"\n\n[[route]]\nhandler = \"respond\"\n";
        let e = check(text).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (5, "listener[2].listen"));
    }

    #[test]
    fn bad_duration_and_range() {
        let base = "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n";
        let e = check(&format!(
            "[http]\nkeepalive_timeout = \"5 fortnights\"\n{base}"
        ))
        .unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "http.keepalive_timeout"));
        let e = check(&format!("[server]\nworkers = -1\n{base}")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "server.workers"));
        let ok = check(&format!(
            "[http]\nheader_read_timeout = \"250ms\"\nkeepalive_timeout = 5\n{base}"
        ))
        .unwrap();
        assert_eq!(ok.http.header_read_timeout, Duration::from_millis(250));
        assert_eq!(ok.http.keepalive_timeout, Duration::from_secs(5));
    }

    #[test]
    fn max_connections_is_split_across_workers() {
        let base = "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n";
        let cfg = check(&format!(
            "[server]\nworkers = 3\nmax_connections = 10\n{base}"
        ))
        .unwrap();
        assert_eq!(cfg.max_connections_per_worker(), 4);
        let unlimited = check(&format!("[server]\nworkers = 3\n{base}")).unwrap();
        assert_eq!(unlimited.max_connections_per_worker(), 0);
        let e = check(&format!(
            "[server]\nworkers = 2\nmax_connections = -5\n{base}"
        ))
        .unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (3, "server.max_connections"));
    }

    #[test]
    fn max_in_flight_is_split_across_workers_and_retry_after_rounds_up() {
        let group = |extra: &str| {
            format!(
                "[server]\nworkers = 3\n[[listener]]\nlisten = \"127.0.0.1:1\"\n[[upstream]]\nname = \"app\"\nservers = [{{ address = \"127.0.0.1:9\" }}]\n{extra}\n[[route]]\nhandler = \"proxy\"\nupstream = \"app\"\n"
            )
        };
        let cfg = check(&group("max_in_flight = 10\nretry_after = \"1500ms\"")).unwrap();
        let app = &cfg.upstreams[0];
        assert_eq!(app.max_in_flight_per_worker(cfg.workers), 4);
        assert_eq!(&*app.retry_after, "2");
        let cfg = check(&group("")).unwrap();
        assert_eq!(cfg.upstreams[0].max_in_flight_per_worker(cfg.workers), 0);
        assert_eq!(&*cfg.upstreams[0].retry_after, "1");
        let e = check(&group("max_in_flight = -1")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (8, "upstream[1].max_in_flight"));
        let e = check(&group("retry_after = \"2h\"")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (8, "upstream[1].retry_after"));
    }

    #[test]
    fn embedded_default_is_valid() {
        let args = ServeArgs {
            no_tls: true,
            ..Default::default()
        };
        let cfg = load(&args).unwrap();
        assert_eq!(cfg.listeners.len(), 1);
        assert_eq!(cfg.listeners[0].addr, "127.0.0.1:8080".parse().unwrap());
        let with_tls = load(&ServeArgs::default()).unwrap();
        assert_eq!(with_tls.listeners.len(), 2);
        assert!(with_tls.listeners[1].tls.is_some());
    }

    #[test]
    fn flags_override_the_file() {
        let args = ServeArgs {
            listen: vec!["127.0.0.1:9999".parse().unwrap()],
            workers: Some(3),
            no_tls: true,
            ..Default::default()
        };
        let cfg = load(&args).unwrap();
        assert_eq!(cfg.workers, 3);
        assert_eq!(cfg.listeners[0].addr.port(), 9999);
    }

    #[test]
    fn missing_root_is_a_command_line_error() {
        let args = ServeArgs {
            root: Some("/definitely/not/here".into()),
            no_tls: true,
            ..Default::default()
        };
        let e = load(&args).unwrap_err();
        assert_eq!(e.file, "command line");
        assert!(e.key.ends_with(".root"), "{}", e.key);
    }

    #[test]
    fn admin_is_off_unless_configured_and_loopback_by_default() {
        let base = "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\npath = \"/\"\nhandler = \"respond\"\n";
        assert_eq!(check(base).unwrap().admin, None);
        let on = check(&format!("{base}[admin]\nlisten = \"127.0.0.1:9090\"\n")).unwrap();
        assert_eq!(on.admin, Some("127.0.0.1:9090".parse().unwrap()));
        let e = check(&format!("{base}\n[admin]\nlisten = \"0.0.0.0:9090\"\n")).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.line, e.key.as_str()),
            ("t.toml", 8, "admin.listen")
        );
        assert!(e.message.contains("allow_remote"), "{}", e.message);
        let remote = check(&format!(
            "{base}[admin]\nlisten = \"0.0.0.0:9090\"\nallow_remote = true\n"
        ))
        .unwrap();
        assert_eq!(remote.admin, Some("0.0.0.0:9090".parse().unwrap()));
    }

    #[test]
    fn admin_flag_is_refused_off_loopback_from_the_command_line() {
        let args = ServeArgs {
            no_tls: true,
            admin: Some("192.0.2.1:9090".parse().unwrap()),
            ..Default::default()
        };
        let e = load(&args).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.key.as_str()),
            ("command line", "admin.listen")
        );
    }

    #[test]
    fn access_log_is_off_by_default_and_errors_name_line_and_key() {
        let base = "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\npath = \"/\"\nhandler = \"respond\"\n";
        assert_eq!(check(base).unwrap().access_log, None);
        let on = check(&format!(
            "{base}[access_log]\npath = \"-\"\nformat = \"json\"\nbuffer = \"16KiB\"\nflush_interval = \"250ms\"\n"
        ))
        .unwrap()
        .access_log
        .unwrap();
        assert_eq!(on.target, LogTarget::Stdout);
        assert_eq!(on.format, LogFormat::Json);
        assert_eq!(on.buffer, 16 * 1024);
        assert_eq!(on.flush_interval, Duration::from_millis(250));
        let defaults = check(&format!("{base}[access_log]\npath = \"/tmp/a.log\"\n"))
            .unwrap()
            .access_log
            .unwrap();
        assert_eq!(defaults.format, LogFormat::Combined);
        assert_eq!(defaults.buffer, 64 * 1024);
        assert_eq!(defaults.flush_interval, Duration::from_secs(1));
        for (extra, line, key) in [
            ("format = \"xml\"", 8, "access_log.format"),
            ("buffer = \"64 parsecs\"", 8, "access_log.buffer"),
            ("buffer = 0", 8, "access_log.buffer"),
            ("flush_interval = \"0s\"", 8, "access_log.flush_interval"),
        ] {
            let e = check(&format!("{base}[access_log]\npath = \"-\"\n{extra}\n")).unwrap_err();
            assert_eq!(
                (e.file.as_str(), e.line, e.key.as_str()),
                ("t.toml", line, key),
                "{extra}: {e}"
            );
        }
        let e = check(&format!("{base}[access_log]\npath = \"\"\n")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (7, "access_log.path"));
    }
}
