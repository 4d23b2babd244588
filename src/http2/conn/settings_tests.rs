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
