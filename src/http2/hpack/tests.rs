//! The RFC 7541 Appendix C examples, every decoding error, and round trips
//! from the encoder through the decoder.

use super::table::DynamicTable;
use super::{DecodeError, Decoder};

/// Octets from the RFC's hex dumps (spaces ignored).
fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

type Fields = Vec<(String, String)>;

fn fields(list: &[(&str, &str)]) -> Fields {
    list.iter()
        .map(|&(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn decode(d: &mut Decoder, block: &[u8]) -> Result<Fields, DecodeError> {
    let mut out = Vec::new();
    d.decode(block, &mut |n, v| {
        out.push((
            String::from_utf8(n.to_vec()).unwrap(),
            String::from_utf8(v.to_vec()).unwrap(),
        ))
    })?;
    Ok(out)
}

/// The table's entries, newest first, and its size.
fn table(t: &DynamicTable) -> (Fields, usize) {
    let entries = (0..t.len())
        .map(|i| {
            let (n, v) = t.get(i).unwrap();
            (
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect();
    (entries, t.size())
}

#[test]
fn c2_literal_representations() {
    let mut d = Decoder::new(4096);
    let block = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    assert_eq!(
        decode(&mut d, &block),
        Ok(fields(&[("custom-key", "custom-header")]))
    );
    assert_eq!(
        table(d.table()),
        (fields(&[("custom-key", "custom-header")]), 55)
    );

    let mut d = Decoder::new(4096);
    let block = hex("040c 2f73 616d 706c 652f 7061 7468");
    assert_eq!(
        decode(&mut d, &block),
        Ok(fields(&[(":path", "/sample/path")]))
    );
    assert_eq!(d.table().len(), 0);

    let block = hex("1008 7061 7373 776f 7264 0673 6563 7265 74");
    assert_eq!(
        decode(&mut d, &block),
        Ok(fields(&[("password", "secret")]))
    );
    assert_eq!(d.table().len(), 0);

    assert_eq!(decode(&mut d, &[0x82]), Ok(fields(&[(":method", "GET")])));
    assert_eq!(d.table().len(), 0);
}

/// The three requests of C.3 (raw) or C.4 (Huffman) through one decoder.
fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(4096);
    let first = fields(&[
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
    ]);
    assert_eq!(decode(&mut d, &hex(blocks[0])), Ok(first.clone()));
    assert_eq!(
        table(d.table()),
        (fields(&[(":authority", "www.example.com")]), 57)
    );

    let mut second = first;
    second.push(("cache-control".into(), "no-cache".into()));
    assert_eq!(decode(&mut d, &hex(blocks[1])), Ok(second));
    assert_eq!(
        table(d.table()),
        (
            fields(&[
                ("cache-control", "no-cache"),
                (":authority", "www.example.com")
            ]),
            110
        )
    );

    let third = fields(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/index.html"),
        (":authority", "www.example.com"),
        ("custom-key", "custom-value"),
    ]);
    assert_eq!(decode(&mut d, &hex(blocks[2])), Ok(third));
    assert_eq!(
        table(d.table()),
        (
            fields(&[
                ("custom-key", "custom-value"),
                ("cache-control", "no-cache"),
                (":authority", "www.example.com")
            ]),
            164
        )
    );
}

#[test]
fn c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

/// The three responses of C.5 (raw) or C.6 (Huffman) through one decoder
/// with a 256-octet table: the second and third evict entries.
fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new(256);
    let first = fields(&[
        (":status", "302"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ]);
    assert_eq!(decode(&mut d, &hex(blocks[0])), Ok(first));
    assert_eq!(
        table(d.table()),
        (
            fields(&[
                ("location", "https://www.example.com"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("cache-control", "private"),
                (":status", "302"),
            ]),
            222
        )
    );

    let second = fields(&[
        (":status", "307"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ]);
    assert_eq!(decode(&mut d, &hex(blocks[1])), Ok(second));
    assert_eq!(
        table(d.table()),
        (
            fields(&[
                (":status", "307"),
                ("location", "https://www.example.com"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("cache-control", "private"),
            ]),
            222
        )
    );

    let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
    let third = fields(&[
        (":status", "200"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
        ("location", "https://www.example.com"),
        ("content-encoding", "gzip"),
        ("set-cookie", cookie),
    ]);
    assert_eq!(decode(&mut d, &hex(blocks[2])), Ok(third));
    assert_eq!(
        table(d.table()),
        (
            fields(&[
                ("set-cookie", cookie),
                ("content-encoding", "gzip"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ]),
            215
        )
    );
}

#[test]
fn c5_responses_without_huffman() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
         3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

fn decode_err(d: &mut Decoder, block: &[u8]) -> DecodeError {
    decode(d, block).expect_err("the block is malformed")
}

#[test]
fn integer_overflow_is_refused() {
    let mut d = Decoder::new(4096);
    // Index 127 + 2^35: past 32 bits.
    assert_eq!(
        decode_err(&mut d, &[0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]),
        DecodeError::IntegerOverflow
    );
    // Within five continuation octets but above u32::MAX.
    assert_eq!(
        decode_err(&mut d, &[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
        DecodeError::IntegerOverflow
    );
    // A string length that overflows.
    assert_eq!(
        decode_err(&mut d, &[0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0x7f]),
        DecodeError::IntegerOverflow
    );
    // The largest accepted integer decodes (then names no entry).
    assert_eq!(
        decode_err(&mut d, &[0xff, 0x80, 0xff, 0xff, 0xff, 0x0f]),
        DecodeError::IndexOutOfRange
    );
}

#[test]
fn index_zero_is_refused() {
    let mut d = Decoder::new(4096);
    assert_eq!(decode_err(&mut d, &[0x80]), DecodeError::IndexZero);
}

#[test]
fn index_past_the_tables_is_refused() {
    let mut d = Decoder::new(4096);
    // 62 is the first dynamic index; the table is empty.
    assert_eq!(decode_err(&mut d, &[0xbe]), DecodeError::IndexOutOfRange);
    // A literal whose name index is past the end.
    assert_eq!(
        decode_err(&mut d, &[0x7e, 0x01, b'x']),
        DecodeError::IndexOutOfRange
    );
    assert_eq!(
        decode_err(&mut d, &[0x0f, 0x2f, 0x01, b'x']),
        DecodeError::IndexOutOfRange
    );
    // Once an entry is added, 62 names it and 63 is past the end.
    decode(&mut d, &[0x40, 0x01, b'a', 0x01, b'b']).unwrap();
    assert_eq!(decode(&mut d, &[0xbe]), Ok(fields(&[("a", "b")])));
    assert_eq!(decode_err(&mut d, &[0xbf]), DecodeError::IndexOutOfRange);
}

#[test]
fn huffman_errors_are_refused() {
    let mut d = Decoder::new(4096);
    // Value: 'a' (00011) then EOS (30 ones) then 5 ones of padding.
    let mut block = vec![0x04 | 0x01, 0x85];
    block.extend_from_slice(&[0x1f, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(decode_err(&mut d, &block), DecodeError::HuffmanEos);
    // Value: 'a' then 0 bits of padding, all ones expected.
    assert_eq!(
        decode_err(&mut d, &[0x04, 0x81, 0b0001_1000]),
        DecodeError::HuffmanPadding
    );
    // Value: 'a' then eleven one bits.
    assert_eq!(
        decode_err(&mut d, &[0x04, 0x82, 0b0001_1111, 0xff]),
        DecodeError::HuffmanPadding
    );
    // The Huffman name of a literal is checked too.
    assert_eq!(
        decode_err(&mut d, &[0x40, 0x81, 0xff, 0x00]),
        DecodeError::HuffmanPadding
    );
}

#[test]
fn table_size_updates() {
    let mut d = Decoder::new(4096);
    decode(&mut d, &[0x40, 0x01, b'a', 0x01, b'b']).unwrap();
    // Several updates at the start: down to 0 evicts everything, then back.
    assert_eq!(
        decode(&mut d, &[0x20, 0x3f, 0xe1, 0x1f, 0x82]),
        Ok(fields(&[(":method", "GET")]))
    );
    assert_eq!(table(d.table()), (vec![], 0));
    assert_eq!(d.table().max_size(), 4096);
    // Exactly the maximum is allowed, one more is not.
    assert_eq!(decode(&mut d, &[0x3f, 0xe1, 0x1f]), Ok(vec![]));
    assert_eq!(
        decode_err(&mut d, &[0x3f, 0xe2, 0x1f]),
        DecodeError::TableSizeAboveMax
    );
    // A smaller table holds fewer entries: 34 octets each, 70 holds two.
    assert_eq!(decode(&mut d, &[0x3f, 0x27]), Ok(vec![]));
    for c in b"xyz" {
        decode(&mut d, &[0x40, 0x01, *c, 0x01, b'1']).unwrap();
    }
    assert_eq!(table(d.table()), (fields(&[("z", "1"), ("y", "1")]), 68));
}

#[test]
fn table_size_update_after_a_field_is_refused() {
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode_err(&mut d, &[0x82, 0x20]),
        DecodeError::TableSizeUpdateNotAtStart
    );
    // Also in a block that started with an update.
    assert_eq!(
        decode_err(&mut d, &[0x20, 0x82, 0x3f, 0x01]),
        DecodeError::TableSizeUpdateNotAtStart
    );
}

#[test]
fn truncated_blocks_are_refused() {
    let mut d = Decoder::new(4096);
    for block in [
        &[0xff][..],         // index continues past the end
        &[0xff, 0x80],       // still continues
        &[0x40],             // no name string
        &[0x40, 0x01, b'a'], // no value string
        &[0x00, 0x7f],       // name length continues past the end
        &[0x3f],             // size update continues past the end
        &[0x10, 0x01, b'a'], // never indexed without a value
        &[0x41],             // indexed name without a value
    ] {
        assert_eq!(
            decode_err(&mut d, block),
            DecodeError::Truncated,
            "{block:x?}"
        );
    }
}

#[test]
fn strings_past_the_end_are_refused() {
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode_err(&mut d, &[0x40, 0x05, b'a', b'b']),
        DecodeError::StringPastEnd
    );
    assert_eq!(
        decode_err(&mut d, &[0x01, 0x83, 0xff]),
        DecodeError::StringPastEnd
    );
    // Nothing of a refused literal reaches the table.
    assert_eq!(d.table().len(), 0);
}

#[test]
fn every_error_has_a_sentence() {
    for e in [
        DecodeError::IntegerOverflow,
        DecodeError::IndexZero,
        DecodeError::IndexOutOfRange,
        DecodeError::HuffmanEos,
        DecodeError::HuffmanPadding,
        DecodeError::TableSizeAboveMax,
        DecodeError::TableSizeUpdateNotAtStart,
        DecodeError::Truncated,
        DecodeError::StringPastEnd,
    ] {
        let s = e.to_string();
        assert!(s.starts_with(char::is_uppercase) && s.ends_with('.'), "{s}");
    }
}

#[test]
fn eviction_follows_insertion_order_and_sizes() {
    // 100 octets: "aaaa: 1111" is 40, so two fit and the third evicts the
    // first; a wrong eviction shows up as the wrong field at index 62/63.
    let mut d = Decoder::new(100);
    let lit = |n: &[u8; 4], v: &[u8; 4]| {
        let mut b = vec![0x40, 0x04];
        b.extend_from_slice(n);
        b.push(0x04);
        b.extend_from_slice(v);
        b
    };
    decode(&mut d, &lit(b"aaaa", b"1111")).unwrap();
    decode(&mut d, &lit(b"bbbb", b"2222")).unwrap();
    assert_eq!(
        decode(&mut d, &[0xbe, 0xbf]),
        Ok(fields(&[("bbbb", "2222"), ("aaaa", "1111")]))
    );
    decode(&mut d, &lit(b"cccc", b"3333")).unwrap();
    assert_eq!(
        decode(&mut d, &[0xbe, 0xbf]),
        Ok(fields(&[("cccc", "3333"), ("bbbb", "2222")]))
    );
    assert_eq!(decode_err(&mut d, &[0xc0]), DecodeError::IndexOutOfRange);
    // An entry larger than the table empties it and is not added.
    let mut big = vec![0x40, 0x04, b'd', b'd', b'd', b'd', 0x41];
    big.extend_from_slice(&[b'4'; 65]);
    let got = decode(&mut d, &big).unwrap();
    assert_eq!(got[0].1.len(), 65);
    assert_eq!(table(d.table()), (vec![], 0));
}

#[test]
fn a_name_from_an_entry_the_insertion_evicts_is_kept() {
    // §4.4: the new entry may refer to the name of the entry it evicts.
    let mut d = Decoder::new(40);
    decode(&mut d, &[0x40, 0x04, b'n', b'a', b'm', b'e', 0x01, b'1']).unwrap();
    // Name index 62 ("name"), value "2": 37 octets, evicts "name: 1" first.
    assert_eq!(
        decode(&mut d, &[0x7e, 0x01, b'2']),
        Ok(fields(&[("name", "2")]))
    );
    assert_eq!(table(d.table()), (fields(&[("name", "2")]), 37));
}

#[test]
fn fields_ignored_by_the_caller_still_update_the_table() {
    let mut d = Decoder::new(4096);
    let block = hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff");
    d.decode(&block, &mut |_, _| {}).unwrap();
    assert_eq!(
        decode(&mut d, &[0xbe]),
        Ok(fields(&[(":authority", "www.example.com")]))
    );
}

#[test]
fn random_blocks_never_panic() {
    // Seeded xorshift: random octets, mostly small indices and lengths so
    // that many blocks get past the first representation.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for max in [0u32, 64, 4096] {
        let mut d = Decoder::new(max);
        for _ in 0..20_000 {
            let len = (next() % 24) as usize;
            let block: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    match r % 4 {
                        0 => r as u8 >> 4,
                        1 => 0x40 | (r >> 8) as u8 & 0x3f,
                        _ => (r >> 16) as u8,
                    }
                })
                .collect();
            let _ = d.decode(&block, &mut |_, _| {});
            let t = d.table();
            assert!(t.size() <= t.max_size() && t.max_size() <= max as usize);
        }
    }
}

/// Decodes with the memo: the fields, or `None` when the block was the
/// remembered one again.
fn decode_memo(d: &mut Decoder, block: &[u8]) -> Result<Option<Fields>, DecodeError> {
    let mut out = Vec::new();
    let repeated = d.decode_unless_repeated(block, &mut |n, v| {
        out.push((
            String::from_utf8(n.to_vec()).unwrap(),
            String::from_utf8(v.to_vec()).unwrap(),
        ))
    })?;
    Ok((!repeated).then_some(out))
}

#[test]
fn a_block_is_taken_as_repeated_only_when_the_table_is_as_it_left_it() {
    let mut d = Decoder::new(4096);
    // C.3.1 inserts `:authority www.example.com`: never repeated, though
    // the same bytes come twice (each time they insert again).
    let inserting = hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d");
    let first = decode_memo(&mut d, &inserting).unwrap().expect("decoded");
    assert_eq!(
        first[3],
        (":authority".to_string(), "www.example.com".to_string())
    );
    assert!(decode_memo(&mut d, &inserting).unwrap().is_some());
    assert_eq!(d.table().len(), 2);
    // Indices and a literal without indexing leave the table as it was.
    let plain = hex("8286 84be 0f2b 0568 656c 6c6f");
    let want = fields(&[
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
        ("user-agent", "hello"),
    ]);
    assert_eq!(decode_memo(&mut d, &plain), Ok(Some(want.clone())));
    assert_eq!(
        decode_memo(&mut d, &plain),
        Ok(None),
        "the same block again"
    );
    assert_eq!(decode_memo(&mut d, &plain), Ok(None));
    // Another block in between, even one decoded without the memo, makes
    // the next one new.
    assert_eq!(
        decode(&mut d, &hex("82")),
        Ok(fields(&[(":method", "GET")]))
    );
    assert_eq!(decode_memo(&mut d, &plain), Ok(Some(want.clone())));
    assert_eq!(
        decode_memo(&mut d, &hex("8287")).unwrap().map(|f| f.len()),
        Some(2)
    );
    assert_eq!(decode_memo(&mut d, &plain), Ok(Some(want.clone())));
    // A block that changes the table (here the same fields after an
    // insertion) is decoded again, with the indices it now names.
    assert!(decode_memo(&mut d, &inserting).unwrap().is_some());
    let shifted = decode_memo(&mut d, &plain).unwrap().expect("decoded");
    assert_eq!(
        shifted[3],
        (":authority".to_string(), "www.example.com".to_string())
    );
    assert_eq!(decode_memo(&mut d, &plain), Ok(None));
    // A size update is a change of the table too.
    let resized = hex("3fe1 1f82");
    assert!(decode_memo(&mut d, &resized).unwrap().is_some());
    assert!(decode_memo(&mut d, &resized).unwrap().is_some());
    // An error forgets the block; so do the acknowledgement of our
    // SETTINGS and an idle release.
    assert_eq!(
        decode_memo(&mut d, &plain).unwrap().map(|f| f.len()),
        Some(5)
    );
    assert!(decode_memo(&mut d, &hex("ff")).is_err());
    assert!(decode_memo(&mut d, &plain).unwrap().is_some());
    d.settings_acknowledged();
    assert!(decode_memo(&mut d, &plain).unwrap().is_some());
    d.release_idle();
    assert!(decode_memo(&mut d, &plain).unwrap().is_some());
    assert_eq!(decode_memo(&mut d, &plain), Ok(None));
}
