//! The server HTTP/2 codec alone (`pier::http2::conn`, HPACK included), per
//! small request: one HEADERS frame in, as h2load sends it once its fields
//! are in the HPACK table, the request head delivered, then the response
//! head (`server`, `date`, `content-length`) and a 13-byte DATA frame out.
//! Run it under callgrind with two counts; the difference divided by the
//! difference of counts is the codec's instructions per request, to set
//! against the driver's and the `h2` crate's (bench/h2_floor.rs).
//!
//! usage: cargo build --release --example h2_codec && for n in 10000 20000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!   target/release/examples/h2_codec $n; done

use std::time::Instant;

use pier::http2::conn::{Events, RequestHead, ServerConnection, StreamId};
use pier::http2::ErrorCode;

/// Remembers the stream to answer.
struct LastRequest(StreamId);

impl Events for LastRequest {
    fn request(&mut self, stream: StreamId, head: &RequestHead, _: bool) {
        self.0 = stream;
        std::hint::black_box(head.path());
    }
    fn data(&mut self, _: StreamId, _: &[u8], _: bool) {}
    fn trailers(&mut self, _: StreamId, _: &RequestHead) {}
    fn reset(&mut self, _: StreamId, _: ErrorCode) {}
    fn send_window(&mut self) {}
}

/// The first request's block: `:method GET`, `:scheme http`, `:path /`
/// from the static table, `:authority` and `user-agent` added to the
/// dynamic table.
const FIRST: &[u8] = b"\x82\x86\x84\x41\x0e127.0.0.1:8080\x7a\x0eh2load nghttp2";
/// Every later request's block: all five fields indexed.
const NEXT: &[u8] = b"\x82\x86\x84\xbf\xbe";

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("usage: h2_codec REQUESTS");
    let defaults = pier::config::http2::Http2Config::default();
    let mut conn =
        ServerConnection::new(defaults.conn_limits(&pier::config::HttpConfig::default()));
    let mut events = LastRequest(0);
    let now = Instant::now();
    let mut input = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0".to_vec();
    input.extend_from_slice(b"\0\0\0\x04\x01\0\0\0\0");
    conn.receive(&input, now, &mut events).unwrap();
    for i in 0..n {
        let block = if i == 0 { FIRST } else { NEXT };
        input.clear();
        input.extend_from_slice(&(block.len() as u32).to_be_bytes()[1..]);
        input.extend_from_slice(&[1, 5]); // HEADERS, END_STREAM | END_HEADERS
        input.extend_from_slice(&(2 * i + 1).to_be_bytes());
        input.extend_from_slice(block);
        if i % 1000 == 999 {
            // The client reopens the connection window as h2load does.
            input.extend_from_slice(b"\0\0\x04\x08\0\0\0\0\0");
            input.extend_from_slice(&13_000u32.to_be_bytes());
        }
        conn.receive(&input, now, &mut events).unwrap();
        let fields = [
            (&b"server"[..], &b"pier"[..]),
            (b"date", b"Tue, 24 Nov 2026 10:00:00 GMT"),
            (b"content-length", b"13"),
        ];
        conn.send_headers(events.0, 200, &mut fields.into_iter(), false);
        assert_eq!(conn.send_data(events.0, b"Hello, World!", true), 13);
        std::hint::black_box(conn.output());
        conn.consume_output(conn.output().len());
    }
    assert_eq!(conn.open_streams(), 0);
}
