//! The request-head encoder every client uses. It writes into the caller's
//! buffer (nothing allocated) in the order RFC 9112 wants: the request line,
//! `Host` first among the fields (§3.2; origin servers look at it first), the
//! caller's fields, exactly one framing field, the blank line. What the fields
//! are is the caller's business: the proxy copies and rewrites the client's,
//! the health check and the load generator write their own.

use crate::http1::parse::BodyKind;
use crate::http1::write::write_decimal;

/// Starts a request head: `method path[?query] HTTP/1.1`, then `Host: host`.
pub fn write_request_start(
    out: &mut Vec<u8>,
    method: &[u8],
    path: &[u8],
    query: Option<&[u8]>,
    host: &[u8],
) {
    out.extend_from_slice(method);
    out.push(b' ');
    out.extend_from_slice(path);
    if let Some(q) = query {
        out.push(b'?');
        out.extend_from_slice(q);
    }
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host);
    out.extend_from_slice(b"\r\n");
}

/// Appends one field line, `name: value`.
pub fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends the one field that frames a body of kind `body` (none without a body).
pub fn write_framing(out: &mut Vec<u8>, body: BodyKind) {
    match body {
        BodyKind::None => {}
        BodyKind::Length(n) => {
            out.extend_from_slice(b"Content-Length: ");
            write_decimal(out, n);
            out.extend_from_slice(b"\r\n");
        }
        BodyKind::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
}

/// Ends the head: the blank line.
pub fn end_head(out: &mut Vec<u8>) {
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::parse::{parse_request, Limits, Parsed, RequestHead};

    #[test]
    fn a_head_encodes_in_order_and_parses_back() {
        let mut out = Vec::new();
        write_request_start(&mut out, b"POST", b"/a", Some(b"b=c"), b"ex.com:81");
        write_field(&mut out, b"X-A", b"1");
        write_framing(&mut out, BodyKind::Length(12));
        end_head(&mut out);
        assert_eq!(
            out,
            &b"POST /a?b=c HTTP/1.1\r\nHost: ex.com:81\r\nX-A: 1\r\nContent-Length: 12\r\n\r\n"[..]
        );
        let mut head = RequestHead::new();
        assert_eq!(
            parse_request(&out, &Limits::default(), &mut head),
            Ok(Parsed::Complete)
        );
        assert_eq!(head.body, BodyKind::Length(12));
        assert_eq!(head.host(&out), Some(&b"ex.com:81"[..]));
    }

    #[test]
    fn framing_is_one_field_or_none() {
        let mut out = Vec::new();
        write_framing(&mut out, BodyKind::None);
        assert!(out.is_empty());
        write_framing(&mut out, BodyKind::Chunked);
        assert_eq!(out, b"Transfer-Encoding: chunked\r\n");
        out.clear();
        write_framing(&mut out, BodyKind::Length(0));
        assert_eq!(out, b"Content-Length: 0\r\n");
    }
}
