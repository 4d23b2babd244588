//! The primitives HPACK (RFC 7541 §5) and QPACK (RFC 9204 §4.1) share:
//! integers with an N-bit prefix (up to 32 bits in HPACK, 62 in QPACK) and
//! string literals whose Huffman flag sits just above a length prefix (7
//! bits in HPACK; 7, 5 or 3 in QPACK), in the one Huffman code
//! (`huffman`).
//!
//! The readers work on a buffer that may end early (a QPACK instruction
//! stream read in pieces): they say how many bytes would let them go on,
//! so the caller waits for that many before trying again.

use super::huffman::{self, HuffmanError};

/// Why a primitive could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The buffer ends first; at least this many bytes (from its start)
    /// are needed.
    Incomplete(usize),
    /// An integer above 2^62 - 1, or longer than any such.
    IntegerOverflow,
    /// A string longer than the caller allows.
    StringTooLong,
    /// A Huffman-coded string that does not decode.
    Huffman(HuffmanError),
}

/// The largest integer QPACK reads: what a QUIC stream id or count can be.
pub(crate) const MAX_QPACK_INT: u64 = (1 << 62) - 1;

/// Reads an integer with a `prefix_bits`-bit prefix starting at `*pos`
/// (which must be in `buf`), moving `*pos` past it; QPACK's limit.
pub(crate) fn read_int(buf: &[u8], pos: &mut usize, prefix_bits: u8) -> Result<u64, ReadError> {
    read_int_up_to(buf, pos, prefix_bits, MAX_QPACK_INT)
}

/// Reads an integer as [`read_int`] does, refusing values above `max` (at
/// most 2^62 - 1) and encodings longer than any value up to it needs.
pub(crate) fn read_int_up_to(
    buf: &[u8],
    pos: &mut usize,
    prefix_bits: u8,
    max: u64,
) -> Result<u64, ReadError> {
    let max_bits = 64 - max.leading_zeros();
    let mask = (1u16 << prefix_bits) - 1;
    let mut at = *pos;
    let mut value = u64::from(u16::from(buf[at]) & mask);
    at += 1;
    if value < u64::from(mask) {
        *pos = at;
        return Ok(value);
    }
    let mut shift = 0u32;
    loop {
        let &byte = buf.get(at).ok_or(ReadError::Incomplete(at + 1))?;
        at += 1;
        if shift >= max_bits {
            return Err(ReadError::IntegerOverflow);
        }
        value += u64::from(byte & 0x7f) << shift;
        if value > max {
            return Err(ReadError::IntegerOverflow);
        }
        if byte & 0x80 == 0 {
            *pos = at;
            return Ok(value);
        }
        shift += 7;
    }
}

/// Reads a string literal whose Huffman flag is the bit above a
/// `prefix_bits`-bit length, starting at `*pos`: a slice of `buf` when raw,
/// of `scratch` when Huffman-coded. Strings whose encoded length passes
/// `max_len` are refused before anything is read or decoded.
pub(crate) fn read_string<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    prefix_bits: u8,
    max_len: usize,
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], ReadError> {
    let &first = buf.get(*pos).ok_or(ReadError::Incomplete(*pos + 1))?;
    let mut at = *pos;
    let len = read_int(buf, &mut at, prefix_bits)?;
    if len > max_len as u64 {
        return Err(ReadError::StringTooLong);
    }
    let len = len as usize;
    let raw = buf
        .get(at..at + len)
        .ok_or(ReadError::Incomplete(at + len))?;
    *pos = at + len;
    if first & (1 << prefix_bits) == 0 {
        return Ok(raw);
    }
    scratch.clear();
    huffman::decode(raw, scratch).map_err(ReadError::Huffman)?;
    Ok(scratch)
}

/// Appends `value` with a `prefix_bits`-bit prefix (the shortest form);
/// `first` holds the bits above the prefix.
pub(crate) fn write_int(out: &mut Vec<u8>, first: u8, prefix_bits: u8, value: u64) {
    let mask = (1u16 << prefix_bits) - 1;
    let max = u64::from(mask);
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | mask as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends a string literal with a `prefix_bits`-bit length, Huffman-coded
/// when that is shorter; `first` holds the bits above the flag.
pub(crate) fn write_string(out: &mut Vec<u8>, first: u8, prefix_bits: u8, s: &[u8]) {
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        write_int(out, first | (1 << prefix_bits), prefix_bits, coded as u64);
        huffman::encode(s, out);
    } else {
        write_int(out, first, prefix_bits, s.len() as u64);
        out.extend_from_slice(s);
    }
}

/// Fields whose values no compressor should store, in HPACK's table or
/// QPACK's (RFC 7541 §7.1.3, RFC 9204 §7.1.3): they are sent with the
/// never-index bit.
pub(crate) fn is_sensitive(name: &[u8]) -> bool {
    matches!(
        name,
        b"set-cookie" | b"cookie" | b"authorization" | b"proxy-authorization"
    )
}

/// Appends a raw string literal (no Huffman), as the RFC's examples write
/// them.
#[cfg(test)]
pub(crate) fn write_raw_string(out: &mut Vec<u8>, first: u8, prefix_bits: u8, s: &[u8]) {
    write_int(out, first, prefix_bits, s.len() as u64);
    out.extend_from_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip_at_every_prefix() {
        for prefix in [3u8, 4, 5, 6, 7, 8] {
            for v in [
                0,
                1,
                6,
                7,
                8,
                30,
                31,
                62,
                63,
                126,
                127,
                128,
                255,
                256,
                1337,
                1 << 40,
                MAX_QPACK_INT,
            ] {
                let mut out = Vec::new();
                write_int(&mut out, 0, prefix, v);
                let mut pos = 0;
                assert_eq!(
                    read_int(&out, &mut pos, prefix),
                    Ok(v),
                    "{v} in {prefix} bits"
                );
                assert_eq!(pos, out.len());
                for cut in 1..out.len() {
                    let mut pos = 0;
                    assert!(matches!(
                        read_int(&out[..cut], &mut pos, prefix),
                        Err(ReadError::Incomplete(_))
                    ));
                    assert_eq!(pos, 0, "nothing taken from a short buffer");
                }
            }
        }
        // RFC 7541 C.1.2: 1337 in a 5-bit prefix.
        let mut out = Vec::new();
        write_int(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
    }

    #[test]
    fn integers_past_62_bits_are_refused() {
        let mut out = Vec::new();
        write_int(&mut out, 0, 7, MAX_QPACK_INT);
        *out.last_mut().unwrap() += 1;
        let mut pos = 0;
        assert_eq!(read_int(&out, &mut pos, 7), Err(ReadError::IntegerOverflow));
        let long = [
            0x7f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
        ];
        let mut pos = 0;
        assert_eq!(
            read_int(&long, &mut pos, 7),
            Err(ReadError::IntegerOverflow)
        );
    }

    #[test]
    fn hpack_limits_integers_to_32_bits() {
        let mut out = Vec::new();
        write_int(&mut out, 0, 5, u64::from(u32::MAX));
        let mut pos = 0;
        assert_eq!(
            read_int_up_to(&out, &mut pos, 5, u64::from(u32::MAX)),
            Ok(u64::from(u32::MAX))
        );
        let mut out = Vec::new();
        write_int(&mut out, 0, 5, u64::from(u32::MAX) + 1);
        let mut pos = 0;
        assert_eq!(
            read_int_up_to(&out, &mut pos, 5, u64::from(u32::MAX)),
            Err(ReadError::IntegerOverflow)
        );
        // Zero continuation bytes past what 32 bits need.
        let padded = [0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
        let mut pos = 0;
        assert_eq!(
            read_int_up_to(&padded, &mut pos, 5, u64::from(u32::MAX)),
            Err(ReadError::IntegerOverflow)
        );
    }

    #[test]
    fn strings_round_trip_raw_and_huffman() {
        let mut scratch = Vec::new();
        for s in [
            &b""[..],
            b"a",
            b"www.example.com",
            b"\x00\xff\x01",
            &[b'x'; 300],
        ] {
            for prefix in [3u8, 5, 7] {
                let mut out = Vec::new();
                write_string(&mut out, 0, prefix, s);
                let mut pos = 0;
                let got = read_string(&out, &mut pos, prefix, 1000, &mut scratch).unwrap();
                assert_eq!(got, s);
                assert_eq!(pos, out.len());
            }
        }
        let mut out = Vec::new();
        write_string(&mut out, 0, 7, b"www.example.com");
        assert_eq!(out[0], 0x80 | 12, "Huffman is shorter here");
    }

    #[test]
    fn a_short_or_long_string_is_reported_before_decoding() {
        let mut out = Vec::new();
        write_raw_string(&mut out, 0, 7, b"hello");
        let mut scratch = Vec::new();
        let mut pos = 0;
        assert_eq!(
            read_string(&out[..3], &mut pos, 7, 100, &mut scratch),
            Err(ReadError::Incomplete(6))
        );
        assert_eq!(
            read_string(&out, &mut pos, 7, 4, &mut scratch),
            Err(ReadError::StringTooLong)
        );
        // A length of 2^40 is refused at once, whatever follows.
        let mut huge = Vec::new();
        write_int(&mut huge, 0, 7, 1 << 40);
        assert_eq!(
            read_string(&huge, &mut pos, 7, 1 << 20, &mut scratch),
            Err(ReadError::StringTooLong)
        );
        // Bad Huffman padding.
        assert_eq!(
            read_string(&[0x81, 0x00], &mut pos, 7, 10, &mut scratch),
            Err(ReadError::Huffman(HuffmanError::Padding))
        );
    }
}
