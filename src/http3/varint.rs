//! QUIC's variable-length integers (RFC 9000 §16), which every HTTP/3 frame
//! type, length and most payload fields are written in: the two high bits
//! of the first byte give the length (1, 2, 4 or 8 bytes), the rest the
//! value, big-endian, up to 2^62 - 1.

/// The largest value a variable-length integer holds.
pub const MAX: u64 = (1 << 62) - 1;

/// The length of the integer that starts with `first`, from its two high
/// bits.
pub fn len_from_first(first: u8) -> usize {
    1 << (first >> 6)
}

/// Reads an integer at the start of `buf`: its value and length, or `None`
/// when `buf` ends before it does.
pub fn read(buf: &[u8]) -> Option<(u64, usize)> {
    let &first = buf.first()?;
    let len = len_from_first(first);
    let bytes = buf.get(..len)?;
    let mut value = u64::from(first & 0x3f);
    for &b in &bytes[1..] {
        value = (value << 8) | u64::from(b);
    }
    Some((value, len))
}

/// The number of bytes `value` takes: the shortest encoding.
pub fn encoded_len(value: u64) -> usize {
    match value {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends `value` in its shortest encoding. Values above [`MAX`] are a
/// bug of the caller; they are written as [`MAX`] in release builds.
pub fn write(value: u64, out: &mut Vec<u8>) {
    debug_assert!(value <= MAX, "varint {value} out of range");
    let value = value.min(MAX);
    match encoded_len(value) {
        1 => out.push(value as u8),
        2 => out.extend_from_slice(&(0x4000 | value as u16).to_be_bytes()),
        4 => out.extend_from_slice(&(0x8000_0000 | value as u32).to_be_bytes()),
        _ => out.extend_from_slice(&(0xc000_0000_0000_0000 | value).to_be_bytes()),
    }
}

/// A variable-length integer read a byte at a time from input split
/// anywhere (a stream type, a frame header's fields): at most 8 bytes held.
#[derive(Clone, Copy, Debug, Default)]
pub struct PartialVarint {
    bytes: [u8; 8],
    len: usize,
}

impl PartialVarint {
    /// Takes bytes from `input` until the integer is whole: the value once
    /// it is, and how many bytes were taken either way.
    pub fn feed(&mut self, input: &[u8]) -> (Option<u64>, usize) {
        let mut taken = 0;
        for &b in input {
            self.bytes[self.len] = b;
            self.len += 1;
            taken += 1;
            if self.len == len_from_first(self.bytes[0]) {
                let value = read(&self.bytes[..self.len]).map(|(v, _)| v);
                self.len = 0;
                return (value, taken);
            }
        }
        (None, taken)
    }

    /// Some bytes of an integer are held.
    pub fn is_started(&self) -> bool {
        self.len > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_9000_a1_examples() {
        let cases: [(&[u8], u64); 4] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (bytes, value) in cases {
            assert_eq!(read(bytes), Some((value, bytes.len())));
            let mut out = Vec::new();
            write(value, &mut out);
            assert_eq!(out, bytes, "{value}");
        }
        // A two-byte encoding of 37 is allowed, if not the shortest.
        assert_eq!(read(&[0x40, 0x25]), Some((37, 2)));
    }

    #[test]
    fn boundaries_round_trip_in_their_shortest_form() {
        for v in [0, 63, 64, 16_383, 16_384, 1_073_741_823, 1_073_741_824, MAX] {
            let mut out = Vec::new();
            write(v, &mut out);
            assert_eq!(out.len(), encoded_len(v));
            assert_eq!(read(&out), Some((v, out.len())));
            assert_eq!(read(&out[..out.len() - 1]), None, "truncated {v}");
        }
        assert_eq!(read(&[]), None);
    }

    #[test]
    fn a_partial_integer_is_completed_across_pieces() {
        let bytes = [0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c, 0x99];
        for split in 0..8 {
            let mut p = PartialVarint::default();
            let (v, n) = p.feed(&bytes[..split]);
            assert_eq!((v, n), (None, split));
            assert_eq!(p.is_started(), split > 0);
            let (v, n) = p.feed(&bytes[split..]);
            assert_eq!(v, Some(151_288_809_941_952_652));
            assert_eq!(n, 8 - split, "stops at the integer's end");
        }
    }
}
