//! Arbitrary encoder-stream instructions and field sections, interleaved on
//! several streams with cancellations, never make the QPACK decoder panic,
//! block more streams than allowed, or hand out a section past its size
//! limit; every section it decodes re-encodes through Pier's encoder into
//! one a second decoder reads back as the same fields without blocking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pier::http3::qpack::{Decoder, DecoderLimits, Encoder, SectionOutcome};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// The encoder and decoder pair that checks a decoded section round-trips.
struct Echo {
    encoder: Encoder,
    decoder: Decoder,
}

impl Echo {
    fn check(&mut self, stream: u64, fields: &Fields) {
        let mut section = Vec::new();
        self.encoder.encode_section(
            stream,
            &mut fields.iter().map(|(n, v)| (&n[..], &v[..])),
            &mut section,
        );
        let mut instructions = Vec::new();
        self.encoder.write_encoder_stream(&mut instructions);
        self.decoder
            .read_encoder_stream(&instructions)
            .expect("our encoder's instructions are valid");
        let mut again = Vec::new();
        let outcome = self
            .decoder
            .decode_section(stream, &section, &mut |n, v, _| again.push((n.to_vec(), v.to_vec())))
            .expect("our encoder's section decodes");
        assert_eq!(outcome, SectionOutcome::Decoded, "our encoder never blocks");
        assert_eq!(&again, fields);
        let mut acks = Vec::new();
        self.decoder.write_decoder_stream(&mut acks);
        self.encoder
            .read_decoder_stream(&acks)
            .expect("our decoder's instructions are valid");
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let limits = DecoderLimits {
        max_table_capacity: u64::from(u16::from_le_bytes([data[0], data[1]]) % 8192),
        max_blocked_streams: usize::from(data[2] % 8),
        max_field_section_size: 64 + u64::from(data[3]) * 64,
    };
    let mut decoder = Decoder::new(limits);
    let mut echo = Echo {
        encoder: Encoder::new(),
        decoder: Decoder::new(DecoderLimits {
            max_table_capacity: 4096,
            max_blocked_streams: 0,
            max_field_section_size: u64::MAX,
        }),
    };
    echo.encoder.set_peer_max_table_capacity(4096);
    let mut rest = &data[4..];
    let mut scratch = Vec::new();
    // Each step: an op byte (what, and on which stream), a length, the bytes.
    while let Some((&op, tail)) = rest.split_first() {
        let len = usize::from(tail.first().copied().unwrap_or(0)).min(tail.len().saturating_sub(1));
        let chunk = tail.get(1..1 + len).unwrap_or(&[]);
        rest = &tail[(1 + len).min(tail.len())..];
        let stream = u64::from(op >> 2) * 4;
        let mut sections: Vec<(u64, Vec<u8>)> = Vec::new();
        match op & 3 {
            0 => {
                if decoder.read_encoder_stream(chunk).is_err() {
                    return;
                }
            }
            1 => sections.push((stream, chunk.to_vec())),
            2 => decoder.stream_cancelled(stream),
            _ => {
                scratch.clear();
                decoder.write_decoder_stream(&mut scratch);
            }
        }
        while let Some(unblocked) = decoder.take_unblocked() {
            sections.push(unblocked);
        }
        for (stream, section) in sections {
            let mut fields = Vec::new();
            let mut size = 0u64;
            let outcome = decoder.decode_section(stream, &section, &mut |n, v, _| {
                size += (n.len() + v.len() + 32) as u64;
                fields.push((n.to_vec(), v.to_vec()));
            });
            match outcome {
                Err(_) => return,
                Ok(SectionOutcome::Decoded) => {
                    assert!(size <= limits.max_field_section_size);
                    echo.check(stream, &fields);
                }
                Ok(SectionOutcome::TooLarge) => assert!(size <= limits.max_field_section_size),
                Ok(SectionOutcome::Blocked) => assert!(fields.is_empty()),
            }
            assert!(decoder.blocked_streams() <= limits.max_blocked_streams);
        }
    }
});
