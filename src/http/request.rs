//! What a handler can see of a request head, whichever protocol carried it.

use std::net::{IpAddr, SocketAddr};

use super::client_address::ClientAddress;
use crate::http1::parse::{BodyKind, Method, RequestHead, Version};
use crate::http1::HeaderLines;

/// TLS facts of the connection a request came on, for handlers and logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct TlsFacts<'a> {
    /// Negotiated version, e.g. `TLSv1_3`.
    pub version: Option<&'static str>,
    /// Negotiated cipher suite, e.g. `TLS13_AES_128_GCM_SHA256`.
    pub cipher: Option<&'static str>,
    /// Server name the client asked for.
    pub sni: Option<&'a str>,
    /// Subject (RFC 4514) of the verified client certificate, if one was presented.
    pub client_subject: Option<&'a str>,
    /// The request came in TLS early data (0-RTT), before the handshake
    /// ended: it may be a replay (RFC 8470).
    pub early_data: bool,
}

/// Where the head's bytes live; each driver adds its own representation, so the
/// view costs no copy of the head.
#[derive(Clone, Copy)]
enum HeadSource<'a> {
    /// An HTTP/1 head parsed in place: spans into the connection's read buffer.
    Http1 {
        head: &'a RequestHead,
        buf: &'a [u8],
    },
}

/// A borrowed view of one request head: method, target, path, query,
/// authority, fields, version, the client's address and the TLS facts.
#[derive(Clone, Copy)]
pub struct RequestView<'a> {
    source: HeadSource<'a>,
    peer: SocketAddr,
    tls: Option<TlsFacts<'a>>,
    /// Which proxies the listener trusts to name the client; none: the peer is.
    client_address: Option<&'a ClientAddress>,
    /// The listener the request came on, by its position in the configuration.
    listener: usize,
    /// An HTTP/2 or HTTP/3 extended CONNECT (RFC 8441, RFC 9220), seen as
    /// the HTTP/1.1 upgrade it stands for.
    extended_connect: bool,
}

impl<'a> RequestView<'a> {
    /// A view of an HTTP/1 head parsed from `buf` (which starts at the head).
    pub fn http1(
        head: &'a RequestHead,
        buf: &'a [u8],
        peer: SocketAddr,
        tls: Option<TlsFacts<'a>>,
    ) -> Self {
        RequestView {
            source: HeadSource::Http1 { head, buf },
            peer,
            tls,
            client_address: None,
            listener: 0,
            extended_connect: false,
        }
    }

    /// The view of an extended CONNECT (RFC 8441 §5, RFC 9220 §3), whose head is
    /// the HTTP/1.1 request it stands for: a `GET` of its path with
    /// `Connection: upgrade` and `Upgrade:` its `:protocol`. The client sent
    /// no `Sec-WebSocket-Key`; a proxy that relays it invents one.
    pub fn from_extended_connect(mut self) -> Self {
        self.extended_connect = true;
        self
    }

    /// Whether the request came as an extended CONNECT: its answer is
    /// a tunnel (`:status 200`) or an error, never a plain 2xx.
    pub fn is_extended_connect(&self) -> bool {
        self.extended_connect
    }

    /// The view of a request that came on listener `listener` (its position
    /// in the configuration).
    pub fn on_listener(mut self, listener: usize) -> Self {
        self.listener = listener;
        self
    }

    /// The listener the request came on, by its position in the configuration.
    #[inline]
    pub fn listener(&self) -> usize {
        self.listener
    }

    /// The view with the listener's trusted proxies, which [`Self::client`]
    /// consults.
    pub fn with_client_address(mut self, resolver: &'a ClientAddress) -> Self {
        self.client_address = Some(resolver);
        self
    }

    /// The client's address: the peer's, or the one a trusted proxy reported
    /// ([`ClientAddress`]). Access rules, rate limits and the log use it.
    pub fn client(&self) -> IpAddr {
        self.client_socket().ip()
    }

    /// The client's address and port (port 0 when a proxy gave none).
    pub fn client_socket(&self) -> SocketAddr {
        match self.client_address {
            Some(r) if r.trusts_any() => r.client_socket_of(self),
            _ => SocketAddr::new(self.peer.ip().to_canonical(), self.peer.port()),
        }
    }

    /// The method, matched against the well-known tokens.
    pub fn method(&self) -> Method {
        match self.source {
            HeadSource::Http1 { head, .. } => head.method,
        }
    }

    /// The method token exactly as sent.
    pub fn method_token(&self) -> &'a [u8] {
        match self.source {
            HeadSource::Http1 { head, buf } => head.method_token(buf),
        }
    }

    /// The request target exactly as sent.
    pub fn target(&self) -> &'a [u8] {
        match self.source {
            HeadSource::Http1 { head, buf } => head.target(buf),
        }
    }

    /// The path without the query, still percent-encoded.
    pub fn path(&self) -> &'a [u8] {
        match self.source {
            HeadSource::Http1 { head, buf } => head.path(buf),
        }
    }

    /// The query without its `?`, if the target has one.
    pub fn query(&self) -> Option<&'a [u8]> {
        match self.source {
            HeadSource::Http1 { head, buf } => head.query(buf),
        }
    }

    /// The authority (`Host`, or the absolute-form target's), port included.
    pub fn authority(&self) -> Option<&'a [u8]> {
        match self.source {
            HeadSource::Http1 { head, buf } => head.host(buf),
        }
    }

    /// The authority's host name without the port, for routing.
    pub fn host_name(&self) -> Option<&'a [u8]> {
        match self.source {
            HeadSource::Http1 { head, buf } => head.host_name(buf),
        }
    }

    /// The first value of a field, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        match self.source {
            HeadSource::Http1 { head, buf } => head.header(buf, name),
        }
    }

    /// Every field line as (name as sent, value), in order.
    pub fn headers(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let HeadSource::Http1 { head, buf } = self.source;
        head.header_spans()
            .iter()
            .map(move |h| (h.name.get(buf), h.value.get(buf)))
    }

    /// The protocol version the request came with.
    pub fn version(&self) -> Version {
        match self.source {
            HeadSource::Http1 { head, .. } => head.version,
        }
    }

    /// How the request body is delimited: none, a known length, or unknown
    /// until it ends (`Chunked`: HTTP/1 chunks, or an HTTP/2 stream without a
    /// content-length). A handler that forwards the body frames it from this.
    pub fn body_kind(&self) -> BodyKind {
        match self.source {
            HeadSource::Http1 { head, .. } => head.body,
        }
    }

    /// The client's address (after the PROXY protocol, when the listener takes it).
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// TLS facts, or `None` on plain TCP.
    pub fn tls(&self) -> Option<&TlsFacts<'a>> {
        self.tls.as_ref()
    }

    /// Whether the request came over TLS.
    pub fn is_secure(&self) -> bool {
        self.tls.is_some()
    }

    /// The HTTP/1 head and its buffer, for code not yet moved onto this view.
    pub fn http1_head(&self) -> (&'a RequestHead, &'a [u8]) {
        match self.source {
            HeadSource::Http1 { head, buf } => (head, buf),
        }
    }
}
