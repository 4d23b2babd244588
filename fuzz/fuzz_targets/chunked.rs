//! The body decoder gives the same body and the same outcome whether the input
//! arrives whole, split at a fuzzer-chosen point, or one byte at a time.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pier::http1::{BodyDecoder, BodyError, BodyKind};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let split = usize::from(u16::from_le_bytes([data[0], data[1]]));
    let limit = data[2];
    let input = &data[3..];
    let split = split % (input.len() + 1);
    // Sometimes a body limit, so the 413 path is split-invariant too.
    let make = || {
        let d = BodyDecoder::new(BodyKind::Chunked);
        if limit & 0x80 != 0 {
            d.with_max_body(u64::from(limit & 0x7f))
        } else {
            d
        }
    };

    let whole = decode(make(), input, &[input.len()]);
    let two = decode(make(), input, &[split, input.len()]);
    assert_eq!(whole, two, "split at {split}");
    if input.len() <= 512 {
        let points: Vec<usize> = (1..=input.len()).collect();
        assert_eq!(whole, decode(make(), input, &points), "byte at a time");
    }
});

/// Body bytes and outcome: Ok((done, consumed)) or the error.
fn decode(
    mut d: BodyDecoder,
    input: &[u8],
    ends: &[usize],
) -> (Vec<u8>, Result<(bool, usize), BodyError>) {
    let mut body = Vec::new();
    let mut pos = 0;
    for &end in ends {
        while pos < end {
            match d.decode(&input[pos..end]) {
                Err(e) => return (body, Err(e)),
                Ok(r) => {
                    assert!(r.consumed <= end - pos);
                    assert!(r.data.len() <= r.consumed);
                    body.extend_from_slice(r.data);
                    pos += r.consumed;
                    if r.done {
                        return (body, Ok((true, pos)));
                    }
                    assert!(r.consumed > 0, "no progress on non-empty input");
                }
            }
        }
    }
    (body, Ok((false, pos)))
}
