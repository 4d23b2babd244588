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

/// Lowercase hex of an id.
pub fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}
