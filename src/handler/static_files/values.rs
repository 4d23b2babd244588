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

    /// A buffer holding `args` formatted (`"bytes {first}-{last}/{total}"`).
    pub(super) fn format(args: fmt::Arguments<'_>) -> Self {
        use fmt::Write as _;
        let mut b = Self::new();
        // Capacities are sized for the largest value; a value that did not fit would be
        // cut short, never a panic.
        let _ = b.write_fmt(args);
        b
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
        ETag(InlineBuf::format(format_args!(
            "\"{mtime_secs:x}-{size:x}\""
        )))
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
        let t = UNIX_EPOCH + Duration::from_secs(secs.min(MAX_HTTP_DATE_SECS));
        HttpDateValue(InlineBuf::format(format_args!(
            "{}",
            httpdate::HttpDate::from(t)
        )))
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
        ContentRange(InlineBuf::format(format_args!(
            "bytes {first}-{last}/{total}"
        )))
    }

    /// For a 416.
    pub fn unsatisfied(total: u64) -> Self {
        ContentRange(InlineBuf::format(format_args!("bytes */{total}")))
    }

    /// The header value.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}
