//! Request-head parsing with strict RFC 9112 framing.
//!
//! httparse tokenizes (SIMD over the request line and header values); this
//! module layers on the checks httparse leaves lenient (bare-LF line endings,
//! unbounded leading empty lines, 505 versus 400 for versions, target forms)
//! and the semantic ones it does not do at all (Host, Content-Length,
//! Transfer-Encoding, Connection, Expect).
//!
//! Nothing is copied: the parsed head stores `u32` spans into the caller's
//! buffer, and its header `Vec` is reused across requests, so a warmed-up
//! connection parses without allocating.
//!
//! Every [`RequestError`] means: answer with [`RequestError::status`] and close
//! the connection, because the framing of anything after the head is unknown.
//!
//! Choices where RFC 9112 leaves room, all on the strict side:
//! - Lines end in CRLF only; a bare LF anywhere in the head is 400.
//! - Up to [`MAX_LEADING_EMPTY_LINES`] CRLFs before the request line are skipped.
//! - Content-Length on two lines is 400 even when the values agree (as nginx).
//! - Targets with bytes >= 0x80 or a `#` are 400; percent-decoding is left to
//!   the router, which must refuse bad escapes itself.
//! - HTTP/1.1 needs exactly one Host even with an absolute-form target (whose
//!   authority then wins); an empty Host is accepted and routes as no host.
//! - Transfer-Encoding rules are checked in the order listed on `Framing::body_kind`.

use std::fmt;
use std::mem::MaybeUninit;

/// Hard ceiling on header slots, whatever [`Limits::max_headers`] says: the
/// slots live on the stack (uninitialised, so the size costs nothing per parse).
pub const MAX_HEADERS_CAP: usize = 256;

/// Empty lines (CRLF) tolerated before the request line (RFC 9112 §2.2 asks for
/// at least one, for clients that send a CRLF after a POST body).
pub const MAX_LEADING_EMPTY_LINES: usize = 4;

/// Bytes allowed on the request line beyond the target itself (method, two
/// spaces, version, CRLF) before an unfinished line is judged too long (414).
const REQUEST_LINE_SLACK: usize = 64;

/// Size limits applied while parsing a head; exceeding one is 431 or 414.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Whole head, leading empty lines and final CRLFCRLF included (431).
    pub max_head_bytes: usize,
    /// Header field lines (431); values above [`MAX_HEADERS_CAP`] act as the cap.
    pub max_headers: usize,
    /// Request target (414).
    pub max_uri_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: 64 * 1024,
            max_headers: 100,
            max_uri_bytes: 8192,
        }
    }
}

/// Protocol version of a message; only the two that HTTP/1 servers speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0: no Host required, persistent only on `Connection: keep-alive`.
    Http10,
    /// HTTP/1.1: persistent unless `Connection: close`.
    Http11,
}

/// Request method; well-known ones are matched once so handlers compare enums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`: the response has no body whatever its headers say.
    Head,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `DELETE`
    Delete,
    /// `OPTIONS`: the only method allowed the `*` target.
    Options,
    /// `PATCH`
    Patch,
    /// `TRACE`
    Trace,
    /// `CONNECT`: the only method allowed (and required) the authority form.
    Connect,
    /// Any other valid token; read it with [`RequestHead::method_token`].
    Other,
}

impl Method {
    /// Maps a method token (case-sensitive, RFC 9110 §9.1) to the enum.
    pub fn from_token(token: &[u8]) -> Method {
        match token {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"OPTIONS" => Method::Options,
            b"PATCH" => Method::Patch,
            b"TRACE" => Method::Trace,
            b"CONNECT" => Method::Connect,
            _ => Method::Other,
        }
    }
}

/// How the request body is framed (RFC 9112 §6.3); decided once, from the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// No body: neither Content-Length nor Transfer-Encoding.
    None,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// Chunked transfer coding; decode with [`super::body::BodyDecoder`].
    Chunked,
}

/// Result of a parse attempt that did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// The head is not complete yet (and no limit is exceeded): read more.
    Partial,
    /// The head is complete; `head_len` bytes of the buffer belong to it.
    Complete,
}

/// Shape of the request target (RFC 9112 §3.2), which decides where the host comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetForm {
    /// `/path?query`, the usual form; host comes from the Host header.
    Origin,
    /// `http://authority/path?query`, sent to proxies; host comes from the target.
    Absolute,
    /// `host:port`, only with CONNECT.
    Authority,
    /// `*`, only with OPTIONS.
    Asterisk,
}

/// Byte range into the buffer that was parsed; `u32` keeps heads small and copyable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    start: u32,
    end: u32,
}

impl Span {
    /// Builds a span; offsets come from a parse window capped at `u32::MAX`.
    pub(super) fn new(start: usize, end: usize) -> Span {
        Span {
            start: u32::try_from(start).unwrap_or(u32::MAX),
            end: u32::try_from(end).unwrap_or(u32::MAX),
        }
    }

    /// The bytes this span covers; empty (never a panic) if `buf` is not the parsed buffer.
    pub fn get(self, buf: &[u8]) -> &[u8] {
        buf.get(self.start as usize..self.end as usize)
            .unwrap_or(&[])
    }

    /// Offset of the first byte.
    pub fn start(self) -> usize {
        self.start as usize
    }

    /// Offset one past the last byte.
    pub fn end(self) -> usize {
        self.end as usize
    }

    /// Number of bytes covered.
    pub fn len(self) -> usize {
        self.end.saturating_sub(self.start) as usize
    }

    /// Whether the span covers nothing.
    pub fn is_empty(self) -> bool {
        self.end <= self.start
    }
}

/// One header field line as spans: name as sent, value without surrounding whitespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderSpan {
    /// Field name, case preserved.
    pub name: Span,
    /// Field value, leading and trailing SP/HTAB removed.
    pub value: Span,
}

/// A parsed request head: owned, reusable, and pointing into the caller's buffer.
///
/// Keep one per connection and pass it to every [`parse_request`]; the header
/// vector keeps its capacity, so steady-state parsing does not allocate. All
/// accessors take the buffer that was parsed (spans are offsets into it; shift
/// the buffer and they go stale). After `Partial` or an error the contents are
/// unspecified.
#[derive(Clone, Debug)]
pub struct RequestHead {
    /// Method, matched against the well-known tokens.
    pub method: Method,
    /// Protocol version (only 1.0 and 1.1 parse).
    pub version: Version,
    /// Bytes the head took, from the start of the buffer through the final CRLFCRLF.
    pub head_len: usize,
    /// Body framing decided from the headers.
    pub body: BodyKind,
    /// Whether the connection may carry another request after this one.
    pub keep_alive: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request that has a non-empty body.
    pub expect_continue: bool,
    /// Form of the request target.
    pub target_form: TargetForm,
    method_span: Span,
    target: Span,
    path: Span,
    query: Option<Span>,
    host: Option<Span>,
    host_name: Option<Span>,
    headers: Vec<HeaderSpan>,
    scan: Option<ScanHint>,
}

/// Where the previous `Partial` stopped, so the next call scans only new bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ScanHint {
    /// `buf.len()` at that call; a shorter buffer means a new head.
    buf_len: usize,
    /// Offset, after leading empty lines, where the end-of-head search resumes.
    resume: usize,
    /// An LF was seen, so the request line is complete.
    line_done: bool,
}

impl Default for RequestHead {
    fn default() -> Self {
        RequestHead {
            method: Method::Get,
            version: Version::Http11,
            head_len: 0,
            body: BodyKind::None,
            keep_alive: false,
            expect_continue: false,
            target_form: TargetForm::Origin,
            method_span: Span::default(),
            target: Span::default(),
            path: Span::default(),
            query: None,
            host: None,
            host_name: None,
            headers: Vec::new(),
            scan: None,
        }
    }
}

impl RequestHead {
    /// An empty head; the header vector grows on first use and is then reused.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets a previous `Partial`: needed only if the buffer is handed back
    /// starting at a different byte before the head completed.
    pub fn clear(&mut self) {
        self.reset();
    }

    fn reset(&mut self) {
        let mut headers = std::mem::take(&mut self.headers);
        headers.clear();
        *self = RequestHead {
            headers,
            ..RequestHead::default()
        };
    }

    /// The method token exactly as sent (needed for [`Method::Other`]).
    pub fn method_token<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        self.method_span.get(buf)
    }

    /// The request target exactly as sent, for logs and for forwarding.
    pub fn target<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        self.target.get(buf)
    }

    /// Path without the query, still percent-encoded; `/` for an absolute-form
    /// target without a path, `*` for the asterisk form, the authority for CONNECT.
    pub fn path<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        if self.target_form == TargetForm::Absolute && self.path.is_empty() {
            return b"/";
        }
        self.path.get(buf)
    }

    /// Query after `?` (possibly empty), or `None` when the target has no `?`.
    pub fn query<'b>(&self, buf: &'b [u8]) -> Option<&'b [u8]> {
        self.query.map(|s| s.get(buf))
    }

    /// Host with any port: from the target in absolute/authority form (which
    /// overrides the header, RFC 9112 §3.2.2), else from the Host header.
    /// `None` only for HTTP/1.0 without Host. Case is as sent.
    pub fn host<'b>(&self, buf: &'b [u8]) -> Option<&'b [u8]> {
        self.host.map(|s| s.get(buf))
    }

    /// [`Self::host`] without the port (IPv6 literals keep their brackets).
    pub fn host_name<'b>(&self, buf: &'b [u8]) -> Option<&'b [u8]> {
        self.host_name.map(|s| s.get(buf))
    }

    /// First value of a header, name matched case-insensitively.
    pub fn header<'b>(&self, buf: &'b [u8], name: &str) -> Option<&'b [u8]> {
        let name = name.as_bytes();
        self.headers
            .iter()
            .find(|h| h.name.len() == name.len() && h.name.get(buf).eq_ignore_ascii_case(name))
            .map(|h| h.value.get(buf))
    }

    /// All header lines in order, as (name, value).
    pub fn headers<'s, 'b>(
        &'s self,
        buf: &'b [u8],
    ) -> impl Iterator<Item = (&'b [u8], &'b [u8])> + use<'s, 'b> {
        self.headers
            .iter()
            .map(move |h| (h.name.get(buf), h.value.get(buf)))
    }

    /// Header lines as spans, for code that rewrites the head (the proxy).
    pub fn header_spans(&self) -> &[HeaderSpan] {
        &self.headers
    }
}

/// Why a request head was refused; each maps to one status, after which the
/// connection must be closed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// More than [`MAX_LEADING_EMPTY_LINES`] empty lines before the request line.
    TooManyEmptyLines,
    /// A line ends in bare LF, or a CR is not followed by LF.
    BadLineEnding,
    /// Method, spacing or target syntax of the request line is wrong.
    InvalidRequestLine,
    /// Target has a form the method does not allow, or bad bytes.
    InvalidTarget,
    /// Version is not `HTTP/<digit>.<digit>`.
    InvalidVersion,
    /// Well-formed version other than 1.0 and 1.1 (505).
    VersionNotSupported,
    /// Field name is empty, has a non-token byte, is followed by whitespace
    /// before the colon, or the line is an obs-fold continuation.
    InvalidHeaderName,
    /// Field value has a control character other than HTAB.
    InvalidHeaderValue,
    /// HTTP/1.1 request without Host.
    MissingHost,
    /// More than one Host line.
    DuplicateHost,
    /// Host (or target authority) is not `host[:port]`, or carries userinfo.
    InvalidHost,
    /// Content-Length is not a single decimal number that fits in u64.
    InvalidContentLength,
    /// Content-Length appears on more than one line.
    DuplicateContentLength,
    /// Both Content-Length and Transfer-Encoding: the classic smuggling vector.
    ContentLengthWithTransferEncoding,
    /// Transfer-Encoding in an HTTP/1.0 request, which cannot carry it.
    TransferEncodingInHttp10,
    /// Transfer-Encoding that is empty, malformed, does not end in `chunked`,
    /// or applies `chunked` twice: the body length cannot be known.
    BadTransferEncoding,
    /// Transfer-Encoding ending in `chunked` but with other codings we do not decode (501).
    UnsupportedTransferCoding,
    /// Head larger than [`Limits::max_head_bytes`] (431).
    HeadTooLarge,
    /// More header lines than [`Limits::max_headers`] (431).
    TooManyHeaders,
    /// Request target longer than [`Limits::max_uri_bytes`] (414).
    UriTooLong,
}

impl RequestError {
    /// Status code to answer with before closing.
    pub fn status(&self) -> u16 {
        match self {
            RequestError::VersionNotSupported => 505,
            RequestError::UnsupportedTransferCoding => 501,
            RequestError::HeadTooLarge | RequestError::TooManyHeaders => 431,
            RequestError::UriTooLong => 414,
            _ => 400,
        }
    }

    /// Short cause for logs (the status line's reason phrase comes from
    /// [`super::write::reason_phrase`]).
    pub fn reason(&self) -> &'static str {
        match self {
            RequestError::TooManyEmptyLines => "too many empty lines before request line",
            RequestError::BadLineEnding => "line not terminated by CRLF",
            RequestError::InvalidRequestLine => "malformed request line",
            RequestError::InvalidTarget => "invalid request target",
            RequestError::InvalidVersion => "malformed HTTP version",
            RequestError::VersionNotSupported => "HTTP version not supported",
            RequestError::InvalidHeaderName => "invalid header field name or obs-fold",
            RequestError::InvalidHeaderValue => "invalid byte in header field value",
            RequestError::MissingHost => "HTTP/1.1 request without Host",
            RequestError::DuplicateHost => "more than one Host",
            RequestError::InvalidHost => "invalid Host",
            RequestError::InvalidContentLength => "invalid Content-Length",
            RequestError::DuplicateContentLength => "more than one Content-Length",
            RequestError::ContentLengthWithTransferEncoding => {
                "both Content-Length and Transfer-Encoding"
            }
            RequestError::TransferEncodingInHttp10 => "Transfer-Encoding in HTTP/1.0 request",
            RequestError::BadTransferEncoding => "Transfer-Encoding not ending in single chunked",
            RequestError::UnsupportedTransferCoding => "unsupported transfer coding",
            RequestError::HeadTooLarge => "request head too large",
            RequestError::TooManyHeaders => "too many header fields",
            RequestError::UriTooLong => "request target too long",
        }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.reason(), self.status())
    }
}

impl std::error::Error for RequestError {}

/// Parses a request head from the start of `buf` into `head`.
///
/// `Partial` means no complete head yet and no limit exceeded: read more and
/// call again with the grown buffer. Limits are enforced on partial input too,
/// so a caller that only ever sees `Partial` never buffers more than
/// `max_head_bytes`: 431 once `buf` reaches it without a complete head, 414
/// once the unfinished request line is longer than the target allowance.
/// On `Complete`, `head.head_len` bytes belong to the head and the body (if
/// any) starts right after.
///
/// After `Partial`, `head` remembers how far it scanned, so each call costs
/// only the new bytes until the head can be complete. Hand back the same
/// bytes grown at the end (the buffer may move in memory); a shorter buffer
/// starts over by itself, and [`RequestHead::clear`] starts over explicitly.
pub fn parse_request(
    buf: &[u8],
    limits: &Limits,
    head: &mut RequestHead,
) -> Result<Parsed, RequestError> {
    let hint = head.scan.take().filter(|h| h.buf_len <= buf.len());
    head.reset();
    // Only the first max_head_bytes are ever tokenized, which bounds the work
    // per call; spans are u32, so the window is capped there as well.
    let window_len = buf.len().min(limits.max_head_bytes).min(u32::MAX as usize);
    let window = buf.get(..window_len).unwrap_or(buf);

    let skip = match skip_empty_lines(window)? {
        Some(skip) => skip,
        None => return incomplete(buf, &[], false, limits),
    };
    let rest = window.get(skip..).unwrap_or(&[]);

    // After a Partial, look only at the new bytes, and tokenize again only if
    // they could end the head or complete the request line. Without this a
    // peer sending one byte at a time would cost a full re-parse per byte.
    let mut next = ScanHint {
        buf_len: buf.len(),
        resume: 0,
        line_done: false,
    };
    if let Some(h) = hint {
        let (found, resume, saw_lf) = scan_for_end(rest, h.resume);
        next.resume = resume;
        next.line_done = h.line_done || saw_lf;
        if !found && next.line_done == h.line_done {
            head.scan = Some(next);
            return incomplete(buf, rest, next.line_done, limits);
        }
    }
    let mut still_partial = |head: &mut RequestHead| {
        if hint.is_none() {
            // An end-of-head candidate ("\n\r\n" or "\n\n") in the bytes seen
            // would have completed or failed the parse, so only the last two
            // bytes need a second look.
            next.resume = rest.len().saturating_sub(2);
            next.line_done = rest.contains(&b'\n');
        }
        head.scan = Some(next);
        incomplete(buf, rest, next.line_done, limits)
    };

    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS_CAP];
    let slot_count = limits.max_headers.min(MAX_HEADERS_CAP);
    let slots = slots.get_mut(..slot_count).unwrap_or(&mut []);
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(rest, slots) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return still_partial(head),
        Err(httparse::Error::Version) => {
            version_error(rest)?;
            return still_partial(head);
        }
        Err(httparse::Error::TooManyHeaders) => return Err(RequestError::TooManyHeaders),
        Err(httparse::Error::HeaderName) => return Err(RequestError::InvalidHeaderName),
        Err(httparse::Error::HeaderValue) => return Err(RequestError::InvalidHeaderValue),
        Err(httparse::Error::NewLine) => return Err(RequestError::BadLineEnding),
        Err(_) => return Err(RequestError::InvalidRequestLine),
    };

    // httparse also ends lines at a bare LF. Every line end is either just
    // before a header name or part of the final empty line, so checking those
    // spots covers the whole head without rescanning it.
    if !ends_with_crlfcrlf(rest, len) {
        return Err(RequestError::BadLineEnding);
    }

    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(RequestError::InvalidRequestLine);
    };
    head.head_len = skip + len;
    head.version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    head.method = Method::from_token(method.as_bytes());
    head.method_span = span_of(rest, method.as_bytes(), skip);
    let target = target.as_bytes();
    if target.len() > limits.max_uri_bytes {
        return Err(RequestError::UriTooLong);
    }
    let target_at = offset_of(rest, target) + skip;
    head.target = Span::new(target_at, target_at + target.len());
    parse_target(head, target, target_at)?;

    let mut framing = Framing::default();
    for h in req.headers.iter() {
        let name_at = offset_of(rest, h.name.as_bytes());
        if name_at < 2 || rest.get(name_at - 2..name_at) != Some(b"\r\n") {
            return Err(RequestError::BadLineEnding);
        }
        let value_at = offset_of(rest, h.value) + skip;
        let header = HeaderSpan {
            name: Span::new(name_at + skip, name_at + skip + h.name.len()),
            value: Span::new(value_at, value_at + h.value.len()),
        };
        head.headers.push(header);
        match framing.field(h.name.as_bytes(), h.value)? {
            Field::Host => {
                let (host_len, _) =
                    split_authority(h.value, false).ok_or(RequestError::InvalidHost)?;
                if head.host.is_none() {
                    head.host = Some(header.value);
                    head.host_name = Some(Span::new(value_at, value_at + host_len));
                }
            }
            Field::Other => {}
        }
    }

    if framing.host_lines == 0 && head.version == Version::Http11 {
        return Err(RequestError::MissingHost);
    }
    head.body = framing.body_kind(head.version)?;
    head.keep_alive = match head.version {
        Version::Http11 => !framing.close,
        Version::Http10 => framing.keep_alive && !framing.close,
    };
    head.expect_continue = framing.expect_continue
        && head.version == Version::Http11
        && matches!(head.body, BodyKind::Chunked | BodyKind::Length(1..));
    Ok(Parsed::Complete)
}

/// Skips up to [`MAX_LEADING_EMPTY_LINES`] CRLFs; `None` if the window ends first.
fn skip_empty_lines(window: &[u8]) -> Result<Option<usize>, RequestError> {
    let mut at = 0;
    for _ in 0..=MAX_LEADING_EMPTY_LINES {
        match window.get(at..) {
            Some([b'\r', b'\n', ..]) => at += 2,
            Some([] | [b'\r']) | None => return Ok(None),
            Some([b'\r' | b'\n', ..]) => return Err(RequestError::BadLineEnding),
            Some(_) => return Ok(Some(at)),
        }
    }
    Err(RequestError::TooManyEmptyLines)
}

/// Decides between `Partial`, 414 and 431 for a head that is not complete;
/// `line` is the request so far (after leading empty lines).
fn incomplete(
    buf: &[u8],
    line: &[u8],
    line_done: bool,
    limits: &Limits,
) -> Result<Parsed, RequestError> {
    if !line_done && line.len() > limits.max_uri_bytes.saturating_add(REQUEST_LINE_SLACK) {
        return Err(RequestError::UriTooLong);
    }
    if buf.len() >= limits.max_head_bytes {
        return Err(RequestError::HeadTooLarge);
    }
    Ok(Parsed::Partial)
}

/// Looks in `rest[from..]` for an LF that starts an end of head (`\n\r\n`,
/// or `\n\n`, which the full parse then refuses as a bare LF). Returns whether
/// one was found, where the next search should resume, and whether any LF was seen.
fn scan_for_end(rest: &[u8], from: usize) -> (bool, usize, bool) {
    let mut at = from.min(rest.len());
    let mut saw_lf = false;
    while let Some(i) = rest
        .get(at..)
        .and_then(|r| r.iter().position(|&b| b == b'\n'))
    {
        let lf = at + i;
        saw_lf = true;
        match rest.get(lf + 1..) {
            Some([b'\n', ..] | [b'\r', b'\n', ..]) => return (true, lf, true),
            Some([] | [b'\r']) | None => return (false, lf, true),
            Some(_) => at = lf + 1,
        }
    }
    (false, rest.len(), saw_lf)
}

/// httparse only knows 1.0 and 1.1; tell a well-formed other version (505) from
/// garbage (400), or wait (`Ok`) while the version token is still arriving.
fn version_error(rest: &[u8]) -> Result<(), RequestError> {
    let line_end = rest.iter().position(|&b| b == b'\r' || b == b'\n');
    let line = rest.get(..line_end.unwrap_or(rest.len())).unwrap_or(rest);
    // Method and target were accepted, each followed by exactly one SP.
    let mut parts = line.splitn(3, |&b| b == b' ');
    let version = match (parts.next(), parts.next(), parts.next()) {
        (Some(_), Some(_), Some(v)) => v,
        _ => return Err(RequestError::InvalidVersion),
    };
    const PATTERN: &[u8; 8] = b"HTTP/9.9";
    let fits = |v: &[u8]| {
        v.len() <= PATTERN.len()
            && v.iter().zip(PATTERN).all(|(&b, &p)| {
                if p == b'9' {
                    b.is_ascii_digit()
                } else {
                    b == p
                }
            })
    };
    if line_end.is_none() && fits(version) {
        return Ok(());
    }
    // "HTTP/2" and "HTTP/3" are how some clients spell the newer versions;
    // "HTTP/1" names no version at all.
    let major_only = version.len() == 6 && version.get(5) != Some(&b'1');
    if fits(version) && (version.len() == 8 || major_only) {
        Err(RequestError::VersionNotSupported)
    } else {
        Err(RequestError::InvalidVersion)
    }
}

/// Whether `rest[..len]` ends in CRLF CRLF (the last header line's end and the empty line).
fn ends_with_crlfcrlf(rest: &[u8], len: usize) -> bool {
    len >= 4 && rest.get(len - 4..len) == Some(b"\r\n\r\n")
}

/// Offset of `part` inside `base`; `part` is always a sub-slice returned by httparse.
pub(super) fn offset_of(base: &[u8], part: &[u8]) -> usize {
    let at = (part.as_ptr() as usize).wrapping_sub(base.as_ptr() as usize);
    // A sub-slice cannot start past its parent; clamp rather than trust it.
    at.min(base.len())
}

fn span_of(base: &[u8], part: &[u8], shift: usize) -> Span {
    let at = offset_of(base, part) + shift;
    Span::new(at, at + part.len())
}

/// Validates the target against the method and fills path, query and (for
/// absolute and authority forms) host.
fn parse_target(head: &mut RequestHead, target: &[u8], at: usize) -> Result<(), RequestError> {
    // httparse let through bytes >= 0x80; RFC 3986 has none, and a fragment
    // is never sent on the wire (RFC 9112 §3.2).
    if !target.is_ascii() || target.contains(&b'#') {
        return Err(RequestError::InvalidTarget);
    }
    let connect = head.method == Method::Connect;
    let path_and_query = |head: &mut RequestHead, from: usize| {
        let rest = target.get(from..).unwrap_or(&[]);
        match rest.iter().position(|&b| b == b'?') {
            Some(q) => {
                head.path = Span::new(at + from, at + from + q);
                head.query = Some(Span::new(at + from + q + 1, at + target.len()));
            }
            None => head.path = Span::new(at + from, at + target.len()),
        }
    };
    if target.first() == Some(&b'/') && !connect {
        head.target_form = TargetForm::Origin;
        path_and_query(head, 0);
        return Ok(());
    }
    if target == b"*" {
        if head.method != Method::Options {
            return Err(RequestError::InvalidTarget);
        }
        head.target_form = TargetForm::Asterisk;
        head.path = Span::new(at, at + 1);
        return Ok(());
    }
    if connect {
        // RFC 9110 §9.3.6: host and port, nothing else.
        let (host_len, port) = split_authority(target, true).ok_or(RequestError::InvalidTarget)?;
        if host_len == 0 || port.is_none() {
            return Err(RequestError::InvalidTarget);
        }
        head.target_form = TargetForm::Authority;
        head.path = Span::new(at, at + target.len());
        head.host = Some(head.path);
        head.host_name = Some(Span::new(at, at + host_len));
        return Ok(());
    }
    let scheme_len = if starts_with_ignore_case(target, b"http://") {
        7
    } else if starts_with_ignore_case(target, b"https://") {
        8
    } else {
        return Err(RequestError::InvalidTarget);
    };
    let after = target.get(scheme_len..).unwrap_or(&[]);
    let auth_len = after
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(after.len());
    let authority = after.get(..auth_len).unwrap_or(&[]);
    // userinfo is deprecated for http(s) and a phishing vector (RFC 9110 §4.2.4).
    if authority.contains(&b'@') {
        return Err(RequestError::InvalidTarget);
    }
    let (host_len, _) = split_authority(authority, false).ok_or(RequestError::InvalidTarget)?;
    if host_len == 0 {
        return Err(RequestError::InvalidTarget);
    }
    head.target_form = TargetForm::Absolute;
    let auth_at = at + scheme_len;
    head.host = Some(Span::new(auth_at, auth_at + auth_len));
    head.host_name = Some(Span::new(auth_at, auth_at + host_len));
    path_and_query(head, scheme_len + auth_len);
    Ok(())
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.get(..prefix.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

/// Splits `host[:port]` (RFC 3986 authority without userinfo) and validates it.
/// Returns the host length and the port digits if a `:` was present. An empty
/// input is valid (an empty Host header); an empty host before a port is not.
pub(super) fn split_authority(a: &[u8], port_required: bool) -> Option<(usize, Option<&[u8]>)> {
    if a.is_empty() {
        return if port_required { None } else { Some((0, None)) };
    }
    let host_len = if a.first() == Some(&b'[') {
        let close = a.iter().position(|&b| b == b']')?;
        let inner = a.get(1..close)?;
        if !valid_ip_literal(inner) {
            return None;
        }
        close + 1
    } else {
        let end = a.iter().position(|&b| b == b':').unwrap_or(a.len());
        let host = a.get(..end)?;
        if host.is_empty() || !valid_reg_name(host) {
            return None;
        }
        end
    };
    match a.get(host_len..)? {
        [] if !port_required => Some((host_len, None)),
        [] => None,
        [b':', port @ ..] if port.len() <= 5 && port.iter().all(u8::is_ascii_digit) => {
            Some((host_len, Some(port)))
        }
        _ => None,
    }
}

/// reg-name / IPv4address: unreserved, sub-delims and well-formed pct-encoding.
fn valid_reg_name(host: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = host.get(i) {
        if b == b'%' {
            match host.get(i + 1..i + 3) {
                Some([h, l]) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => i += 3,
                _ => return false,
            }
            continue;
        }
        if !(b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b)) {
            return false;
        }
        i += 1;
    }
    true
}

/// IPv6address or IPvFuture inside brackets; shape only, not a full address parse.
fn valid_ip_literal(inner: &[u8]) -> bool {
    match inner.first() {
        None => false,
        Some(b'v' | b'V') => {
            inner.len() > 1
                && inner
                    .iter()
                    .skip(1)
                    .all(|&b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:".contains(&b))
        }
        Some(_) => inner
            .iter()
            .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.'),
    }
}

/// Which header fields need more than storing.
enum Field {
    Host,
    Other,
}

/// What the framing-relevant fields said, gathered over all lines.
#[derive(Default)]
struct Framing {
    host_lines: u32,
    content_length: Option<u64>,
    te: TeSummary,
    close: bool,
    keep_alive: bool,
    expect_continue: bool,
}

/// Transfer-Encoding list elements over all lines, in order.
#[derive(Default)]
struct TeSummary {
    present: bool,
    elements: u32,
    malformed: bool,
    last_is_chunked: bool,
    chunked: u32,
    other: bool,
}

impl Framing {
    /// Records one field line; dispatches on length first so most names cost
    /// one integer compare.
    fn field(&mut self, name: &[u8], value: &[u8]) -> Result<Field, RequestError> {
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                self.host_lines += 1;
                if self.host_lines > 1 {
                    return Err(RequestError::DuplicateHost);
                }
                return Ok(Field::Host);
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                if self.content_length.is_some() {
                    return Err(RequestError::DuplicateContentLength);
                }
                self.content_length =
                    Some(parse_content_length(value).ok_or(RequestError::InvalidContentLength)?);
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                self.te.present = true;
                for element in list_elements(value) {
                    self.te.add(element);
                }
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in list_elements(value) {
                    if token.eq_ignore_ascii_case(b"close") {
                        self.close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        self.keep_alive = true;
                    }
                }
            }
            6 if name.eq_ignore_ascii_case(b"expect")
                && value.eq_ignore_ascii_case(b"100-continue") =>
            {
                self.expect_continue = true;
            }
            _ => {}
        }
        Ok(Field::Other)
    }

    /// RFC 9112 §6.1/§6.3 for requests. Checked in this order, so the status
    /// is predictable when several rules are broken: Transfer-Encoding in 1.0
    /// (400), with Content-Length (400), malformed or empty (400), final coding
    /// not chunked (400), chunked twice (400), other codings before chunked (501).
    fn body_kind(&self, version: Version) -> Result<BodyKind, RequestError> {
        if !self.te.present {
            return Ok(match self.content_length {
                Some(n) => BodyKind::Length(n),
                None => BodyKind::None,
            });
        }
        if version == Version::Http10 {
            return Err(RequestError::TransferEncodingInHttp10);
        }
        if self.content_length.is_some() {
            return Err(RequestError::ContentLengthWithTransferEncoding);
        }
        let te = &self.te;
        if te.malformed || te.elements == 0 || !te.last_is_chunked || te.chunked > 1 {
            return Err(RequestError::BadTransferEncoding);
        }
        if te.other {
            return Err(RequestError::UnsupportedTransferCoding);
        }
        Ok(BodyKind::Chunked)
    }
}

impl TeSummary {
    fn add(&mut self, element: &[u8]) {
        self.elements += 1;
        // transfer-coding = token *( OWS ";" OWS transfer-parameter ); only the
        // name matters, since anything with parameters is not plain chunked.
        let name_len = element
            .iter()
            .position(|&b| !is_tchar(b))
            .unwrap_or(element.len());
        let (name, params) = element.split_at(name_len);
        if name.is_empty() || !(params.is_empty() || trim_ows(params).first() == Some(&b';')) {
            self.malformed = true;
        }
        self.last_is_chunked = params.is_empty() && name.eq_ignore_ascii_case(b"chunked");
        if self.last_is_chunked {
            self.chunked += 1;
        } else {
            self.other = true;
        }
    }
}

/// Content-Length = 1*DIGIT, one value, no list (RFC 9110 §8.6: "5, 5" is
/// refused too, since some peers would read it differently).
pub(super) fn parse_content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// Non-empty elements of a comma-separated field value, OWS trimmed (RFC 9110 §5.6.1).
pub(super) fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// Strips SP and HTAB on both ends.
pub(super) fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

const TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        i += 1;
    }
    t
};

/// RFC 9110 tchar: the bytes allowed in a token (method, field name, coding).
pub(super) fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let raw = b"GET /a? HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(complete(raw).query(raw), Some(&b""[..]));
        let raw = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(complete(raw).query(raw), None);
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
    fn incremental(
        raw: &[u8],
        step: usize,
        limits: &Limits,
    ) -> Result<(Parsed, usize), RequestError> {
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
        let mut head = RequestHead::new();
        let limits = Limits::default();
        let partial = b"GET / HTTP/1.1\r\nHost: a\r\nX-Long: 1234";
        assert_eq!(
            parse_request(partial, &limits, &mut head),
            Ok(Parsed::Partial)
        );
        let raw = b"GET / HTTP/1.0\r\n\r\n";
        assert_eq!(parse_request(raw, &limits, &mut head), Ok(Parsed::Complete));
        assert_eq!(head.head_len, raw.len());
        // Same length but a different start needs an explicit clear.
        assert_eq!(
            parse_request(partial, &limits, &mut head),
            Ok(Parsed::Partial)
        );
        head.clear();
        let other = b"GET /b HTTP/1.1\r\nHost: b\r\nX: abcd\r\n\r\n";
        assert_eq!(other.len(), partial.len());
        assert_eq!(
            parse_request(other, &limits, &mut head),
            Ok(Parsed::Complete)
        );
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
        assert_eq!(
            err(b"\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"),
            RequestError::BadLineEnding
        );
        assert_eq!(
            err(b"\r\rGET / HTTP/1.1\r\nHost: h\r\n\r\n"),
            RequestError::BadLineEnding
        );
    }

    #[test]
    fn rejects_content_length_with_transfer_encoding() {
        let raw = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(err(raw), RequestError::ContentLengthWithTransferEncoding);
        let raw = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n";
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
        for v in [&b"5, 5"[..], b"5,5", b"5, 6", b",5"] {
            let raw = [
                &b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: "[..],
                v,
                b"\r\n\r\n",
            ]
            .concat();
            assert_eq!(err(&raw), RequestError::InvalidContentLength, "{v:?}");
        }
    }

    #[test]
    fn rejects_bad_content_length_numbers() {
        for v in [
            &b"abc"[..],
            b"-1",
            b"+5",
            b"0x10",
            b"5 5",
            b"1e3",
            b"18446744073709551616",
            b"99999999999999999999999",
            b"",
        ] {
            let raw = [
                &b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: "[..],
                v,
                b"\r\n\r\n",
            ]
            .concat();
            assert_eq!(err(&raw), RequestError::InvalidContentLength, "{v:?}");
        }
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
        assert_eq!(te(b"chunked"), Ok(BodyKind::Chunked));
        assert_eq!(te(b"CHUNKED"), Ok(BodyKind::Chunked));
        assert_eq!(te(b"chunked,"), Ok(BodyKind::Chunked));
        // Final coding not chunked: 400.
        assert_eq!(te(b"gzip"), Err(RequestError::BadTransferEncoding));
        assert_eq!(te(b"chunked, gzip"), Err(RequestError::BadTransferEncoding));
        assert_eq!(te(b"identity"), Err(RequestError::BadTransferEncoding));
        assert_eq!(te(b"chunked;ext=1"), Err(RequestError::BadTransferEncoding));
        assert_eq!(te(b""), Err(RequestError::BadTransferEncoding));
        assert_eq!(te(b" , "), Err(RequestError::BadTransferEncoding));
        assert_eq!(
            te(b"chunked, chunked"),
            Err(RequestError::BadTransferEncoding)
        );
        assert_eq!(te(b"chu@nked"), Err(RequestError::BadTransferEncoding));
        assert_eq!(te(b"gzip chunked"), Err(RequestError::BadTransferEncoding));
        // Ends in chunked, but with codings we do not decode: 501.
        assert_eq!(
            te(b"gzip, chunked"),
            Err(RequestError::UnsupportedTransferCoding)
        );
        assert_eq!(
            te(b"deflate,chunked"),
            Err(RequestError::UnsupportedTransferCoding)
        );
        assert_eq!(
            te(b"x-custom;q=1, chunked"),
            Err(RequestError::UnsupportedTransferCoding)
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
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost : h\r\n\r\n"),
            RequestError::InvalidHeaderName
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost\t: h\r\n\r\n"),
            RequestError::InvalidHeaderName
        );
        let raw = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n";
        assert_eq!(err(raw), RequestError::InvalidHeaderName);
    }

    #[test]
    fn rejects_bad_field_names() {
        for name in [
            &b"X\x01A"[..],
            b"X\x00",
            b"X\x7f",
            b"X(A)",
            b"X/A",
            b"X\"",
            b"\xc3\xa9",
            b"X[]",
            b"X@",
        ] {
            let raw = [&b"GET / HTTP/1.1\r\nHost: h\r\n"[..], name, b": v\r\n\r\n"].concat();
            assert_eq!(err(&raw), RequestError::InvalidHeaderName, "{name:?}");
        }
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n"),
            RequestError::InvalidHeaderName
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n"),
            RequestError::InvalidHeaderName
        );
    }

    #[test]
    fn rejects_bare_lf_line_endings() {
        // Request line, header line, final empty line: each one alone.
        assert_eq!(
            err(b"GET / HTTP/1.1\nHost: h\r\n\r\n"),
            RequestError::BadLineEnding
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n"),
            RequestError::BadLineEnding
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\n\r\n"),
            RequestError::BadLineEnding
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\r\n\n"),
            RequestError::BadLineEnding
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\n\n"),
            RequestError::BadLineEnding
        );
        assert_eq!(err(b"GET / HTTP/1.0\n\n"), RequestError::BadLineEnding);
        assert_eq!(err(b"GET / HTTP/1.0\n\r\n"), RequestError::BadLineEnding);
        assert_eq!(err(b"GET / HTTP/1.0\r\n\n"), RequestError::BadLineEnding);
        // A bare LF inside a value splits the line: still caught.
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\r\nX: a\nY: b\r\n\r\n"),
            RequestError::BadLineEnding
        );
    }

    #[test]
    fn rejects_bare_cr() {
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\rHost: h\r\n\r\n"), 400);
        assert_eq!(status(b"GET /a\rb HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: h\r\n\r\r"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: h\r\nX:\r\r\n\r\n"), 400);
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
        for raw in [
            &b"GET  / HTTP/1.1\r\nHost: h\r\n\r\n"[..],
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
        ] {
            assert_eq!(status(raw), 400, "{:?}", String::from_utf8_lossy(raw));
        }
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
        for bad in [
            &b"CONNECT / HTTP/1.1\r\nHost: h\r\n\r\n"[..],
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
        ] {
            assert_eq!(
                err(bad),
                RequestError::InvalidTarget,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn rejects_controls_and_spaces_in_target() {
        assert_eq!(status(b"GET /a\x00b HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
        assert_eq!(status(b"GET /a\x7fb HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
        assert_eq!(status(b"GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
        assert_eq!(status(b"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
        assert_eq!(status(b"GET /a\x1bb HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    }

    #[test]
    fn host_rules() {
        assert_eq!(err(b"GET / HTTP/1.1\r\n\r\n"), RequestError::MissingHost);
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"),
            RequestError::DuplicateHost
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n"),
            RequestError::DuplicateHost
        );
        // Host is required even when the target carries the authority.
        assert_eq!(
            err(b"GET http://h/ HTTP/1.1\r\n\r\n"),
            RequestError::MissingHost
        );
        for bad in [
            &b"a b"[..],
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
        ] {
            let raw = [&b"GET / HTTP/1.1\r\nHost: "[..], bad, b"\r\n\r\n"].concat();
            assert_eq!(err(&raw), RequestError::InvalidHost, "{bad:?}");
        }
        for good in [
            &b"a"[..],
            b"a.b-c_d~e",
            b"1.2.3.4:80",
            b"[::1]",
            b"[::1]:443",
            b"a:",
            b"a%41",
        ] {
            let raw = [&b"GET / HTTP/1.1\r\nHost: "[..], good, b"\r\n\r\n"].concat();
            assert_eq!(complete(&raw).host(&raw), Some(good), "{good:?}");
        }
        // Empty Host is what a client sends when the target has no authority.
        let raw = b"GET / HTTP/1.1\r\nHost:\r\n\r\n";
        assert_eq!(complete(raw).host(raw), Some(&b""[..]));
        // HTTP/1.0 may omit it.
        let raw = b"GET / HTTP/1.0\r\n\r\n";
        assert_eq!(complete(raw).host(raw), None);
    }

    #[test]
    fn versions() {
        assert_eq!(complete(b"GET / HTTP/1.0\r\n\r\n").version, Version::Http10);
        for v in [
            &b"HTTP/2.0"[..],
            b"HTTP/1.2",
            b"HTTP/3",
            b"HTTP/2",
            b"HTTP/0.9",
            b"HTTP/9.9",
        ] {
            let raw = [&b"GET / "[..], v, b"\r\nHost: h\r\n\r\n"].concat();
            assert_eq!(err(&raw), RequestError::VersionNotSupported, "{v:?}");
            assert_eq!(status(&raw), 505);
        }
        for v in [
            &b"HTTP/x"[..],
            b"HTTP/1.x",
            b"http/1.1",
            b"HTTP/10.0",
            b"HTTP/1.1.1",
            b"HTTP/1",
            b"HTTP1.1",
            b"FOO",
            b"",
        ] {
            let raw = [&b"GET / "[..], v, b"\r\nHost: h\r\n\r\n"].concat();
            assert_eq!(status(&raw), 400, "{v:?}");
        }
        // An unsupported version still arriving is not judged early.
        assert_eq!(parse(b"GET / HTTP/2").map(|r| r.0), Ok(Parsed::Partial));
        assert_eq!(parse(b"GET / HTTP/2.0").map(|r| r.0), Ok(Parsed::Partial));
        assert_eq!(status(b"GET / HTTP/2.0x"), 400);
        assert_eq!(status(b"GET / HTTX"), 400);
    }

    #[test]
    fn head_too_large_is_431_even_while_partial() {
        let limits = Limits {
            max_head_bytes: 64,
            ..Limits::default()
        };
        let mut head = RequestHead::new();
        let mut raw = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
        raw.resize(63, b'a');
        assert_eq!(parse_request(&raw, &limits, &mut head), Ok(Parsed::Partial));
        raw.push(b'a');
        assert_eq!(
            parse_request(&raw, &limits, &mut head),
            Err(RequestError::HeadTooLarge)
        );
        raw.resize(10_000, b'a');
        assert_eq!(
            parse_request(&raw, &limits, &mut head),
            Err(RequestError::HeadTooLarge)
        );
        // A complete head of exactly the limit is fine; one byte over is not.
        let mut exact = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
        exact.resize(60, b'a');
        exact.extend_from_slice(b"\r\n\r\n");
        assert_eq!(
            parse_request(&exact, &limits, &mut head),
            Ok(Parsed::Complete)
        );
        assert_eq!(head.head_len, 64);
        exact.insert(30, b'a');
        assert_eq!(
            parse_request(&exact, &limits, &mut head),
            Err(RequestError::HeadTooLarge)
        );
        assert_eq!(RequestError::HeadTooLarge.status(), 431);
    }

    #[test]
    fn too_many_headers_is_431() {
        let limits = Limits {
            max_headers: 3,
            ..Limits::default()
        };
        let mut head = RequestHead::new();
        let ok = b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n";
        assert_eq!(parse_request(ok, &limits, &mut head), Ok(Parsed::Complete));
        let bad = b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
        assert_eq!(
            parse_request(bad, &limits, &mut head),
            Err(RequestError::TooManyHeaders)
        );
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
        let limits = Limits {
            max_uri_bytes: 100,
            ..Limits::default()
        };
        let mut head = RequestHead::new();
        let mut raw = b"GET /".to_vec();
        raw.resize(5 + 99, b'a');
        let mut full = raw.clone();
        full.extend_from_slice(b" HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(
            parse_request(&full, &limits, &mut head),
            Ok(Parsed::Complete)
        );
        raw.push(b'a');
        let mut full = raw.clone();
        full.extend_from_slice(b" HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(
            parse_request(&full, &limits, &mut head),
            Err(RequestError::UriTooLong)
        );
        // Unfinished request line: still Partial within the slack, 414 beyond it.
        assert_eq!(parse_request(&raw, &limits, &mut head), Ok(Parsed::Partial));
        raw.resize(5 + 100 + REQUEST_LINE_SLACK, b'a');
        assert_eq!(
            parse_request(&raw, &limits, &mut head),
            Err(RequestError::UriTooLong)
        );
        // Also when the unfinished line reaches the head limit first.
        let mut long = b"GET /".to_vec();
        long.resize(70_000, b'a');
        assert_eq!(err(&long), RequestError::UriTooLong);
        assert_eq!(RequestError::UriTooLong.status(), 414);
    }

    #[test]
    fn keep_alive_rules() {
        let ka = |raw: &[u8]| complete(raw).keep_alive;
        assert!(ka(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"));
        assert!(!ka(
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        ));
        assert!(!ka(
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n"
        ));
        assert!(!ka(
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: te\r\nConnection: close\r\n\r\n"
        ));
        assert!(ka(
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n"
        ));
        assert!(!ka(b"GET / HTTP/1.0\r\n\r\n"));
        assert!(ka(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
        assert!(ka(b"GET / HTTP/1.0\r\nConnection: foo ,keep-alive\r\n\r\n"));
        assert!(!ka(
            b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"
        ));
    }

    #[test]
    fn expect_continue_rules() {
        let ec = |raw: &[u8]| complete(raw).expect_continue;
        assert!(ec(
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n"
        ));
        assert!(ec(b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n"));
        assert!(!ec(
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!ec(
            b"GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n"
        ));
        assert!(!ec(
            b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"
        ));
        assert!(!ec(
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\nContent-Length: 3\r\n\r\n"
        ));
    }

    #[test]
    fn spans_stay_in_bounds_with_a_foreign_buffer() {
        let raw = b"GET /abc?d HTTP/1.1\r\nHost: example\r\n\r\n";
        let h = complete(raw);
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
}
