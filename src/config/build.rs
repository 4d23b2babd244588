//! Loading a configuration: the text parsed into raw tables (each route's
//! handler keys by the reader the handler registry gives), then the second
//! stage, raw tables -> a frozen [`Config`], each value checked and each
//! route's handler and filters built by their own configurators. It sits above
//! the handlers (it names their registry and calls them), which is why it is
//! apart from the frozen types in `mod.rs` that workers read.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::de::IntoDeserializer;
use serde::Deserialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::listener::validate_listener;
use super::raw::{self, RawAccessLog, RawAdmin, RawConfig, RawRoute, RouteError};
use super::site_raw::{RawSite, SiteRoutePlace};
use super::value::{duration, int, is_host_name, parse_size, size};
use super::{
    flags, http2, Config, ConfigError, HttpConfig, ListenerConfig, Locator, Overrides,
    EMBEDDED_DEFAULT,
};
use crate::file_io::{FileIoPool, FileIoSettings};
use crate::filter;
use crate::handler::configure::RouteContext;
use crate::handler::mime_table::{self, MimeTable};
use crate::handler::proxy::configure as proxy_configure;
use crate::handler::registry::HANDLERS;
use crate::http1::parse::Limits;
use crate::observe::access_log::{AccessLogConfig, LogFormat, LogTarget};
use crate::route::{BoxedHandler, RouteTable};
use crate::upstream::group::UpstreamGroup;

/// Loads `file`, or the embedded default without one, and applies the flags.
/// Relative paths in a file are taken from the file's directory.
pub fn load(file: Option<&Path>, flags: &Overrides) -> Result<Config, ConfigError> {
    let (name, text) = match file {
        Some(path) => (path.display().to_string(), read_file(path)?),
        None => ("embedded default".to_string(), EMBEDDED_DEFAULT.to_string()),
    };
    load_flagged(&name, &text, file, flags, file.is_none())
}

/// What errors call a configuration posted to a server that runs without a file.
pub const POSTED: &str = "posted configuration";

/// Loads `text` posted in place of `file` (`POST /api/config`) with the
/// server's flags, as a reload would load it from the file: errors name
/// the file, and relative paths are taken from its directory.
pub fn load_posted(
    file: Option<&Path>,
    text: &str,
    flags: &Overrides,
) -> Result<Config, ConfigError> {
    let name = file.map_or_else(|| POSTED.to_string(), |p| p.display().to_string());
    load_flagged(&name, text, file, flags, false)
}

/// Both stages over `text`, named `name`, with relative paths taken from
/// `file`'s directory and the flags applied (`embedded`: to the embedded
/// default's listeners).
fn load_flagged(
    name: &str,
    text: &str,
    file: Option<&Path>,
    flags: &Overrides,
    embedded: bool,
) -> Result<Config, ConfigError> {
    let mut raw = parse(name, text)?;
    if let Some(dir) = file.map(file_dir) {
        raw.resolve_paths(&dir);
    }
    flags::apply(&mut raw, flags, embedded)?;
    validate(name, text, raw)
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

/// Parses TOML text into the raw structs (each route's handler keys by the
/// handler's own reader), each error located by the parser's spans.
pub fn parse(name: &str, text: &str) -> Result<RawConfig, ConfigError> {
    let loc = Locator::new(name, text);
    let (tree, errors) = DeTable::parse_recoverable(text);
    if let Some(e) = errors.first() {
        return Err(loc.syntax_error(e));
    }
    let mut rest = tree.clone();
    let routes = rest.get_mut().remove("route");
    let sites = rest.get_mut().remove("site");
    let mut raw = RawConfig::deserialize(rest.into_deserializer())
        .map_err(|e| loc.toml_error(tree.get_ref(), &e))?;
    let route_error = |at: String, e: RouteError| {
        let at = match e.key() {
            None | Some("") => at,
            Some(key) => format!("{at}.{key}"),
        };
        match e {
            RouteError::Toml(e) => loc.toml_error(tree.get_ref(), &e),
            RouteError::At { message, span, .. } | RouteError::Key { message, span, .. } => {
                loc.error(span, &at, message)
            }
        }
    };
    for (i, r) in list_of(&loc, routes, "route")?.into_iter().enumerate() {
        let route = RawRoute::from_toml(r, HANDLERS, &[])
            .map_err(|e| route_error(format!("route[{}]", i + 1), e))?;
        raw.route.push(route);
    }
    for (i, s) in list_of(&loc, sites, "site")?.into_iter().enumerate() {
        let site = RawSite::from_toml(s, HANDLERS).map_err(|e| {
            let at = match e.route {
                None => format!("site[{}]", i + 1),
                Some(SiteRoutePlace::Site) => format!("site[{}]", i + 1),
                Some(SiteRoutePlace::Written(n)) => format!("site[{}].route[{n}]", i + 1),
            };
            route_error(at, e.error)
        })?;
        raw.site.push(site);
    }
    Ok(raw)
}

/// The elements of a top-level array of tables (`[[route]]`, `[[site]]`).
fn list_of<'i>(
    loc: &Locator<'_>,
    value: Option<Spanned<DeValue<'i>>>,
    name: &str,
) -> Result<Vec<Spanned<DeValue<'i>>>, ConfigError> {
    match value.map(Spanned::into_inner) {
        None => Ok(Vec::new()),
        Some(DeValue::Array(list)) => Ok(list.into_iter().collect()),
        Some(_) => Err(loc.error(
            0..0,
            name,
            format!("`{name}` is a list of tables: write [[{name}]]"),
        )),
    }
}

fn read_file(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.display().to_string(),
        line: 0,
        key: "--config".into(),
        message: format!("cannot read: {}", crate::io_text::io_error_text(&e)),
    })
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
    // `http.<field>`: each key is its raw field's name, and an integer's range
    // keeps it within its frozen field's type.
    macro_rules! int_key {
        ($field:ident, $range:expr, $default:expr) => {
            int(
                &loc,
                &h.$field,
                concat!("http.", stringify!($field)),
                $range,
                $default as i64,
            )? as _
        };
    }
    macro_rules! size_key {
        ($field:ident, $range:expr, $default:expr) => {
            size(
                &loc,
                &h.$field,
                concat!("http.", stringify!($field)),
                $range,
                $default as u64,
            )? as _
        };
    }
    macro_rules! duration_key {
        ($field:ident) => {
            duration(
                &loc,
                &h.$field,
                concat!("http.", stringify!($field)),
                d.$field,
            )?
        };
    }
    let http = HttpConfig {
        limits: Limits {
            max_head_bytes: size_key!(max_head_bytes, 1024..=(1 << 24), d.limits.max_head_bytes),
            max_headers: int_key!(max_headers, 1..=10_000, d.limits.max_headers),
            max_uri_bytes: size_key!(max_uri_bytes, 16..=(1 << 20), d.limits.max_uri_bytes),
        },
        header_read_timeout: duration_key!(header_read_timeout),
        keepalive_timeout: duration_key!(keepalive_timeout),
        body_read_timeout: duration_key!(body_read_timeout),
        write_timeout: duration_key!(write_timeout),
        max_body_bytes: size_key!(max_body_bytes, 0..=i64::MAX as u64, d.max_body_bytes),
    };

    let mut upstreams: Vec<Arc<UpstreamGroup>> = Vec::new();
    for (i, u) in raw.upstream.iter().enumerate() {
        let key = format!("upstream[{}]", i + 1);
        let group = proxy_configure::build_upstream(&loc, &key, i, u)?;
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
    let client = crate::filter::access::configure::client_address(
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
    if raw.route.is_empty() && raw.site.is_empty() && http_listeners {
        return Err(loc.error(0..0, "route", "no [[site]] or [[route]] configured"));
    }
    let refs = RouteRefs {
        upstreams: &upstreams,
        caches: &caches,
        mime: &mime,
        listeners: &listeners,
    };
    for (i, r) in raw.site.iter().enumerate() {
        let key = format!("site[{}]", i + 1);
        let mut site = super::site::site_of(&loc, &key, r, &listeners)?;
        let first_host = site.hosts.first();
        for (route, place) in &r.get_ref().routes {
            let key = match place {
                SiteRoutePlace::Site => key.clone(),
                SiteRoutePlace::Written(n) => format!("{key}.route[{n}]"),
            };
            if let Some(host) = &route.get_ref().host {
                return Err(loc.error(
                    host.span(),
                    &format!("{key}.host"),
                    "a site's routes answer the site's `hosts`; write the host there",
                ));
            }
            let built = validate_route(&loc, &key, route, &refs, first_host.as_deref())?;
            let label = format!(
                "{}{}",
                first_host.as_deref().unwrap_or(""),
                built.matches.label()
            );
            let route_entry = crate::route::Route {
                matches: built.matches,
                index: routes.next_index(),
                serves_plain: built.serves_plain,
                handler: built.handler,
            };
            if let Err(msg) = routes.add_site_route(&mut site, route_entry, label) {
                return Err(loc.error(route.span(), &key, msg));
            }
        }
        let slot = routes.next_index();
        if let Some(redirect) = super::site::https_redirect(r.get_ref(), &site, &listeners, slot) {
            routes.add_label(format!("{}->https", first_host.as_deref().unwrap_or("")));
            site.https_redirect = Some(redirect);
        }
        let hosts_span = r.get_ref().hosts.as_ref().map_or(r.span(), Spanned::span);
        routes
            .add_site(site)
            .map_err(|msg| loc.error(hosts_span, &format!("{key}.hosts"), msg))?;
    }
    for (i, r) in raw.route.iter().enumerate() {
        let key = format!("route[{}]", i + 1);
        let built = validate_route(&loc, &key, r, &refs, None)?;
        if built.serves_plain {
            let span = r
                .get_ref()
                .conditions
                .redirect_https
                .as_ref()
                .map_or(r.span(), Spanned::span);
            return Err(loc.error(
                span,
                &format!("{key}.redirect_https"),
                "only a site redirects to HTTPS: this key belongs on a route of a [[site]]",
            ));
        }
        if let Err(msg) = routes.insert(built.host, built.matches, built.handler) {
            return Err(loc.error(r.span(), &key, msg));
        }
    }

    let admin = raw
        .admin
        .as_ref()
        .map(|a| validate_admin(&loc, a.get_ref()))
        .transpose()?;
    let admin_token = raw
        .admin
        .as_ref()
        .and_then(|a| a.get_ref().token_file.as_ref())
        .map(|f| admin_token(&loc, f))
        .transpose()?;
    let access_log = raw
        .access_log
        .as_ref()
        .map(|a| validate_access_log(&loc, a.get_ref()))
        .transpose()?;
    let trace = raw
        .trace
        .as_ref()
        .map(|t| super::trace::validate_trace(&loc, t.get_ref()))
        .transpose()?;

    let resolver = super::resolver::validate_resolver(&loc, raw.resolver.as_ref())?;
    let warnings = crate::upstream::discovery::resolve_at_start(&upstreams, &resolver);

    Ok(Config {
        source: name.to_string(),
        workers,
        pin_cpus: raw.server.pin_cpus.unwrap_or(false),
        drain_timeout,
        max_connections,
        http,
        http2: http2::validate_http2(&loc, &raw.http2)?,
        http3: super::http3::validate_http3(&loc, &raw.http3)?,
        listeners,
        routes,
        upstreams,
        admin,
        access_log,
        trace,
        file_io: FileIoPool::new(file_io),
        caches,
        findings: loc.take_findings(),
        resolver,
        warnings,
        admin_token,
        allow_config_write: raw
            .admin
            .as_ref()
            .and_then(|a| a.get_ref().allow_config_write)
            .unwrap_or(false),
        text: Arc::from(text),
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
/// `[admin] token_file`: the bearer token, the file's first line.
fn admin_token(loc: &Locator<'_>, file: &Spanned<String>) -> Result<Arc<str>, ConfigError> {
    let at = |m: String| loc.error(file.span(), "admin.token_file", m);
    let text = std::fs::read_to_string(file.get_ref()).map_err(|e| {
        at(format!(
            "cannot read {}: {}",
            file.get_ref(),
            crate::io_text::without_os_error(&e.to_string())
        ))
    })?;
    let token = text.lines().next().unwrap_or("").trim();
    if token.len() < 16 {
        return Err(at(format!(
            "{} holds no token of at least 16 characters on its first line",
            file.get_ref()
        )));
    }
    Ok(Arc::from(token))
}

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

/// What a route may name or use beside its own keys, each validated before
/// the routes.
struct RouteRefs<'a> {
    upstreams: &'a [Arc<UpstreamGroup>],
    caches: &'a [Arc<crate::cache::zone::CacheZone>],
    mime: &'a Arc<MimeTable>,
    listeners: &'a [ListenerConfig],
}

/// A route checked and built: where it matches and its handler in its filters.
struct BuiltRoute {
    /// A top-level route's `host`.
    host: Option<String>,
    matches: crate::route::matcher::RouteMatch,
    /// `redirect_https = false`.
    serves_plain: bool,
    handler: BoxedHandler,
}

/// Checks and builds one route; `site_host` names its site (for the rate
/// limit's identity across reloads).
fn validate_route(
    loc: &Locator<'_>,
    key: &str,
    r: &Spanned<RawRoute>,
    refs: &RouteRefs<'_>,
    site_host: Option<&str>,
) -> Result<BuiltRoute, ConfigError> {
    let raw = r.get_ref();
    let host = match &raw.host {
        None => None,
        Some(h) => {
            // `example.com.` is `example.com`, as requests are matched.
            let v = h
                .get_ref()
                .trim()
                .trim_end_matches('.')
                .to_ascii_lowercase();
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
    let (matches, serves_plain) = super::site::route_match(loc, key, raw, refs.listeners)?;
    let request_rules = filter::configure::upstream_request_rules(loc, key, raw)?;
    let keys = raw.handler.get_ref();
    let handler = keys.build(RouteContext {
        loc,
        key,
        span: r.span(),
        upstreams: refs.upstreams,
        caches: refs.caches,
        mime: refs.mime,
        request_rules,
    })?;
    let compress = filter::compress_configure::compress_settings(loc, key, &raw.filters)?;
    // Access checks first: a refused request costs no more than the check.
    let route = (
        host.clone().or_else(|| site_host.map(str::to_string)),
        matches.label(),
    );
    let mut filters =
        crate::filter::access::configure::access_filters(loc, key, route, &raw.filters)?;
    filters.extend(keys.own_filters(loc, key)?);
    filters.extend(filter::configure::route_filters(loc, key, raw)?);
    Ok(BuiltRoute {
        host,
        matches,
        serves_plain,
        handler: filter::wrap(handler, filters, compress),
    })
}
