//! QPACK on raw bytes: the examples of RFC 9204 Appendix B in both
//! directions, every error path of the decoder and the encoder, the encoder
//! stream split at every byte, and the two sides talking to each other.

use super::decode::{Decoder, DecoderLimits, SectionOutcome};
use super::encode::Encoder;
use super::instructions::{write_decoder_instruction, DecoderInstruction};
use crate::http::field_coding::{write_int, write_raw_string};
use crate::http3::ErrorCode;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn fields(list: &[(&str, &str)]) -> Fields {
    list.iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// The Appendix B decoder: a table of at most 220 bytes (six entries).
fn appendix_b_decoder() -> Decoder {
    Decoder::new(DecoderLimits {
        max_table_capacity: 220,
        ..DecoderLimits::default()
    })
}

fn decode(d: &mut Decoder, stream: u64, section: &[u8]) -> (SectionOutcome, Fields) {
    let mut got = Vec::new();
    let outcome = d
        .decode_section(stream, section, &mut |n, v, _| {
            got.push((n.to_vec(), v.to_vec()))
        })
        .expect("the section decodes");
    (outcome, got)
}

fn decoder_stream(d: &mut Decoder) -> Vec<u8> {
    let mut out = Vec::new();
    d.write_decoder_stream(&mut out);
    out
}

/// A table's size, insert count and entries, oldest first.
type TableState = (usize, u64, Fields);

fn table_state(d: &Decoder) -> TableState {
    let t = d.table();
    let entries = (t.dropped()..t.insert_count())
        .map(|abs| {
            let (n, v) = t.get(abs).unwrap();
            (n.to_vec(), v.to_vec())
        })
        .collect();
    (t.size(), t.insert_count(), entries)
}

const B2_ENCODER: &str = "3fbd01 c00f7777772e6578616d706c652e636f6d c10c2f73616d706c652f70617468";
const B3_ENCODER: &str = "4a637573746f6d2d6b65790c637573746f6d2d76616c7565";
const B4_ENCODER: &str = "02";
const B5_ENCODER: &str = "810d637573746f6d2d76616c756532";

#[test]
fn rfc_9204_b1_literal_with_static_name_reference() {
    let mut d = appendix_b_decoder();
    let (outcome, got) = decode(&mut d, 0, &hex("0000 510b 2f69 6e64 6578 2e68 746d 6c"));
    assert_eq!(outcome, SectionOutcome::Decoded);
    assert_eq!(got, fields(&[(":path", "/index.html")]));
    assert_eq!(table_state(&d), (0, 0, vec![]));
    assert!(decoder_stream(&mut d).is_empty(), "nothing to acknowledge");
}

#[test]
fn rfc_9204_b2_to_b5_decoder_side() {
    let mut d = appendix_b_decoder();
    // B.2: capacity 220, two inserts with static name references.
    d.read_encoder_stream(&hex(B2_ENCODER)).unwrap();
    assert_eq!(
        table_state(&d),
        (
            106,
            2,
            fields(&[(":authority", "www.example.com"), (":path", "/sample/path")])
        )
    );
    let (outcome, got) = decode(&mut d, 4, &hex("0381 10 11"));
    assert_eq!(outcome, SectionOutcome::Decoded);
    assert_eq!(
        got,
        fields(&[(":authority", "www.example.com"), (":path", "/sample/path")])
    );
    assert_eq!(
        decoder_stream(&mut d),
        [0x84],
        "Section Acknowledgment (stream 4)"
    );

    // B.3: an insert with a literal name, acknowledged by an increment.
    d.read_encoder_stream(&hex(B3_ENCODER)).unwrap();
    assert_eq!(table_state(&d).0, 160);
    assert_eq!(decoder_stream(&mut d), [0x01], "Insert Count Increment (1)");

    // B.4: a duplicate, then a section on stream 8 with a dynamic, a
    // static and a dynamic reference; the stream is then cancelled.
    d.read_encoder_stream(&hex(B4_ENCODER)).unwrap();
    assert_eq!(
        table_state(&d),
        (
            217,
            4,
            fields(&[
                (":authority", "www.example.com"),
                (":path", "/sample/path"),
                ("custom-key", "custom-value"),
                (":authority", "www.example.com"),
            ])
        )
    );
    let (_, got) = decode(&mut d, 8, &hex("0500 80 c1 81"));
    assert_eq!(
        got,
        fields(&[
            (":authority", "www.example.com"),
            (":path", "/"),
            ("custom-key", "custom-value"),
        ])
    );
    d.stream_cancelled(8);
    // The RFC's decoder is reset before it acknowledges; this one decoded
    // the section first, so its acknowledgment precedes the cancellation.
    assert_eq!(decoder_stream(&mut d), [0x88, 0x48]);

    // B.5: an insert with a dynamic name reference evicts absolute index 0.
    d.read_encoder_stream(&hex(B5_ENCODER)).unwrap();
    assert_eq!(
        table_state(&d),
        (
            215,
            5,
            fields(&[
                (":path", "/sample/path"),
                ("custom-key", "custom-value"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value2"),
            ])
        )
    );
    assert_eq!(decoder_stream(&mut d), [0x01], "Insert Count Increment (1)");
}

#[test]
fn rfc_9204_b4_cancellation_before_decoding_sends_the_rfc_bytes() {
    let mut d = appendix_b_decoder();
    d.read_encoder_stream(&hex(B2_ENCODER)).unwrap();
    decode(&mut d, 4, &hex("0381 10 11"));
    d.read_encoder_stream(&hex(B3_ENCODER)).unwrap();
    decoder_stream(&mut d);
    d.read_encoder_stream(&hex(B4_ENCODER)).unwrap();
    d.stream_cancelled(8);
    let out = decoder_stream(&mut d);
    assert_eq!(out[0], 0x48, "Stream Cancellation (stream 8) first");
}

#[test]
fn rfc_9204_appendix_b_encoder_stream_split_at_every_byte() {
    let all: Vec<u8> = [B2_ENCODER, B3_ENCODER, B4_ENCODER, B5_ENCODER]
        .iter()
        .flat_map(|s| hex(s))
        .collect();
    let mut whole = appendix_b_decoder();
    whole.read_encoder_stream(&all).unwrap();
    let want = table_state(&whole);
    for split in 0..=all.len() {
        let mut d = appendix_b_decoder();
        d.read_encoder_stream(&all[..split]).unwrap();
        d.read_encoder_stream(&all[split..]).unwrap();
        assert_eq!(table_state(&d), want, "split at {split}");
    }
    let mut d = appendix_b_decoder();
    for b in &all {
        d.read_encoder_stream(std::slice::from_ref(b)).unwrap();
    }
    assert_eq!(table_state(&d), want, "a byte at a time");
}

#[test]
fn rfc_9204_appendix_b_decoder_instructions_read_by_the_encoder() {
    // The encoder side of B.2: our encoder inserts the two fields, the
    // peer's acknowledgment (0x84) and increments move its Known Received
    // Count, after which sections refer to the entries.
    let mut e = Encoder::new();
    e.set_peer_max_table_capacity(220);
    let list: [(&[u8], &[u8]); 2] = [(b":authority", b"www.example.com"), (b"x-custom", b"1")];
    let mut section = Vec::new();
    e.encode_section(4, &mut list.iter().copied(), &mut section);
    assert_eq!(
        &section[..2],
        [0x00, 0x00],
        "new entries are not referred to yet"
    );
    let mut stream = Vec::new();
    e.write_encoder_stream(&mut stream);
    assert_eq!(
        &stream[..3],
        [0x3f, 0xbd, 0x01],
        "Set Dynamic Table Capacity 220"
    );
    assert_eq!(e.table().insert_count(), 2);

    // Acknowledgment of a section that was never sent.
    assert_eq!(
        e.read_decoder_stream(&[0x84]).unwrap_err().code,
        ErrorCode::QpackDecoderStreamError
    );
    let mut e = Encoder::new();
    e.set_peer_max_table_capacity(220);
    e.encode_section(4, &mut list.iter().copied(), &mut Vec::new());
    e.read_decoder_stream(&[0x02]).unwrap();
    assert_eq!(e.known_received(), 2);
    let mut again = Vec::new();
    e.encode_section(8, &mut list.iter().copied(), &mut again);
    // Required Insert Count 2 (encoded 3), Base 2, then two indexed lines.
    assert_eq!(again, [0x03, 0x00, 0x81, 0x80]);
    e.read_decoder_stream(&[0x88]).unwrap();
    e.read_decoder_stream(&[0x48]).unwrap();
}

fn round_trip(e: &mut Encoder, d: &mut Decoder, stream: u64, list: &[(&[u8], &[u8])]) -> usize {
    let mut section = Vec::new();
    e.encode_section(stream, &mut list.iter().copied(), &mut section);
    let mut enc_stream = Vec::new();
    e.write_encoder_stream(&mut enc_stream);
    d.read_encoder_stream(&enc_stream).unwrap();
    let (outcome, got) = decode(d, stream, &section);
    assert_eq!(outcome, SectionOutcome::Decoded);
    let want: Fields = list.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
    assert_eq!(got, want);
    let mut dec_stream = Vec::new();
    d.write_decoder_stream(&mut dec_stream);
    e.read_decoder_stream(&dec_stream).unwrap();
    section.len()
}

#[test]
fn repeated_fields_shrink_once_acknowledged() {
    let mut e = Encoder::new();
    e.set_peer_max_table_capacity(4096);
    let mut d = Decoder::new(DecoderLimits::default());
    let list: [(&[u8], &[u8]); 5] = [
        (b":status", b"200"),
        (b"server", b"pier"),
        (b"content-type", b"text/x-custom"),
        (b"x-trace", b"abc"),
        (b"set-cookie", b"secret=1"),
    ];
    let first = round_trip(&mut e, &mut d, 0, &list);
    let second = round_trip(&mut e, &mut d, 4, &list);
    assert!(second < first, "{second} < {first}");
    // The cookie is never inserted, and goes with the never-index bit.
    assert!(e
        .table()
        .find(b"set-cookie", b"secret=1", 0, u64::MAX)
        .1
        .is_none());
    let mut section = Vec::new();
    e.encode_section(8, &mut list[4..].iter().copied(), &mut section);
    let mut never = Vec::new();
    d.decode_section(8, &section, &mut |_, _, n| never.push(n))
        .unwrap();
    assert_eq!(never, [true]);
}

#[test]
fn without_peer_settings_only_static_and_literals_are_used() {
    let mut e = Encoder::new();
    let mut d = Decoder::new(DecoderLimits {
        max_table_capacity: 0,
        ..DecoderLimits::default()
    });
    for stream in [0, 4, 8] {
        round_trip(
            &mut e,
            &mut d,
            stream,
            &[(b"x-a", b"1"), (b":status", b"404")],
        );
    }
    let mut out = Vec::new();
    e.write_encoder_stream(&mut out);
    assert!(out.is_empty());
}

#[test]
fn a_small_table_churns_without_evicting_referenced_entries() {
    // Room for three entries: many distinct fields, sections acknowledged
    // late, and every section still decodes.
    let mut e = Encoder::new();
    e.set_peer_max_table_capacity(120);
    let mut d = Decoder::new(DecoderLimits {
        max_table_capacity: 120,
        ..DecoderLimits::default()
    });
    let mut held_back = Vec::new();
    for i in 0..200u64 {
        let name = format!("x-{}", i % 7);
        let value = format!("{}", i % 5);
        let list: [(&[u8], &[u8]); 2] = [(name.as_bytes(), value.as_bytes()), (b"x-keep", b"same")];
        let mut section = Vec::new();
        e.encode_section(i * 4, &mut list.iter().copied(), &mut section);
        let mut enc_stream = Vec::new();
        e.write_encoder_stream(&mut enc_stream);
        d.read_encoder_stream(&enc_stream).unwrap();
        let (outcome, got) = decode(&mut d, i * 4, &section);
        assert_eq!(outcome, SectionOutcome::Decoded, "section {i}");
        assert_eq!(got.len(), 2);
        assert!(e.table().size() <= 120);
        // Acknowledgments reach the encoder only every fifth section.
        d.write_decoder_stream(&mut held_back);
        if i % 5 == 4 {
            e.read_decoder_stream(&held_back).unwrap();
            held_back.clear();
        }
    }
}

fn decoder_error(d: &mut Decoder, section: &[u8]) -> ErrorCode {
    d.decode_section(0, section, &mut |_, _, _| {})
        .unwrap_err()
        .code
}

fn encoder_stream_error(bytes: &[u8]) -> ErrorCode {
    let mut d = appendix_b_decoder();
    d.read_encoder_stream(bytes).unwrap_err().code
}

#[test]
fn bad_encoder_instructions_are_encoder_stream_errors() {
    // Capacity above what we advertised.
    let mut over = Vec::new();
    write_int(&mut over, 0x20, 5, 221);
    // A static name past the table.
    let mut bad_static = Vec::new();
    write_int(&mut bad_static, 0xc0, 6, 99);
    write_raw_string(&mut bad_static, 0, 7, b"v");
    // A dynamic name in an empty table.
    let mut bad_dynamic = hex("3fbd01");
    write_int(&mut bad_dynamic, 0x80, 6, 0);
    write_raw_string(&mut bad_dynamic, 0, 7, b"v");
    // Duplicate of nothing.
    let dup = hex("3fbd01 00");
    // An entry larger than the capacity set.
    let mut big = Vec::new();
    write_int(&mut big, 0x20, 5, 40);
    write_raw_string(&mut big, 0x40, 5, b"abcd");
    write_raw_string(&mut big, 0, 7, b"efghi");
    // A string longer than any entry could be, refused from its length.
    let mut huge = hex("3fbd01");
    write_int(&mut huge, 0x40, 5, 1 << 40);
    // A Huffman string with bad padding.
    let bad_huffman = hex("3fbd01 c0 81 00");
    // An integer that overflows.
    let overflow = hex("3f ffffffffffffffffff01");
    for (what, bytes) in [
        ("capacity", over),
        ("static", bad_static),
        ("dynamic", bad_dynamic),
        ("duplicate", dup),
        ("too big", big),
        ("huge", huge),
        ("huffman", bad_huffman),
        ("overflow", overflow),
    ] {
        assert_eq!(
            encoder_stream_error(&bytes),
            ErrorCode::QpackEncoderStreamError,
            "{what}"
        );
    }
}

#[test]
fn a_partial_encoder_instruction_is_held_only_as_long_as_an_entry_can_be() {
    let mut d = appendix_b_decoder();
    let mut partial = hex("3fbd01");
    write_int(&mut partial, 0x40, 5, 800);
    d.read_encoder_stream(&partial).unwrap();
    d.read_encoder_stream(&[b'a'; 500]).unwrap();
    assert_eq!(d.table().insert_count(), 0, "still waiting for the name");
    // 4 x 220 is the longest string allowed.
    let mut too_long = hex("3fbd01");
    write_int(&mut too_long, 0x40, 5, 881);
    assert_eq!(
        encoder_stream_error(&too_long),
        ErrorCode::QpackEncoderStreamError
    );
}

#[test]
fn bad_field_sections_are_decompression_failures() {
    let mut d = appendix_b_decoder();
    d.read_encoder_stream(&hex(B2_ENCODER)).unwrap();
    for (what, section) in [
        ("empty", hex("")),
        ("prefix cut", hex("03")),
        ("insert count past the range", hex("0d00")),
        ("base below zero", hex("0383 10")),
        ("static index past the table", hex("0000 ff24")),
        ("relative index past the base", hex("0381 80")),
        ("post-base index at the insert count", hex("0381 12")),
        ("insert count larger than needed", hex("0381 10")),
        ("line cut", hex("0000 51")),
        ("value cut", hex("0000 5105 2f")),
        ("literal name cut", hex("0000 2f")),
        ("bad huffman value", hex("0000 5181 00")),
        ("post-base name reference past it", hex("0381 0201 61")),
    ] {
        assert_eq!(
            decoder_error(&mut d, &section),
            ErrorCode::QpackDecompressionFailed,
            "{what}"
        );
    }
    // A reference to an evicted entry: capacity shrunk to nothing.
    d.read_encoder_stream(&hex("20")).unwrap();
    assert_eq!(
        decoder_error(&mut d, &hex("0381 10 11")),
        ErrorCode::QpackDecompressionFailed
    );
}

#[test]
fn every_field_line_form_decodes() {
    let mut d = appendix_b_decoder();
    d.read_encoder_stream(&hex(B2_ENCODER)).unwrap();
    // Required Insert Count 2, Base 1: entry 0 by relative index, entry 1
    // post-base; literal with dynamic name (relative 0 -> entry 0), with
    // post-base name (entry 1), with literal name and never-index bits.
    let mut s = hex("03 00");
    s.truncate(1);
    s.push(0x80); // Base = 2 - 0 - 1 = 1
    s.push(0x80); // indexed, dynamic, relative 0 -> absolute 0
    s.push(0x10); // indexed post-base 0 -> absolute 1
    s.push(0x60); // literal, N=1, dynamic name relative 0
    write_raw_string(&mut s, 0, 7, b"a.test");
    s.push(0x08); // literal, N=1, post-base name 0
    write_raw_string(&mut s, 0, 7, b"/p");
    write_raw_string(&mut s, 0x30, 3, b"x-y"); // literal name, N=1
    write_raw_string(&mut s, 0, 7, b"z");
    let mut got = Vec::new();
    d.decode_section(0, &s, &mut |n, v, never| {
        got.push((n.to_vec(), v.to_vec(), never))
    })
    .unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>, bool)> = [
        (":authority", "www.example.com", false),
        (":path", "/sample/path", false),
        (":authority", "a.test", true),
        (":path", "/p", true),
        ("x-y", "z", true),
    ]
    .iter()
    .map(|(n, v, b)| (n.as_bytes().to_vec(), v.as_bytes().to_vec(), *b))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn blocked_sections_wait_for_inserts_within_the_limit() {
    let mut d = Decoder::new(DecoderLimits {
        max_table_capacity: 220,
        max_blocked_streams: 1,
        ..DecoderLimits::default()
    });
    let section = hex("0381 10 11");
    assert_eq!(
        decode(&mut d, 4, &section),
        (SectionOutcome::Blocked, vec![])
    );
    assert_eq!(d.blocked_streams(), 1);
    // A second blocked stream is one too many.
    assert_eq!(
        d.decode_section(8, &section, &mut |_, _, _| {})
            .unwrap_err()
            .code,
        ErrorCode::QpackDecompressionFailed
    );
    assert!(d.take_unblocked().is_none());
    // Half the inserts: still blocked. All of them: handed back.
    let b2 = hex(B2_ENCODER);
    d.read_encoder_stream(&b2[..20]).unwrap();
    assert!(d.take_unblocked().is_none());
    d.read_encoder_stream(&b2[20..]).unwrap();
    let (stream, bytes) = d.take_unblocked().expect("unblocked");
    assert_eq!((stream, &bytes[..]), (4, &section[..]));
    assert_eq!(d.blocked_streams(), 0);
    let (outcome, got) = decode(&mut d, stream, &bytes);
    assert_eq!(outcome, SectionOutcome::Decoded);
    assert_eq!(got.len(), 2);
    assert_eq!(
        decoder_stream(&mut d),
        [0x84],
        "acknowledged, no increment needed"
    );
}

#[test]
fn a_cancelled_stream_drops_its_blocked_section() {
    let mut d = appendix_b_decoder();
    assert_eq!(
        decode(&mut d, 4, &hex("0381 10 11")).0,
        SectionOutcome::Blocked
    );
    d.stream_cancelled(4);
    assert_eq!(d.blocked_streams(), 0);
    d.read_encoder_stream(&hex(B2_ENCODER)).unwrap();
    assert!(d.take_unblocked().is_none());
    assert_eq!(decoder_stream(&mut d), [0x44, 0x02]);
}

#[test]
fn the_field_section_size_limit_stops_decoding_midway() {
    let mut d = Decoder::new(DecoderLimits {
        max_table_capacity: 220,
        max_field_section_size: 100,
        ..DecoderLimits::default()
    });
    d.read_encoder_stream(&hex(B2_ENCODER)).unwrap();
    decoder_stream(&mut d);
    // Each of the two entries counts 53 or so: the second passes 100.
    let mut seen = 0;
    let outcome = d
        .decode_section(4, &hex("0381 10 11"), &mut |_, _, _| seen += 1)
        .unwrap();
    assert_eq!((outcome, seen), (SectionOutcome::TooLarge, 1));
    assert_eq!(
        decoder_stream(&mut d),
        [0x84],
        "the inserts it needed are acknowledged"
    );
    // A long literal is refused before anything past the limit is handed out.
    let mut s = hex("0000");
    write_raw_string(&mut s, 0x20, 3, b"x-long");
    write_raw_string(&mut s, 0, 7, &[b'v'; 200]);
    let mut seen = 0;
    let outcome = d.decode_section(8, &s, &mut |_, _, _| seen += 1).unwrap();
    assert_eq!((outcome, seen), (SectionOutcome::TooLarge, 0));
}

#[test]
fn bad_decoder_instructions_are_decoder_stream_errors() {
    let mut e = Encoder::new();
    e.set_peer_max_table_capacity(220);
    e.encode_section(
        0,
        &mut [(&b"x-a"[..], &b"1"[..])].into_iter(),
        &mut Vec::new(),
    );
    let mut bad = Vec::new();
    for i in [
        DecoderInstruction::InsertCountIncrement(0),
        DecoderInstruction::InsertCountIncrement(2),
        DecoderInstruction::SectionAck(0),
    ] {
        bad.clear();
        write_decoder_instruction(i, &mut bad);
        let mut e2 = Encoder::new();
        e2.set_peer_max_table_capacity(220);
        e2.encode_section(
            0,
            &mut [(&b"x-a"[..], &b"1"[..])].into_iter(),
            &mut Vec::new(),
        );
        assert_eq!(
            e2.read_decoder_stream(&bad).unwrap_err().code,
            ErrorCode::QpackDecoderStreamError,
            "{i:?}"
        );
    }
    // A cancellation of a stream with nothing outstanding is fine.
    e.read_decoder_stream(&[0x44]).unwrap();
    // An integer that overflows.
    let code = e
        .read_decoder_stream(&hex("ff ffffffffffffffffff01"))
        .unwrap_err()
        .code;
    assert_eq!(code, ErrorCode::QpackDecoderStreamError);
    // Split instructions are completed across reads.
    let mut e = Encoder::new();
    e.set_peer_max_table_capacity(220);
    e.encode_section(
        0,
        &mut [(&b"x-a"[..], &b"1"[..])].into_iter(),
        &mut Vec::new(),
    );
    let mut inc = Vec::new();
    write_decoder_instruction(DecoderInstruction::InsertCountIncrement(1), &mut inc);
    e.read_decoder_stream(&inc).unwrap();
    assert_eq!(e.known_received(), 1);
}
