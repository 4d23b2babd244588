//! The proxy's hooks for a cache: the upstream request head may be edited
//! (conditionals added, the client's own removed), an upstream answer (or its
//! failure) may be replaced by a stored response, and the relayed response may
//! be copied as it streams. The proxy is generic over the tap, so a route
//! without a cache runs [`NoTap`], whose hooks compile to nothing.

use std::sync::Arc;

use super::entry::StoredResponse;
use crate::http::request::RequestView;
use crate::http1::response::ParsedResponseHead as UpstreamHead;

/// A stored response to answer with instead of the upstream's, and its
/// `Cache-Status` value.
pub type Instead = (Arc<StoredResponse>, String);

/// The upstream's response head as [`ResponseTap::on_head`] sees it: parsed,
/// the bytes it was parsed from, and the body's length when it is known.
#[derive(Clone, Copy)]
pub struct TapHead<'a> {
    /// The parsed head; its fields index into `buf`.
    pub parsed: &'a UpstreamHead,
    /// The bytes read from the upstream.
    pub buf: &'a [u8],
    /// The body's length, `None` when chunked or until close.
    pub body_len: Option<u64>,
}

/// What a cache sees of a proxied exchange. Each hook does nothing unless a
/// tap overrides it, so a tap states only what it watches; the defaults are
/// inlined, and a route without a cache ([`NoTap`]) pays nothing for them.
pub trait ResponseTap {
    /// Edits the encoded upstream request head (`...\r\n\r\n`).
    #[inline(always)]
    fn edit_upstream_head(&mut self, _head: &mut Vec<u8>) {}

    /// No upstream answered: a stored response to answer with instead.
    #[inline(always)]
    fn instead_of_error(&mut self) -> Option<Instead> {
        None
    }

    /// The upstream answered with `resp`: a stored response to answer with
    /// instead (a 304 to a revalidation, a 5xx when stale may be served).
    #[inline(always)]
    fn instead_of_head(&mut self, _resp: &UpstreamHead, _buf: &[u8]) -> Option<Instead> {
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
