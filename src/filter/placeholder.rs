//! Templates with request placeholders (`{host}`, `{uri}`, ...), as header
//! rules and redirect targets write them. A template is compiled once when the
//! configuration loads into literal pieces and placeholders, so expanding it
//! per request is a few copies into a buffer, never a parse.

use std::fmt::Write as _;

use crate::http::{RequestId, RequestView};

/// A value taken from the request when a template is expanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    /// Host name the client asked for, without the port, in lowercase.
    Host,
    /// Path as sent, still percent-encoded, without the query.
    Path,
    /// Path and query (`/a/b?x=1`) as sent.
    Uri,
    /// Query without its `?`; empty when there is none.
    Query,
    /// `http` or `https`.
    Scheme,
    /// The client's IP address (after the PROXY protocol).
    RemoteAddr,
    /// An identifier unique to this request, the same wherever it is used.
    RequestId,
}

/// Every placeholder by the name written between braces.
const NAMES: [(&str, Placeholder); 7] = [
    ("host", Placeholder::Host),
    ("path", Placeholder::Path),
    ("uri", Placeholder::Uri),
    ("query", Placeholder::Query),
    ("scheme", Placeholder::Scheme),
    ("remote_addr", Placeholder::RemoteAddr),
    ("request_id", Placeholder::RequestId),
];

/// One piece of a compiled template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(Box<[u8]>),
    Value(Placeholder),
}

/// A compiled template: literal bytes and placeholders in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Box<[Piece]>,
    /// The whole template when it has no placeholder, so expanding it is a borrow.
    literal: Option<Box<[u8]>>,
}

impl Template {
    /// Compiles `text`. `{name}` with `name` one of the placeholders is
    /// replaced per request; braces around anything that is not a name (JSON
    /// in a `Report-To` value) are kept as written; `{name}` with an unknown
    /// name is an error, as it is most likely a misspelt placeholder.
    pub fn compile(text: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut literal = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            literal.extend_from_slice(&rest.as_bytes()[..open]);
            let after = &rest[open + 1..];
            let name_len = after
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            if name_len > 0 && after.as_bytes().get(name_len) == Some(&b'}') {
                let name = &after[..name_len];
                let Some(&(_, p)) = NAMES.iter().find(|(n, _)| *n == name) else {
                    return Err(format!(
                        "unknown placeholder {{{name}}}; the placeholders are {}",
                        NAMES
                            .iter()
                            .map(|(n, _)| format!("{{{n}}}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                };
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal).into()));
                }
                pieces.push(Piece::Value(p));
                rest = &after[name_len + 1..];
            } else {
                literal.push(b'{');
                rest = after;
            }
        }
        literal.extend_from_slice(rest.as_bytes());
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal.into()));
        }
        let literal = match pieces.as_slice() {
            [] => Some(Box::default()),
            [Piece::Literal(l)] => Some(l.clone()),
            _ => None,
        };
        Ok(Template {
            pieces: pieces.into(),
            literal,
        })
    }

    /// The value when the template has no placeholder.
    pub fn as_literal(&self) -> Option<&[u8]> {
        self.literal.as_deref()
    }

    /// Whether expanding the template needs the request.
    pub fn has_placeholders(&self) -> bool {
        self.literal.is_none()
    }

    /// Whether the template uses `p`.
    pub fn uses(&self, p: Placeholder) -> bool {
        self.pieces.contains(&Piece::Value(p))
    }

    /// Appends the template expanded for `req` to `out`.
    pub fn expand(&self, req: &RequestView<'_>, id: &RequestId, out: &mut Vec<u8>) {
        for piece in self.pieces.iter() {
            match piece {
                Piece::Literal(l) => out.extend_from_slice(l),
                Piece::Value(p) => push_value(*p, req, id, out),
            }
        }
    }
}

/// Appends the value of one placeholder.
pub fn push_value(p: Placeholder, req: &RequestView<'_>, id: &RequestId, out: &mut Vec<u8>) {
    match p {
        // Host names are case-insensitive; the lowercase form, as nginx's $host.
        Placeholder::Host => out.extend(host_or_sni(req).iter().map(u8::to_ascii_lowercase)),
        Placeholder::Path => out.extend_from_slice(req.path()),
        Placeholder::Uri => {
            out.extend_from_slice(req.path());
            if let Some(q) = req.query() {
                out.push(b'?');
                out.extend_from_slice(q);
            }
        }
        Placeholder::Query => out.extend_from_slice(req.query().unwrap_or_default()),
        Placeholder::Scheme => {
            out.extend_from_slice(if req.is_secure() { b"https" } else { b"http" })
        }
        Placeholder::RemoteAddr => {
            let mut s = String::new();
            let _ = write!(s, "{}", req.peer().ip());
            out.extend_from_slice(s.as_bytes());
        }
        Placeholder::RequestId => out.extend_from_slice(&id.get()),
    }
}

/// The host name without the port: the `Host` field's (or the absolute
/// target's), else the TLS server name, else empty.
fn host_or_sni<'a>(req: &RequestView<'a>) -> &'a [u8] {
    match req.host_name().filter(|h| !h.is_empty()) {
        Some(h) => h,
        None => req
            .tls()
            .and_then(|t| t.sni)
            .map_or(&[][..], |s| s.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::parse::{parse_request, Limits, Parsed, RequestHead};

    fn expand(template: &str, raw: &[u8], secure: bool) -> String {
        let mut head = RequestHead::default();
        assert!(matches!(
            parse_request(raw, &Limits::default(), &mut head),
            Ok(Parsed::Complete)
        ));
        let tls = secure.then(crate::http::TlsFacts::default);
        let req = RequestView::http1(&head, raw, "192.0.2.7:5555".parse().unwrap(), tls);
        let mut out = Vec::new();
        Template::compile(template)
            .unwrap()
            .expand(&req, &RequestId::default(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn placeholders_take_the_request_s_values() {
        let raw = b"GET /a/b%20c?x=1&y HTTP/1.1\r\nHost: Example.com:8080\r\n\r\n";
        assert_eq!(
            expand("https://{host}{uri}", raw, false),
            "https://example.com/a/b%20c?x=1&y"
        );
        assert_eq!(expand("{path}|{query}", raw, false), "/a/b%20c|x=1&y");
        assert_eq!(
            expand("{scheme}://{remote_addr}", raw, true),
            "https://192.0.2.7"
        );
        let bare = b"GET /p HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(expand("{uri}[{query}]", bare, false), "/p[]");
    }

    #[test]
    fn braces_that_are_not_placeholders_stay_and_unknown_names_are_errors() {
        let t = Template::compile(r#"{"group":"x","max_age":1}"#).unwrap();
        assert_eq!(t.as_literal(), Some(&br#"{"group":"x","max_age":1}"#[..]));
        assert!(Template::compile("{}").unwrap().as_literal().is_some());
        let e = Template::compile("https://{hots}{uri}").unwrap_err();
        assert!(e.contains("{hots}") && e.contains("{host}"), "{e}");
        assert!(Template::compile("{host}").unwrap().uses(Placeholder::Host));
    }
}
