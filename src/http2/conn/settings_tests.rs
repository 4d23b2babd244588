//! The client's SETTINGS and ours as they bind the other side's header
//! blocks: our HEADER_TABLE_SIZE from the client's acknowledgement on, and
//! the client's MAX_HEADER_LIST_SIZE on the heads and trailers we send.

use super::tests::*;
use super::*;
use crate::http2::frame::{flag, kind, PREFACE};

/// A connection announcing a 256-octet HPACK table, past the client's
/// preface and SETTINGS but not acknowledged yet.
fn small_table_unacked() -> Client {
    let mut l = limits();
    l.header_table_size = 256;
    let mut c = Client::fresh(l);
    let mut hello = PREFACE.to_vec();
    hello.extend(settings(&[]));
    c.send(&hello).unwrap();
    c.frames();
    c
}

/// A literal field with incremental indexing and a new name (RFC 7541
/// §6.2.1): the peer's decoder inserts it into its dynamic table.
fn indexed_literal(b: &mut Vec<u8>, name: &str, value: &str) {
    b.push(0x40);
    hpack_int(b, 0, 7, name.len());
    b.extend_from_slice(name.as_bytes());
    hpack_int(b, 0, 7, value.len());
    b.extend_from_slice(value.as_bytes());
}

/// A dynamic table size update (RFC 7541 §6.3).
fn size_update(b: &mut Vec<u8>, size: usize) {
    hpack_int(b, 0x20, 5, size);
}

fn ack() -> Vec<u8> {
    frame(kind::SETTINGS, flag::ACK, 0, &[])
}

/// Three entries of 232 octets each: more than 256, less than 4,096.
fn three_big_entries() -> Vec<u8> {
    let mut b = get_block();
    let value = "v".repeat(197);
    for name in ["x-one", "x-two", "x-six"] {
        indexed_literal(&mut b, name, &value);
    }
    b
}

#[test]
fn a_smaller_header_table_applies_only_once_the_client_acknowledges_it() {
    let mut c = small_table_unacked();
    // Before its acknowledgement the client may fill the default table
    // and refer to all of it.
    c.send(&headers(1, &three_big_entries(), true)).unwrap();
    let mut b = get_block();
    b.extend([0x80 | 62, 0x80 | 63, 0x80 | 64]);
    c.send(&headers(3, &b, true)).unwrap();
    let ev = c.events();
    let Some(Ev::Request { fields, .. }) = ev.last() else {
        panic!("{ev:?}");
    };
    let names: Vec<&[u8]> = fields.iter().map(|(n, _)| n.as_slice()).collect();
    assert_eq!(names, [&b"x-six"[..], b"x-two", b"x-one"]);

    // Once acknowledged, the client's encoder shrinks its table to fit.
    c.send(&ack()).unwrap();
    let mut b = Vec::new();
    size_update(&mut b, 256);
    b.extend(get_block());
    c.send(&headers(5, &b, true)).unwrap();
    assert!(matches!(c.events()[..], [Ev::Request { stream: 5, .. }]));
}

#[test]
fn a_header_table_past_the_acknowledged_size_is_a_compression_error() {
    // A size update above what was announced and acknowledged.
    let mut c = small_table_unacked();
    c.send(&ack()).unwrap();
    let mut b = Vec::new();
    size_update(&mut b, 4096);
    b.extend(get_block());
    c.expect_goaway(&headers(1, &b, true), ErrorCode::CompressionError);

    // No size update at all: the client still encodes with the default
    // table after acknowledging a smaller one.
    let mut c = small_table_unacked();
    c.send(&ack()).unwrap();
    c.expect_goaway(
        &headers(1, &three_big_entries(), true),
        ErrorCode::CompressionError,
    );

    // Before the acknowledgement, the default is the bound.
    let mut c = small_table_unacked();
    let mut b = Vec::new();
    size_update(&mut b, 4097);
    b.extend(get_block());
    c.expect_goaway(&headers(1, &b, true), ErrorCode::CompressionError);
}

/// A connection whose client announced `max_header_list_size`, past the
/// SETTINGS exchange.
fn client_with_list_limit(max_header_list_size: u32) -> Client {
    let mut c = Client::fresh(limits());
    let mut hello = PREFACE.to_vec();
    hello.extend(settings(&[(6, max_header_list_size)]));
    hello.extend(ack());
    c.send(&hello).unwrap();
    c.frames();
    c
}

/// Decodes a header block the way the client's decoder would, keeping its
/// table across blocks.
fn decode(decoder: &mut crate::http2::hpack::Decoder, block: &[u8]) -> Vec<(String, String)> {
    let mut got = Vec::new();
    decoder
        .decode(block, &mut |n, v| {
            got.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })
        .expect("the client's decoder stays in step");
    got
}

fn field_pairs<'a>(fields: &'a [(&'static str, String)]) -> Vec<(&'a [u8], &'a [u8])> {
    fields
        .iter()
        .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
        .collect()
}

#[test]
fn a_response_head_past_the_clients_header_list_size_is_answered_500() {
    let mut c = client_with_list_limit(300);
    let mut decoder = crate::http2::hpack::Decoder::new(4096);
    c.send(&headers(1, &get_block(), true)).unwrap();
    // :status (42) + x-short (45) + x-big (5 + 250 + 32): 374 > 300. The
    // short field would be indexed by the encoder, as the 200 would.
    let big = [("x-short", "kept".to_string()), ("x-big", "b".repeat(250))];
    let sent = c
        .conn
        .send_headers(1, 200, &mut field_pairs(&big).into_iter(), false);
    assert!(!sent, "the head is not sent as given");
    let f = c.one(kind::HEADERS);
    assert_eq!(
        (f.stream, f.flags),
        (1, flag::END_HEADERS | flag::END_STREAM)
    );
    assert_eq!(
        decode(&mut decoder, &f.payload),
        [(":status".into(), "500".into())]
    );
    assert_eq!(c.conn.send_data(1, b"body", true), 0, "nothing more goes");
    assert_eq!(c.conn.open_streams(), 0);

    // The connection goes on, its HPACK tables in step: the fields the
    // dropped head indexed are sent anew.
    c.send(&headers(3, &get_block(), true)).unwrap();
    let small = [("x-short", "kept".to_string())];
    assert!(c
        .conn
        .send_headers(3, 200, &mut field_pairs(&small).into_iter(), true));
    let f = c.one(kind::HEADERS);
    assert_eq!(
        decode(&mut decoder, &f.payload),
        [
            (":status".into(), "200".into()),
            ("x-short".into(), "kept".into())
        ]
    );
    // A head exactly at the limit goes: 42 + 45 + (5 + 176 + 32) = 300.
    c.send(&headers(5, &get_block(), true)).unwrap();
    let at_limit = [("x-short", "kept".to_string()), ("x-big", "b".repeat(176))];
    assert!(c
        .conn
        .send_headers(5, 200, &mut field_pairs(&at_limit).into_iter(), true));
    let f = c.one(kind::HEADERS);
    assert_eq!(decode(&mut decoder, &f.payload).len(), 3);
}

#[test]
fn oversized_interim_heads_are_left_out_and_oversized_trailers_reset_the_stream() {
    let mut c = client_with_list_limit(200);
    let mut decoder = crate::http2::hpack::Decoder::new(4096);
    c.send(&headers(1, &get_block(), true)).unwrap();
    let big = [("link", "l".repeat(200))];
    assert!(!c
        .conn
        .send_headers(1, 103, &mut field_pairs(&big).into_iter(), false));
    assert!(c.frames().is_empty(), "an interim head is optional");
    assert!(c.conn.send_headers(1, 200, &mut std::iter::empty(), false));
    let f = c.one(kind::HEADERS);
    assert_eq!(decode(&mut decoder, &f.payload)[0].1, "200");
    assert_eq!(c.conn.send_data(1, b"body", false), 4);
    c.frames();
    assert!(!c.conn.send_trailers(1, &mut field_pairs(&big).into_iter()));
    let f = c.one(kind::RST_STREAM);
    assert_eq!((f.stream, f.code()), (1, ErrorCode::InternalError));

    // A limit not even a bare 500 fits in resets the stream.
    let mut c = client_with_list_limit(41);
    c.send(&headers(1, &get_block(), true)).unwrap();
    assert!(!c.conn.send_headers(1, 204, &mut std::iter::empty(), true));
    let f = c.one(kind::RST_STREAM);
    assert_eq!((f.stream, f.code()), (1, ErrorCode::InternalError));
    c.send(&headers(3, &get_block(), true)).unwrap();
    assert!(matches!(c.events()[..], [_, Ev::Request { stream: 3, .. }]));
}
