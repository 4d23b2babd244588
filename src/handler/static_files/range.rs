//! Byte ranges (RFC 9110 §14) of a representation of known length: one range
//! is a plain 206, several a `multipart/byteranges` 206, within bounds that keep
//! a hostile Range header from costing more than a plain GET.
//!
//! The bounds follow nginx (`max_ranges`, and its rule that ranges adding up to
//! more than the file are not honoured) and what Apache settled on after
//! CVE-2011-3192 (`MaxRanges 200`, `MaxRangeOverlaps 20`): a header with
//! more than [`MAX_RANGES`] ranges, or whose satisfiable ranges add up to more
//! bytes than the file holds (which only overlap can do), is ignored and the
//! whole file is sent with 200. So a multipart body is never longer than the
//! file plus [`MAX_RANGES`] part heads, whatever the header asks.

use crate::http1::grammar::trim_ows;

/// Most ranges honoured in one Range header; more, and the file is sent whole.
/// Apache's default `MaxRanges` is 200 and nginx has no default bound; real
/// clients (PDF viewers, download resumers, media players) ask for a handful.
pub const MAX_RANGES: usize = 100;

/// One satisfiable range, `first..=last`, within the representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ByteSpan {
    /// First byte offset.
    pub first: u64,
    /// Last byte offset, inclusive, below the length.
    pub last: u64,
}

impl ByteSpan {
    /// Bytes the span covers.
    pub fn len(self) -> u64 {
        self.last - self.first + 1
    }
}

/// How a Range header applies to a representation of a given length.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum RangeOutcome {
    /// Ignore the header: send 200 with the whole file.
    Full,
    /// Send 206 with bytes `first..=last`.
    Partial { first: u64, last: u64 },
    /// Send 206 `multipart/byteranges` with these spans, in the order asked
    /// (two up to [`MAX_RANGES`]; overlaps allowed as long as they add up to no
    /// more than the file).
    Multiple(Vec<ByteSpan>),
    /// Send 416.
    Unsatisfiable,
}

/// One range-spec of the list.
enum RangeSpec {
    /// Satisfiable: these bytes.
    Span(ByteSpan),
    /// Valid syntax that selects nothing (a first-pos past the end, a zero suffix).
    Nothing,
    /// A positive suffix of an empty representation: satisfiable per §14.1.1
    /// yet not expressible as a 206, so the whole (empty) file is sent.
    WholeEmpty,
}

/// Parses a `bytes` Range header (RFC 9110 §14.1.2). Another unit or bad syntax in
/// any member (including `last < first`) ignores the header (200 full), as do more
/// than [`MAX_RANGES`] members and satisfiable ranges adding up to more than
/// `total`. No satisfiable member is a 416. Numbers saturate rather than overflow,
/// so a huge first-pos is unsatisfiable and a huge last-pos or suffix covers the
/// rest of the file. Allocates only for two or more satisfiable ranges.
pub(super) fn parse_range(field: &[u8], total: u64) -> RangeOutcome {
    let field = trim_ows(field);
    let Some(eq) = field.iter().position(|&b| b == b'=') else {
        return RangeOutcome::Full;
    };
    if !field[..eq].eq_ignore_ascii_case(b"bytes") {
        return RangeOutcome::Full;
    }
    let mut specs = 0usize;
    let mut sum = 0u64;
    let mut whole_empty = false;
    let mut single: Option<ByteSpan> = None;
    let mut many: Vec<ByteSpan> = Vec::new();
    let members = field[eq + 1..]
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|s| !s.is_empty());
    for member in members {
        specs += 1;
        if specs > MAX_RANGES {
            return RangeOutcome::Full;
        }
        let span = match parse_spec(member, total) {
            None => return RangeOutcome::Full,
            Some(RangeSpec::Nothing) => continue,
            Some(RangeSpec::WholeEmpty) => {
                whole_empty = true;
                continue;
            }
            Some(RangeSpec::Span(span)) => span,
        };
        sum = sum.saturating_add(span.len());
        if sum > total {
            return RangeOutcome::Full;
        }
        match single {
            None => single = Some(span),
            Some(first) => {
                if many.is_empty() {
                    many.push(first);
                }
                many.push(span);
            }
        }
    }
    if specs == 0 || whole_empty {
        return RangeOutcome::Full;
    }
    match (single, many.len()) {
        (None, _) => RangeOutcome::Unsatisfiable,
        (Some(ByteSpan { first, last }), 0) => RangeOutcome::Partial { first, last },
        _ => RangeOutcome::Multiple(many),
    }
}

/// One `first-last`, `first-` or `-suffix` member; `None` for bad syntax.
fn parse_spec(spec: &[u8], total: u64) -> Option<RangeSpec> {
    let dash = spec.iter().position(|&b| b == b'-')?;
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    if first.is_empty() {
        let suffix = parse_digits(last)?;
        return Some(match (suffix, total) {
            (0, _) => RangeSpec::Nothing,
            (_, 0) => RangeSpec::WholeEmpty,
            _ => RangeSpec::Span(ByteSpan {
                first: total - suffix.min(total),
                last: total - 1,
            }),
        });
    }
    let first = parse_digits(first)?;
    let last = if last.is_empty() {
        u64::MAX
    } else {
        match parse_digits(last) {
            Some(last) if last >= first => last,
            _ => return None,
        }
    };
    if first >= total {
        return Some(RangeSpec::Nothing);
    }
    Some(RangeSpec::Span(ByteSpan {
        first,
        last: last.min(total - 1),
    }))
}

pub(super) fn parse_digits(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0u64, |acc, &d| {
        acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

#[cfg(test)]
mod tests {
    use super::RangeOutcome::*;
    use super::*;

    fn spans(list: &[(u64, u64)]) -> RangeOutcome {
        Multiple(
            list.iter()
                .map(|&(first, last)| ByteSpan { first, last })
                .collect(),
        )
    }

    /// The outcome of `field` for a file of 13 bytes.
    fn of_13_bytes(field: &str) -> RangeOutcome {
        parse_range(field.as_bytes(), 13)
    }

    #[test]
    fn several_ranges_keep_the_order_asked() {
        assert_eq!(of_13_bytes("bytes=7-11, 0-4"), spans(&[(7, 11), (0, 4)]));
        let asked = of_13_bytes("bytes=-3,0-0,5-");
        assert_eq!(asked, spans(&[(10, 12), (0, 0), (5, 12)]));
    }

    #[test]
    fn unsatisfiable_members_are_dropped_and_none_left_is_416() {
        let asked = of_13_bytes("bytes=0-1,20-30,-0,4-5");
        assert_eq!(asked, spans(&[(0, 1), (4, 5)]));
        assert_eq!(
            of_13_bytes("bytes=0-1,20-30"),
            Partial { first: 0, last: 1 },
            "one satisfiable range left is a plain 206"
        );
        assert_eq!(of_13_bytes("bytes=13-,20-30,-0"), Unsatisfiable);
        assert_eq!(parse_range(b"bytes=0-,1-", 0), Unsatisfiable);
        assert_eq!(parse_range(b"bytes=0-,-5", 0), Full);
    }

    #[test]
    fn one_bad_member_ignores_the_whole_header() {
        for field in [
            "bytes=0-1,5-2",
            "bytes=0-1,x",
            "bytes=0-1,-",
            "bytes=0-1,1 -2",
        ] {
            assert_eq!(of_13_bytes(field), Full, "{field}");
        }
    }

    #[test]
    fn more_than_max_ranges_is_served_whole() {
        let total = 10_000;
        let list = |n: usize| {
            let members: Vec<String> = (0..n).map(|i| format!("{i}-{i}")).collect();
            format!("bytes={}", members.join(","))
        };
        match parse_range(list(MAX_RANGES).as_bytes(), total) {
            Multiple(v) => assert_eq!(v.len(), MAX_RANGES),
            other => panic!("{MAX_RANGES} ranges are honoured, got {other:?}"),
        }
        assert_eq!(parse_range(list(MAX_RANGES + 1).as_bytes(), total), Full);
        // Unsatisfiable members count too: parsing stops at the bound.
        let mut field = list(MAX_RANGES).into_bytes();
        field.extend_from_slice(b",99999-");
        assert_eq!(parse_range(&field, total), Full);
    }

    /// Whatever the header, what is honoured stays within the bounds: at most
    /// `MAX_RANGES` spans, each inside the file, adding up to no more than it.
    #[test]
    fn no_header_gets_past_the_bounds() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut multiparts = 0;
        for _ in 0..20_000 {
            let total = next(3) * next(5000);
            let members = 1 + next(150);
            // Spans sized so that a fair share of headers fit the file.
            let width = 1 + 2 * total / (members + 1);
            let wild = next(4) == 0;
            let mut field = String::from("bytes=");
            for i in 0..members {
                if i > 0 {
                    field.push(',');
                }
                let (a, w) = (next(total + 20), next(width));
                // One header in four may hold open-ended and reversed members.
                match if wild { next(50) } else { 2 + next(48) } {
                    0 => field.push_str(&format!("{a}-")),
                    1 => field.push_str(&format!("{}-{a}", a + 1 + w)),
                    2..=9 => field.push_str(&format!("-{w}")),
                    _ => field.push_str(&format!("{a}-{}", a + w)),
                }
            }
            match parse_range(field.as_bytes(), total) {
                Multiple(v) => {
                    multiparts += 1;
                    assert!((2..=MAX_RANGES).contains(&v.len()), "{field}");
                    assert!(v.iter().all(|s| s.first <= s.last && s.last < total));
                    assert!(v.iter().map(|s| s.len()).sum::<u64>() <= total, "{field}");
                }
                Partial { first, last } => assert!(first <= last && last < total, "{field}"),
                Full | Unsatisfiable => {}
            }
        }
        assert!(multiparts > 2_000, "too few headers honoured: {multiparts}");
    }

    #[test]
    fn overlap_adding_up_to_more_than_the_file_is_served_whole() {
        // Ranges may overlap while they add up to no more than the file.
        assert_eq!(parse_range(b"bytes=0-5,3-8", 13), spans(&[(0, 5), (3, 8)]));
        assert_eq!(parse_range(b"bytes=0-6,0-6", 13), Full);
        assert_eq!(parse_range(b"bytes=0-,0-", 13), Full);
        assert_eq!(parse_range(b"bytes=-13,0-0", 13), Full);
        let huge = b"bytes=0-99999999999999999999999,-99999999999999999999999";
        assert_eq!(parse_range(huge, 13), Full, "saturating sums still compare");
    }
}
