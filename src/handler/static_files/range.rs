//! Byte ranges (RFC 9110 §14): one `bytes` range of a representation of known
//! length; anything else is served whole.

use super::conditional::trim_ows;

/// How a Range header applies to a representation of a given length.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum RangeOutcome {
    /// Ignore the header: send 200 with the whole file.
    Full,
    /// Send 206 with bytes `first..=last`.
    Partial { first: u64, last: u64 },
    /// Send 416.
    Unsatisfiable,
}

/// Parses one `bytes` range (RFC 9110 §14.1.2). Another unit, bad syntax, `last < first` and
/// multiple ranges are ignored (200 full). Numbers saturate rather than overflow, so a huge
/// first-pos is unsatisfiable and a huge last-pos or suffix covers the rest of the file.
pub(super) fn parse_range(field: &[u8], total: u64) -> RangeOutcome {
    let field = trim_ows(field);
    let Some(eq) = field.iter().position(|&b| b == b'=') else {
        return RangeOutcome::Full;
    };
    if !field[..eq].eq_ignore_ascii_case(b"bytes") {
        return RangeOutcome::Full;
    }
    let mut specs = field[eq + 1..]
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|s| !s.is_empty());
    let (Some(spec), None) = (specs.next(), specs.next()) else {
        return RangeOutcome::Full;
    };
    let Some(dash) = spec.iter().position(|&b| b == b'-') else {
        return RangeOutcome::Full;
    };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    if first.is_empty() {
        let Some(suffix) = parse_digits(last) else {
            return RangeOutcome::Full;
        };
        return match (suffix, total) {
            (0, _) => RangeOutcome::Unsatisfiable,
            // Satisfiable per §14.1.1 yet not expressible as a 206 of an empty file.
            (_, 0) => RangeOutcome::Full,
            _ => RangeOutcome::Partial {
                first: total - suffix.min(total),
                last: total - 1,
            },
        };
    }
    let Some(first) = parse_digits(first) else {
        return RangeOutcome::Full;
    };
    let last = if last.is_empty() {
        u64::MAX
    } else {
        match parse_digits(last) {
            Some(last) if last >= first => last,
            _ => return RangeOutcome::Full,
        }
    };
    if first >= total {
        return RangeOutcome::Unsatisfiable;
    }
    RangeOutcome::Partial {
        first,
        last: last.min(total - 1),
    }
}

pub(super) fn parse_digits(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0u64, |acc, &d| {
        acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}
