//! A response as handlers give it: a head (status and fields) and a body. The
//! driver picks the framing from the body, so a response filter that replaces a
//! body (compression) changes the framing by changing the body.

use std::fmt;
use std::fs::File;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite};

use crate::http1::write::PreparedHead;

/// A header field owned by configuration (a `respond` route's headers) or by a
/// body (trailers): validated once, copied out as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedField {
    /// Field name, a token.
    pub name: Box<str>,
    /// Field value, no CR, LF or other control characters.
    pub value: Box<[u8]>,
}

impl OwnedField {
    /// The field as a name and value borrowed from it.
    pub fn pair(&self) -> (&str, &[u8]) {
        (&self.name, &self.value)
    }

    /// A field whose name and value were validated by the caller.
    pub fn new(name: &str, value: &[u8]) -> Self {
        OwnedField {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// Header fields fixed ahead of the responses that carry them (a `respond`
/// route's headers, a cached static file's validators), with their HTTP/1
/// encoding made once: the HTTP/1 driver copies the `Name: value` lines in one
/// go per response, while a driver of another protocol reads the same fields
/// one by one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldBlock {
    fields: Box<[OwnedField]>,
    http1: Box<[u8]>,
    /// For a fixed answer's fields, that answer's whole HTTP/1 head but the
    /// date.
    http1_head: Option<Box<PreparedHead>>,
}

impl FieldBlock {
    /// Encodes `fields`, whose names and values the caller validated.
    pub fn new(fields: Vec<OwnedField>) -> Self {
        let mut http1 = Vec::new();
        for f in &fields {
            http1.extend_from_slice(f.name.as_bytes());
            http1.extend_from_slice(b": ");
            http1.extend_from_slice(&f.value);
            http1.extend_from_slice(b"\r\n");
        }
        FieldBlock {
            fields: fields.into_boxed_slice(),
            http1: http1.into_boxed_slice(),
            http1_head: None,
        }
    }

    /// The block of a fixed answer with `status` and a body of `length`
    /// bytes: its HTTP/1 head is encoded now, once, with these fields last.
    pub fn with_http1_head(mut self, status: u16, length: u64) -> Self {
        self.http1_head = Some(Box::new(PreparedHead::new(status, length, &self.http1)));
        self
    }

    /// The fixed answer's HTTP/1 head, when the block was made for one.
    #[inline]
    pub fn http1_head(&self) -> Option<&PreparedHead> {
        self.http1_head.as_deref()
    }

    /// The fields, in the order they are sent.
    pub fn fields(&self) -> &[OwnedField] {
        &self.fields
    }

    /// The fields as HTTP/1 header lines, each ending in CRLF.
    pub fn http1_lines(&self) -> &[u8] {
        &self.http1
    }
}

/// Status and fields of a response. `Date`, `Server`, the length or
/// transfer-coding fields and `Connection` are the driver's and must not be set
/// among the fields; a response that has a `Date` of its own (a stored one,
/// RFC 9111 §4) gives it in [`ResponseHead::date`].
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'a> {
    /// Final status, 200-599 (101 for a tunnel).
    pub status: u16,
    /// Fields computed for this response (`Content-Type`, `ETag`, `Location`...),
    /// borrowed from the handler's stack: building a head allocates nothing.
    pub fields: &'a [(&'a str, &'a [u8])],
    /// Fields prepared ahead (configuration's, a cached file's), written
    /// after `fields`.
    pub configured: Option<&'a FieldBlock>,
    /// More fields as `name: value\r\n` lines, validated by whoever built them
    /// (a proxied head's end-to-end fields, copied in runs as they came):
    /// written last. An HTTP/1 driver copies the block as it is; other
    /// protocols read it through [`ResponseHead::all_fields`].
    pub field_lines: &'a [u8],
    /// The `Date` to send instead of the driver's clock: a cache answering
    /// with a stored response keeps the origin's (RFC 9110 §6.6.1). `None`
    /// for every response made now.
    pub date: Option<&'a [u8]>,
}

impl<'a> ResponseHead<'a> {
    /// A head with computed fields only.
    pub fn new(status: u16, fields: &'a [(&'a str, &'a [u8])]) -> Self {
        ResponseHead {
            status,
            fields,
            configured: None,
            field_lines: &[],
            date: None,
        }
    }

    /// Whether the head carries any field of its own (computed, configured
    /// or as lines): false for a bare answer, whose head is the driver's
    /// fields alone.
    pub fn has_fields(&self) -> bool {
        !self.fields.is_empty()
            || self.configured.is_some_and(|c| !c.fields().is_empty())
            || !self.field_lines.is_empty()
    }

    /// Every field in the order it is sent, `field_lines` split into fields.
    pub fn all_fields(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> + 'a {
        let configured = self.configured.map_or(&[][..], FieldBlock::fields);
        self.fields
            .iter()
            .copied()
            .chain(configured.iter().map(|f| (&*f.name, &*f.value)))
            .chain(split_field_lines(self.field_lines))
    }
}

/// The fields of a block of `name: value\r\n` lines; a line that is not one
/// (no colon, a name that is not text) is skipped.
pub fn split_field_lines(block: &[u8]) -> impl Iterator<Item = (&str, &[u8])> {
    block.split(|&b| b == b'\n').filter_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        let name = std::str::from_utf8(&line[..colon]).ok()?;
        let value = &line[colon + 1..];
        let start = value
            .iter()
            .position(|&b| b != b' ' && b != b'\t')
            .unwrap_or(value.len());
        let end = value
            .iter()
            .rposition(|&b| b != b' ' && b != b'\t')
            .map_or(start, |i| i + 1);
        Some((name, &value[start..end.max(start)]))
    })
}

/// A region of an open file: the driver sends it by sendfile on plain TCP and in
/// bounded chunks under TLS, or copies it when small.
#[derive(Debug, Clone)]
pub struct FileRegion {
    /// Opened read-only.
    pub file: Rc<File>,
    /// First byte to send.
    pub offset: u64,
    /// Bytes to send.
    pub len: u64,
    /// The whole file when it is already in memory (the open-file cache keeps
    /// small ones): `content[offset..offset + len]` is sent instead of reading.
    pub content: Option<Rc<[u8]>>,
}

/// One part of a body sent as a sequence ([`Body::Parts`]): bytes built for the
/// request, or a file region the driver sends as it sends [`Body::File`].
#[derive(Debug, Clone)]
pub enum BodyPart {
    /// Bytes built for this request (a multipart delimiter and part head).
    Owned(Vec<u8>),
    /// A region of an open file.
    File(FileRegion),
}

impl BodyPart {
    /// Bytes this part adds to the body.
    pub fn len(&self) -> u64 {
        match self {
            BodyPart::Owned(b) => b.len() as u64,
            BodyPart::File(f) => f.len,
        }
    }

    /// Whether this part adds nothing to the body.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A body produced piece by piece (a proxied response, a compressor's output).
pub trait BodyStream {
    /// The length when known in advance: the driver sends `Content-Length`
    /// instead of chunked framing (or a close-delimited body to HTTP/1.0).
    fn known_len(&self) -> Option<u64>;

    /// Appends the next piece of the body to `out`; `Ok(false)` once the body is
    /// complete (nothing appended). Appending nothing with `Ok(true)` is allowed.
    fn poll_chunk(&mut self, cx: &mut Context<'_>, out: &mut Vec<u8>) -> Poll<io::Result<bool>>;

    /// Trailer fields, asked for once the body is complete; sent only where the
    /// framing carries them (HTTP/1.1 chunked, HTTP/2).
    fn trailers(&self) -> &[OwnedField] {
        &[]
    }
}

/// Raw bytes both ways after a `101 Switching Protocols`.
pub trait TunnelIo: AsyncRead + AsyncWrite + Unpin {}

impl<T: AsyncRead + AsyncWrite + Unpin> TunnelIo for T {}

/// What runs on the connection after a 101 head is written: the driver hands
/// over the downstream stream and any bytes the client already sent past the
/// request.
pub trait Tunnel {
    /// Relays until either side closes; the connection ends afterwards.
    fn run<'a>(
        self: Box<Self>,
        downstream: &'a mut dyn TunnelIo,
        early: Vec<u8>,
    ) -> Pin<Box<dyn Future<Output = ()> + 'a>>
    where
        Self: 'a;
}

/// A response body. `'h` is the handler's lifetime: configuration-owned bytes
/// are sent without a copy of their own.
pub enum Body<'h> {
    /// No body: `Content-Length: 0`, or no length field at all for 1xx, 204, 304.
    Empty,
    /// Bytes that outlive the request (configuration, constants).
    Bytes(&'h [u8]),
    /// Bytes built for this request (a listing, a metrics page).
    Owned(Vec<u8>),
    /// A region of an open file.
    File(FileRegion),
    /// Bytes and file regions of known lengths, sent in order (a
    /// `multipart/byteranges` answer): each region by sendfile on plain TCP and
    /// in bounded chunks under TLS, so the length is known before the head.
    Parts(Vec<BodyPart>),
    /// A body produced piece by piece.
    Stream(Box<dyn BodyStream + 'h>),
    /// A body the handler pushes itself after the head, through
    /// [`crate::http::Session::poll_write_body`] and
    /// [`crate::http::Session::finish_body`], with this length when it is known.
    /// Nothing is allocated for it: the driver frames each piece as it comes
    /// (a relayed upstream body goes out as it is read).
    Push(Option<u64>),
    /// No body; after the 101 head the connection becomes this tunnel.
    Tunnel(Box<dyn Tunnel + 'h>),
}

impl Body<'_> {
    /// The length a `Content-Length` would carry, when it is known.
    pub fn len(&self) -> Option<u64> {
        match self {
            Body::Empty | Body::Tunnel(_) => Some(0),
            Body::Bytes(b) => Some(b.len() as u64),
            Body::Owned(b) => Some(b.len() as u64),
            Body::File(f) => Some(f.len),
            Body::Parts(parts) => Some(parts.iter().map(BodyPart::len).sum()),
            Body::Stream(s) => s.known_len(),
            Body::Push(len) => *len,
        }
    }

    /// Whether the body is known to be empty.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
}

impl fmt::Debug for Body<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Empty => f.write_str("Empty"),
            Body::Bytes(b) => write!(f, "Bytes({})", b.len()),
            Body::Owned(b) => write!(f, "Owned({})", b.len()),
            Body::File(r) => write!(f, "File({}+{})", r.offset, r.len),
            Body::Parts(parts) => write!(f, "Parts({})", parts.len()),
            Body::Stream(s) => write!(f, "Stream({:?})", s.known_len()),
            Body::Push(len) => write!(f, "Push({len:?})"),
            Body::Tunnel(_) => f.write_str("Tunnel"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_block_is_encoded_once_and_still_read_as_fields() {
        let block = FieldBlock::new(vec![
            OwnedField::new("Content-Type", b"text/plain"),
            OwnedField::new("X-One", b"1"),
        ]);
        assert_eq!(
            block.http1_lines(),
            b"Content-Type: text/plain\r\nX-One: 1\r\n"
        );
        let head = ResponseHead {
            date: None,
            status: 200,
            fields: &[("ETag", b"\"a\"")],
            configured: Some(&block),
            field_lines: &[],
        };
        let names: Vec<&str> = head.all_fields().map(|(n, _)| n).collect();
        assert_eq!(names, ["ETag", "Content-Type", "X-One"]);
        assert!(FieldBlock::default().http1_lines().is_empty());
    }

    #[test]
    fn a_head_has_fields_when_any_source_gives_one() {
        let empty = FieldBlock::default();
        let block = FieldBlock::new(vec![OwnedField::new("X-One", b"1")]);
        let bare = ResponseHead::new(200, &[]);
        assert!(!bare.has_fields());
        assert!(!ResponseHead {
            configured: Some(&empty),
            ..bare
        }
        .has_fields());
        for head in [
            ResponseHead::new(200, &[("ETag", b"\"a\"")]),
            ResponseHead {
                configured: Some(&block),
                ..bare
            },
            ResponseHead {
                field_lines: b"X-Two: 2\r\n",
                ..bare
            },
        ] {
            assert!(head.has_fields());
            assert!(head.all_fields().next().is_some());
        }
    }

    #[test]
    fn field_lines_are_read_as_fields_after_the_others() {
        let fields = [("Content-Type", b"text/plain".as_slice())];
        let head = ResponseHead {
            date: None,
            status: 200,
            fields: &fields,
            configured: None,
            field_lines: b"ETag: \"x\"\r\nX-Empty:\r\nX-Pad:  a b \t\r\nnot a field\r\n",
        };
        let all: Vec<_> = head.all_fields().collect();
        assert_eq!(
            all,
            [
                ("Content-Type", &b"text/plain"[..]),
                ("ETag", b"\"x\""),
                ("X-Empty", b""),
                ("X-Pad", b"a b"),
            ]
        );
    }
}
