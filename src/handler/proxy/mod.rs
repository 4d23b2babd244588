//! `proxy`: HTTP/1.1 reverse proxy. Pingora's shape: the two sides are named
//! *downstream* (the client) and *upstream* (the origin server), errors record
//! which side failed, and every request goes through the same phases in order:
//!
//! 1. **request filter**: refuse what cannot be proxied (CONNECT, an oversized body);
//! 2. **pick upstream**: balance over the servers that are up ([`balance`]);
//! 3. **rewrite**: encode the upstream request head: hop-by-hop fields dropped,
//!    forwarding fields added, framing made unambiguous ([`encode_request_head`]);
//! 4. **connect**: reuse a pooled connection or open one ([`pool`]), retrying on
//!    another server as the rules allow;
//! 5. **send**: stream the request body, re-framed, with backpressure;
//! 6. **response filter**: parse the upstream head with the same `http1` codec and
//!    encode the downstream head;
//! 7. **stream**: relay the response body, never holding more than a buffer;
//! 8. **log and return**: failures are logged with the upstream address; a cleanly
//!    finished connection goes back to the pool.
//!
//! Everything per request lives in buffers reused through the worker, so a warm
//! keep-alive exchange does not allocate.

pub mod balance;
pub mod configure;
pub mod health;
pub mod pool;
pub mod upstream;

use std::cell::RefCell;
use std::fmt;
use std::future::{poll_fn, Future};
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::time::{timeout, Instant};
use tracing::{debug, warn};

use crate::config::Config;
use crate::http1::body::BodyDecoder;
use crate::http1::parse::{BodyKind, HeaderSpan, Method, RequestHead, TargetForm, Version};
use crate::http1::response::{eq_lowercase, parse_response, ResponseBody, ResponseHead};
use crate::http1::write::{self, BodyFraming, ConnectionHeader};
use crate::http1::Parsed;
use crate::observe::metrics::HandlerKind;
use crate::server::h1::{within, Downstream, Exit, Http1Conn as Conn, WRITE_HIGH_WATER};
use crate::worker::READ_BUF;
use balance::{hash64, Balance, HashKey};
use pool::UpstreamStream;
use upstream::{GroupState, UpstreamGroup};

/// Which side of the proxy failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client.
    Downstream,
    /// The origin server.
    Upstream,
}

/// What went wrong.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Connection refused, unreachable, or TLS handshake failed.
    Connect,
    /// A deadline passed.
    Timeout,
    /// Connection reset or closed before the exchange finished.
    Reset,
    /// Bytes that break HTTP/1.1 framing or syntax.
    Malformed,
    /// No server is up.
    NoServer,
}

/// A proxy failure: the side, the kind, and a cause for the log.
#[derive(Debug, Clone)]
pub struct ProxyError {
    /// Which side failed.
    pub side: Side,
    /// What happened.
    pub kind: ErrorKind,
    /// Detail for the log line.
    pub cause: String,
}

impl ProxyError {
    fn upstream(kind: ErrorKind, cause: impl fmt::Display) -> Self {
        ProxyError {
            side: Side::Upstream,
            kind,
            cause: cause.to_string(),
        }
    }

    /// The status the client gets: upstream timeouts are 504, no server 503,
    /// other upstream failures 502; downstream timeouts 408, other faults 400.
    pub fn status(&self) -> u16 {
        match (self.side, self.kind) {
            (Side::Upstream, ErrorKind::Timeout) => 504,
            (Side::Upstream, ErrorKind::NoServer) => 503,
            (Side::Upstream, _) => 502,
            (Side::Downstream, ErrorKind::Timeout) => 408,
            (Side::Downstream, _) => 400,
        }
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            Side::Downstream => "downstream",
            Side::Upstream => "upstream",
        };
        let what = match self.kind {
            ErrorKind::Connect => "could not be connected to",
            ErrorKind::Timeout => "timed out",
            ErrorKind::Reset => "closed the connection before the exchange finished",
            ErrorKind::Malformed => "sent malformed HTTP/1.1",
            ErrorKind::NoServer => "has no server up",
        };
        write!(f, "the {side} {what}: {}", self.cause)
    }
}

impl std::error::Error for ProxyError {}

/// Which forwarding fields a route adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forwarding {
    /// `X-Forwarded-For` (appended), `X-Forwarded-Proto`, `X-Forwarded-Host` (replaced).
    pub x_forwarded: bool,
    /// RFC 7239 `Forwarded` (appended).
    pub forwarded: bool,
}

/// A `proxy` route: the group and how requests are rewritten for it.
#[derive(Debug)]
pub struct ProxyRoute {
    /// Where requests go.
    pub group: Arc<UpstreamGroup>,
    /// Forwarding fields added.
    pub forwarding: Forwarding,
    /// Add `Via: 1.1 pier`.
    pub via: bool,
    /// Send the client's Host (else the server's `host:port`).
    pub preserve_host: bool,
    /// Header set to the client address; incoming copies are removed.
    pub client_addr_header: Option<Box<str>>,
    /// Header set to the client certificate's subject; incoming copies are removed.
    pub client_cert_header: Option<Box<str>>,
}

/// A worker's proxy state: one [`GroupState`] per upstream group, plus reusable buffers.
pub struct ProxyWorker {
    /// Indexed by [`UpstreamGroup::index`].
    pub groups: Vec<GroupState>,
    bufs: RefCell<Vec<Vec<u8>>>,
    heads: RefCell<Vec<ResponseHead>>,
}

/// Buffers kept for reuse per worker.
const POOLED_BUFS: usize = 256;
/// A buffer that grew beyond this is freed rather than pooled.
const POOLED_BUF_MAX: usize = 128 * 1024;
/// Request body bytes gathered before a write to the upstream.
const SEND_HIGH_WATER: usize = 64 * 1024;
/// Response data at least this large is written straight from the upstream buffer.
const DIRECT_WRITE_MIN: usize = 16 * 1024;
/// Upstream read buffer capacity while streaming a body.
const UPSTREAM_READ_BUF: usize = 32 * 1024;

impl ProxyWorker {
    /// State for every group of `config`.
    pub fn new(config: &Config) -> Self {
        ProxyWorker {
            groups: config
                .upstreams
                .iter()
                .map(|g| GroupState::new(g, config.workers))
                .collect(),
            bufs: RefCell::new(Vec::new()),
            heads: RefCell::new(Vec::new()),
        }
    }

    fn take_buf(&self) -> Vec<u8> {
        self.bufs
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(READ_BUF))
    }

    fn give_buf(&self, mut b: Vec<u8>) {
        if b.capacity() > POOLED_BUF_MAX || b.capacity() == 0 {
            return;
        }
        b.clear();
        let mut bufs = self.bufs.borrow_mut();
        if bufs.len() < POOLED_BUFS {
            bufs.push(b);
        }
    }

    fn take_head(&self) -> ResponseHead {
        self.heads.borrow_mut().pop().unwrap_or_default()
    }

    fn give_head(&self, h: ResponseHead) {
        let mut heads = self.heads.borrow_mut();
        if heads.len() < POOLED_BUFS {
            heads.push(h);
        }
    }

    /// Closes expired idle upstream connections of every group.
    pub fn sweep(&self) {
        let now = std::time::Instant::now();
        for g in &self.groups {
            g.pool.sweep(now);
        }
    }

    /// Closes every idle upstream connection: the configuration drains, and
    /// nothing will check them out or sweep them again.
    pub fn close_idle(&self) {
        for g in &self.groups {
            g.pool.clear();
        }
    }
}

/// What the phases need to know about the downstream request once its head is consumed.
#[derive(Debug, Clone, Copy)]
struct RequestInfo {
    method: Method,
    version: Version,
    keep_alive: bool,
    body: BodyKind,
    expect_continue: bool,
    /// `Connection: upgrade` with an `Upgrade` field on a GET.
    upgrade: bool,
}

impl RequestInfo {
    fn new(head: &RequestHead, req: &[u8]) -> Self {
        let upgrade = head.method == Method::Get
            && head.version == Version::Http11
            && head.header(req, "upgrade").is_some()
            && head
                .headers(req)
                .filter(|(n, _)| n.eq_ignore_ascii_case(b"connection"))
                .any(|(_, v)| list_elements(v).any(|t| t.eq_ignore_ascii_case(b"upgrade")));
        RequestInfo {
            method: head.method,
            version: head.version,
            keep_alive: head.keep_alive,
            body: head.body,
            expect_continue: head.expect_continue,
            upgrade,
        }
    }

    /// RFC 9110 §9.2.2: safe to send twice.
    fn idempotent(&self) -> bool {
        matches!(
            self.method,
            Method::Get
                | Method::Head
                | Method::Put
                | Method::Delete
                | Method::Options
                | Method::Trace
        )
    }
}

/// Non-empty elements of a comma-separated list, OWS trimmed.
fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(|e| {
            let start = e
                .iter()
                .position(|&b| b != b' ' && b != b'\t')
                .unwrap_or(e.len());
            let end = e
                .iter()
                .rposition(|&b| b != b' ' && b != b'\t')
                .map_or(start, |i| i + 1);
            &e[start..end.max(start)]
        })
        .filter(|e| !e.is_empty())
}

/// A field name the proxy treats specially, recognised with one switch on the
/// length and at most two comparisons, so a head is classified in one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// `Connection`: hop-by-hop, and names further hop-by-hop fields.
    Connection,
    /// `Upgrade`: hop-by-hop, passed on only for an upgrade the proxy relays.
    Upgrade,
    /// Never forwarded as received, in either direction (RFC 9110 §7.6.1):
    /// `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`.
    HopByHop,
    /// Framing the proxy writes itself.
    ContentLength,
    Host,
    Expect,
    Date,
    Server,
    XForwardedFor,
    XForwardedProto,
    XForwardedHost,
    /// Anything else: end-to-end unless a `Connection` field names it.
    Other,
}

impl Field {
    fn of(name: &[u8]) -> Field {
        let is = |lower: &[u8]| eq_lowercase(name, lower);
        match name.len() {
            2 if is(b"te") => Field::HopByHop,
            4 if is(b"host") => Field::Host,
            4 if is(b"date") => Field::Date,
            6 if is(b"server") => Field::Server,
            6 if is(b"expect") => Field::Expect,
            7 if is(b"upgrade") => Field::Upgrade,
            7 if is(b"trailer") => Field::HopByHop,
            10 if is(b"connection") => Field::Connection,
            10 if is(b"keep-alive") => Field::HopByHop,
            14 if is(b"content-length") => Field::ContentLength,
            15 if is(b"x-forwarded-for") => Field::XForwardedFor,
            16 if is(b"proxy-connection") => Field::HopByHop,
            16 if is(b"x-forwarded-host") => Field::XForwardedHost,
            17 if is(b"transfer-encoding") => Field::HopByHop,
            17 if is(b"x-forwarded-proto") => Field::XForwardedProto,
            _ => Field::Other,
        }
    }

    /// Never forwarded as received, in either direction (RFC 9110 §7.6.1), plus
    /// the framing fields the proxy writes itself.
    fn is_hop_by_hop(self) -> bool {
        matches!(
            self,
            Field::Connection | Field::Upgrade | Field::HopByHop | Field::ContentLength
        )
    }
}

/// Options a `Connection` field may hold gathered in place: more than this and
/// the values are searched again for each field.
const CONNECTION_TOKENS: usize = 8;

/// The options of a message's `Connection` fields, gathered once so that each
/// other field is checked against a short list (`Connection: close, X-Foo`
/// means X-Foo is for this hop only).
struct ConnectionOptions<'b> {
    tokens: [&'b [u8]; CONNECTION_TOKENS],
    len: usize,
    /// Every `Connection` value, when the options did not fit in `tokens`.
    overflow: Option<Vec<&'b [u8]>>,
}

impl<'b> ConnectionOptions<'b> {
    /// `fields` gives the message's field lines, from the start each time.
    fn gather<I: Iterator<Item = (&'b [u8], &'b [u8])>>(fields: impl Fn() -> I) -> Self {
        let is_connection = |name: &[u8]| eq_lowercase(name, b"connection");
        let mut options = ConnectionOptions {
            tokens: [&[]; CONNECTION_TOKENS],
            len: 0,
            overflow: None,
        };
        for (_, value) in fields().filter(|(n, _)| is_connection(n)) {
            for token in list_elements(value) {
                if options.len == CONNECTION_TOKENS {
                    options.len = 0;
                    options.overflow = Some(
                        fields()
                            .filter(|(n, _)| is_connection(n))
                            .map(|(_, v)| v)
                            .collect(),
                    );
                    return options;
                }
                options.tokens[options.len] = token;
                options.len += 1;
            }
        }
        options
    }

    /// Whether an option names the field `name`.
    fn names(&self, name: &[u8]) -> bool {
        match &self.overflow {
            None => self.tokens[..self.len]
                .iter()
                .any(|t| t.eq_ignore_ascii_case(name)),
            Some(values) => values
                .iter()
                .any(|v| list_elements(v).any(|t| t.eq_ignore_ascii_case(name))),
        }
    }
}

/// Appends forwarded field lines as `name: value\r\n`. Lines that already read
/// so in the received head and follow one another there are copied as one run,
/// so a head forwarded mostly unchanged costs a few copies, not four per line.
#[derive(Default)]
struct FieldCopy {
    /// Received lines `start..end` not yet appended.
    run: Option<(usize, usize)>,
}

impl FieldCopy {
    fn field(&mut self, out: &mut Vec<u8>, buf: &[u8], h: HeaderSpan) {
        let (name, value) = (h.name, h.value);
        let plain = value.start() == name.end() + 2
            && buf.get(name.end()..value.start()) == Some(b": ")
            && buf.get(value.end()..value.end() + 2) == Some(b"\r\n");
        if !plain {
            self.finish(out, buf);
            out.extend_from_slice(name.get(buf));
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.get(buf));
            out.extend_from_slice(b"\r\n");
            return;
        }
        match &mut self.run {
            Some((_, end)) if *end == name.start() => *end = value.end() + 2,
            _ => {
                self.finish(out, buf);
                self.run = Some((name.start(), value.end() + 2));
            }
        }
    }

    /// Appends the pending run; call once the last line has been given.
    fn finish(&mut self, out: &mut Vec<u8>, buf: &[u8]) {
        if let Some((start, end)) = self.run.take() {
            out.extend_from_slice(buf.get(start..end).unwrap_or(&[]));
        }
    }
}

/// The downstream client as the forwarding fields describe it.
#[derive(Debug, Clone, Copy)]
struct Client<'a> {
    /// Address (the PROXY protocol source, when the listener accepts it).
    addr: SocketAddr,
    /// Whether the request came over TLS.
    secure: bool,
    /// Subject of the verified client certificate (mTLS), if one was presented.
    subject: Option<&'a str>,
}

/// Phase 3: encodes the upstream request head. Host first (the client's, or the
/// server's when `preserve_host` is off), then the client's fields minus
/// hop-by-hop ones and those the proxy sets, then forwarding fields, then
/// exactly one framing field.
fn encode_request_head(
    out: &mut Vec<u8>,
    head: &RequestHead,
    req: &[u8],
    route: &ProxyRoute,
    server_authority: &str,
    client: Client<'_>,
    info: &RequestInfo,
) {
    let Client {
        addr: peer,
        secure,
        subject,
    } = client;
    out.extend_from_slice(head.method_token(req));
    out.push(b' ');
    if head.target_form == TargetForm::Absolute {
        out.extend_from_slice(head.path(req));
        if let Some(q) = head.query(req) {
            out.push(b'?');
            out.extend_from_slice(q);
        }
    } else {
        out.extend_from_slice(head.target(req));
    }
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    let client_host = head.host(req).filter(|h| !h.is_empty());
    match client_host {
        Some(h) if route.preserve_host => out.extend_from_slice(h),
        _ => out.extend_from_slice(server_authority.as_bytes()),
    }
    out.extend_from_slice(b"\r\n");

    let options = ConnectionOptions::gather(|| head.headers(req));
    let fw = route.forwarding;
    let configured = |name: &[u8]| {
        [&route.client_addr_header, &route.client_cert_header]
            .into_iter()
            .flatten()
            .any(|h| name.eq_ignore_ascii_case(h.as_bytes()))
    };
    let mut copy = FieldCopy::default();
    for &h in head.header_spans() {
        let name = h.name.get(req);
        let field = Field::of(name);
        let replaced = match field {
            Field::Host | Field::Expect => true,
            Field::XForwardedFor | Field::XForwardedProto | Field::XForwardedHost => fw.x_forwarded,
            _ => false,
        };
        if replaced || field.is_hop_by_hop() || configured(name) || options.names(name) {
            continue;
        }
        copy.field(out, req, h);
    }
    copy.finish(out, req);

    let ip = peer.ip();
    if fw.x_forwarded {
        out.extend_from_slice(b"X-Forwarded-For: ");
        for (name, value) in head.headers(req) {
            if name.len() == 15
                && !value.is_empty()
                && Field::of(name) == Field::XForwardedFor
                && !options.names(name)
            {
                out.extend_from_slice(value);
                out.extend_from_slice(b", ");
            }
        }
        let _ = write!(out, "{ip}");
        out.extend_from_slice(if secure {
            b"\r\nX-Forwarded-Proto: https\r\n"
        } else {
            b"\r\nX-Forwarded-Proto: http\r\n"
        });
        if let Some(h) = client_host {
            out.extend_from_slice(b"X-Forwarded-Host: ");
            out.extend_from_slice(h);
            out.extend_from_slice(b"\r\n");
        }
    }
    if fw.forwarded {
        out.extend_from_slice(b"Forwarded: for=");
        match ip {
            IpAddr::V4(v4) => {
                let _ = write!(out, "{v4}");
            }
            IpAddr::V6(v6) => {
                let _ = write!(out, "\"[{v6}]\"");
            }
        }
        out.extend_from_slice(if secure {
            b";proto=https"
        } else {
            b";proto=http"
        });
        if let Some(h) = client_host {
            out.extend_from_slice(b";host=\"");
            out.extend_from_slice(h);
            out.push(b'"');
        }
        out.extend_from_slice(b"\r\n");
    }
    if route.via {
        out.extend_from_slice(b"Via: 1.1 pier\r\n");
    }
    if let Some(h) = &route.client_addr_header {
        out.extend_from_slice(h.as_bytes());
        let _ = write!(out, ": {ip}\r\n");
    }
    // The subject is RFC 4514 text with control characters escaped, so it is a
    // valid field value as it stands.
    if let (Some(h), Some(subject)) = (&route.client_cert_header, subject) {
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(subject.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if info.upgrade {
        out.extend_from_slice(b"Connection: upgrade\r\nUpgrade: ");
        out.extend_from_slice(head.header(req, "upgrade").unwrap_or(b""));
        out.extend_from_slice(b"\r\n");
    }
    match info.body {
        BodyKind::None => {}
        BodyKind::Length(n) => {
            out.extend_from_slice(b"Content-Length: ");
            write::write_decimal(out, n);
            out.extend_from_slice(b"\r\n");
        }
        BodyKind::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"\r\n");
}

/// Phase 6: the downstream response head from the upstream one. Our `Server`,
/// `Date`, framing and `Connection`; the upstream's other end-to-end fields.
/// `keep_length` passes the upstream's Content-Length through (HEAD and 304,
/// where it describes a body that is not sent).
#[allow(clippy::too_many_arguments)]
fn encode_response_head(
    out: &mut Vec<u8>,
    resp: &ResponseHead,
    buf: &[u8],
    date: &[u8],
    framing: BodyFraming,
    connection: ConnectionHeader,
    keep_length: bool,
    upgrade: bool,
) {
    write::write_head_start(out, resp.status, date, framing, connection);
    let options = ConnectionOptions::gather(|| resp.headers(buf));
    let mut copy = FieldCopy::default();
    for &h in resp.header_spans() {
        let name = h.name.get(buf);
        let keep = match Field::of(name) {
            Field::ContentLength => keep_length,
            Field::Upgrade if upgrade => true,
            Field::Date | Field::Server => false,
            field if field.is_hop_by_hop() => false,
            _ => !options.names(name),
        };
        if keep {
            copy.field(out, buf, h);
        }
    }
    copy.finish(out, buf);
    if upgrade {
        out.extend_from_slice(b"Connection: upgrade\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// The balancing key of a request (for `balance = "hash"`).
fn hash_key(key: &HashKey, head: &RequestHead, req: &[u8], peer: SocketAddr) -> u64 {
    match key {
        HashKey::ClientIp => match peer.ip() {
            IpAddr::V4(v4) => hash64(&v4.octets()),
            IpAddr::V6(v6) => hash64(&v6.octets()),
        },
        HashKey::Path => hash64(head.path(req)),
        HashKey::Header(name) => hash64(head.header(req, name).unwrap_or(b"")),
    }
}

/// Opens a connection to server `i` (and its TLS session) within the connect timeout.
pub async fn connect(group: &UpstreamGroup, i: usize) -> Result<UpstreamStream, ProxyError> {
    let server = &group.servers[i];
    let attempt = async {
        let tcp = crate::sockopt::connect_upstream(server.addr, &group.socket)
            .await
            .map_err(|e| ProxyError::upstream(ErrorKind::Connect, e))?;
        match &group.tls {
            None => Ok(UpstreamStream::Plain(tcp)),
            Some(tls) => {
                let name = match &tls.sni {
                    Some(n) => n.clone(),
                    None => rustls::pki_types::ServerName::try_from(
                        upstream::host_of(&server.authority).to_string(),
                    )
                    .map_err(|e| ProxyError::upstream(ErrorKind::Connect, e))?,
                };
                let s = tokio_rustls::TlsConnector::from(tls.config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| {
                        ProxyError::upstream(
                            ErrorKind::Connect,
                            format!(
                                "TLS handshake failed: {}",
                                crate::tls::error_text::describe_io_error(&e)
                            ),
                        )
                    })?;
                Ok(UpstreamStream::Tls(Box::new(s)))
            }
        }
    };
    match timeout(group.connect_timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(ProxyError::upstream(
            ErrorKind::Timeout,
            "connect timed out",
        )),
    }
}

/// Counts a request as in flight on a server (least_conn) while alive.
struct InFlight<'a>(&'a std::cell::Cell<u32>);

impl<'a> InFlight<'a> {
    fn new(c: &'a std::cell::Cell<u32>) -> Self {
        c.set(c.get() + 1);
        InFlight(c)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// How sending a request failed.
enum SendError {
    /// The client failed (or sent a bad body); the exchange is over.
    Downstream(Exit),
    /// The upstream failed while the request was being written; true when the
    /// whole request is still in the buffer and could be sent again.
    Upstream(ProxyError, bool),
}

/// How reading a response head failed.
struct HeadError {
    error: ProxyError,
    /// No byte of a response arrived (so a retry cannot duplicate a response).
    nothing_received: bool,
}

/// Serves a request routed to a proxy: the phases in order. Returns whether the
/// downstream connection stays open.
pub(crate) async fn serve<D: Downstream>(
    conn: &mut Conn<'_, D>,
    route: &ProxyRoute,
) -> Result<bool, Exit> {
    let ctx = conn.ctx;
    let http = &ctx.config.http;
    let group = &*route.group;
    let state = &ctx.proxy.groups[group.index];
    let b = conn.bufs.as_mut().expect("buffers held while handling");
    let req = &b.read[conn.rpos..];
    let info = RequestInfo::new(&b.head, req);
    let started = std::time::Instant::now();

    // Phase 1: request filter.
    if let BodyKind::Length(n) = info.body {
        if n > http.max_body_bytes {
            return Err(Exit::Reject(413));
        }
    }
    if info.method == Method::Connect {
        return Err(Exit::Reject(405));
    }
    // Held until the response is relayed: the request is in flight until then.
    let Some(_admission) = state.admit() else {
        return Ok(refuse_busy(conn, &info, group, decoder_for(&info, http)));
    };
    let key = match &group.balance {
        Balance::Hash(k) => hash_key(k, &b.head, req, conn.peer),
        _ => 0,
    };

    // The rewrite depends on the server only when Host is replaced, so the head is
    // encoded once, and again for another server only in that case.
    let head_start = conn.rpos;
    let body_start = head_start + b.head.head_len;
    let mut up_head = ctx.proxy.take_buf();
    let mut up_read = ctx.proxy.take_buf();
    // Body bytes are gathered here; a request without a body needs no buffer.
    let mut out = if info.body == BodyKind::None {
        Vec::new()
    } else {
        ctx.proxy.take_buf()
    };
    let mut resp = ctx.proxy.take_head();
    let mut encoded_for = None;

    let decoder_start = decoder_for(&info, http);
    let mut decoder = decoder_start.clone();
    let mut tried: Vec<usize> = Vec::new();
    let mut retries_left = group.retries;
    let mut stale_retry_left = true;
    let mut fresh_only = false;
    let mut continued = !info.expect_continue;
    // Where the request ended in the buffer once it was sent whole.
    let mut request_end: Option<usize> = None;

    // The first attempt reuses the start time: one clock read fewer per request.
    let mut first_attempt = Some(started);
    // The failure of the last server tried, for when no other is left.
    let mut last_failure: Option<(ProxyError, std::net::SocketAddr)> = None;
    let result = loop {
        let now = first_attempt.take().unwrap_or_else(std::time::Instant::now);
        // Phase 2: pick upstream.
        let Some(server) = balance::pick(group, state, key, &tried, now) else {
            // Every server was tried: the answer is the last one's failure (a
            // refused connect is 502), not "no server".
            break Err(match last_failure.take() {
                Some((e, addr)) => (e, Some(addr)),
                None => (
                    ProxyError::upstream(
                        ErrorKind::NoServer,
                        "its active health checks report every server down",
                    ),
                    None,
                ),
            });
        };
        let addr = group.servers[server].addr;
        if encoded_for.is_none() || (!route.preserve_host && encoded_for != Some(server)) {
            // Retries happen only while the buffer still holds the whole request.
            up_head.clear();
            let b = conn.bufs.as_ref().expect("buffers held while handling");
            encode_request_head(
                &mut up_head,
                &b.head,
                &b.read[head_start..],
                route,
                &group.servers[server].authority,
                Client {
                    addr: conn.peer,
                    secure: D::SECURE,
                    subject: conn.io.peer_subject(),
                },
                &info,
            );
            encoded_for = Some(server);
        }

        // Phase 4: connect. Nothing has been sent on a failed connect, so any
        // method may go to another server.
        let pooled = if fresh_only {
            None
        } else {
            state.pool.checkout(server, now)
        };
        fresh_only = false;
        let reused = pooled.is_some();
        let mut up = match pooled {
            Some(s) => s,
            None => match connect(group, server).await {
                Ok(s) => s,
                Err(e) => {
                    note_failure(group, state, server, &e);
                    if retries_left > 0 {
                        retries_left -= 1;
                        tried.push(server);
                        last_failure = Some((e, addr));
                        continue;
                    }
                    break Err((e, Some(addr)));
                }
            },
        };
        let in_flight = InFlight::new(&state.servers[server].active);

        // Phase 5: send the head and body, watching for an early answer.
        conn.rpos = body_start;
        decoder = decoder_start.clone();
        up_read.clear();
        let mut interim = false;
        let sent = send_request(
            conn,
            &mut up,
            &up_head,
            &mut out,
            &mut decoder,
            &info,
            &mut continued,
            group.read_timeout,
            Answer {
                buf: &mut up_read,
                head: &mut resp,
                method: info.method,
                limits: &http.limits,
                interim: &mut interim,
            },
        )
        .await;
        // Whether the whole request went out; if not, the upstream answered
        // first, or a write failed, perhaps because the upstream answered and
        // closed without taking the whole body: either way its answer is read.
        let (replayable, complete, write_error) = match sent {
            Ok(s) => (s.replayable, !s.answered_early, None),
            Err(SendError::Downstream(exit)) => {
                ctx.proxy.give_buf(up_head);
                ctx.proxy.give_buf(up_read);
                ctx.proxy.give_buf(out);
                ctx.proxy.give_head(resp);
                return Err(exit);
            }
            Err(SendError::Upstream(e, replayable)) => (replayable, false, Some(e)),
        };
        if complete {
            request_end = Some(conn.rpos);
        }
        let early_failure = match write_error {
            Some(e) if e.kind == ErrorKind::Timeout => (e, replayable),
            _ => {
                // Phase 6: response head.
                match read_response_head(&mut up, &mut up_read, &mut resp, &info, group, http).await
                {
                    Ok(()) => {
                        state.record_success(server);
                        break Ok((server, up, in_flight, complete));
                    }
                    // An interim 1xx the sending skipped counts as an answer:
                    // the request reached the upstream, so it is not sent again.
                    Err(HeadError {
                        error,
                        nothing_received: true,
                    }) if !interim && (error.kind == ErrorKind::Reset || write_error.is_some()) => {
                        (write_error.unwrap_or(error), replayable)
                    }
                    Err(HeadError { error, .. }) => {
                        note_failure(group, state, server, &error);
                        break Err((error, Some(addr)));
                    }
                }
            }
        };
        // Failed before any response byte: a reused pooled connection is retried
        // once on a fresh connection to the same server (the upstream closed it
        // while idle), otherwise idempotent requests go to another server while
        // retries are left. Either way the whole request must still be buffered.
        let (error, replayable) = early_failure;
        if !reused {
            note_failure(group, state, server, &error);
        }
        if replayable {
            if reused && stale_retry_left {
                stale_retry_left = false;
                fresh_only = true;
                debug!(upstream = %addr, error = %error, "pooled connection was dead; retrying on a fresh one");
                continue;
            }
            if retries_left > 0 && info.idempotent() {
                retries_left -= 1;
                tried.push(server);
                last_failure = Some((error, addr));
                continue;
            }
        }
        break Err((error, Some(addr)));
    };

    ctx.stats.upstream_requests.add(1);
    let outcome = match result {
        Err((e, addr)) => {
            ctx.stats.upstream_errors.add(1);
            let status = e.status();
            conn.upstream = addr.map(|a| (a, started.elapsed()));
            match addr {
                Some(a) => {
                    crate::warn_limited!(upstream = %a, group = %group.name, peer = %conn.peer, status, error = %e, "proxy error")
                }
                None => {
                    crate::warn_limited!(group = %group.name, peer = %conn.peer, status, error = %e, "proxy error")
                }
            }
            let end = match info.body {
                BodyKind::None => Some(body_start),
                _ => request_end,
            };
            finish_with_error(conn, &info, status, end)
        }
        Ok((server, up, _in_flight, complete)) => {
            let head_at = std::time::Instant::now();
            let elapsed = head_at.saturating_duration_since(started);
            ctx.stats.upstream_latency(elapsed);
            ctx.stats.request(HandlerKind::Proxy, resp.status);
            conn.status = resp.status;
            conn.upstream = Some((group.servers[server].addr, elapsed));
            let mut info = info;
            if !complete && !consume_buffered_body(conn, &mut decoder) {
                // The upstream answered before the whole body came (nginx does the
                // same): the answer is relayed, and since the rest of the body is
                // unread, the client's framing is in doubt and its connection
                // closes after the answer.
                debug!(upstream = %group.servers[server].addr, peer = %conn.peer, status = resp.status, "upstream answered before the whole request body");
                info.keep_alive = false;
                conn.linger_on_close = true;
            }
            relay_response(
                conn,
                route,
                &info,
                server,
                up,
                &mut up_read,
                &resp,
                complete,
                head_at,
            )
            .await
        }
    };
    ctx.proxy.give_buf(up_head);
    ctx.proxy.give_buf(up_read);
    ctx.proxy.give_buf(out);
    ctx.proxy.give_head(resp);
    outcome
}

/// The decoder of a request's body, bounded by `max_body_bytes`.
fn decoder_for(info: &RequestInfo, http: &crate::config::HttpConfig) -> BodyDecoder {
    BodyDecoder::new(info.body).with_max_body(http.max_body_bytes)
}

/// Runs `decoder` over the body bytes already buffered from `conn.rpos`; true,
/// with `conn.rpos` past the body, when they hold the rest of it.
fn consume_buffered_body<D: Downstream>(conn: &mut Conn<'_, D>, decoder: &mut BodyDecoder) -> bool {
    let Some(b) = conn.bufs.as_ref() else {
        return false;
    };
    loop {
        if decoder.is_done() {
            return true;
        }
        let Ok(step) = decoder.decode(&b.read[conn.rpos..]) else {
            return false;
        };
        conn.rpos += step.consumed;
        if step.done {
            return true;
        }
        if step.consumed == 0 || conn.rpos >= b.read.len() {
            return false;
        }
    }
}

/// Answers 503 with `Retry-After` when this worker's share of the group's
/// `max_in_flight` is taken, without touching an upstream. The connection stays
/// open when the request's body (if any) is already buffered whole, which is
/// then dropped; otherwise it closes after the answer.
fn refuse_busy<D: Downstream>(
    conn: &mut Conn<'_, D>,
    info: &RequestInfo,
    group: &UpstreamGroup,
    mut decoder: BodyDecoder,
) -> bool {
    let ctx = conn.ctx;
    ctx.stats.upstream_rejected.add(1);
    ctx.stats.request(HandlerKind::Proxy, 503);
    conn.status = 503;
    debug!(group = %group.name, peer = %conn.peer, "max_in_flight reached: 503");
    let b = conn.bufs.as_ref().expect("buffers held while handling");
    conn.rpos += b.head.head_len;
    let complete = consume_buffered_body(conn, &mut decoder);
    if !complete {
        conn.linger_on_close = true;
    }
    let keep_alive = info.keep_alive && complete && !ctx.draining.get();
    let b = conn.bufs.as_mut().expect("buffers held while handling");
    let mut date = ctx.date.borrow_mut();
    write::write_status_body(
        &mut b.write,
        503,
        date.get(),
        connection_header(keep_alive, info.version),
        [("Retry-After", group.retry_after.as_bytes())],
        info.method == Method::Head,
    );
    keep_alive
}

/// Counts a failure against a server's passive health, logging when it goes down.
fn note_failure(group: &UpstreamGroup, state: &GroupState, server: usize, e: &ProxyError) {
    if state.record_failure(group, server, std::time::Instant::now()) {
        warn!(
            upstream = %group.servers[server].addr,
            group = %group.name,
            fails = group.max_fails,
            down_for = ?group.fail_timeout,
            error = %e,
            "upstream marked down"
        );
    }
}

/// After a failure before any response byte was sent downstream: answer with
/// `status`, keeping the connection only if the whole request was consumed
/// (`request_end` is where it ended), since otherwise its framing is in doubt.
fn finish_with_error<D: Downstream>(
    conn: &mut Conn<'_, D>,
    info: &RequestInfo,
    status: u16,
    request_end: Option<usize>,
) -> Result<bool, Exit> {
    let ctx = conn.ctx;
    let Some(end) = request_end else {
        return Err(Exit::Reject(status));
    };
    conn.rpos = end;
    ctx.stats.request(HandlerKind::Proxy, status);
    conn.status = status;
    let keep_alive = info.keep_alive && !ctx.draining.get();
    let connection = connection_header(keep_alive, info.version);
    let b = conn.bufs.as_mut().expect("buffers held while handling");
    let mut date = ctx.date.borrow_mut();
    write::write_status_body(
        &mut b.write,
        status,
        date.get(),
        connection,
        std::iter::empty(),
        info.method == Method::Head,
    );
    Ok(keep_alive)
}

fn connection_header(keep_alive: bool, version: Version) -> ConnectionHeader {
    if !keep_alive {
        ConnectionHeader::Close
    } else if version == Version::Http10 {
        ConnectionHeader::KeepAlive
    } else {
        ConnectionHeader::Omit
    }
}

/// How far sending a request got.
#[derive(Debug, Clone, Copy)]
struct Sent {
    /// The whole request came from the buffer, so it can be sent again after
    /// an early failure.
    replayable: bool,
    /// The upstream answered (or closed) before the whole request was sent.
    answered_early: bool,
}

/// Where an upstream's early answer goes while the request is being sent.
struct Answer<'a> {
    /// The upstream read buffer (the response head is parsed from it later).
    buf: &'a mut Vec<u8>,
    /// Scratch for telling a final head from an interim 1xx one.
    head: &'a mut ResponseHead,
    /// The request's method (a response to HEAD has no body).
    method: Method,
    /// Head limits, as for any upstream response.
    limits: &'a crate::http1::Limits,
    /// Set once an interim 1xx head was dropped: the upstream has answered.
    interim: &'a mut bool,
}

impl Answer<'_> {
    /// Whether what the upstream sent so far ends the sending: a final response
    /// head (or bytes that cannot start one). Interim 1xx heads are dropped,
    /// and part of a head waits for the rest.
    fn is_final(&mut self) -> bool {
        loop {
            match parse_response(self.buf, self.limits, self.method, self.head) {
                Ok(Parsed::Complete)
                    if (100..200).contains(&self.head.status) && self.head.status != 101 =>
                {
                    self.buf.drain(..self.head.head_len);
                    *self.interim = true;
                }
                Ok(Parsed::Complete) | Err(_) => return true,
                Ok(Parsed::Partial) => return false,
            }
        }
    }

    fn reserve(&mut self) {
        if self.buf.capacity() - self.buf.len() < 2048 {
            self.buf.reserve(READ_BUF);
        }
    }
}

/// Phase 5: writes the upstream head and streams the request body, re-framed
/// (chunked stays chunked, re-encoded; a length stays that length). Body bytes
/// already buffered go with the head in one write. While a body is being sent
/// the upstream is watched: once it answers (or closes), sending stops and its
/// bytes are in `answer`, as nginx stops sending a body the upstream answered.
#[allow(clippy::too_many_arguments)]
async fn send_request<D: Downstream>(
    conn: &mut Conn<'_, D>,
    up: &mut UpstreamStream,
    up_head: &[u8],
    out: &mut Vec<u8>,
    decoder: &mut BodyDecoder,
    info: &RequestInfo,
    continued: &mut bool,
    idle: Duration,
    mut answer: Answer<'_>,
) -> Result<Sent, SendError> {
    let http = &conn.ctx.config.http;
    let chunked = info.body == BodyKind::Chunked;
    // Without a body the head goes in one write, straight from where it was
    // encoded, and there is nothing to stop.
    if info.body == BodyKind::None {
        write_upstream(up, up_head, idle, true, None).await?;
        return Ok(Sent {
            replayable: true,
            answered_early: false,
        });
    }
    out.clear();
    out.extend_from_slice(up_head);
    let mut replayable = true;
    macro_rules! write_out {
        () => {
            let answered = write_upstream(up, out, idle, replayable, Some(&mut answer)).await;
            out.clear();
            if answered? {
                return Ok(Sent {
                    replayable,
                    answered_early: true,
                });
            }
        };
    }
    loop {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        if !decoder.is_done() {
            let step = decoder
                .decode(&b.read[conn.rpos..])
                .map_err(|e| SendError::Downstream(Exit::Reject(e.status())))?;
            if chunked {
                write::write_chunk(out, step.data);
            } else {
                out.extend_from_slice(step.data);
            }
            conn.rpos += step.consumed;
            if step.done && chunked {
                out.extend_from_slice(write::LAST_CHUNK);
            }
            if !step.done && step.consumed > 0 && conn.rpos < b.read.len() {
                if out.len() >= SEND_HIGH_WATER {
                    write_out!();
                }
                continue;
            }
        }
        if decoder.is_done() {
            write_out!();
            return Ok(Sent {
                replayable,
                answered_early: false,
            });
        }
        // The buffered body is used up: pass on what we have, then wait for more.
        if !out.is_empty() {
            write_out!();
        }
        if !*continued {
            *continued = true;
            b.write.extend_from_slice(write::CONTINUE);
            if conn.flush().await.is_err() {
                return Err(SendError::Downstream(Exit::Broken));
            }
        }
        replayable = false;
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        if conn.rpos > 0 {
            b.read.drain(..conn.rpos);
            conn.rpos = 0;
        }
        if b.read.capacity() - b.read.len() < 2048 {
            b.read.reserve(READ_BUF);
        }
        answer.reserve();
        // Waiting for the client, the upstream may answer first (readiness only:
        // no system call unless it sent something).
        let read = tokio::select! {
            biased;
            r = up.read_into(answer.buf) => Err(r),
            r = timeout(http.body_read_timeout, conn.io.read_into(&mut b.read)) => Ok(r),
        };
        match read {
            Err(Ok(n)) => {
                if n == 0 || answer.is_final() {
                    return Ok(Sent {
                        replayable,
                        answered_early: true,
                    });
                }
            }
            Err(Err(e)) => {
                return Err(SendError::Upstream(
                    ProxyError::upstream(ErrorKind::Reset, e),
                    replayable,
                ))
            }
            Ok(Ok(Ok(0)) | Ok(Err(_))) => return Err(SendError::Downstream(Exit::Broken)),
            Ok(Ok(Ok(n))) => conn.ctx.stats.bytes_in.add(n as u64),
            Ok(Err(_)) => return Err(SendError::Downstream(Exit::Reject(408))),
        }
    }
}

/// Writes `out` to the upstream. With `watch`, stops early (returning true)
/// once the upstream sends a final response head or closes; its bytes are in
/// the answer buffer. Interim 1xx heads do not stop the request.
async fn write_upstream(
    up: &mut UpstreamStream,
    out: &[u8],
    idle: Duration,
    replayable: bool,
    watch: Option<&mut Answer<'_>>,
) -> Result<bool, SendError> {
    // Most writes complete at once; `within` arms a timer only when one does not.
    let r = match watch {
        None => within(idle, up.write_all(out)).await.map(|()| false),
        Some(answer) => {
            let mut pos = 0;
            loop {
                answer.reserve();
                match within(idle, write_watching(up, out, &mut pos, answer.buf)).await {
                    Ok(None) => break Ok(false),
                    Ok(Some(0)) => break Ok(true),
                    Ok(Some(_)) if answer.is_final() => break Ok(true),
                    // Part of a head, or an interim one: go on sending.
                    Ok(Some(_)) => {}
                    Err(e) => break Err(e),
                }
            }
        }
    };
    match r {
        Ok(answered) => Ok(answered),
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Err(SendError::Upstream(
            ProxyError::upstream(ErrorKind::Timeout, "request write timed out"),
            false,
        )),
        Err(e) => Err(SendError::Upstream(
            ProxyError::upstream(ErrorKind::Reset, e),
            replayable,
        )),
    }
}

/// Writes `data[*pos..]` to the upstream (advancing `pos`) unless it sends
/// bytes or closes first: then returns how many bytes it sent (0: closed),
/// appended to `answer`. `None` once everything is written.
async fn write_watching(
    up: &mut UpstreamStream,
    data: &[u8],
    pos: &mut usize,
    answer: &mut Vec<u8>,
) -> std::io::Result<Option<usize>> {
    poll_fn(|cx| {
        if let Poll::Ready(r) = up.poll_read_into(cx, answer) {
            return Poll::Ready(r.map(Some));
        }
        while *pos < data.len() {
            let n = ready!(Pin::new(&mut *up).poll_write(cx, &data[*pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            *pos += n;
        }
        ready!(Pin::new(&mut *up).poll_flush(cx))?;
        Poll::Ready(Ok(None))
    })
    .await
}

/// The deadline of [`lazy_timeout`] passed first.
#[derive(Debug, PartialEq, Eq)]
struct TimedOut;

/// Awaits `fut` within a deadline that is armed only if `fut` cannot finish at
/// once: `deadline` when already set, else `limit` from the first wait (kept in
/// `deadline` for the next call). An exchange answered without waiting reads no
/// clock and touches no timer; one that waits polls `fut` once per wake-up.
async fn lazy_timeout<T>(
    deadline: &mut Option<Instant>,
    limit: Duration,
    fut: impl Future<Output = T>,
) -> Result<T, TimedOut> {
    let mut fut = std::pin::pin!(fut);
    if let Poll::Ready(r) = poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await {
        return Ok(r);
    }
    let at = *deadline.get_or_insert_with(|| Instant::now() + limit);
    let mut sleep = std::pin::pin!(tokio::time::sleep_until(at));
    // `fut` has just registered this task's waker: the first poll only arms the timer.
    let mut polled = true;
    poll_fn(|cx| {
        if !std::mem::take(&mut polled) {
            if let Poll::Ready(r) = fut.as_mut().poll(cx) {
                return Poll::Ready(Ok(r));
            }
        }
        sleep.as_mut().poll(cx).map(|()| Err(TimedOut))
    })
    .await
}

/// Reads the upstream response head into `buf`, skipping interim 1xx heads
/// other than 101 (the proxy answered `Expect: 100-continue` itself).
async fn read_response_head(
    up: &mut UpstreamStream,
    buf: &mut Vec<u8>,
    resp: &mut ResponseHead,
    info: &RequestInfo,
    group: &UpstreamGroup,
    http: &crate::config::HttpConfig,
) -> Result<(), HeadError> {
    // Armed only when a read has to wait, which spares the clock and the timer
    // wheel when the answer is already there.
    let mut deadline = None;
    // Bytes may be there already: an answer that came while the request was sent.
    let mut received = !buf.is_empty();
    loop {
        let parsed = if buf.is_empty() {
            Ok(Parsed::Partial)
        } else {
            parse_response(buf, &http.limits, info.method, resp)
        };
        match parsed {
            Ok(Parsed::Complete) => {
                if (100..200).contains(&resp.status) && resp.status != 101 {
                    buf.drain(..resp.head_len);
                    continue;
                }
                if resp.status == 101 && !info.upgrade {
                    return Err(HeadError {
                        error: ProxyError::upstream(
                            ErrorKind::Malformed,
                            "101 to a request that did not ask to upgrade",
                        ),
                        nothing_received: false,
                    });
                }
                return Ok(());
            }
            Ok(Parsed::Partial) => {}
            Err(e) => {
                return Err(HeadError {
                    error: ProxyError::upstream(ErrorKind::Malformed, e),
                    nothing_received: false,
                })
            }
        }
        if buf.capacity() - buf.len() < 2048 {
            buf.reserve(READ_BUF);
        }
        match lazy_timeout(&mut deadline, group.response_timeout, up.read_into(buf)).await {
            Ok(Ok(0)) => {
                return Err(HeadError {
                    error: ProxyError::upstream(
                        ErrorKind::Reset,
                        if received {
                            "connection closed inside the response head"
                        } else {
                            "connection closed before a response"
                        },
                    ),
                    nothing_received: !received,
                })
            }
            Ok(Ok(_)) => received = true,
            Ok(Err(e)) => {
                return Err(HeadError {
                    error: ProxyError::upstream(ErrorKind::Reset, e),
                    nothing_received: !received,
                })
            }
            Err(_) => {
                return Err(HeadError {
                    error: ProxyError::upstream(ErrorKind::Timeout, "no response head in time"),
                    nothing_received: !received,
                })
            }
        }
    }
}

/// Phases 6-8: writes the downstream head, streams the body, returns the
/// upstream connection to the pool when the exchange ended cleanly.
#[allow(clippy::too_many_arguments)]
async fn relay_response<D: Downstream>(
    conn: &mut Conn<'_, D>,
    route: &ProxyRoute,
    info: &RequestInfo,
    server: usize,
    mut up: UpstreamStream,
    up_read: &mut Vec<u8>,
    resp: &ResponseHead,
    request_complete: bool,
    head_at: std::time::Instant,
) -> Result<bool, Exit> {
    let ctx = conn.ctx;
    let group = &*route.group;
    let state = &ctx.proxy.groups[group.index];
    let addr = group.servers[server].addr;

    if resp.status == 101 {
        return tunnel(conn, group, server, up, up_read, resp).await;
    }

    let http11 = info.version == Version::Http11;
    let (framing, mut decoder, chunked_out) = match resp.body {
        ResponseBody::None => (BodyFraming::None, None, false),
        ResponseBody::Length(n) => (
            BodyFraming::Length(n),
            Some(BodyDecoder::new(BodyKind::Length(n))),
            false,
        ),
        ResponseBody::Chunked if http11 => (
            BodyFraming::Chunked,
            Some(BodyDecoder::new(BodyKind::Chunked)),
            true,
        ),
        ResponseBody::Chunked => (
            BodyFraming::None,
            Some(BodyDecoder::new(BodyKind::Chunked)),
            false,
        ),
        ResponseBody::UntilClose if http11 => {
            (BodyFraming::Chunked, Some(BodyDecoder::until_close()), true)
        }
        ResponseBody::UntilClose => (BodyFraming::None, Some(BodyDecoder::until_close()), false),
    };
    // Without a length or chunks, only closing can end the body for this client.
    let delimited = framing != BodyFraming::None || resp.body == ResponseBody::None;
    let keep_alive = info.keep_alive && delimited && !ctx.draining.get();
    let keep_length =
        resp.body == ResponseBody::None && (info.method == Method::Head || resp.status == 304);
    {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        let mut date = ctx.date.borrow_mut();
        encode_response_head(
            &mut b.write,
            resp,
            up_read,
            date.get(),
            framing,
            connection_header(keep_alive, info.version),
            keep_length,
            false,
        );
    }

    let mut pos = resp.head_len;
    let mut clean = true;
    // Whether the body took a read after the head (then the connection's idle
    // time starts later than `head_at`).
    let mut read_more = false;
    if let Some(decoder) = decoder.as_mut() {
        loop {
            let step = match decoder.decode(&up_read[pos..]) {
                Ok(s) => s,
                Err(e) => {
                    crate::warn_limited!(upstream = %addr, group = %group.name, error = %e, "upstream response body malformed");
                    return Err(Exit::Broken);
                }
            };
            pos += step.consumed;
            if !step.data.is_empty() {
                emit(conn, step.data, chunked_out).await?;
            }
            if step.done {
                break;
            }
            if step.consumed > 0 && pos < up_read.len() {
                // More chunks already buffered: decode them before reading again.
                continue;
            }
            if pos >= up_read.len() {
                up_read.clear();
                pos = 0;
            } else if pos > 0 {
                up_read.drain(..pos);
                pos = 0;
            }
            if up_read.capacity() - up_read.len() < 4096 {
                up_read.reserve(UPSTREAM_READ_BUF);
            }
            // Backpressure: nothing more is read from the upstream until the
            // client has taken what is pending.
            if conn.flush().await.is_err() {
                return Err(Exit::Broken);
            }
            read_more = true;
            match lazy_timeout(&mut None, group.read_timeout, up.read_into(up_read)).await {
                Ok(Ok(0)) => {
                    if decoder.finish().is_ok() {
                        clean = false;
                        break;
                    }
                    crate::warn_limited!(upstream = %addr, group = %group.name, "upstream closed inside the response body");
                    return Err(Exit::Broken);
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    crate::warn_limited!(upstream = %addr, group = %group.name, error = %e, "upstream failed inside the response body");
                    return Err(Exit::Broken);
                }
                Err(_) => {
                    crate::warn_limited!(upstream = %addr, group = %group.name, "upstream response body stalled (read_timeout)");
                    return Err(Exit::Broken);
                }
            }
        }
    }
    if chunked_out {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        b.write.extend_from_slice(write::LAST_CHUNK);
    }
    // A request cut short by an early answer leaves the upstream connection
    // mid-message: it is not reused. Nor is one of a draining configuration,
    // whose pools are no longer swept.
    let draining = conn.ctx.draining.get();
    if clean && request_complete && resp.keep_alive && pos >= up_read.len() && !draining {
        let idle_since = if read_more {
            std::time::Instant::now()
        } else {
            head_at
        };
        state.pool.checkin(server, up, idle_since);
    }
    Ok(keep_alive)
}

/// Sends response body bytes downstream: through the output buffer when small,
/// straight from the upstream buffer when large (no copy).
async fn emit<D: Downstream>(
    conn: &mut Conn<'_, D>,
    data: &[u8],
    chunked: bool,
) -> Result<(), Exit> {
    let write_timeout = conn.ctx.config.http.write_timeout;
    let b = conn.bufs.as_mut().expect("buffers held while proxying");
    if data.len() < DIRECT_WRITE_MIN || b.write.len() + data.len() <= WRITE_HIGH_WATER {
        if chunked {
            write::write_chunk(&mut b.write, data);
        } else {
            b.write.extend_from_slice(data);
        }
        if b.write.len() >= WRITE_HIGH_WATER && conn.flush().await.is_err() {
            return Err(Exit::Broken);
        }
        return Ok(());
    }
    if chunked {
        write::write_chunk_size(&mut b.write, data.len());
    }
    if conn.flush().await.is_err() {
        return Err(Exit::Broken);
    }
    if within(write_timeout, conn.io.write_all(data))
        .await
        .is_err()
    {
        return Err(Exit::Broken);
    }
    conn.ctx.stats.bytes_out.add(data.len() as u64);
    conn.sent += data.len() as u64;
    if chunked {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        b.write.extend_from_slice(b"\r\n");
    }
    Ok(())
}

/// After a 101: forwards the head, then relays bytes both ways until either
/// side closes or the group's read timeout passes with no traffic.
async fn tunnel<D: Downstream>(
    conn: &mut Conn<'_, D>,
    group: &UpstreamGroup,
    server: usize,
    mut up: UpstreamStream,
    up_read: &[u8],
    resp: &ResponseHead,
) -> Result<bool, Exit> {
    let ctx = conn.ctx;
    {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        let mut date = ctx.date.borrow_mut();
        encode_response_head(
            &mut b.write,
            resp,
            up_read,
            date.get(),
            BodyFraming::None,
            ConnectionHeader::Omit,
            false,
            true,
        );
        // Bytes the upstream sent right after its head belong to the new protocol.
        b.write.extend_from_slice(&up_read[resp.head_len..]);
    }
    if conn.flush().await.is_err() {
        return Err(Exit::Broken);
    }
    // Bytes the client sent after its request, likewise.
    let early = {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        let early = b.read[conn.rpos..].to_vec();
        conn.rpos = b.read.len();
        early
    };
    if !early.is_empty() && up.write_all(&early).await.is_err() {
        return Err(Exit::Broken);
    }
    let r = crate::stream_proxy::relay(conn.io.io_mut(), &mut up, group.read_timeout).await;
    debug!(upstream = %group.servers[server].addr, result = ?r, "upgraded connection ended");
    Err(Exit::Broken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::parse::{parse_request, Limits};

    /// Feeds `chunks` one at a time to an early-answer watcher; returns whether
    /// each made the answer final, and whether an interim head was seen.
    fn watch_answer(chunks: &[&[u8]]) -> (Vec<bool>, bool) {
        let (mut buf, mut head, mut interim) = (Vec::new(), ResponseHead::new(), false);
        let limits = Limits::default();
        let mut answer = Answer {
            buf: &mut buf,
            head: &mut head,
            method: Method::Post,
            limits: &limits,
            interim: &mut interim,
        };
        let finals = chunks
            .iter()
            .map(|c| {
                answer.buf.extend_from_slice(c);
                answer.is_final()
            })
            .collect();
        (finals, interim)
    }

    #[test]
    fn an_interim_head_during_sending_counts_as_an_answer_but_not_a_final_one() {
        // 103 then a reset: nothing final, but the upstream did answer, so the
        // request must not be sent again (it reached the upstream).
        assert_eq!(
            watch_answer(&[b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"]),
            (vec![false], true)
        );
        // A final head in pieces: final once complete, no interim.
        assert_eq!(
            watch_answer(&[b"HTTP/1.1 413 Too", b" Large\r\nContent-Length: 0\r\n\r\n"]),
            (vec![false, true], false)
        );
        // Interim then final in one read.
        assert_eq!(
            watch_answer(&[b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"]),
            (vec![true], true)
        );
    }

    fn route(forwarding: Forwarding, via: bool, preserve_host: bool) -> ProxyRoute {
        let group = UpstreamGroup {
            name: "t".into(),
            index: 0,
            servers: Vec::new(),
            balance: Balance::RoundRobin,
            ring: None,
            tls: None,
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(1),
            retries: 1,
            max_idle: 1,
            idle_timeout: Duration::from_secs(1),
            max_fails: 1,
            fail_timeout: Duration::from_secs(1),
            health_check: None,
            max_in_flight: 0,
            retry_after: "1".into(),
            socket: Default::default(),
        };
        ProxyRoute {
            group: Arc::new(group),
            forwarding,
            via,
            preserve_host,
            client_addr_header: Some("X-Real-IP".into()),
            client_cert_header: None,
        }
    }

    fn rewrite(raw: &[u8], r: &ProxyRoute) -> String {
        let client = Client {
            addr: "192.0.2.7:5555".parse().unwrap(),
            secure: false,
            subject: None,
        };
        rewrite_for(raw, r, client)
    }

    fn rewrite_for(raw: &[u8], r: &ProxyRoute, client: Client<'_>) -> String {
        let mut head = RequestHead::new();
        assert_eq!(
            parse_request(raw, &Limits::default(), &mut head),
            Ok(Parsed::Complete)
        );
        let info = RequestInfo::new(&head, raw);
        let mut out = Vec::new();
        encode_request_head(&mut out, &head, raw, r, "10.0.0.9:3000", client, &info);
        String::from_utf8(out).unwrap()
    }

    const XFWD: Forwarding = Forwarding {
        x_forwarded: true,
        forwarded: false,
    };

    #[test]
    fn hop_by_hop_and_connection_named_fields_are_dropped() {
        let r = route(XFWD, true, true);
        let out = rewrite(
            b"GET /a?b HTTP/1.1\r\nHost: ex.com\r\nConnection: close, X-Foo\r\nX-Foo: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nProxy-Connection: x\r\nUpgrade: h2c\r\nX-Bar: 2\r\nX-Real-IP: 6.6.6.6\r\n\r\n",
            &r,
        );
        assert!(
            out.starts_with("GET /a?b HTTP/1.1\r\nHost: ex.com\r\n"),
            "{out}"
        );
        for gone in [
            "X-Foo",
            "Keep-Alive",
            "TE:",
            "Proxy-Connection",
            "Upgrade",
            "Connection",
            "6.6.6.6",
        ] {
            assert!(!out.contains(gone), "{gone} forwarded: {out}");
        }
        assert!(out.contains("X-Bar: 2\r\n"));
        assert!(out.contains("X-Forwarded-For: 192.0.2.7\r\n"));
        assert!(out.contains("X-Forwarded-Proto: http\r\n"));
        assert!(out.contains("X-Forwarded-Host: ex.com\r\n"));
        assert!(out.contains("Via: 1.1 pier\r\n"));
        assert!(out.contains("X-Real-IP: 192.0.2.7\r\n"));
        assert!(out.ends_with("\r\n\r\n"));
    }

    #[test]
    fn framing_is_exactly_one_field_and_xff_appends() {
        let r = route(
            Forwarding {
                x_forwarded: true,
                forwarded: true,
            },
            false,
            false,
        );
        let out = rewrite(
            b"POST http://ex.com/p?q=1 HTTP/1.1\r\nHost: ex.com\r\nTransfer-Encoding: chunked\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-Proto: evil\r\nExpect: 100-continue\r\n\r\n",
            &r,
        );
        assert!(
            out.starts_with("POST /p?q=1 HTTP/1.1\r\nHost: 10.0.0.9:3000\r\n"),
            "{out}"
        );
        assert_eq!(out.matches("Transfer-Encoding: chunked\r\n").count(), 1);
        assert!(!out.contains("Content-Length"));
        assert!(!out.contains("evil"));
        assert!(!out.contains("Expect"));
        assert!(
            out.contains("X-Forwarded-For: 1.1.1.1, 192.0.2.7\r\n"),
            "{out}"
        );
        assert!(out.contains("Forwarded: for=192.0.2.7;proto=http;host=\"ex.com\"\r\n"));
        assert!(!out.contains("Via"));

        let out = rewrite(
            b"PUT /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n",
            &r,
        );
        assert_eq!(out.matches("Content-Length: 3\r\n").count(), 1);
    }

    #[test]
    fn client_cert_header_carries_the_verified_subject_only() {
        let mut r = route(XFWD, true, true);
        r.client_cert_header = Some("X-Client-Subject".into());
        let raw = b"GET / HTTP/1.1\r\nHost: h\r\nX-Client-Subject: CN=forged\r\n\r\n";
        let client = Client {
            addr: "192.0.2.7:5555".parse().unwrap(),
            secure: true,
            subject: Some("CN=client,O=Example"),
        };
        let out = rewrite_for(raw, &r, client);
        assert_eq!(out.matches("X-Client-Subject").count(), 1, "{out}");
        assert!(out.contains("X-Client-Subject: CN=client,O=Example\r\n"));
        assert!(out.contains("X-Forwarded-Proto: https\r\n"));
        // Without a certificate the field is only removed.
        let out = rewrite(raw, &r);
        assert!(!out.contains("X-Client-Subject"), "{out}");
    }

    #[test]
    fn upgrade_is_forwarded_only_when_asked_for() {
        let r = route(XFWD, false, true);
        let out = rewrite(
            b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n",
            &r,
        );
        assert!(
            out.contains("Connection: upgrade\r\nUpgrade: websocket\r\n"),
            "{out}"
        );
        assert!(out.contains("Sec-WebSocket-Key: k\r\n"));
    }

    #[test]
    fn response_head_keeps_end_to_end_fields_only() {
        let raw = b"HTTP/1.1 200 OK\r\nServer: up\r\nDate: x\r\nConnection: X-Up\r\nX-Up: 1\r\nX-Keep: 2\r\nContent-Length: 5\r\nKeep-Alive: timeout=5\r\n\r\n";
        let out = encode_response_as(raw, BodyFraming::Length(5), false);
        assert!(
            out.starts_with("HTTP/1.1 200 OK\r\nServer: pier\r\n"),
            "{out}"
        );
        assert_eq!(out.matches("Content-Length").count(), 1);
        assert!(out.contains("X-Keep: 2\r\n"));
        for gone in ["X-Up", "Keep-Alive", "Server: up", "Date: x", "Connection"] {
            assert!(!out.contains(gone), "{gone}: {out}");
        }
    }

    #[test]
    fn field_names_are_classified_case_insensitively_and_exactly() {
        let cases: [(&[u8], Field); 17] = [
            (b"TE", Field::HopByHop),
            (b"Host", Field::Host),
            (b"DATE", Field::Date),
            (b"server", Field::Server),
            (b"Expect", Field::Expect),
            (b"UpGrade", Field::Upgrade),
            (b"Trailer", Field::HopByHop),
            (b"Connection", Field::Connection),
            (b"keep-ALIVE", Field::HopByHop),
            (b"Content-Length", Field::ContentLength),
            (b"X-Forwarded-For", Field::XForwardedFor),
            (b"Proxy-Connection", Field::HopByHop),
            (b"x-forwarded-host", Field::XForwardedHost),
            (b"Transfer-Encoding", Field::HopByHop),
            (b"X-FORWARDED-PROTO", Field::XForwardedProto),
            (b"Content-Type", Field::Other),
            (b"X-Forwarded-Fox", Field::Other),
        ];
        for (name, field) in cases {
            assert_eq!(Field::of(name), field, "{}", String::from_utf8_lossy(name));
        }
        for other in [
            &b"T"[..],
            b"TF",
            b"Hosts",
            b"Dat",
            b"Connectio",
            b"Keep-Alivf",
            b"",
        ] {
            assert_eq!(Field::of(other), Field::Other);
        }
        assert!(Field::ContentLength.is_hop_by_hop());
        assert!(Field::Upgrade.is_hop_by_hop());
        assert!(!Field::Host.is_hop_by_hop());
        assert!(!Field::Other.is_hop_by_hop());
    }

    #[test]
    fn connection_options_are_gathered_from_every_connection_line() {
        let lines: [(&[u8], &[u8]); 4] = [
            (b"Connection", b"close, X-A"),
            (b"X-A", b"1"),
            (b"connection", b" , x-b ,"),
            (b"X-C", b"x-d"),
        ];
        let options = ConnectionOptions::gather(|| lines.iter().copied());
        assert!(options.overflow.is_none());
        for named in [&b"x-a"[..], b"X-B", b"Close"] {
            assert!(options.names(named), "{}", String::from_utf8_lossy(named));
        }
        for not_named in [&b"X-C"[..], b"x-d", b"X", b""] {
            assert!(!options.names(not_named));
        }
    }

    #[test]
    fn connection_options_beyond_the_inline_list_still_name_fields() {
        let many = b"o1, o2, o3, o4, o5, o6, o7, o8, o9";
        let lines: [(&[u8], &[u8]); 2] = [(b"Connection", many), (b"Connection", b"o10")];
        let options = ConnectionOptions::gather(|| lines.iter().copied());
        assert!(options.overflow.is_some());
        for i in 1..=10 {
            assert!(options.names(format!("O{i}").as_bytes()), "o{i}");
        }
        assert!(!options.names(b"o11"));

        // Through the request and response rewrites.
        let r = route(XFWD, false, true);
        let out = rewrite(
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: a, b, c, d, e, f, g, h\r\nI: 0\r\nConnection: i\r\nA: 1\r\nH: 2\r\nJ: 3\r\nX-Forwarded-For: 1.1.1.1\r\n\r\n",
            &r,
        );
        for gone in ["\r\nA:", "\r\nH:", "\r\nI:", "Connection"] {
            assert!(!out.contains(gone), "{gone} forwarded: {out}");
        }
        assert!(out.contains("\r\nJ: 3\r\n"), "{out}");
        assert!(
            out.contains("X-Forwarded-For: 1.1.1.1, 192.0.2.7\r\n"),
            "{out}"
        );

        let raw = b"HTTP/1.1 200 OK\r\nConnection: a,b,c,d,e,f,g,h,i\r\nI: 0\r\nA: 1\r\nJ: 3\r\nContent-Length: 0\r\n\r\n";
        let out = encode_response(raw);
        assert!(!out.contains("\r\nI:") && !out.contains("\r\nA:"), "{out}");
        assert!(out.contains("\r\nJ: 3\r\n"), "{out}");
    }

    #[test]
    fn x_forwarded_for_named_by_connection_is_not_appended_to() {
        let r = route(XFWD, false, true);
        let out = rewrite(
            b"GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 6.6.6.6\r\nConnection: X-Forwarded-For\r\n\r\n",
            &r,
        );
        assert!(out.contains("X-Forwarded-For: 192.0.2.7\r\n"), "{out}");
        assert!(!out.contains("6.6.6.6"), "{out}");
    }

    #[test]
    fn response_upgrade_is_kept_only_for_a_relayed_upgrade() {
        let raw = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: k\r\n\r\n";
        let out = encode_response_as(raw, BodyFraming::None, true);
        assert!(out.contains("\r\nUpgrade: websocket\r\n"), "{out}");
        assert!(out.contains("\r\nSec-WebSocket-Accept: k\r\n"), "{out}");
        assert_eq!(out.matches("Connection: upgrade\r\n").count(), 1, "{out}");
        assert!(!out.contains("Connection: Upgrade"), "{out}");
        // Not relayed as an upgrade: dropped like any hop-by-hop field.
        let out = encode_response(raw);
        assert!(!out.contains("Upgrade"), "{out}");
    }

    fn encode_response(raw: &[u8]) -> String {
        encode_response_as(raw, BodyFraming::None, false)
    }

    /// Parses `raw` as an upstream response head and encodes it for the client.
    fn encode_response_as(raw: &[u8], framing: BodyFraming, upgrade: bool) -> String {
        let mut resp = ResponseHead::new();
        assert_eq!(
            parse_response(raw, &Limits::default(), Method::Get, &mut resp),
            Ok(Parsed::Complete)
        );
        let mut out = Vec::new();
        encode_response_head(
            &mut out,
            &resp,
            raw,
            b"Thu, 01 Jan 1970 00:00:00 GMT",
            framing,
            ConnectionHeader::Omit,
            false,
            upgrade,
        );
        String::from_utf8(out).unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn lazy_timeout_arms_a_deadline_only_when_the_future_waits() {
        let mut deadline = None;
        let r = lazy_timeout(&mut deadline, Duration::from_millis(10), async { 7 }).await;
        assert_eq!(r, Ok(7));
        assert!(deadline.is_none(), "a ready future armed a deadline");

        // A future that waits and then finishes before the deadline.
        let r = lazy_timeout(&mut deadline, Duration::from_secs(3600), async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            9
        })
        .await;
        assert_eq!(r, Ok(9));
        assert!(deadline.take().is_some());

        let r = lazy_timeout(
            &mut deadline,
            Duration::from_millis(20),
            std::future::pending::<()>(),
        )
        .await;
        assert_eq!(r, Err(TimedOut));
        let first = deadline.expect("a waiting future arms the deadline");
        // A later wait keeps the deadline already set: it has passed, so the
        // pending future times out again at once.
        let r = lazy_timeout(
            &mut deadline,
            Duration::from_secs(3600),
            std::future::pending::<()>(),
        )
        .await;
        assert!(r.is_err());
        assert_eq!(deadline, Some(first));
    }

    #[test]
    fn field_copy_matches_line_by_line_encoding_for_any_selection() {
        let raw = b"GET / HTTP/1.1\r\nHost: h\r\nB:2\r\nC: 3  \r\nD:\t4\r\nE: \r\nF:\r\nG: 7\r\nH: 8\r\n\r\n";
        let mut head = RequestHead::new();
        assert_eq!(
            parse_request(raw, &Limits::default(), &mut head),
            Ok(Parsed::Complete)
        );
        let spans = head.header_spans();
        assert_eq!(spans.len(), 8);
        assert_eq!(spans[0].name.get(raw), b"Host");
        for keep in 0u32..(1 << spans.len()) {
            let mut want = Vec::new();
            let mut got = Vec::new();
            let mut copy = FieldCopy::default();
            for (i, &h) in spans.iter().enumerate() {
                if keep & (1 << i) == 0 {
                    continue;
                }
                want.extend_from_slice(h.name.get(raw));
                want.extend_from_slice(b": ");
                want.extend_from_slice(h.value.get(raw));
                want.extend_from_slice(b"\r\n");
                copy.field(&mut got, raw, h);
            }
            copy.finish(&mut got, raw);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "selection {keep:#b}"
            );
        }
    }

    #[test]
    fn errors_read_as_sentences_without_debug_names() {
        let e = ProxyError::upstream(ErrorKind::Connect, "Connection refused (os error 111)");
        assert_eq!(
            e.to_string(),
            "the upstream could not be connected to: Connection refused (os error 111)"
        );
        let e = ProxyError::upstream(ErrorKind::NoServer, "x").to_string();
        assert!(
            !e.contains("NoServer") && e.contains("has no server up"),
            "{e}"
        );
    }

    #[test]
    fn error_sides_map_to_statuses() {
        let up = |k| ProxyError::upstream(k, "x").status();
        assert_eq!(up(ErrorKind::Connect), 502);
        assert_eq!(up(ErrorKind::Reset), 502);
        assert_eq!(up(ErrorKind::Malformed), 502);
        assert_eq!(up(ErrorKind::Timeout), 504);
        assert_eq!(up(ErrorKind::NoServer), 503);
        let down = ProxyError {
            side: Side::Downstream,
            kind: ErrorKind::Timeout,
            cause: String::new(),
        };
        assert_eq!(down.status(), 408);
    }
}
