//! A small OTLP/gRPC collector for trace tests, on the `h2` crate (an HTTP/2
//! implementation other than Pier's): takes `TraceService/Export` calls over
//! prior-knowledge HTTP/2, unframes and decodes their
//! `ExportTraceServiceRequest`s, and answers with the gRPC status it is set
//! to (0 with an empty response message; others with a `grpc-message`, in
//! the trailers or, when asked, in a trailers-only answer).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Response};
use pier::observe::trace::otlp::decoded::{ExportTraceServiceRequest, Span};
use prost::Message;

/// One call as received.
#[derive(Clone, Debug)]
pub struct Call {
    /// `:path`.
    pub path: String,
    /// The request's `content-type` and `te`.
    pub content_type: String,
    pub te: String,
    /// The spans it carried.
    pub spans: Vec<Span>,
}

#[derive(Default)]
struct State {
    status: AtomicU32,
    trailers_only: AtomicBool,
    /// A connection takes one call: the next is answered with GOAWAY and
    /// the connection ends.
    close_after_call: AtomicBool,
    connections: AtomicUsize,
    calls: Mutex<Vec<Call>>,
}

/// A running collector; its thread ends with the test process.
pub struct GrpcCollector {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl GrpcCollector {
    /// A collector answering every call with `grpc-status: status`.
    pub fn start(status: u32) -> GrpcCollector {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        state.status.store(status, Ordering::SeqCst);
        let s = state.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                while let Ok((tcp, _)) = listener.accept().await {
                    s.connections.fetch_add(1, Ordering::SeqCst);
                    tokio::task::spawn_local(serve(tcp, s.clone()));
                }
            });
        });
        GrpcCollector { addr, state }
    }

    /// Answers the next calls with `grpc-status: status`.
    pub fn answer(&self, status: u32) {
        self.state.trailers_only.store(false, Ordering::SeqCst);
        self.state.status.store(status, Ordering::SeqCst);
    }

    /// Answers the next calls with a trailers-only `grpc-status: status`
    /// (the status in the only head, which ends the stream).
    pub fn answer_trailers_only(&self, status: u32) {
        self.state.trailers_only.store(true, Ordering::SeqCst);
        self.state.status.store(status, Ordering::SeqCst);
    }

    /// Takes one call per connection: a second is not processed (GOAWAY,
    /// then the socket closes), as a collector going away does.
    pub fn close_after_each_call(&self) {
        self.state.close_after_call.store(true, Ordering::SeqCst);
    }

    /// The collector's endpoint for `[trace]`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// The calls received so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.calls.lock().unwrap().clone()
    }

    /// Waits (at most 10 s) until `done` holds of the calls received.
    pub fn wait_for(&self, done: impl Fn(&[Call]) -> bool) -> Vec<Call> {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let calls = self.calls();
            if done(&calls) || Instant::now() > until {
                return calls;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

async fn serve(tcp: tokio::net::TcpStream, state: Arc<State>) {
    let Ok(mut conn) = h2::server::handshake(tcp).await else {
        return;
    };
    let mut served = 0;
    while let Some(Ok((req, respond))) = conn.accept().await {
        if served > 0 && state.close_after_call.load(Ordering::SeqCst) {
            // The next call on the connection is not processed: GOAWAY,
            // driven until it is out and the connection ends.
            conn.abrupt_shutdown(h2::Reason::NO_ERROR);
            while conn.accept().await.is_some() {}
            return;
        }
        served += 1;
        let state = state.clone();
        tokio::task::spawn_local(async move {
            let (parts, mut body) = req.into_parts();
            let mut bytes = Vec::new();
            while let Some(Ok(chunk)) = body.data().await {
                let _ = body.flow_control().release_capacity(chunk.len());
                bytes.extend_from_slice(&chunk);
            }
            let field = |name: &str| {
                parts
                    .headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string()
            };
            // The gRPC prefix: not compressed, then the message's length.
            assert!(bytes.len() >= 5, "a call without its message prefix");
            assert_eq!(bytes[0], 0, "a compressed message");
            let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
            assert_eq!(len, bytes.len() - 5, "the prefix's length is the message's");
            let req = ExportTraceServiceRequest::decode(&bytes[5..])
                .expect("an ExportTraceServiceRequest");
            let spans = req
                .resource_spans
                .into_iter()
                .flat_map(|rs| rs.scope_spans)
                .flat_map(|ss| ss.spans)
                .collect();
            state.calls.lock().unwrap().push(Call {
                path: parts.uri.path().to_string(),
                content_type: field("content-type"),
                te: field("te"),
                spans,
            });
            let status = state.status.load(Ordering::SeqCst);
            let mut respond = respond;
            if state.trailers_only.load(Ordering::SeqCst) {
                let head = Response::builder()
                    .status(200)
                    .header("content-type", "application/grpc")
                    .header("grpc-status", status.to_string())
                    .header("grpc-message", "over%20quota")
                    .body(())
                    .unwrap();
                let _ = respond.send_response(head, true);
                return;
            }
            let head = Response::builder()
                .status(200)
                .header("content-type", "application/grpc")
                .body(())
                .unwrap();
            let Ok(mut send) = respond.send_response(head, false) else {
                return;
            };
            if status == 0 {
                // An empty ExportTraceServiceResponse.
                let _ = send.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false);
            }
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", status.to_string().parse().unwrap());
            if status != 0 {
                trailers.insert("grpc-message", "collector%20unavailable".parse().unwrap());
            }
            let _ = send.send_trailers(trailers);
        });
    }
}
