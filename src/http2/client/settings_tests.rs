//! The origin's SETTINGS as they bind the client role: its
//! SETTINGS_MAX_HEADER_LIST_SIZE on the request heads and trailers sent,
//! its SETTINGS_ENABLE_CONNECT_PROTOCOL on extended CONNECT (RFC 8441).

use super::tests::*;
use super::*;
use crate::http2::frame::{flag, kind};
use crate::http2::hpack::Decoder;

/// A connection whose origin announced `max_header_list_size`.
fn origin_with_list_limit(max_header_list_size: u32) -> Origin {
    let mut o = Origin::fresh(limits());
    let mut hello = settings(&[(6, max_header_list_size)]);
    hello.extend(frame(kind::SETTINGS, flag::ACK, 0, &[]));
    o.send(&hello).unwrap();
    o.frames();
    o.events();
    o
}

fn open(o: &mut Origin, fields: &[(&[u8], &[u8])], end: bool) -> Result<StreamId, OpenError> {
    o.conn.open_stream(
        b"POST",
        b"https",
        b"example.com",
        b"/",
        &mut fields.iter().copied(),
        end,
    )
}

#[test]
fn a_request_head_past_the_origins_header_list_size_is_not_sent() {
    let mut o = origin_with_list_limit(300);
    // The pseudo fields are 4 × 32 + 7 + 4 + 7 + 5 + 10 + 11 + 5 + 1 = 178,
    // x-short 43 more, x-big 137: 358.
    let big = "b".repeat(100);
    let fields: [(&[u8], &[u8]); 2] = [(b"x-short", b"kept"), (b"x-big", big.as_bytes())];
    assert_eq!(open(&mut o, &fields, true), Err(OpenError::HeadTooLarge));
    assert!(o.frames().is_empty(), "nothing of it is sent");
    assert_eq!(o.conn.open_streams(), 0);

    // The next request takes the unused id, and the origin's decoder
    // stays in step with what the dropped head indexed.
    let id = open(&mut o, &fields[..1], false).unwrap();
    assert_eq!(id, 1);
    let f = o.one(kind::HEADERS);
    let mut got = Vec::new();
    Decoder::new(4096)
        .decode(&f.payload, &mut |n, v| got.push((n.to_vec(), v.to_vec())))
        .unwrap();
    assert_eq!(
        got.last().unwrap(),
        &(b"x-short".to_vec(), b"kept".to_vec())
    );

    // Trailers past it reset the stream, which the caller is told of by
    // the false.
    let value = "t".repeat(300);
    let trailers: [(&[u8], &[u8]); 1] = [(b"x-big", value.as_bytes())];
    assert!(!o.conn.send_trailers(1, &mut trailers.iter().copied()));
    let f = o.one(kind::RST_STREAM);
    assert_eq!((f.stream, f.code()), (1, ErrorCode::InternalError));
    assert_eq!(open(&mut o, &[], true), Ok(3));
}

/// Opens an extended CONNECT for a WebSocket on `/chat`.
fn open_websocket(client: &mut ClientConnection) -> Result<StreamId, OpenError> {
    let fields: [(&[u8], &[u8]); 1] = [(b"sec-websocket-version", b"13")];
    client.open_extended_connect(
        b"websocket",
        b"https",
        b"origin.example",
        b"/chat",
        &mut fields.iter().copied(),
    )
}

#[test]
fn an_extended_connect_opens_only_where_the_origin_offered_it() {
    // Before the origin's SETTINGS, what it offers is unknown: nothing goes.
    let mut o = Origin::fresh(limits());
    o.frames();
    assert!(!o.conn.settings_received());
    assert_eq!(
        open_websocket(&mut o.conn),
        Err(OpenError::NoExtendedConnect)
    );
    assert!(o.frames().is_empty());
    // SETTINGS without ENABLE_CONNECT_PROTOCOL: still refused.
    let mut o = Origin::new(limits());
    assert_eq!(
        open_websocket(&mut o.conn),
        Err(OpenError::NoExtendedConnect)
    );
    assert!(o.frames().is_empty());
    // Offered (RFC 8441 §3): the stream carries :method CONNECT and
    // :protocol, and stays open for the tunnel's DATA both ways.
    let mut server = limits();
    server.enable_connect_protocol = true;
    let mut p = Pair::new(limits(), server);
    let id = open_websocket(&mut p.client).unwrap();
    p.pump();
    let r = &p.sev.requests[0];
    assert_eq!(r.protocol.as_deref(), Some(&b"websocket"[..]));
    assert!(!r.end_stream);
    p.server
        .send_headers(id, 200, &mut std::iter::empty(), false);
    p.pump();
    assert_eq!(p.client.send_data(id, b"ping", false), 4);
    assert_eq!(p.server.send_data(id, b"pong", false), 4);
    p.pump();
    assert_eq!(p.sev.body, [(id, b"ping".to_vec(), false)]);
    assert!(p
        .cev
        .0
        .contains(&super::tests::Ev::Data(id, b"pong".to_vec(), false)));
    // Taking it back is a protocol error (RFC 8441 §3).
    let mut o = Origin::fresh(limits());
    let mut hello = settings(&[(8, 1)]);
    hello.extend(frame(kind::SETTINGS, flag::ACK, 0, &[]));
    o.send(&hello).unwrap();
    o.frames();
    o.expect_goaway(&settings(&[(8, 0)]), ErrorCode::ProtocolError);
}
