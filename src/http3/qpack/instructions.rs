//! The instructions of QPACK's two unidirectional streams: the encoder
//! stream's (RFC 9204 §4.3), which change the peer decoder's dynamic
//! table, and the decoder stream's (§4.4), which tell the encoder what the
//! decoder has seen. Both are read from a buffer that may end inside an
//! instruction, and written by the side that sends them.

use crate::http::field_coding::{read_int, read_string, write_int, write_string, ReadError};

/// An encoder-stream instruction (§4.3).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EncoderInstruction<'a> {
    /// Set Dynamic Table Capacity (§4.3.1).
    SetCapacity(u64),
    /// Insert with Name Reference (§4.3.2): the name of a static entry, or
    /// of a dynamic entry by relative index, with a new value.
    InsertWithNameRef {
        /// The name is the static table's.
        is_static: bool,
        /// Static index, or dynamic relative index.
        index: u64,
        /// The value.
        value: &'a [u8],
    },
    /// Insert with Literal Name (§4.3.3).
    InsertWithLiteralName {
        /// The name.
        name: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Duplicate (§4.3.4) the entry at this relative index.
    Duplicate(u64),
}

/// Reads one encoder instruction from the start of `buf`: the instruction
/// and its length. Strings whose encoded length passes `max_string` are
/// refused as soon as their length is read. `name_buf` and `value_buf`
/// hold Huffman-decoded strings.
pub(crate) fn read_encoder_instruction<'a>(
    buf: &'a [u8],
    max_string: usize,
    name_buf: &'a mut Vec<u8>,
    value_buf: &'a mut Vec<u8>,
) -> Result<(EncoderInstruction<'a>, usize), ReadError> {
    let &first = buf.first().ok_or(ReadError::Incomplete(1))?;
    let mut pos = 0;
    let instruction = if first & 0x80 != 0 {
        let index = read_int(buf, &mut pos, 6)?;
        let value = read_string(buf, &mut pos, 7, max_string, value_buf)?;
        EncoderInstruction::InsertWithNameRef {
            is_static: first & 0x40 != 0,
            index,
            value,
        }
    } else if first & 0x40 != 0 {
        let name = read_string(buf, &mut pos, 5, max_string, name_buf)?;
        let value = read_string(buf, &mut pos, 7, max_string, value_buf)?;
        EncoderInstruction::InsertWithLiteralName { name, value }
    } else if first & 0x20 != 0 {
        EncoderInstruction::SetCapacity(read_int(buf, &mut pos, 5)?)
    } else {
        EncoderInstruction::Duplicate(read_int(buf, &mut pos, 5)?)
    };
    Ok((instruction, pos))
}

/// Appends an encoder instruction.
pub(crate) fn write_encoder_instruction(i: &EncoderInstruction<'_>, out: &mut Vec<u8>) {
    match *i {
        EncoderInstruction::SetCapacity(c) => write_int(out, 0x20, 5, c),
        EncoderInstruction::InsertWithNameRef {
            is_static,
            index,
            value,
        } => {
            write_int(out, if is_static { 0xc0 } else { 0x80 }, 6, index);
            write_string(out, 0, 7, value);
        }
        EncoderInstruction::InsertWithLiteralName { name, value } => {
            write_string(out, 0x40, 5, name);
            write_string(out, 0, 7, value);
        }
        EncoderInstruction::Duplicate(index) => write_int(out, 0x00, 5, index),
    }
}

/// A decoder-stream instruction (§4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DecoderInstruction {
    /// Section Acknowledgment (§4.4.1) of the oldest unacknowledged field
    /// section on this stream.
    SectionAck(u64),
    /// Stream Cancellation (§4.4.2): the stream's sections will not be
    /// acknowledged.
    StreamCancel(u64),
    /// Insert Count Increment (§4.4.3).
    InsertCountIncrement(u64),
}

/// Reads one decoder instruction from the start of `buf`, with its length.
pub(crate) fn read_decoder_instruction(
    buf: &[u8],
) -> Result<(DecoderInstruction, usize), ReadError> {
    let &first = buf.first().ok_or(ReadError::Incomplete(1))?;
    let mut pos = 0;
    let instruction = if first & 0x80 != 0 {
        DecoderInstruction::SectionAck(read_int(buf, &mut pos, 7)?)
    } else if first & 0x40 != 0 {
        DecoderInstruction::StreamCancel(read_int(buf, &mut pos, 6)?)
    } else {
        DecoderInstruction::InsertCountIncrement(read_int(buf, &mut pos, 6)?)
    };
    Ok((instruction, pos))
}

/// Appends a decoder instruction.
pub(crate) fn write_decoder_instruction(i: DecoderInstruction, out: &mut Vec<u8>) {
    match i {
        DecoderInstruction::SectionAck(stream) => write_int(out, 0x80, 7, stream),
        DecoderInstruction::StreamCancel(stream) => write_int(out, 0x40, 6, stream),
        DecoderInstruction::InsertCountIncrement(n) => write_int(out, 0x00, 6, n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_one(buf: &[u8]) -> Result<(String, usize), ReadError> {
        let (mut n, mut v) = (Vec::new(), Vec::new());
        read_encoder_instruction(buf, 1000, &mut n, &mut v).map(|(i, len)| (format!("{i:?}"), len))
    }

    #[test]
    fn encoder_instructions_round_trip_at_every_split() {
        let all = [
            EncoderInstruction::SetCapacity(220),
            EncoderInstruction::InsertWithNameRef {
                is_static: true,
                index: 0,
                value: b"www.example.com",
            },
            EncoderInstruction::InsertWithNameRef {
                is_static: false,
                index: 70,
                value: b"",
            },
            EncoderInstruction::InsertWithLiteralName {
                name: b"custom-key",
                value: b"custom-value",
            },
            EncoderInstruction::Duplicate(2),
            EncoderInstruction::Duplicate(4000),
        ];
        for i in &all {
            let mut out = Vec::new();
            write_encoder_instruction(i, &mut out);
            assert_eq!(read_one(&out), Ok((format!("{i:?}"), out.len())));
            for cut in 0..out.len() {
                match read_one(&out[..cut]) {
                    Err(ReadError::Incomplete(need)) => assert!(need > cut && need <= out.len()),
                    other => panic!("{i:?} cut at {cut}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn rfc_9204_b2_set_capacity_bytes() {
        let mut out = Vec::new();
        write_encoder_instruction(&EncoderInstruction::SetCapacity(220), &mut out);
        assert_eq!(out, [0x3f, 0xbd, 0x01]);
    }

    #[test]
    fn decoder_instructions_round_trip() {
        for (i, bytes) in [
            (DecoderInstruction::SectionAck(4), &[0x84][..]),
            (DecoderInstruction::StreamCancel(8), &[0x48]),
            (DecoderInstruction::InsertCountIncrement(1), &[0x01]),
            (
                DecoderInstruction::SectionAck(1 << 40),
                &[0xff, 0x81, 0xff, 0xff, 0xff, 0xff, 0x1f],
            ),
        ] {
            let mut out = Vec::new();
            write_decoder_instruction(i, &mut out);
            assert_eq!(out, bytes, "{i:?}");
            assert_eq!(read_decoder_instruction(&out), Ok((i, out.len())));
        }
        assert_eq!(read_decoder_instruction(&[]), Err(ReadError::Incomplete(1)));
        assert!(matches!(
            read_decoder_instruction(&[0xff]),
            Err(ReadError::Incomplete(_))
        ));
    }
}
