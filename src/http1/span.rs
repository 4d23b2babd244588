//! Offsets into a parsed buffer: a head stores spans instead of copies, so a
//! warmed-up connection parses without allocating. Shared by the request and
//! response parsers, which answer header lookups the same way.

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

/// Offset of `part` inside `base`; `part` is always a sub-slice returned by httparse.
pub(crate) fn offset_of(base: &[u8], part: &[u8]) -> usize {
    let at = (part.as_ptr() as usize).wrapping_sub(base.as_ptr() as usize);
    // A sub-slice cannot start past its parent; clamp rather than trust it.
    at.min(base.len())
}

/// Header lookups for a parsed head that stores its header lines as spans:
/// the request and response heads answer them the same way.
pub trait HeaderLines {
    /// Header lines as spans, for code that forwards or rewrites the head.
    fn header_spans(&self) -> &[HeaderSpan];

    /// First value of a header, name matched case-insensitively.
    fn header<'b>(&self, buf: &'b [u8], name: &str) -> Option<&'b [u8]> {
        let name = name.as_bytes();
        self.header_spans()
            .iter()
            .find(|h| h.name.len() == name.len() && h.name.get(buf).eq_ignore_ascii_case(name))
            .map(|h| h.value.get(buf))
    }

    /// All header lines in order, as (name, value).
    fn headers<'b>(&self, buf: &'b [u8]) -> impl Iterator<Item = (&'b [u8], &'b [u8])> {
        self.header_spans()
            .iter()
            .map(move |h| (h.name.get(buf), h.value.get(buf)))
    }
}
