//! A request's trace: its W3C context (taken from the request where trusted,
//! else new), the sampling decision, and what it records while it is served:
//! the server span's times and events, a client span per upstream attempt.
//! The driver keeps one per request (reused across a connection's requests,
//! so recording does not allocate once warm); handlers reach it through
//! [`super::Session::trace`] and encoding it is `observe::trace`'s job.

use std::cell::{Cell, Ref, RefCell};
use std::net::SocketAddr;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::request::RequestView;
use super::trace_context::{
    hex_write, new_span_id, new_trace_and_span_ids, parse_traceparent, tracestate_ok, SampleRatio,
    SpanId, TraceId, TraceparentField,
};

/// How requests are sampled and whose context is believed (`[trace]`).
#[derive(Debug, Clone, PartialEq)]
pub struct TracePolicy {
    /// Share of new traces sampled, 0 to 1 (a trusted parent's flag decides for its trace).
    pub sample: SampleRatio,
    /// Record every request and export those answered 5xx even when not sampled.
    pub keep_errors: bool,
    /// Whose `traceparent`/`tracestate` is taken; from anyone else a request
    /// starts a trace.
    pub trust_incoming: TrustIncoming,
}

/// Whose trace context a request may carry in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustIncoming {
    /// Nobody's: every request starts a trace (the default).
    Nobody,
    /// Every client's (Pier behind services that start traces).
    Everyone,
    /// Connections from these networks only (after the PROXY protocol): the
    /// services and balancers in front of Pier, not the internet.
    From(Box<[ipnet::IpNet]>),
}

impl TrustIncoming {
    /// Whether a request from `peer` may carry its trace context in (the
    /// peer is asked for only when it matters).
    pub fn trusts(&self, peer: impl FnOnce() -> std::net::IpAddr) -> bool {
        match self {
            TrustIncoming::Nobody => false,
            TrustIncoming::Everyone => true,
            TrustIncoming::From(nets) => {
                // An IPv4 client of a dual-stack listener arrives as
                // `::ffff:a.b.c.d`: it is matched as the IPv4 address it is.
                let peer = peer();
                let canonical = peer.to_canonical();
                nets.iter()
                    .any(|n| n.contains(&peer) || n.contains(&canonical))
            }
        }
    }
}

/// An event on a span: when, what, and the error type it is about.
#[derive(Debug, Clone, Copy)]
pub struct SpanEvent {
    /// Nanoseconds since the Unix epoch.
    pub at_ns: u64,
    /// `retry` or `timeout`.
    pub name: &'static str,
    /// What went wrong (`timeout`, `reset`, `connect`, ...).
    pub error: &'static str,
}

/// One upstream attempt.
#[derive(Debug, Clone)]
pub struct ClientSpan {
    /// The attempt's span, the parent the upstream sees in `traceparent`.
    pub span_id: SpanId,
    /// Start and end, nanoseconds since the Unix epoch (end 0 until it ends).
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// The server asked.
    pub server: SocketAddr,
    /// Attempts before this one (`http.request.resend_count`).
    pub resend: u32,
    /// The upstream's status; 0 when it gave none.
    pub status: u16,
    /// Why the attempt failed, if it did.
    pub error: Option<&'static str>,
    /// A timeout during the attempt.
    pub timeout: Option<SpanEvent>,
}

/// What a request recorded, for the exporter to encode.
#[derive(Debug, Default)]
pub struct Recording {
    /// The trace.
    pub trace_id: TraceId,
    /// Pier's server span.
    pub span_id: SpanId,
    /// The trusted caller's span.
    pub parent: Option<SpanId>,
    /// Sampled by the parent or the ratio.
    pub sampled: bool,
    /// Spans are kept while served (sampled, or kept for a tail decision).
    pub recording: bool,
    /// The trusted `tracestate`, forwarded and exported (empty when none).
    pub trace_state: Vec<u8>,
    /// When the request began, nanoseconds since the Unix epoch.
    pub start_ns: u64,
    started: Option<Instant>,
    /// One per upstream attempt, in order.
    pub clients: Vec<ClientSpan>,
    /// Events of the server span (retries).
    pub events: Vec<SpanEvent>,
    /// The request as it came, copied when it began (a handler may consume
    /// the driver's buffer): the server span's attributes.
    pub request: RequestFacts,
}

/// What a server span says of its request, copied into buffers reused from
/// one request to the next.
#[derive(Debug, Default)]
pub struct RequestFacts {
    /// The method token.
    pub method: Vec<u8>,
    /// The path, without the query.
    pub path: Vec<u8>,
    /// The host the client named, without its port (empty when none).
    pub host: Vec<u8>,
    /// `User-Agent`, when sent.
    pub user_agent: Option<Vec<u8>>,
    /// The client (after PROXY protocol and trusted forwarding fields).
    pub client: Option<std::net::IpAddr>,
    /// Whether the request came over TLS.
    pub secure: bool,
    /// `1.0`, `1.1` or `2`.
    pub protocol: &'static str,
}

impl RequestFacts {
    fn copy_from(&mut self, request: &RequestView<'_>, protocol: &'static str) {
        self.method.clear();
        self.method.extend_from_slice(request.method_token());
        self.path.clear();
        self.path.extend_from_slice(request.path());
        self.host.clear();
        self.host
            .extend_from_slice(request.host_name().unwrap_or_default());
        match (request.header("user-agent"), &mut self.user_agent) {
            (Some(v), Some(kept)) => {
                kept.clear();
                kept.extend_from_slice(v);
            }
            (v, kept) => *kept = v.map(<[u8]>::to_vec),
        }
        self.client = Some(request.client());
        self.secure = request.is_secure();
        self.protocol = protocol;
    }
}

impl Recording {
    /// Nanoseconds since the Unix epoch now, by the monotonic clock from the start.
    pub fn now_ns(&self) -> u64 {
        self.ns_at(Instant::now())
    }

    /// `at` as nanoseconds since the Unix epoch, by the monotonic clock from
    /// the start: an instant the caller has read costs no clock read.
    pub fn ns_at(&self, at: Instant) -> u64 {
        self.start_ns
            + self
                .started
                .map_or(0, |t| at.saturating_duration_since(t).as_nanos() as u64)
    }
}

/// A request's trace; off (one `Cell` read) unless the service step began it.
#[derive(Debug, Default)]
pub struct RequestTrace {
    on: Cell<bool>,
    /// [`Recording::recording`], read without borrowing: a request that
    /// records nothing is told so by one load wherever it is asked.
    recording: Cell<bool>,
    rec: RefCell<Recording>,
}

impl RequestTrace {
    /// Forgets the previous request's trace (the driver, per request).
    pub fn reset(&self) {
        self.on.set(false);
        self.recording.set(false);
    }

    /// Whether the request is traced.
    pub fn is_on(&self) -> bool {
        self.on.get()
    }

    /// Whether the request is traced and keeps spans (sampled, or kept for
    /// the tail decision); one that is not has nothing to end or export.
    #[inline]
    pub fn is_recording(&self) -> bool {
        self.recording.get()
    }

    /// Starts the request's trace under `policy`: the trusted incoming context
    /// or a new trace, and the sampling decision; a request that records
    /// keeps what its server span will say of it (`protocol`: `1.1`, `2`).
    /// `started` is when the request began, the server span's start.
    pub fn begin(
        &self,
        policy: &TracePolicy,
        request: &RequestView<'_>,
        protocol: &'static str,
        started: Instant,
    ) {
        let mut r = self.rec.borrow_mut();
        r.trace_state.clear();
        r.clients.clear();
        r.events.clear();
        let parent = if policy.trust_incoming.trusts(|| request.peer().ip()) {
            single_traceparent(request)
        } else {
            None
        };
        match parent {
            Some(p) => {
                r.trace_id = p.trace_id;
                r.span_id = new_span_id();
                r.parent = Some(p.parent_id);
                r.sampled = p.sampled();
                for v in request
                    .headers()
                    .filter(|(n, _)| n.eq_ignore_ascii_case(b"tracestate"))
                {
                    if !r.trace_state.is_empty() {
                        r.trace_state.push(b',');
                    }
                    r.trace_state.extend_from_slice(v.1);
                }
                if !tracestate_ok(&r.trace_state) {
                    r.trace_state.clear();
                }
            }
            None => {
                (r.trace_id, r.span_id) = new_trace_and_span_ids();
                r.parent = None;
                r.sampled = policy.sample.samples(&r.trace_id);
            }
        }
        r.recording = r.sampled || policy.keep_errors;
        self.recording.set(r.recording);
        if r.recording {
            // Only a recorded request has times and attributes to keep: one
            // neither sampled nor kept costs its ids and no clock reads.
            r.request.copy_from(request, protocol);
            r.start_ns = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            r.started = Some(started);
        }
        self.on.set(true);
    }

    /// The trace and server span ids in lowercase hex, for the access log.
    pub fn ids_hex(&self) -> Option<([u8; 32], [u8; 16])> {
        if !self.is_on() {
            return None;
        }
        let r = self.rec.borrow();
        let (mut t, mut s) = ([0u8; 32], [0u8; 16]);
        hex_write(&r.trace_id, &mut t);
        hex_write(&r.span_id, &mut s);
        Some((t, s))
    }

    /// Opens a client span for an attempt on `server` and returns the
    /// `traceparent` the upstream gets, naming that span as its parent.
    ///
    /// A request that records nothing exports no client span: the upstream
    /// is given the server span as its parent, and no id is drawn.
    /// `now` is when the attempt began.
    pub fn start_attempt(&self, server: SocketAddr, now: Instant) -> TraceparentField {
        let mut r = self.rec.borrow_mut();
        if !r.recording {
            return TraceparentField::new(&r.trace_id, &r.span_id, r.sampled);
        }
        let span_id = new_span_id();
        let span = ClientSpan {
            span_id,
            start_ns: r.ns_at(now),
            end_ns: 0,
            server,
            resend: r.clients.len() as u32,
            status: 0,
            error: None,
            timeout: None,
        };
        r.clients.push(span);
        TraceparentField::new(&r.trace_id, &span_id, r.sampled)
    }

    /// Ends the open client span: the upstream's `status` (0 when none) and
    /// the error type when it failed; a timeout is also an event.
    /// `at` is when it ended.
    pub fn end_attempt(
        &self,
        status: u16,
        error: Option<&'static str>,
        timeout: bool,
        at: Instant,
    ) {
        if !self.is_recording() {
            return;
        }
        let mut r = self.rec.borrow_mut();
        let now = r.ns_at(at);
        let Some(span) = r.clients.last_mut().filter(|c| c.end_ns == 0) else {
            return;
        };
        span.end_ns = now;
        span.status = status;
        span.error = error;
        if timeout {
            span.timeout = Some(SpanEvent {
                at_ns: now,
                name: "timeout",
                error: error.unwrap_or("timeout"),
            });
        }
    }

    /// Notes on the server span that the request goes to the upstream again
    /// after a failure of type `error`.
    pub fn note_retry(&self, error: &'static str) {
        let mut r = self.rec.borrow_mut();
        if r.recording {
            let at_ns = r.now_ns();
            r.events.push(SpanEvent {
                at_ns,
                name: "retry",
                error,
            });
        }
    }

    /// The trusted `tracestate` to forward (empty when none).
    pub fn trace_state(&self) -> Ref<'_, [u8]> {
        Ref::map(self.rec.borrow(), |r| &r.trace_state[..])
    }

    /// What was recorded, for the exporter.
    pub fn recording(&self) -> Ref<'_, Recording> {
        self.rec.borrow()
    }
}

/// The request's one valid `traceparent`; several make none (W3C: a
/// duplicated field is invalid).
fn single_traceparent(request: &RequestView<'_>) -> Option<super::trace_context::TraceParent> {
    let mut found = request
        .headers()
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"traceparent"));
    let first = found.next()?;
    if found.next().is_some() {
        return None;
    }
    parse_traceparent(first.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::parse::{parse_request, Limits, Parsed, RequestHead};

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn policy(trust: TrustIncoming, sample: f64) -> TracePolicy {
        TracePolicy {
            sample: SampleRatio::new(sample),
            keep_errors: false,
            trust_incoming: trust,
        }
    }

    /// Begins `trace` for a request with `fields`, from `peer`.
    fn begin(trace: &RequestTrace, policy: &TracePolicy, peer: &str, fields: &str) {
        let text = format!("GET /p?q HTTP/1.1\r\nHost: h.example:8080\r\n{fields}\r\n");
        let mut head = RequestHead::default();
        let buf = text.as_bytes();
        assert!(matches!(
            parse_request(buf, &Limits::default(), &mut head),
            Ok(Parsed::Complete)
        ));
        let view = RequestView::http1(&head, buf, peer.parse().unwrap(), None);
        trace.begin(policy, &view, "1.1", Instant::now());
    }

    #[test]
    fn trust_decides_whether_the_incoming_context_is_continued() {
        let fields = format!("traceparent: {PARENT}\r\ntracestate: rojo=1\r\n");
        let t = RequestTrace::default();
        begin(
            &t,
            &policy(TrustIncoming::Everyone, 0.0),
            "192.0.2.1:1",
            &fields,
        );
        let r = t.recording();
        assert_eq!(r.trace_id[..2], [0x4b, 0xf9]);
        assert_eq!(
            r.parent,
            Some([0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7])
        );
        // The parent's flag decides, whatever the ratio.
        assert!(r.sampled);
        assert_eq!(&r.trace_state[..], b"rojo=1");
        assert_eq!(&r.request.host[..], b"h.example");
        assert_eq!(&r.request.path[..], b"/p");
        drop(r);
        let nets = TrustIncoming::From(vec!["10.0.0.0/8".parse().unwrap()].into_boxed_slice());
        for (trust, peer) in [(TrustIncoming::Nobody, "10.1.2.3:1"), (nets, "192.0.2.1:1")] {
            begin(&t, &policy(trust, 1.0), peer, &fields);
            let r = t.recording();
            assert_ne!(r.trace_id[..2], [0x4b, 0xf9]);
            assert_eq!((r.parent, r.trace_state.is_empty()), (None, true));
        }
        // An IPv4 client of a dual-stack listener is in an IPv4 network.
        let nets = TrustIncoming::From(vec!["10.0.0.0/8".parse().unwrap()].into_boxed_slice());
        begin(&t, &policy(nets, 0.0), "[::ffff:10.1.2.3]:1", &fields);
        assert_eq!(t.recording().trace_id[..2], [0x4b, 0xf9]);
        // Two traceparent fields are none.
        let twice = format!("traceparent: {PARENT}\r\ntraceparent: {PARENT}\r\n");
        begin(
            &t,
            &policy(TrustIncoming::Everyone, 1.0),
            "10.1.2.3:1",
            &twice,
        );
        assert_eq!(t.recording().parent, None);
    }

    #[test]
    fn each_attempt_is_a_span_named_in_its_traceparent() {
        let t = RequestTrace::default();
        assert_eq!(t.ids_hex(), None);
        begin(&t, &policy(TrustIncoming::Nobody, 1.0), "192.0.2.1:1", "");
        let first = *t
            .start_attempt("127.0.0.1:81".parse().unwrap(), Instant::now())
            .value();
        t.end_attempt(0, Some("timeout"), true, Instant::now());
        t.note_retry("timeout");
        let second = *t
            .start_attempt("127.0.0.1:82".parse().unwrap(), Instant::now())
            .value();
        t.end_attempt(200, None, false, Instant::now());
        let r = t.recording();
        assert_eq!(r.clients.len(), 2);
        let (a, b) = (&r.clients[0], &r.clients[1]);
        let mut hex = [0u8; 16];
        hex_write(&a.span_id, &mut hex);
        assert_eq!(&first[36..52], &hex);
        assert!(first.ends_with(b"-01"));
        hex_write(&b.span_id, &mut hex);
        assert_eq!(&second[36..52], &hex);
        assert_eq!((a.resend, b.resend), (0, 1));
        assert_eq!(
            (a.error, a.timeout.map(|e| e.name)),
            (Some("timeout"), Some("timeout"))
        );
        assert_eq!((b.status, b.error), (200, None));
        assert!(a.end_ns >= a.start_ns && b.start_ns >= a.end_ns);
        assert_eq!(r.events.len(), 1);
        drop(r);
        let (trace, span) = t.ids_hex().unwrap();
        assert_eq!(&first[3..35], &trace);
        assert!(span.iter().all(u8::is_ascii_hexdigit));
        t.reset();
        assert_eq!(t.ids_hex(), None);
    }

    #[test]
    fn a_request_neither_sampled_nor_kept_records_no_spans() {
        let t = RequestTrace::default();
        begin(&t, &policy(TrustIncoming::Nobody, 0.0), "192.0.2.1:1", "");
        let parent = *t
            .start_attempt("127.0.0.1:81".parse().unwrap(), Instant::now())
            .value();
        assert!(parent.ends_with(b"-00"));
        assert!(!t.is_recording());
        assert!(t.recording().clients.is_empty());
        // The upstream's parent is the server span, whose id the log shows.
        let (trace, span) = t.ids_hex().unwrap();
        assert_eq!(&parent[3..35], &trace);
        assert_eq!(&parent[36..52], &span);
        assert_eq!(t.recording().start_ns, 0, "no clock read");
    }
}
