//! Second configuration stage of the proxy: each `[[upstream]]` checked and
//! turned into an [`UpstreamGroup`] (servers resolved, TLS built), and a `proxy`
//! route's keys (read into [`RawProxy`], here too) into a [`ProxyRoute`] bound
//! to its group and its cache zone; beside the proxy
//! as h2o keeps each configurator beside its handler, so the runtime files
//! (`upstream.rs`, the phases) never read raw configuration.

use std::any::Any;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::{Range, RangeInclusive};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use serde::Deserialize;
use toml::Spanned;

use super::error_page::build_error_pages;
use super::{Forwarding, ProxyRoute};
use crate::cache::configure::zone_named;
use crate::config::error::{ConfigError, Locator};
use crate::config::raw::{RawDuration, RawHealthCheck, RawUpstream, RawUpstreamTls};
use crate::config::upstream_server::parse_upstream_address;
use crate::config::value::{duration, int, unknown_choice};
use crate::handler::configure::{HandlerSpec, RawHandler, RouteContext};
use crate::handler::BoxedHandler;
use crate::tls::any_server_cert::{AnyServerCert, HandshakeSignatures};
use crate::upstream::balance::{Balance, HashKey};
use crate::upstream::group::{
    CheckKind, HealthCheck, Server, ServerOrigin, ServerTable, UpstreamGroup, UpstreamProtocol,
    UpstreamTls,
};
use crate::upstream::resolution::{Discovery, DiscoveryEntry, DiscoveryKind, ResolutionStats};

/// The group the `upstream` key of a listener or route (`key`, its table at
/// `span`) names; `needed_by` says who needs the key when it is missing.
pub fn upstream_named(
    loc: &Locator<'_>,
    key: &str,
    span: Range<usize>,
    name: &Option<Spanned<String>>,
    needed_by: &str,
    upstreams: &[Arc<UpstreamGroup>],
) -> Result<Arc<UpstreamGroup>, ConfigError> {
    let Some(name) = name else {
        return Err(loc.error(
            span,
            &format!("{key}.upstream"),
            format!("{needed_by} needs `upstream`"),
        ));
    };
    match upstreams.iter().find(|g| g.name == *name.get_ref()) {
        Some(group) => Ok(group.clone()),
        None => Err(loc.error(
            name.span(),
            &format!("{key}.upstream"),
            format!("no [[upstream]] named {:?}", name.get_ref()),
        )),
    }
}

/// `handler = "proxy"`.
pub const PROXY: HandlerSpec = HandlerSpec::new::<RawProxy>("proxy");

/// The keys of a `proxy` route.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProxy {
    /// Name of the `[[upstream]]` group.
    pub upstream: Option<Spanned<String>>,
    /// Which forwarding headers to add (`x-forwarded`, `forwarded`, `both`, `none`).
    pub forwarded: Option<Spanned<String>>,
    /// Add `Via: 1.1 pier`.
    pub via: Option<bool>,
    /// Keep the client's Host (else the server's address is sent).
    pub preserve_host: Option<bool>,
    /// Header carrying the client address (incoming copies removed).
    pub client_addr_header: Option<Spanned<String>>,
    /// Header carrying the client certificate subject (incoming copies removed).
    pub client_cert_header: Option<Spanned<String>>,
    /// Status -> file sent instead of an upstream 5xx or Pier's own 502/503/504.
    pub error_pages: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// Name of the `[cache.NAME]` zone that stores this route's responses.
    pub cache: Option<Spanned<String>>,
}

impl RawHandler for RawProxy {
    fn name(&self) -> &'static str {
        PROXY.name
    }

    fn resolve_paths(&mut self, resolve: &dyn Fn(&mut Spanned<String>)) {
        for page in self
            .error_pages
            .iter_mut()
            .flat_map(|t| t.get_mut().values_mut())
        {
            resolve(page);
        }
    }

    fn sends_upstream(&self) -> bool {
        true
    }

    fn build(&self, route: RouteContext<'_>) -> Result<BoxedHandler, ConfigError> {
        let (loc, key) = (route.loc, route.key);
        let mut proxy = build_proxy(loc, key, route.span, self, route.upstreams)?;
        if let Some(name) = &self.cache {
            proxy.cache = Some(zone_named(loc, key, name, route.caches)?);
        }
        proxy.request_rules = route.request_rules;
        proxy.error_pages = build_error_pages(loc, key, self.error_pages.as_ref(), route.mime)?;
        Ok(Box::new(proxy))
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Builds a `proxy` route from its raw keys; `key` names the route (`route[2]`)
/// and `span` its table, for keys that are missing.
pub fn build_proxy(
    loc: &Locator<'_>,
    key: &str,
    span: Range<usize>,
    raw: &RawProxy,
    upstreams: &[Arc<UpstreamGroup>],
) -> Result<ProxyRoute, ConfigError> {
    let group = upstream_named(loc, key, span, &raw.upstream, "a proxy route", upstreams)?;
    let forwarding = match raw.forwarded.as_ref().map(|f| f.get_ref().as_str()) {
        None | Some("x-forwarded") => Forwarding {
            x_forwarded: true,
            forwarded: false,
        },
        Some("forwarded") => Forwarding {
            x_forwarded: false,
            forwarded: true,
        },
        Some("both") => Forwarding {
            x_forwarded: true,
            forwarded: true,
        },
        Some("none") => Forwarding {
            x_forwarded: false,
            forwarded: false,
        },
        Some(_) => {
            return Err(unknown_choice(
                loc,
                &raw.forwarded,
                &format!("{key}.forwarded"),
                "value",
                &["x-forwarded", "forwarded", "both", "none"],
            ))
        }
    };
    let header_name =
        |h: &Option<Spanned<String>>, k: &str| -> Result<Option<Box<str>>, ConfigError> {
            let Some(h) = h else { return Ok(None) };
            let v = h.get_ref();
            let reserved = [
                "host",
                "content-length",
                "transfer-encoding",
                "connection",
                "upgrade",
                "te",
                "trailer",
                "keep-alive",
            ];
            if v.is_empty()
                || !v
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
                || reserved.contains(&v.to_ascii_lowercase().as_str())
            {
                return Err(loc.error(
                    h.span(),
                    &format!("{key}.{k}"),
                    format!("{v:?} is not a header name that can be set here"),
                ));
            }
            Ok(Some(v.clone().into_boxed_str()))
        };
    Ok(ProxyRoute {
        group,
        forwarding,
        via: raw.via.unwrap_or(true),
        preserve_host: raw.preserve_host.unwrap_or(true),
        client_addr_header: header_name(&raw.client_addr_header, "client_addr_header")?,
        client_cert_header: header_name(&raw.client_cert_header, "client_cert_header")?,
        request_rules: None,
        error_pages: Default::default(),
        cache: None,
    })
}

/// Validates one `[[upstream]]` (servers resolved, TLS built).
pub fn build_upstream(
    loc: &Locator<'_>,
    key: &str,
    index: usize,
    u: &Spanned<RawUpstream>,
) -> Result<UpstreamGroup, ConfigError> {
    let raw = u.get_ref();
    let keys = TableKeys {
        loc,
        table: key.to_string(),
    };
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
    if raw.servers.get_ref().is_empty() && raw.srv.is_none() {
        return Err(loc.error(
            raw.servers.span(),
            &format!("{key}.servers"),
            "an upstream needs at least one server (or srv)",
        ));
    }
    let mut servers = Vec::new();
    let mut discovery = Discovery {
        min_ttl: keys.positive_duration("min_ttl", &raw.min_ttl, 1)?,
        max_ttl: keys.positive_duration("max_ttl", &raw.max_ttl, 300)?,
        ..Discovery::default()
    };
    if discovery.min_ttl > discovery.max_ttl {
        let span = raw.max_ttl.as_ref().map_or(u.span(), |m| m.span());
        return Err(keys.error(span, "max_ttl", "max_ttl is shorter than min_ttl"));
    }
    // A URL's scheme says whether the group speaks TLS: every server agrees
    // with the others and with the group's `tls` table.
    let mut scheme_tls: Option<bool> = None;
    for (i, s) in raw.servers.get_ref().iter().enumerate() {
        let skey = format!("{key}.servers[{}]", i + 1);
        let rs = s.get_ref();
        let at = |m: String| loc.error(rs.address.span(), &format!("{skey}.address"), m);
        let parsed = parse_upstream_address(rs.address.get_ref()).map_err(at)?;
        if let Some(tls) = parsed.tls {
            if scheme_tls.is_some_and(|t| t != tls) {
                return Err(at(
                    "the servers of one group are all https:// or all http:// (TLS is set per group)"
                        .into(),
                ));
            }
            if !tls && raw.tls.is_some() {
                return Err(at(
                    "an http:// server in a group with a tls table; write https:// or drop tls"
                        .into(),
                ));
            }
            scheme_tls = Some(tls);
        }
        let text = parsed.authority;
        let weight = int(loc, &rs.weight, &format!("{skey}.weight"), 1..=1000, 1)? as u32;
        match server_address(&text).map_err(at)? {
            ServerAddress::Fixed(addr) => servers.push(Server::new(
                addr,
                text,
                ServerOrigin::Configured,
                None,
                weight,
                0,
            )),
            ServerAddress::Name { host, port } => discovery.entries.push(DiscoveryEntry {
                kind: DiscoveryKind::Name { host, port },
                written: text,
                weight,
            }),
        }
    }
    if let Some(srv) = &raw.srv {
        let name = srv.get_ref().trim();
        if !is_host_name(name) {
            return Err(keys.error(
                srv.span(),
                "srv",
                format!("{name:?} is not a DNS name such as \"_http._tcp.app.service.consul\""),
            ));
        }
        discovery.entries.push(DiscoveryEntry {
            kind: DiscoveryKind::Srv(name.to_string()),
            written: name.to_string(),
            weight: 1,
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
                    "balance = \"hash\" needs hash_key (\"client_ip\", \"path\", \"uri\" or \"header:Name\")",
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
    // `https://` servers without a tls table get TLS with its defaults.
    let implied_tls = (raw.tls.is_none() && scheme_tls == Some(true))
        .then(|| Spanned::new(raw.servers.span(), RawUpstreamTls::default()));
    let tls = match raw.tls.as_ref().or(implied_tls.as_ref()) {
        None => None,
        Some(t) => {
            let mut tls = upstream_tls(&keys.sub("tls"), t)?;
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
        Some(h) => Some(health_check(&keys.sub("health_check"), h)?),
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
        servers: ServerTable::new(servers),
        resolutions: ResolutionStats::new(discovery.entries.len()),
        discovery,
        balance,
        tls,
        connect_timeout: keys.duration("connect_timeout", &raw.connect_timeout, 3)?,
        response_timeout: keys.duration("response_timeout", &raw.response_timeout, 60)?,
        read_timeout: keys.duration("read_timeout", &raw.read_timeout, 60)?,
        retries: keys.int("retries", &raw.retries, 0..=16, 1)? as u32,
        max_idle: keys.int("max_idle", &raw.max_idle, 0..=10_000, 64)? as usize,
        max_idle_peak: keys.int("max_idle_peak", &raw.max_idle_peak, 0..=10_000, 1024)? as usize,
        idle_peak_window: keys.positive_duration("idle_peak_window", &raw.idle_peak_window, 5)?,
        idle_timeout: keys.duration("idle_timeout", &raw.idle_timeout, 60)?,
        max_fails: keys.int("max_fails", &raw.max_fails, 0..=1000, 1)? as u32,
        fail_timeout: keys.duration("fail_timeout", &raw.fail_timeout, 10)?,
        health_check,
        max_in_flight: keys.int("max_in_flight", &raw.max_in_flight, 0..=10_000_000, 0)? as u32,
        retry_after: retry_after(loc, &raw.retry_after, &format!("{key}.retry_after"))?,
        socket,
        counters: Default::default(),
        protocol,
        max_streams: keys.int("max_streams", &raw.max_streams, 1..=10_000, 100)? as u32,
    })
}

/// The keys of one table read as plain settings, each named `table.key` in
/// its error, so a setting is written once with its default.
struct TableKeys<'a, 'l> {
    loc: &'a Locator<'l>,
    /// The table's own key (`upstream[1]`).
    table: String,
}

impl<'a, 'l> TableKeys<'a, 'l> {
    /// The keys of the table `name` inside this one.
    fn sub(&self, name: &str) -> TableKeys<'a, 'l> {
        TableKeys {
            loc: self.loc,
            table: self.key(name),
        }
    }

    /// `table.name`, as errors name a key.
    fn key(&self, name: &str) -> String {
        format!("{}.{name}", self.table)
    }

    /// An error about the key `name` of this table.
    fn error(&self, span: Range<usize>, name: &str, message: impl Into<String>) -> ConfigError {
        self.loc.error(span, &self.key(name), message)
    }

    /// A duration key, `default_secs` seconds when absent.
    fn duration(
        &self,
        name: &str,
        v: &Option<Spanned<RawDuration>>,
        default_secs: u64,
    ) -> Result<Duration, ConfigError> {
        let default = Duration::from_secs(default_secs);
        duration(self.loc, v, &self.key(name), default)
    }

    /// A duration key that must be above zero, `default_secs` seconds when
    /// absent.
    fn positive_duration(
        &self,
        name: &str,
        v: &Option<Spanned<RawDuration>>,
        default_secs: u64,
    ) -> Result<Duration, ConfigError> {
        let d = self.duration(name, v, default_secs)?;
        match v {
            Some(v) if d.is_zero() => Err(self.error(v.span(), name, "must be above zero")),
            _ => Ok(d),
        }
    }

    /// An integer key within `range`, `default` when absent.
    fn int(
        &self,
        name: &str,
        v: &Option<Spanned<i64>>,
        range: RangeInclusive<i64>,
        default: i64,
    ) -> Result<i64, ConfigError> {
        int(self.loc, v, &self.key(name), range, default)
    }
}

/// `retry_after` as the whole seconds `Retry-After` carries (rounded up), 0s..1h.
fn retry_after(
    loc: &Locator<'_>,
    v: &Option<Spanned<RawDuration>>,
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
/// A server as written: an address, or a name that DNS resolves (again and
/// again, as its TTL says).
#[derive(Debug, PartialEq, Eq)]
enum ServerAddress {
    Fixed(SocketAddr),
    Name { host: String, port: u16 },
}

/// Whether `text` can be a DNS name to look up: letters, digits, `-`, `_`
/// (SRV labels) and dots.
fn is_host_name(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

fn server_address(text: &str) -> Result<ServerAddress, String> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(ServerAddress::Fixed(a));
    }
    let Some((host, port)) = text
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        .filter(|(h, _)| !h.is_empty())
    else {
        return Err(format!("{text:?} is not host:port"));
    };
    if !is_host_name(host) {
        return Err(format!("{host:?} is neither an IP address nor a host name"));
    }
    Ok(ServerAddress::Name {
        host: host.to_string(),
        port,
    })
}

/// `tls` of an upstream; `keys` names its table.
fn upstream_tls(
    keys: &TableKeys<'_, '_>,
    t: &Spanned<RawUpstreamTls>,
) -> Result<UpstreamTls, ConfigError> {
    let raw = t.get_ref();
    let sni = match &raw.sni {
        None => None,
        Some(s) => Some(
            ServerName::try_from(s.get_ref().clone())
                .map_err(|e| keys.error(s.span(), "sni", e.to_string()))?,
        ),
    };
    let builder = rustls::ClientConfig::builder_with_provider(crate::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| keys.loc.error(t.span(), &keys.table, e.to_string()))?;
    let config = if raw.verify.unwrap_or(true) {
        let mut roots = rustls::RootCertStore::empty();
        let (path, span) = match &raw.ca {
            Some(ca) => (ca.get_ref().clone(), ca.span()),
            None => (SYSTEM_CA_BUNDLE.to_string(), t.span()),
        };
        let certs =
            crate::tls::read_pem_certs(&path).map_err(|e| keys.error(span.clone(), "ca", e))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(keys.error(span, "ca", format!("{path}: no usable CA certificate")));
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

/// `health_check` of an upstream; `keys` names its table.
fn health_check(
    keys: &TableKeys<'_, '_>,
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
                return Err(keys.error(
                    span,
                    "path",
                    "a path starting with '/' without spaces or control characters",
                ));
            }
            CheckKind::Http(path)
        }
        Some("tcp") => {
            if let Some(p) = &raw.path {
                return Err(keys.error(p.span(), "path", "a tcp check has no path"));
            }
            CheckKind::Tcp
        }
        Some(_) => {
            return Err(unknown_choice(
                keys.loc,
                &raw.kind,
                &keys.key("kind"),
                "check kind",
                &["http", "tcp"],
            ));
        }
    };
    let interval = keys.duration("interval", &raw.interval, 2)?;
    if interval < Duration::from_millis(10) {
        let span = raw.interval.as_ref().map_or(h.span(), |i| i.span());
        return Err(keys.error(span, "interval", "at least 10ms"));
    }
    Ok(HealthCheck {
        kind,
        interval,
        timeout: keys.duration("timeout", &raw.timeout, 1)?,
        rise: keys.int("rise", &raw.rise, 1..=100, 2)? as u32,
        fall: keys.int("fall", &raw.fall, 1..=100, 3)? as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses_are_addresses_or_names_with_a_port() {
        assert_eq!(
            server_address("127.0.0.1:3000"),
            Ok(ServerAddress::Fixed("127.0.0.1:3000".parse().unwrap()))
        );
        assert_eq!(
            server_address("localhost:3000"),
            Ok(ServerAddress::Name {
                host: "localhost".into(),
                port: 3000
            })
        );
        assert!(server_address("localhost").is_err());
        assert!(server_address("127.0.0.1:99999").is_err());
        assert!(server_address("a b:80").is_err());
    }
}
