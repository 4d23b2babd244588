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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::HeaderLines;

    fn decoded(fields: &[(&str, &str)], end_stream: bool) -> DecodedHead {
        DecodedHead::decoded_for_test(fields, 16 * 1024, end_stream).expect("a valid head")
    }

    #[test]
    fn pseudo_fields_become_the_request_line_and_host() {
        let d = decoded(
            &[
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", "example.com:8443"),
                (":path", "/a/b?x=1"),
                ("cookie", "a=1"),
                ("user-agent", "t"),
                ("cookie", "b=2"),
                ("host", "other"),
            ],
            true,
        );
        let (mut buf, mut head) = (Vec::new(), RequestHead::default());
        read_h2_head(&d, true, &Limits::default(), &mut buf, &mut head).unwrap();
        assert_eq!(head.path(&buf), b"/a/b");
        assert_eq!(head.query(&buf), Some(&b"x=1"[..]));
        assert_eq!(head.host(&buf), Some(&b"example.com:8443"[..]));
        assert_eq!(head.header(&buf, "cookie"), Some(&b"a=1; b=2"[..]));
        assert_eq!(head.header(&buf, "user-agent"), Some(&b"t"[..]));
        assert_eq!(head.body, BodyKind::None);
    }

    #[test]
    fn a_body_without_length_ends_with_the_stream_and_limits_apply() {
        let post = [
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", "x"),
            (":path", "/up"),
        ];
        let (mut buf, mut head) = (Vec::new(), RequestHead::default());
        read_h2_head(
            &decoded(&post, false),
            false,
            &Limits::default(),
            &mut buf,
            &mut head,
        )
        .unwrap();
        assert_eq!(head.body, BodyKind::Chunked);
        let mut with_length = post.to_vec();
        with_length.push(("content-length", "5"));
        let d = decoded(&with_length, false);
        read_h2_head(&d, false, &Limits::default(), &mut buf, &mut head).unwrap();
        assert_eq!(head.body, BodyKind::Length(5));

        let names: Vec<String> = (0..20).map(|i| format!("x-{i}")).collect();
        let mut many = vec![
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "x"),
            (":path", "/"),
        ];
        many.extend(names.iter().map(|n| (n.as_str(), "v")));
        let limits = Limits {
            max_headers: 10,
            ..Limits::default()
        };
        let d = decoded(&many, true);
        assert_eq!(
            read_h2_head(&d, true, &limits, &mut buf, &mut head),
            Err(431)
        );
        // The HTTP/1 target limit holds over HTTP/2 too.
        let long = format!("/{}", "a".repeat(100));
        let d = decoded(
            &[(":method", "GET"), (":scheme", "http"), (":path", &long)],
            true,
        );
        let limits = Limits {
            max_uri_bytes: 50,
            ..Limits::default()
        };
        assert_eq!(
            read_h2_head(&d, true, &limits, &mut buf, &mut head),
            Err(414)
        );
    }

    #[test]
    fn an_oversized_head_is_431() {
        let long = "v".repeat(200);
        let fields = [
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("x-long", long.as_str()),
        ];
        let d = DecodedHead::decoded_for_test(&fields, 100, true).expect("delivered, oversized");
        assert!(d.oversized());
        let (mut buf, mut head) = (Vec::new(), RequestHead::default());
        assert_eq!(
            read_h2_head(&d, true, &Limits::default(), &mut buf, &mut head),
            Err(431)
        );
    }
}
