//! An HTTP/2 request head made into the HTTP/1 head the handlers read: the
//! pseudo-fields become a request line and `Host`, split `Cookie` fields are
//! joined (RFC 9113 §8.2.3), and the result goes through the HTTP/1 parser,
//! so both protocols meet the same grammar and the same `[http]` limits
//! (field count, head size, target length) and handlers see one request view.

use crate::http1::parse::{parse_request, BodyKind, Limits, Parsed, RequestHead};
use crate::http2::conn::RequestHead as DecodedHead;

/// Writes `decoded` as an HTTP/1 head into `buf` and parses it into `head`.
/// `end_of_stream`: the HEADERS frame ended the stream, so there is no body.
/// Errors are the status to answer with (400, 414, 431).
pub(super) fn read_h2_head(
    decoded: &DecodedHead,
    end_of_stream: bool,
    limits: &Limits,
    buf: &mut Vec<u8>,
    head: &mut RequestHead,
) -> Result<(), u16> {
    if decoded.oversized() {
        return Err(431);
    }
    buf.clear();
    let method = decoded.method();
    buf.extend_from_slice(method);
    buf.push(b' ');
    let authority = decoded.authority();
    if method == b"CONNECT" {
        buf.extend_from_slice(authority.unwrap_or_default());
    } else {
        let target = decoded.path().unwrap_or_default();
        if target.is_empty() {
            return Err(400);
        }
        buf.extend_from_slice(target);
    }
    buf.extend_from_slice(b" HTTP/1.1\r\n");
    if let Some(a) = authority {
        buf.extend_from_slice(b"host: ");
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
    let mut cookies = 0;
    for (name, value) in decoded.fields() {
        if name == b"cookie" {
            cookies += 1;
            continue;
        }
        // `:authority` wins over `Host` (RFC 9113 §8.3.1).
        if name == b"host" && authority.is_some() {
            continue;
        }
        buf.extend_from_slice(name);
        buf.extend_from_slice(b": ");
        buf.extend_from_slice(value);
        buf.extend_from_slice(b"\r\n");
    }
    if cookies > 0 {
        buf.extend_from_slice(b"cookie: ");
        let crumbs = decoded.fields().filter(|(n, _)| *n == b"cookie");
        for (i, (_, v)) in crumbs.enumerate() {
            if i > 0 {
                buf.extend_from_slice(b"; ");
            }
            buf.extend_from_slice(v);
        }
        buf.extend_from_slice(b"\r\n");
    }
    buf.extend_from_slice(b"\r\n");
    head.clear();
    match parse_request(buf, limits, head) {
        Ok(Parsed::Complete) => {}
        Ok(Parsed::Partial) => return Err(400),
        Err(e) => return Err(e.status()),
    }
    head.body = match head.body {
        _ if end_of_stream => BodyKind::None,
        BodyKind::Length(n) => BodyKind::Length(n),
        // No length: the body ends with the stream.
        _ => BodyKind::Chunked,
    };
    head.keep_alive = true;
    Ok(())
}
