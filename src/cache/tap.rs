//! The proxy's hooks for a cache: the upstream request head may be edited
//! (conditionals added, the client's own removed), an upstream answer (or its
//! failure) may be replaced by a stored response, and the relayed response may
//! be copied as it streams. The proxy is generic over the tap, so a route
//! without a cache runs [`NoTap`], whose hooks compile to nothing.
//!
//! The hooks see the upstream's answer through [`UpstreamHead`], which reads
//! an HTTP/1 head and an HTTP/2 one alike: the cache sits in front of every
//! upstream protocol without knowing which one answered.

use std::fs::File;
use std::rc::Rc;
use std::sync::Arc;

use super::entry::StoredResponse;
use crate::http::request::RequestView;
use crate::http1::response::ParsedResponseHead;
use crate::http1::span::HeaderSpan;
use crate::http1::HeaderLines;
use crate::http2::client::{FieldIter, ResponseHead};
use crate::upstream::request_head::RequestHeadSink;

/// A stored response to answer with instead of the upstream's.
pub struct Instead {
    /// Its head, and its body unless `file` holds it.
    pub stored: Arc<StoredResponse>,
    /// The `Cache-Status` value.
    pub cache_status: String,
    /// A disk object's file, opened before the upstream was asked, and where
    /// the body starts in it.
    pub file: Option<(Rc<File>, u64)>,
}

/// The upstream's final response head, as it came over whichever protocol
/// the group speaks.
#[derive(Clone, Copy)]
pub enum UpstreamHead<'a> {
    /// An HTTP/1 head: parsed, and the bytes it was parsed from (its fields
    /// index into them).
    Http1 {
        /// The parsed head.
        parsed: &'a ParsedResponseHead,
        /// The bytes read from the upstream.
        buf: &'a [u8],
    },
    /// An HTTP/2 response head, as the codec decoded it: its `:status`
    /// and fields (names in lower case).
    H2 {
        /// The head.
        head: &'a ResponseHead,
    },
}

impl<'a> UpstreamHead<'a> {
    /// The final status.
    pub fn status(&self) -> u16 {
        match self {
            UpstreamHead::Http1 { parsed, .. } => parsed.status,
            UpstreamHead::H2 { head } => head.status(),
        }
    }

    /// The first value of the field `name` (given in lower case), matched
    /// case-insensitively.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        match *self {
            UpstreamHead::Http1 { parsed, buf } => parsed.header(buf, name),
            UpstreamHead::H2 { head } => head.field(name.as_bytes()),
        }
    }

    /// Every field line in order, as (name, value).
    pub fn headers(&self) -> Fields<'a> {
        match *self {
            UpstreamHead::Http1 { parsed, buf } => Fields::Http1 {
                spans: parsed.header_spans().iter(),
                buf,
            },
            UpstreamHead::H2 { head } => Fields::H2(head.fields()),
        }
    }
}

/// The field lines of an [`UpstreamHead`], as (name, value).
pub enum Fields<'a> {
    /// Spans into the bytes an HTTP/1 head was parsed from.
    Http1 {
        /// The lines left.
        spans: std::slice::Iter<'a, HeaderSpan>,
        /// The parsed bytes.
        buf: &'a [u8],
    },
    /// An HTTP/2 head's fields, in the order received.
    H2(FieldIter<'a>),
}

impl<'a> Iterator for Fields<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Fields::Http1 { spans, buf } => {
                spans.next().map(|h| (h.name.get(buf), h.value.get(buf)))
            }
            Fields::H2(iter) => iter.next(),
        }
    }
}

/// The upstream's response head as [`ResponseTap::on_head`] sees it, and the
/// body's length when it is known.
#[derive(Clone, Copy)]
pub struct TapHead<'a> {
    /// The head, HTTP/1 or HTTP/2.
    pub head: UpstreamHead<'a>,
    /// The body's length, `None` when chunked, until close, or not given.
    pub body_len: Option<u64>,
}

/// What a cache sees of a proxied exchange. Each hook does nothing unless a
/// tap overrides it, so a tap states only what it watches; the defaults are
/// inlined, and a route without a cache ([`NoTap`]) pays nothing for them.
pub trait ResponseTap {
    /// Whether the client's field `name` is left out of the upstream request
    /// (the cache asks its own conditional questions).
    #[inline(always)]
    fn drops_request_field(&self, _name: &[u8]) -> bool {
        false
    }

    /// Adds the tap's own fields to the upstream request head, after the
    /// rewrite's (a revalidation's `If-None-Match`, `If-Modified-Since`).
    #[inline(always)]
    fn add_request_fields(&mut self, _head: &mut impl RequestHeadSink) {}

    /// No upstream answered: a stored response to answer with instead.
    #[inline(always)]
    fn instead_of_error(&mut self) -> Option<Instead> {
        None
    }

    /// The upstream answered with `head`: a stored response to answer with
    /// instead (a 304 to a revalidation, a 5xx when stale may be served).
    #[inline(always)]
    fn instead_of_head(&mut self, _head: UpstreamHead<'_>) -> Option<Instead> {
        None
    }

    /// The response head is about to go downstream with `fields` (end-to-end
    /// `Name: value\r\n` lines), to which the tap may add lines.
    #[inline(always)]
    fn on_head(&mut self, _request: &RequestView<'_>, _head: TapHead<'_>, _fields: &mut Vec<u8>) {}

    /// The next piece of the body, before it goes downstream.
    #[inline(always)]
    fn on_body(&mut self, _data: &[u8]) {}

    /// Whether the body is being stored: then it is read to its end even if
    /// the client goes away, for the others waiting on it.
    #[inline(always)]
    fn storing(&self) -> bool {
        false
    }

    /// The body ended, whole or not.
    #[inline(always)]
    fn on_end(&mut self, _complete: bool) {}
}

/// The tap of a route without a cache.
pub struct NoTap;

impl ResponseTap for NoTap {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::parse::{Limits, Method, Parsed};
    use crate::http1::parse_response;

    #[test]
    fn an_http1_head_and_an_h2_head_read_alike() {
        let raw = b"HTTP/1.1 200 OK\r\nETag: \"v1\"\r\nCache-Control: max-age=60\r\nVary: a\r\nVary: b\r\nContent-Length: 0\r\n\r\n";
        let mut parsed = ParsedResponseHead::default();
        let done = parse_response(raw, &Limits::default(), Method::Get, &mut parsed);
        assert!(matches!(done, Ok(Parsed::Complete)));
        let http1 = UpstreamHead::Http1 {
            parsed: &parsed,
            buf: raw,
        };
        let decoded = ResponseHead::decoded(&[
            (":status", "200"),
            ("etag", "\"v1\""),
            ("cache-control", "max-age=60"),
            ("vary", "a"),
            ("vary", "b"),
            ("content-length", "0"),
        ])
        .unwrap();
        let h2 = UpstreamHead::H2 { head: &decoded };
        for head in [http1, h2] {
            assert_eq!(head.status(), 200);
            assert_eq!(head.header("etag"), Some(&b"\"v1\""[..]));
            assert_eq!(head.header("cache-control"), Some(&b"max-age=60"[..]));
            assert_eq!(head.header("expires"), None);
            let vary: Vec<_> = head
                .headers()
                .filter(|(n, _)| n.eq_ignore_ascii_case(b"vary"))
                .map(|(_, v)| v)
                .collect();
            assert_eq!(vary, [&b"a"[..], b"b"]);
            assert_eq!(head.headers().count(), 5);
        }
    }
}
