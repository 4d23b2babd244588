//! Arbitrary header blocks never make the HPACK decoder panic or grow without
//! bound, and whatever it accepts re-encodes into blocks a second decoder
//! reads back as the same fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pier::http2::hpack::{Decoder, Encoder};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    // The first two octets pick our table size; the rest is a sequence of
    // blocks, each one length octet then that many octets.
    let max_table_size = u32::from(u16::from_le_bytes([data[0], data[1]]));
    let mut decoder = Decoder::new(max_table_size);
    let mut encoder = Encoder::default();
    let mut echo = Decoder::new(4096);
    let mut rest = &data[2..];
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len).min(tail.len());
        let (block, tail) = tail.split_at(len);
        rest = tail;
        let mut fields = Vec::new();
        if decoder
            .decode(block, &mut |n, v| fields.push((n.to_vec(), v.to_vec())))
            .is_err()
        {
            return;
        }
        let mut out = Vec::new();
        encoder.begin_block(&mut out);
        for (n, v) in &fields {
            encoder.encode_field(n, v, &mut out);
        }
        let mut again = Vec::new();
        echo.decode(&out, &mut |n, v| again.push((n.to_vec(), v.to_vec())))
            .expect("the encoder's own block decodes");
        assert_eq!(fields, again);
    }
});
