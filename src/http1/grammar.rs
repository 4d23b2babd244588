//! Field-value grammar of RFC 9110 shared by request and response parsing:
//! tokens, comma-separated lists, optional whitespace and Content-Length.

/// Content-Length = 1*DIGIT, one value, no list (RFC 9110 §8.6: "5, 5" is
/// refused too, since some peers would read it differently).
pub(crate) fn parse_content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// Non-empty elements of a comma-separated field value, OWS trimmed (RFC 9110 §5.6.1).
pub(crate) fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// Strips SP and HTAB on both ends.
pub(crate) fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// A byte-class table built at compile time: ASCII letters and digits plus
/// `extra`, so a check per byte is one load.
pub(crate) const fn alnum_and(extra: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = (i as u8).is_ascii_alphanumeric();
        i += 1;
    }
    let mut j = 0;
    while j < extra.len() {
        table[extra[j] as usize] = true;
        j += 1;
    }
    table
}

/// Lookup table behind [`is_tchar`].
pub(crate) const TCHAR: [bool; 256] = alnum_and(b"!#$%&'*+-.^_`|~");

/// RFC 9110 tchar: the bytes allowed in a token (method, field name, coding).
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

/// RFC 9110 token: one or more tchars (a field name, a method, a coding).
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_tchar)
}

/// Whether `bytes` equals `lower` ignoring ASCII case, where `lower` is written
/// in lowercase. Only `lower`'s letters accept the case bit, so the result is
/// exact for any `bytes`. From four bytes on, the two are compared a word at a
/// time through overlapping windows that cover every byte; with `lower` a
/// literal, each window is one load, one OR and one XOR.
#[inline(always)]
pub(crate) fn eq_lowercase(bytes: &[u8], lower: &[u8]) -> bool {
    debug_assert!(!lower.iter().any(u8::is_ascii_uppercase));
    let n = lower.len();
    if bytes.len() != n {
        return false;
    }
    match n {
        0..=3 => {
            bytes
                .iter()
                .zip(lower)
                .fold(0u8, |diff, (&b, &l)| diff | ((b | case_bit(l)) ^ l))
                == 0
        }
        4..=7 => (window_diff::<4>(bytes, lower, 0) | window_diff::<4>(bytes, lower, n - 4)) == 0,
        _ => {
            let mut diff = window_diff::<8>(bytes, lower, n - 8);
            let mut at = 0;
            while at + 8 < n {
                diff |= window_diff::<8>(bytes, lower, at);
                at += 8;
            }
            diff == 0
        }
    }
}

/// The bit that tells an ASCII letter's cases apart, for letters only.
#[inline(always)]
fn case_bit(l: u8) -> u8 {
    if l.is_ascii_lowercase() {
        0x20
    } else {
        0
    }
}

/// Case-folded difference of `bytes[at..at + N]` and `lower[at..at + N]`
/// (`N` at most 8): zero when they match.
#[inline(always)]
fn window_diff<const N: usize>(bytes: &[u8], lower: &[u8], at: usize) -> u64 {
    fn get<const N: usize>(s: &[u8], at: usize) -> Option<[u8; N]> {
        s.get(at..at.checked_add(N)?)?.try_into().ok()
    }
    fn word<const N: usize>(a: [u8; N]) -> u64 {
        let mut w = [0u8; 8];
        if let Some(dst) = w.get_mut(..N) {
            dst.copy_from_slice(&a);
        }
        u64::from_le_bytes(w)
    }
    let (Some(b), Some(l)) = (get::<N>(bytes, at), get::<N>(lower, at)) else {
        return u64::MAX;
    };
    (word(b) | word(l.map(case_bit))) ^ word(l)
}
