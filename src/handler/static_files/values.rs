//! Header values of static replies, formatted into fixed-size inline buffers
//! so a reply costs no allocation: entity tags, HTTP dates, content ranges.

use std::fmt;
use std::time::{Duration, UNIX_EPOCH};

use crate::http::content_coding::Coding;

/// Last second representable as an IMF-fixdate (9999-12-31T23:59:59Z); httpdate panics past it.
pub(super) const MAX_HTTP_DATE_SECS: u64 = 253_402_300_799;

/// Fixed-capacity byte buffer for a header value, so replies format without allocating.
#[derive(Clone, Copy)]
pub(super) struct InlineBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> InlineBuf<N> {
    pub(super) fn new() -> Self {
        InlineBuf {
            buf: [0; N],
            len: 0,
        }
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Capacities are sized for the largest value, so truncation cannot happen; it is still
    /// checked rather than trusted.
    pub(super) fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(N - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    /// Appends `v` in lower-case hexadecimal.
    pub(super) fn push_hex(&mut self, v: u64) {
        self.push_digits(v, 16);
    }

    /// Appends `v` in decimal.
    pub(super) fn push_dec(&mut self, v: u64) {
        self.push_digits(v, 10);
    }

    /// Appends `v` in `radix` (at most 16) without going through `fmt`.
    #[inline]
    fn push_digits(&mut self, mut v: u64, radix: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b"0123456789abcdef"[(v % radix) as usize];
            v /= radix;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

impl<const N: usize> fmt::Write for InlineBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if s.len() > N - self.len {
            return Err(fmt::Error);
        }
        self.push(s.as_bytes());
        Ok(())
    }
}

impl<const N: usize> fmt::Debug for InlineBuf<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// Strong entity tag like nginx's, `"<mtime hex>-<size hex>"`, quotes included.
#[derive(Clone, Copy, Debug)]
pub struct ETag(InlineBuf<40>);

impl ETag {
    /// The tag for a file with this mtime (seconds) and size.
    pub fn new(mtime_secs: u64, size: u64) -> Self {
        let mut b = InlineBuf::new();
        b.push(b"\"");
        b.push_hex(mtime_secs);
        b.push(b"-");
        b.push_hex(size);
        b.push(b"\"");
        ETag(b)
    }

    /// The tag of a precompressed sibling: its own tag with the coding
    /// added (`"<mtime>-<size>-br"`), so no two encodings ever share one.
    pub fn for_coding(self, coding: Option<Coding>) -> Self {
        let Some(coding) = coding else {
            return self;
        };
        let mut b = InlineBuf::new();
        b.push(self.opaque_with_quote());
        b.push(b"-");
        b.push(coding.token().as_bytes());
        b.push(b"\"");
        ETag(b)
    }

    /// The value without its closing quote.
    fn opaque_with_quote(&self) -> &[u8] {
        let b = self.as_bytes();
        &b[..b.len() - 1]
    }

    /// The header value, quotes included.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The opaque tag without quotes, for weak comparison.
    pub(super) fn opaque(&self) -> &[u8] {
        let b = self.as_bytes();
        &b[1..b.len() - 1]
    }
}

/// An IMF-fixdate such as `Sun, 06 Nov 1994 08:49:37 GMT`, always 29 bytes.
#[derive(Clone, Copy, Debug)]
pub struct HttpDateValue(InlineBuf<32>);

impl HttpDateValue {
    /// Formats seconds since the epoch, clamped to the years 1970..=9999 the format can carry.
    pub fn from_unix_secs(secs: u64) -> Self {
        use fmt::Write as _;
        let t = UNIX_EPOCH + Duration::from_secs(secs.min(MAX_HTTP_DATE_SECS));
        let mut b = InlineBuf::new();
        // Always 29 bytes, within capacity; an error would leave a shorter value, never a panic.
        let _ = write!(b, "{}", httpdate::HttpDate::from(t));
        HttpDateValue(b)
    }

    /// The header value.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// A Content-Range value, `bytes first-last/total` or `bytes */total`.
#[derive(Clone, Copy, Debug)]
pub struct ContentRange(InlineBuf<72>);

impl ContentRange {
    /// For a 206 carrying bytes `first..=last` of `total`.
    pub fn satisfied(first: u64, last: u64, total: u64) -> Self {
        let mut b = InlineBuf::new();
        b.push(b"bytes ");
        b.push_dec(first);
        b.push(b"-");
        b.push_dec(last);
        b.push(b"/");
        b.push_dec(total);
        ContentRange(b)
    }

    /// For a 416.
    pub fn unsatisfied(total: u64) -> Self {
        let mut b = InlineBuf::new();
        b.push(b"bytes */");
        b.push_dec(total);
        ContentRange(b)
    }

    /// The header value.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}
