//! The error rules of RFC 9113 and the defences against floods, each made
//! to happen with raw frames and checked for its answer.

use std::time::Duration;

use super::tests::*;
use super::*;
use crate::http2::frame::{self, flag, kind, PREFACE};

#[test]
fn a_wrong_preface_ends_the_connection_without_goaway() {
    let mut c = Client::fresh(limits());
    c.frames();
    let r = c.conn.receive(b"GET / HTTP/1.1\r\n", c.now, &mut c.events);
    assert_eq!(
        r,
        Err(ConnError {
            code: ErrorCode::ProtocolError
        })
    );
    assert!(c.conn.output().is_empty());
}

#[test]
fn the_first_frame_must_be_settings() {
    let mut c = Client::fresh(limits());
    c.frames();
    let mut b = PREFACE.to_vec();
    b.extend(frame(kind::PING, 0, 0, b"12345678"));
    c.expect_goaway(&b, ErrorCode::ProtocolError);
}

#[test]
fn malformed_heads_reset_the_stream_and_are_never_delivered() {
    let mut l = limits();
    l.max_error_resets = 100;
    let mut c = Client::new(l);
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("uppercase name", &[("Accept", "x")]),
        ("connection field", &[("connection", "close")]),
        ("te gzip", &[("te", "gzip")]),
        ("content-length not a number", &[("content-length", "x")]),
        ("unknown pseudo field", &[(":foo", "x")]),
        ("CR in a value", &[("a", "b\rc")]),
    ];
    let mut id = 1;
    for (name, extra) in cases {
        let mut f = GET.to_vec();
        f.extend_from_slice(extra);
        c.send(&headers(id, &block(&f), true)).unwrap();
        let f = c.frames();
        assert!(
            f.len() == 1
                && f[0].kind == kind::RST_STREAM
                && f[0].code() == ErrorCode::ProtocolError,
            "case {name:?}: {f:?}"
        );
        assert!(c.events().is_empty(), "case {name:?} was delivered");
        id += 2;
    }
    for (name, fields) in [("no :path", &GET[..3]), ("no :method", &GET[1..])] {
        c.send(&headers(id, &block(fields), true)).unwrap();
        assert_eq!(
            c.one(kind::RST_STREAM).code(),
            ErrorCode::ProtocolError,
            "{name}"
        );
        id += 2;
    }
    let mut prio = vec![0, 0, 0, id as u8, 255];
    prio.extend(get_block());
    let h = frame(kind::HEADERS, flag::END_HEADERS | flag::PRIORITY, id, &prio);
    c.expect_reset(&h, id, ErrorCode::ProtocolError);
    assert!(
        c.events().is_empty(),
        "a self-dependent stream is not delivered"
    );
}

#[test]
fn ping_and_settings_floods_end_the_connection() {
    let mut c = Client::new(limits());
    // `Client::new` spent one token on its SETTINGS.
    for _ in 0..9 {
        c.send(&frame(kind::PING, 0, 0, b"abcdefgh")).unwrap();
    }
    let f = c.frames();
    assert_eq!(f.len(), 9);
    assert!(f
        .iter()
        .all(|f| f.flags == flag::ACK && f.payload == b"abcdefgh"));
    c.expect_goaway(
        &frame(kind::PING, 0, 0, b"abcdefgh"),
        ErrorCode::EnhanceYourCalm,
    );

    let mut c = Client::new(limits());
    c.now += Duration::from_secs(1);
    // Refilled by one (a tenth of 10) a second: 10 in all.
    for _ in 0..10 {
        c.send(&settings(&[])).unwrap();
    }
    c.send(&frame(kind::PING, flag::ACK, 0, b"abcdefgh"))
        .unwrap();
    c.expect_goaway(&settings(&[]), ErrorCode::EnhanceYourCalm);
}

#[test]
fn empty_frame_floods_end_the_connection() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &post_block(None), false)).unwrap();
    for _ in 0..10 {
        c.send(&data(1, b"", false)).unwrap();
    }
    c.expect_goaway(&data(1, b"", false), ErrorCode::EnhanceYourCalm);

    // DATA frames of padding only carry nothing either.
    let mut c = Client::new(limits());
    c.send(&headers(1, &post_block(None), false)).unwrap();
    for _ in 0..10 {
        c.send(&frame(kind::DATA, flag::PADDED, 1, &[0])).unwrap();
    }
    c.expect_goaway(
        &frame(kind::DATA, flag::PADDED, 1, &[1, 0]),
        ErrorCode::EnhanceYourCalm,
    );

    let mut c = Client::new(limits());
    let mut b = frame(kind::HEADERS, 0, 1, &get_block());
    for _ in 0..10 {
        b.extend(frame(kind::CONTINUATION, 0, 1, &[]));
    }
    c.send(&b).unwrap();
    c.expect_goaway(
        &frame(kind::CONTINUATION, 0, 1, &[]),
        ErrorCode::EnhanceYourCalm,
    );
}

#[test]
fn a_continuation_flood_ends_the_connection() {
    let mut l = limits();
    l.max_header_list_size = 16_384;
    let mut c = Client::new(l);
    c.send(&frame(kind::HEADERS, 0, 1, &[0; 16_000])).unwrap();
    c.send(&frame(kind::CONTINUATION, 0, 1, &[0; 16_000]))
        .unwrap();
    c.expect_goaway(
        &frame(kind::CONTINUATION, 0, 1, &[0; 1000]),
        ErrorCode::EnhanceYourCalm,
    );
}

#[test]
fn too_many_error_resets_end_the_connection() {
    let mut c = Client::new(limits());
    let mut bad = GET.to_vec();
    bad.push(("connection", "close"));
    for id in (1..10).step_by(2) {
        c.expect_reset(
            &headers(id, &block(&bad), true),
            id,
            ErrorCode::ProtocolError,
        );
    }
    c.expect_goaway(&headers(11, &block(&bad), true), ErrorCode::EnhanceYourCalm);
}

#[test]
fn continuation_sequencing() {
    let b = get_block();
    let open = frame(kind::HEADERS, flag::END_STREAM, 1, &b);
    let cases: [(&str, Vec<u8>); 5] = [
        ("PING inside a block", frame(kind::PING, 0, 0, b"abcdefgh")),
        (
            "CONTINUATION of another stream",
            frame(kind::CONTINUATION, flag::END_HEADERS, 3, &[]),
        ),
        ("unknown frame inside a block", frame(0x42, 0, 0, b"x")),
        ("DATA inside a block", data(1, b"x", false)),
        ("HEADERS inside a block", headers(3, &b, true)),
    ];
    for (name, second) in cases {
        let mut c = Client::new(limits());
        c.send(&open).unwrap();
        assert_eq!(
            c.send(&second),
            Err(ConnError {
                code: ErrorCode::ProtocolError
            }),
            "{name}"
        );
    }
    let mut c = Client::new(limits());
    c.expect_goaway(
        &frame(kind::CONTINUATION, flag::END_HEADERS, 1, &b),
        ErrorCode::ProtocolError,
    );
    let mut c = Client::new(limits());
    c.send(&headers(1, &b, true)).unwrap();
    c.expect_goaway(
        &frame(kind::CONTINUATION, flag::END_HEADERS, 1, &b),
        ErrorCode::ProtocolError,
    );
}

#[test]
fn unknown_frames_and_flags_are_ignored() {
    let mut c = Client::new(limits());
    c.send(&frame(0x42, 0xff, 0, b"whatever")).unwrap();
    c.send(&frame(0x42, 0, 7, b"")).unwrap();
    c.send(&frame(kind::PING, 0xf0, 0, b"abcdefgh")).unwrap();
    assert_eq!(c.one(kind::PING).flags, flag::ACK);
    c.send(&frame(
        kind::HEADERS,
        0xc0 | flag::END_HEADERS | flag::END_STREAM,
        1,
        &get_block(),
    ))
    .unwrap();
    assert_eq!(c.events().len(), 1);
}

#[test]
fn frames_on_closed_and_idle_streams() {
    // DATA on a stream the client ended: STREAM_CLOSED.
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.events();
    c.expect_reset(&data(1, b"x", true), 1, ErrorCode::StreamClosed);
    assert_eq!(c.events(), [Ev::Reset(1, ErrorCode::StreamClosed)]);

    // HEADERS on a stream the client ended, still open on our side.
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.expect_reset(&headers(1, &get_block(), true), 1, ErrorCode::StreamClosed);

    // On a stream both sides ended: DATA is a stream error, HEADERS a
    // connection error.
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.conn.send_headers(1, 204, &mut std::iter::empty(), true);
    c.frames();
    assert_eq!(c.conn.open_streams(), 0);
    c.expect_reset(&data(1, b"x", true), 1, ErrorCode::StreamClosed);
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.conn.send_headers(1, 204, &mut std::iter::empty(), true);
    c.expect_goaway(&headers(1, &get_block(), true), ErrorCode::StreamClosed);

    // A lower id than one used before.
    let mut c = Client::new(limits());
    c.send(&headers(5, &get_block(), true)).unwrap();
    c.expect_goaway(&headers(3, &get_block(), true), ErrorCode::ProtocolError);

    // After the server reset a stream, its frames are dropped (DATA
    // counted and released on the connection).
    let mut l = limits();
    l.initial_connection_window = 65_535;
    let mut c = Client::new(l);
    c.send(&headers(1, &post_block(None), false)).unwrap();
    c.conn.reset_stream(1, ErrorCode::Cancel);
    let f = c.one(kind::RST_STREAM);
    assert_eq!((f.stream, f.code()), (1, ErrorCode::Cancel));
    for _ in 0..3 {
        c.send(&data(1, &[0; 11_000], false)).unwrap();
    }
    c.send(&headers(1, &block(&[("a", "b")]), true)).unwrap();
    c.send(&window_update(1, 5)).unwrap();
    c.send(&frame(kind::RST_STREAM, 0, 1, &[0, 0, 0, 8]))
        .unwrap();
    let f = c.one(kind::WINDOW_UPDATE);
    assert_eq!((f.stream, frame::read_u32(&f.payload)), (0, 33_000));

    // Idle streams.
    for (name, bytes, code) in [
        ("DATA", data(1, b"x", false), ErrorCode::ProtocolError),
        (
            "RST_STREAM",
            frame(kind::RST_STREAM, 0, 1, &[0, 0, 0, 8]),
            ErrorCode::ProtocolError,
        ),
        (
            "WINDOW_UPDATE",
            window_update(1, 5),
            ErrorCode::ProtocolError,
        ),
        (
            "even HEADERS",
            headers(2, &get_block(), true),
            ErrorCode::ProtocolError,
        ),
        (
            "PUSH_PROMISE",
            frame(kind::PUSH_PROMISE, flag::END_HEADERS, 1, &[0, 0, 0, 2]),
            ErrorCode::ProtocolError,
        ),
    ] {
        let mut c = Client::new(limits());
        assert_eq!(c.send(&bytes), Err(ConnError { code }), "{name}");
    }
    let mut c = Client::new(limits());
    c.send(&frame(kind::PRIORITY, 0, 9, &[0, 0, 0, 1, 16]))
        .unwrap();
    assert!(c.frames().is_empty(), "PRIORITY is fine on an idle stream");
}

#[test]
fn frame_size_and_stream_zero_rules() {
    let big = frame(kind::DATA, 0, 1, &[0; 16_385]);
    for (name, bytes, code) in [
        ("over max frame size", big, ErrorCode::FrameSizeError),
        (
            "PING of 7",
            frame(kind::PING, 0, 0, b"1234567"),
            ErrorCode::FrameSizeError,
        ),
        (
            "PING on a stream",
            frame(kind::PING, 0, 1, b"12345678"),
            ErrorCode::ProtocolError,
        ),
        (
            "SETTINGS of 5",
            frame(kind::SETTINGS, 0, 0, &[0; 5]),
            ErrorCode::FrameSizeError,
        ),
        (
            "SETTINGS ack with payload",
            frame(kind::SETTINGS, flag::ACK, 0, &[0; 6]),
            ErrorCode::FrameSizeError,
        ),
        (
            "SETTINGS on a stream",
            frame(kind::SETTINGS, 0, 1, &[]),
            ErrorCode::ProtocolError,
        ),
        (
            "ENABLE_PUSH 2",
            settings(&[(2, 2)]),
            ErrorCode::ProtocolError,
        ),
        (
            "MAX_FRAME_SIZE small",
            settings(&[(5, 16_383)]),
            ErrorCode::ProtocolError,
        ),
        (
            "MAX_FRAME_SIZE large",
            settings(&[(5, 1 << 24)]),
            ErrorCode::ProtocolError,
        ),
        (
            "RST_STREAM on 0",
            frame(kind::RST_STREAM, 0, 0, &[0; 4]),
            ErrorCode::ProtocolError,
        ),
        (
            "PRIORITY on 0",
            frame(kind::PRIORITY, 0, 0, &[0; 5]),
            ErrorCode::ProtocolError,
        ),
        ("DATA on 0", data(0, b"x", false), ErrorCode::ProtocolError),
        (
            "HEADERS on 0",
            headers(0, &get_block(), true),
            ErrorCode::ProtocolError,
        ),
        (
            "GOAWAY on a stream",
            frame(kind::GOAWAY, 0, 1, &[0; 8]),
            ErrorCode::ProtocolError,
        ),
        (
            "WINDOW_UPDATE of 3",
            frame(kind::WINDOW_UPDATE, 0, 0, &[0; 3]),
            ErrorCode::FrameSizeError,
        ),
        (
            "WINDOW_UPDATE 0 on 0",
            window_update(0, 0),
            ErrorCode::ProtocolError,
        ),
        (
            "connection window overflow",
            window_update(0, (1 << 31) - 65_535),
            ErrorCode::FlowControlError,
        ),
    ] {
        let mut c = Client::new(limits());
        assert_eq!(c.send(&bytes), Err(ConnError { code }), "{name}");
        let f = c.frames();
        assert_eq!(
            f.last().map(|f| (f.kind, f.code())),
            Some((kind::GOAWAY, code)),
            "{name}"
        );
    }
    let mut c = Client::new(limits());
    c.send(&headers(1, &post_block(None), false)).unwrap();
    c.expect_reset(
        &frame(kind::PRIORITY, 0, 1, &[0; 4]),
        1,
        ErrorCode::FrameSizeError,
    );
    c.send(&headers(3, &post_block(None), false)).unwrap();
    c.expect_reset(&window_update(3, 0), 3, ErrorCode::ProtocolError);
    c.send(&headers(5, &post_block(None), false)).unwrap();
    c.expect_reset(
        &window_update(5, (1 << 31) - 65_535),
        5,
        ErrorCode::FlowControlError,
    );
    c.expect_goaway(
        &frame(kind::RST_STREAM, 0, 5, &[0; 3]),
        ErrorCode::FrameSizeError,
    );
}

#[test]
fn streams_past_the_limit_are_refused_and_their_blocks_decoded() {
    let mut c = Client::new(limits());
    for id in [1, 3, 5, 7] {
        c.send(&headers(id, &post_block(None), false)).unwrap();
    }
    // Stream 9 adds a field to the HPACK table (literal with incremental
    // indexing); stream 11 refers to it (index 62), which only works when
    // the refused stream's block was decoded.
    let mut b = get_block();
    b.push(0x40);
    hpack_int(&mut b, 0, 7, 6);
    b.extend(b"x-seen");
    hpack_int(&mut b, 0, 7, 3);
    b.extend(b"yes");
    c.expect_reset(&headers(9, &b, true), 9, ErrorCode::RefusedStream);
    c.send(&data(9, b"late", false)).unwrap();
    assert!(c.frames().is_empty(), "DATA of a refused stream is dropped");
    assert_eq!(c.events().len(), 4);
    c.send(&frame(kind::RST_STREAM, 0, 1, &[0, 0, 0, 8]))
        .unwrap();
    let mut b = get_block();
    b.push(0x80 | 62);
    c.send(&headers(11, &b, true)).unwrap();
    match &c.events()[..] {
        [Ev::Reset(1, _), Ev::Request {
            stream: 11, fields, ..
        }] => {
            assert_eq!(fields, &[(b"x-seen".to_vec(), b"yes".to_vec())]);
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn a_header_block_that_does_not_decode_is_a_compression_error() {
    let mut c = Client::new(limits());
    c.expect_goaway(&headers(1, &[0x80], true), ErrorCode::CompressionError);
}

#[test]
fn random_frames_never_panic_and_streams_stay_bounded() {
    // xorshift64*, seeded: the same frames on every run.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let blocks = [get_block(), post_block(Some("4")), vec![0x80], vec![]];
    // Mostly frames a client would send, so connections live a while.
    let kinds = [0, 0, 0, 1, 1, 1, 2, 3, 4, 6, 7, 8, 8, 10, 9, 5];
    let mut l = limits();
    l.max_error_resets = 1000;
    l.max_concurrent_streams = 3;
    let (mut frames, mut conns, mut delivered) = (0, 1, 0);
    let mut c = Client::new(l.clone());
    let mut last = 0;
    while frames < 20_000 {
        let r = next();
        // Now and then anything at all; mostly what a client would send.
        let odd = r >> 59 == 0;
        let mut kind = kinds[(r % if odd { 16 } else { 14 }) as usize];
        if !odd && last == 0 && ![kind::SETTINGS, kind::PING, kind::GOAWAY].contains(&kind) {
            kind = kind::HEADERS;
        }
        let flags = if odd {
            (r >> 8) as u8
        } else {
            (r >> 8) as u8 & flag::END_STREAM | flag::END_HEADERS
        };
        let stream = match kind {
            _ if odd => (r >> 16) as u32 % 12,
            kind::SETTINGS | kind::PING | kind::GOAWAY => 0,
            kind::HEADERS if r >> 20 & 1 == 0 => last + 2,
            kind::WINDOW_UPDATE if r >> 20 & 1 == 0 => 0,
            _ => last.max(1) - 2 * ((r >> 21) as u32 % 2).min(last / 2),
        };
        let len = match kind {
            kind::SETTINGS => 6 * ((r >> 32) % 3),
            kind::PING | kind::GOAWAY => 8,
            kind::PRIORITY => 5,
            kind::RST_STREAM | kind::WINDOW_UPDATE => 4,
            _ => (r >> 32) % 12,
        };
        let payload: Vec<u8> = match kind {
            kind::HEADERS | kind::CONTINUATION => blocks[(r >> 24) as usize % 4].clone(),
            _ => (0..len).map(|i| (next() >> i) as u8 & 0x3f).collect(),
        };
        frames += 1;
        let bytes = frame(kind, flags, stream, &payload);
        if c.conn.receive(&bytes, c.now, &mut c.events).is_err() {
            c = Client::new(l.clone());
            (conns, last) = (conns + 1, 0);
            continue;
        }
        if kind == kind::HEADERS && stream > last {
            last = stream;
        }
        delivered += c.events().len();
        let stream = last.max(1);
        match next() % 4 {
            0 => {
                c.conn
                    .send_headers(stream, 200, &mut std::iter::empty(), false);
            }
            1 => {
                c.conn.send_data(stream, b"hello", next() % 2 == 0);
            }
            2 => c.conn.release(stream, (next() % 100) as usize),
            _ => {}
        }
        assert!(c.conn.open_streams() <= 3);
        if c.conn.output().len() > 64 * 1024 {
            c.frames();
        }
    }
    assert!(
        conns < 6000 && delivered > 2000,
        "{conns} connections, {delivered} events"
    );
}

/// A PRIORITY frame on stream 3 (idle: allowed), depending on stream 0.
fn priority(stream: u32) -> Vec<u8> {
    frame(kind::PRIORITY, 0, stream, &[0, 0, 0, 0, 16])
}

#[test]
fn priority_and_window_update_floods_end_the_connection() {
    // `limits()` allows 20 inert frames at once.
    let mut c = Client::new(limits());
    for _ in 0..20 {
        c.send(&priority(3)).unwrap();
    }
    assert!(c.frames().is_empty(), "PRIORITY makes no output");
    c.expect_goaway(&priority(3), ErrorCode::EnhanceYourCalm);

    let mut c = Client::new(limits());
    for _ in 0..20 {
        c.send(&window_update(0, 1)).unwrap();
    }
    c.expect_goaway(&window_update(0, 1), ErrorCode::EnhanceYourCalm);

    // Both share the budget, refilled at a tenth of it (2) a second.
    let mut c = Client::new(limits());
    for _ in 0..10 {
        c.send(&priority(3)).unwrap();
        c.send(&window_update(0, 1)).unwrap();
    }
    c.now += Duration::from_secs(1);
    c.send(&priority(3)).unwrap();
    c.send(&window_update(0, 1)).unwrap();
    c.expect_goaway(&priority(3), ErrorCode::EnhanceYourCalm);
}

#[test]
fn resets_of_closed_streams_acks_of_nothing_and_unknown_frames_are_inert() {
    // RST_STREAM in a loop on a stream the server already answered: its
    // request earned one, the bucket gives 20.
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.conn.send_headers(1, 204, &mut std::iter::empty(), true);
    c.frames();
    let rst = frame(kind::RST_STREAM, 0, 1, &[0, 0, 0, 8]);
    for _ in 0..21 {
        c.send(&rst).unwrap();
    }
    c.expect_goaway(&rst, ErrorCode::EnhanceYourCalm);

    for (name, inert) in [
        ("PING ack", frame(kind::PING, flag::ACK, 0, b"abcdefgh")),
        ("SETTINGS ack", frame(kind::SETTINGS, flag::ACK, 0, &[])),
        ("unknown type", frame(0x42, 0, 0, b"x")),
    ] {
        let mut c = Client::new(limits());
        for _ in 0..20 {
            c.send(&inert).unwrap();
        }
        assert_eq!(
            c.send(&inert),
            Err(ConnError {
                code: ErrorCode::EnhanceYourCalm
            }),
            "{name}"
        );
    }
}

#[test]
fn a_download_answered_by_a_window_update_per_data_frame_is_never_cut_off() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    c.conn.send_headers(1, 200, &mut std::iter::empty(), false);
    c.frames();
    let body = vec![7u8; 64_000];
    let owned = bytes::Bytes::from(body.clone());
    let mut data_frames = 0;
    // 2,000 rounds of 64,000 bytes (four DATA frames each) at one instant,
    // so the bucket never refills: only the DATA sent pays for the updates,
    // whether copied into the output or queued as owned buffers.
    for round in 0..2000 {
        let taken = if round % 2 == 0 {
            c.conn.send_data(1, &body, false)
        } else {
            c.conn.send_data_owned(1, owned.clone(), false)
        };
        assert_eq!(taken, body.len());
        let mut updates = Vec::new();
        for f in c.frames() {
            assert_eq!(f.kind, kind::DATA);
            let n = f.payload.len() as u32;
            updates.extend(window_update(1, n));
            updates.extend(window_update(0, n));
            data_frames += 1;
        }
        c.send(&updates).unwrap();
    }
    assert_eq!(data_frames, 8000);
    assert!(c.frames().is_empty());
    // A reprioritisation now and then costs from the bucket, as does a
    // client that raises its windows ahead of the data.
    for _ in 0..5 {
        c.send(&priority(1)).unwrap();
        c.send(&window_update(0, 1000)).unwrap();
    }
    assert_eq!(c.conn.send_data(1, b"end", true), 3);

    // The credit is what the server sent, no more: once spent, the bucket
    // (20, of which 10 are gone, plus the request's one) is all that is left.
    let mut c2 = Client::new(limits());
    c2.send(&headers(1, &get_block(), true)).unwrap();
    c2.conn.send_headers(1, 200, &mut std::iter::empty(), false);
    assert_eq!(c2.conn.send_data(1, &body, false), body.len());
    c2.frames();
    // Four DATA frames earned eight updates, the request one more.
    for _ in 0..8 + 1 + 20 {
        c2.send(&window_update(1, 1)).unwrap();
    }
    c2.expect_goaway(&window_update(1, 1), ErrorCode::EnhanceYourCalm);
}

/// Serves `body_len` bytes on stream 1 the way the driver does, asking
/// for grants of up to 64 KiB at a time, while the client answers each
/// DATA frame with window updates of `update(n)` bytes for its `n`. Returns
/// the DATA frames sent below 1 KiB while more waited, and whether the
/// connection ended (with GOAWAY ENHANCE_YOUR_CALM).
fn download(body_len: usize, update: impl Fn(usize) -> u32) -> (usize, bool) {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), true)).unwrap();
    assert!(c.conn.send_headers(1, 200, &mut std::iter::empty(), false));
    c.frames();
    let body = vec![7u8; 64 * 1024];
    let mut left = body_len;
    let mut small = 0;
    while left > 0 {
        let want = left.min(body.len());
        let n = c.conn.grant_send(1, want, usize::MAX);
        if n == 0 {
            if c.conn.error().is_some() {
                let f = c.frames();
                let last = f.last().expect("a GOAWAY");
                assert_eq!(
                    (last.kind, last.code()),
                    (kind::GOAWAY, ErrorCode::EnhanceYourCalm)
                );
                return (small, true);
            }
            panic!("no window and no update: {left} bytes left");
        }
        small += usize::from(n < 1024 && n < want);
        assert_eq!(c.conn.send_data(1, &body[..n], n == left), n);
        left -= n;
        let mut updates = Vec::new();
        for f in c.frames() {
            assert_eq!(f.kind, kind::DATA);
            let inc = update(f.payload.len());
            if inc > 0 && left > 0 {
                updates.extend(window_update(1, inc));
                updates.extend(window_update(0, inc));
            }
        }
        c.send(&updates).unwrap();
    }
    (small, false)
}

#[test]
fn a_client_that_opens_its_window_a_byte_at_a_time_is_cut_off() {
    // CVE-2019-9511: after the first window, one byte per update.
    let (small, ended) = download(1 << 20, |_| 1);
    assert!(ended, "the dribble ends the connection");
    // The first window earned four credits on top of the burst of 128.
    assert!((128..=132).contains(&small), "{small} tiny frames");

    // Half a kilobyte at a time is a dribble too, if a slower one, and so
    // is anything below the 1 KiB floor.
    let (small, ended) = download(4 << 20, |_| 512);
    assert!(ended && small < 200, "{small} small frames");
    let (_, ended) = download(4 << 20, |_| 1000);
    assert!(ended, "1,000-byte updates are still below the floor");
}

#[test]
fn clients_that_reopen_their_windows_as_they_read_are_never_cut_off() {
    // Each DATA frame's bytes handed back at once, as many clients do.
    assert_eq!(download(8 << 20, |n| n as u32), (0, false));
    // A window that opens by a kilobyte at a time is slow, not a dribble.
    assert_eq!(download(1 << 20, |_| 1024), (0, false));
}
