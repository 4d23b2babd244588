//! Arbitrary bytes from an origin never make the HTTP/2 client connection
//! panic, use more input than it was given, or hold more streams than it
//! may open; the caller's side (opening, sending, releasing, cancelling)
//! is driven by the input too.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use pier::http2::client::{ClientConnection, ClientEvents, ClientLimits, ResponseHead, StreamId};
use pier::http2::ErrorCode;

/// Records what the caller would act on: body bytes to release.
#[derive(Default)]
struct Caller {
    received: Vec<(StreamId, usize)>,
}

impl ClientEvents for Caller {
    fn response(&mut self, _: StreamId, head: &ResponseHead, _: bool) {
        assert!((100..=999).contains(&head.status()));
        for (name, _) in head.fields() {
            assert!(!name.is_empty() && !name.starts_with(b":"));
        }
    }
    fn data(&mut self, stream: StreamId, data: &[u8], _: bool) {
        self.received.push((stream, data.len()));
    }
    fn trailers(&mut self, _: StreamId, fields: &ResponseHead) {
        assert_eq!(fields.status(), 0);
    }
    fn reset(&mut self, _: StreamId, _: ErrorCode) {}
    fn goaway(&mut self, _: StreamId, _: ErrorCode) {}
    fn send_window(&mut self) {}
    fn settings(&mut self) {}
}

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, mut rest)) = data.split_first() else {
        return;
    };
    let limits = ClientLimits {
        max_concurrent_streams: 1 + u32::from(cfg & 7),
        initial_stream_window: 1 << (10 + (cfg >> 3 & 7)),
        initial_connection_window: 65_535,
        max_frame_size: 16_384,
        header_table_size: if cfg & 0x40 == 0 { 4096 } else { 0 },
        max_header_list_size: 4096,
        max_header_fields: 32,
        max_control_frames: 20,
        max_error_resets: 20,
        max_empty_frames: 20,
        max_inert_frames: 50,
        // Server settings; a client ignores them.
        enable_connect_protocol: false,
        no_rfc7540_priorities: false,
    };
    let mut conn = ClientConnection::new(limits.clone());
    let mut caller = Caller::default();
    let mut now = Instant::now();
    let mut input = Vec::new();
    let mut last: StreamId = 0;
    // Steps of one command octet, one length octet, then that many octets
    // of the origin's bytes.
    while let [cmd, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (chunk, tail) = tail.split_at(len);
        rest = tail;
        match cmd % 8 {
            0 | 1 => {
                let method: &[u8] = [&b"GET"[..], b"HEAD", b"POST"][usize::from(cmd / 8 % 3)];
                let cookie = [(&b"cookie"[..], &b"a=1"[..])];
                if let Ok(id) = conn.open_stream(
                    method,
                    b"https",
                    b"origin.example",
                    b"/",
                    &mut cookie.into_iter(),
                    method != b"POST",
                ) {
                    last = id;
                }
            }
            2 => {
                conn.send_data(last, &[0; 3000], cmd & 0x10 != 0);
            }
            3 => conn.reset_stream(last, ErrorCode::Cancel),
            4 => now += Duration::from_millis(u64::from(*cmd)),
            5 => conn.ping(*b"01234567"),
            _ => {}
        }
        input.extend_from_slice(chunk);
        match conn.receive(&input, now, &mut caller) {
            Ok(used) => {
                assert!(used <= input.len());
                input.drain(..used);
            }
            Err(_) => {
                assert!(conn.error().is_some());
                return;
            }
        }
        for (stream, n) in caller.received.drain(..) {
            conn.release(stream, n);
        }
        assert!(conn.open_streams() <= limits.max_concurrent_streams as usize);
        let n = conn.output_len();
        conn.consume_output(n);
        conn.release_idle_buffers();
    }
});
