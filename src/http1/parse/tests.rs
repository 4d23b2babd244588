//! Unit tests for request-head parsing: raw bytes in, a head or a status out.

use super::*;
use crate::http1::test_support::assert_each;

fn parse(raw: &[u8]) -> Result<(Parsed, RequestHead), RequestError> {
    let mut head = RequestHead::new();
    let p = parse_request(raw, &Limits::default(), &mut head)?;
    Ok((p, head))
}

fn complete(raw: &[u8]) -> RequestHead {
    match parse(raw) {
        Ok((Parsed::Complete, head)) => head,
        other => panic!(
            "expected Complete for {:?}, got {other:?}",
            String::from_utf8_lossy(raw)
        ),
    }
}

fn status(raw: &[u8]) -> u16 {
    match parse(raw) {
        Err(e) => e.status(),
        Ok(other) => panic!(
            "expected an error for {:?}, got {:?}",
            String::from_utf8_lossy(raw),
            other.0
        ),
    }
}

fn err(raw: &[u8]) -> RequestError {
    parse(raw).expect_err("expected an error")
}

/// The error for a request made of `before`, the input and `after`: for tests
/// that try many values in one place of one request.
fn err_between(before: &'static [u8], after: &'static [u8]) -> impl Fn(&[u8]) -> RequestError {
    move |input| err(&[before, input, after].concat())
}

/// One head parsed into again and again under the same limits, as a
/// connection keeps its head across reads and requests.
#[derive(Default)]
struct ReusedHead {
    head: RequestHead,
    limits: Limits,
}

impl ReusedHead {
    fn parse(&mut self, raw: &[u8]) -> Result<Parsed, RequestError> {
        parse_request(raw, &self.limits, &mut self.head)
    }
}

#[test]
fn simple_get() {
    let raw =
        b"GET /index.html?a=1&b HTTP/1.1\r\nHost: Example.com:8080\r\nAccept: */*\r\n\r\nBODY";
    let h = complete(raw);
    assert_eq!(h.method, Method::Get);
    assert_eq!(h.version, Version::Http11);
    assert_eq!(h.head_len, raw.len() - 4);
    assert_eq!(h.target(raw), b"/index.html?a=1&b");
    assert_eq!(h.path(raw), b"/index.html");
    assert_eq!(h.query(raw), Some(&b"a=1&b"[..]));
    assert_eq!(h.host(raw), Some(&b"Example.com:8080"[..]));
    assert_eq!(h.host_name(raw), Some(&b"Example.com"[..]));
    assert_eq!(h.header(raw, "accept"), Some(&b"*/*"[..]));
    assert_eq!(h.header(raw, "ACCEPT"), Some(&b"*/*"[..]));
    assert_eq!(h.header(raw, "missing"), None);
    assert_eq!(h.headers(raw).count(), 2);
    assert_eq!(h.body, BodyKind::None);
    assert!(h.keep_alive);
    assert!(!h.expect_continue);
    assert_eq!(h.target_form, TargetForm::Origin);
}

#[test]
fn query_absent_versus_empty() {
    let query = |raw: &'static [u8]| complete(raw).query(raw);
    assert_eq!(
        query(b"GET /a? HTTP/1.1\r\nHost: h\r\n\r\n"),
        Some(&b""[..])
    );
    assert_eq!(query(b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n"), None);
}

#[test]
fn other_method_keeps_token() {
    let raw = b"PROPFIND /x HTTP/1.1\r\nHost: h\r\n\r\n";
    let h = complete(raw);
    assert_eq!(h.method, Method::Other);
    assert_eq!(h.method_token(raw), b"PROPFIND");
    // Methods are case-sensitive.
    let raw = b"get /x HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_eq!(complete(raw).method, Method::Other);
}

#[test]
fn head_reuse_keeps_no_stale_state() {
    let mut head = RequestHead::new();
    let a = b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nX: 1\r\nY: 2\r\n\r\n";
    parse_request(a, &Limits::default(), &mut head).unwrap();
    assert_eq!(head.body, BodyKind::Length(3));
    let b = b"GET /b HTTP/1.0\r\n\r\n";
    parse_request(b, &Limits::default(), &mut head).unwrap();
    assert_eq!(head.body, BodyKind::None);
    assert_eq!(head.headers(b).count(), 0);
    assert_eq!(head.host(b), None);
    assert!(!head.keep_alive);
}

#[test]
fn partial_at_every_prefix() {
    let raw = b"\r\nPOST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";
    for cut in 0..raw.len() {
        assert_eq!(
            parse(&raw[..cut]).map(|r| r.0),
            Ok(Parsed::Partial),
            "cut at {cut}"
        );
    }
    assert_eq!(complete(raw).head_len, raw.len());
}

/// Feeds growing prefixes to one reused head, as a connection does, and
/// checks every step against a fresh one-shot parse of the same prefix.
fn incremental(raw: &[u8], step: usize, limits: &Limits) -> Result<(Parsed, usize), RequestError> {
    let mut head = RequestHead::new();
    let mut end: usize = 0;
    loop {
        end = end.saturating_add(step).min(raw.len());
        let got = parse_request(&raw[..end], limits, &mut head);
        let mut fresh = RequestHead::new();
        let oneshot = parse_request(&raw[..end], limits, &mut fresh);
        match (&got, &oneshot) {
            (Ok(Parsed::Complete), _) => {
                assert_eq!(oneshot, Ok(Parsed::Complete));
                assert_eq!(head.head_len, fresh.head_len);
                assert_eq!(head.target(raw), fresh.target(raw));
                assert_eq!(head.headers(raw).count(), fresh.headers(raw).count());
            }
            (Ok(Parsed::Partial), _) => assert_ne!(oneshot, Ok(Parsed::Complete), "at {end}"),
            (Err(e), _) => assert_eq!(oneshot, Err(*e), "at {end}"),
        }
        if got != Ok(Parsed::Partial) || end == raw.len() {
            return got.map(|p| (p, head.head_len));
        }
    }
}

/// The Host memo's comparison tells apart values that differ in any one
/// byte or in length, at every length it keeps.
#[test]
fn same_bytes_sees_every_difference() {
    for n in 0..=64usize {
        let a: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
        assert!(same_bytes(&a, &a.clone()), "{n}");
        for at in 0..n {
            let mut b = a.clone();
            b[at] ^= 0x01;
            assert!(!same_bytes(&a, &b), "{n} at {at}");
        }
        assert!(!same_bytes(&a, &a[..n.saturating_sub(1)]) || n == 0, "{n}");
        let mut longer = a.clone();
        longer.push(b'x');
        assert!(!same_bytes(&a, &longer), "{n}");
    }
}

/// The one-pass tokenizer judges an origin-form target from where it saw
/// the first `?`; the full parse (a head that arrived in two pieces) finds
/// the same path, query and form, and refuses the same targets.
#[test]
fn targets_judged_in_one_pass_match_the_full_parse() {
    let limits = Limits::default();
    let targets: [&[u8]; 12] = [
        b"/",
        b"/a?",
        b"/a?b?c",
        b"/?x",
        b"/a/b.txt?q=1&r=%20",
        b"/a#b",
        b"/a?b#c",
        b"*",
        b"http://h/a?b",
        b"http://h?b",
        b"a?b",
        b"?a",
    ];
    for method in [&b"GET"[..], b"OPTIONS", b"CONNECT"] {
        for (target, lead) in targets
            .into_iter()
            .flat_map(|t| [(t, &b""[..]), (t, b"\r\n")])
        {
            let raw = [lead, method, b" ", target, b" HTTP/1.1\r\nHost: h\r\n\r\n"].concat();
            // An origin-form target without '#' is judged by the tokenizer's
            // one pass; the comparison below is then one pass against the
            // full parse, not the full parse against itself.
            let simple = target.starts_with(b"/") && !target.contains(&b'#');
            let tokenized =
                simple_head::tokenize(&raw[lead.len()..], lead.len(), 100, &mut RequestHead::new());
            assert!(
                tokenized.is_some() || !simple,
                "{}",
                String::from_utf8_lossy(&raw)
            );
            let mut one_pass = RequestHead::new();
            let whole = parse_request(&raw, &limits, &mut one_pass);
            let mut pieces = RequestHead::new();
            let split = raw.len() - 1;
            let first = parse_request(&raw[..split], &limits, &mut pieces);
            let full = match first {
                Ok(Parsed::Partial) => parse_request(&raw, &limits, &mut pieces),
                other => other,
            };
            let label = String::from_utf8_lossy(&raw);
            assert_eq!(whole, full, "{label}");
            if whole.is_ok() {
                assert_eq!(one_pass.target_form, pieces.target_form, "{label}");
                assert_eq!(one_pass.path(&raw), pieces.path(&raw), "{label}");
                assert_eq!(one_pass.query(&raw), pieces.query(&raw), "{label}");
                assert_eq!(one_pass.target(&raw), target, "{label}");
            }
        }
    }
}

#[test]
fn incremental_parse_matches_one_shot() {
    let limits = Limits::default();
    let cases: [&[u8]; 8] = [
        b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"\r\n\r\nPOST /a?b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX: \r\n\r\nabc",
        b"GET / HTTP/1.0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\n\n",
        b"GET / HTTP/1.1\r\nHost: h\r\n\n",
        b"GET / HTTP/2.0\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.1\r\nHo st: h\r\nA: b\r\n\r\n",
        b"GET /\x01 HTTP/1.1\r\n",
    ];
    for raw in cases {
        let whole = parse(raw).map(|(p, h)| (p, h.head_len));
        for step in [1, 2, 3, 7] {
            assert_eq!(
                incremental(raw, step, &limits),
                whole,
                "{:?} step {step}",
                String::from_utf8_lossy(raw)
            );
        }
    }
    // Limits hold while trickling too.
    let small = Limits {
        max_head_bytes: 200,
        max_uri_bytes: 50,
        ..Limits::default()
    };
    let mut long_line = b"GET /".to_vec();
    long_line.resize(300, b'a');
    assert_eq!(
        incremental(&long_line, 1, &small),
        Err(RequestError::UriTooLong)
    );
    let mut big_head = b"GET / HTTP/1.1\r\nHost: h\r\n".to_vec();
    while big_head.len() < 300 {
        big_head.extend_from_slice(b"X: y\r\n");
    }
    assert_eq!(
        incremental(&big_head, 1, &small),
        Err(RequestError::HeadTooLarge)
    );
    // A bad request line is refused as soon as the line is complete.
    assert_eq!(
        incremental(b"GET  / HTTP/1.1\r\nHost: h\r\nX: y", 1, &limits),
        Err(RequestError::InvalidRequestLine)
    );
}

#[test]
fn shorter_buffer_after_partial_starts_over() {
    let mut conn = ReusedHead::default();
    let partial = b"GET / HTTP/1.1\r\nHost: a\r\nX-Long: 1234";
    assert_eq!(conn.parse(partial), Ok(Parsed::Partial));
    let raw = b"GET / HTTP/1.0\r\n\r\n";
    assert_eq!(conn.parse(raw), Ok(Parsed::Complete));
    assert_eq!(conn.head.head_len, raw.len());
    // Same length but a different start needs an explicit clear.
    assert_eq!(conn.parse(partial), Ok(Parsed::Partial));
    conn.head.clear();
    let other = b"GET /b HTTP/1.1\r\nHost: b\r\nX: abcd\r\n\r\n";
    assert_eq!(other.len(), partial.len());
    assert_eq!(conn.parse(other), Ok(Parsed::Complete));
}

#[test]
fn trickled_long_line_hits_414_before_its_syntax_error() {
    // Found by fuzzing the incremental path: while the request line is
    // unfinished, trickled bytes are not tokenized, so the size limit
    // answers first; a one-shot parse of the same bytes sees the bad byte.
    let limits = Limits {
        max_uri_bytes: 40,
        ..Limits::default()
    };
    let mut raw = b"POST /upload".to_vec();
    raw.resize(200, 0xff);
    raw.extend_from_slice(b" HTTP\x00");
    let mut trickled = RequestHead::new();
    let mut got = Ok(Parsed::Partial);
    for end in 1..=raw.len() {
        got = parse_request(&raw[..end], &limits, &mut trickled);
        if got != Ok(Parsed::Partial) {
            break;
        }
    }
    assert_eq!(got, Err(RequestError::UriTooLong));
    let mut fresh = RequestHead::new();
    assert!(parse_request(&raw, &limits, &mut fresh).is_err());
}

#[test]
fn leading_empty_lines_are_bounded() {
    let raw = b"\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    let h = complete(raw);
    assert_eq!(h.head_len, raw.len());
    assert_eq!(h.target(raw), b"/");
    assert_eq!(h.host(raw), Some(&b"h"[..]));
    let raw = b"\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_eq!(err(raw), RequestError::TooManyEmptyLines);
    assert_each(
        err,
        RequestError::BadLineEnding,
        &[
            b"\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"\r\rGET / HTTP/1.1\r\nHost: h\r\n\r\n",
        ],
    );
}

#[test]
fn rejects_content_length_with_transfer_encoding() {
    let raw =
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(err(raw), RequestError::ContentLengthWithTransferEncoding);
    let raw =
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(status(raw), 400);
}

#[test]
fn rejects_differing_and_duplicate_content_length() {
    let raw = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
    assert_eq!(err(raw), RequestError::DuplicateContentLength);
    assert_eq!(status(raw), 400);
    let raw = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n";
    assert_eq!(err(raw), RequestError::DuplicateContentLength);
}

#[test]
fn rejects_list_valued_content_length() {
    assert_each(
        err_between(
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: ",
            b"\r\n\r\n",
        ),
        RequestError::InvalidContentLength,
        &[b"5, 5", b"5,5", b"5, 6", b",5"],
    );
}

#[test]
fn rejects_bad_content_length_numbers() {
    assert_each(
        err_between(
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: ",
            b"\r\n\r\n",
        ),
        RequestError::InvalidContentLength,
        &[
            b"abc",
            b"-1",
            b"+5",
            b"0x10",
            b"5 5",
            b"1e3",
            b"18446744073709551616",
            b"99999999999999999999999",
            b"",
        ],
    );
    let raw = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\n";
    assert_eq!(complete(raw).body, BodyKind::Length(u64::MAX));
    let raw = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length:  007 \r\n\r\n";
    assert_eq!(complete(raw).body, BodyKind::Length(7));
}

#[test]
fn rejects_transfer_encoding_in_http10() {
    let raw = b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(err(raw), RequestError::TransferEncodingInHttp10);
    assert_eq!(status(raw), 400);
}

#[test]
fn transfer_encoding_rules_and_order() {
    let te = |v: &[u8]| {
        let raw = [
            &b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "[..],
            v,
            b"\r\n\r\n",
        ]
        .concat();
        parse(&raw).map(|(_, h)| h.body)
    };
    assert_each(
        te,
        Ok(BodyKind::Chunked),
        &[b"chunked", b"CHUNKED", b"chunked,"],
    );
    // Final coding not chunked: 400.
    assert_each(
        te,
        Err(RequestError::BadTransferEncoding),
        &[
            b"gzip",
            b"chunked, gzip",
            b"identity",
            b"chunked;ext=1",
            b"",
            b" , ",
            b"chunked, chunked",
            b"chu@nked",
            b"gzip chunked",
        ],
    );
    // Ends in chunked, but with codings we do not decode: 501.
    assert_each(
        te,
        Err(RequestError::UnsupportedTransferCoding),
        &[
            b"gzip, chunked",
            b"deflate,chunked",
            b"x-custom;q=1, chunked",
        ],
    );
    assert_eq!(RequestError::UnsupportedTransferCoding.status(), 501);
    // The list spans lines in order.
    let raw = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(err(raw), RequestError::UnsupportedTransferCoding);
    let raw = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n";
    assert_eq!(err(raw), RequestError::BadTransferEncoding);
    // Content-Length conflict is reported before coding support.
    let raw = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 1\r\n\r\n";
    assert_eq!(err(raw), RequestError::ContentLengthWithTransferEncoding);
}

#[test]
fn rejects_obs_fold() {
    let raw = b"GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n two\r\n\r\n";
    assert_eq!(err(raw), RequestError::InvalidHeaderName);
    let raw = b"GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n\ttwo\r\n\r\n";
    assert_eq!(status(raw), 400);
    let raw = b"GET / HTTP/1.1\r\n Host: h\r\n\r\n";
    assert_eq!(status(raw), 400);
}

#[test]
fn rejects_whitespace_before_colon() {
    assert_each(
        err,
        RequestError::InvalidHeaderName,
        &[
            b"GET / HTTP/1.1\r\nHost : h\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost\t: h\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n",
        ],
    );
}

#[test]
fn rejects_bad_field_names() {
    assert_each(
        err_between(b"GET / HTTP/1.1\r\nHost: h\r\n", b": v\r\n\r\n"),
        RequestError::InvalidHeaderName,
        &[
            b"X\x01A",
            b"X\x00",
            b"X\x7f",
            b"X(A)",
            b"X/A",
            b"X\"",
            b"\xc3\xa9",
            b"X[]",
            b"X@",
        ],
    );
    assert_each(
        err,
        RequestError::InvalidHeaderName,
        &[
            b"GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n",
        ],
    );
}

#[test]
fn rejects_bare_lf_line_endings() {
    assert_each(
        err,
        RequestError::BadLineEnding,
        &[
            // Request line, header line, final empty line: each one alone.
            b"GET / HTTP/1.1\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\n\n",
            b"GET / HTTP/1.1\r\nHost: h\n\n",
            b"GET / HTTP/1.0\n\n",
            b"GET / HTTP/1.0\n\r\n",
            b"GET / HTTP/1.0\r\n\n",
            // A bare LF inside a value splits the line: still caught.
            b"GET / HTTP/1.1\r\nHost: h\r\nX: a\nY: b\r\n\r\n",
        ],
    );
}

#[test]
fn rejects_bare_cr() {
    assert_each(
        status,
        400,
        &[
            b"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n",
            b"GET / HTTP/1.1\rHost: h\r\n\r\n",
            b"GET /a\rb HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\n\r\r",
            b"GET / HTTP/1.1\r\nHost: h\r\nX:\r\r\n\r\n",
        ],
    );
}

#[test]
fn rejects_control_characters_in_values() {
    for ctl in (0u8..0x20)
        .filter(|&b| b != b'\t' && b != b'\r' && b != b'\n')
        .chain([0x7f])
    {
        let raw = [
            &b"GET / HTTP/1.1\r\nHost: h\r\nX: a"[..],
            &[ctl],
            b"b\r\n\r\n",
        ]
        .concat();
        assert_eq!(err(&raw), RequestError::InvalidHeaderValue, "ctl {ctl:#x}");
    }
    // HTAB and obs-text are allowed; surrounding whitespace is not part of the value.
    let raw = b"GET / HTTP/1.1\r\nHost: h\r\nX: \ta\tb\xff \t\r\n\r\n";
    assert_eq!(complete(raw).header(raw, "x"), Some(&b"a\tb\xff"[..]));
}

#[test]
fn rejects_malformed_request_lines() {
    assert_each(
        status,
        400,
        &[
            b"GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /  HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1 \r\nHost: h\r\n\r\n",
            b" GET / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET/ HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n",
            b"G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\nHost: h\r\n\r\n",
            b"GET\r\n\r\n",
            b"/ HTTP/1.1\r\nHost: h\r\n\r\n",
        ],
    );
}

#[test]
fn target_forms() {
    let raw = b"GET http://Example.com:81/p/q?x=1 HTTP/1.1\r\nHost: other\r\n\r\n";
    let h = complete(raw);
    assert_eq!(h.target_form, TargetForm::Absolute);
    assert_eq!(h.host(raw), Some(&b"Example.com:81"[..]));
    assert_eq!(h.host_name(raw), Some(&b"Example.com"[..]));
    assert_eq!(h.path(raw), b"/p/q");
    assert_eq!(h.query(raw), Some(&b"x=1"[..]));
    let raw = b"GET HTTPS://h?x HTTP/1.1\r\nHost: h\r\n\r\n";
    let h = complete(raw);
    assert_eq!(h.path(raw), b"/");
    assert_eq!(h.query(raw), Some(&b"x"[..]));
    let raw = b"GET http://[::1]:8080 HTTP/1.1\r\nHost: h\r\n\r\n";
    let h = complete(raw);
    assert_eq!(h.host_name(raw), Some(&b"[::1]"[..]));
    assert_eq!(h.path(raw), b"/");

    let raw = b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_eq!(complete(raw).target_form, TargetForm::Asterisk);
    assert_eq!(
        err(b"GET * HTTP/1.1\r\nHost: h\r\n\r\n"),
        RequestError::InvalidTarget
    );

    let raw = b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    let h = complete(raw);
    assert_eq!(h.target_form, TargetForm::Authority);
    assert_eq!(h.host_name(raw), Some(&b"example.com"[..]));
    assert_each(
        err,
        RequestError::InvalidTarget,
        &[
            b"CONNECT / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"CONNECT example.com HTTP/1.1\r\nHost: h\r\n\r\n",
            b"CONNECT http://example.com:443/ HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET example.com:443 HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET ftp://example.com/ HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET http:///path HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET http://user@h/ HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET http://h:x/ HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET index.html HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /a#frag HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n",
        ],
    );
}

#[test]
fn rejects_controls_and_spaces_in_target() {
    assert_each(
        status,
        400,
        &[
            b"GET /a\x00b HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /a\x7fb HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /a\x1bb HTTP/1.1\r\nHost: h\r\n\r\n",
        ],
    );
}

#[test]
fn host_rules() {
    assert_each(
        err,
        RequestError::MissingHost,
        &[
            b"GET / HTTP/1.1\r\n\r\n",
            // Host is required even when the target carries the authority.
            b"GET http://h/ HTTP/1.1\r\n\r\n",
        ],
    );
    assert_each(
        err,
        RequestError::DuplicateHost,
        &[
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n",
        ],
    );
    assert_each(
        err_between(b"GET / HTTP/1.1\r\nHost: ", b"\r\n\r\n"),
        RequestError::InvalidHost,
        &[
            b"a b",
            b"a/b",
            b"user@a",
            b"a:b",
            b"a:123456",
            b":80",
            b"[::1",
            b"[]",
            b"[zz]",
            b"a%zz",
            b"a\"b",
            b"a\xff",
        ],
    );
    for good in [
        "a",
        "a.b-c_d~e",
        "1.2.3.4:80",
        "[::1]",
        "[::1]:443",
        "a:",
        "a%41",
    ] {
        let raw = format!("GET / HTTP/1.1\r\nHost: {good}\r\n\r\n");
        let raw = raw.as_bytes();
        assert_eq!(complete(raw).host(raw), Some(good.as_bytes()), "{good}");
    }
    // Empty Host is what a client sends when the target has no authority.
    let raw = b"GET / HTTP/1.1\r\nHost:\r\n\r\n";
    assert_eq!(complete(raw).host(raw), Some(&b""[..]));
    // HTTP/1.0 may omit it.
    let raw = b"GET / HTTP/1.0\r\n\r\n";
    assert_eq!(complete(raw).host(raw), None);
}

#[test]
fn a_head_reused_for_many_requests_checks_each_host() {
    // One head serves every request of a connection and remembers the last
    // Host that passed: a value that differs, even by a byte after it, is
    // checked in full, and the host name is always this request's.
    let mut head = RequestHead::new();
    let mut parse_host = |host: &[u8]| {
        let raw = [&b"GET / HTTP/1.1\r\nHost: "[..], host, b"\r\n\r\n"].concat();
        parse_request(&raw, &Limits::default(), &mut head)
            .map(|_| (head.host_name(&raw).map(<[u8]>::to_vec), head.head_len))
    };
    let ok = |name: &[u8], len: usize| Ok((Some(name.to_vec()), len + 26));
    assert_eq!(parse_host(b"a.test:8080"), ok(b"a.test", 11));
    assert_eq!(parse_host(b"a.test:8080"), ok(b"a.test", 11));
    for bad in [
        &b"a.test:8080x"[..],
        b"a.test:808080",
        b"a test:8080",
        b"a.test:80 80",
    ] {
        assert_eq!(parse_host(bad), Err(RequestError::InvalidHost), "{bad:?}");
        assert_eq!(parse_host(b"a.test:8080"), ok(b"a.test", 11));
    }
    assert_eq!(parse_host(b"a.test:808"), ok(b"a.test", 10));
    assert_eq!(parse_host(b"b.test"), ok(b"b.test", 6));
    assert_eq!(parse_host(b"a.test:8080"), ok(b"a.test", 11));
    // A value too long to remember is checked each time, and still refused
    // when bad.
    let long = [&[b'a'; 100][..], b":1"].concat();
    assert_eq!(parse_host(&long), ok(&[b'a'; 100], 102));
    let long_bad = [&[b'a'; 100][..], b":x"].concat();
    assert_eq!(parse_host(&long_bad), Err(RequestError::InvalidHost));
}

#[test]
fn versions() {
    assert_eq!(complete(b"GET / HTTP/1.0\r\n\r\n").version, Version::Http10);
    let with_version =
        |v: &[u8]| parse(&[&b"GET / "[..], v, b"\r\nHost: h\r\n\r\n"].concat()).map(|(p, _)| p);
    assert_each(
        |v| with_version(v).map_err(|e| (e, e.status())),
        Err((RequestError::VersionNotSupported, 505)),
        &[
            b"HTTP/2.0",
            b"HTTP/1.2",
            b"HTTP/3",
            b"HTTP/2",
            b"HTTP/0.9",
            b"HTTP/9.9",
        ],
    );
    assert_each(
        |v| with_version(v).map_err(|e| e.status()),
        Err(400),
        &[
            b"HTTP/x",
            b"HTTP/1.x",
            b"http/1.1",
            b"HTTP/10.0",
            b"HTTP/1.1.1",
            b"HTTP/1",
            b"HTTP1.1",
            b"FOO",
            b"",
        ],
    );
    // An unsupported version still arriving is not judged early.
    assert_eq!(parse(b"GET / HTTP/2").map(|r| r.0), Ok(Parsed::Partial));
    assert_eq!(parse(b"GET / HTTP/2.0").map(|r| r.0), Ok(Parsed::Partial));
    assert_eq!(status(b"GET / HTTP/2.0x"), 400);
    assert_eq!(status(b"GET / HTTX"), 400);
}

#[test]
fn head_too_large_is_431_even_while_partial() {
    let mut conn = ReusedHead::default();
    conn.limits.max_head_bytes = 64;
    let mut raw = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
    raw.resize(63, b'a');
    assert_eq!(conn.parse(&raw), Ok(Parsed::Partial));
    raw.push(b'a');
    assert_eq!(conn.parse(&raw), Err(RequestError::HeadTooLarge));
    raw.resize(10_000, b'a');
    assert_eq!(conn.parse(&raw), Err(RequestError::HeadTooLarge));
    // A complete head of exactly the limit is fine; one byte over is not.
    let mut exact = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
    exact.resize(60, b'a');
    exact.extend_from_slice(b"\r\n\r\n");
    assert_eq!(conn.parse(&exact), Ok(Parsed::Complete));
    assert_eq!(conn.head.head_len, 64);
    exact.insert(30, b'a');
    assert_eq!(conn.parse(&exact), Err(RequestError::HeadTooLarge));
    assert_eq!(RequestError::HeadTooLarge.status(), 431);
}

#[test]
fn too_many_headers_is_431() {
    let mut conn = ReusedHead::default();
    conn.limits.max_headers = 3;
    let ok = b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n";
    assert_eq!(conn.parse(ok), Ok(Parsed::Complete));
    let bad = b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert_eq!(conn.parse(bad), Err(RequestError::TooManyHeaders));
    assert_eq!(RequestError::TooManyHeaders.status(), 431);
    let mut many = b"GET / HTTP/1.1\r\nHost: h\r\n".to_vec();
    for _ in 0..101 {
        many.extend_from_slice(b"A: 1\r\n");
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(err(&many), RequestError::TooManyHeaders);
}

#[test]
fn uri_too_long_is_414_complete_or_not() {
    let mut conn = ReusedHead::default();
    conn.limits.max_uri_bytes = 100;
    let mut raw = b"GET /".to_vec();
    raw.resize(5 + 99, b'a');
    let mut full = raw.clone();
    full.extend_from_slice(b" HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(conn.parse(&full), Ok(Parsed::Complete));
    raw.push(b'a');
    let mut full = raw.clone();
    full.extend_from_slice(b" HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(conn.parse(&full), Err(RequestError::UriTooLong));
    // Unfinished request line: still Partial within the slack, 414 beyond it.
    assert_eq!(conn.parse(&raw), Ok(Parsed::Partial));
    raw.resize(5 + 100 + REQUEST_LINE_SLACK, b'a');
    assert_eq!(conn.parse(&raw), Err(RequestError::UriTooLong));
    // Also when the unfinished line reaches the head limit first.
    let mut long = b"GET /".to_vec();
    long.resize(70_000, b'a');
    assert_eq!(err(&long), RequestError::UriTooLong);
    assert_eq!(RequestError::UriTooLong.status(), 414);
}

#[test]
fn keep_alive_rules() {
    let ka = |raw: &[u8]| complete(raw).keep_alive;
    assert_each(
        ka,
        true,
        &[
            b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n",
            b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
            b"GET / HTTP/1.0\r\nConnection: foo ,keep-alive\r\n\r\n",
        ],
    );
    assert_each(
        ka,
        false,
        &[
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: te\r\nConnection: close\r\n\r\n",
            b"GET / HTTP/1.0\r\n\r\n",
            b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
        ],
    );
}

#[test]
fn expect_continue_rules() {
    let ec = |raw: &[u8]| complete(raw).expect_continue;
    assert_each(
        ec,
        true,
        &[
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n",
        ],
    );
    assert_each(
        ec,
        false,
        &[
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n",
            b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\nContent-Length: 3\r\n\r\n",
        ],
    );
}

#[test]
fn spans_stay_in_bounds_with_a_foreign_buffer() {
    let h = complete(b"GET /abc?d HTTP/1.1\r\nHost: example\r\n\r\n");
    let short = b"GET";
    assert_eq!(h.path(short), b"");
    assert_eq!(h.header(short, "host"), None);
    assert_eq!(h.headers(short).next(), Some((&b""[..], &b""[..])));
}

#[test]
fn errors_display_and_statuses() {
    let e = RequestError::ContentLengthWithTransferEncoding;
    assert_eq!(
        e.to_string(),
        "both Content-Length and Transfer-Encoding (400)"
    );
    assert_eq!(RequestError::VersionNotSupported.status(), 505);
    assert_eq!(RequestError::InvalidVersion.status(), 400);
}
