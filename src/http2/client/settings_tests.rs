//! The origin's SETTINGS_MAX_HEADER_LIST_SIZE as it binds the request
//! heads and trailers the client role sends.

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
