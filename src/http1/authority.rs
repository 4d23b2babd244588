//! The `host[:port]` grammar of RFC 3986 (without userinfo), shared by the
//! Host header and the absolute and authority forms of the request target.

use super::grammar::alnum_and;

/// Splits `host[:port]` (RFC 3986 authority without userinfo) and validates it.
/// Returns the host length and the port digits if a `:` was present. An empty
/// input is valid (an empty Host header); an empty host before a port is not.
pub(crate) fn split_authority(a: &[u8], port_required: bool) -> Option<(usize, Option<&[u8]>)> {
    if a.is_empty() {
        return if port_required { None } else { Some((0, None)) };
    }
    let host_len = if a.first() == Some(&b'[') {
        let close = a.iter().position(|&b| b == b']')?;
        let inner = a.get(1..close)?;
        if !valid_ip_literal(inner) {
            return None;
        }
        close + 1
    } else {
        let end = a.iter().position(|&b| b == b':').unwrap_or(a.len());
        let host = a.get(..end)?;
        if host.is_empty() || !valid_reg_name(host) {
            return None;
        }
        end
    };
    match a.get(host_len..)? {
        [] if !port_required => Some((host_len, None)),
        [] => None,
        [b':', port @ ..] if port.len() <= 5 && port.iter().all(u8::is_ascii_digit) => {
            Some((host_len, Some(port)))
        }
        _ => None,
    }
}

/// The bytes a reg-name holds besides `%` (RFC 3986 unreserved and sub-delims),
/// as a table: every request's `Host` is checked against it.
const REG_NAME_BYTES: [bool; 256] = alnum_and(b"-._~!$&'()*+,;=");

/// reg-name / IPv4address: unreserved, sub-delims and well-formed pct-encoding.
fn valid_reg_name(host: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = host.get(i) {
        if b == b'%' {
            match host.get(i + 1..i + 3) {
                Some([h, l]) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => i += 3,
                _ => return false,
            }
            continue;
        }
        if !REG_NAME_BYTES[usize::from(b)] {
            return false;
        }
        i += 1;
    }
    true
}

/// IPv6address or IPvFuture inside brackets; shape only, not a full address parse.
fn valid_ip_literal(inner: &[u8]) -> bool {
    match inner.first() {
        None => false,
        Some(b'v' | b'V') => {
            inner.len() > 1
                && inner
                    .iter()
                    .skip(1)
                    .all(|&b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:".contains(&b))
        }
        Some(_) => inner
            .iter()
            .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_holds_exactly_the_reg_name_bytes_of_rfc_3986() {
        for b in 0..=255u8 {
            let allowed = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b);
            assert_eq!(valid_reg_name(&[b'a', b, b'z']), allowed, "byte {b:#04x}");
        }
        assert!(valid_reg_name(b"ex%41mple.test"));
        assert!(!valid_reg_name(b"ex%4"));
    }
}
