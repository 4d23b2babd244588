//! QPACK's static table (RFC 9204 Appendix A): 99 fixed entries, indexed
//! from 0, chosen from the fields common on the web; unlike HPACK's, many
//! carry values. Lookups by name go through a map built once.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The entries, in index order.
pub(crate) const STATIC_TABLE: [(&[u8], &[u8]); 99] = [
    (b":authority", b""),
    (b":path", b"/"),
    (b"age", b"0"),
    (b"content-disposition", b""),
    (b"content-length", b"0"),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"referer", b""),
    (b"set-cookie", b""),
    (b":method", b"CONNECT"),
    (b":method", b"DELETE"),
    (b":method", b"GET"),
    (b":method", b"HEAD"),
    (b":method", b"OPTIONS"),
    (b":method", b"POST"),
    (b":method", b"PUT"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"103"),
    (b":status", b"200"),
    (b":status", b"304"),
    (b":status", b"404"),
    (b":status", b"503"),
    (b"accept", b"*/*"),
    (b"accept", b"application/dns-message"),
    (b"accept-encoding", b"gzip, deflate, br"),
    (b"accept-ranges", b"bytes"),
    (b"access-control-allow-headers", b"cache-control"),
    (b"access-control-allow-headers", b"content-type"),
    (b"access-control-allow-origin", b"*"),
    (b"cache-control", b"max-age=0"),
    (b"cache-control", b"max-age=2592000"),
    (b"cache-control", b"max-age=604800"),
    (b"cache-control", b"no-cache"),
    (b"cache-control", b"no-store"),
    (b"cache-control", b"public, max-age=31536000"),
    (b"content-encoding", b"br"),
    (b"content-encoding", b"gzip"),
    (b"content-type", b"application/dns-message"),
    (b"content-type", b"application/javascript"),
    (b"content-type", b"application/json"),
    (b"content-type", b"application/x-www-form-urlencoded"),
    (b"content-type", b"image/gif"),
    (b"content-type", b"image/jpeg"),
    (b"content-type", b"image/png"),
    (b"content-type", b"text/css"),
    (b"content-type", b"text/html; charset=utf-8"),
    (b"content-type", b"text/plain"),
    (b"content-type", b"text/plain;charset=utf-8"),
    (b"range", b"bytes=0-"),
    (b"strict-transport-security", b"max-age=31536000"),
    (
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains",
    ),
    (
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains; preload",
    ),
    (b"vary", b"accept-encoding"),
    (b"vary", b"origin"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-xss-protection", b"1; mode=block"),
    (b":status", b"100"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"302"),
    (b":status", b"400"),
    (b":status", b"403"),
    (b":status", b"421"),
    (b":status", b"425"),
    (b":status", b"500"),
    (b"accept-language", b""),
    (b"access-control-allow-credentials", b"FALSE"),
    (b"access-control-allow-credentials", b"TRUE"),
    (b"access-control-allow-headers", b"*"),
    (b"access-control-allow-methods", b"get"),
    (b"access-control-allow-methods", b"get, post, options"),
    (b"access-control-allow-methods", b"options"),
    (b"access-control-expose-headers", b"content-length"),
    (b"access-control-request-headers", b"content-type"),
    (b"access-control-request-method", b"get"),
    (b"access-control-request-method", b"post"),
    (b"alt-svc", b"clear"),
    (b"authorization", b""),
    (
        b"content-security-policy",
        b"script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    (b"early-data", b"1"),
    (b"expect-ct", b""),
    (b"forwarded", b""),
    (b"if-range", b""),
    (b"origin", b""),
    (b"purpose", b"prefetch"),
    (b"server", b""),
    (b"timing-allow-origin", b"*"),
    (b"upgrade-insecure-requests", b"1"),
    (b"user-agent", b""),
    (b"x-forwarded-for", b""),
    (b"x-frame-options", b"deny"),
    (b"x-frame-options", b"sameorigin"),
];

/// The entry at `index`, or `None` past the table.
pub(crate) fn get(index: u64) -> Option<(&'static [u8], &'static [u8])> {
    STATIC_TABLE.get(usize::try_from(index).ok()?).copied()
}

/// What the static table holds of a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StaticMatch {
    /// The whole field, at this index.
    Field(u64),
    /// Only the name, first at this index.
    Name(u64),
    /// Nothing.
    None,
}

/// Finds `name: value` in the static table.
pub(crate) fn find(name: &[u8], value: &[u8]) -> StaticMatch {
    let Some(indices) = by_name().get(name) else {
        return StaticMatch::None;
    };
    for &i in indices {
        if STATIC_TABLE[usize::from(i)].1 == value {
            return StaticMatch::Field(u64::from(i));
        }
    }
    StaticMatch::Name(u64::from(indices[0]))
}

/// The indices of each name's entries, in index order.
fn by_name() -> &'static HashMap<&'static [u8], Vec<u8>> {
    static MAP: OnceLock<HashMap<&'static [u8], Vec<u8>>> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut map: HashMap<&'static [u8], Vec<u8>> = HashMap::new();
        for (i, (name, _)) in STATIC_TABLE.iter().enumerate() {
            map.entry(name).or_default().push(i as u8);
        }
        map
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_the_rfc_examples_use() {
        assert_eq!(get(0), Some((&b":authority"[..], &b""[..])));
        assert_eq!(get(1), Some((&b":path"[..], &b"/"[..])));
        assert_eq!(get(17), Some((&b":method"[..], &b"GET"[..])));
        assert_eq!(get(25), Some((&b":status"[..], &b"200"[..])));
        assert_eq!(get(98), Some((&b"x-frame-options"[..], &b"sameorigin"[..])));
        assert_eq!(get(99), None);
        assert_eq!(get(u64::MAX), None);
    }

    #[test]
    fn lookups_find_fields_then_names() {
        assert_eq!(find(b":status", b"404"), StaticMatch::Field(27));
        assert_eq!(find(b":status", b"500"), StaticMatch::Field(71));
        assert_eq!(find(b":status", b"418"), StaticMatch::Name(24));
        assert_eq!(find(b"content-type", b"text/css"), StaticMatch::Field(51));
        assert_eq!(find(b"user-agent", b"curl"), StaticMatch::Name(95));
        assert_eq!(find(b"x-custom", b""), StaticMatch::None);
        // Names are all lowercase, as HTTP/3 sends them.
        assert!(STATIC_TABLE
            .iter()
            .all(|(n, _)| !n.iter().any(u8::is_ascii_uppercase)));
    }
}
