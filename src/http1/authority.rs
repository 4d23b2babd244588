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
        match reg_name_len(a)? {
            0 => return None,
            n => n,
        }
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

/// The length of the reg-name / IPv4address (unreserved, sub-delims and
/// well-formed pct-encoding) that starts `a` and ends at its end or at a `:`;
/// `None` when another byte or a broken escape comes first. One pass, as every
/// request's `Host` goes through it.
fn reg_name_len(a: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(&b) = a.get(i) {
        if REG_NAME_BYTES[usize::from(b)] {
            i += 1;
            continue;
        }
        match b {
            b':' => break,
            b'%' => match a.get(i + 1..i + 3) {
                Some([h, l]) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => i += 3,
                _ => return None,
            },
            _ => return None,
        }
    }
    Some(i)
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
    use crate::http1::test_support::assert_each;

    fn valid_reg_name(host: &[u8]) -> bool {
        reg_name_len(host) == Some(host.len())
    }

    #[test]
    fn a_host_holds_exactly_the_reg_name_bytes_of_rfc_3986() {
        for b in 0..=255u8 {
            let allowed = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b);
            assert_eq!(valid_reg_name(&[b'a', b, b'z']), allowed, "byte {b:#04x}");
        }
        assert!(valid_reg_name(b"ex%41mple.test"));
        assert!(!valid_reg_name(b"ex%4"));
        assert!(!valid_reg_name(b"ex%4:1"));
    }

    #[test]
    fn authorities_split_at_the_port() {
        assert_eq!(
            split_authority(b"127.0.0.1:8080", false),
            Some((9, Some(&b"8080"[..])))
        );
        assert_eq!(
            split_authority(b"ex%3aample:80", true),
            Some((10, Some(&b"80"[..])))
        );
        assert_eq!(split_authority(b"example.test", false), Some((12, None)));
        assert_eq!(split_authority(b"example.test", true), None);
        assert_eq!(
            split_authority(b"[::1]:443", false),
            Some((5, Some(&b"443"[..])))
        );
        assert_eq!(split_authority(b"", false), Some((0, None)));
        assert_each(
            |bad| split_authority(bad, false).is_none(),
            true,
            &[
                b":80",
                b"a b:80",
                b"a:80:90",
                b"a:123456",
                b"a:8x",
                b"a%zz:1",
                b"[::1",
            ],
        );
    }
}
