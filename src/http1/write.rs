//! Response encoding: status line and framing headers, canned error
//! responses, chunk encoding, and the per-thread cached `Date` value.
//!
//! Everything appends to the caller's `Vec<u8>` with `extend_from_slice`
//! only: no `format!`, no intermediate strings, so writing a head costs a few
//! copies into a buffer that the connection reuses.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::http::date::civil_from_days;

/// Interim response sent before reading a body the client is waiting to send.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Ends a chunked body (zero-size chunk, no trailers).
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Length of an IMF-fixdate such as `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

/// Latest instant an IMF-fixdate can show (9999-12-31T23:59:59Z); later clocks are clamped.
const MAX_DATE_SECS: u64 = 253_402_300_799;

/// How the response body is delimited, which decides the length header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// `Content-Length: n` (also for HEAD, giving the length a GET would have).
    Length(u64),
    /// `Transfer-Encoding: chunked`; only for HTTP/1.1 clients.
    Chunked,
    /// No length header: 1xx, 204 and 304 responses, which never have a body.
    None,
}

/// Which `Connection` header, if any, the head carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionHeader {
    /// Nothing: HTTP/1.1 persistence is the default.
    Omit,
    /// `Connection: close`: we will close after this response.
    Close,
    /// `Connection: keep-alive`: confirms persistence to an HTTP/1.0 client that asked for it.
    KeepAlive,
    /// `Connection: upgrade`: a 101 switching the connection to another protocol.
    Upgrade,
}

impl ConnectionHeader {
    /// The header for an answer to a request of `version`, once keep-alive is
    /// decided: `close`, `keep-alive` for HTTP/1.0 (whose default is close), or
    /// nothing for HTTP/1.1.
    pub fn choose(keep_alive: bool, version: crate::http1::parse::Version) -> Self {
        if !keep_alive {
            ConnectionHeader::Close
        } else if version == crate::http1::parse::Version::Http10 {
            ConnectionHeader::KeepAlive
        } else {
            ConnectionHeader::Omit
        }
    }
}

/// Per-thread cache of the `Date` header value, reformatted only when the
/// second changes (one `clock_gettime` per [`DateCache::get`], none per
/// [`DateCache::get_at`] within the second, no formatting in between).
#[derive(Clone, Debug)]
pub struct DateCache {
    secs: u64,
    value: [u8; DATE_LEN],
    /// Monotonic instant by which the wall clock's second has surely changed.
    until: Option<tokio::time::Instant>,
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache {
            // Not a reachable second (it is clamped), so the first get formats.
            secs: u64::MAX,
            value: [b' '; DATE_LEN],
            until: None,
        }
    }
}

impl DateCache {
    /// A cache that formats on first use.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current time as an IMF-fixdate (29 bytes).
    pub fn get(&mut self) -> &[u8] {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.set(now);
        &self.value
    }

    /// The time at the monotonic instant `now` (a clock read already made, no
    /// later than the present) as an IMF-fixdate: the wall clock is read only
    /// when `now` may be in a new second, about once a second.
    #[inline]
    pub fn get_at(&mut self, now: tokio::time::Instant) -> &[u8] {
        if self.until.is_some_and(|until| now < until) {
            return &self.value;
        }
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.set(wall);
        // `now` is no later than the wall clock's reading, so this is no later
        // than the instant its second ends: never a stale second.
        self.until =
            Some(now + Duration::from_nanos(u64::from(1_000_000_000 - wall.subsec_nanos())));
        &self.value
    }

    fn set(&mut self, wall: Duration) {
        let secs = wall.as_secs().min(MAX_DATE_SECS);
        if secs != self.secs {
            self.secs = secs;
            self.value = format_http_date(secs);
        }
    }
}

/// Formats seconds since the Unix epoch as an IMF-fixdate (RFC 9110 §5.6.7),
/// the one `Date` / `Last-Modified` form senders must use.
pub fn format_http_date(secs: u64) -> [u8; DATE_LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let secs = secs.min(MAX_DATE_SECS);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    let two = |n: u64| [b'0' + (n / 10 % 10) as u8, b'0' + (n % 10) as u8];
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    out[5..7].copy_from_slice(&two(day));
    out[8..11].copy_from_slice(MONTHS[month.saturating_sub(1).min(11) as usize]);
    out[12..14].copy_from_slice(&two(year / 100));
    out[14..16].copy_from_slice(&two(year % 100));
    out[17..19].copy_from_slice(&two(rem / 3600));
    out[20..22].copy_from_slice(&two(rem / 60 % 60));
    out[23..25].copy_from_slice(&two(rem % 60));
    out
}

pub use crate::http::status::reason_phrase;

/// Appends a response head: status line, `Server`, `Date`, the length header,
/// the `Connection` field `connection` asks for, the extra fields, and the blank
/// line. Statuses outside 100..=999 are written as 500. Extra field names and
/// values must already be valid (no CR or LF); they are not checked here.
pub fn write_head(
    out: &mut Vec<u8>,
    status: u16,
    date: &[u8],
    framing: BodyFraming,
    connection: ConnectionHeader,
    extra: &[(&str, &[u8])],
) {
    let reason = reason_phrase(sendable_status(status));
    out.reserve(
        128 + reason.len()
            + extra
                .iter()
                .map(|(n, v)| n.len() + v.len() + 4)
                .sum::<usize>(),
    );
    write_head_fields(
        out,
        status,
        date,
        framing,
        connection,
        extra.iter().copied(),
    );
}

/// `status` if it can stand in a status line (three digits), else 500.
fn sendable_status(status: u16) -> u16 {
    if (100..=999).contains(&status) {
        status
    } else {
        500
    }
}

/// Appends a complete error response (`400 Bad Request\n` as text/plain) that
/// closes the connection: the answer to any parse or framing error.
pub fn write_error(out: &mut Vec<u8>, status: u16, date: &[u8]) {
    let status = sendable_status(status);
    // 1xx, 204 and 304 cannot carry a body; write a bare head rather than a broken message.
    if status < 200 || status == 204 || status == 304 {
        write_head(
            out,
            status,
            date,
            BodyFraming::None,
            ConnectionHeader::Close,
            &[],
        );
        return;
    }
    write_status_body(out, status, date, ConnectionHeader::Close, [], false);
}

/// Appends an interim (1xx) head: the status line and `fields`, without the
/// `Server` and `Date` of a final head (RFC 9110 §15.2: an interim answer is
/// advice, not the response). The caller checks that the status is 1xx.
pub fn write_interim(out: &mut Vec<u8>, status: u16, fields: &[(&str, &[u8])]) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(&three_digits(status));
    out.push(b' ');
    out.extend_from_slice(reason_phrase(status).as_bytes());
    out.extend_from_slice(b"\r\n");
    end_with_fields(out, fields.iter().copied());
}

/// Appends one chunk of a chunked body. Empty `data` writes nothing, since a
/// zero-size chunk would end the body; use [`LAST_CHUNK`] for that.
pub fn write_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    out.reserve(data.len() + 20);
    write_chunk_size(out, data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends only a chunk-size line (`len` in hex, CRLF), for callers that send
/// the chunk data from another buffer and then the closing CRLF themselves.
pub fn write_chunk_size(out: &mut Vec<u8>, len: usize) {
    let mut hex = [0u8; 16];
    let mut n = len as u64;
    let mut at = hex.len();
    while n > 0 && at > 0 {
        at -= 1;
        hex[at] = b"0123456789abcdef"[(n & 0xf) as usize];
        n >>= 4;
    }
    if at == hex.len() {
        at -= 1;
        hex[at] = b'0';
    }
    out.extend_from_slice(hex.get(at..).unwrap_or(&[]));
    out.extend_from_slice(b"\r\n");
}

/// Appends `n` in decimal without going through `fmt`.
pub fn write_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 || at == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(at..).unwrap_or(&[]));
}

fn three_digits(status: u16) -> [u8; 3] {
    [
        b'0' + (status / 100 % 10) as u8,
        b'0' + (status / 10 % 10) as u8,
        b'0' + (status % 10) as u8,
    ]
}

/// A fixed answer's head up to its last field, encoded once when the
/// configuration is built: the status line, `Server`, then after the `Date`
/// value, `Content-Length` and the configured field lines. An answer copies it
/// with the date in one reservation, where [`write_head_start`] and the
/// field lines would take a copy per piece and a decimal conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedHead {
    status: u16,
    length: u64,
    /// The head with a placeholder `Date` value at `date_at`.
    text: Box<[u8]>,
    date_at: usize,
}

impl PreparedHead {
    /// The head [`write_head_start`] writes for `status`, a body of `length`
    /// bytes and no `Connection` field, followed by `lines` (`Name: value`
    /// lines, validated by the caller).
    pub fn new(status: u16, length: u64, lines: &[u8]) -> Self {
        const PLACEHOLDER: [u8; DATE_LEN] = [b'-'; DATE_LEN];
        let mut text = Vec::new();
        write_head_start(
            &mut text,
            status,
            &PLACEHOLDER,
            BodyFraming::Length(length),
            ConnectionHeader::Omit,
        );
        let date_at = text
            .windows(DATE_LEN)
            .position(|w| w == PLACEHOLDER)
            .expect("the head holds its date");
        text.extend_from_slice(lines);
        PreparedHead {
            status,
            length,
            text: text.into_boxed_slice(),
            date_at,
        }
    }

    /// Whether this is the head of an answer with `status`, `framing` and
    /// `connection`.
    #[inline]
    pub fn fits(&self, status: u16, framing: BodyFraming, connection: ConnectionHeader) -> bool {
        self.status == status
            && framing == BodyFraming::Length(self.length)
            && connection == ConnectionHeader::Omit
    }

    /// Appends the head with `date`, reserving room for `more` bytes after it
    /// (the rest of the head and a small body).
    #[inline]
    pub fn write(&self, out: &mut Vec<u8>, date: &[u8], more: usize) {
        let (before, after) = self.text.split_at(self.date_at);
        let after = after.get(DATE_LEN..).unwrap_or_default();
        out.reserve(self.text.len() + more);
        out.extend_from_slice(before);
        out.extend_from_slice(date);
        out.extend_from_slice(after);
    }
}

/// The head up to its extra fields: status line, `Server`, `Date`, framing and
/// `Connection`. Callers append fields and the blank line (the proxy appends the
/// upstream's fields).
pub fn write_head_start(
    out: &mut Vec<u8>,
    status: u16,
    date: &[u8],
    framing: BodyFraming,
    connection: ConnectionHeader,
) {
    let status = sendable_status(status);
    if status == 200 {
        // Most heads: one copy of the fixed start.
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: pier\r\nDate: ");
    } else {
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(&three_digits(status));
        out.push(b' ');
        out.extend_from_slice(reason_phrase(status).as_bytes());
        out.extend_from_slice(b"\r\nServer: pier\r\nDate: ");
    }
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    match framing {
        BodyFraming::Length(n) => {
            out.extend_from_slice(b"Content-Length: ");
            write_decimal(out, n);
            out.extend_from_slice(b"\r\n");
        }
        BodyFraming::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        BodyFraming::None => {}
    }
    match connection {
        ConnectionHeader::Omit => {}
        ConnectionHeader::Close => out.extend_from_slice(b"Connection: close\r\n"),
        ConnectionHeader::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        ConnectionHeader::Upgrade => out.extend_from_slice(b"Connection: upgrade\r\n"),
    }
}

/// [`write_head`] taking the extra fields from any iterator, so handlers can
/// hand over fixed-size header sets without collecting them.
pub fn write_head_fields<'n, 'v>(
    out: &mut Vec<u8>,
    status: u16,
    date: &[u8],
    framing: BodyFraming,
    connection: ConnectionHeader,
    fields: impl IntoIterator<Item = (&'n str, &'v [u8])>,
) {
    write_head_start(out, status, date, framing, connection);
    end_with_fields(out, fields);
}

/// Appends `fields` as `Name: value` lines, then the blank line that ends a head.
fn end_with_fields<'n, 'v>(
    out: &mut Vec<u8>,
    fields: impl IntoIterator<Item = (&'n str, &'v [u8])>,
) {
    for (name, value) in fields {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A head whose extra fields are already encoded as `Name: value\r\n` lines
/// (fixed responses encode theirs once, at start).
pub fn write_head_block(
    out: &mut Vec<u8>,
    status: u16,
    date: &[u8],
    framing: BodyFraming,
    connection: ConnectionHeader,
    block: &[u8],
) {
    write_head_start(out, status, date, framing, connection);
    out.extend_from_slice(block);
    out.extend_from_slice(b"\r\n");
}

/// A complete response whose body is the status as text (`404 Not Found\n`),
/// for handler answers that keep the connection open. HEAD gets the head only.
pub fn write_status_body<'n, 'v>(
    out: &mut Vec<u8>,
    status: u16,
    date: &[u8],
    connection: ConnectionHeader,
    fields: impl IntoIterator<Item = (&'n str, &'v [u8])>,
    is_head: bool,
) {
    let reason = reason_phrase(status).as_bytes();
    let body_len = 3 + 1 + reason.len() + 1;
    let text: [(&'n str, &'v [u8]); 1] = [("Content-Type", b"text/plain; charset=utf-8")];
    write_head_fields(
        out,
        status,
        date,
        BodyFraming::Length(body_len as u64),
        connection,
        text.into_iter().chain(fields),
    );
    if !is_head {
        out.extend_from_slice(&three_digits(status));
        out.push(b' ');
        out.extend_from_slice(reason);
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prepared_head_is_the_head_written_piece_by_piece() {
        let lines = b"Content-Type: text/plain\r\nX-One: 1\r\n";
        let date = b"Sun, 06 Nov 1994 08:49:37 GMT";
        for (status, length) in [(200, 13), (404, 0), (503, 1_234_567)] {
            let mut expected = Vec::new();
            write_head_start(
                &mut expected,
                status,
                date,
                BodyFraming::Length(length),
                ConnectionHeader::Omit,
            );
            expected.extend_from_slice(lines);
            let prepared = PreparedHead::new(status, length, lines);
            let mut out = b"earlier answer".to_vec();
            prepared.write(&mut out, date, 0);
            assert_eq!(
                String::from_utf8_lossy(&out[14..]),
                String::from_utf8_lossy(&expected)
            );
            assert!(prepared.fits(status, BodyFraming::Length(length), ConnectionHeader::Omit));
            assert!(!prepared.fits(
                status + 1,
                BodyFraming::Length(length),
                ConnectionHeader::Omit
            ));
            assert!(!prepared.fits(
                status,
                BodyFraming::Length(length + 1),
                ConnectionHeader::Omit
            ));
            assert!(!prepared.fits(status, BodyFraming::Length(length), ConnectionHeader::Close));
            assert!(!prepared.fits(status, BodyFraming::Chunked, ConnectionHeader::Omit));
        }
    }

    #[test]
    fn an_interim_head_is_its_status_line_and_fields_alone() {
        let mut out = Vec::new();
        write_interim(
            &mut out,
            103,
            &[("Link", b"</style.css>; rel=preload"), ("X-A", b"1")],
        );
        assert_eq!(
            out,
            b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nX-A: 1\r\n\r\n"
        );
        out.clear();
        write_interim(&mut out, 100, &[]);
        assert_eq!(out, CONTINUE);
    }

    #[test]
    fn a_date_at_an_instant_is_the_wall_clock_second_and_kept_until_it_ends() {
        let wall = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs()
        };
        let mut cache = DateCache::new();
        let now = tokio::time::Instant::now();
        let before = wall();
        let got = String::from_utf8(cache.get_at(now).to_vec()).unwrap();
        let after = wall();
        assert!(got == date(before) || got == date(after), "{got}");
        let until = cache.until.expect("the end of the second is kept");
        assert!(until > now && until <= now + Duration::from_secs(1));
        // Within the second the cache answers; past it, the wall clock is read.
        cache.value = *b"Thu, 01 Jan 1970 00:00:00 GMT";
        assert_eq!(cache.get_at(now), b"Thu, 01 Jan 1970 00:00:00 GMT");
        cache.secs = 0;
        let later = String::from_utf8(cache.get_at(until).to_vec()).unwrap();
        assert!(
            later == date(wall()) || later == date(wall() - 1),
            "{later}"
        );
    }

    fn date(secs: u64) -> String {
        String::from_utf8(format_http_date(secs).to_vec()).unwrap()
    }

    #[test]
    fn imf_fixdate_known_instants() {
        for (secs, want) in [
            (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
            (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
            // Leap days, including the century rule (2000 is a leap year).
            (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
            (1_709_164_799, "Wed, 28 Feb 2024 23:59:59 GMT"),
            (1_709_164_800, "Thu, 29 Feb 2024 00:00:00 GMT"),
            (1_709_251_200, "Fri, 01 Mar 2024 00:00:00 GMT"),
            (1_735_689_599, "Tue, 31 Dec 2024 23:59:59 GMT"),
            // Past the 32-bit rollover.
            (2_147_483_647, "Tue, 19 Jan 2038 03:14:07 GMT"),
            (2_147_483_648, "Tue, 19 Jan 2038 03:14:08 GMT"),
            (4_102_444_800, "Fri, 01 Jan 2100 00:00:00 GMT"),
            (4_107_542_400, "Mon, 01 Mar 2100 00:00:00 GMT"),
            // Clamped at the last representable second instead of overflowing.
            (MAX_DATE_SECS, "Fri, 31 Dec 9999 23:59:59 GMT"),
            (u64::MAX, "Fri, 31 Dec 9999 23:59:59 GMT"),
        ] {
            assert_eq!(date(secs), want, "{secs}");
        }
    }

    #[test]
    fn date_cache_matches_formatter() {
        let mut cache = DateCache::new();
        let v = cache.get().to_vec();
        assert_eq!(v.len(), DATE_LEN);
        assert!(v.ends_with(b" GMT"));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let close = [format_http_date(now - 1), format_http_date(now)];
        assert!(close.iter().any(|d| d[..] == v[..]));
    }

    #[test]
    fn head_with_length() {
        let mut out = Vec::new();
        write_head(
            &mut out,
            200,
            b"Thu, 01 Jan 1970 00:00:00 GMT",
            BodyFraming::Length(1234),
            ConnectionHeader::Omit,
            &[("Content-Type", b"text/html")],
        );
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nServer: pier\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n\
              Content-Length: 1234\r\nContent-Type: text/html\r\n\r\n"
        );
    }

    #[test]
    fn fixed_200_start_matches_the_general_status_line() {
        for status in [200u16, 201, 204, 404] {
            let mut out = Vec::new();
            write_head_start(
                &mut out,
                status,
                b"D",
                BodyFraming::None,
                ConnectionHeader::Omit,
            );
            let mut want = b"HTTP/1.1 ".to_vec();
            want.extend_from_slice(&three_digits(status));
            want.push(b' ');
            want.extend_from_slice(reason_phrase(status).as_bytes());
            want.extend_from_slice(b"\r\nServer: pier\r\nDate: D\r\n");
            assert_eq!(
                String::from_utf8(out).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
    }

    #[test]
    fn head_chunked_close_and_none() {
        let mut out = Vec::new();
        write_head(
            &mut out,
            502,
            b"D",
            BodyFraming::Chunked,
            ConnectionHeader::Close,
            &[],
        );
        assert_eq!(
            out,
            b"HTTP/1.1 502 Bad Gateway\r\nServer: pier\r\nDate: D\r\n\
              Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        out.clear();
        write_head(
            &mut out,
            304,
            b"D",
            BodyFraming::None,
            ConnectionHeader::Omit,
            &[],
        );
        assert_eq!(
            out,
            b"HTTP/1.1 304 Not Modified\r\nServer: pier\r\nDate: D\r\n\r\n"
        );
        out.clear();
        write_head(
            &mut out,
            200,
            b"D",
            BodyFraming::Length(0),
            ConnectionHeader::KeepAlive,
            &[],
        );
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nServer: pier\r\nDate: D\r\nContent-Length: 0\r\n\
              Connection: keep-alive\r\n\r\n"
        );
        out.clear();
        write_head(
            &mut out,
            799,
            b"D",
            BodyFraming::None,
            ConnectionHeader::Omit,
            &[],
        );
        assert!(out.starts_with(b"HTTP/1.1 799 \r\n"));
        out.clear();
        write_head(
            &mut out,
            42,
            b"D",
            BodyFraming::None,
            ConnectionHeader::Omit,
            &[],
        );
        assert!(out.starts_with(b"HTTP/1.1 500 Internal Server Error\r\n"));
    }

    #[test]
    fn error_response_is_complete_and_closes() {
        let mut out = Vec::new();
        write_error(&mut out, 400, b"D");
        assert_eq!(
            out,
            b"HTTP/1.1 400 Bad Request\r\nServer: pier\r\nDate: D\r\nContent-Length: 16\r\n\
              Connection: close\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n400 Bad Request\n"
        );
        out.clear();
        write_error(&mut out, 431, b"D");
        assert!(out.ends_with(b"\r\n\r\n431 Request Header Fields Too Large\n"));
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Content-Length: 36\r\n"));
    }

    #[test]
    fn decimal_and_chunks() {
        for n in [0u64, 7, 10, 999, 1_000_000, u64::MAX] {
            let mut out = Vec::new();
            write_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
        let mut out = Vec::new();
        write_chunk(&mut out, b"");
        assert!(out.is_empty());
        write_chunk(&mut out, b"hello");
        write_chunk(&mut out, &[b'x'; 300]);
        out.extend_from_slice(LAST_CHUNK);
        let mut expect = b"5\r\nhello\r\n12c\r\n".to_vec();
        expect.extend_from_slice(&[b'x'; 300]);
        expect.extend_from_slice(b"\r\n0\r\n\r\n");
        assert_eq!(out, expect);
    }

    #[test]
    fn chunks_round_trip_through_decoder() {
        use super::super::body::BodyDecoder;
        use super::super::parse::BodyKind;
        let mut out = Vec::new();
        let mut expect = Vec::new();
        for i in 0..40usize {
            let piece = vec![b'a' + (i % 26) as u8; i * 7];
            write_chunk(&mut out, &piece);
            expect.extend_from_slice(&piece);
        }
        out.extend_from_slice(LAST_CHUNK);
        let mut d = BodyDecoder::new(BodyKind::Chunked);
        let mut got = Vec::new();
        let mut pos = 0;
        loop {
            let r = d.decode(&out[pos..]).unwrap();
            got.extend_from_slice(r.data);
            pos += r.consumed;
            if r.done {
                break;
            }
        }
        assert_eq!(pos, out.len());
        assert_eq!(got, expect);
    }

    #[test]
    fn reason_phrases() {
        assert_eq!(reason_phrase(200), "OK");
        assert_eq!(reason_phrase(505), "HTTP Version Not Supported");
        assert_eq!(reason_phrase(999), "");
    }
}
