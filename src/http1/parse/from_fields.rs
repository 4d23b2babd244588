//! A [`RequestHead`] built from a method, a target and field lines that
//! arrive already split (an HTTP/2 request's), so handlers read one request
//! view whatever the protocol. The head is written as HTTP/1 text into the
//! caller's buffer with its spans recorded on the way, and every check
//! [`super::parse_request`] would make on that text is made in the same
//! order, with the same [`RequestError`]s, without tokenizing it again.

use super::super::grammar::{is_tchar, trim_ows};
use super::{
    judge_head, HeaderSpan, Limits, Method, RequestError, RequestHead, Span, TargetBytes, Version,
    MAX_HEADERS_CAP, REQUEST_LINE_SLACK,
};

/// Writes a request head line by line into a buffer: start with
/// [`RequestHeadBuilder::new`], add fields, then [`RequestHeadBuilder::finish`].
/// The head's spans point into the buffer, as after a parse of it.
pub struct RequestHeadBuilder<'a> {
    buf: &'a mut Vec<u8>,
    head: &'a mut RequestHead,
    limits: Limits,
}

// The byte checks below have no early exit: valid input is the usual case,
// and a loop without one is vectorized, several times cheaper a byte.

/// All bytes are ones httparse takes in a request target (visible ASCII and
/// obs-text); the target grammar then refuses the non-ASCII ones.
fn all_target_bytes(target: &[u8]) -> bool {
    let bad = target
        .iter()
        .fold(false, |bad, &b| bad | (b <= b' ') | (b == 0x7f));
    !bad
}

/// All bytes are ones httparse takes in a field value: HTAB, SP, visible
/// ASCII, obs-text.
fn all_value_bytes(value: &[u8]) -> bool {
    let bad = value.iter().fold(false, |bad, &b| {
        bad | ((b < b' ') & (b != b'\t')) | (b == 0x7f)
    });
    !bad
}

/// A token (RFC 9110): one or more tchars, as httparse takes methods and names.
fn all_tchars(token: &[u8]) -> bool {
    let bad = token.iter().fold(false, |bad, &b| bad | !is_tchar(b));
    !token.is_empty() && !bad
}

impl<'a> RequestHeadBuilder<'a> {
    /// Starts an HTTP/1.1 head in `buf` (cleared) with the request line
    /// `method target`. The target's limit and grammar are judged in
    /// [`Self::finish`], where the parse meets them.
    pub fn new(
        buf: &'a mut Vec<u8>,
        head: &'a mut RequestHead,
        limits: &Limits,
        method: &[u8],
        target: &[u8],
    ) -> Result<Self, RequestError> {
        buf.clear();
        head.reset();
        if !all_tchars(method) || target.is_empty() || !all_target_bytes(target) {
            return Err(RequestError::InvalidRequestLine);
        }
        buf.extend_from_slice(method);
        buf.push(b' ');
        buf.extend_from_slice(target);
        buf.extend_from_slice(b" HTTP/1.1\r\n");
        head.method = Method::from_token(method);
        head.version = Version::Http11;
        head.method_span = Span::new(0, method.len());
        let target_at = method.len() + 1;
        head.target = Span::new(target_at, target_at + target.len());
        if buf.len() > limits.max_head_bytes {
            // The parse would see a request line cut at the head limit.
            let line_limit = limits.max_uri_bytes.saturating_add(REQUEST_LINE_SLACK);
            return Err(if limits.max_head_bytes > line_limit {
                RequestError::UriTooLong
            } else {
                RequestError::HeadTooLarge
            });
        }
        Ok(RequestHeadBuilder {
            buf,
            head,
            limits: *limits,
        })
    }

    /// Makes room for `n` field lines at once (a head whose buffers were
    /// freed then grows in one step).
    pub fn reserve_fields(&mut self, n: usize) {
        self.head.headers.reserve(n);
    }

    /// Adds the field line `name: value`.
    pub fn field(&mut self, name: &[u8], value: &[u8]) -> Result<(), RequestError> {
        let name = self.field_name(name, true)?;
        self.buf.extend_from_slice(value);
        self.end_field(name, true)
    }

    /// [`Self::field`] for a `name` the caller found to be a token and a
    /// `value` of visible bytes, SP and HTAB (an HTTP/2 or HTTP/3 codec
    /// learns it as it checks the fields it decodes): the limits hold as
    /// for any field, the bytes are not looked at a second time.
    pub fn field_of_token_bytes(&mut self, name: &[u8], value: &[u8]) -> Result<(), RequestError> {
        let name = self.field_name(name, false)?;
        self.buf.extend_from_slice(value);
        self.end_field(name, false)
    }

    /// Adds one field line whose value is `parts` joined by `separator`
    /// (HTTP/2's cookie crumbs, RFC 9113 §8.2.3).
    pub fn joined_field<'v>(
        &mut self,
        name: &[u8],
        separator: &[u8],
        parts: impl IntoIterator<Item = &'v [u8]>,
    ) -> Result<(), RequestError> {
        let name = self.field_name(name, true)?;
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 {
                self.buf.extend_from_slice(separator);
            }
            self.buf.extend_from_slice(part);
        }
        self.end_field(name, true)
    }

    /// Checks the field count and (with `check`) the name, and writes
    /// `name: `.
    fn field_name(&mut self, name: &[u8], check: bool) -> Result<Span, RequestError> {
        if self.head.headers.len() >= self.limits.max_headers.min(MAX_HEADERS_CAP) {
            return Err(RequestError::TooManyHeaders);
        }
        if check && !all_tchars(name) {
            return Err(RequestError::InvalidHeaderName);
        }
        let at = self.buf.len();
        self.buf.extend_from_slice(name);
        self.buf.extend_from_slice(b": ");
        Ok(Span::new(at, at + name.len()))
    }

    /// Checks (with `check`) the value written after `name` and ends the
    /// line.
    fn end_field(&mut self, name: Span, check: bool) -> Result<(), RequestError> {
        let value_at = name.end() + 2;
        let written = self.buf.get(value_at..).unwrap_or(&[]);
        if check && !all_value_bytes(written) {
            return Err(RequestError::InvalidHeaderValue);
        }
        // The parse stores values without the whitespace around them.
        let value = trim_ows(written);
        let start = value_at + super::super::span::offset_of(written, value);
        self.head.headers.push(HeaderSpan {
            name,
            value: Span::new(start, start + value.len()),
        });
        self.buf.extend_from_slice(b"\r\n");
        if self.buf.len() > self.limits.max_head_bytes {
            return Err(RequestError::HeadTooLarge);
        }
        Ok(())
    }

    /// Ends the head and judges it as a whole: the target, then each field
    /// line's framing and host, then the rules over all of them.
    pub fn finish(self) -> Result<(), RequestError> {
        let RequestHeadBuilder { buf, head, limits } = self;
        buf.extend_from_slice(b"\r\n");
        if buf.len() > limits.max_head_bytes {
            return Err(RequestError::HeadTooLarge);
        }
        head.head_len = buf.len();
        judge_head(head, buf, &limits, TargetBytes::Unchecked)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse_request, Parsed, TargetForm};
    use super::*;
    use crate::http1::{BodyKind, HeaderLines};

    /// Builds a head from `(method, target, fields)` and parses the same
    /// text with the HTTP/1 parser: both must agree, on success and on error.
    fn both(
        limits: &Limits,
        method: &str,
        target: &str,
        fields: &[(&str, &str)],
    ) -> Result<(Vec<u8>, RequestHead), RequestError> {
        let mut text = format!("{method} {target} HTTP/1.1\r\n").into_bytes();
        for (n, v) in fields {
            text.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        text.extend_from_slice(b"\r\n");
        let mut parsed = RequestHead::new();
        let from_parse = match parse_request(&text, limits, &mut parsed) {
            Ok(Parsed::Complete) => Ok(()),
            Ok(Parsed::Partial) => Err(None),
            Err(e) => Err(Some(e)),
        };
        let (mut buf, mut head) = (Vec::new(), RequestHead::new());
        let built = (|| {
            let mut b = RequestHeadBuilder::new(
                &mut buf,
                &mut head,
                limits,
                method.as_bytes(),
                target.as_bytes(),
            )?;
            for (n, v) in fields {
                b.field(n.as_bytes(), v.as_bytes())?;
            }
            b.finish()
        })();
        match (&from_parse, &built) {
            (Ok(()), Ok(())) => {
                assert_eq!(buf, text);
                assert_eq!(head.head_len, parsed.head_len);
                assert_eq!(head.method, parsed.method);
                assert_eq!(head.method_token(&buf), parsed.method_token(&text));
                assert_eq!(head.target(&buf), parsed.target(&text));
                assert_eq!(head.target_form, parsed.target_form);
                assert_eq!(head.path(&buf), parsed.path(&text));
                assert_eq!(head.query(&buf), parsed.query(&text));
                assert_eq!(head.host(&buf), parsed.host(&text));
                assert_eq!(head.host_name(&buf), parsed.host_name(&text));
                assert_eq!(head.body, parsed.body);
                assert_eq!(head.keep_alive, parsed.keep_alive);
                assert_eq!(head.expect_continue, parsed.expect_continue);
                assert_eq!(
                    head.headers(&buf).collect::<Vec<_>>(),
                    parsed.headers(&text).collect::<Vec<_>>()
                );
            }
            (Err(Some(p)), Err(b)) => assert_eq!(
                p.status(),
                b.status(),
                "{method} {target} {fields:?}: parse {p:?}, built {b:?}"
            ),
            _ => panic!("{method} {target} {fields:?}: parse {from_parse:?}, built {built:?}"),
        }
        built.map(|()| (buf, head))
    }

    fn status(limits: &Limits, method: &str, target: &str, fields: &[(&str, &str)]) -> u16 {
        match both(limits, method, target, fields) {
            Ok(_) => 200,
            Err(e) => e.status(),
        }
    }

    const HOST: (&str, &str) = ("host", "example.com:8080");

    #[test]
    fn a_built_head_reads_as_its_parse() {
        let l = Limits::default();
        let (buf, head) = both(
            &l,
            "GET",
            "/a/b?x=1",
            &[HOST, ("user-agent", "t"), ("cookie", "a=1; b=2")],
        )
        .unwrap();
        assert_eq!(head.path(&buf), b"/a/b");
        assert_eq!(head.host_name(&buf), Some(&b"example.com"[..]));
        assert_eq!(head.header(&buf, "cookie"), Some(&b"a=1; b=2"[..]));
        assert_eq!(head.body, BodyKind::None);
        assert!(head.keep_alive);
    }

    #[test]
    fn target_forms_follow_the_method() {
        let l = Limits::default();
        let (buf, head) = both(&l, "OPTIONS", "*", &[HOST]).unwrap();
        assert_eq!(head.target_form, TargetForm::Asterisk);
        assert_eq!(head.path(&buf), b"*");
        assert_eq!(status(&l, "GET", "*", &[HOST]), 400);
        let (buf, head) = both(&l, "CONNECT", "origin.test:443", &[HOST]).unwrap();
        assert_eq!(head.target_form, TargetForm::Authority);
        assert_eq!(head.host_name(&buf), Some(&b"origin.test"[..]));
        assert_eq!(status(&l, "CONNECT", "origin.test", &[HOST]), 400);
        assert_eq!(status(&l, "CONNECT", "/", &[HOST]), 400);
        let (buf, head) = both(&l, "GET", "http://a.test/p", &[HOST]).unwrap();
        assert_eq!(head.host(&buf), Some(&b"a.test"[..]));
        for bad in ["/caf\u{e9}", "/a#b", "/a b", "/a\tb", "a", ""] {
            assert_eq!(status(&l, "GET", bad, &[HOST]), 400, "target {bad:?}");
        }
    }

    #[test]
    fn method_and_field_names_are_tokens_and_values_visible() {
        let l = Limits::default();
        assert_eq!(status(&l, "PURGE", "/", &[HOST]), 200);
        for bad in ["G T", "G(T", ""] {
            assert_eq!(status(&l, bad, "/", &[HOST]), 400, "method {bad:?}");
        }
        for bad in ["a(b", "a\"b", "a/b", "a@b", "a{b", ""] {
            assert_eq!(status(&l, "GET", "/", &[HOST, (bad, "v")]), 400, "{bad:?}");
        }
        for bad in ["a\u{1}b", "a\u{7f}b", "a\u{1b}b"] {
            assert_eq!(status(&l, "GET", "/", &[HOST, ("x", bad)]), 400, "{bad:?}");
        }
        let (buf, head) = both(&l, "GET", "/", &[HOST, ("x", "\ta b\u{e9}")]).unwrap();
        assert_eq!(head.header(&buf, "x"), Some("a b\u{e9}".as_bytes()));
    }

    #[test]
    fn host_rules_hold() {
        let l = Limits::default();
        assert_eq!(status(&l, "GET", "/", &[]), 400, "no host");
        assert_eq!(status(&l, "GET", "/", &[HOST, ("Host", "b")]), 400);
        assert_eq!(status(&l, "GET", "/", &[("host", "a b")]), 400);
        assert_eq!(status(&l, "GET", "/", &[("host", "a:port")]), 400);
        let (buf, head) = both(&l, "GET", "/", &[("host", "[::1]:8080")]).unwrap();
        assert_eq!(head.host_name(&buf), Some(&b"[::1]"[..]));
        let (buf, head) = both(&l, "GET", "/", &[("host", "")]).unwrap();
        assert_eq!(head.host_name(&buf), Some(&b""[..]));
    }

    #[test]
    fn body_framing_and_expect_come_from_the_fields() {
        let l = Limits::default();
        let (_, head) = both(&l, "POST", "/", &[HOST, ("content-length", "12")]).unwrap();
        assert_eq!(head.body, BodyKind::Length(12));
        let cl = ("content-length", "1");
        assert_eq!(status(&l, "POST", "/", &[HOST, cl, cl]), 400);
        assert_eq!(
            status(&l, "POST", "/", &[HOST, ("content-length", "x")]),
            400
        );
        let expect = ("expect", "100-continue");
        let (_, head) = both(&l, "POST", "/", &[HOST, cl, expect]).unwrap();
        assert!(head.expect_continue);
        let (_, head) = both(&l, "POST", "/", &[HOST, expect]).unwrap();
        assert!(!head.expect_continue, "no body, nothing to continue");
        let te = ("transfer-encoding", "gzip, chunked");
        assert_eq!(status(&l, "POST", "/", &[HOST, te]), 501);
    }

    #[test]
    fn limits_give_the_parse_statuses() {
        let few = Limits {
            max_headers: 3,
            ..Limits::default()
        };
        let f = ("a", "1");
        assert_eq!(status(&few, "GET", "/", &[HOST, f, f]), 200);
        assert_eq!(status(&few, "GET", "/", &[HOST, f, f, f]), 431);
        let short_uri = Limits {
            max_uri_bytes: 10,
            ..Limits::default()
        };
        assert_eq!(status(&short_uri, "GET", "/0123456789", &[HOST]), 414);
        assert_eq!(status(&short_uri, "GET", "/012345678", &[HOST]), 200);
        // 414 comes before a missing Host, as in the parse.
        assert_eq!(status(&short_uri, "GET", "/0123456789", &[]), 414);
        let small = Limits {
            max_head_bytes: 100,
            ..Limits::default()
        };
        // 16 bytes of request line, 24 of Host, 45 of x, 2 to end: 87.
        let x = ("x", "v".repeat(40));
        let x = (x.0, x.1.as_str());
        assert_eq!(status(&small, "GET", "/", &[HOST, x]), 200);
        let exactly = [HOST, x, ("y", "12345678")];
        assert_eq!(status(&small, "GET", "/", &exactly), 200, "100 bytes");
        let over = [HOST, x, ("y", "123456789")];
        assert_eq!(status(&small, "GET", "/", &over), 431, "101 bytes");
        let mut head_sized = "/".to_string();
        head_sized.push_str(&"a".repeat(2000));
        let line_limited = Limits {
            max_head_bytes: 1000,
            max_uri_bytes: 500,
            ..Limits::default()
        };
        assert_eq!(status(&line_limited, "GET", &head_sized, &[HOST]), 414);
        let head_limited = Limits {
            max_head_bytes: 100,
            max_uri_bytes: 4000,
            ..Limits::default()
        };
        assert_eq!(status(&head_limited, "GET", &head_sized, &[HOST]), 431);
    }

    #[test]
    fn joined_values_are_one_checked_line() {
        let (mut buf, mut head) = (Vec::new(), RequestHead::new());
        let l = Limits::default();
        let mut b = RequestHeadBuilder::new(&mut buf, &mut head, &l, b"GET", b"/").unwrap();
        b.field(b"host", b"x").unwrap();
        let crumbs: [&[u8]; 3] = [b"a=1", b"b=2", b"c=3"];
        b.joined_field(b"cookie", b"; ", crumbs).unwrap();
        b.finish().unwrap();
        assert_eq!(head.header(&buf, "cookie"), Some(&b"a=1; b=2; c=3"[..]));
        assert_eq!(head.head_len, buf.len());

        let mut b = RequestHeadBuilder::new(&mut buf, &mut head, &l, b"GET", b"/").unwrap();
        let crumbs: [&[u8]; 2] = [b"a=1", b"b\x01"];
        assert_eq!(
            b.joined_field(b"cookie", b"; ", crumbs),
            Err(RequestError::InvalidHeaderValue)
        );
    }
}
