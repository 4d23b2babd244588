//! Configuration in two stages, as ripgrep does it: [`raw`] mirrors the TOML and
//! checks only its shape; [`validate`] turns it into a frozen [`Config`] with real
//! objects (socket addresses, opened roots, TLS configs), shared by `Arc`. Every
//! error names the file, the line and the key.

pub mod error;
pub mod flags;
pub mod http2;
pub mod raw;
pub mod value;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::de::IntoDeserializer;
use serde::Deserialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::file_io::{FileIoPool, FileIoSettings};
use crate::filter;
use crate::handler::mime_table::{self, MimeTable};
use crate::handler::proxy::configure as proxy_configure;
use crate::handler::proxy::upstream::{self, UpstreamGroup};
use crate::handler::{redirect_configure, respond_configure, static_configure};
use crate::http::client_address::ClientAddress;
use crate::http1::parse::Limits;
use crate::observe::access_log::{AccessLogConfig, LogFormat, LogTarget};
use crate::proxy_protocol;
use crate::route::{BoxedHandler, RouteTable};
pub use crate::tls::ListenerTls;
pub use error::{ConfigError, Locator};
pub use flags::Overrides;
pub use http2::Http2Config;
use raw::{RawAccessLog, RawAdmin, RawConfig, RawHandler, RawListener, RawRoute, RouteError};
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
    /// The blocking pool that file work which would wait on a disk runs on,
    /// shared by all workers.
    pub file_io: FileIoPool,
    /// HTTP cache zones, shared by every worker and the routes that name them.
    pub caches: Vec<Arc<crate::cache::zone::CacheZone>>,
}

impl Config {
    /// One worker's share of `max_connections`, rounded up so the workers
    /// together allow at least the configured total; 0 means no limit.
    pub fn max_connections_per_worker(&self) -> usize {
        self.max_connections.div_ceil(self.workers.max(1))
    }
}

/// Loads `file`, or the embedded default without one, and applies the flags.
/// Relative paths in a file are taken from the file's directory.
pub fn load(file: Option<&Path>, flags: &Overrides) -> Result<Config, ConfigError> {
    let (name, text) = match file {
        Some(path) => (path.display().to_string(), read_file(path)?),
        None => ("embedded default".to_string(), EMBEDDED_DEFAULT.to_string()),
    };
    let mut raw = parse(&name, &text)?;
    if let Some(dir) = file.map(file_dir) {
        raw.resolve_paths(&dir);
    }
    flags::apply(&mut raw, flags, file.is_none())?;
    validate(&name, &text, raw)
}

/// The directory relative paths in `file` are taken from.
fn file_dir(file: &Path) -> std::path::PathBuf {
    let dir = file.parent().unwrap_or(Path::new(""));
    if dir.as_os_str().is_empty() {
        std::env::current_dir().unwrap_or_default()
    } else {
        std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
    }
}

/// Loads and validates a file without flags (for `pier check`).
pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
    load(Some(path), &Overrides::default())
}

/// Parses and validates configuration text; `name` is the origin that errors
/// name (a file name, or whatever the text came from). Relative paths are taken
/// from the current directory.
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

/// Parses TOML text into the raw structs, each error located by the parser's spans.
pub fn parse(name: &str, text: &str) -> Result<RawConfig, ConfigError> {
    let loc = Locator::new(name, text);
    let (tree, errors) = DeTable::parse_recoverable(text);
    if let Some(e) = errors.first() {
        return Err(loc.toml_error(tree.get_ref(), e));
    }
    let mut rest = tree.clone();
    let routes = rest.get_mut().remove("route");
    let mut raw = RawConfig::deserialize(rest.into_deserializer())
        .map_err(|e| loc.toml_error(tree.get_ref(), &e))?;
    let Some(routes) = routes else {
        return Ok(raw);
    };
    let DeValue::Array(routes) = routes.into_inner() else {
        return Err(loc.error(
            0..0,
            "route",
            "`route` is a list of tables: write [[route]]",
        ));
    };
    for (i, r) in routes.into_iter().enumerate() {
        let route = RawRoute::from_toml(r).map_err(|e| {
            let at = match e.key() {
                None | Some("") => format!("route[{}]", i + 1),
                Some(key) => format!("route[{}].{key}", i + 1),
            };
            match e {
                RouteError::Toml(e) => loc.toml_error(tree.get_ref(), &e),
                RouteError::At { message, span, .. } | RouteError::Key { message, span, .. } => {
                    loc.error(span, &at, message)
                }
            }
        })?;
        raw.route.push(route);
    }
    Ok(raw)
}

/// Second stage: raw -> frozen, building real objects and checking every value.
pub fn validate(name: &str, text: &str, raw: RawConfig) -> Result<Config, ConfigError> {
    let loc = Locator::new(name, text);
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
    let file_io = validate_file_io(&loc, &raw.server)?;

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
    let client = crate::handler::access::configure::client_address(
        &loc,
        "http",
        &raw.http.trusted_proxies,
        &raw.http.client_address_header,
    )?;
    let mut listeners = Vec::new();
    for (i, l) in raw.listener.iter().enumerate() {
        let key = format!("listener[{}]", i + 1);
        listeners.push(validate_listener(&loc, &key, l, &upstreams, &client)?);
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

    let caches = crate::cache::configure::build_zones(&loc, raw.cache.as_ref())?;
    let mime = Arc::new(validate_mime(&loc, raw.mime.as_ref())?);
    let mut routes = RouteTable::default();
    routes.insert_pre_route(crate::handler::acme_challenge::AcmeChallenge::pre_route());
    let http_listeners = listeners.iter().any(|l| l.tcp.is_none());
    if raw.route.is_empty() && http_listeners {
        return Err(loc.error(0..0, "route", "no [[route]] configured"));
    }
    for (i, r) in raw.route.iter().enumerate() {
        let key = format!("route[{}]", i + 1);
        let (host, path, handler) = validate_route(&loc, &key, r, &upstreams, &caches, &mime)?;
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
        http2: http2::validate_http2(&loc, &raw.http2)?,
        listeners,
        routes,
        upstreams,
        admin,
        access_log,
        file_io: FileIoPool::new(file_io),
        caches,
    })
}

/// `[server]` `file_io_threads`, `file_io_queue` and `file_io_timeout`.
fn validate_file_io(
    loc: &Locator<'_>,
    server: &raw::RawServer,
) -> Result<FileIoSettings, ConfigError> {
    let d = FileIoSettings::default();
    let timeout = duration(
        loc,
        &server.file_io_timeout,
        "server.file_io_timeout",
        d.timeout,
    )?;
    if let (Some(v), true) = (&server.file_io_timeout, timeout.is_zero()) {
        return Err(loc.error(
            v.span(),
            "server.file_io_timeout",
            "the file IO timeout must be longer than zero",
        ));
    }
    Ok(FileIoSettings {
        threads: int(
            loc,
            &server.file_io_threads,
            "server.file_io_threads",
            1..=1024,
            d.threads as i64,
        )? as usize,
        queue: int(
            loc,
            &server.file_io_queue,
            "server.file_io_queue",
            1..=1_000_000,
            d.queue as i64,
        )? as usize,
        timeout,
    })
}

/// `[mime]`: extensions and the Content-Type each gets, ahead of the built-in table.
fn validate_mime(
    loc: &Locator<'_>,
    raw: Option<&Spanned<std::collections::BTreeMap<String, Spanned<String>>>>,
) -> Result<MimeTable, ConfigError> {
    let mut entries = Vec::new();
    for (ext, ty) in raw.map(|m| m.get_ref().iter()).into_iter().flatten() {
        let bare = ext.trim_start_matches('.');
        if bare.is_empty() || bare.len() > 32 || bare.contains(['/', '.']) || !bare.is_ascii() {
            return Err(loc.error(
                ty.span(),
                &format!("mime.{ext}"),
                "not a file extension (such as \"wasm\" or \".glb\")",
            ));
        }
        if !mime_table::is_media_type(ty.get_ref()) {
            return Err(loc.error(
                ty.span(),
                &format!("mime.{ext}"),
                format!(
                    "{:?} is not a media type such as \"model/gltf-binary\"",
                    ty.get_ref()
                ),
            ));
        }
        entries.push((bare.to_string(), ty.get_ref().clone()));
    }
    Ok(MimeTable::new().with_entries(entries))
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
    server_client: &Arc<ClientAddress>,
) -> Result<ListenerConfig, ConfigError> {
    let raw = l.get_ref();
    // The listener's own trusted proxies, else the server's.
    let client_address = if raw.trusted_proxies.is_some() || raw.client_address_header.is_some() {
        crate::handler::access::configure::client_address(
            loc,
            key,
            &raw.trusted_proxies,
            &raw.client_address_header,
        )?
    } else {
        server_client.clone()
    };
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
    let alpn = listener_alpn(loc, key, raw)?;
    let http2 = match &raw.tls {
        None => raw.http2.unwrap_or(false),
        Some(_) => alpn.iter().any(|p| p == b"h2"),
    };
    let tls = match &raw.tls {
        None => None,
        Some(t) => Some(crate::tls::listener_tls(
            loc,
            &format!("{key}.tls"),
            t,
            alpn,
        )?),
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
            let group = proxy_configure::upstream_named(
                loc,
                key,
                l.span(),
                &raw.upstream,
                "a tcp listener",
                upstreams,
            )?;
            let send_proxy_protocol = match &raw.proxy_protocol {
                None => None,
                Some(v) => Some(
                    proxy_protocol::ProxyVersion::parse(v.get_ref())
                        .map_err(|m| loc.error(v.span(), &format!("{key}.proxy_protocol"), m))?,
                ),
            };
            let idle_timeout = match &raw.idle_timeout {
                None => Duration::from_secs(300),
                Some(d) => parse_duration(d.get_ref())
                    .map_err(|m| loc.error(d.span(), &format!("{key}.idle_timeout"), m))?,
            };
            Some(TcpForward {
                group,
                send_proxy_protocol,
                idle_timeout,
            })
        }
        Some(_) => {
            return Err(unknown_choice(
                loc,
                &raw.kind,
                &format!("{key}.kind"),
                "listener kind",
                &["http", "tcp"],
            ))
        }
    };
    Ok(ListenerConfig {
        addr,
        backlog,
        tls,
        accept_proxy_protocol: raw.accept_proxy_protocol.unwrap_or(false),
        client_address,
        tcp,
        socket: crate::sockopt::options_from_raw(
            loc,
            &format!("{key}.socket"),
            raw.socket.as_ref(),
            crate::sockopt::SocketSide::Listener(addr),
        )?,
        http2,
    })
}

/// The protocols a listener's ALPN offers: `alpn` as written (`h2` and
/// `http/1.1`, in the order of preference), else both on an HTTP listener and
/// `http/1.1` alone on a tcp one (its upstream's protocol is unknown).
/// `http2 = true` is for plain listeners, where there is no ALPN.
fn listener_alpn(
    loc: &Locator<'_>,
    key: &str,
    raw: &RawListener,
) -> Result<Vec<Vec<u8>>, ConfigError> {
    let tcp = raw.kind.as_ref().is_some_and(|k| k.get_ref() == "tcp");
    if let (Some(_), Some(http2)) = (&raw.tls, raw.http2) {
        let span = raw.tls.as_ref().map_or(0..0, |t| t.span());
        return Err(loc.error(
            span,
            &format!("{key}.http2"),
            format!("a TLS listener offers HTTP/2 by ALPN: use alpn instead of http2 = {http2}"),
        ));
    }
    if tcp && raw.http2 == Some(true) {
        return Err(loc.error(
            raw.listen.span(),
            &format!("{key}.http2"),
            "a tcp listener forwards streams; it does not speak HTTP/2",
        ));
    }
    let Some(list) = &raw.alpn else {
        return Ok(if tcp {
            vec![b"http/1.1".to_vec()]
        } else {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        });
    };
    if raw.tls.is_none() {
        return Err(loc.error(
            list.span(),
            &format!("{key}.alpn"),
            "ALPN is a TLS extension: this listener has no tls table (use http2 = true for HTTP/2 over plain TCP)",
        ));
    }
    let mut out: Vec<Vec<u8>> = Vec::new();
    for p in list.get_ref() {
        let name = p.get_ref().as_str();
        let allowed = match name {
            "h2" => !tcp,
            "http/1.1" => true,
            _ => false,
        };
        if !allowed || out.iter().any(|o| o == name.as_bytes()) {
            return Err(loc.error(
                p.span(),
                &format!("{key}.alpn"),
                format!("{name:?} cannot be offered here: use \"h2\" and \"http/1.1\", each once (\"h2\" on HTTP listeners only)"),
            ));
        }
        out.push(name.as_bytes().to_vec());
    }
    if out.is_empty() {
        return Err(loc.error(
            list.span(),
            &format!("{key}.alpn"),
            "offers no protocol: list \"h2\", \"http/1.1\" or both",
        ));
    }
    Ok(out)
}

fn validate_route(
    loc: &Locator<'_>,
    key: &str,
    r: &Spanned<RawRoute>,
    upstreams: &[Arc<UpstreamGroup>],
    caches: &[Arc<crate::cache::zone::CacheZone>],
    mime: &Arc<MimeTable>,
) -> Result<(Option<String>, String, BoxedHandler), ConfigError> {
    let raw = r.get_ref();
    let host = match &raw.host {
        None => None,
        Some(h) => {
            let v = h.get_ref().trim().to_ascii_lowercase();
            if !is_host_name(&v) {
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
    let upstream_rules =
        filter::configure::upstream_request_rules(loc, key, &raw.filters, raw.handler.get_ref())?;
    let handler: BoxedHandler = match raw.handler.get_ref() {
        RawHandler::Static(s) => {
            Box::new(static_configure::build_static(loc, key, r.span(), s, mime)?)
        }
        RawHandler::Respond(s) => {
            Box::new(respond_configure::build_respond(loc, key, r.span(), s)?)
        }
        RawHandler::Redirect(s) => {
            Box::new(redirect_configure::build_redirect(loc, key, r.span(), s)?)
        }
        RawHandler::Proxy(p) => {
            let mut proxy = proxy_configure::build_proxy(loc, key, r.span(), p, upstreams)?;
            if let Some(name) = &p.cache {
                proxy.cache = Some(crate::cache::configure::zone_named(loc, key, name, caches)?);
            }
            proxy.request_rules = upstream_rules;
            proxy.error_pages = crate::handler::proxy::error_page::build_error_pages(
                loc,
                key,
                p.error_pages.as_ref(),
                mime,
            )?;
            Box::new(proxy)
        }
    };
    // Compression innermost: the header rules see (and may edit) its head.
    let handler = filter::compress_configure::wrap_compress(loc, key, &raw.filters, handler)?;
    // Access checks first: a refused request costs no more than the check.
    let route = (host.clone(), path.clone());
    let mut filters =
        crate::handler::access::configure::access_filters(loc, key, route, &raw.filters)?;
    filters.extend(filter::configure::route_filters(
        loc,
        key,
        &raw.filters,
        raw.handler.get_ref(),
    )?);
    Ok((host, path, filter::wrap(handler, filters)))
}

/// For tests: both stages over `text`, read as the file `t.toml`.
#[cfg(test)]
pub fn check_text(text: &str) -> Result<Config, ConfigError> {
    validate("t.toml", text, parse("t.toml", text)?)
}

#[cfg(test)]
mod tests;
