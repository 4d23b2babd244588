//! The fields of a response head as HTTP/2 and HTTP/3 carry them: names in
//! lowercase, no connection-specific fields, a length in decimal.

/// Fields that describe a connection, not a message: never sent over HTTP/2
/// or HTTP/3 (RFC 9113 §8.2.2, RFC 9114 §4.2), whatever a handler or an
/// upstream put in a head.
const CONNECTION_FIELDS: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
];

/// Whether HTTP/2 and HTTP/3 carry a field of this name (connection-specific fields
/// are left out).
pub(crate) fn carried(name: &str) -> bool {
    !CONNECTION_FIELDS
        .iter()
        .any(|c| c.eq_ignore_ascii_case(name))
}

/// `fields` as HTTP/2 and HTTP/3 take them, names lowercase, connection-specific ones
/// left out.
pub(crate) fn lowercase_fields<'f>(
    fields: impl Iterator<Item = (&'f str, &'f [u8])>,
) -> Vec<(Vec<u8>, &'f [u8])> {
    fields
        .filter(|(n, _)| carried(n))
        .map(|(n, v)| (n.as_bytes().to_ascii_lowercase(), v))
        .collect()
}

/// Writes `n` in decimal into `out`, returning the digits.
pub(crate) fn decimal(n: u64, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    let mut n = n;
    loop {
        i -= 1;
        out[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &out[i..]
}
