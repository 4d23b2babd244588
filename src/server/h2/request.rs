//! An HTTP/2 request head made into the HTTP/1 head the handlers read: the
//! pseudo-fields become a request line and `Host`, split `Cookie` fields are
//! joined (RFC 9113 §8.2.3), and the result goes through the HTTP/1 parser,
//! so both protocols meet the same grammar and the same `[http]` limits
//! (field count, head size, target length) and handlers see one request view.

use http::request::Parts;

use crate::http1::parse::{parse_request, BodyKind, Limits, Parsed, RequestHead};

/// Writes the head of `parts` as HTTP/1 into `buf` and parses it into `head`.
/// `end_of_stream`: the HEADERS frame ended the stream, so there is no body.
/// Errors are the status to answer with (400, 414, 431).
pub(super) fn read_h2_head(
    parts: &Parts,
    end_of_stream: bool,
    limits: &Limits,
    buf: &mut Vec<u8>,
    head: &mut RequestHead,
) -> Result<(), u16> {
    buf.clear();
    buf.extend_from_slice(parts.method.as_str().as_bytes());
    buf.push(b' ');
    let authority = parts.uri.authority().map(|a| a.as_str());
    if parts.method == http::Method::CONNECT {
        buf.extend_from_slice(authority.unwrap_or("").as_bytes());
    } else {
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        if target.is_empty() {
            return Err(400);
        }
        buf.extend_from_slice(target.as_bytes());
    }
    buf.extend_from_slice(b" HTTP/1.1\r\n");
    if let Some(a) = authority {
        buf.extend_from_slice(b"host: ");
        buf.extend_from_slice(a.as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
    let mut cookies = 0;
    for (name, value) in &parts.headers {
        if name == http::header::COOKIE {
            cookies += 1;
            continue;
        }
        // `:authority` wins over `Host` (RFC 9113 §8.3.1).
        if name == http::header::HOST && authority.is_some() {
            continue;
        }
        buf.extend_from_slice(name.as_str().as_bytes());
        buf.extend_from_slice(b": ");
        buf.extend_from_slice(value.as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
    if cookies > 0 {
        buf.extend_from_slice(b"cookie: ");
        for (i, v) in parts
            .headers
            .get_all(http::header::COOKIE)
            .iter()
            .enumerate()
        {
            if i > 0 {
                buf.extend_from_slice(b"; ");
            }
            buf.extend_from_slice(v.as_bytes());
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

    fn parts(req: http::Request<()>) -> Parts {
        req.into_parts().0
    }

    #[test]
    fn pseudo_fields_become_the_request_line_and_host() {
        let p = parts(
            http::Request::get("https://example.com:8443/a/b?x=1")
                .header("cookie", "a=1")
                .header("user-agent", "t")
                .header("cookie", "b=2")
                .header("host", "other")
                .body(())
                .unwrap(),
        );
        let (mut buf, mut head) = (Vec::new(), RequestHead::default());
        read_h2_head(&p, true, &Limits::default(), &mut buf, &mut head).unwrap();
        assert_eq!(head.path(&buf), b"/a/b");
        assert_eq!(head.query(&buf), Some(&b"x=1"[..]));
        assert_eq!(head.host(&buf), Some(&b"example.com:8443"[..]));
        assert_eq!(head.header(&buf, "cookie"), Some(&b"a=1; b=2"[..]));
        assert_eq!(head.body, BodyKind::None);
    }

    #[test]
    fn a_body_without_length_ends_with_the_stream_and_limits_apply() {
        let p = parts(http::Request::post("http://x/up").body(()).unwrap());
        let (mut buf, mut head) = (Vec::new(), RequestHead::default());
        read_h2_head(&p, false, &Limits::default(), &mut buf, &mut head).unwrap();
        assert_eq!(head.body, BodyKind::Chunked);
        let p = parts(
            http::Request::post("http://x/up")
                .header("content-length", "5")
                .body(())
                .unwrap(),
        );
        read_h2_head(&p, false, &Limits::default(), &mut buf, &mut head).unwrap();
        assert_eq!(head.body, BodyKind::Length(5));

        let mut many = http::Request::get("http://x/");
        for i in 0..20 {
            many = many.header(format!("x-{i}"), "v");
        }
        let limits = Limits {
            max_headers: 10,
            ..Limits::default()
        };
        let p = parts(many.body(()).unwrap());
        assert_eq!(
            read_h2_head(&p, true, &limits, &mut buf, &mut head),
            Err(431)
        );
    }
}
