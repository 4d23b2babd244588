//! An HTTP/2 or HTTP/3 request head (pseudo-fields and fields, as both
//! codecs decode them) made into the HTTP/1 head the handlers read: the
//! pseudo-fields become a request line and `Host`, split `Cookie` fields are
//! joined (RFC 9113 §8.2.3, RFC 9114 §4.2.1), and the head is built with the
//! HTTP/1 parser's checks, so every protocol meets the same grammar and the
//! same `[http]` limits (field count, head size, target length) and handlers
//! see one request view. An extended CONNECT (RFC 8441) becomes the HTTP/1.1
//! upgrade it stands for (RFC 8441 §5): a `GET` of its path with
//! `Connection: upgrade` and `Upgrade:` its `:protocol`, and no body (the
//! stream's DATA are the tunnel's bytes).

use crate::http::request_fields::RequestHead as DecodedHead;
use crate::http1::parse::{
    BodyKind, Limits, Method, RequestError, RequestHead, RequestHeadBuilder,
};

/// Builds `decoded` as an HTTP/1 head in `buf` and `head`.
/// `end_of_stream`: the HEADERS frame ended the stream, so there is no body.
/// Errors are the status to answer with (400, 414, 431).
pub(crate) fn read_pseudo_head(
    decoded: &DecodedHead,
    end_of_stream: bool,
    limits: &Limits,
    buf: &mut Vec<u8>,
    head: &mut RequestHead,
) -> Result<(), u16> {
    if decoded.oversized() {
        // The answer is shaped by this request's method, not by what a head
        // reused from an earlier request of the connection still holds.
        buf.clear();
        head.clear();
        head.method = Method::from_token(decoded.method());
        return Err(431);
    }
    build_head(decoded, limits, buf, head).map_err(|e| e.status())?;
    head.body = match head.body {
        _ if end_of_stream || decoded.protocol().is_some() => BodyKind::None,
        BodyKind::Length(n) => BodyKind::Length(n),
        // No length: the body ends with the stream.
        _ => BodyKind::Chunked,
    };
    head.keep_alive = true;
    Ok(())
}

fn build_head(
    decoded: &DecodedHead,
    limits: &Limits,
    buf: &mut Vec<u8>,
    head: &mut RequestHead,
) -> Result<(), RequestError> {
    let authority = decoded.authority();
    let protocol = decoded.protocol();
    let (method, target) = match decoded.method() {
        _ if protocol.is_some() => (&b"GET"[..], decoded.path().unwrap_or_default()),
        m @ b"CONNECT" => (m, authority.unwrap_or_default()),
        m => (m, decoded.path().unwrap_or_default()),
    };
    // One allocation for a head whose buffers were freed (an idle
    // connection's), not a run of them as the text grows.
    let fields = decoded.fields().size_hint().0;
    buf.reserve(decoded.list.stored_len() + 4 * fields + 64);
    let plain = decoded.plain();
    let mut builder = RequestHeadBuilder::new(buf, head, limits, method, target)?;
    builder.reserve_fields(fields + 3);
    if let Some(a) = authority {
        // The codec found the value's bytes valid for HTTP/1.
        match plain {
            true => builder.field_of_token_bytes(b"host", a)?,
            false => builder.field(b"host", a)?,
        }
    }
    if let Some(p) = protocol {
        builder.field(b"connection", b"upgrade")?;
        builder.field(b"upgrade", p)?;
    }
    let mut cookies = false;
    for (name, value) in decoded.fields() {
        if name == b"cookie" {
            cookies = true;
            continue;
        }
        // `:authority` wins over `Host` (RFC 9113 §8.3.1).
        if name == b"host" && authority.is_some() {
            continue;
        }
        // Checked once: by the codec as it decoded the field, or here when
        // it found a byte HTTP/1 refuses (the builder then names the error).
        match plain {
            true => builder.field_of_token_bytes(name, value)?,
            false => builder.field(name, value)?,
        }
    }
    if cookies {
        let crumbs = decoded.fields().filter(|(n, _)| *n == b"cookie");
        builder.joined_field(b"cookie", b"; ", crumbs.map(|(_, v)| v))?;
    }
    builder.finish()
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
        read_pseudo_head(&d, true, &Limits::default(), &mut buf, &mut head).unwrap();
        assert_eq!(head.path(&buf), b"/a/b");
        assert_eq!(head.query(&buf), Some(&b"x=1"[..]));
        assert_eq!(head.host(&buf), Some(&b"example.com:8443"[..]));
        assert_eq!(head.header(&buf, "cookie"), Some(&b"a=1; b=2"[..]));
        assert_eq!(head.header(&buf, "user-agent"), Some(&b"t"[..]));
        assert_eq!(head.body, BodyKind::None);
    }

    #[test]
    fn an_oversized_head_forgets_the_request_a_reused_head_held() {
        let (mut buf, mut head) = (Vec::new(), RequestHead::default());
        let earlier = decoded(
            &[
                (":method", "HEAD"),
                (":scheme", "https"),
                (":authority", "a"),
                (":path", "/"),
                ("content-length", "5"),
            ],
            false,
        );
        read_pseudo_head(&earlier, false, &Limits::default(), &mut buf, &mut head).unwrap();
        assert_eq!(head.method, Method::Head);
        let long = "x".repeat(2000);
        let oversized = DecodedHead::decoded_for_test(
            &[
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", "a"),
                (":path", "/"),
                ("big", &long),
            ],
            1024,
            true,
        )
        .expect("a valid head");
        assert!(oversized.oversized());
        let got = read_pseudo_head(&oversized, true, &Limits::default(), &mut buf, &mut head);
        assert_eq!(got, Err(431));
        assert_eq!(
            head.method,
            Method::Get,
            "the 431 to a GET carries its body"
        );
        assert_eq!(head.body, BodyKind::None);
        assert!(buf.is_empty());
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
        read_pseudo_head(
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
        read_pseudo_head(&d, false, &Limits::default(), &mut buf, &mut head).unwrap();
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
            read_pseudo_head(&d, true, &limits, &mut buf, &mut head),
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
            read_pseudo_head(&d, true, &limits, &mut buf, &mut head),
            Err(414)
        );
    }

    /// The status `read_h2_head` gives a GET to `/` with `extra` fields.
    fn get_status(pseudo: &[(&str, &str)], extra: &[(&str, &str)]) -> Result<(), u16> {
        let mut fields = pseudo.to_vec();
        fields.extend_from_slice(extra);
        let d = decoded(&fields, false);
        let (mut buf, mut head) = (Vec::new(), RequestHead::default());
        read_pseudo_head(&d, false, &Limits::default(), &mut buf, &mut head)
    }

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/"),
    ];

    #[test]
    fn what_http2_lets_through_and_http1_refuses_is_400() {
        assert_eq!(get_status(&GET, &[("accept", "*/*")]), Ok(()));
        let bad_method = [GET[1], GET[2], GET[3], (":method", "G T")];
        assert_eq!(get_status(&bad_method, &[]), Err(400), "method not a token");
        assert_eq!(
            get_status(&GET, &[("a(b", "v")]),
            Err(400),
            "name not a token"
        );
        assert_eq!(
            get_status(&GET, &[("a", "x\u{1}y")]),
            Err(400),
            "control byte"
        );
        assert_eq!(
            get_status(&GET, &[("cookie", "a=1"), ("cookie", "b\u{7f}")]),
            Err(400),
            "control byte in a crumb"
        );
        assert_eq!(get_status(&GET, &[("a", "x\u{7f}")]), Err(400), "DEL");
        assert_eq!(
            get_status(&GET, &[("a", "\u{1}")]),
            Err(400),
            "control byte alone"
        );
        assert_eq!(
            get_status(&GET, &[("a\"b", "v")]),
            Err(400),
            "quote in a name"
        );
        let bad_host = [GET[0], GET[1], GET[3], (":authority", "a\u{1}b")];
        assert_eq!(
            get_status(&bad_host, &[]),
            Err(400),
            "control byte in :authority"
        );
        assert_eq!(get_status(&GET, &[("a", "caf\u{e9}")]), Ok(()), "obs-text");
        let cl = ("content-length", "1");
        assert_eq!(get_status(&GET, &[cl, cl]), Err(400), "two lengths");
        let bad_authority = [GET[0], GET[1], GET[3], (":authority", "a b")];
        assert_eq!(get_status(&bad_authority, &[]), Err(400), "authority");
        let fragment = [GET[0], GET[1], GET[2], (":path", "/a#b")];
        assert_eq!(get_status(&fragment, &[]), Err(400), "fragment");
        let star = [GET[1], GET[2], (":path", "*"), (":method", "GET")];
        assert_eq!(get_status(&star, &[]), Err(400), "* is for OPTIONS");
    }

    #[test]
    fn connect_options_and_expect_read_as_in_http1() {
        let d = decoded(
            &[(":method", "CONNECT"), (":authority", "o.test:443")],
            false,
        );
        let (mut buf, mut head) = (Vec::new(), RequestHead::default());
        read_pseudo_head(&d, false, &Limits::default(), &mut buf, &mut head).unwrap();
        assert_eq!(head.method, crate::http1::Method::Connect);
        assert_eq!(head.host_name(&buf), Some(&b"o.test"[..]));
        assert_eq!(head.path(&buf), b"o.test:443");
        let d = decoded(&[(":method", "CONNECT"), (":authority", "o.test")], false);
        assert_eq!(
            read_pseudo_head(&d, false, &Limits::default(), &mut buf, &mut head),
            Err(400),
            "CONNECT needs a port"
        );

        let options = [GET[1], GET[2], (":path", "*"), (":method", "OPTIONS")];
        let d = decoded(&options, true);
        read_pseudo_head(&d, true, &Limits::default(), &mut buf, &mut head).unwrap();
        assert_eq!(head.target_form, crate::http1::TargetForm::Asterisk);

        let mut post = GET.to_vec();
        post[0] = (":method", "POST");
        post.extend([("content-length", "3"), ("expect", "100-continue")]);
        let d = decoded(&post, false);
        read_pseudo_head(&d, false, &Limits::default(), &mut buf, &mut head).unwrap();
        assert_eq!(head.method, crate::http1::Method::Post);
        assert_eq!(head.body, BodyKind::Length(3));
        assert!(head.expect_continue);
    }

    #[test]
    fn an_extended_connect_reads_as_an_http1_upgrade() {
        let d = decoded(
            &[
                (":method", "CONNECT"),
                (":protocol", "websocket"),
                (":scheme", "https"),
                (":authority", "a.test"),
                (":path", "/chat?x=1"),
                ("sec-websocket-version", "13"),
            ],
            false,
        );
        let (mut buf, mut head) = (Vec::new(), RequestHead::default());
        read_pseudo_head(&d, false, &Limits::default(), &mut buf, &mut head).unwrap();
        assert_eq!(head.method, crate::http1::Method::Get);
        assert_eq!(head.path(&buf), b"/chat");
        assert_eq!(head.query(&buf), Some(&b"x=1"[..]));
        assert_eq!(head.host(&buf), Some(&b"a.test"[..]));
        assert_eq!(head.header(&buf, "connection"), Some(&b"upgrade"[..]));
        assert_eq!(head.header(&buf, "upgrade"), Some(&b"websocket"[..]));
        assert_eq!(head.header(&buf, "sec-websocket-version"), Some(&b"13"[..]));
        assert_eq!(
            head.body,
            BodyKind::None,
            "DATA are the tunnel's, not a body"
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
            read_pseudo_head(&d, true, &Limits::default(), &mut buf, &mut head),
            Err(431)
        );
    }
}
