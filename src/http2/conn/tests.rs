//! The connection driven with raw frames, as a client would send them:
//! the exchanges and flow control here, the error rules and the defences in
//! `error_tests.rs`. The helpers build frames and HPACK blocks by hand.

use std::time::Instant;

use super::*;
use crate::http2::frame::{self, flag, kind, FrameHead, PREFACE};
pub(super) use crate::http2::shared::test_wire::*;

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ev {
    Request {
        stream: StreamId,
        method: Vec<u8>,
        path: Option<Vec<u8>>,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
        oversized: bool,
        end_stream: bool,
    },
    Data(StreamId, Vec<u8>, bool),
    Trailers(StreamId, Vec<(Vec<u8>, Vec<u8>)>),
    Reset(StreamId, ErrorCode),
    SendWindow,
}

#[derive(Default)]
pub(super) struct Recorder(Vec<Ev>);

pub(super) fn owned(head: &RequestHead) -> Vec<(Vec<u8>, Vec<u8>)> {
    head.fields()
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect()
}

impl Events for Recorder {
    fn request(&mut self, stream: StreamId, head: &RequestHead, end_stream: bool) {
        self.0.push(Ev::Request {
            stream,
            method: head.method().to_vec(),
            path: head.path().map(<[u8]>::to_vec),
            fields: owned(head),
            oversized: head.oversized(),
            end_stream,
        });
    }
    fn data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) {
        self.0.push(Ev::Data(stream, data.to_vec(), end_stream));
    }
    fn trailers(&mut self, stream: StreamId, fields: &RequestHead) {
        self.0.push(Ev::Trailers(stream, owned(fields)));
    }
    fn reset(&mut self, stream: StreamId, code: ErrorCode) {
        self.0.push(Ev::Reset(stream, code));
    }
    fn send_window(&mut self) {
        self.0.push(Ev::SendWindow);
    }
}

pub(super) const GET: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "https"),
    (":authority", "example.com"),
    (":path", "/"),
];

pub(super) fn get_block() -> Vec<u8> {
    block(&GET)
}

pub(super) fn post_block(content_length: Option<&str>) -> Vec<u8> {
    let mut f = vec![
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/up"),
    ];
    if let Some(cl) = content_length {
        f.push(("content-length", cl));
    }
    block(&f)
}

/// A client: the connection under test, what it reported, and the clock.
pub(super) struct Client {
    pub(super) conn: ServerConnection,
    pub(super) events: Recorder,
    pub(super) now: Instant,
}

impl Client {
    /// A connection past the preface and the SETTINGS exchange, its output
    /// drained.
    pub(super) fn new(limits: ConnLimits) -> Client {
        let mut c = Client::fresh(limits);
        let mut hello = PREFACE.to_vec();
        hello.extend(settings(&[]));
        hello.extend(frame(kind::SETTINGS, flag::ACK, 0, &[]));
        c.send(&hello).unwrap();
        c.frames();
        c
    }

    pub(super) fn fresh(limits: ConnLimits) -> Client {
        Client {
            conn: ServerConnection::new(limits),
            events: Recorder::default(),
            now: Instant::now(),
        }
    }

    /// All the queued output, pieces joined, without consuming it.
    pub(super) fn output_bytes(&self) -> Vec<u8> {
        let mut slices = [std::io::IoSlice::new(&[]); 256];
        let n = self.conn.output_slices(&mut slices);
        let out = joined(&slices[..n]);
        assert_eq!(out.len(), self.conn.output_len());
        out
    }

    pub(super) fn events(&mut self) -> Vec<Ev> {
        std::mem::take(&mut self.events.0)
    }
}

impl Peer for Client {
    #[track_caller]
    fn send(&mut self, bytes: &[u8]) -> Result<(), ConnError> {
        let n = self.conn.receive(bytes, self.now, &mut self.events)?;
        assert_eq!(n, bytes.len(), "whole frames are all used");
        Ok(())
    }

    fn core_mut(&mut self) -> &mut ConnCore {
        &mut self.conn.core
    }
}

#[test]
fn settings_go_out_first_and_the_clients_are_acked() {
    let mut c = Client::fresh(limits());
    let mut want = settings(&[(3, 4), (4, 65_535), (5, 16_384), (6, 8192)]);
    want.extend(window_update(0, (1 << 20) - 65_535));
    assert_eq!(c.conn.output(), &want[..]);
    c.frames();

    let mut l = limits();
    l.header_table_size = 1024;
    l.initial_connection_window = 1000;
    let c2 = Client::fresh(l);
    let want = settings(&[(3, 4), (4, 65_535), (5, 16_384), (6, 8192), (1, 1024)]);
    assert_eq!(
        c2.conn.output(),
        &want[..],
        "no WINDOW_UPDATE below the default"
    );

    let n = c
        .conn
        .receive(&PREFACE[..10], c.now, &mut c.events)
        .unwrap();
    assert_eq!(n, 0, "a partial preface waits for the rest");
    let mut hello = PREFACE.to_vec();
    hello.extend(settings(&[(4, 1000), (0x99, 7)]));
    hello.extend(&frame(kind::PING, 0, 0, b"12345678")[..5]);
    let n = c.conn.receive(&hello, c.now, &mut c.events).unwrap();
    assert_eq!(n, 24 + 9 + 12, "the partial PING is left");
    let f = c.one(kind::SETTINGS);
    assert_eq!((f.flags, f.payload.len()), (flag::ACK, 0));
}

#[test]
fn extended_connect_is_announced_when_taken() {
    let mut l = limits();
    l.enable_connect_protocol = true;
    let c = Client::fresh(l);
    let mut want = settings(&[(3, 4), (4, 65_535), (5, 16_384), (6, 8192), (8, 1)]);
    want.extend(window_update(0, (1 << 20) - 65_535));
    assert_eq!(c.conn.output(), &want[..]);
}

#[test]
fn a_get_is_delivered_with_its_fields_and_answered() {
    let mut c = Client::new(limits());
    let mut f = GET.to_vec();
    f.push(("accept", "*/*"));
    f.push(("cookie", "a=1"));
    c.send(&headers(1, &block(&f), true)).unwrap();
    assert_eq!(
        c.events(),
        [Ev::Request {
            stream: 1,
            method: b"GET".to_vec(),
            path: Some(b"/".to_vec()),
            fields: vec![
                (b"accept".to_vec(), b"*/*".to_vec()),
                (b"cookie".to_vec(), b"a=1".to_vec())
            ],
            oversized: false,
            end_stream: true,
        }]
    );
    assert_eq!(c.conn.open_streams(), 1);
    assert_eq!(c.conn.send_capacity(1), 0, "no head sent yet");
    c.conn.send_headers(1, 200, &mut std::iter::empty(), false);
    assert_eq!(c.conn.send_capacity(1), 65_535);
    assert_eq!(c.conn.send_data(1, b"hello", true), 5);
    let f = c.frames();
    assert_eq!(f.len(), 2);
    assert_eq!(
        (f[0].kind, f[0].flags, f[0].stream),
        (kind::HEADERS, flag::END_HEADERS, 1)
    );
    assert_eq!((f[1].kind, f[1].flags), (kind::DATA, flag::END_STREAM));
    assert_eq!(f[1].payload, b"hello");
    assert_eq!(c.conn.open_streams(), 0, "both sides ended");
    assert_eq!(c.conn.send_data(1, b"more", true), 0);
    assert!(c.conn.output().is_empty());
}

#[test]
fn a_header_block_may_span_continuations() {
    let mut c = Client::new(limits());
    let b = get_block();
    let mut bytes = frame(kind::HEADERS, flag::END_STREAM, 1, &b[..3]);
    bytes.extend(frame(kind::CONTINUATION, 0, 1, &b[3..10]));
    bytes.extend(frame(kind::CONTINUATION, flag::END_HEADERS, 1, &b[10..]));
    c.send(&bytes).unwrap();
    assert!(matches!(
        c.events()[..],
        [Ev::Request {
            stream: 1,
            end_stream: true,
            ..
        }]
    ));
}

#[test]
fn a_post_body_is_held_to_the_windows_and_release_reopens_them() {
    let mut l = limits();
    l.initial_stream_window = 1000;
    l.initial_connection_window = 0;
    let mut c = Client::new(l);
    c.send(&headers(1, &post_block(None), false)).unwrap();
    c.events();
    c.send(&data(1, &[b'a'; 400], false)).unwrap();
    assert_eq!(c.events(), [Ev::Data(1, vec![b'a'; 400], false)]);
    c.conn.release(1, 400);
    assert!(c.frames().is_empty(), "400 owed is under half the window");
    c.send(&data(1, &[b'b'; 600], false)).unwrap();
    c.events();
    c.conn.release(1, 100);
    let f = c.one(kind::WINDOW_UPDATE);
    assert_eq!((f.stream, frame::read_u32(&f.payload)), (1, 500));
    // The stream may now send 500 more; 501 overruns its window.
    c.expect_reset(&data(1, &[0; 501], false), 1, ErrorCode::FlowControlError);
    assert_eq!(c.events(), [Ev::Reset(1, ErrorCode::FlowControlError)]);
    // The connection's window (65,535 at least) reopens by all it
    // received: what the driver released, and at once the 501 bytes of the
    // reset stream. Its WINDOW_UPDATE goes out at half the window owed.
    c.conn.release(1, 500);
    assert!(c.frames().is_empty());
    c.conn.release(3, 32_767 - 1501);
    let f = c.one(kind::WINDOW_UPDATE);
    assert_eq!((f.stream, frame::read_u32(&f.payload)), (0, 32_767));
}

#[test]
fn the_connection_window_cannot_be_overrun() {
    let mut l = limits();
    l.initial_connection_window = 65_535;
    l.max_frame_size = 100_000;
    let mut c = Client::new(l);
    c.send(&settings(&[])).unwrap();
    c.send(&headers(1, &post_block(None), false)).unwrap();
    c.send(&headers(3, &post_block(None), false)).unwrap();
    c.send(&data(1, &[0; 40_000], false)).unwrap();
    c.frames();
    c.expect_goaway(&data(3, &[0; 30_000], false), ErrorCode::FlowControlError);
}

#[test]
fn padding_counts_against_the_windows_and_is_released_at_once() {
    let mut l = limits();
    l.initial_stream_window = 100;
    l.initial_connection_window = 65_535;
    let mut c = Client::new(l);
    c.send(&headers(1, &post_block(None), false)).unwrap();
    c.events();
    let mut p = vec![59];
    p.extend([b'x'; 10]);
    p.extend([0; 59]);
    c.send(&frame(kind::DATA, flag::PADDED, 1, &p)).unwrap();
    assert_eq!(c.events(), [Ev::Data(1, vec![b'x'; 10], false)]);
    let f = c.one(kind::WINDOW_UPDATE);
    assert_eq!(
        (f.stream, frame::read_u32(&f.payload)),
        (1, 60),
        "pad byte and padding"
    );
    c.expect_goaway(
        &frame(kind::DATA, flag::PADDED, 1, &[3, 1, 2]),
        ErrorCode::ProtocolError,
    );
}

#[test]
fn content_length_is_enforced() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &post_block(Some("3")), false)).unwrap();
    c.send(&data(1, b"ab", false)).unwrap();
    c.events();
    c.expect_reset(&data(1, b"", true), 1, ErrorCode::ProtocolError);
    assert_eq!(c.events(), [Ev::Reset(1, ErrorCode::ProtocolError)]);

    c.send(&headers(3, &post_block(Some("3")), false)).unwrap();
    c.events();
    c.expect_reset(&data(3, b"abcd", false), 3, ErrorCode::ProtocolError);
    assert_eq!(c.events(), [Ev::Reset(3, ErrorCode::ProtocolError)]);

    c.send(&headers(5, &post_block(Some("3")), false)).unwrap();
    c.send(&data(5, b"abc", true)).unwrap();
    assert_eq!(c.events()[1], Ev::Data(5, b"abc".to_vec(), true));

    // A head that ends the stream may not promise a body.
    c.send(&headers(7, &post_block(Some("3")), true)).unwrap();
    let f = c.one(kind::RST_STREAM);
    assert_eq!((f.stream, f.code()), (7, ErrorCode::ProtocolError));
    assert!(c.events().is_empty(), "never delivered");
}

#[test]
fn trailers_end_the_body() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &post_block(None), false)).unwrap();
    c.send(&data(1, b"ab", false)).unwrap();
    c.send(&headers(1, &block(&[("grpc-status", "0")]), true))
        .unwrap();
    let ev = c.events();
    assert_eq!(
        ev[2],
        Ev::Trailers(1, vec![(b"grpc-status".to_vec(), b"0".to_vec())])
    );
    c.send(&headers(3, &post_block(None), false)).unwrap();
    c.events();
    c.expect_reset(
        &headers(3, &block(&[("a", "b")]), false),
        3,
        ErrorCode::ProtocolError,
    );
    c.send(&headers(5, &post_block(None), false)).unwrap();
    c.events();
    c.expect_reset(
        &headers(5, &block(&[(":path", "/")]), true),
        5,
        ErrorCode::ProtocolError,
    );
    assert_eq!(c.events(), [Ev::Reset(5, ErrorCode::ProtocolError)]);
}

#[test]
fn send_data_splits_by_the_clients_frame_size_and_stops_at_its_window() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.conn.send_headers(1, 200, &mut std::iter::empty(), false);
    c.frames();
    c.events();
    let body = vec![7; 40_000];
    assert_eq!(c.conn.send_data(1, &body, false), 40_000);
    let sizes: Vec<_> = c.frames().iter().map(|f| f.payload.len()).collect();
    assert_eq!(sizes, [16_384, 16_384, 7232]);
    assert_eq!(c.conn.send_capacity(1), 65_535 - 40_000);
    assert_eq!(
        c.conn.send_data(1, &body, true),
        25_535,
        "the window's rest"
    );
    assert_eq!(
        c.frames()
            .iter()
            .filter(|f| f.flags & flag::END_STREAM != 0)
            .count(),
        0
    );
    assert_eq!(
        c.conn.send_data(1, &body, true),
        0,
        "a closed window takes nothing"
    );
    assert!(c.frames().is_empty());
    c.send(&settings(&[(frame::setting::MAX_FRAME_SIZE, 20_000)]))
        .unwrap();
    c.send(&window_update(0, 30_000)).unwrap();
    c.send(&window_update(1, 30_000)).unwrap();
    assert_eq!(c.events(), [Ev::SendWindow, Ev::SendWindow]);
    c.frames();
    assert_eq!(c.conn.send_data(1, &body[..25_000], true), 25_000);
    let f = c.frames();
    assert_eq!(
        f.iter().map(|f| f.payload.len()).collect::<Vec<_>>(),
        [20_000, 5000]
    );
    assert_eq!(f[1].flags, flag::END_STREAM);
}

#[test]
fn a_one_byte_window_sends_one_byte_then_resumes() {
    let mut c = Client::new(limits());
    c.send(&settings(&[(frame::setting::INITIAL_WINDOW_SIZE, 1)]))
        .unwrap();
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.conn.send_headers(1, 200, &mut std::iter::empty(), false);
    c.frames();
    c.events();
    assert_eq!(c.conn.send_data(1, b"hello", true), 1);
    let f = c.one(kind::DATA);
    assert_eq!((f.payload.as_slice(), f.flags), (&b"h"[..], 0));
    assert_eq!(c.conn.send_capacity(1), 0);
    assert_eq!(c.conn.send_data(1, b"ello", true), 0);
    c.send(&window_update(1, 10)).unwrap();
    assert_eq!(c.events(), [Ev::SendWindow]);
    assert_eq!(c.conn.send_data(1, b"ello", true), 4);
    assert_eq!(c.one(kind::DATA).flags, flag::END_STREAM);
}

#[test]
fn initial_window_size_changes_move_open_streams_windows() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.conn.send_headers(1, 200, &mut std::iter::empty(), false);
    assert_eq!(c.conn.send_data(1, &[0; 1000], false), 1000);
    c.send(&settings(&[(frame::setting::INITIAL_WINDOW_SIZE, 500)]))
        .unwrap();
    assert_eq!(c.conn.send_capacity(1), 0, "window is 500 - 1000 < 0");
    c.send(&window_update(1, 600)).unwrap();
    assert_eq!(c.conn.send_capacity(1), 100);
    c.events();
    c.send(&settings(&[(frame::setting::INITIAL_WINDOW_SIZE, 1500)]))
        .unwrap();
    assert_eq!(c.conn.send_capacity(1), 1100);
    assert_eq!(c.events(), [Ev::SendWindow]);
    c.frames();
    c.send(&window_update(1, frame::MAX_WINDOW as u32 - 1100))
        .unwrap();
    c.expect_goaway(
        &settings(&[(frame::setting::INITIAL_WINDOW_SIZE, 1501)]),
        ErrorCode::FlowControlError,
    );
    let mut c = Client::new(limits());
    c.expect_goaway(
        &settings(&[(frame::setting::INITIAL_WINDOW_SIZE, 1 << 31)]),
        ErrorCode::FlowControlError,
    );
}

#[test]
fn an_oversized_head_is_delivered_marked() {
    let mut l = limits();
    l.max_header_list_size = 300;
    let mut c = Client::new(l);
    let long = "v".repeat(300);
    let mut f = GET.to_vec();
    f.push(("x-long", &long));
    c.send(&headers(1, &block(&f), true)).unwrap();
    match &c.events()[..] {
        [Ev::Request {
            oversized: true,
            fields,
            path,
            ..
        }] => {
            assert!(fields.is_empty());
            assert_eq!(path.as_deref(), Some(&b"/"[..]));
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn client_resets_are_reported() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &post_block(None), false)).unwrap();
    c.events();
    c.send(&frame(kind::RST_STREAM, 0, 1, &8u32.to_be_bytes()))
        .unwrap();
    assert_eq!(c.events(), [Ev::Reset(1, ErrorCode::Cancel)]);
    assert_eq!(c.conn.open_streams(), 0);
    assert!(c.frames().is_empty());
    c.conn.send_headers(1, 200, &mut std::iter::empty(), true);
    assert!(c.frames().is_empty(), "nothing is sent on a reset stream");
}

#[test]
fn goaway_names_the_last_stream_taken_and_later_streams_are_refused() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.send(&headers(3, &post_block(None), false)).unwrap();
    c.events();
    c.conn.goaway(ErrorCode::NoError);
    let f = c.one(kind::GOAWAY);
    assert_eq!(frame::read_u32(&f.payload), 3);
    assert_eq!(f.code(), ErrorCode::NoError);
    c.send(&headers(5, &get_block(), true)).unwrap();
    c.send(&data(5, b"x", false)).unwrap();
    c.send(&data(3, b"body", true)).unwrap();
    assert_eq!(
        c.events(),
        [Ev::Data(3, b"body".to_vec(), true)],
        "stream 5 not taken"
    );
    // Refused, so the client knows it may retry it elsewhere; its DATA is
    // then ignored.
    let f = c.one(kind::RST_STREAM);
    assert_eq!((f.stream, f.code()), (5, ErrorCode::RefusedStream));

    // A connection error's GOAWAY names the last stream too.
    c.expect_goaway(&frame(kind::PING, 0, 0, b"1"), ErrorCode::FrameSizeError);
}

#[test]
fn a_graceful_goaway_takes_the_streams_sent_before_it_and_the_ping_ack_ends_them() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.events();
    c.frames();
    c.conn.goaway_gracefully();
    let f = c.frames();
    assert_eq!((f[0].kind, f[1].kind), (kind::GOAWAY, kind::PING), "{f:?}");
    assert_eq!(frame::read_u32(&f[0].payload), frame::MAX_STREAM_ID);
    assert_eq!(f[0].code(), ErrorCode::NoError);
    assert!(!c.conn.shutdown_complete());
    c.conn.goaway_gracefully();
    assert!(c.frames().is_empty(), "one shutdown at a time");
    // A stream the client opened before it read the GOAWAY is taken.
    c.send(&headers(3, &get_block(), true)).unwrap();
    assert_eq!(c.events().len(), 1, "stream 3 taken");
    assert!(c.frames().is_empty());
    // An ack of another PING changes nothing.
    c.send(&frame(kind::PING, flag::ACK, 0, b"whatever"))
        .unwrap();
    assert!(c.frames().is_empty());
    assert!(!c.conn.shutdown_complete());
    // The ack of the shutdown's PING: the final GOAWAY names stream 3.
    c.send(&frame(kind::PING, flag::ACK, 0, &f[1].payload))
        .unwrap();
    let g = c.one(kind::GOAWAY);
    assert_eq!(frame::read_u32(&g.payload), 3);
    assert!(c.conn.shutdown_complete());
    c.send(&headers(5, &get_block(), true)).unwrap();
    assert!(c.events().is_empty(), "stream 5 not taken");
    assert_eq!(c.one(kind::RST_STREAM).code(), ErrorCode::RefusedStream);
}

#[test]
fn a_graceful_goaway_whose_ping_is_never_acked_ends_when_the_driver_says() {
    let mut c = Client::new(limits());
    c.conn.goaway_gracefully();
    c.frames();
    c.send(&headers(1, &get_block(), true)).unwrap();
    assert_eq!(c.events().len(), 1);
    c.conn.goaway(ErrorCode::NoError);
    let g = c.one(kind::GOAWAY);
    assert_eq!(frame::read_u32(&g.payload), 1);
    assert!(c.conn.shutdown_complete());
    // A late ack brings no second final GOAWAY.
    c.send(&frame(kind::PING, flag::ACK, 0, b"pier-end"))
        .unwrap();
    assert!(c.frames().is_empty());
}

#[test]
fn a_large_response_head_spans_continuations() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    let long = vec![b'v'; 20_000];
    let mut fields = [(&b"x-long"[..], &long[..])].into_iter();
    c.conn.send_headers(1, 103, &mut std::iter::empty(), true);
    c.conn.send_headers(1, 200, &mut fields, true);
    let f = c.frames();
    assert_eq!(
        f[0].flags,
        flag::END_HEADERS,
        "a 1xx head never ends the stream"
    );
    assert_eq!(
        (f[1].kind, f[1].flags, f[1].payload.len()),
        (kind::HEADERS, flag::END_STREAM, 16_384)
    );
    assert_eq!(
        (f[2].kind, f[2].flags),
        (kind::CONTINUATION, flag::END_HEADERS)
    );
    assert_eq!(c.conn.open_streams(), 0);
}

#[test]
fn output_is_consumed_in_pieces_and_idle_buffers_freed() {
    let mut c = Client::new(limits());
    c.send(&frame(kind::PING, 0, 0, b"abcdefgh")).unwrap();
    let all = c.conn.output().to_vec();
    c.conn.consume_output(5);
    assert_eq!(c.conn.output(), &all[5..]);
    c.conn.release_idle_buffers();
    assert_eq!(c.conn.output(), &all[5..], "kept while not written");
    c.conn.consume_output(all.len() - 5);
    assert!(c.conn.output().is_empty());
    c.conn.release_idle_buffers();
    assert_eq!(c.conn.core.out.capacity(), 0);
    assert_eq!(c.conn.core.block.capacity(), 0);

    // A finished request leaves nothing allocated but the HPACK tables.
    let b = get_block();
    let mut bytes = frame(kind::HEADERS, flag::END_STREAM, 1, &b[..5]);
    bytes.extend(frame(kind::CONTINUATION, flag::END_HEADERS, 1, &b[5..]));
    c.send(&bytes).unwrap();
    c.conn.release_idle_buffers();
    assert!(
        c.conn.head.path().is_some(),
        "kept while the stream is open"
    );
    c.conn.send_headers(1, 204, &mut std::iter::empty(), true);
    c.frames();
    c.conn.release_idle_buffers();
    assert_eq!(c.conn.core.out.capacity(), 0);
    assert_eq!(c.conn.core.block.capacity(), 0);
    assert!(c.conn.head.list.buffers_released());
    assert_eq!(c.conn.core.streams.capacity(), 0);
}

#[test]
fn a_smaller_stream_window_applies_once_the_settings_are_acknowledged() {
    let mut l = limits();
    l.initial_stream_window = 1000;
    let mut c = Client::fresh(l);
    let mut hello = PREFACE.to_vec();
    hello.extend(settings(&[]));
    hello.extend(headers(1, &post_block(None), false));
    // Before the ACK the client may count on the default window.
    hello.extend(data(1, &[0; 2000], false));
    c.send(&hello).unwrap();
    c.frames();
    c.events();
    // After it the stream's window is 1000 - 2000: nothing more may come.
    c.send(&frame(kind::SETTINGS, flag::ACK, 0, &[])).unwrap();
    c.expect_reset(&data(1, b"x", false), 1, ErrorCode::FlowControlError);
}

#[test]
fn response_trailers_end_the_stream() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.conn.send_headers(1, 200, &mut std::iter::empty(), false);
    assert_eq!(c.conn.send_data(1, b"body", false), 4);
    let fields = [(&b"grpc-status"[..], &b"0"[..])];
    c.conn.send_trailers(1, &mut fields.into_iter());
    let f = c.frames();
    let t = &f[2];
    assert_eq!(
        (t.kind, t.flags),
        (kind::HEADERS, flag::END_HEADERS | flag::END_STREAM)
    );
    let mut got = Vec::new();
    crate::http2::hpack::Decoder::new(4096)
        .decode(&t.payload, &mut |n, v| got.push((n.to_vec(), v.to_vec())))
        .unwrap();
    assert_eq!(got, [(b"grpc-status".to_vec(), b"0".to_vec())]);
    assert_eq!(c.conn.open_streams(), 0);
    assert_eq!(c.conn.send_data(1, b"late", true), 0);
}

#[test]
fn owned_bodies_go_out_in_order_between_other_frames_and_resume_mid_piece() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.send(&headers(3, &get_block(), true)).unwrap();
    c.conn.send_headers(1, 200, &mut std::iter::empty(), false);
    c.conn.send_headers(3, 200, &mut std::iter::empty(), false);
    c.frames();
    c.events();
    let body: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
    assert_eq!(
        c.conn
            .send_data_owned(1, bytes::Bytes::from(body.clone()), false),
        40_000
    );
    // Frames queued after the body follow it.
    assert_eq!(c.conn.send_data(3, b"three", true), 5);
    assert_eq!(
        c.conn
            .send_data_owned(1, bytes::Bytes::from_static(b"end"), true),
        3
    );
    let all = c.output_bytes();
    assert_eq!(all.len(), c.conn.output_len());
    // Written in odd-sized steps: each step resumes where the last stopped.
    let mut written = Vec::new();
    while c.conn.output_len() > 0 {
        let run = c.conn.output();
        let n = run.len().min(7_777);
        written.extend_from_slice(&run[..n]);
        c.conn.consume_output(n);
    }
    assert_eq!(written, all);
    let mut frames = Vec::new();
    let mut at = 0;
    while at < all.len() {
        let h = FrameHead::parse(&all[at..]);
        frames.push((h.stream, h.len, h.flags & flag::END_STREAM != 0));
        at += 9 + h.len;
    }
    assert_eq!(
        frames,
        [
            (1, 16_384, false),
            (1, 16_384, false),
            (1, 7_232, false),
            (3, 5, true),
            (1, 3, true),
        ]
    );
    let mut got = Vec::new();
    let mut at = 0;
    while at < all.len() {
        let h = FrameHead::parse(&all[at..]);
        if h.stream == 1 {
            got.extend_from_slice(&all[at + 9..at + 9 + h.len]);
        }
        at += 9 + h.len;
    }
    assert_eq!(&got[..40_000], &body[..]);
    assert_eq!(&got[40_000..], b"end");
    c.conn.release_idle_buffers();
    assert_eq!(c.conn.output_len(), 0);
}

#[test]
fn interim_heads_carry_fields_precede_the_final_head_and_never_follow_it() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    let link = [(&b"link"[..], &b"</style.css>; rel=preload"[..])];
    c.conn.send_headers(1, 103, &mut link.into_iter(), false);
    c.conn.send_headers(1, 103, &mut link.into_iter(), true);
    c.conn.send_headers(1, 200, &mut std::iter::empty(), false);
    // After the final head, a late interim one is not sent.
    c.conn.send_headers(1, 103, &mut link.into_iter(), false);
    assert_eq!(c.conn.send_data(1, b"ok", true), 2);
    let f = c.frames();
    let kinds: Vec<_> = f.iter().map(|f| (f.kind, f.flags)).collect();
    assert_eq!(
        kinds,
        [
            (kind::HEADERS, flag::END_HEADERS),
            (kind::HEADERS, flag::END_HEADERS),
            (kind::HEADERS, flag::END_HEADERS),
            (kind::DATA, flag::END_STREAM),
        ],
        "no interim head ends the stream"
    );
    // One decoder for the connection's blocks, in order (its table is shared).
    let mut decoder = crate::http2::hpack::Decoder::new(4096);
    let mut heads = Vec::new();
    for h in &f[..3] {
        let mut got = Vec::new();
        decoder
            .decode(&h.payload, &mut |n, v| got.push((n.to_vec(), v.to_vec())))
            .unwrap();
        heads.push(got);
    }
    let early = vec![
        (b":status".to_vec(), b"103".to_vec()),
        (b"link".to_vec(), b"</style.css>; rel=preload".to_vec()),
    ];
    assert_eq!(heads[0], early);
    assert_eq!(heads[1], early);
    assert_eq!(heads[2], [(b":status".to_vec(), b"200".to_vec())]);
    assert_eq!(c.conn.open_streams(), 0);
}

/// A request as [`RepeatRecorder`] notes it: stream, marked repeated,
/// `:path` and the fields, END_STREAM.
type Noted = (StreamId, bool, Vec<(Vec<u8>, Vec<u8>)>, bool);

/// Records each request's fields and whether the codec marked it as the
/// last request's head again.
#[derive(Default)]
struct RepeatRecorder(Vec<Noted>);

impl Events for RepeatRecorder {
    fn request(&mut self, stream: StreamId, head: &RequestHead, end_stream: bool) {
        let mut fields = vec![(b":path".to_vec(), head.path().unwrap_or(b"").to_vec())];
        fields.extend(owned(head));
        self.0.push((stream, head.repeated(), fields, end_stream));
    }
    fn data(&mut self, _: StreamId, _: &[u8], _: bool) {}
    fn trailers(&mut self, _: StreamId, _: &RequestHead) {}
    fn reset(&mut self, _: StreamId, _: ErrorCode) {}
    fn send_window(&mut self) {}
}

#[test]
fn a_repeated_request_block_is_delivered_as_the_same_head_and_marked() {
    let mut c = Client::new(limits());
    let mut r = RepeatRecorder::default();
    let mut send = |c: &mut Client, bytes: &[u8]| {
        let n = c.conn.receive(bytes, c.now, &mut r).unwrap();
        assert_eq!(n, bytes.len());
    };
    // Each request answered once its stream has ended, so the streams stay
    // within the limit.
    let answer = |c: &mut Client, id: StreamId| {
        assert!(c.conn.send_headers(id, 204, &mut std::iter::empty(), true));
    };
    let mut f = GET.to_vec();
    f.push(("accept", "*/*"));
    let same = block(&f);
    let mut other_fields = GET.to_vec();
    other_fields[3] = (":path", "/other");
    let other = block(&other_fields);
    send(&mut c, &headers(1, &same, true));
    answer(&mut c, 1);
    send(&mut c, &headers(3, &same, true));
    answer(&mut c, 3);
    send(&mut c, &headers(5, &same, false));
    // Trailers decode into the codec's head: the next request is new.
    send(&mut c, &headers(5, &block(&[("x-trailer", "1")]), true));
    answer(&mut c, 5);
    for (id, b) in [(7, &same), (9, &other), (11, &same), (13, &same)] {
        send(&mut c, &headers(id, b, true));
        answer(&mut c, id);
    }
    let path = |p: &str| (b":path".to_vec(), p.as_bytes().to_vec());
    let want_same = vec![path("/"), (b"accept".to_vec(), b"*/*".to_vec())];
    let want_other = vec![path("/other")];
    let got: Vec<_> =
        r.0.iter()
            .map(|(s, rep, f, end)| (*s, *rep, f.clone(), *end))
            .collect();
    assert_eq!(
        got,
        [
            (1, false, want_same.clone(), true),
            (3, true, want_same.clone(), true),
            (5, true, want_same.clone(), false),
            (7, false, want_same.clone(), true),
            (9, false, want_other, true),
            (11, false, want_same.clone(), true),
            (13, true, want_same, true),
        ]
    );
}

#[test]
fn a_small_body_goes_at_once_only_when_all_of_it_may() {
    let mut c = Client::new(limits());
    // The client's stream window: 10 bytes.
    c.send(&settings(&[(4, 10)])).unwrap();
    c.frames();
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.send(&headers(3, &get_block(), true)).unwrap();
    assert!(
        !c.conn.send_data_at_once(1, b"hello", 1 << 20),
        "no head yet"
    );
    assert!(c.conn.send_headers(1, 200, &mut std::iter::empty(), false));
    assert!(c.conn.send_headers(3, 200, &mut std::iter::empty(), false));
    c.frames();
    // Past the window, or past the room in the output: nothing queued, the
    // window untouched.
    assert!(!c.conn.send_data_at_once(1, b"hello world", 1 << 20));
    assert!(!c.conn.send_data_at_once(1, b"hello", 4));
    assert!(c.output_bytes().is_empty());
    assert_eq!(c.conn.send_capacity(1), 10);
    // Within both: one DATA that ends the stream.
    assert!(c.conn.send_data_at_once(1, b"hello", 5));
    let f = c.frames();
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f[0].kind, f[0].flags, f[0].stream),
        (kind::DATA, flag::END_STREAM, 1)
    );
    assert_eq!(f[0].payload, b"hello");
    assert_eq!(c.conn.open_streams(), 1, "stream 1 ended, 3 goes on");
    assert!(!c.conn.send_data_at_once(1, b"again", 1 << 20), "ended");
    assert!(c.conn.send_data_at_once(3, b"0123456789", 1 << 20));
    assert_eq!(c.conn.open_streams(), 0);
}

#[test]
fn a_small_body_goes_at_once_only_within_the_connections_window() {
    let mut c = Client::fresh(limits());
    let mut hello = PREFACE.to_vec();
    // Large stream windows; the connection's stays at 65,535.
    hello.extend(settings(&[(4, 1 << 20)]));
    hello.extend(frame(kind::SETTINGS, flag::ACK, 0, &[]));
    c.send(&hello).unwrap();
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.send(&headers(3, &get_block(), true)).unwrap();
    assert!(c.conn.send_headers(1, 200, &mut std::iter::empty(), false));
    assert!(c.conn.send_headers(3, 200, &mut std::iter::empty(), false));
    let spend = vec![0; 65_532];
    assert_eq!(c.conn.grant_send(1, spend.len(), usize::MAX), spend.len());
    assert_eq!(c.conn.send_data(1, &spend, false), spend.len());
    c.frames();
    assert!(!c.conn.send_data_at_once(3, b"hello", 1 << 20));
    assert!(c.output_bytes().is_empty());
    assert_eq!(c.conn.send_capacity(3), 3);
    assert!(c.conn.send_data_at_once(3, b"hey", 1 << 20));
    let f = c.frames();
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f[0].kind, f[0].flags, f[0].stream, &f[0].payload[..]),
        (kind::DATA, flag::END_STREAM, 3, &b"hey"[..])
    );
    assert_eq!(
        c.conn.send_capacity(1),
        0,
        "the connection's window is spent"
    );
    assert_eq!(c.conn.open_streams(), 1);
}
