//! OpenTelemetry traces: a server span per request and a client span per
//! upstream attempt, sampled by parent and ratio (and kept for 5xx answers
//! when asked), encoded as OTLP/protobuf on the worker that served the
//! request and exported over HTTP by one background thread. The request's
//! context and recording are [`crate::http::request_trace`]'s; this module
//! turns a finished recording into spans and hands them off without waiting.

pub mod export;
pub mod otlp;

use std::sync::Arc;
use std::time::Duration;

use crate::http::request_trace::{RequestTrace, SpanEvent, TracePolicy};
use crate::http::RequestView;
use crate::observe::metrics::WorkerStats;
use crate::observe::upstream_counters::UpstreamFailure;
use crate::upstream::ProxyError;
use export::TraceShared;
use otlp::{encode_span, SpanKind, SpanOut, Value};

/// `[trace]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceConfig {
    /// The OTLP/HTTP traces endpoint (`http://127.0.0.1:4318/v1/traces`).
    pub endpoint: String,
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
            service_name: "pier".into(),
            policy: TracePolicy {
                sample: 1.0,
                keep_errors: false,
                trust_incoming: false,
            },
            queue: 16,
            flush_interval: Duration::from_secs(1),
        }
    }
}

/// The error type a client span and a retry event carry for `e`.
pub fn error_type(e: &ProxyError, connecting: bool) -> &'static str {
    UpstreamFailure::of(e, connecting).label()
}

/// What the service step knows of an answered request, for its server span.
pub struct ServerFacts<'a> {
    /// The request.
    pub request: RequestView<'a>,
    /// The matched route's label (`http.route`); `None` when none matched.
    pub route: Option<&'a str>,
    /// The status answered; 0 when none was.
    pub status: u16,
    /// How a cache answered, on routes with one.
    pub cache: Option<&'static str>,
    /// `1.0`, `1.1` or `2`.
    pub protocol: &'static str,
}

/// A worker's side of tracing: the policy and the exporter's queue.
pub struct WorkerTracer {
    shared: Arc<TraceShared>,
    stats: Arc<WorkerStats>,
}

impl WorkerTracer {
    /// A worker's tracer over the exporter's queue; drops are counted into `stats`.
    pub fn new(shared: Arc<TraceShared>, stats: Arc<WorkerStats>) -> WorkerTracer {
        WorkerTracer { shared, stats }
    }

    /// Starts `trace` for `request`.
    pub fn begin(&self, trace: &RequestTrace, request: &RequestView<'_>) {
        trace.begin(&self.shared.config.policy, request);
    }

    /// Ends `trace`: the tail decision (sampled, or a 5xx kept by
    /// `keep_errors`), then its spans encoded and handed to the exporter.
    pub fn end(&self, trace: &RequestTrace, facts: &ServerFacts<'_>) {
        let r = trace.recording();
        let keep = r.sampled || (self.shared.config.policy.keep_errors && facts.status >= 500);
        if !r.recording || !keep {
            return;
        }
        let end_ns = r.now_ns();
        let mut buf = self.shared.buffer();
        let req = &facts.request;
        let method = req.method_token();
        let status = i64::from(facts.status);
        let status_text = status_code_text(facts.status);
        let mut attributes = vec![
            ("http.request.method", Value::Str(method)),
            ("url.path", Value::Str(req.path())),
            (
                "url.scheme",
                Value::Str(if req.is_secure() { b"https" } else { b"http" }),
            ),
            (
                "network.protocol.version",
                Value::Str(facts.protocol.as_bytes()),
            ),
        ];
        let client = req.client().to_string();
        attributes.push(("client.address", Value::Str(client.as_bytes())));
        if let Some(route) = facts.route {
            attributes.push(("http.route", Value::Str(route.as_bytes())));
        }
        if facts.status != 0 {
            attributes.push(("http.response.status_code", Value::Int(status)));
        }
        if let Some(host) = req.host_name() {
            attributes.push(("server.address", Value::Str(host)));
        }
        if let Some(ua) = req.header("user-agent") {
            attributes.push(("user_agent.original", Value::Str(ua)));
        }
        if let Some(c) = facts.cache {
            attributes.push(("pier.cache.outcome", Value::Str(c.as_bytes())));
        }
        let server_error = facts.status >= 500;
        if server_error {
            attributes.push(("error.type", Value::Str(status_text.as_bytes())));
        }
        let events: Vec<_> = r.events.iter().map(event_out).collect();
        let event_attrs: Vec<_> = r
            .events
            .iter()
            .map(|e| [("error.type", Value::Str(e.error.as_bytes()))])
            .collect();
        let events: Vec<_> = events
            .iter()
            .zip(&event_attrs)
            .map(|((at, name), attrs)| (*at, *name, &attrs[..]))
            .collect();
        encode_span(
            &mut buf,
            &SpanOut {
                trace_id: &r.trace_id,
                span_id: &r.span_id,
                parent: r.parent.as_ref(),
                trace_state: &r.trace_state,
                name: [method, facts.route.unwrap_or_default().as_bytes()],
                kind: SpanKind::Server,
                start_ns: r.start_ns,
                end_ns,
                attributes: &attributes,
                events: &events,
                error: server_error,
            },
        );
        for c in &r.clients {
            let ip = c.server.ip().to_string();
            let mut attributes = vec![
                ("http.request.method", Value::Str(method)),
                ("server.address", Value::Str(ip.as_bytes())),
                ("server.port", Value::Int(i64::from(c.server.port()))),
            ];
            if c.resend > 0 {
                attributes.push(("http.request.resend_count", Value::Int(i64::from(c.resend))));
            }
            if c.status != 0 {
                attributes.push(("http.response.status_code", Value::Int(i64::from(c.status))));
            }
            let code = status_code_text(c.status);
            let error = c.error.or((c.status >= 400).then_some(code.as_str()));
            if let Some(e) = error {
                attributes.push(("error.type", Value::Str(e.as_bytes())));
            }
            let timeout_attrs = c
                .timeout
                .map(|t| [("error.type", Value::Str(t.error.as_bytes()))]);
            let timeout = c
                .timeout
                .iter()
                .zip(&timeout_attrs)
                .map(|(t, attrs)| (t.at_ns, t.name, &attrs[..]))
                .collect::<Vec<_>>();
            encode_span(
                &mut buf,
                &SpanOut {
                    trace_id: &r.trace_id,
                    span_id: &c.span_id,
                    parent: Some(&r.span_id),
                    trace_state: &r.trace_state,
                    name: [method, b""],
                    kind: SpanKind::Client,
                    start_ns: c.start_ns,
                    end_ns: if c.end_ns == 0 { end_ns } else { c.end_ns },
                    attributes: &attributes,
                    events: &timeout,
                    error: error.is_some(),
                },
            );
        }
        let spans = 1 + r.clients.len() as u32;
        if let Err(buf) = self.shared.hand_off(buf, spans) {
            self.stats.trace_dropped.add(u64::from(spans));
            self.shared.give_back(buf);
        }
    }
}

fn event_out(e: &SpanEvent) -> (u64, &'static str) {
    (e.at_ns, e.name)
}

/// A status code as the text `error.type` takes (`"502"`).
fn status_code_text(status: u16) -> String {
    status.to_string()
}
