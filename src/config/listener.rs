//! One `[[listener]]` table checked: its address, ALPN and TLS, the HTTP/3
//! switch and 0-RTT, and a `tcp` listener's forwarding keys.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use toml::Spanned;

use super::raw::RawListener;
use super::value::{int, parse_duration, unknown_choice};
use super::{ConfigError, ListenerConfig, Locator, TcpForward};
use crate::handler::proxy::configure as proxy_configure;
use crate::http::client_address::ClientAddress;
use crate::proxy_protocol;
use crate::upstream::group::UpstreamGroup;

pub(super) fn validate_listener(
    loc: &Locator<'_>,
    key: &str,
    l: &Spanned<RawListener>,
    upstreams: &[Arc<UpstreamGroup>],
    server_client: &Arc<ClientAddress>,
) -> Result<ListenerConfig, ConfigError> {
    let raw = l.get_ref();
    // The listener's own trusted proxies, else the server's.
    let client_address = if raw.trusted_proxies.is_some() || raw.client_address_header.is_some() {
        crate::filter::access::configure::client_address(
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
    if raw.tls.is_none() && raw.http3 == Some(true) {
        return Err(loc.error(
            raw.listen.span(),
            &format!("{key}.http3"),
            "HTTP/3 runs over QUIC, which needs TLS: this listener has no tls table",
        ));
    }
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
            if raw.http3 == Some(true) {
                return Err(loc.error(
                    raw.listen.span(),
                    &format!("{key}.http3"),
                    "a tcp listener forwards streams; it does not speak HTTP/3",
                ));
            }
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
    let tls_http3 = tls.is_some() && tcp.is_none() && raw.http3.unwrap_or(true);
    if let Some(early) = raw
        .tls
        .as_ref()
        .and_then(|t| t.get_ref().early_data.as_ref())
    {
        if *early.get_ref() && !tls_http3 {
            return Err(loc.error(
                early.span(),
                &format!("{key}.tls.early_data"),
                "0-RTT early data is taken over QUIC, and this listener does not serve HTTP/3",
            ));
        }
    }
    Ok(ListenerConfig {
        addr,
        name: raw.name.as_ref().map(|n| n.get_ref().clone()),
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
        http3: tls_http3,
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
