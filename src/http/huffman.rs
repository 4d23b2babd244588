//! The Huffman code of HPACK (RFC 7541 §5.2, Appendix B), which QPACK uses
//! unchanged (RFC 9204 §4.1.2): one implementation for HTTP/2 and HTTP/3.
//! Decoding goes four bits at a time through a state table built once from
//! the code, and encoding uses a 64-bit accumulator, so neither side walks a
//! tree bit by bit.

use std::sync::OnceLock;

/// Why a Huffman-coded string could not be decoded (RFC 7541 §5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HuffmanError {
    /// The string contains the EOS symbol.
    Eos,
    /// The string ends in padding longer than 7 bits or not made of one bits.
    Padding,
}

/// The canonical code, `(code, bit length)` for symbols 0..=255 and EOS
/// (256), as Appendix B lists them; the decoder's table is derived from it.
const CODES: [(u32, u8); 257] = [
    (0x1ff8, 13),
    (0x7fffd8, 23),
    (0xfffffe2, 28),
    (0xfffffe3, 28),
    (0xfffffe4, 28),
    (0xfffffe5, 28),
    (0xfffffe6, 28),
    (0xfffffe7, 28),
    (0xfffffe8, 28),
    (0xffffea, 24),
    (0x3ffffffc, 30),
    (0xfffffe9, 28),
    (0xfffffea, 28),
    (0x3ffffffd, 30),
    (0xfffffeb, 28),
    (0xfffffec, 28),
    (0xfffffed, 28),
    (0xfffffee, 28),
    (0xfffffef, 28),
    (0xffffff0, 28),
    (0xffffff1, 28),
    (0xffffff2, 28),
    (0x3ffffffe, 30),
    (0xffffff3, 28),
    (0xffffff4, 28),
    (0xffffff5, 28),
    (0xffffff6, 28),
    (0xffffff7, 28),
    (0xffffff8, 28),
    (0xffffff9, 28),
    (0xffffffa, 28),
    (0xffffffb, 28),
    (0x14, 6),
    (0x3f8, 10),
    (0x3f9, 10),
    (0xffa, 12),
    (0x1ff9, 13),
    (0x15, 6),
    (0xf8, 8),
    (0x7fa, 11),
    (0x3fa, 10),
    (0x3fb, 10),
    (0xf9, 8),
    (0x7fb, 11),
    (0xfa, 8),
    (0x16, 6),
    (0x17, 6),
    (0x18, 6),
    (0x0, 5),
    (0x1, 5),
    (0x2, 5),
    (0x19, 6),
    (0x1a, 6),
    (0x1b, 6),
    (0x1c, 6),
    (0x1d, 6),
    (0x1e, 6),
    (0x1f, 6),
    (0x5c, 7),
    (0xfb, 8),
    (0x7ffc, 15),
    (0x20, 6),
    (0xffb, 12),
    (0x3fc, 10),
    (0x1ffa, 13),
    (0x21, 6),
    (0x5d, 7),
    (0x5e, 7),
    (0x5f, 7),
    (0x60, 7),
    (0x61, 7),
    (0x62, 7),
    (0x63, 7),
    (0x64, 7),
    (0x65, 7),
    (0x66, 7),
    (0x67, 7),
    (0x68, 7),
    (0x69, 7),
    (0x6a, 7),
    (0x6b, 7),
    (0x6c, 7),
    (0x6d, 7),
    (0x6e, 7),
    (0x6f, 7),
    (0x70, 7),
    (0x71, 7),
    (0x72, 7),
    (0xfc, 8),
    (0x73, 7),
    (0xfd, 8),
    (0x1ffb, 13),
    (0x7fff0, 19),
    (0x1ffc, 13),
    (0x3ffc, 14),
    (0x22, 6),
    (0x7ffd, 15),
    (0x3, 5),
    (0x23, 6),
    (0x4, 5),
    (0x24, 6),
    (0x5, 5),
    (0x25, 6),
    (0x26, 6),
    (0x27, 6),
    (0x6, 5),
    (0x74, 7),
    (0x75, 7),
    (0x28, 6),
    (0x29, 6),
    (0x2a, 6),
    (0x7, 5),
    (0x2b, 6),
    (0x76, 7),
    (0x2c, 6),
    (0x8, 5),
    (0x9, 5),
    (0x2d, 6),
    (0x77, 7),
    (0x78, 7),
    (0x79, 7),
    (0x7a, 7),
    (0x7b, 7),
    (0x7ffe, 15),
    (0x7fc, 11),
    (0x3ffd, 14),
    (0x1ffd, 13),
    (0xffffffc, 28),
    (0xfffe6, 20),
    (0x3fffd2, 22),
    (0xfffe7, 20),
    (0xfffe8, 20),
    (0x3fffd3, 22),
    (0x3fffd4, 22),
    (0x3fffd5, 22),
    (0x7fffd9, 23),
    (0x3fffd6, 22),
    (0x7fffda, 23),
    (0x7fffdb, 23),
    (0x7fffdc, 23),
    (0x7fffdd, 23),
    (0x7fffde, 23),
    (0xffffeb, 24),
    (0x7fffdf, 23),
    (0xffffec, 24),
    (0xffffed, 24),
    (0x3fffd7, 22),
    (0x7fffe0, 23),
    (0xffffee, 24),
    (0x7fffe1, 23),
    (0x7fffe2, 23),
    (0x7fffe3, 23),
    (0x7fffe4, 23),
    (0x1fffdc, 21),
    (0x3fffd8, 22),
    (0x7fffe5, 23),
    (0x3fffd9, 22),
    (0x7fffe6, 23),
    (0x7fffe7, 23),
    (0xffffef, 24),
    (0x3fffda, 22),
    (0x1fffdd, 21),
    (0xfffe9, 20),
    (0x3fffdb, 22),
    (0x3fffdc, 22),
    (0x7fffe8, 23),
    (0x7fffe9, 23),
    (0x1fffde, 21),
    (0x7fffea, 23),
    (0x3fffdd, 22),
    (0x3fffde, 22),
    (0xfffff0, 24),
    (0x1fffdf, 21),
    (0x3fffdf, 22),
    (0x7fffeb, 23),
    (0x7fffec, 23),
    (0x1fffe0, 21),
    (0x1fffe1, 21),
    (0x3fffe0, 22),
    (0x1fffe2, 21),
    (0x7fffed, 23),
    (0x3fffe1, 22),
    (0x7fffee, 23),
    (0x7fffef, 23),
    (0xfffea, 20),
    (0x3fffe2, 22),
    (0x3fffe3, 22),
    (0x3fffe4, 22),
    (0x7ffff0, 23),
    (0x3fffe5, 22),
    (0x3fffe6, 22),
    (0x7ffff1, 23),
    (0x3ffffe0, 26),
    (0x3ffffe1, 26),
    (0xfffeb, 20),
    (0x7fff1, 19),
    (0x3fffe7, 22),
    (0x7ffff2, 23),
    (0x3fffe8, 22),
    (0x1ffffec, 25),
    (0x3ffffe2, 26),
    (0x3ffffe3, 26),
    (0x3ffffe4, 26),
    (0x7ffffde, 27),
    (0x7ffffdf, 27),
    (0x3ffffe5, 26),
    (0xfffff1, 24),
    (0x1ffffed, 25),
    (0x7fff2, 19),
    (0x1fffe3, 21),
    (0x3ffffe6, 26),
    (0x7ffffe0, 27),
    (0x7ffffe1, 27),
    (0x3ffffe7, 26),
    (0x7ffffe2, 27),
    (0xfffff2, 24),
    (0x1fffe4, 21),
    (0x1fffe5, 21),
    (0x3ffffe8, 26),
    (0x3ffffe9, 26),
    (0xffffffd, 28),
    (0x7ffffe3, 27),
    (0x7ffffe4, 27),
    (0x7ffffe5, 27),
    (0xfffec, 20),
    (0xfffff3, 24),
    (0xfffed, 20),
    (0x1fffe6, 21),
    (0x3fffe9, 22),
    (0x1fffe7, 21),
    (0x1fffe8, 21),
    (0x7ffff3, 23),
    (0x3fffea, 22),
    (0x3fffeb, 22),
    (0x1ffffee, 25),
    (0x1ffffef, 25),
    (0xfffff4, 24),
    (0xfffff5, 24),
    (0x3ffffea, 26),
    (0x7ffff4, 23),
    (0x3ffffeb, 26),
    (0x7ffffe6, 27),
    (0x3ffffec, 26),
    (0x3ffffed, 26),
    (0x7ffffe7, 27),
    (0x7ffffe8, 27),
    (0x7ffffe9, 27),
    (0x7ffffea, 27),
    (0x7ffffeb, 27),
    (0xffffffe, 28),
    (0x7ffffec, 27),
    (0x7ffffed, 27),
    (0x7ffffee, 27),
    (0x7ffffef, 27),
    (0x7fffff0, 27),
    (0x3ffffee, 26),
    (0x3fffffff, 30),
];

/// The symbol that ends nothing: a string that contains it is malformed.
const EOS: u16 = 256;

/// The transition emits `symbol`.
const EMIT: u8 = 1;
/// The transition decoded EOS: the string is malformed.
const FAIL: u8 = 2;
/// The state reached may end the string: it is the root, or at most seven
/// one bits past the last symbol (a valid padding prefix).
const ACCEPT: u8 = 4;

/// One step of the decoder: where four input bits lead from a state.
#[derive(Clone, Copy, Default)]
struct Step {
    next: u8,
    symbol: u8,
    flags: u8,
}

/// For each of the 256 internal nodes of the code tree (the states) and each
/// nibble, the step taken.
type StepTable = [[Step; 16]; 256];

fn step_table() -> &'static StepTable {
    static TABLE: OnceLock<Box<StepTable>> = OnceLock::new();
    TABLE.get_or_init(build_step_table)
}

/// A node of the code tree while it is built: a child is an internal node
/// (its index) or a leaf (a symbol).
#[derive(Clone, Copy)]
enum Child {
    Empty,
    Node(u8),
    Leaf(u16),
}

fn build_step_table() -> Box<StepTable> {
    // Internal nodes, root first; a complete code over 257 symbols has 256.
    let mut nodes: Vec<[Child; 2]> = vec![[Child::Empty; 2]];
    for (symbol, &(code, len)) in CODES.iter().enumerate() {
        let mut node = 0usize;
        for bit_pos in (0..len).rev() {
            let bit = ((code >> bit_pos) & 1) as usize;
            if bit_pos == 0 {
                nodes[node][bit] = Child::Leaf(symbol as u16);
            } else {
                node = match nodes[node][bit] {
                    Child::Node(n) => usize::from(n),
                    _ => {
                        nodes.push([Child::Empty; 2]);
                        let n = nodes.len() - 1;
                        nodes[node][bit] = Child::Node(n as u8);
                        n
                    }
                };
            }
        }
    }
    debug_assert_eq!(nodes.len(), 256);
    // The nodes reached from the root by one to seven one bits: where a
    // string may end in padding.
    let mut accepting = [false; 256];
    accepting[0] = true;
    let mut node = 0usize;
    for _ in 0..7 {
        match nodes[node][1] {
            Child::Node(n) => {
                node = usize::from(n);
                accepting[node] = true;
            }
            _ => break,
        }
    }
    let mut table = Box::new([[Step::default(); 16]; 256]);
    for (state, row) in table.iter_mut().enumerate() {
        for (nibble, step) in row.iter_mut().enumerate() {
            let mut node = state;
            for bit_pos in (0..4).rev() {
                let bit = (nibble >> bit_pos) & 1;
                match nodes[node][bit] {
                    Child::Node(n) => node = usize::from(n),
                    Child::Leaf(EOS) => {
                        step.flags |= FAIL;
                        break;
                    }
                    Child::Leaf(symbol) => {
                        // Codes are at least five bits long, so a nibble
                        // completes at most one symbol.
                        step.symbol = symbol as u8;
                        step.flags |= EMIT;
                        node = 0;
                    }
                    Child::Empty => unreachable!("the code is complete"),
                }
            }
            step.next = node as u8;
            if accepting[node] {
                step.flags |= ACCEPT;
            }
        }
    }
    table
}

/// Appends the decoding of `src` to `dst`.
pub(crate) fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let table = step_table();
    // The shortest code is five bits: this is the most `src` can yield.
    dst.reserve(src.len() * 8 / 5);
    let mut state = 0u8;
    let mut accept = true;
    for &byte in src {
        for nibble in [byte >> 4, byte & 0x0f] {
            let step = table[usize::from(state)][usize::from(nibble)];
            if step.flags & FAIL != 0 {
                return Err(HuffmanError::Eos);
            }
            if step.flags & EMIT != 0 {
                dst.push(step.symbol);
            }
            state = step.next;
            accept = step.flags & ACCEPT != 0;
        }
    }
    if accept {
        Ok(())
    } else {
        Err(HuffmanError::Padding)
    }
}

/// The length in bytes of the encoding of `src`, so a caller can choose it
/// only when it is shorter than the raw string.
pub(crate) fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src
        .iter()
        .map(|&b| usize::from(CODES[usize::from(b)].1))
        .sum();
    bits.div_ceil(8)
}

/// Appends the encoding of `src` to `dst`, padded with ones (EOS's prefix).
pub(crate) fn encode(src: &[u8], dst: &mut Vec<u8>) {
    let mut acc = 0u64;
    let mut bits = 0u32;
    for &b in src {
        let (code, len) = CODES[usize::from(b)];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            dst.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        let pad = 8 - bits;
        dst.push(((acc << pad) as u8) | ((1u8 << pad) - 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(src: &[u8]) -> Vec<u8> {
        let mut enc = Vec::new();
        encode(src, &mut enc);
        assert_eq!(enc.len(), encoded_len(src));
        let mut dec = Vec::new();
        decode(&enc, &mut dec).expect("own encoding decodes");
        dec
    }

    #[test]
    fn codes_are_canonical_from_their_lengths() {
        // A typo in a code or a length breaks the canonical order.
        let mut symbols: Vec<usize> = (0..257).collect();
        symbols.sort_by_key(|&s| (CODES[s].1, s));
        let mut code = 0u32;
        let mut prev_len = CODES[symbols[0]].1;
        for s in symbols {
            code <<= CODES[s].1 - prev_len;
            prev_len = CODES[s].1;
            assert_eq!(CODES[s].0, code, "symbol {s}");
            code += 1;
        }
        assert_eq!(code, 1 << 30, "the code fills the 30-bit space exactly");
    }

    #[test]
    fn every_byte_value_round_trips() {
        for b in 0..=255u8 {
            assert_eq!(round_trip(&[b]), [b], "byte {b}");
            assert_eq!(round_trip(&[b, b, b]), [b, b, b], "byte {b} thrice");
        }
        let all: Vec<u8> = (0..=255u8).rev().chain(0..=255).collect();
        assert_eq!(round_trip(&all), all);
        assert_eq!(round_trip(b""), b"");
    }

    #[test]
    fn rfc_7541_c4_strings() {
        let mut out = Vec::new();
        encode(b"www.example.com", &mut out);
        assert_eq!(
            out,
            [0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff]
        );
        let mut dec = Vec::new();
        decode(&[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf], &mut dec).unwrap();
        assert_eq!(dec, b"no-cache");
    }

    #[test]
    fn eos_in_a_string_is_refused() {
        // 'a' (00011) then EOS (thirty ones), then two bits of padding.
        let bits: u64 = (0b00011 << 30 | 0x3fff_ffff) << 5 | 0b11111;
        let bytes = bits.to_be_bytes();
        let mut dec = Vec::new();
        assert_eq!(decode(&bytes[3..], &mut dec), Err(HuffmanError::Eos));
    }

    #[test]
    fn padding_must_be_short_and_all_ones() {
        let mut dec = Vec::new();
        // 'a' is 00011: three bits of ones padding is fine.
        assert_eq!(decode(&[0b0001_1111], &mut dec), Ok(()));
        assert_eq!(dec, b"a");
        // Padding with a zero bit.
        assert_eq!(decode(&[0b0001_1110], &mut dec), Err(HuffmanError::Padding));
        // 'a' then eleven bits of ones: padding longer than seven bits.
        assert_eq!(
            decode(&[0b0001_1111, 0xff], &mut dec),
            Err(HuffmanError::Padding)
        );
        // A whole byte of ones alone is also too long.
        assert_eq!(decode(&[0xff], &mut dec), Err(HuffmanError::Padding));
        dec.clear();
        assert_eq!(decode(&[], &mut dec), Ok(()));
        // A truncated symbol (not all ones) is refused: '0' is 00000.
        assert_eq!(decode(&[0b0000_0000], &mut dec), Err(HuffmanError::Padding));
    }
}
