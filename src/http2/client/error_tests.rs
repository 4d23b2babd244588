//! The error rules of RFC 9113 facing an origin and the defences against a
//! hostile one, each made to happen with raw frames and checked for its
//! answer: malformed responses reset their stream and never reach the
//! caller; frames on streams we did not open end the connection; the
//! flood budgets end it as they do facing a client.

use std::time::Duration;

use super::tests::*;
use super::*;
use crate::http2::frame::{self, flag, kind, setting};

/// A named malformed head: its fields, and whether HEADERS ends the stream.
type Case = (&'static str, &'static [(&'static str, &'static str)], bool);

/// A connection with one GET open (stream 1).
fn with_get() -> Origin {
    let mut l = limits();
    l.max_error_resets = 100;
    let mut o = Origin::new(l);
    o.open("GET", true);
    o
}

#[test]
fn the_first_frame_must_be_settings() {
    let mut o = Origin::fresh(limits());
    o.frames();
    o.expect_goaway(
        &frame(kind::PING, 0, 0, b"12345678"),
        ErrorCode::ProtocolError,
    );
    let mut o = Origin::fresh(limits());
    o.frames();
    o.expect_goaway(
        &frame(kind::SETTINGS, flag::ACK, 0, &[]),
        ErrorCode::ProtocolError,
    );
}

#[test]
fn malformed_response_heads_reset_the_stream_and_are_never_delivered() {
    let cases: &[Case] = &[
        ("no :status", &[("a", "b")], false),
        (
            ":status twice",
            &[(":status", "200"), (":status", "204")],
            false,
        ),
        (":status of two digits", &[(":status", "20")], false),
        (":status not a number", &[(":status", "abc")], false),
        ("101", &[(":status", "101")], false),
        (
            "interim head ending the stream",
            &[(":status", "103")],
            true,
        ),
        (
            "request pseudo field",
            &[(":status", "200"), (":path", "/")],
            false,
        ),
        (
            "unknown pseudo field",
            &[(":status", "200"), (":x", "1")],
            false,
        ),
        (
            "pseudo after regular",
            &[("a", "b"), (":status", "200")],
            false,
        ),
        (
            "uppercase name",
            &[(":status", "200"), ("Server", "x")],
            false,
        ),
        (
            "connection",
            &[(":status", "200"), ("connection", "close")],
            false,
        ),
        (
            "keep-alive",
            &[(":status", "200"), ("keep-alive", "5")],
            false,
        ),
        (
            "proxy-connection",
            &[(":status", "200"), ("proxy-connection", "x")],
            false,
        ),
        (
            "transfer-encoding",
            &[(":status", "200"), ("transfer-encoding", "chunked")],
            false,
        ),
        ("upgrade", &[(":status", "200"), ("upgrade", "h2c")], false),
        (
            "te other than trailers",
            &[(":status", "200"), ("te", "gzip")],
            false,
        ),
        (
            "content-length not a number",
            &[(":status", "200"), ("content-length", "x")],
            false,
        ),
        (
            "content-length without a body",
            &[(":status", "200"), ("content-length", "3")],
            true,
        ),
        ("LF in a value", &[(":status", "200"), ("a", "b\nc")], false),
    ];
    for (name, fields, end_stream) in cases {
        let mut o = with_get();
        o.send(&headers(1, &block(fields), *end_stream)).unwrap();
        let f = o.frames();
        assert!(
            f.len() == 1
                && f[0].kind == kind::RST_STREAM
                && f[0].code() == ErrorCode::ProtocolError,
            "case {name:?}: {f:?}"
        );
        assert_eq!(
            o.events(),
            [Ev::Reset(1, ErrorCode::ProtocolError)],
            "case {name:?}"
        );
        assert_eq!(o.conn.open_streams(), 0, "case {name:?}");
    }
    // A self-dependent priority in the response's HEADERS.
    let mut o = with_get();
    let mut prio = vec![0, 0, 0, 1, 255];
    prio.extend(response_block("200", &[]));
    let h = frame(kind::HEADERS, flag::END_HEADERS | flag::PRIORITY, 1, &prio);
    o.expect_reset(&h, 1, ErrorCode::ProtocolError);
}

#[test]
fn response_bodies_are_held_to_their_content_length() {
    // Longer than announced.
    let mut o = with_get();
    o.send(&headers(
        1,
        &response_block("200", &[("content-length", "3")]),
        false,
    ))
    .unwrap();
    o.events();
    o.expect_reset(&data(1, b"abcd", false), 1, ErrorCode::ProtocolError);
    // Shorter, ended.
    let mut o = with_get();
    o.send(&headers(
        1,
        &response_block("200", &[("content-length", "3")]),
        false,
    ))
    .unwrap();
    o.send(&data(1, b"ab", false)).unwrap();
    o.events();
    o.expect_reset(&data(1, b"", true), 1, ErrorCode::ProtocolError);
    // Shorter, ended by trailers.
    let mut o = with_get();
    o.send(&headers(
        1,
        &response_block("200", &[("content-length", "3")]),
        false,
    ))
    .unwrap();
    o.send(&data(1, b"ab", false)).unwrap();
    o.events();
    o.expect_reset(
        &headers(1, &block(&[("grpc-status", "0")]), true),
        1,
        ErrorCode::ProtocolError,
    );
    // Exact.
    let mut o = with_get();
    o.send(&headers(
        1,
        &response_block("200", &[("content-length", "3")]),
        false,
    ))
    .unwrap();
    o.send(&data(1, b"abc", true)).unwrap();
    assert_eq!(o.events()[1], Ev::Data(1, b"abc".to_vec(), true));

    // A response to HEAD, a 204 and a 304 have no content whatever their
    // content-length says (RFC 9110 §6.4.1).
    let mut o = Origin::new(limits());
    let head = o.open("HEAD", true);
    o.send(&headers(
        head,
        &response_block("200", &[("content-length", "100")]),
        true,
    ))
    .unwrap();
    assert!(matches!(
        o.events()[..],
        [Ev::Response {
            end_stream: true,
            ..
        }]
    ));
    let head = o.open("HEAD", true);
    o.send(&headers(
        head,
        &response_block("200", &[("content-length", "2")]),
        false,
    ))
    .unwrap();
    o.events();
    o.expect_reset(&data(head, b"ab", true), head, ErrorCode::ProtocolError);
    let get = o.open("GET", true);
    o.send(&headers(
        get,
        &response_block("304", &[("content-length", "9")]),
        false,
    ))
    .unwrap();
    o.send(&data(get, b"", true)).unwrap();
    assert_eq!(o.events()[1], Ev::Data(get, vec![], true));
    let get = o.open("GET", true);
    o.send(&headers(get, &response_block("204", &[]), false))
        .unwrap();
    o.events();
    o.expect_reset(&data(get, b"x", true), get, ErrorCode::ProtocolError);
}

#[test]
fn data_before_the_final_head_and_bad_trailers_reset_the_stream() {
    let mut o = with_get();
    o.expect_reset(&data(1, b"x", false), 1, ErrorCode::ProtocolError);
    let mut o = with_get();
    o.send(&headers(1, &response_block("103", &[]), false))
        .unwrap();
    o.events();
    o.expect_reset(&data(1, b"x", false), 1, ErrorCode::ProtocolError);

    for (name, trailers, end_stream) in [
        ("trailers without END_STREAM", block(&[("a", "b")]), false),
        (
            "pseudo field in trailers",
            block(&[(":status", "200")]),
            true,
        ),
        (
            "connection field in trailers",
            block(&[("connection", "x")]),
            true,
        ),
    ] {
        let mut o = with_get();
        o.send(&headers(1, &response_block("200", &[]), false))
            .unwrap();
        o.events();
        o.send(&headers(1, &trailers, end_stream)).unwrap();
        assert_eq!(
            o.one(kind::RST_STREAM).code(),
            ErrorCode::ProtocolError,
            "{name}"
        );
        assert_eq!(
            o.events(),
            [Ev::Reset(1, ErrorCode::ProtocolError)],
            "{name}"
        );
    }
}

#[test]
fn oversized_heads_and_endless_interim_heads_reset_the_stream() {
    let mut l = limits();
    l.max_header_list_size = 300;
    let mut o = Origin::new(l);
    o.open("GET", true);
    let long = "v".repeat(300);
    o.expect_reset(
        &headers(1, &response_block("200", &[("x-long", &long)]), true),
        1,
        ErrorCode::ProtocolError,
    );
    let mut l = limits();
    l.max_header_fields = 3;
    let mut o = Origin::new(l);
    o.open("GET", true);
    let many = [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")];
    o.expect_reset(
        &headers(1, &response_block("200", &many), true),
        1,
        ErrorCode::ProtocolError,
    );
    // Oversized trailers too.
    let mut l = limits();
    l.max_header_fields = 3;
    let mut o = Origin::new(l);
    o.open("GET", true);
    o.send(&headers(1, &response_block("200", &[]), false))
        .unwrap();
    o.events();
    o.expect_reset(
        &headers(1, &block(&many), true),
        1,
        ErrorCode::ProtocolError,
    );

    let mut o = with_get();
    let early = headers(1, &response_block("103", &[("link", "</a>")]), false);
    for _ in 0..8 {
        o.send(&early).unwrap();
    }
    assert_eq!(o.events().len(), 8);
    o.expect_reset(&early, 1, ErrorCode::ProtocolError);
}

#[test]
fn frames_the_origin_may_not_send_end_the_connection() {
    for (name, bytes) in [
        (
            "a response to a stream never opened",
            headers(3, &response_block("200", &[]), true),
        ),
        (
            "a stream the origin opened",
            headers(2, &response_block("200", &[]), true),
        ),
        (
            "PUSH_PROMISE",
            frame(kind::PUSH_PROMISE, flag::END_HEADERS, 1, &[0, 0, 0, 2]),
        ),
        ("DATA on an idle stream", data(3, b"x", false)),
        ("DATA on an even stream", data(2, b"x", false)),
        (
            "RST_STREAM on an idle stream",
            frame(kind::RST_STREAM, 0, 3, &[0, 0, 0, 8]),
        ),
        ("WINDOW_UPDATE on an even stream", window_update(2, 1)),
        ("ENABLE_PUSH=1", settings(&[(setting::ENABLE_PUSH, 1)])),
        ("ENABLE_PUSH=2", settings(&[(setting::ENABLE_PUSH, 2)])),
        (
            "MAX_FRAME_SIZE too small",
            settings(&[(setting::MAX_FRAME_SIZE, 100)]),
        ),
        (
            "a frame over our max frame size",
            data(1, &[0; 16_385], false),
        ),
        ("PING of 7 bytes", frame(kind::PING, 0, 0, b"1234567")),
        (
            "a header block that does not decode",
            headers(1, &[0x80], true),
        ),
        (
            "CONTINUATION without HEADERS",
            frame(kind::CONTINUATION, flag::END_HEADERS, 1, &[]),
        ),
    ] {
        let mut o = with_get();
        let code = match name {
            "a frame over our max frame size" | "PING of 7 bytes" => ErrorCode::FrameSizeError,
            "a header block that does not decode" => ErrorCode::CompressionError,
            _ => ErrorCode::ProtocolError,
        };
        assert_eq!(o.send(&bytes), Err(ConnError { code }), "{name}");
        let f = o.frames();
        assert_eq!(
            f.last().map(|f| (f.kind, f.code())),
            Some((kind::GOAWAY, code)),
            "{name}"
        );
        assert!(!o.conn.can_open(), "{name}");
        assert_eq!(
            o.conn
                .open_stream(b"GET", b"https", b"a", b"/", &mut std::iter::empty(), true),
            Err(OpenError::Closed)
        );
    }
}

#[test]
fn frames_on_streams_we_closed() {
    // After our reset, the origin's frames in flight are dropped; the
    // connection window still counts and reopens.
    let mut l = limits();
    l.initial_connection_window = 65_535;
    let mut o = Origin::new(l);
    let id = o.open("GET", true);
    o.send(&headers(id, &response_block("200", &[]), false))
        .unwrap();
    o.conn.reset_stream(id, ErrorCode::Cancel);
    let f = o.one(kind::RST_STREAM);
    assert_eq!((f.stream, f.code()), (id, ErrorCode::Cancel));
    for _ in 0..3 {
        o.send(&data(id, &[0; 11_000], false)).unwrap();
    }
    o.send(&headers(id, &block(&[("grpc-status", "0")]), true))
        .unwrap();
    o.send(&frame(kind::RST_STREAM, 0, id, &[0, 0, 0, 0]))
        .unwrap();
    let f = o.one(kind::WINDOW_UPDATE);
    assert_eq!((f.stream, frame::read_u32(&f.payload)), (0, 33_000));
    assert_eq!(
        o.events(),
        [Ev::Response {
            stream: id,
            status: 200,
            fields: vec![],
            end_stream: false
        }]
    );

    // DATA after the origin ended the stream: STREAM_CLOSED.
    let mut o = with_get();
    o.send(&headers(1, &response_block("200", &[]), true))
        .unwrap();
    o.events();
    o.send(&data(1, b"x", false)).unwrap();
    let f = o.one(kind::RST_STREAM);
    assert_eq!((f.stream, f.code()), (1, ErrorCode::StreamClosed));
    assert!(o.events().is_empty(), "the stream was already done");
}

#[test]
fn frames_in_flight_for_every_stream_we_cancelled_at_once_are_dropped() {
    // A client with 40 calls open goes away: the proxy cancels all 40, and
    // the origin's answers already on their way arrive after. None of them
    // is an error of the origin's, and the pooled connection lives on.
    let mut l = limits();
    l.max_concurrent_streams = 64;
    l.max_error_resets = 4;
    let mut o = Origin::new(l);
    let ids: Vec<StreamId> = (0..40).map(|_| o.open("GET", true)).collect();
    o.frames();
    for &id in &ids {
        o.conn.reset_stream(id, ErrorCode::Cancel);
    }
    assert_eq!(o.frames().len(), 40, "a CANCEL for each");
    for &id in &ids {
        o.send(&headers(id, &response_block("200", &[]), false))
            .unwrap();
        o.send(&data(id, b"late", true)).unwrap();
    }
    let resets: Vec<_> = o
        .frames()
        .into_iter()
        .filter(|f| f.kind == kind::RST_STREAM || f.kind == kind::GOAWAY)
        .collect();
    assert!(resets.is_empty(), "{resets:?}");
    assert!(o.events().is_empty());
    assert!(o.conn.can_open(), "the connection takes new streams");
}

#[test]
fn the_origins_settings_move_windows_frame_size_and_table_size() {
    let mut o = Origin::new(limits());
    let id = o.open("POST", false);
    assert_eq!(o.conn.send_data(id, &[0; 1000], false), 1000);
    o.send(&settings(&[(setting::INITIAL_WINDOW_SIZE, 500)]))
        .unwrap();
    assert_eq!(o.conn.send_capacity(id), 0, "window is 500 - 1000 < 0");
    o.send(&window_update(id, 600)).unwrap();
    assert_eq!(o.conn.send_capacity(id), 100);
    o.events();
    o.send(&settings(&[(setting::INITIAL_WINDOW_SIZE, 1500)]))
        .unwrap();
    assert_eq!(o.conn.send_capacity(id), 1100);
    assert_eq!(o.events(), [Ev::SendWindow, Ev::Settings]);

    // DATA is cut to the origin's frame size.
    o.send(&settings(&[
        (setting::MAX_FRAME_SIZE, 20_000),
        (setting::INITIAL_WINDOW_SIZE, 100_000),
    ]))
    .unwrap();
    o.send(&window_update(0, 100_000)).unwrap();
    o.frames();
    assert_eq!(o.conn.send_data(id, &[1; 50_000], true), 50_000);
    let sizes: Vec<usize> = o.frames().iter().map(|f| f.payload.len()).collect();
    assert_eq!(sizes, [20_000, 20_000, 10_000]);

    // A smaller HPACK table: the next head starts with the size update.
    o.send(&settings(&[(setting::HEADER_TABLE_SIZE, 0)]))
        .unwrap();
    o.frames();
    o.conn
        .open_stream(b"GET", b"https", b"a", b"/", &mut std::iter::empty(), true)
        .unwrap();
    let f = o.one(kind::HEADERS);
    assert_eq!(f.payload[0], 0x20, "size update to 0: {:02x?}", f.payload);

    // Window overflows.
    let mut o = Origin::new(limits());
    let id = o.open("POST", false);
    o.expect_reset(
        &window_update(id, (1 << 31) - 65_535),
        id,
        ErrorCode::FlowControlError,
    );
    o.expect_goaway(
        &window_update(0, (1 << 31) - 65_535),
        ErrorCode::FlowControlError,
    );
    let mut o = Origin::new(limits());
    let id = o.open("POST", false);
    o.send(&window_update(id, frame::MAX_WINDOW as u32 - 65_535))
        .unwrap();
    o.expect_goaway(
        &settings(&[(setting::INITIAL_WINDOW_SIZE, 65_536)]),
        ErrorCode::FlowControlError,
    );
}

#[test]
fn our_receive_windows_are_enforced_and_reopened_by_release() {
    let mut l = limits();
    l.initial_stream_window = 1000;
    l.initial_connection_window = 65_535;
    let mut o = Origin::new(l);
    let id = o.open("GET", true);
    o.send(&headers(id, &response_block("200", &[]), false))
        .unwrap();
    o.send(&data(id, &[b'a'; 600], false)).unwrap();
    o.conn.release(id, 600);
    let f = o.one(kind::WINDOW_UPDATE);
    assert_eq!((f.stream, frame::read_u32(&f.payload)), (id, 600));
    o.send(&data(id, &[b'b'; 1000], false)).unwrap();
    o.events();
    o.expect_reset(&data(id, b"x", false), id, ErrorCode::FlowControlError);
}

#[test]
fn a_goaway_refuses_unprocessed_streams_and_may_only_lower_its_last() {
    let mut o = Origin::new(limits());
    let (a, b, c) = (
        o.open("GET", true),
        o.open("GET", true),
        o.open("GET", true),
    );
    let mut g = 3u32.to_be_bytes().to_vec();
    g.extend(0u32.to_be_bytes());
    o.send(&frame(kind::GOAWAY, 0, 0, &g)).unwrap();
    assert_eq!(
        o.events(),
        [
            Ev::GoAway(b, ErrorCode::NoError),
            Ev::Reset(c, ErrorCode::RefusedStream)
        ]
    );
    assert_eq!(o.conn.open_streams(), 2);
    let mut g = 9u32.to_be_bytes().to_vec();
    g.extend(2u32.to_be_bytes());
    g.extend(b"debug data");
    o.send(&frame(kind::GOAWAY, 0, 0, &g)).unwrap();
    assert_eq!(o.events(), [Ev::GoAway(b, ErrorCode::InternalError)]);
    o.send(&headers(a, &response_block("200", &[]), true))
        .unwrap();
    assert_eq!(o.events().len(), 1, "streams under the last one finish");
    assert!(!o.conn.is_closed());
    o.send(&frame(kind::RST_STREAM, 0, b, &[0, 0, 0, 8]))
        .unwrap();
    assert!(o.conn.is_closed());
}

#[test]
fn ping_and_settings_floods_end_the_connection() {
    let mut o = Origin::new(limits());
    // `Origin::new` spent one token on its SETTINGS.
    for _ in 0..9 {
        o.send(&frame(kind::PING, 0, 0, b"abcdefgh")).unwrap();
    }
    assert_eq!(o.frames().len(), 9);
    o.expect_goaway(
        &frame(kind::PING, 0, 0, b"abcdefgh"),
        ErrorCode::EnhanceYourCalm,
    );

    let mut o = Origin::new(limits());
    o.now += Duration::from_secs(1);
    // Refilled by one (a tenth of 10) a second: 10 in all.
    for _ in 0..10 {
        o.send(&settings(&[])).unwrap();
    }
    o.expect_goaway(&settings(&[]), ErrorCode::EnhanceYourCalm);
}

#[test]
fn empty_frame_floods_end_the_connection() {
    let mut o = with_get();
    o.send(&headers(1, &response_block("200", &[]), false))
        .unwrap();
    for _ in 0..10 {
        o.send(&data(1, b"", false)).unwrap();
    }
    o.expect_goaway(&data(1, b"", false), ErrorCode::EnhanceYourCalm);

    let mut o = with_get();
    o.send(&headers(1, &response_block("200", &[]), false))
        .unwrap();
    for _ in 0..10 {
        o.send(&frame(kind::DATA, flag::PADDED, 1, &[0])).unwrap();
    }
    o.expect_goaway(
        &frame(kind::DATA, flag::PADDED, 1, &[1, 0]),
        ErrorCode::EnhanceYourCalm,
    );

    let mut o = with_get();
    let mut b = frame(kind::HEADERS, 0, 1, &response_block("200", &[]));
    for _ in 0..10 {
        b.extend(frame(kind::CONTINUATION, 0, 1, &[]));
    }
    o.send(&b).unwrap();
    o.expect_goaway(
        &frame(kind::CONTINUATION, 0, 1, &[]),
        ErrorCode::EnhanceYourCalm,
    );
}

#[test]
fn a_continuation_flood_ends_the_connection() {
    let mut l = limits();
    l.max_header_list_size = 16_384;
    let mut o = Origin::new(l);
    o.open("GET", true);
    o.send(&frame(kind::HEADERS, 0, 1, &[0; 16_000])).unwrap();
    o.send(&frame(kind::CONTINUATION, 0, 1, &[0; 16_000]))
        .unwrap();
    o.expect_goaway(
        &frame(kind::CONTINUATION, 0, 1, &[0; 1000]),
        ErrorCode::EnhanceYourCalm,
    );
}

#[test]
fn inert_frame_floods_end_the_connection() {
    // `limits()` allows 20 inert frames at once; opening a stream earns one.
    for (name, inert) in [
        ("PRIORITY", frame(kind::PRIORITY, 0, 1, &[0, 0, 0, 0, 16])),
        ("WINDOW_UPDATE", window_update(0, 1)),
        (
            "PING ack of nothing",
            frame(kind::PING, flag::ACK, 0, b"abcdefgh"),
        ),
        ("SETTINGS ack", frame(kind::SETTINGS, flag::ACK, 0, &[])),
        ("unknown type", frame(0x42, 0, 0, b"x")),
    ] {
        let mut o = with_get();
        for _ in 0..21 {
            o.send(&inert).unwrap();
        }
        assert!(o.frames().is_empty(), "{name} makes no output");
        o.expect_goaway(&inert, ErrorCode::EnhanceYourCalm);
    }

    // RST_STREAM on a stream already closed, in a loop.
    let mut o = with_get();
    o.send(&headers(1, &response_block("204", &[]), true))
        .unwrap();
    let rst = frame(kind::RST_STREAM, 0, 1, &[0, 0, 0, 8]);
    for _ in 0..21 {
        o.send(&rst).unwrap();
    }
    o.expect_goaway(&rst, ErrorCode::EnhanceYourCalm);
}

#[test]
fn an_upload_answered_by_a_window_update_per_data_frame_is_never_cut_off() {
    let mut o = Origin::new(limits());
    let id = o.open("POST", false);
    let body = vec![7u8; 64_000];
    let mut data_frames = 0;
    // 500 rounds at one instant, so the bucket never refills: only the DATA
    // sent pays for the updates.
    for _ in 0..500 {
        assert_eq!(o.conn.send_data(id, &body, false), body.len());
        let mut updates = Vec::new();
        for f in o.frames() {
            assert_eq!(f.kind, kind::DATA);
            let n = f.payload.len() as u32;
            updates.extend(window_update(id, n));
            updates.extend(window_update(0, n));
            data_frames += 1;
        }
        o.send(&updates).unwrap();
    }
    assert_eq!(data_frames, 2000);
    assert_eq!(o.conn.send_data(id, b"end", true), 3);
}

#[test]
fn too_many_error_resets_end_the_connection() {
    let mut o = Origin::new(limits());
    let bad = response_block("200", &[("connection", "close")]);
    for _ in 0..5 {
        let id = o.open("GET", true);
        o.expect_reset(&headers(id, &bad, true), id, ErrorCode::ProtocolError);
    }
    let id = o.open("GET", true);
    o.expect_goaway(&headers(id, &bad, true), ErrorCode::EnhanceYourCalm);
}

#[test]
fn random_frames_never_panic_and_streams_stay_bounded() {
    // xorshift64*, seeded: the same frames on every run.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let blocks = [
        response_block("200", &[]),
        response_block("103", &[("link", "</a>")]),
        response_block("200", &[("content-length", "4")]),
        block(&[("grpc-status", "0")]),
        vec![0x80],
        vec![],
    ];
    // Mostly frames an origin would send, so connections live a while.
    let kinds = [0, 0, 0, 1, 1, 1, 3, 4, 6, 8, 8, 2, 7, 9, 10, 5];
    let mut l = limits();
    l.max_error_resets = 1000;
    let (mut frames, mut conns, mut delivered) = (0, 1, 0);
    let mut o = Origin::new(l.clone());
    while frames < 20_000 {
        let r = next();
        // The caller opens, sends, releases and cancels now and then.
        match next() % 8 {
            _ if o.conn.open_streams() == 0 && o.conn.can_open() => {
                o.conn
                    .open_stream(b"GET", b"https", b"a", b"/", &mut std::iter::empty(), true)
                    .unwrap();
            }
            0 if o.conn.can_open() => {
                o.conn
                    .open_stream(
                        b"POST",
                        b"https",
                        b"a",
                        b"/",
                        &mut std::iter::empty(),
                        false,
                    )
                    .unwrap();
            }
            1 => {
                o.conn.send_data(
                    o.conn.next_stream.saturating_sub(2),
                    b"body",
                    next() % 2 == 0,
                );
            }
            2 => o.conn.release(
                o.conn.next_stream.saturating_sub(2),
                (next() % 100) as usize,
            ),
            3 => o
                .conn
                .reset_stream(o.conn.next_stream.saturating_sub(2), ErrorCode::Cancel),
            _ => {}
        }
        // Now and then anything at all; mostly what an origin would send.
        let odd = r >> 59 == 0;
        let kind = kinds[(r % if odd { 16 } else { 12 }) as usize];
        let flags = if odd {
            (r >> 8) as u8
        } else {
            (r >> 8) as u8 & flag::END_STREAM | flag::END_HEADERS
        };
        let last = o.conn.next_stream.saturating_sub(2).max(1);
        let stream = match kind {
            _ if odd => (r >> 16) as u32 % 12,
            kind::SETTINGS | kind::PING | kind::GOAWAY => 0,
            kind::WINDOW_UPDATE if r >> 20 & 1 == 0 => 0,
            _ => last - 2 * ((r >> 21) as u32 % 2).min(last / 2),
        };
        let len = match kind {
            kind::SETTINGS => 6 * ((r >> 32) % 3),
            kind::PING => 8,
            kind::GOAWAY => 8 + (r >> 40) % 3,
            kind::PRIORITY => 5,
            kind::RST_STREAM | kind::WINDOW_UPDATE => 4,
            _ => (r >> 32) % 12,
        };
        let payload: Vec<u8> = match kind {
            kind::HEADERS | kind::CONTINUATION => blocks[(r >> 24) as usize % blocks.len()].clone(),
            kind::GOAWAY => {
                let mut g = ((r >> 44) as u32 % 16).to_be_bytes().to_vec();
                g.resize(len as usize, 0);
                g
            }
            _ => (0..len).map(|i| (next() >> i) as u8 & 0x3f).collect(),
        };
        frames += 1;
        let bytes = frame(kind, flags, stream, &payload);
        if o.conn.receive(&bytes, o.now, &mut o.events).is_err() || o.conn.is_closed() {
            o = Origin::new(l.clone());
            conns += 1;
            continue;
        }
        delivered += o.events().len();
        assert!(o.conn.open_streams() <= l.max_concurrent_streams as usize);
        if o.conn.output_len() > 64 * 1024 {
            o.frames();
        }
    }
    assert!(
        conns < 3000 && delivered > 5000,
        "{conns} connections, {delivered} events"
    );
}

#[test]
fn a_priority_update_from_the_origin_is_a_connection_error() {
    // RFC 9218 §7.1: servers never send it, and a client that receives
    // one answers with a connection error of type PROTOCOL_ERROR, whether
    // it names a stream we opened, one never opened, or carries junk.
    let payloads: [&[u8]; 3] = [
        b"\x00\x00\x00\x01u=0",
        b"\x00\x00\x00\x07u=3, i",
        b"\x00\x00\x00\x01((",
    ];
    for payload in payloads {
        let mut o = with_get();
        o.expect_goaway(
            &frame(kind::PRIORITY_UPDATE, 0, 0, payload),
            ErrorCode::ProtocolError,
        );
    }
}
