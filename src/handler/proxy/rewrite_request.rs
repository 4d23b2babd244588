//! Phase 3, rewriting the upstream request: the head the upstream gets,
//! written once for every upstream protocol into a
//! [`RequestHeadSink`]: HTTP/1 bytes, or a field list an HTTP/2 exchange takes
//! as it is.

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::fields::{ConnectionOptions, Field};
use super::request_info::RequestInfo;
use super::ProxyRoute;
use crate::cache::tap::ResponseTap;
use crate::http::trace_context::TraceparentField;
use crate::http::{RequestId, RequestView, Session};
use crate::upstream::request_head::RequestHeadSink;

/// The downstream client as the forwarding fields describe it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Client<'a> {
    /// Address (the PROXY protocol source, when the listener accepts it).
    pub(super) addr: SocketAddr,
    /// Whether the request came over TLS.
    pub(super) secure: bool,
    /// Subject of the verified client certificate (mTLS), if one was presented.
    pub(super) subject: Option<&'a str>,
    /// The request came in TLS early data: the upstream is told, so it may
    /// answer 425 (RFC 8470 §5.1).
    pub(super) early_data: bool,
    /// The request's identifier, for `{request_id}` in the route's request rules.
    pub(super) request_id: &'a RequestId,
    /// With tracing on: the `traceparent` naming this attempt's client span
    /// and the trusted `tracestate`, which replace the client's.
    pub(super) trace: Option<(&'a TraceparentField, &'a [u8])>,
}

/// Phase 3 for `server` of the route's group: the upstream request head, with
/// the client as `session` describes it, the attempt's `traceparent` when the
/// request is traced, and the cache's `tap` on it.
pub(super) fn encode_for_server(
    out: &mut impl RequestHeadSink,
    session: &dyn Session<'_>,
    route: &ProxyRoute,
    server: usize,
    traceparent: Option<&TraceparentField>,
    info: &RequestInfo,
    tap: &mut impl ResponseTap,
) {
    let view = session.request();
    let trace_state = traceparent.map(|_| session.trace().trace_state());
    encode_request_head(
        out,
        &view,
        route,
        &route.group.servers[server].authority,
        Client {
            addr: view.peer(),
            secure: view.is_secure(),
            subject: view.tls().and_then(|t| t.client_subject),
            early_data: view.tls().is_some_and(|t| t.early_data),
            request_id: session.request_id(),
            trace: traceparent.zip(trace_state.as_deref()),
        },
        info,
        tap,
    );
}

/// Phase 3: writes the upstream request head. The authority first (the
/// client's, or the server's when `preserve_host` is off), then the client's
/// fields minus hop-by-hop ones, those the proxy sets and those the cache's
/// `tap` replaces, then forwarding fields, the route's rules and the tap's
/// own, then the framing.
pub(super) fn encode_request_head(
    out: &mut impl RequestHeadSink,
    request: &RequestView<'_>,
    route: &ProxyRoute,
    server_authority: &str,
    client: Client<'_>,
    info: &RequestInfo,
    tap: &mut impl ResponseTap,
) {
    let Client {
        addr: peer,
        secure,
        subject,
        early_data,
        request_id,
        trace,
    } = client;
    // An absolute-form target (`http://host/path`) goes on as its path and
    // query; origin-form and `*` as they came.
    let target = request.target();
    let (path, query) = if target.first() == Some(&b'/') || target == b"*" {
        (target, None)
    } else {
        (request.path(), request.query())
    };
    let client_host = request.authority().filter(|h| !h.is_empty());
    let host = match client_host {
        Some(h) if route.preserve_host => h,
        _ => server_authority.as_bytes(),
    };
    out.start(request.method_token(), path, query, host);

    let options = ConnectionOptions::gather(|| request.headers());
    let fw = route.forwarding;
    let configured = |name: &[u8]| {
        [&route.client_addr_header, &route.client_cert_header]
            .into_iter()
            .flatten()
            .any(|h| name.eq_ignore_ascii_case(h.as_bytes()))
    };
    for (name, value) in request.headers() {
        let field = Field::of(name);
        let replaced = match field {
            Field::Host | Field::Expect => true,
            Field::XForwardedFor | Field::XForwardedProto | Field::XForwardedHost => fw.x_forwarded,
            _ => false,
        };
        if replaced || field.is_hop_by_hop() || configured(name) || options.names(name) {
            continue;
        }
        // A traced request's context is Pier's: the client's goes no further.
        if trace.is_some()
            && (name.eq_ignore_ascii_case(b"traceparent")
                || name.eq_ignore_ascii_case(b"tracestate"))
        {
            continue;
        }
        // Replaced by the proxy's own, or not used at all by an extended
        // CONNECT (RFC 8441 §5).
        if (info.websocket_key.is_some() || info.extended_connect)
            && name.eq_ignore_ascii_case(b"sec-websocket-key")
        {
            continue;
        }
        if route.request_rules.as_ref().is_some_and(|r| r.drops(name))
            || tap.drops_request_field(name)
        {
            continue;
        }
        out.field(name, value);
    }

    let ip = peer.ip();
    let scheme = if secure { "https" } else { "http" };
    if fw.x_forwarded {
        out.begin_field(b"X-Forwarded-For");
        let value = out.value();
        for (name, v) in request.headers() {
            if name.len() == 15
                && !v.is_empty()
                && Field::of(name) == Field::XForwardedFor
                && !options.names(name)
            {
                value.extend_from_slice(v);
                value.extend_from_slice(b", ");
            }
        }
        write_ip(value, ip);
        out.end_field(false);
        out.field(b"X-Forwarded-Proto", scheme.as_bytes());
        if let Some(h) = client_host {
            out.field(b"X-Forwarded-Host", h);
        }
    }
    if fw.forwarded {
        out.begin_field(b"Forwarded");
        let value = out.value();
        value.extend_from_slice(b"for=");
        match ip {
            IpAddr::V4(v4) => write_ipv4(value, v4),
            IpAddr::V6(v6) => {
                let _ = write!(value, "\"[{v6}]\"");
            }
        }
        value.extend_from_slice(b";proto=");
        value.extend_from_slice(scheme.as_bytes());
        if let Some(h) = client_host {
            value.extend_from_slice(b";host=\"");
            value.extend_from_slice(h);
            value.push(b'"');
        }
        out.end_field(false);
    }
    if route.via {
        out.field(b"Via", b"1.1 pier");
    }
    // A client's own `Early-Data` goes on as it came (RFC 8470 §5.1).
    if early_data && request.header("early-data").is_none() {
        out.field(b"Early-Data", b"1");
    }
    if let Some(h) = &route.client_addr_header {
        out.begin_field(h.as_bytes());
        write_ip(out.value(), ip);
        out.end_field(false);
    }
    // The subject is RFC 4514 text with control characters escaped, so it is a
    // valid field value as it stands.
    if let (Some(h), Some(subject)) = (&route.client_cert_header, subject) {
        out.field(h.as_bytes(), subject.as_bytes());
    }
    if let Some((parent, state)) = trace {
        out.field_line(parent.name(), parent.value(), parent.line());
        if !state.is_empty() {
            out.field(b"tracestate", state);
        }
    }
    if let Some(rules) = &route.request_rules {
        rules.write_fields(request, request_id, out);
    }
    tap.add_request_fields(out);
    if let Some(key) = &info.websocket_key {
        out.field(b"Sec-WebSocket-Key", key.as_bytes());
    }
    let upgrade = info
        .upgrade
        .then(|| request.header("upgrade").unwrap_or(b""));
    out.finish(info.body, upgrade);
}

/// Appends `ip` as its `Display` form would, an IPv4 address (the usual
/// client) without the formatting machinery: it goes into every forwarded
/// request head.
fn write_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => write_ipv4(out, v4),
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// Appends `ip` in dotted-decimal form.
fn write_ipv4(out: &mut Vec<u8>, ip: Ipv4Addr) {
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        if octet >= 100 {
            out.push(b'0' + octet / 100);
        }
        if octet >= 10 {
            out.push(b'0' + octet / 10 % 10);
        }
        out.push(b'0' + octet % 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        let addresses: [IpAddr; 7] = [
            Ipv4Addr::new(0, 0, 0, 0).into(),
            Ipv4Addr::new(127, 0, 0, 1).into(),
            Ipv4Addr::new(10, 100, 9, 255).into(),
            Ipv4Addr::new(192, 168, 20, 199).into(),
            Ipv4Addr::new(255, 255, 255, 255).into(),
            "2001:db8::1".parse().unwrap(),
            "::ffff:10.0.0.1".parse().unwrap(),
        ];
        for ip in addresses {
            let mut out = Vec::new();
            write_ip(&mut out, ip);
            assert_eq!(String::from_utf8(out).unwrap(), ip.to_string());
        }
    }
}
