//! OpenTelemetry traces: a server span per request and a client span per
//! upstream attempt, sampled by parent and ratio (and kept for 5xx answers
//! when asked), encoded as OTLP/protobuf on the worker that served the
//! request and exported over OTLP/HTTP or OTLP/gRPC by one background thread.
//! The request's context and recording are [`crate::http::request_trace`]'s;
//! this module turns a finished recording into spans and hands them off
//! without waiting.

mod collector_endpoint;
pub mod export;
pub mod otlp;
mod otlp_grpc;
mod otlp_http;

use std::cell::RefCell;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::http::request_trace::{ClientSpan, Recording, RequestFacts, RequestTrace, TracePolicy};
use crate::http::RequestView;
use crate::observe::metrics::WorkerStats;
use export::TraceShared;
use otlp::{encode_attribute, encode_span, keys, Key, SpanKind, SpanOut, Value};

/// How spans go to the collector (`[trace] protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportProtocol {
    /// OTLP/HTTP: a POST of the protobuf request over HTTP/1.1.
    HttpProtobuf,
    /// OTLP/gRPC: the `TraceService/Export` call over HTTP/2 without TLS.
    Grpc,
}

/// `[trace]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceConfig {
    /// The collector: an OTLP/HTTP traces URL
    /// (`http://127.0.0.1:4318/v1/traces`) or a gRPC address
    /// (`http://127.0.0.1:4317`).
    pub endpoint: String,
    /// The transport to the collector.
    pub protocol: ExportProtocol,
    /// `service.name` of the exported resource.
    pub service_name: String,
    /// Sampling and trust.
    pub policy: TracePolicy,
    /// Requests whose spans may wait for the exporter, across all workers.
    pub queue: usize,
    /// How often the exporter sends what is queued.
    pub flush_interval: Duration,
}

#[cfg(test)]
impl TraceConfig {
    /// Settings for unit tests: everything sampled, nothing trusted.
    pub fn for_tests() -> TraceConfig {
        TraceConfig {
            endpoint: "http://127.0.0.1:4318/v1/traces".into(),
            protocol: ExportProtocol::HttpProtobuf,
            service_name: "pier".into(),
            policy: TracePolicy {
                sample: crate::http::trace_context::SampleRatio::new(1.0),
                keep_errors: false,
                trust_incoming: crate::http::request_trace::TrustIncoming::Nobody,
            },
            queue: 16,
            flush_interval: Duration::from_secs(1),
        }
    }
}

/// What the service step knows of an answered request, for its server span.
pub struct ServerFacts<'a> {
    /// The matched route's label (`http.route`); `None` when none matched.
    pub route: Option<&'a str>,
    /// The status answered; 0 when none was.
    pub status: u16,
    /// How a cache answered, on routes with one.
    pub cache: Option<&'static str>,
}

/// Attributes a span has at most.
const MAX_ATTRIBUTES: usize = 12;

/// A span's attributes, on the stack.
struct Attributes<'a> {
    list: [(&'static Key, Value<'a>); MAX_ATTRIBUTES],
    len: usize,
}

impl<'a> Attributes<'a> {
    fn new() -> Self {
        Attributes {
            list: [(&keys::ERROR_TYPE, Value::Int(0)); MAX_ATTRIBUTES],
            len: 0,
        }
    }

    fn push(&mut self, key: &'static Key, value: Value<'a>) {
        if let Some(slot) = self.list.get_mut(self.len) {
            *slot = (key, value);
            self.len += 1;
        }
    }

    /// A text from the request (checked for UTF-8 when encoded).
    fn text(&mut self, key: &'static Key, value: &'a [u8]) {
        self.push(key, Value::Str(value));
    }

    /// A text Pier made (ASCII).
    fn ascii(&mut self, key: &'static Key, value: &'a [u8]) {
        self.push(key, Value::Ascii(value));
    }

    fn as_slice(&self) -> &[(&'static Key, Value<'a>)] {
        &self.list[..self.len]
    }
}

/// `ip` as text, written into `buf` (an IPv6 address is at most 45 bytes).
fn ip_text(ip: IpAddr, buf: &mut [u8; 48]) -> &[u8] {
    match ip {
        // Every request's client address: each octet's digits from a
        // table, as the formatting machinery costs ten times that.
        IpAddr::V4(v4) => {
            let mut n = 0;
            for octet in v4.octets() {
                let (digits, len) = OCTETS[usize::from(octet)];
                buf[n..n + 4].copy_from_slice(&digits);
                n += usize::from(len);
            }
            // The last octet's dot is not part of the address.
            &buf[..n - 1]
        }
        IpAddr::V6(_) => {
            let mut cursor = std::io::Cursor::new(&mut buf[..]);
            let _ = write!(cursor, "{ip}");
            let n = cursor.position() as usize;
            &buf[..n]
        }
    }
}

/// Every octet's decimal digits followed by a dot, and how many of the four
/// bytes that is.
const OCTETS: [([u8; 4], u8); 256] = {
    let mut t = [([0u8; 4], 0u8); 256];
    let mut i = 0;
    while i < 256 {
        let (h, d, u) = ((i / 100) as u8, (i / 10 % 10) as u8, (i % 10) as u8);
        t[i] = if i >= 100 {
            ([b'0' + h, b'0' + d, b'0' + u, b'.'], 4)
        } else if i >= 10 {
            ([b'0' + d, b'0' + u, b'.', 0], 3)
        } else {
            ([b'0' + u, b'.', 0, 0], 2)
        };
        i += 1;
    }
    t
};

/// Writes `v` in decimal at the start of `out` (room for five digits);
/// returns how many digits.
fn decimal(v: u16, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 5];
    let mut at = digits.len();
    let mut v = v;
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let len = digits.len() - at;
    out[..len].copy_from_slice(&digits[at..]);
    len
}

/// A status code as the text `error.type` takes (`502`).
fn status_text(status: u16, buf: &mut [u8; 5]) -> &[u8] {
    let n = decimal(status, buf);
    &buf[..n]
}

/// Prepared attributes a worker keeps, of each kind: a route or upstream
/// server past this many is encoded attribute by attribute.
const MAX_TEMPLATES: usize = 32;

/// A server span's attributes that stay the same from one request to the
/// next on a route (method, scheme, protocol version, route, host), encoded
/// once and copied into each span with the same ones.
struct ServerTemplate {
    route: Option<String>,
    method: Vec<u8>,
    host: Vec<u8>,
    secure: bool,
    protocol: &'static str,
    encoded: Vec<u8>,
}

impl ServerTemplate {
    fn new(q: &RequestFacts, route: Option<&str>) -> ServerTemplate {
        let mut encoded = Vec::new();
        encode_attribute(
            &mut encoded,
            &keys::HTTP_REQUEST_METHOD,
            Value::Str(&q.method),
        );
        let scheme: &[u8] = if q.secure { b"https" } else { b"http" };
        encode_attribute(&mut encoded, &keys::URL_SCHEME, Value::Ascii(scheme));
        encode_attribute(
            &mut encoded,
            &keys::NETWORK_PROTOCOL_VERSION,
            Value::Ascii(q.protocol.as_bytes()),
        );
        if let Some(route) = route {
            encode_attribute(
                &mut encoded,
                &keys::HTTP_ROUTE,
                Value::Str(route.as_bytes()),
            );
        }
        if !q.host.is_empty() {
            encode_attribute(&mut encoded, &keys::SERVER_ADDRESS, Value::Str(&q.host));
        }
        ServerTemplate {
            route: route.map(str::to_owned),
            method: q.method.clone(),
            host: q.host.clone(),
            secure: q.secure,
            protocol: q.protocol,
            encoded,
        }
    }

    fn fits(&self, q: &RequestFacts, route: Option<&str>) -> bool {
        self.secure == q.secure
            && self.protocol == q.protocol
            && self.method == q.method
            && self.host == q.host
            && self.route.as_deref() == route
    }
}

/// A client span's attributes that stay the same for an upstream server and
/// method (method, server address and port), encoded once.
struct ClientTemplate {
    server: SocketAddr,
    method: Vec<u8>,
    encoded: Vec<u8>,
}

impl ClientTemplate {
    fn new(method: &[u8], server: SocketAddr) -> ClientTemplate {
        let mut encoded = Vec::new();
        let mut ip = [0u8; 48];
        encode_attribute(&mut encoded, &keys::HTTP_REQUEST_METHOD, Value::Str(method));
        encode_attribute(
            &mut encoded,
            &keys::SERVER_ADDRESS,
            Value::Ascii(ip_text(server.ip(), &mut ip)),
        );
        encode_attribute(
            &mut encoded,
            &keys::SERVER_PORT,
            Value::Int(i64::from(server.port())),
        );
        ClientTemplate {
            server,
            method: method.to_vec(),
            encoded,
        }
    }
}

/// The template in `list` that `fits`, made by `make` (and kept while there
/// is room) when none does; its encoded attributes are given to `with`.
fn with_template<T, R>(
    list: &mut Vec<T>,
    fits: impl Fn(&T) -> bool,
    make: impl FnOnce() -> T,
    with: impl FnOnce(&T) -> R,
) -> R {
    if let Some(t) = list.iter().find(|t| fits(t)) {
        return with(t);
    }
    let t = make();
    let r = with(&t);
    if list.len() < MAX_TEMPLATES {
        list.push(t);
    }
    r
}

/// A worker's side of tracing: the policy, the exporter's queue and the
/// attributes it prepared.
pub struct WorkerTracer {
    shared: Arc<TraceShared>,
    stats: Arc<WorkerStats>,
    servers: RefCell<Vec<ServerTemplate>>,
    clients: RefCell<Vec<ClientTemplate>>,
}

impl WorkerTracer {
    /// A worker's tracer over the exporter's queue; drops are counted into `stats`.
    pub fn new(shared: Arc<TraceShared>, stats: Arc<WorkerStats>) -> WorkerTracer {
        WorkerTracer {
            shared,
            stats,
            servers: RefCell::default(),
            clients: RefCell::default(),
        }
    }

    /// Starts `trace` for `request`, which came over HTTP `protocol` and
    /// began at `started`.
    pub fn begin(
        &self,
        trace: &RequestTrace,
        request: &RequestView<'_>,
        protocol: &'static str,
        started: std::time::Instant,
    ) {
        trace.begin(&self.shared.config.policy, request, protocol, started);
    }

    /// Ends `trace`: the tail decision (sampled, or a 5xx kept by
    /// `keep_errors`), then its spans encoded and handed to the exporter.
    pub fn end(&self, trace: &RequestTrace, facts: &ServerFacts<'_>) {
        if !trace.is_recording() {
            return;
        }
        let r = trace.recording();
        let keep = r.sampled || (self.shared.config.policy.keep_errors && facts.status >= 500);
        if !r.recording || !keep {
            return;
        }
        let end_ns = r.now_ns();
        let mut buf = self.shared.buffer();
        let q = &r.request;
        with_template(
            &mut self.servers.borrow_mut(),
            |t| t.fits(q, facts.route),
            || ServerTemplate::new(q, facts.route),
            |t| encode_server_span(&mut buf, &r, facts, &t.encoded, end_ns),
        );
        let mut clients = self.clients.borrow_mut();
        for c in &r.clients {
            with_template(
                &mut clients,
                |t| t.server == c.server && t.method == q.method,
                || ClientTemplate::new(&q.method, c.server),
                |t| encode_client_span(&mut buf, &r, c, &t.encoded, end_ns),
            );
        }
        let spans = 1 + r.clients.len() as u32;
        if let Err(buf) = self.shared.hand_off(buf, spans) {
            self.stats.trace_dropped.add(u64::from(spans));
            self.shared.give_back(buf);
        }
    }
}

/// The server span, named `{method} {route}` as the HTTP conventions say;
/// `prepared` holds its method, scheme, protocol, route and host attributes
/// ([`ServerTemplate`]).
fn encode_server_span(
    buf: &mut Vec<u8>,
    r: &Recording,
    facts: &ServerFacts<'_>,
    prepared: &[u8],
    end_ns: u64,
) {
    let q = &r.request;
    let (mut ip, mut code) = ([0u8; 48], [0u8; 5]);
    let mut a = Attributes::new();
    a.text(&keys::URL_PATH, &q.path);
    if let Some(client) = q.client {
        a.ascii(&keys::CLIENT_ADDRESS, ip_text(client, &mut ip));
    }
    if facts.status != 0 {
        a.push(
            &keys::HTTP_RESPONSE_STATUS_CODE,
            Value::Int(i64::from(facts.status)),
        );
    }
    if let Some(ua) = &q.user_agent {
        a.text(&keys::USER_AGENT_ORIGINAL, ua);
    }
    if let Some(c) = facts.cache {
        a.ascii(&keys::CACHE_OUTCOME, c.as_bytes());
    }
    let error = facts.status >= 500;
    if error {
        a.ascii(&keys::ERROR_TYPE, status_text(facts.status, &mut code));
    }
    encode_span(
        buf,
        &SpanOut {
            trace_id: &r.trace_id,
            span_id: &r.span_id,
            parent: r.parent.as_ref(),
            trace_state: &r.trace_state,
            name: [&q.method, facts.route.unwrap_or_default().as_bytes()],
            kind: SpanKind::Server,
            start_ns: r.start_ns,
            end_ns,
            prepared,
            attributes: a.as_slice(),
            events: &r.events,
            error,
        },
    );
}

/// A client span, named `{method}`; an error when the attempt failed or the
/// upstream answered 4xx or 5xx (the conventions for client spans).
/// `prepared` holds its method, server address and port attributes
/// ([`ClientTemplate`]).
fn encode_client_span(
    buf: &mut Vec<u8>,
    r: &Recording,
    c: &ClientSpan,
    prepared: &[u8],
    end_ns: u64,
) {
    let mut code = [0u8; 5];
    let mut a = Attributes::new();
    if c.resend > 0 {
        a.push(
            &keys::HTTP_REQUEST_RESEND_COUNT,
            Value::Int(i64::from(c.resend)),
        );
    }
    if c.status != 0 {
        a.push(
            &keys::HTTP_RESPONSE_STATUS_CODE,
            Value::Int(i64::from(c.status)),
        );
    }
    let error = match c.error {
        Some(e) => Some(e.as_bytes()),
        None => (c.status >= 400).then(|| status_text(c.status, &mut code)),
    };
    if let Some(e) = error {
        a.ascii(&keys::ERROR_TYPE, e);
    }
    encode_span(
        buf,
        &SpanOut {
            trace_id: &r.trace_id,
            span_id: &c.span_id,
            parent: Some(&r.span_id),
            trace_state: &r.trace_state,
            name: [&r.request.method, b""],
            kind: SpanKind::Client,
            start_ns: c.start_ns,
            end_ns: if c.end_ns == 0 { end_ns } else { c.end_ns },
            prepared,
            attributes: a.as_slice(),
            events: c.timeout.as_slice(),
            error: error.is_some(),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_statuses_are_written_as_display_writes_them() {
        let mut buf = [0u8; 48];
        for ip in [
            "0.0.0.0",
            "127.0.0.1",
            "192.168.10.255",
            "8.8.4.4",
            "::1",
            "2001:db8::7",
        ] {
            let parsed: IpAddr = ip.parse().unwrap();
            assert_eq!(ip_text(parsed, &mut buf), ip.as_bytes());
        }
        for i in 0..=255u8 {
            let ip = IpAddr::from([i, 255 - i, i / 3, 9]);
            assert_eq!(ip_text(ip, &mut buf), ip.to_string().as_bytes());
        }
        let mut code = [0u8; 5];
        for status in [0u16, 7, 42, 200, 502, 999, 65535] {
            assert_eq!(
                status_text(status, &mut code),
                status.to_string().as_bytes()
            );
        }
    }
}
