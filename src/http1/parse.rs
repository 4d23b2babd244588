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

use std::mem::MaybeUninit;

use super::authority::split_authority;
use super::framing::{FieldRole, Framing};
use super::span::offset_of;

pub use super::framing::BodyKind;
pub use super::request_error::RequestError;
pub use super::span::{HeaderLines, HeaderSpan, Span};
pub use from_fields::RequestHeadBuilder;

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

    /// Whether a request may be served from TLS early data (RFC 8470),
    /// where an attacker may replay it: the safe methods that only read.
    pub fn serves_from_early_data(self) -> bool {
        matches!(self, Method::Get | Method::Head | Method::Options)
    }
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
    known_host: HostMemo,
}

/// The [`KnownHost`] of a head that HTTP/1 text is parsed into, boxed so the
/// head stays small to move; heads built from HTTP/2 and HTTP/3 fields check
/// each Host in full. A clone starts without it: it is only a memo.
#[derive(Debug, Default)]
struct HostMemo(Option<Box<KnownHost>>);

impl Clone for HostMemo {
    fn clone(&self) -> Self {
        HostMemo(None)
    }
}

impl HostMemo {
    /// The length of the host in `value` (without the port), or `None` when
    /// `value` is not a valid `host[:port]`.
    #[inline]
    fn host_len(&mut self, value: &[u8]) -> Option<usize> {
        match self.0.as_deref_mut() {
            Some(known) => known.host_len(value),
            None => split_authority(value, false).map(|(host_len, _)| host_len),
        }
    }
}

/// The last `Host` value that passed the authority grammar, kept across the
/// heads parsed into one [`RequestHead`]: a keep-alive client names the same
/// host on every request, whose check then costs a comparison. Values longer
/// than the slot are checked each time.
#[derive(Debug)]
struct KnownHost {
    value: [u8; KNOWN_HOST_MAX],
    /// Bytes of `value` in use; 0 when nothing is known.
    len: u8,
    /// The host's length in `value`, without the port.
    host_len: u8,
}

/// The longest `Host` value [`KnownHost`] keeps.
const KNOWN_HOST_MAX: usize = 64;

impl Default for KnownHost {
    fn default() -> Self {
        KnownHost {
            value: [0; KNOWN_HOST_MAX],
            len: 0,
            host_len: 0,
        }
    }
}

impl KnownHost {
    /// The length of the host in `value` (without the port), or `None` when
    /// `value` is not a valid `host[:port]`.
    #[inline]
    fn host_len(&mut self, value: &[u8]) -> Option<usize> {
        let known = self.value.get(..usize::from(self.len)).unwrap_or_default();
        if self.len != 0 && same_bytes(known, value) {
            return Some(usize::from(self.host_len));
        }
        let (host_len, _) = split_authority(value, false)?;
        if let (Some(slot), Ok(len), Ok(host)) = (
            self.value.get_mut(..value.len()),
            u8::try_from(value.len()),
            u8::try_from(host_len),
        ) {
            slot.copy_from_slice(value);
            self.len = len;
            self.host_len = host;
        }
        Some(host_len)
    }
}

/// Whether `a` and `b` hold the same bytes, compared a word at a time in
/// place: a Host value is a few words long, less than a call to `memcmp`
/// costs to set up. From eight bytes on, the words overlap at the end so
/// every byte is covered.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a.iter().zip(b).all(|(x, y)| x == y);
    }
    let word = |s: &[u8], at: usize| {
        s.get(at..at + 8)
            .and_then(|w| <[u8; 8]>::try_from(w).ok())
            .map(u64::from_ne_bytes)
    };
    let mut at = 0;
    while at + 8 < n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    word(a, n - 8) == word(b, n - 8)
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
            known_host: HostMemo::default(),
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

    /// Back to an empty head, in place: the header vector keeps its
    /// capacity and the known host stays known. Every field is named, so a
    /// new one cannot be left out.
    fn reset(&mut self) {
        let RequestHead {
            method,
            version,
            head_len,
            body,
            keep_alive,
            expect_continue,
            target_form,
            method_span,
            target,
            path,
            query,
            host,
            host_name,
            headers,
            scan,
            known_host: _,
        } = self;
        *method = Method::Get;
        *version = Version::Http11;
        *head_len = 0;
        *body = BodyKind::None;
        *keep_alive = false;
        *expect_continue = false;
        *target_form = TargetForm::Origin;
        *method_span = Span::default();
        *target = Span::default();
        *path = Span::default();
        *query = None;
        *host = None;
        *host_name = None;
        headers.clear();
        *scan = None;
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
}

impl HeaderLines for RequestHead {
    fn header_spans(&self) -> &[HeaderSpan] {
        &self.headers
    }
}

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
    if head.known_host.0.is_none() {
        // Once per head: a connection's heads come from the worker's pool.
        head.known_host.0 = Some(Box::default());
    }
    // Only the first max_head_bytes are ever tokenized, which bounds the work
    // per call; spans are u32, so the window is capped there as well.
    let window_len = buf.len().min(limits.max_head_bytes).min(u32::MAX as usize);
    let window = buf.get(..window_len).unwrap_or(buf);

    let skip = match skip_empty_lines(window)? {
        Some(skip) => skip,
        None => return incomplete(buf, &[], false, limits),
    };
    let rest = window.get(skip..).unwrap_or(&[]);
    let slot_count = limits.max_headers.min(MAX_HEADERS_CAP);

    // A whole head of the usual shape is tokenized in one pass; every other
    // head (and a head arriving in pieces) goes through httparse below.
    if hint.is_none() {
        if let Some(tokens) = simple_head::tokenize(rest, skip, slot_count, head) {
            let target = TargetBytes::Scanned {
                question: tokens.question,
            };
            judge_head(head, buf, limits, target)?;
            return Ok(Parsed::Complete);
        }
        head.reset();
    }

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
    let target_at = offset_of(rest, target) + skip;
    check_target(head, target, target_at, limits, TargetBytes::Unchecked)?;

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
        judge_field(head, &mut framing, header, h.name.as_bytes(), h.value)?;
    }
    conclude(head, &framing)?;
    Ok(Parsed::Complete)
}

/// What is known of a target's bytes before it is judged.
#[derive(Clone, Copy)]
enum TargetBytes {
    /// Nothing: every rule is checked.
    Unchecked,
    /// Visible ASCII without `#`, as the one-pass tokenizer takes it, with
    /// its first `?` at this offset in the buffer.
    Scanned { question: Option<usize> },
}

/// Judges a tokenized head (spans into `buf`) as a whole: the target, then
/// each field line's framing and host, then the rules over all of them.
fn judge_head(
    head: &mut RequestHead,
    buf: &[u8],
    limits: &Limits,
    bytes: TargetBytes,
) -> Result<(), RequestError> {
    let target = head.target;
    check_target(head, target.get(buf), target.start(), limits, bytes)?;
    let mut framing = Framing::default();
    for i in 0..head.headers.len() {
        let Some(&header) = head.headers.get(i) else {
            break;
        };
        let (name, value) = (header.name.get(buf), header.value.get(buf));
        judge_field(head, &mut framing, header, name, value)?;
    }
    conclude(head, &framing)
}

/// The target's length limit (414) and grammar against the method; `at` is
/// its offset in the buffer. An origin-form target whose bytes the tokenizer
/// already checked takes its path and query from where it found the `?`.
fn check_target(
    head: &mut RequestHead,
    target: &[u8],
    at: usize,
    limits: &Limits,
    bytes: TargetBytes,
) -> Result<(), RequestError> {
    if target.len() > limits.max_uri_bytes {
        return Err(RequestError::UriTooLong);
    }
    let end = at + target.len();
    head.target = Span::new(at, end);
    if let TargetBytes::Scanned { question } = bytes {
        if target.first() == Some(&b'/') && head.method != Method::Connect {
            head.target_form = TargetForm::Origin;
            set_path_and_query(head, at, question, end);
            return Ok(());
        }
    }
    parse_target(head, target, at)
}

/// Path and query of a target whose path starts at `from` and which ends at
/// `end`, `question` being where its first `?` is (offsets in the buffer).
fn set_path_and_query(head: &mut RequestHead, from: usize, question: Option<usize>, end: usize) {
    match question {
        Some(q) => {
            head.path = Span::new(from, q);
            head.query = Some(Span::new(q + 1, end));
        }
        None => head.path = Span::new(from, end),
    }
}

/// Records what one field line (already stored in `head`) says about framing
/// and the host; `name` and `value` are the bytes `header` covers.
fn judge_field(
    head: &mut RequestHead,
    framing: &mut Framing,
    header: HeaderSpan,
    name: &[u8],
    value: &[u8],
) -> Result<(), RequestError> {
    match framing.field(name, value)? {
        FieldRole::Host => {
            let host_len = head
                .known_host
                .host_len(value)
                .ok_or(RequestError::InvalidHost)?;
            if head.host.is_none() {
                let at = header.value.start();
                head.host = Some(header.value);
                head.host_name = Some(Span::new(at, at + host_len));
            }
        }
        FieldRole::Other => {}
    }
    Ok(())
}

/// The rules over all field lines together: Host required in 1.1, body
/// framing, persistence and `100-continue`.
fn conclude(head: &mut RequestHead, framing: &Framing) -> Result<(), RequestError> {
    if framing.host_lines == 0 && head.version == Version::Http11 {
        return Err(RequestError::MissingHost);
    }
    head.body = framing.body_kind(head.version == Version::Http10)?;
    head.keep_alive = match head.version {
        Version::Http11 => !framing.close,
        Version::Http10 => framing.keep_alive && !framing.close,
    };
    head.expect_continue = framing.expect_continue
        && head.version == Version::Http11
        && matches!(head.body, BodyKind::Chunked | BodyKind::Length(1..));
    Ok(())
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
        let question = rest.iter().position(|&b| b == b'?').map(|q| at + from + q);
        set_path_and_query(head, at + from, question, at + target.len());
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

mod from_fields;
mod simple_head;
#[cfg(test)]
mod tests;
