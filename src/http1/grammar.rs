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
