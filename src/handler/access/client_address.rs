//! The client address the access checks judge: the connection's (after the
//! PROXY protocol), or, when that connection comes from a trusted proxy, the
//! address the proxy put in `X-Forwarded-For` (or the configured header), as
//! nginx's realip module does with `real_ip_recursive on`: the list is read
//! from the right, trusted proxies are skipped, and the first address that is
//! not one of them is the client. An untrusted connection's header is ignored,
//! so a client cannot name its own address.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::http::RequestView;

/// Which proxies are trusted to report the client address, and in which header.
#[derive(Debug, Default)]
pub struct ClientAddress {
    trusted: Box<[IpNet]>,
    header: Box<str>,
}

impl ClientAddress {
    /// `trusted` empty: the connection's address is always the client's.
    pub fn new(trusted: Vec<IpNet>, header: &str) -> Self {
        ClientAddress {
            trusted: trusted.into_boxed_slice(),
            header: header.into(),
        }
    }

    fn is_trusted(&self, addr: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&addr))
    }

    /// The client address of `request`, IPv4-mapped addresses as IPv4.
    pub fn client_of(&self, request: &RequestView<'_>) -> IpAddr {
        let peer = request.peer().ip().to_canonical();
        if self.trusted.is_empty() || !self.is_trusted(peer) {
            return peer;
        }
        // Every line of the header, last first, each read right to left.
        let lines: Vec<&[u8]> = request
            .headers()
            .filter(|(name, _)| name.eq_ignore_ascii_case(self.header.as_bytes()))
            .map(|(_, value)| value)
            .collect();
        let mut client = peer;
        for entry in lines
            .iter()
            .rev()
            .flat_map(|line| line.split(|&b| b == b',').rev())
        {
            match parse_forwarded_entry(entry) {
                Some(addr) => {
                    client = addr;
                    if !self.is_trusted(addr) {
                        break;
                    }
                }
                // A malformed entry ends the walk at the last address read.
                None => break,
            }
        }
        client
    }
}

/// One entry of `X-Forwarded-For`: an address, possibly with a port
/// (`192.0.2.1:5000`, `[2001:db8::1]:5000`).
fn parse_forwarded_entry(entry: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(entry.trim_ascii()).ok()?;
    if let Ok(addr) = text.parse::<IpAddr>() {
        return Some(addr.to_canonical());
    }
    text.parse::<std::net::SocketAddr>()
        .ok()
        .map(|s| s.ip().to_canonical())
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
        // Through two trusted proxies: the address before them.
        let c = resolved(
            &r,
            "127.0.0.1:1",
            &get("X-Forwarded-For: 6.6.6.6, 203.0.113.9, 10.1.1.1\r\n"),
        );
        assert_eq!(c, ip("203.0.113.9"));
        // Lines are one list, the last line last.
        let c = resolved(
            &r,
            "127.0.0.1:1",
            &get("X-Forwarded-For: 203.0.113.9\r\nx-forwarded-for: 10.2.2.2\r\n"),
        );
        assert_eq!(c, ip("203.0.113.9"));
        // Ports and brackets are read; a malformed entry stops the walk.
        let c = resolved(
            &r,
            "127.0.0.1:1",
            &get("X-Forwarded-For: [2001:db8::7]:443, 10.0.0.3:80\r\n"),
        );
        assert_eq!(c, ip("2001:db8::7"));
        let c = resolved(
            &r,
            "127.0.0.1:1",
            &get("X-Forwarded-For: bogus, 10.0.0.3\r\n"),
        );
        assert_eq!(c, ip("10.0.0.3"));
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
}
