//! The client address of a request: the connection's (after the PROXY
//! protocol), or, when that connection comes from a trusted proxy, the address
//! the proxy reported, as nginx's realip module does with
//! `real_ip_recursive on`: `X-Forwarded-For` (or another configured header)
//! and RFC 7239 `Forwarded` lists are read from the right, trusted proxies are
//! skipped, and the first address that is not one of them is the client. An
//! untrusted peer's header is ignored, and so is its PROXY protocol header
//! when the listener names the proxies it trusts, so a client cannot name its
//! own address. The access log, access rules and rate limits all use it.

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use crate::http::RequestView;

/// Where trusted proxies put the client address.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Carrier {
    /// RFC 7239 `Forwarded`: the `for=` parameter of each element.
    Forwarded,
    /// `X-Forwarded-For` or another header holding a list of addresses.
    List(Box<str>),
}

/// Which proxies are trusted to report the client address, and in which header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddress {
    trusted: Box<[IpNet]>,
    carrier: Carrier,
}

impl Default for ClientAddress {
    fn default() -> Self {
        ClientAddress::new(Vec::new(), "X-Forwarded-For")
    }
}

impl ClientAddress {
    /// `trusted` empty: the connection's address is always the client's.
    /// `header` is `Forwarded` (RFC 7239) or a header holding a list of
    /// addresses, `X-Forwarded-For` by default.
    pub fn new(trusted: Vec<IpNet>, header: &str) -> Self {
        let carrier = if header.eq_ignore_ascii_case("forwarded") {
            Carrier::Forwarded
        } else {
            Carrier::List(header.into())
        };
        ClientAddress {
            trusted: trusted.into_boxed_slice(),
            carrier,
        }
    }

    /// Whether any proxy is trusted; if not, the connection's address is the
    /// client's and no header is read.
    pub fn trusts_any(&self) -> bool {
        !self.trusted.is_empty()
    }

    fn is_trusted(&self, addr: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&addr))
    }

    /// Whether a PROXY protocol header from `peer` is read: from anyone when no
    /// proxy is listed (the listener's promise), else from listed proxies only.
    pub fn accepts_proxy_header_from(&self, peer: IpAddr) -> bool {
        self.trusted.is_empty() || self.is_trusted(peer.to_canonical())
    }

    /// The client address of `request`, IPv4-mapped addresses as IPv4.
    pub fn client_of(&self, request: &RequestView<'_>) -> IpAddr {
        self.client_socket_of(request).ip()
    }

    /// The client address and port of `request`: the peer's own, or the
    /// forwarded one (port 0 when the proxy gave none).
    pub fn client_socket_of(&self, request: &RequestView<'_>) -> SocketAddr {
        let peer = request.peer();
        let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
        if self.trusted.is_empty() || !self.is_trusted(peer.ip()) {
            return peer;
        }
        let name = match &self.carrier {
            Carrier::Forwarded => "forwarded",
            Carrier::List(name) => name,
        };
        // Every line of the header, last first, each read right to left.
        let lines: Vec<&[u8]> = request
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, value)| value)
            .collect();
        let mut client = peer;
        for entry in lines
            .iter()
            .rev()
            .flat_map(|line| line.split(|&b| b == b',').rev())
        {
            let addr = match self.carrier {
                Carrier::Forwarded => forwarded_for(entry),
                Carrier::List(_) => parse_address(entry),
            };
            match addr {
                Some(addr) => {
                    client = addr;
                    if !self.is_trusted(addr.ip()) {
                        break;
                    }
                }
                // A malformed entry (or an obfuscated `for=_hidden`) ends the
                // walk at the last address read.
                None => break,
            }
        }
        client
    }
}

/// One address, possibly with a port (`192.0.2.1:5000`, `[2001:db8::1]:5000`).
fn parse_address(entry: &[u8]) -> Option<SocketAddr> {
    let text = std::str::from_utf8(entry.trim_ascii()).ok()?;
    let text = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text);
    if let Ok(addr) = text.parse::<IpAddr>() {
        return Some(SocketAddr::new(addr.to_canonical(), 0));
    }
    if let Some(bare) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        return bare
            .parse::<IpAddr>()
            .ok()
            .map(|a| SocketAddr::new(a.to_canonical(), 0));
    }
    text.parse::<SocketAddr>()
        .ok()
        .map(|s| SocketAddr::new(s.ip().to_canonical(), s.port()))
}

/// The `for=` node of one RFC 7239 `Forwarded` element
/// (`for=192.0.2.60;proto=http;by=203.0.113.43`), or `None` when it has none
/// or names no address (`unknown`, an obfuscated `_hidden`).
fn forwarded_for(element: &[u8]) -> Option<SocketAddr> {
    element.split(|&b| b == b';').find_map(|pair| {
        let pair = pair.trim_ascii();
        let eq = pair.iter().position(|&b| b == b'=')?;
        let (name, value) = (pair[..eq].trim_ascii(), &pair[eq + 1..]);
        if name.eq_ignore_ascii_case(b"for") {
            parse_address(value)
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::parse::{parse_request, Limits, Parsed, RequestHead};

    fn resolved(resolver: &ClientAddress, peer: &str, head: &str) -> IpAddr {
        let mut parsed = RequestHead::default();
        let buf = head.as_bytes();
        assert!(matches!(
            parse_request(buf, &Limits::default(), &mut parsed),
            Ok(Parsed::Complete)
        ));
        let view = RequestView::http1(&parsed, buf, peer.parse().unwrap(), None);
        resolver.client_of(&view)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_rightmost_untrusted_forwarded_address_is_the_client() {
        let r = ClientAddress::new(
            vec![
                "10.0.0.0/8".parse().unwrap(),
                "127.0.0.1/32".parse().unwrap(),
            ],
            "X-Forwarded-For",
        );
        let get = |xff: &str| format!("GET / HTTP/1.1\r\nHost: a\r\n{xff}\r\n");
        // Each header sent by the trusted proxy at 127.0.0.1, and the client it names.
        for (header, client) in [
            // Through two trusted proxies: the address before them.
            ("6.6.6.6, 203.0.113.9, 10.1.1.1\r\n", "203.0.113.9"),
            // Lines are one list, the last line last.
            (
                "203.0.113.9\r\nx-forwarded-for: 10.2.2.2\r\n",
                "203.0.113.9",
            ),
            // Ports and brackets are read; a malformed entry stops the walk.
            ("[2001:db8::7]:443, 10.0.0.3:80\r\n", "2001:db8::7"),
            ("bogus, 10.0.0.3\r\n", "10.0.0.3"),
        ] {
            let head = get(&format!("X-Forwarded-For: {header}"));
            assert_eq!(resolved(&r, "127.0.0.1:1", &head), ip(client), "{header}");
        }
        // No header: the proxy itself.
        assert_eq!(resolved(&r, "127.0.0.1:1", &get("")), ip("127.0.0.1"));
        // An untrusted connection cannot name its own address.
        let c = resolved(&r, "192.0.2.1:1", &get("X-Forwarded-For: 10.9.9.9\r\n"));
        assert_eq!(c, ip("192.0.2.1"));
        // Nothing trusted: the header is never read.
        let none = ClientAddress::default();
        let c = resolved(&none, "127.0.0.1:1", &get("X-Forwarded-For: 1.2.3.4\r\n"));
        assert_eq!(c, ip("127.0.0.1"));
    }

    #[test]
    fn rfc_7239_forwarded_elements_are_read_from_the_right() {
        let r = ClientAddress::new(vec!["10.0.0.0/8".parse().unwrap()], "Forwarded");
        let get = |f: &str| format!("GET / HTTP/1.1\r\nHost: a\r\nForwarded: {f}\r\n\r\n");
        // Each header sent by the trusted proxy at 10.0.0.1, and the client it names.
        for (header, client) in [
            (
                "for=6.6.6.6, for=198.51.100.17;proto=https;by=10.0.0.1, For=\"10.2.3.4\"",
                "198.51.100.17",
            ),
            (
                "proto=http;for=\"[2001:db8:cafe::17]:4711\"",
                "2001:db8:cafe::17",
            ),
            // An obfuscated or unknown node ends the walk at the last address read.
            ("for=6.6.6.6, for=_hidden, for=10.0.0.9", "10.0.0.9"),
        ] {
            assert_eq!(
                resolved(&r, "10.0.0.1:1", &get(header)),
                ip(client),
                "{header}"
            );
        }
        // X-Forwarded-For is not read when Forwarded is the carrier.
        let c = resolved(
            &r,
            "10.0.0.1:1",
            "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n",
        );
        assert_eq!(c, ip("10.0.0.1"));
        // From an untrusted peer the header is ignored.
        let c = resolved(&r, "192.0.2.1:1", &get("for=10.0.0.3"));
        assert_eq!(c, ip("192.0.2.1"));
    }

    #[test]
    fn the_proxy_header_is_read_from_listed_proxies_only() {
        let none = ClientAddress::default();
        assert!(none.accepts_proxy_header_from(ip("192.0.2.1")));
        let r = ClientAddress::new(vec!["10.0.0.0/8".parse().unwrap()], "X-Forwarded-For");
        assert!(r.accepts_proxy_header_from(ip("10.1.2.3")));
        assert!(r.accepts_proxy_header_from(ip("::ffff:10.1.2.3")));
        assert!(!r.accepts_proxy_header_from(ip("192.0.2.1")));
    }
}
