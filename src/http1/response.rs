//! Response-head parsing, for the two places Pier is the client: the proxy's
//! upstream side and the load generator.
//!
//! Same approach as [`super::parse`]: httparse tokenizes, this module adds
//! strict line endings and decides body framing per RFC 9112 §6.3. Framing
//! that two parties could read differently (Content-Length with
//! Transfer-Encoding, duplicate lengths, codings other than chunked) is an
//! error rather than a guess, because a proxy that guesses lets a hostile
//! upstream desynchronise a pooled connection.

use std::mem::MaybeUninit;

use super::field_name::FieldName;
pub(crate) use super::grammar::eq_lowercase;
use super::grammar::{is_tchar, list_elements, parse_content_length, trim_ows};
use super::parse::{Limits, Method, Parsed, Version, MAX_HEADERS_CAP};
use super::span::{offset_of, HeaderLines, HeaderSpan, Span};

/// How a response body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseBody {
    /// No body: HEAD request, 1xx, 204, 304, or 2xx to CONNECT (a tunnel follows).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Everything until the server closes; the connection cannot be reused.
    UntilClose,
}

/// A parsed response head: owned, reusable, spans into the caller's buffer.
#[derive(Clone, Debug)]
pub struct ParsedResponseHead {
    /// Status code, 100..=999.
    pub status: u16,
    /// Protocol version of the response.
    pub version: Version,
    /// Bytes the head took, through the final CRLFCRLF.
    pub head_len: usize,
    /// Body framing, given the request method.
    pub body: ResponseBody,
    /// Whether the connection may be reused after this response's body.
    pub keep_alive: bool,
    reason: Span,
    headers: Vec<HeaderSpan>,
    /// Each field's class, beside `headers`, found in the parse's one walk.
    names: Vec<FieldName>,
    /// A `Connection` field lists an option other than `keep-alive` (which
    /// may name further hop-by-hop fields, `close` included).
    connection_options: bool,
}

impl Default for ParsedResponseHead {
    fn default() -> Self {
        ParsedResponseHead {
            status: 0,
            version: Version::Http11,
            head_len: 0,
            body: ResponseBody::None,
            keep_alive: false,
            reason: Span::default(),
            headers: Vec::new(),
            names: Vec::new(),
            connection_options: false,
        }
    }
}

impl ParsedResponseHead {
    /// An empty head; the header vector is reused across parses.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reason phrase as sent (empty if absent or not plain ASCII).
    pub fn reason<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        self.reason.get(buf)
    }

    /// Each field's class, in the order of [`HeaderLines::header_spans`].
    pub fn field_names(&self) -> &[FieldName] {
        &self.names
    }

    /// Whether a `Connection` field lists an option other than
    /// `keep-alive`; without one, no field is hop-by-hop by being named there.
    pub fn connection_options(&self) -> bool {
        self.connection_options
    }
}

impl HeaderLines for ParsedResponseHead {
    fn header_spans(&self) -> &[HeaderSpan] {
        &self.headers
    }
}

/// Why an upstream response head was refused; all of them are 502 downstream.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("upstream {}", self.reason())]
pub enum ResponseError {
    /// Status line malformed, or version other than HTTP/1.0 and 1.1.
    InvalidStatusLine,
    /// A line ends in bare LF or a CR is not followed by LF (or the head starts with one).
    BadLineEnding,
    /// Field name malformed or obs-fold.
    InvalidHeaderName,
    /// Control byte in a field value.
    InvalidHeaderValue,
    /// Content-Length not a single number, or repeated.
    InvalidContentLength,
    /// Transfer-Encoding that we cannot frame unambiguously (with Content-Length,
    /// in HTTP/1.0, chunked twice, malformed, or with codings besides chunked).
    BadTransferEncoding,
    /// Head larger than [`Limits::max_head_bytes`].
    HeadTooLarge,
    /// More header lines than [`Limits::max_headers`].
    TooManyHeaders,
}

impl ResponseError {
    /// Status for the downstream client: the upstream is at fault.
    pub fn status(&self) -> u16 {
        502
    }

    /// Short cause for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            ResponseError::InvalidStatusLine => "malformed status line",
            ResponseError::BadLineEnding => "line not terminated by CRLF",
            ResponseError::InvalidHeaderName => "invalid header field name or obs-fold",
            ResponseError::InvalidHeaderValue => "invalid byte in header field value",
            ResponseError::InvalidContentLength => "invalid or repeated Content-Length",
            ResponseError::BadTransferEncoding => "ambiguous Transfer-Encoding",
            ResponseError::HeadTooLarge => "response head too large",
            ResponseError::TooManyHeaders => "too many header fields",
        }
    }
}

/// Parses a response head from the start of `buf`. `method` is the request's,
/// since HEAD and CONNECT change the framing. A 1xx head is returned like any
/// other (body `None`); the caller skips it and parses again after `head_len`.
/// `Partial` means read more; once `buf` reaches `max_head_bytes` without a
/// complete head the result is [`ResponseError::HeadTooLarge`].
pub fn parse_response(
    buf: &[u8],
    limits: &Limits,
    method: Method,
    head: &mut ParsedResponseHead,
) -> Result<Parsed, ResponseError> {
    let mut headers = std::mem::take(&mut head.headers);
    headers.clear();
    let mut names = std::mem::take(&mut head.names);
    names.clear();
    *head = ParsedResponseHead {
        headers,
        names,
        ..ParsedResponseHead::default()
    };
    let window_len = buf.len().min(limits.max_head_bytes).min(u32::MAX as usize);
    let window = buf.get(..window_len).unwrap_or(buf);
    // httparse skips leading empty lines; a response has none, and bytes there
    // mean the previous body was framed wrong.
    if matches!(window.first(), Some(b'\r' | b'\n')) {
        return Err(ResponseError::BadLineEnding);
    }

    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS_CAP];
    let slot_count = limits.max_headers.min(MAX_HEADERS_CAP);
    let slots = slots.get_mut(..slot_count).unwrap_or(&mut []);
    let mut res = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut res, window, slots)
    {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= limits.max_head_bytes => {
            return Err(ResponseError::HeadTooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(Parsed::Partial),
        Err(httparse::Error::TooManyHeaders) => return Err(ResponseError::TooManyHeaders),
        Err(httparse::Error::HeaderName) => return Err(ResponseError::InvalidHeaderName),
        Err(httparse::Error::HeaderValue) => return Err(ResponseError::InvalidHeaderValue),
        Err(httparse::Error::NewLine) => return Err(ResponseError::BadLineEnding),
        Err(_) => return Err(ResponseError::InvalidStatusLine),
    };
    if len < 4 || window.get(len - 4..len) != Some(b"\r\n\r\n") {
        return Err(ResponseError::BadLineEnding);
    }
    let (Some(minor), Some(status)) = (res.version, res.code) else {
        return Err(ResponseError::InvalidStatusLine);
    };
    if status < 100 {
        return Err(ResponseError::InvalidStatusLine);
    }
    // The status line may end in bare LF; with headers the check below sees it,
    // without them the CRLFCRLF check above did.
    if let Some(reason) = res.reason.filter(|r| !r.is_empty()) {
        let at = offset_of(window, reason.as_bytes());
        head.reason = Span::new(at, at + reason.len());
    }
    head.status = status;
    head.head_len = len;
    head.version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };

    let mut content_length = None;
    let mut te_present = false;
    let mut te_elements = 0u32;
    let mut te_last_chunked = false;
    let mut te_chunked = 0u32;
    let mut te_bad = false;
    let mut close = false;
    let mut keep_alive = false;
    for h in res.headers.iter() {
        let name_at = offset_of(window, h.name.as_bytes());
        if name_at < 2 || window.get(name_at - 2..name_at) != Some(b"\r\n") {
            return Err(ResponseError::BadLineEnding);
        }
        let value_at = offset_of(window, h.value);
        head.headers.push(HeaderSpan {
            name: Span::new(name_at, name_at + h.name.len()),
            value: Span::new(value_at, value_at + h.value.len()),
        });
        let name = FieldName::of(h.name.as_bytes());
        head.names.push(name);
        match name {
            FieldName::ContentLength => {
                if content_length.is_some() {
                    return Err(ResponseError::InvalidContentLength);
                }
                content_length =
                    Some(parse_content_length(h.value).ok_or(ResponseError::InvalidContentLength)?);
            }
            FieldName::TransferEncoding => {
                te_present = true;
                for element in list_elements(h.value) {
                    te_elements += 1;
                    te_last_chunked = eq_lowercase(element, b"chunked");
                    if te_last_chunked {
                        te_chunked += 1;
                    } else if !coding_syntax_ok(element) {
                        te_bad = true;
                    }
                }
            }
            FieldName::Connection => {
                for token in list_elements(h.value) {
                    let is_keep_alive = eq_lowercase(token, b"keep-alive");
                    close |= eq_lowercase(token, b"close");
                    keep_alive |= is_keep_alive;
                    head.connection_options |= !is_keep_alive;
                }
            }
            _ => {}
        }
    }

    // RFC 9112 §6.3, in its order: no-body cases first, then Transfer-Encoding,
    // then Content-Length, else read until close.
    let no_body = method == Method::Head
        || (100..200).contains(&status)
        || status == 204
        || status == 304
        || (method == Method::Connect && (200..300).contains(&status));
    head.body = if no_body {
        ResponseBody::None
    } else if te_present {
        if content_length.is_some() || head.version == Version::Http10 || te_bad || te_chunked > 1 {
            return Err(ResponseError::BadTransferEncoding);
        }
        if te_last_chunked && te_elements == 1 {
            ResponseBody::Chunked
        } else if te_chunked == 0 && te_elements > 0 {
            // A final coding other than chunked is delimited by close (rule 4);
            // the content is still coded, which the proxy passes through as is.
            ResponseBody::UntilClose
        } else {
            // Codings stacked under chunked: decoding chunked alone would hand
            // on gzip/deflate bytes without their Transfer-Encoding.
            return Err(ResponseError::BadTransferEncoding);
        }
    } else if let Some(n) = content_length {
        ResponseBody::Length(n)
    } else {
        ResponseBody::UntilClose
    };
    head.keep_alive = head.body != ResponseBody::UntilClose
        && match head.version {
            Version::Http11 => !close,
            Version::Http10 => keep_alive && !close,
        };
    Ok(Parsed::Complete)
}

/// `token *( OWS ";" OWS transfer-parameter )`, checked as far as framing needs.
fn coding_syntax_ok(element: &[u8]) -> bool {
    let name_len = element
        .iter()
        .position(|&b| !is_tchar(b))
        .unwrap_or(element.len());
    let params = element.get(name_len..).unwrap_or(&[]);
    name_len > 0 && (params.is_empty() || trim_ows(params).first() == Some(&b';'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::test_support::assert_each;

    fn parse_for(method: Method, raw: &[u8]) -> Result<ParsedResponseHead, ResponseError> {
        let mut head = ParsedResponseHead::new();
        match parse_response(raw, &Limits::default(), method, &mut head)? {
            Parsed::Complete => Ok(head),
            Parsed::Partial => panic!("partial: {:?}", String::from_utf8_lossy(raw)),
        }
    }

    fn parse(raw: &[u8]) -> Result<ParsedResponseHead, ResponseError> {
        parse_for(Method::Get, raw)
    }

    #[test]
    fn eq_lowercase_folds_case_only_for_letters() {
        assert!(eq_lowercase(b"Content-Length", b"content-length"));
        assert!(eq_lowercase(b"KEEP-ALIVE", b"keep-alive"));
        assert!(eq_lowercase(b"", b""));
        assert!(!eq_lowercase(b"content-lengt", b"content-length"));
        assert!(!eq_lowercase(b"content-lengthx", b"content-length"));
        assert!(!eq_lowercase(b"content_length", b"content-length"));
        // `\r` is `-` with the case bit clear: it must not pass for one.
        assert!(!eq_lowercase(b"keep\ralive", b"keep-alive"));
        // Bytes that differ from a letter only in the case bit but are not letters.
        assert!(!eq_lowercase(b"\x01", b"!"));
        assert!(!eq_lowercase(b"te\x00", b"te "));
        // Against the standard comparison, for every length the windows handle.
        let lower: &[u8] = b"abcdefghijklmnopqrstuvwxyz-0123456789-transfer-encoding";
        for n in 0..=lower.len() {
            let lower = &lower[..n];
            let upper = lower.to_ascii_uppercase();
            assert!(eq_lowercase(lower, lower), "{n}");
            assert!(eq_lowercase(&upper, lower), "{n}");
            for i in 0..n {
                for flip in [0x20u8, 0x01, 0x80, 0x2d ^ 0x0d] {
                    let mut other = upper.clone();
                    other[i] ^= flip;
                    assert_eq!(
                        eq_lowercase(&other, lower),
                        other.eq_ignore_ascii_case(lower),
                        "{n} {i} {flip:#x}"
                    );
                }
            }
        }
        for b in 0..=255u8 {
            let lower = [b'a'];
            assert_eq!(eq_lowercase(&[b], &lower), b == b'a' || b == b'A', "{b}");
            let dash = [b'-'];
            assert_eq!(eq_lowercase(&[b], &dash), b == b'-', "{b}");
        }
    }

    #[test]
    fn fields_are_classified_and_connection_options_noted_in_the_parse() {
        let raw = b"HTTP/1.1 200 OK\r\nServer: o\r\nX-A: b\r\nContent-Length: 0\r\nConnection: Keep-Alive\r\n\r\n";
        let h = parse(raw).unwrap();
        assert_eq!(
            h.field_names(),
            [
                FieldName::Server,
                FieldName::Other,
                FieldName::ContentLength,
                FieldName::Connection
            ]
        );
        assert!(!h.connection_options());
        for connection in ["close", "keep-alive, X-A", "X-A"] {
            let raw = format!("HTTP/1.1 200 OK\r\nX-A: b\r\nConnection: {connection}\r\nContent-Length: 0\r\n\r\n");
            let h = parse(raw.as_bytes()).unwrap();
            assert!(h.connection_options(), "{connection}");
            assert_eq!(h.field_names().len(), 3);
        }
    }

    #[test]
    fn content_length_response() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello";
        let h = parse(raw).unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.reason(raw), b"OK");
        assert_eq!(h.head_len, raw.len() - 5);
        assert_eq!(h.body, ResponseBody::Length(5));
        assert!(h.keep_alive);
        assert_eq!(h.header(raw, "x-a"), Some(&b"b"[..]));
        assert_eq!(h.headers(raw).count(), 2);
    }

    #[test]
    fn partial_at_every_prefix_then_too_large() {
        let raw = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        for cut in 0..raw.len() {
            let mut head = ParsedResponseHead::new();
            assert_eq!(
                parse_response(&raw[..cut], &Limits::default(), Method::Get, &mut head),
                Ok(Parsed::Partial),
                "cut {cut}"
            );
        }
        let limits = Limits {
            max_head_bytes: 20,
            ..Limits::default()
        };
        let mut head = ParsedResponseHead::new();
        assert_eq!(
            parse_response(raw, &limits, Method::Get, &mut head),
            Err(ResponseError::HeadTooLarge)
        );
    }

    #[test]
    fn framing_per_rfc9112_section_6_3() {
        let body = |m: Method, raw: &[u8]| parse_for(m, raw).map(|h| h.body);
        let cl = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n";
        assert_eq!(body(Method::Head, cl), Ok(ResponseBody::None));
        assert_eq!(
            body(
                Method::Get,
                b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n"
            ),
            Ok(ResponseBody::None)
        );
        assert_eq!(
            body(
                Method::Get,
                b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n"
            ),
            Ok(ResponseBody::None)
        );
        assert_eq!(
            body(Method::Get, b"HTTP/1.1 100 Continue\r\n\r\n"),
            Ok(ResponseBody::None)
        );
        assert_eq!(
            body(Method::Connect, b"HTTP/1.1 200 OK\r\n\r\n"),
            Ok(ResponseBody::None)
        );
        assert_eq!(
            body(
                Method::Connect,
                b"HTTP/1.1 407 No\r\nContent-Length: 2\r\n\r\n"
            ),
            Ok(ResponseBody::Length(2))
        );
        assert_eq!(
            body(
                Method::Get,
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            ),
            Ok(ResponseBody::Chunked)
        );
        assert_eq!(
            body(
                Method::Get,
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"
            ),
            Ok(ResponseBody::UntilClose)
        );
        let h = parse(b"HTTP/1.1 200 OK\r\n\r\n").unwrap();
        assert_eq!(h.body, ResponseBody::UntilClose);
        assert!(!h.keep_alive);
    }

    #[test]
    fn ambiguous_framing_is_refused() {
        let body = |raw: &[u8]| parse(raw).map(|h| h.body);
        assert_each(
            body,
            Err(ResponseError::BadTransferEncoding),
            &[
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
                b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: g@zip\r\n\r\n",
            ],
        );
        assert_each(
            body,
            Err(ResponseError::InvalidContentLength),
            &[
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            ],
        );
    }

    #[test]
    fn strict_lines_and_versions() {
        let error = |raw: &[u8]| parse(raw).err();
        assert_each(
            error,
            Some(ResponseError::BadLineEnding),
            &[
                b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n",
                b"HTTP/1.1 200 OK\n\n",
                b"\r\nHTTP/1.1 200 OK\r\n\r\n",
            ],
        );
        assert_each(
            error,
            Some(ResponseError::InvalidHeaderName),
            &[
                b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nX : a\r\n\r\n",
            ],
        );
        assert_eq!(
            error(b"HTTP/1.1 200 OK\r\nX: a\x00\r\n\r\n"),
            Some(ResponseError::InvalidHeaderValue)
        );
        assert_each(
            error,
            Some(ResponseError::InvalidStatusLine),
            &[
                b"HTTP/2.0 200 OK\r\n\r\n",
                b"HTTP/1.1 20 OK\r\n\r\n",
                b"HTTP/1.1 099 OK\r\n\r\n",
            ],
        );
        // A missing reason phrase is fine.
        let raw = b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            parse(raw).map(|h| (h.status, h.reason(raw).len())),
            Ok((200, 0))
        );
    }

    #[test]
    fn keep_alive_rules() {
        let ka = |raw: &[u8]| parse(raw).unwrap().keep_alive;
        assert!(ka(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(!ka(
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ));
        assert!(!ka(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(ka(
            b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n"
        ));
        assert!(!ka(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"));
    }
}
