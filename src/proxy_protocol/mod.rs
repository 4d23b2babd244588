//! PROXY protocol v1 (text) and v2 (binary), sans-IO: parse a header from the
//! start of a buffer, and encode one. A load balancer in front of Pier (HAProxy,
//! a cloud load balancer) sends it first on each connection so Pier sees the real
//! client address; Pier sends it to upstreams of a `tcp` listener for the same reason.
//!
//! Parsing is strict, since a listener that accepts the protocol must refuse
//! connections without a valid header (anyone could otherwise claim any address):
//! v1 lines are at most 107 bytes with exact spacing and CRLF, v2 headers must
//! have the signature, version 2, a known command and an address block that fits.
//!
//! [`receive`] reads a header off an accepted socket with this parser.

pub mod receive;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// v2 signature: the 12 bytes every v2 header starts with.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// Longest v1 header, CRLF included (spec section 2.1).
pub const V1_MAX: usize = 107;
/// Largest v2 header accepted (16-byte preamble plus addresses and TLVs).
pub const V2_MAX: usize = 16 + 4096;

const TLV_ALPN: u8 = 0x01;
const TLV_AUTHORITY: u8 = 0x02;

/// Protocol version to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyVersion {
    /// Human-readable line.
    V1,
    /// Binary, with TLVs (ALPN, SNI).
    V2,
}

impl ProxyVersion {
    /// Parses `v1` or `v2`.
    pub fn parse(s: &str) -> Result<ProxyVersion, String> {
        match s {
            "v1" | "1" => Ok(ProxyVersion::V1),
            "v2" | "2" => Ok(ProxyVersion::V2),
            _ => Err(format!(
                "unknown PROXY protocol version {s:?}; expected \"v1\" or \"v2\""
            )),
        }
    }
}

/// What a header says about the connection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// The original client; `None` for v1 `UNKNOWN`, v2 `LOCAL` or non-IP families
    /// (the socket's own peer address then stands).
    pub source: Option<SocketAddr>,
    /// The address the client connected to.
    pub destination: Option<SocketAddr>,
    /// v2 ALPN TLV.
    pub alpn: Option<Vec<u8>>,
    /// v2 authority TLV (the TLS SNI the client sent).
    pub authority: Option<Vec<u8>>,
}

/// Result of a parse attempt that did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyParsed {
    /// Not enough bytes yet; nothing seen so far is wrong.
    Partial,
    /// A whole header of this many bytes.
    Complete(Header, usize),
}

/// Why a header was refused; the connection is closed.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The bytes are not a PROXY protocol header at all.
    Missing,
    /// A v1 line that breaks the grammar or is longer than 107 bytes.
    BadV1,
    /// A v2 header with a wrong version, command, length or TLV.
    BadV2,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Missing => "no PROXY protocol header",
            Error::BadV1 => "malformed PROXY protocol v1 header",
            Error::BadV2 => "malformed PROXY protocol v2 header",
        })
    }
}

impl std::error::Error for Error {}

/// Parses a v1 or v2 header at the start of `buf`.
pub fn parse_proxy_header(buf: &[u8]) -> Result<ProxyParsed, Error> {
    let n = buf.len().min(V2_SIGNATURE.len());
    if buf[..n] == V2_SIGNATURE[..n] {
        if n < V2_SIGNATURE.len() {
            return Ok(ProxyParsed::Partial);
        }
        return parse_v2(buf);
    }
    let n = buf.len().min(6);
    if buf[..n] == b"PROXY "[..n] {
        if n < 6 {
            return Ok(ProxyParsed::Partial);
        }
        return parse_v1(buf);
    }
    Err(Error::Missing)
}

fn parse_v1(buf: &[u8]) -> Result<ProxyParsed, Error> {
    let window = &buf[..buf.len().min(V1_MAX)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= V1_MAX {
            Err(Error::BadV1)
        } else {
            Ok(ProxyParsed::Partial)
        };
    };
    if lf == 0 || window[lf - 1] != b'\r' {
        return Err(Error::BadV1);
    }
    let line = std::str::from_utf8(&window[..lf - 1]).map_err(|_| Error::BadV1)?;
    let mut parts = line.split(' ');
    if parts.next() != Some("PROXY") {
        return Err(Error::BadV1);
    }
    let proto = parts.next().ok_or(Error::BadV1)?;
    let header = match proto {
        "UNKNOWN" => Header::default(),
        "TCP4" | "TCP6" => {
            let (src, dst, sport, dport) = (
                parts.next().ok_or(Error::BadV1)?,
                parts.next().ok_or(Error::BadV1)?,
                parts.next().ok_or(Error::BadV1)?,
                parts.next().ok_or(Error::BadV1)?,
            );
            if parts.next().is_some() {
                return Err(Error::BadV1);
            }
            let ip = |s: &str| -> Result<IpAddr, Error> {
                if proto == "TCP4" {
                    s.parse::<Ipv4Addr>()
                        .map(IpAddr::V4)
                        .map_err(|_| Error::BadV1)
                } else {
                    s.parse::<Ipv6Addr>()
                        .map(IpAddr::V6)
                        .map_err(|_| Error::BadV1)
                }
            };
            let port = |s: &str| -> Result<u16, Error> {
                let ok = !s.is_empty()
                    && s.len() <= 5
                    && s.bytes().all(|b| b.is_ascii_digit())
                    && (s == "0" || !s.starts_with('0'));
                if !ok {
                    return Err(Error::BadV1);
                }
                s.parse().map_err(|_| Error::BadV1)
            };
            Header {
                source: Some(SocketAddr::new(ip(src)?, port(sport)?)),
                destination: Some(SocketAddr::new(ip(dst)?, port(dport)?)),
                alpn: None,
                authority: None,
            }
        }
        _ => return Err(Error::BadV1),
    };
    Ok(ProxyParsed::Complete(header, lf + 1))
}

fn parse_v2(buf: &[u8]) -> Result<ProxyParsed, Error> {
    if buf.len() < 16 {
        return Ok(ProxyParsed::Partial);
    }
    let ver_cmd = buf[12];
    let family = buf[13];
    let len = u16::from_be_bytes([buf[14], buf[15]]) as usize;
    if ver_cmd >> 4 != 2 {
        return Err(Error::BadV2);
    }
    let local = match ver_cmd & 0x0f {
        0 => true,
        1 => false,
        _ => return Err(Error::BadV2),
    };
    if 16 + len > V2_MAX {
        return Err(Error::BadV2);
    }
    if buf.len() < 16 + len {
        return Ok(ProxyParsed::Partial);
    }
    let body = &buf[16..16 + len];
    let (addrs, rest): (Option<(SocketAddr, SocketAddr)>, &[u8]) = match family {
        // TCP or UDP over IPv4, then over IPv6.
        0x11 | 0x12 => {
            let (pair, rest) = v2_address_pair(body, 4, |a| {
                IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))
            })?;
            (Some(pair), rest)
        }
        0x21 | 0x22 => {
            let (pair, rest) = v2_address_pair(body, 16, |a| {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(a);
                IpAddr::V6(Ipv6Addr::from(octets))
            })?;
            (Some(pair), rest)
        }
        // Unix sockets: 216 bytes of paths, which say nothing useful here.
        0x31 | 0x32 => {
            if body.len() < 216 {
                return Err(Error::BadV2);
            }
            (None, &body[216..])
        }
        0x00 => (None, body),
        _ => return Err(Error::BadV2),
    };
    let mut header = Header::default();
    if !local {
        if let Some((src, dst)) = addrs {
            header.source = Some(src);
            header.destination = Some(dst);
        }
    }
    let mut tlvs = rest;
    while !tlvs.is_empty() {
        if tlvs.len() < 3 {
            return Err(Error::BadV2);
        }
        let kind = tlvs[0];
        let n = u16::from_be_bytes([tlvs[1], tlvs[2]]) as usize;
        let value = tlvs.get(3..3 + n).ok_or(Error::BadV2)?;
        match kind {
            TLV_ALPN => header.alpn = Some(value.to_vec()),
            TLV_AUTHORITY => header.authority = Some(value.to_vec()),
            _ => {}
        }
        tlvs = &tlvs[3 + n..];
    }
    Ok(ProxyParsed::Complete(header, 16 + len))
}

/// The address block of a v2 header: source and destination addresses of
/// `len` bytes each (made into addresses by `ip`), then their ports; returns
/// the pair and what follows the block.
fn v2_address_pair(
    body: &[u8],
    len: usize,
    ip: impl Fn(&[u8]) -> IpAddr,
) -> Result<((SocketAddr, SocketAddr), &[u8]), Error> {
    let end = 2 * len + 4;
    if body.len() < end {
        return Err(Error::BadV2);
    }
    let port = |o: usize| u16::from_be_bytes([body[o], body[o + 1]]);
    let src = SocketAddr::new(ip(&body[..len]), port(2 * len));
    let dst = SocketAddr::new(ip(&body[len..2 * len]), port(2 * len + 2));
    Ok(((src, dst), &body[end..]))
}

/// Appends a v1 line for a connection from `src` to `dst` (`UNKNOWN` when the
/// families differ, as the spec asks).
pub fn encode_v1(out: &mut Vec<u8>, src: SocketAddr, dst: SocketAddr) {
    use std::io::Write;
    let (src, dst) = same_family(src, dst);
    let _ = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            write!(out, "PROXY TCP4 {s} {d} {} {}\r\n", src.port(), dst.port())
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            write!(out, "PROXY TCP6 {s} {d} {} {}\r\n", src.port(), dst.port())
        }
        _ => write!(out, "PROXY UNKNOWN\r\n"),
    };
}

/// Appends a v2 PROXY header with optional ALPN and authority (SNI) TLVs.
pub fn encode_v2(
    out: &mut Vec<u8>,
    src: SocketAddr,
    dst: SocketAddr,
    alpn: Option<&[u8]>,
    authority: Option<&[u8]>,
) {
    let (src, dst) = same_family(src, dst);
    let tlv_len = |v: Option<&[u8]>| v.map_or(0, |v| 3 + v.len().min(u16::MAX as usize));
    out.extend_from_slice(&V2_SIGNATURE);
    out.push(0x21);
    let (family, addr_len) = match (src.ip(), dst.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => (0x11, 12),
        (IpAddr::V6(_), IpAddr::V6(_)) => (0x21, 36),
        _ => (0x00, 0),
    };
    out.push(family);
    let len = addr_len + tlv_len(alpn) + tlv_len(authority);
    out.extend_from_slice(&(len.min(u16::MAX as usize) as u16).to_be_bytes());
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
        }
        _ => {}
    }
    if addr_len > 0 {
        out.extend_from_slice(&src.port().to_be_bytes());
        out.extend_from_slice(&dst.port().to_be_bytes());
    }
    for (kind, v) in [(TLV_ALPN, alpn), (TLV_AUTHORITY, authority)] {
        if let Some(v) = v {
            let v = &v[..v.len().min(u16::MAX as usize)];
            out.push(kind);
            out.extend_from_slice(&(v.len() as u16).to_be_bytes());
            out.extend_from_slice(v);
        }
    }
}

/// IPv4-mapped IPv6 addresses (from a dual-stack socket) as plain IPv4.
fn canonical(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// Both addresses in one family, so the header can carry them: IPv4 when both
/// are (or map to) IPv4, else IPv6 with any IPv4 one mapped. A dual-stack
/// listener sees IPv4 clients as mapped addresses next to its own IPv6 address;
/// sending UNSPEC there would lose the client address.
fn same_family(src: SocketAddr, dst: SocketAddr) -> (SocketAddr, SocketAddr) {
    let (s, d) = (canonical(src), canonical(dst));
    if s.is_ipv4() == d.is_ipv4() {
        return (s, d);
    }
    let v6 = |a: SocketAddr| match a.ip() {
        IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), a.port()),
        IpAddr::V6(_) => a,
    };
    (v6(s), v6(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_families_keep_the_client_address() {
        // Found by the fuzz target: an IPv4-mapped source next to an IPv6
        // destination re-encoded as UNSPEC and lost the source.
        let src: SocketAddr = "[::ffff:192.0.2.7]:4242".parse().unwrap();
        let dst: SocketAddr = "[2001:db8::1]:443".parse().unwrap();
        let mut out = Vec::new();
        encode_v2(&mut out, src, dst, None, None);
        match parse_proxy_header(&out) {
            Ok(ProxyParsed::Complete(h, n)) => {
                assert_eq!(n, out.len());
                assert_eq!(h.source, Some(src));
                assert_eq!(h.destination, Some(dst));
            }
            other => panic!("{other:?}"),
        }
        out.clear();
        encode_v1(&mut out, "192.0.2.7:4242".parse().unwrap(), dst);
        assert!(out.starts_with(b"PROXY TCP6 ::ffff:192.0.2.7 2001:db8::1 4242 443"));
        match parse_proxy_header(&out) {
            Ok(ProxyParsed::Complete(h, _)) => assert_eq!(h.source.map(|a| a.port()), Some(4242)),
            other => panic!("{other:?}"),
        }
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn v1_round_trips_and_leaves_the_payload() {
        let mut out = Vec::new();
        encode_v1(&mut out, sa("192.0.2.1:5000"), sa("198.51.100.2:443"));
        assert_eq!(out, b"PROXY TCP4 192.0.2.1 198.51.100.2 5000 443\r\n");
        out.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let Ok(ProxyParsed::Complete(h, n)) = parse_proxy_header(&out) else {
            panic!("{:?}", parse_proxy_header(&out))
        };
        assert_eq!(h.source, Some(sa("192.0.2.1:5000")));
        assert_eq!(h.destination, Some(sa("198.51.100.2:443")));
        assert_eq!(&out[n..], b"GET / HTTP/1.1\r\n");

        let mut out = Vec::new();
        encode_v1(&mut out, sa("[2001:db8::1]:1"), sa("[2001:db8::2]:2"));
        assert_eq!(out, b"PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n");
        assert!(
            matches!(parse_proxy_header(&out), Ok(ProxyParsed::Complete(h, _)) if h.source == Some(sa("[2001:db8::1]:1")))
        );
    }

    #[test]
    fn v1_partial_unknown_and_errors() {
        let line = b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n";
        for cut in 0..line.len() {
            assert_eq!(
                parse_proxy_header(&line[..cut]),
                Ok(ProxyParsed::Partial),
                "cut {cut}"
            );
        }
        assert!(matches!(
            parse_proxy_header(b"PROXY UNKNOWN\r\n"),
            Ok(ProxyParsed::Complete(Header { source: None, .. }, 15))
        ));
        let bad: &[&[u8]] = &[
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
            b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
            b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n",
            b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",
            b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
        ];
        for b in bad {
            assert_eq!(
                parse_proxy_header(b),
                Err(Error::BadV1),
                "{:?}",
                String::from_utf8_lossy(b)
            );
        }
        let long = [b"PROXY ".as_slice(), &[b'x'; 120]].concat();
        assert_eq!(parse_proxy_header(&long), Err(Error::BadV1));
        assert_eq!(
            parse_proxy_header(b"GET / HTTP/1.1\r\n"),
            Err(Error::Missing)
        );
        assert_eq!(parse_proxy_header(b"\x16\x03\x01"), Err(Error::Missing));
    }

    #[test]
    fn v2_round_trips_with_tlvs() {
        let mut out = Vec::new();
        encode_v2(
            &mut out,
            sa("192.0.2.1:5000"),
            sa("198.51.100.2:443"),
            Some(b"h2"),
            Some(b"example.com"),
        );
        let total = out.len();
        out.extend_from_slice(b"payload");
        let Ok(ProxyParsed::Complete(h, n)) = parse_proxy_header(&out) else {
            panic!()
        };
        assert_eq!(n, total);
        assert_eq!(h.source, Some(sa("192.0.2.1:5000")));
        assert_eq!(h.destination, Some(sa("198.51.100.2:443")));
        assert_eq!(h.alpn.as_deref(), Some(&b"h2"[..]));
        assert_eq!(h.authority.as_deref(), Some(&b"example.com"[..]));
        for cut in 0..total {
            assert_eq!(
                parse_proxy_header(&out[..cut]),
                Ok(ProxyParsed::Partial),
                "cut {cut}"
            );
        }

        let mut out = Vec::new();
        encode_v2(&mut out, sa("[2001:db8::1]:7"), sa("[::1]:8"), None, None);
        assert_eq!(out.len(), 16 + 36);
        assert!(
            matches!(parse_proxy_header(&out), Ok(ProxyParsed::Complete(h, 52)) if h.source == Some(sa("[2001:db8::1]:7")))
        );
        // Mapped addresses go out as IPv4.
        let mut out = Vec::new();
        encode_v2(
            &mut out,
            sa("[::ffff:10.0.0.1]:7"),
            sa("10.0.0.2:8"),
            None,
            None,
        );
        assert_eq!(out[13], 0x11);
    }

    #[test]
    fn v2_local_and_errors() {
        let mut local = V2_SIGNATURE.to_vec();
        local.extend_from_slice(&[0x20, 0x00, 0x00, 0x00]);
        assert_eq!(
            parse_proxy_header(&local),
            Ok(ProxyParsed::Complete(Header::default(), 16))
        );

        let mut good = Vec::new();
        encode_v2(&mut good, sa("1.2.3.4:1"), sa("5.6.7.8:2"), None, None);
        let mut bad_version = good.clone();
        bad_version[12] = 0x11;
        assert_eq!(parse_proxy_header(&bad_version), Err(Error::BadV2));
        let mut bad_cmd = good.clone();
        bad_cmd[12] = 0x22;
        assert_eq!(parse_proxy_header(&bad_cmd), Err(Error::BadV2));
        let mut short = good.clone();
        short[15] = 4; // claims 4 bytes for an IPv4 block of 12
        short.truncate(20);
        assert_eq!(parse_proxy_header(&short), Err(Error::BadV2));
        let mut bad_tlv = good.clone();
        bad_tlv[15] += 3;
        bad_tlv.extend_from_slice(&[0x01, 0x00, 0x09]);
        assert_eq!(parse_proxy_header(&bad_tlv), Err(Error::BadV2));
        let mut huge = good;
        huge[14] = 0xff;
        assert_eq!(parse_proxy_header(&huge), Err(Error::BadV2));
    }
}
