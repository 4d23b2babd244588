//! The prefix of every encoded field section (RFC 9204 §4.5.1): the
//! Required Insert Count, sent modulo twice the most entries the decoder's
//! table can hold (§4.5.1.1), and the Base, as a signed difference from it
//! (§4.5.1.2).

use crate::http::field_coding::{read_int, write_int, ReadError};

/// Why a prefix could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PrefixError {
    /// The bytes end or an integer overflows.
    Read(ReadError),
    /// The encoded Required Insert Count could not come from a conforming
    /// encoder.
    BadInsertCount,
    /// The Base would be negative.
    BadBase,
}

impl From<ReadError> for PrefixError {
    fn from(e: ReadError) -> Self {
        PrefixError::Read(e)
    }
}

/// The most entries a table of `max_capacity` bytes holds (§3.2.1: 32
/// bytes is the least an entry costs).
pub(crate) fn max_entries(max_capacity: u64) -> u64 {
    max_capacity / 32
}

/// Appends the prefix of a section with `required` (the Required Insert
/// Count) and `base`; `max_entries` is from the decoder's advertised
/// capacity.
pub(crate) fn write_prefix(out: &mut Vec<u8>, required: u64, base: u64, max_entries: u64) {
    if required == 0 {
        write_int(out, 0, 8, 0);
    } else {
        write_int(out, 0, 8, required % (2 * max_entries) + 1);
    }
    if base >= required {
        write_int(out, 0x00, 7, base - required);
    } else {
        write_int(out, 0x80, 7, required - base - 1);
    }
}

/// Reads a section's prefix: (Required Insert Count, Base, the prefix's
/// length). `total_inserts` is the decoder's insert count now.
pub(crate) fn read_prefix(
    section: &[u8],
    max_entries: u64,
    total_inserts: u64,
) -> Result<(u64, u64, usize), PrefixError> {
    if section.is_empty() {
        return Err(PrefixError::Read(ReadError::Incomplete(1)));
    }
    let mut pos = 0;
    let encoded = read_int(section, &mut pos, 8)?;
    let required = decode_required_insert_count(encoded, max_entries, total_inserts)?;
    let &first = section.get(pos).ok_or(ReadError::Incomplete(pos + 1))?;
    let delta = read_int(section, &mut pos, 7)?;
    let base = if first & 0x80 == 0 {
        required.checked_add(delta).ok_or(PrefixError::BadBase)?
    } else {
        // Base = Required Insert Count - Delta Base - 1, never below 0.
        required
            .checked_sub(delta)
            .and_then(|b| b.checked_sub(1))
            .ok_or(PrefixError::BadBase)?
    };
    Ok((required, base, pos))
}

/// §4.5.1.1: the Required Insert Count from its encoding.
fn decode_required_insert_count(
    encoded: u64,
    max_entries: u64,
    total_inserts: u64,
) -> Result<u64, PrefixError> {
    if encoded == 0 {
        return Ok(0);
    }
    let full_range = 2 * max_entries;
    if encoded > full_range {
        return Err(PrefixError::BadInsertCount);
    }
    let max_value = total_inserts + max_entries;
    let max_wrapped = (max_value / full_range) * full_range;
    let mut required = max_wrapped + encoded - 1;
    if required > max_value {
        if required <= full_range {
            return Err(PrefixError::BadInsertCount);
        }
        required -= full_range;
    }
    if required == 0 {
        return Err(PrefixError::BadInsertCount);
    }
    Ok(required)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_9204_appendix_b_prefixes() {
        // B.1: no dynamic reference.
        assert_eq!(read_prefix(&[0x00, 0x00], 6, 0), Ok((0, 0, 2)));
        // B.2: Required Insert Count 2, Base 0 (sign bit set).
        assert_eq!(read_prefix(&[0x03, 0x81], 6, 2), Ok((2, 0, 2)));
        // B.4: Required Insert Count 4, Base 4.
        assert_eq!(read_prefix(&[0x05, 0x00], 6, 4), Ok((4, 4, 2)));
        for (required, base, bytes) in [
            (0, 0, [0x00, 0x00]),
            (2, 0, [0x03, 0x81]),
            (4, 4, [0x05, 0x00]),
        ] {
            let mut out = Vec::new();
            write_prefix(&mut out, required, base, 6);
            assert_eq!(out, bytes);
        }
    }

    #[test]
    fn the_insert_count_wraps_around_max_entries() {
        // MaxEntries 6 (capacity 220): FullRange 12. Every count from 1 to
        // far past the range reads back while the decoder is within reach.
        for required in 1..200u64 {
            let mut out = Vec::new();
            write_prefix(&mut out, required, required, 6);
            for total in required.saturating_sub(6)..=required + 5 {
                if total + 6 < required {
                    continue;
                }
                let got = read_prefix(&out, 6, total).map(|(r, b, _)| (r, b));
                assert_eq!(
                    got,
                    Ok((required, required)),
                    "required {required} at {total}"
                );
            }
        }
    }

    #[test]
    fn impossible_prefixes_are_refused() {
        // Encoded beyond the full range.
        assert_eq!(
            read_prefix(&[13, 0], 6, 0),
            Err(PrefixError::BadInsertCount)
        );
        // Any dynamic reference when the table holds nothing.
        assert_eq!(read_prefix(&[1, 0], 0, 0), Err(PrefixError::BadInsertCount));
        // A count that would be 0 after unwrapping.
        assert_eq!(read_prefix(&[1, 0], 6, 0), Err(PrefixError::BadInsertCount));
        // Base below zero.
        assert_eq!(read_prefix(&[0x03, 0x82], 6, 2), Err(PrefixError::BadBase));
        assert_eq!(read_prefix(&[0x00, 0x80], 6, 0), Err(PrefixError::BadBase));
        // Cut short.
        assert!(matches!(
            read_prefix(&[0x03], 6, 2),
            Err(PrefixError::Read(_))
        ));
        assert!(matches!(read_prefix(&[], 6, 2), Err(PrefixError::Read(_))));
    }
}
