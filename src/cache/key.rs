//! The cache key: which parts of a request name a stored response. By default
//! `scheme://host/path?query`, the URI (RFC 9111 §2); a zone may leave parts
//! out (the query, to store one copy whatever the tracking parameters) or add
//! request fields (`header:X-Tenant`). Purge by prefix matches on this text.

use crate::http::request::RequestView;

/// One part of the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// `http` or `https`.
    Scheme,
    /// The host and port the client asked for, lowercase.
    Host,
    /// The path, as sent.
    Path,
    /// The query, as sent (with its `?`).
    Query,
    /// A request field's values, joined by commas.
    Header(Box<str>),
}

/// The parts, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec {
    parts: Box<[KeyPart]>,
}

impl Default for KeySpec {
    fn default() -> Self {
        KeySpec {
            parts: Box::new([
                KeyPart::Scheme,
                KeyPart::Host,
                KeyPart::Path,
                KeyPart::Query,
            ]),
        }
    }
}

impl KeySpec {
    /// Reads `["scheme", "host", "path", "query", "header:Name"]`; the error
    /// is a sentence naming the part that is not one.
    pub fn parse(parts: &[String]) -> Result<Self, String> {
        let mut out = Vec::new();
        for p in parts {
            let part = match p.to_ascii_lowercase().as_str() {
                "scheme" => KeyPart::Scheme,
                "host" => KeyPart::Host,
                "path" => KeyPart::Path,
                "query" => KeyPart::Query,
                other => match other.strip_prefix("header:") {
                    Some(name)
                        if !name.is_empty()
                            && name
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)) =>
                    {
                        KeyPart::Header(name.into())
                    }
                    _ => {
                        return Err(format!(
                            "{p:?} is not a key part; use \"scheme\", \"host\", \"path\", \"query\" or \"header:Name\""
                        ))
                    }
                },
            };
            out.push(part);
        }
        if !out.contains(&KeyPart::Path) {
            return Err("the key must include \"path\"".into());
        }
        Ok(KeySpec {
            parts: out.into_boxed_slice(),
        })
    }

    /// The key of `request`.
    pub fn key_of(&self, request: &RequestView<'_>) -> Box<[u8]> {
        let mut out = Vec::with_capacity(64 + request.target().len());
        let target = request.target();
        let (path, query) = if target.first() == Some(&b'/') {
            match target.iter().position(|&b| b == b'?') {
                Some(q) => (&target[..q], Some(&target[q + 1..])),
                None => (target, None),
            }
        } else {
            (request.path(), request.query())
        };
        for part in self.parts.iter() {
            match part {
                KeyPart::Scheme => out.extend_from_slice(if request.is_secure() {
                    b"https://"
                } else {
                    b"http://"
                }),
                KeyPart::Host => out.extend(
                    request
                        .authority()
                        .unwrap_or_default()
                        .iter()
                        .map(u8::to_ascii_lowercase),
                ),
                KeyPart::Path => out.extend_from_slice(path),
                KeyPart::Query => {
                    if let Some(q) = query {
                        out.push(b'?');
                        out.extend_from_slice(q);
                    }
                }
                KeyPart::Header(name) => {
                    out.push(b'\n');
                    out.extend_from_slice(name.as_bytes());
                    out.push(b':');
                    let mut first = true;
                    for (n, v) in request.headers() {
                        if n.eq_ignore_ascii_case(name.as_bytes()) {
                            if !first {
                                out.push(b',');
                            }
                            first = false;
                            out.extend_from_slice(v);
                        }
                    }
                }
            }
        }
        out.into_boxed_slice()
    }

    /// The key another URI of the same origin would have (`Location` after
    /// an unsafe request, RFC 9111 §4.4), when the key is the plain URI and
    /// `uri` is a path or an absolute URI on `request`'s host.
    pub fn key_of_uri(&self, request: &RequestView<'_>, uri: &[u8]) -> Option<Box<[u8]>> {
        if *self != KeySpec::default() {
            return None;
        }
        let scheme: &[u8] = if request.is_secure() {
            b"https://"
        } else {
            b"http://"
        };
        let host: Vec<u8> = request
            .authority()?
            .iter()
            .map(u8::to_ascii_lowercase)
            .collect();
        let mut out = Vec::new();
        out.extend_from_slice(scheme);
        out.extend_from_slice(&host);
        if uri.first() == Some(&b'/') && uri.get(1) != Some(&b'/') {
            out.extend_from_slice(uri);
            return Some(out.into_boxed_slice());
        }
        let lower: Vec<u8> = uri.iter().map(u8::to_ascii_lowercase).collect();
        if lower.starts_with(&out) && uri.get(out.len()) == Some(&b'/') {
            out.extend_from_slice(&uri[out.len()..]);
            return Some(out.into_boxed_slice());
        }
        None
    }
}
