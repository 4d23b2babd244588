//! The frame parser on raw bytes: every frame type on every stream kind,
//! input split at every byte, and the limits.

use super::*;
use crate::http3::frame::{write_header, write_headers, write_id_frame, write_settings};
use crate::http3::varint;

/// An event with its bytes owned, DATA pieces joined per frame by the
/// caller.
#[derive(Debug, PartialEq, Eq, Clone)]
enum Got {
    Data(Vec<u8>),
    Headers(Vec<u8>),
    HeadersTooLarge(u64),
    PushPromise(u64, Vec<u8>),
    Settings(Settings),
    CancelPush(u64),
    Goaway(u64),
    MaxPushId(u64),
    PriorityUpdate(bool, u64, Vec<u8>),
}

fn owned(e: FrameEvent<'_>) -> Got {
    match e {
        FrameEvent::Data(d) => Got::Data(d.to_vec()),
        FrameEvent::Headers(h) => Got::Headers(h.to_vec()),
        FrameEvent::HeadersTooLarge(n) => Got::HeadersTooLarge(n),
        FrameEvent::PushPromise {
            push_id,
            field_section,
        } => Got::PushPromise(push_id, field_section.to_vec()),
        FrameEvent::Settings(s) => Got::Settings(s),
        FrameEvent::CancelPush(id) => Got::CancelPush(id),
        FrameEvent::Goaway(id) => Got::Goaway(id),
        FrameEvent::MaxPushId(id) => Got::MaxPushId(id),
        FrameEvent::PriorityUpdate { push, id, value } => {
            Got::PriorityUpdate(push, id, value.to_vec())
        }
    }
}

/// Feeds `pieces` in order; DATA pieces are joined while they come back to
/// back (an empty DATA frame stays apart, so the frames around it do too).
fn read_all(r: &mut FrameReader, pieces: &[&[u8]]) -> Result<Vec<Got>, Error> {
    let mut got = Vec::new();
    for piece in pieces {
        let mut input = *piece;
        while !input.is_empty() {
            let (n, event) = r.read(input)?;
            input = &input[n..];
            match event.map(owned) {
                Some(Got::Data(d)) => match got.last_mut() {
                    Some(Got::Data(prev)) if !prev.is_empty() && !d.is_empty() => {
                        prev.extend_from_slice(&d)
                    }
                    _ => got.push(Got::Data(d)),
                },
                Some(e) => got.push(e),
                None => assert!(input.is_empty(), "no event with input left"),
            }
        }
    }
    Ok(got)
}

fn server(kind: StreamKind) -> FrameReader {
    FrameReader::new(kind, Role::Server, FrameLimits::default())
}

fn settings_frame() -> Vec<u8> {
    let mut out = Vec::new();
    write_settings(
        &Settings {
            qpack_max_table_capacity: 4096,
            qpack_blocked_streams: 100,
            ..Settings::default()
        },
        &mut out,
    );
    out
}

/// A request stream: HEADERS, an unknown frame, DATA in two frames,
/// a reserved frame, trailers.
fn request_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    write_headers(&[0x00, 0x00, 0xd1, 0xd7], &mut out);
    write_header(0x21, 3, &mut out);
    out.extend_from_slice(b"xyz");
    write_header(frame::DATA, 5, &mut out);
    out.extend_from_slice(b"hello");
    write_header(0x1f * 7 + 0x21, 0, &mut out);
    write_header(frame::DATA, 0, &mut out);
    write_header(frame::DATA, 6, &mut out);
    out.extend_from_slice(b" world");
    write_headers(&[0x00, 0x00, 0x20], &mut out);
    out
}

fn request_events() -> Vec<Got> {
    vec![
        Got::Headers(vec![0x00, 0x00, 0xd1, 0xd7]),
        Got::Data(b"hello".to_vec()),
        Got::Data(vec![]),
        Got::Data(b" world".to_vec()),
        Got::Headers(vec![0x00, 0x00, 0x20]),
    ]
}

#[test]
fn a_request_stream_reads_whole_and_skips_unknown_frames() {
    let bytes = request_bytes();
    let mut r = server(StreamKind::Request);
    assert_eq!(read_all(&mut r, &[&bytes]).unwrap(), request_events());
    assert!(r.finish().is_ok());
}

#[test]
fn a_request_stream_split_at_every_byte_reads_the_same() {
    let bytes = request_bytes();
    for split in 0..=bytes.len() {
        let mut r = server(StreamKind::Request);
        let got = read_all(&mut r, &[&bytes[..split], &bytes[split..]]).unwrap();
        assert_eq!(got, request_events(), "split at {split}");
    }
    // And one byte at a time.
    let mut r = server(StreamKind::Request);
    let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(read_all(&mut r, &pieces).unwrap(), request_events());
}

#[test]
fn a_control_stream_reads_settings_then_control_frames_at_every_split() {
    let mut bytes = settings_frame();
    write_id_frame(frame::MAX_PUSH_ID, 8, &mut bytes);
    write_header(0x21 + 0x1f, 2, &mut bytes);
    bytes.extend_from_slice(b"zz");
    write_id_frame(frame::CANCEL_PUSH, 3, &mut bytes);
    write_id_frame(frame::GOAWAY, 16_384, &mut bytes);
    let want = vec![
        Got::Settings(Settings {
            qpack_max_table_capacity: 4096,
            qpack_blocked_streams: 100,
            ..Settings::default()
        }),
        Got::MaxPushId(8),
        Got::CancelPush(3),
        Got::Goaway(16_384),
    ];
    for split in 0..=bytes.len() {
        let mut r = server(StreamKind::Control);
        let got = read_all(&mut r, &[&bytes[..split], &bytes[split..]]).unwrap();
        assert_eq!(got, want, "split at {split}");
    }
}

fn first_error(kind: StreamKind, role: Role, bytes: &[u8]) -> Error {
    let mut r = FrameReader::new(kind, role, FrameLimits::default());
    read_all(&mut r, &[bytes]).expect_err("refused")
}

#[test]
fn http2_frame_types_are_unexpected_on_every_stream() {
    for ty in [0x02, 0x06, 0x08, 0x09] {
        let mut bytes = Vec::new();
        write_header(ty, 0, &mut bytes);
        let e = first_error(StreamKind::Request, Role::Server, &bytes);
        assert_eq!(e.code, ErrorCode::FrameUnexpected, "type {ty} on a request");
        let mut control = settings_frame();
        control.extend_from_slice(&bytes);
        let e = first_error(StreamKind::Control, Role::Server, &control);
        assert_eq!(e.code, ErrorCode::FrameUnexpected, "type {ty} on control");
    }
}

#[test]
fn the_control_stream_must_open_with_settings_once() {
    for ty in [frame::GOAWAY, frame::DATA, 0x21] {
        let mut bytes = Vec::new();
        write_header(ty, 1, &mut bytes);
        bytes.push(0);
        let e = first_error(StreamKind::Control, Role::Server, &bytes);
        assert_eq!(e.code, ErrorCode::MissingSettings, "type {ty} first");
    }
    let mut twice = settings_frame();
    twice.extend_from_slice(&settings_frame());
    let e = first_error(StreamKind::Control, Role::Server, &twice);
    assert_eq!(e.code, ErrorCode::FrameUnexpected);
}

#[test]
fn frames_on_the_wrong_stream_are_unexpected() {
    // Message frames on the control stream.
    for ty in [frame::DATA, frame::HEADERS, frame::PUSH_PROMISE] {
        let mut bytes = settings_frame();
        write_header(ty, 1, &mut bytes);
        bytes.push(0);
        let e = first_error(StreamKind::Control, Role::Server, &bytes);
        assert_eq!(e.code, ErrorCode::FrameUnexpected, "type {ty} on control");
    }
    // Control frames on a request stream, and PUSH_PROMISE from a client.
    for ty in [
        frame::SETTINGS,
        frame::GOAWAY,
        frame::MAX_PUSH_ID,
        frame::CANCEL_PUSH,
        frame::PUSH_PROMISE,
    ] {
        let mut bytes = Vec::new();
        write_id_frame(ty, 0, &mut bytes);
        let e = first_error(StreamKind::Request, Role::Server, &bytes);
        assert_eq!(e.code, ErrorCode::FrameUnexpected, "type {ty} on a request");
        let e = first_error(StreamKind::Push, Role::Client, &bytes);
        assert_eq!(
            e.code,
            ErrorCode::FrameUnexpected,
            "type {ty} on a push stream"
        );
    }
    // MAX_PUSH_ID from a server.
    let mut bytes = settings_frame();
    write_id_frame(frame::MAX_PUSH_ID, 1, &mut bytes);
    let e = first_error(StreamKind::Control, Role::Client, &bytes);
    assert_eq!(e.code, ErrorCode::FrameUnexpected);
}

#[test]
fn a_client_reads_push_promise_on_a_request_stream() {
    let mut bytes = Vec::new();
    write_header(frame::PUSH_PROMISE, 4, &mut bytes);
    bytes.extend_from_slice(&[0x01, 0x00, 0x00, 0xd1]);
    let mut r = FrameReader::new(StreamKind::Request, Role::Client, FrameLimits::default());
    assert_eq!(
        read_all(&mut r, &[&bytes]).unwrap(),
        [Got::PushPromise(1, vec![0x00, 0x00, 0xd1])]
    );
}

#[test]
fn malformed_payloads_are_frame_errors() {
    // GOAWAY with two ids, with none, MAX_PUSH_ID cut short.
    for payload in [&[0x04, 0x08][..], &[], &[0x40]] {
        let mut bytes = settings_frame();
        write_header(frame::GOAWAY, payload.len() as u64, &mut bytes);
        bytes.extend_from_slice(payload);
        let e = first_error(StreamKind::Control, Role::Server, &bytes);
        assert_eq!(e.code, ErrorCode::FrameError, "{payload:?}");
    }
    // A SETTINGS frame that ends inside a pair.
    let e = first_error(StreamKind::Control, Role::Server, &[0x04, 0x01, 0x01]);
    assert_eq!(e.code, ErrorCode::FrameError);
}

#[test]
fn a_stream_that_ends_inside_a_frame_is_a_frame_error() {
    let bytes = request_bytes();
    for cut in 1..bytes.len() {
        let mut r = server(StreamKind::Request);
        read_all(&mut r, &[&bytes[..cut]]).unwrap();
        let boundary = [6, 11, 18, 21, 23, 31].contains(&cut);
        assert_eq!(r.finish().is_ok(), boundary, "cut at {cut}");
        assert_eq!(r.at_frame_boundary(), boundary);
    }
}

#[test]
fn oversized_frames_are_never_buffered() {
    let limits = FrameLimits {
        max_field_section: 16,
        max_control_payload: 8,
    };
    // HEADERS over the limit: reported, skipped, and the stream goes on.
    let mut bytes = Vec::new();
    write_header(frame::HEADERS, 17, &mut bytes);
    bytes.extend_from_slice(&[0u8; 17]);
    write_header(frame::DATA, 1, &mut bytes);
    bytes.push(b'x');
    let mut r = FrameReader::new(StreamKind::Request, Role::Server, limits);
    assert_eq!(
        read_all(&mut r, &[&bytes]).unwrap(),
        [Got::HeadersTooLarge(17), Got::Data(b"x".to_vec())]
    );
    assert!(r.buf.capacity() < 17, "the oversized payload was not held");

    // A huge declared length costs nothing: the error comes from the header.
    let mut bytes = Vec::new();
    varint::write(frame::SETTINGS, &mut bytes);
    varint::write(varint::MAX, &mut bytes);
    let mut r = FrameReader::new(StreamKind::Control, Role::Server, limits);
    let e = read_all(&mut r, &[&bytes]).unwrap_err();
    assert_eq!(e.code, ErrorCode::ExcessiveLoad);
    assert_eq!(r.buf.capacity(), 0);

    // An unknown frame of any length is skipped without holding it.
    let mut bytes = Vec::new();
    write_header(0x21, 1 << 40, &mut bytes);
    let mut r = FrameReader::new(StreamKind::Request, Role::Server, limits);
    assert!(read_all(&mut r, &[&bytes, &[0u8; 4096]])
        .unwrap()
        .is_empty());
    assert_eq!(r.buf.capacity(), 0);
}

#[test]
fn a_large_data_frame_is_handed_out_as_it_comes() {
    let mut bytes = Vec::new();
    write_header(frame::DATA, 1 << 30, &mut bytes);
    let mut r = server(StreamKind::Request);
    let (n, e) = r.read(&bytes).unwrap();
    assert_eq!((n, e), (bytes.len(), None));
    let chunk = [7u8; 1000];
    let (n, e) = r.read(&chunk).unwrap();
    assert_eq!((n, e), (1000, Some(FrameEvent::Data(&chunk[..]))));
    assert_eq!(r.buf.capacity(), 0);
}

#[test]
fn priority_update_is_read_whole_on_the_control_stream_split_anywhere() {
    let mut bytes = Vec::new();
    write_settings(&Settings::default(), &mut bytes);
    crate::http3::frame::write_priority_update(12, b"u=1, i", &mut bytes);
    for split in 1..bytes.len() {
        let mut r = FrameReader::new(StreamKind::Control, Role::Server, FrameLimits::default());
        let got = read_all(&mut r, &[&bytes[..split], &bytes[split..]]).unwrap();
        assert_eq!(
            got[1],
            Got::PriorityUpdate(false, 12, b"u=1, i".to_vec()),
            "split at {split}"
        );
    }
    // An empty payload has no element id.
    let mut empty = Vec::new();
    write_settings(&Settings::default(), &mut empty);
    write_header(crate::http3::frame::PRIORITY_UPDATE_PUSH, 0, &mut empty);
    let mut r = FrameReader::new(StreamKind::Control, Role::Server, FrameLimits::default());
    let e = read_all(&mut r, &[&empty]).unwrap_err();
    assert_eq!(e.code, ErrorCode::FrameError);
}

#[test]
fn small_and_unknown_frames_are_charged_to_the_frame_budget() {
    let mut bytes = Vec::new();
    write_headers(b"a field section", &mut bytes);
    // An empty and a 1-byte DATA frame: one credit each.
    write_header(frame::DATA, 0, &mut bytes);
    write_header(frame::DATA, 1, &mut bytes);
    bytes.push(b'x');
    // A full DATA frame and the HEADERS: nothing.
    write_header(frame::DATA, 8, &mut bytes);
    bytes.extend_from_slice(b"12345678");
    // A reserved type with 40 bytes: one, and two for its payload.
    write_header(0x21, 40, &mut bytes);
    bytes.extend_from_slice(&[0; 40]);
    for split in 0..bytes.len() {
        let mut r = server(StreamKind::Request);
        read_all(&mut r, &[&bytes[..split]]).unwrap();
        let early = r.take_spent();
        read_all(&mut r, &[&bytes[split..]]).unwrap();
        assert_eq!(early + r.take_spent(), 5, "split at {split}");
        assert_eq!(r.take_spent(), 0, "taken once");
    }
}
