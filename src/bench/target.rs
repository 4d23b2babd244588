//! Where a load goes: `http(s)://host[:port]/path` for HTTP and `host:port` for
//! streams, parsed and resolved once before any thread starts, so a bad address
//! is a clear error instead of a run full of connect failures.

use std::net::{SocketAddr, ToSocketAddrs};

/// A parsed and resolved HTTP target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpTarget {
    /// `https` (TLS) or `http`.
    pub tls: bool,
    /// Host as written, without IPv6 brackets: the default TLS server name.
    pub host: String,
    /// Port, defaulted from the scheme.
    pub port: u16,
    /// `Host` header value: host, bracketed if IPv6, with the port unless it is the default.
    pub authority: String,
    /// Request target in origin form (`/` when the URL has no path).
    pub path: String,
    /// Address connected to.
    pub addr: SocketAddr,
}

impl HttpTarget {
    /// Parses and resolves `url`.
    pub fn parse(url: &str) -> Result<HttpTarget, String> {
        let parts = parse_url(url)?;
        let addr = resolve_host(&parts.host, parts.port)?;
        Ok(HttpTarget { addr, ..parts })
    }

    /// The URL again, normalised, for reports.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority, self.path)
    }
}

/// A parsed and resolved `host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPort {
    /// Host as written, without IPv6 brackets.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Address connected to.
    pub addr: SocketAddr,
}

impl HostPort {
    /// Parses and resolves `host:port` (`[v6]:port` for IPv6).
    pub fn parse(text: &str) -> Result<HostPort, String> {
        let (host, port) = split_host_port(text)?;
        let port = port.ok_or_else(|| format!("{text:?}: missing port; write HOST:PORT"))?;
        let addr = resolve_host(&host, port)?;
        Ok(HostPort { host, port, addr })
    }
}

/// Splits a URL without resolving it; `addr` is left unspecified.
pub fn parse_url(url: &str) -> Result<HttpTarget, String> {
    let bad = |why: &str| format!("invalid URL {url:?}: {why}");
    let (tls, rest) = if let Some(r) = strip_prefix_ci(url, "http://") {
        (false, r)
    } else if let Some(r) = strip_prefix_ci(url, "https://") {
        (true, r)
    } else if let Some((scheme, _)) = url.split_once("://") {
        return Err(bad(&format!(
            "unsupported scheme {scheme:?}; use http:// or https://"
        )));
    } else {
        return Err(bad("missing scheme; write http://HOST[:PORT]/PATH"));
    };
    // The fragment is never sent.
    let rest = rest.split('#').next().unwrap_or("");
    let cut = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(cut);
    if authority.contains('@') {
        return Err(bad("user information in the URL is not supported"));
    }
    let (host, port) = split_host_port(authority).map_err(|e| bad(&e))?;
    let port = port.unwrap_or(if tls { 443 } else { 80 });
    if let Some(b) = path.bytes().find(|&b| b <= b' ' || b >= 0x7f) {
        return Err(bad(&format!(
            "byte 0x{b:02x} in the path; percent-encode it"
        )));
    }
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    let shown_host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.clone()
    };
    let authority = if port == if tls { 443 } else { 80 } {
        shown_host
    } else {
        format!("{shown_host}:{port}")
    };
    Ok(HttpTarget {
        tls,
        host,
        port,
        authority,
        path,
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
    })
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| s.get(prefix.len()..))
        .flatten()
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn split_host_port(text: &str) -> Result<(String, Option<u16>), String> {
    let (host, port) = if let Some(v6) = text.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("{text:?}: unclosed '['"))?;
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{text:?}: not an IPv6 address inside [ ]"));
        }
        match after {
            "" => (host, None),
            p => (
                host,
                Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| format!("{text:?}: unexpected text after ']'"))?,
                ),
            ),
        }
    } else {
        match text.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err(format!("{text:?}: missing host"));
    }
    if !text.starts_with('[')
        && !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(format!("{host:?} is not a valid host name"));
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(format!("{p:?} is not a valid port")),
        },
    };
    Ok((host.to_string(), port))
}

/// Resolves once; the first address wins, as wrk does.
pub fn resolve_host(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {host}: no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_host_port_and_path() {
        let t = parse_url("http://127.0.0.1:8080/a/b?c=d#frag").unwrap();
        assert!(!t.tls);
        assert_eq!(
            (
                t.host.as_str(),
                t.port,
                t.authority.as_str(),
                t.path.as_str()
            ),
            ("127.0.0.1", 8080, "127.0.0.1:8080", "/a/b?c=d")
        );
        let t = parse_url("HTTPS://localhost").unwrap();
        assert!(t.tls);
        assert_eq!(
            (t.port, t.authority.as_str(), t.path.as_str()),
            (443, "localhost", "/")
        );
        let t = parse_url("http://[::1]:81?x").unwrap();
        assert_eq!(
            (t.host.as_str(), t.authority.as_str(), t.path.as_str()),
            ("::1", "[::1]:81", "/?x")
        );
        assert_eq!(t.url(), "http://[::1]:81/?x");
        let t = parse_url("http://example.com:80/").unwrap();
        assert_eq!(t.authority, "example.com");
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        for (url, why) in [
            ("ftp://x/", "unsupported scheme"),
            ("127.0.0.1:8080/", "missing scheme"),
            ("http:///x", "missing host"),
            ("http://a:0/", "not a valid port"),
            ("http://a:99999/", "not a valid port"),
            ("http://a:/", "not a valid port"),
            ("http://u@a/", "user information"),
            ("http://a b/", "not a valid host"),
            ("http://[::1/", "unclosed"),
            ("http://[zz]/", "IPv6"),
            ("http://a/p q", "percent-encode"),
            ("http://a/\u{e9}", "percent-encode"),
        ] {
            let e = parse_url(url).expect_err(url);
            assert!(e.contains(why), "{url}: {e}");
        }
    }

    #[test]
    fn host_port_needs_a_port() {
        assert_eq!(HostPort::parse("127.0.0.1:9").unwrap().port, 9);
        assert_eq!(HostPort::parse("[::1]:9").unwrap().host, "::1");
        assert!(HostPort::parse("127.0.0.1")
            .unwrap_err()
            .contains("missing port"));
    }
}
