//! OTLP/gRPC trace export against a collector on the `h2` crate
//! (tests/common/otlp_grpc.rs): the call Pier makes, refused calls (the
//! status in trailers or in a trailers-only answer) counted and logged on a
//! connection that goes on, and the spans taken once the collector answers
//! `grpc-status: 0`.

mod common;
#[path = "common/otlp_grpc.rs"]
mod otlp_grpc;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::h2raw::{block, frame, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PREFACE, SETTINGS};
use common::otlp::{
    hex, server_and_client, traced_proxy_config, traced_request as request,
    upstream_traceparent as upstream_parent,
};
use common::upstream::{ok, Upstream};
use common::{get, Pier};
use otlp_grpc::{Call, GrpcCollector};
use pier::observe::trace::otlp::decoded::Span;

/// `pier_trace_export_failures_total` as scraped now.
fn export_failures(pier: &Pier) -> u64 {
    let scrape = get(
        pier.admin.unwrap(),
        "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&scrape.body).to_string();
    common::metric(&text, "pier_trace_export_failures_total").expect("the failures counter") as u64
}

/// Waits (at most 10 s) until `pier_trace_export_failures_total` is `n`.
fn wait_for_failures(pier: &Pier, n: u64) {
    let until = Instant::now() + Duration::from_secs(10);
    while export_failures(pier) < n {
        assert!(Instant::now() < until, "the refused call was not counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(export_failures(pier), n);
}

fn spans_of(calls: &[Call], trace: &str) -> Vec<Span> {
    calls
        .iter()
        .flat_map(|c| &c.spans)
        .filter(|s| hex(&s.trace_id) == trace)
        .cloned()
        .collect()
}

#[test]
fn refused_grpc_calls_are_counted_and_the_next_one_delivers_on_the_same_connection() {
    let collector = GrpcCollector::start(14);
    let up = Upstream::start(|_| ok("up"));
    let text = traced_proxy_config(&collector.endpoint(), &[up.addr], "protocol = \"grpc\"")
        .replace("[server]", "[admin]\nlisten = \"127.0.0.1:0\"\n[server]");
    let pier = Pier::with_config(&text, &[]);
    assert_eq!(export_failures(&pier), 0);

    assert_eq!(get(pier.addr(), &request("/api/refused", "")).status, 200);
    let calls = collector.wait_for(|c| !c.is_empty());
    let call = calls.first().expect("an export call");
    assert_eq!(
        call.path,
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
    );
    assert_eq!(call.content_type, "application/grpc");
    assert_eq!(call.te, "trailers");
    assert_eq!(call.spans.len(), 2, "{:?}", call.spans);
    let line = pier.wait_log("gRPC status 14 (UNAVAILABLE)", Duration::from_secs(10));
    let line = line.expect("the refused call is logged");
    assert!(line.contains("collector%20unavailable"), "{line}");
    wait_for_failures(&pier, 1);

    // A trailers-only refusal is one too.
    collector.answer_trailers_only(8);
    assert_eq!(get(pier.addr(), &request("/api/over", "")).status, 200);
    collector.wait_for(|c| c.len() >= 2);
    wait_for_failures(&pier, 2);

    // The collector takes calls again: the next request's spans arrive,
    // their parents right, on the connection the refused call used.
    collector.answer(0);
    assert_eq!(get(pier.addr(), &request("/api/taken", "")).status, 200);
    let (trace, parent) = upstream_parent(&up, 2);
    let calls = collector.wait_for(|c| spans_of(c, &trace).len() >= 2);
    let spans = spans_of(&calls, &trace);
    let (server, client) = server_and_client(&spans.iter().collect::<Vec<_>>());
    assert!(server.parent_span_id.is_empty());
    assert_eq!(hex(&client.span_id), parent);
    assert!(pier
        .wait_log("trace export recovered", Duration::from_secs(10))
        .is_some());
    assert_eq!(export_failures(&pier), 2);
    assert_eq!(collector.connections(), 1);
}

#[test]
fn a_collector_taking_one_call_per_connection_loses_no_batch() {
    let collector = GrpcCollector::start(0);
    collector.close_after_each_call();
    let up = Upstream::start(|_| ok("up"));
    let text = traced_proxy_config(&collector.endpoint(), &[up.addr], "protocol = \"grpc\"")
        .replace("[server]", "[admin]\nlisten = \"127.0.0.1:0\"\n[server]");
    let pier = Pier::with_config(&text, &[]);
    for i in 0..3 {
        assert_eq!(
            get(pier.addr(), &request(&format!("/api/{i}"), "")).status,
            200
        );
        let (trace, _) = upstream_parent(&up, i);
        let calls = collector.wait_for(|c| spans_of(c, &trace).len() >= 2);
        assert_eq!(spans_of(&calls, &trace).len(), 2, "request {i}: {calls:?}");
    }
    assert_eq!(collector.connections(), 3);
    assert_eq!(export_failures(&pier), 0);
}

/// Reads one frame: its type, flags and stream; `None` at the end.
fn read_frame(conn: &mut TcpStream) -> Option<(u8, u8, u32)> {
    let mut head = [0u8; 9];
    conn.read_exact(&mut head).ok()?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0; len];
    conn.read_exact(&mut payload).ok()?;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    Some((head[3], head[4], stream))
}

/// A collector written frame by frame: its first connection answers the
/// first call's HEADERS with GOAWAY naming no stream as processed, and stays
/// open; later connections answer each call `grpc-status: 0`
/// (trailers-only). Returns its address and the calls answered.
fn collector_going_away_first() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let answered = Arc::new(AtomicUsize::new(0));
    let a = answered.clone();
    std::thread::spawn(move || {
        for (n, conn) in listener.incoming().enumerate() {
            let Ok(mut conn) = conn else { return };
            let a = a.clone();
            std::thread::spawn(move || {
                let mut preface = [0u8; 24];
                if conn.read_exact(&mut preface).is_err() || preface != PREFACE {
                    return;
                }
                conn.write_all(&frame(SETTINGS, 0, 0, &[])).unwrap();
                while let Some((kind, flags, stream)) = read_frame(&mut conn) {
                    if n == 0 && kind == HEADERS {
                        let _ = conn.write_all(&frame(GOAWAY, 0, 0, &[0; 8]));
                    } else if n > 0 && flags & END_STREAM != 0 && stream != 0 {
                        let head = block(&[
                            (":status", "200"),
                            ("content-type", "application/grpc"),
                            ("grpc-status", "0"),
                        ]);
                        let flags = END_STREAM | END_HEADERS;
                        let _ = conn.write_all(&frame(HEADERS, flags, stream, &head));
                        a.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    (addr, answered)
}

#[test]
fn a_call_refused_unprocessed_by_a_goaway_goes_again_on_a_new_connection() {
    let (collector, answered) = collector_going_away_first();
    let up = Upstream::start(|_| ok("up"));
    let endpoint = format!("http://{collector}");
    let text = traced_proxy_config(&endpoint, &[up.addr], "protocol = \"grpc\"")
        .replace("[server]", "[admin]\nlisten = \"127.0.0.1:0\"\n[server]");
    let pier = Pier::with_config(&text, &[]);
    assert_eq!(get(pier.addr(), &request("/api/x", "")).status, 200);
    let until = Instant::now() + Duration::from_secs(10);
    while answered.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < until,
            "the refused call was not made again"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(export_failures(&pier), 0);
}
