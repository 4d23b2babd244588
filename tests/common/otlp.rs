//! A small OTLP/HTTP collector for trace tests: takes `POST /v1/traces`
//! bodies, decodes them as `ExportTraceServiceRequest` protobuf and keeps the
//! spans, on blocking std sockets.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pier::observe::trace::otlp::decoded::{any_value, ExportTraceServiceRequest, Span};
use prost::Message;

/// A running collector; its thread ends with the test process.
pub struct Collector {
    pub addr: SocketAddr,
    spans: Arc<Mutex<Vec<Span>>>,
    /// `service.name` of every request received.
    services: Arc<Mutex<Vec<String>>>,
}

impl Collector {
    pub fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let services = Arc::new(Mutex::new(Vec::new()));
        let (s, n) = (spans.clone(), services.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (s, n) = (s.clone(), n.clone());
                std::thread::spawn(move || {
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let mut w = conn;
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        assert!(line.starts_with("POST /v1/traces "), "{line}");
                        let mut length = 0;
                        loop {
                            let mut h = String::new();
                            r.read_line(&mut h).unwrap();
                            let h = h.trim_end();
                            if h.is_empty() {
                                break;
                            }
                            let (name, value) = h.split_once(':').unwrap();
                            if name.eq_ignore_ascii_case("content-length") {
                                length = value.trim().parse().unwrap();
                            }
                            if name.eq_ignore_ascii_case("content-type") {
                                assert_eq!(value.trim(), "application/x-protobuf");
                            }
                        }
                        let mut body = vec![0; length];
                        r.read_exact(&mut body).unwrap();
                        let req = ExportTraceServiceRequest::decode(&body[..])
                            .expect("an ExportTraceServiceRequest");
                        for rs in req.resource_spans {
                            let service = rs.resource.unwrap().attributes[0].clone();
                            if let Some(any_value::Value::StringValue(v)) =
                                service.value.unwrap().value
                            {
                                n.lock().unwrap().push(v);
                            }
                            for ss in rs.scope_spans {
                                s.lock().unwrap().extend(ss.spans);
                            }
                        }
                        w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                            .unwrap();
                    }
                });
            }
        });
        Collector {
            addr,
            spans,
            services,
        }
    }

    /// The spans received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// The service names requests came under.
    pub fn services(&self) -> Vec<String> {
        self.services.lock().unwrap().clone()
    }

    /// Waits (at most 10 s) until `done` holds of the spans received.
    pub fn wait_for(&self, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let spans = self.spans();
            if done(&spans) || Instant::now() > until {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// An attribute of `span` as text (integers written out).
pub fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.clone()?.value? {
            any_value::Value::StringValue(s) => Some(s),
            any_value::Value::IntValue(i) => Some(i.to_string()),
        })
}

/// The server span and the client span of a trace that has just these two,
/// the client span a child of the server span.
pub fn server_and_client<'a>(spans: &[&'a Span]) -> (&'a Span, &'a Span) {
    assert_eq!(spans.len(), 2, "{spans:?}");
    let of_kind = |kind: i32, what: &str| {
        *spans
            .iter()
            .find(|s| s.kind == kind)
            .unwrap_or_else(|| panic!("a {what} span in {spans:?}"))
    };
    let (server, client) = (of_kind(2, "server"), of_kind(3, "client"));
    assert_eq!(client.parent_span_id, server.span_id);
    (server, client)
}

/// Lowercase hex of an id.
pub fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// One worker proxying `/api/` to `servers` (one retry, never marked down),
/// a JSON access log in `{dir}/access.log`, and `[trace]` exporting to
/// `endpoint` every 50 ms with `trace_extra` added.
pub fn traced_proxy_config(endpoint: &str, servers: &[SocketAddr], trace_extra: &str) -> String {
    let servers = servers
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[access_log]
path = "{{dir}}/access.log"
format = "json"
flush_interval = "50ms"
[trace]
endpoint = "{endpoint}"
service_name = "edge-test"
flush_interval = "50ms"
{trace_extra}
[[upstream]]
name = "app"
servers = [{servers}]
retries = 1
max_fails = 0
[[route]]
path = "/api/"
handler = "proxy"
upstream = "app"
"#
    )
}

/// `config` with a second group of `dead` only, routed at `/dead/`.
pub fn with_dead_route(config: &str, dead: SocketAddr) -> String {
    config.replace(
        "[[route]]",
        &format!("[[upstream]]\nname = \"dead\"\nservers = [\"{dead}\"]\nretries = 0\n[[route]]\npath = \"/dead/\"\nhandler = \"proxy\"\nupstream = \"dead\"\n[[route]]"),
    )
}

/// A GET of `path` with a host and user agent, `extra` field lines, then close.
pub fn traced_request(path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: trace-test/1\r\n{extra}Connection: close\r\n\r\n")
}

/// The trace id and parent span id of the `traceparent` the upstream's
/// `nth` request had (exactly one, version 00).
pub fn upstream_traceparent(up: &super::upstream::Upstream, nth: usize) -> (String, String) {
    let reqs = up.requests();
    let tp = reqs[nth]
        .header("traceparent")
        .expect("a traceparent upstream");
    assert_eq!(reqs[nth].count("traceparent"), 1);
    let parts: Vec<&str> = tp.split('-').collect();
    assert_eq!((parts.len(), parts[0]), (4, "00"), "{tp}");
    (parts[1].to_string(), parts[2].to_string())
}
