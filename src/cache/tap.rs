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

/// What a cache sees of a proxied exchange.
pub trait ResponseTap {
    /// Edits the encoded upstream request head (`...\r\n\r\n`).
    fn edit_upstream_head(&mut self, head: &mut Vec<u8>);

    /// No upstream answered: a stored response to answer with instead.
    fn instead_of_error(&mut self) -> Option<Instead>;

    /// The upstream answered with `resp`: a stored response to answer with
    /// instead (a 304 to a revalidation, a 5xx when stale may be served).
    fn instead_of_head(&mut self, resp: &UpstreamHead, buf: &[u8]) -> Option<Instead>;

    /// The response head is about to go downstream with `fields` (end-to-end
    /// `Name: value\r\n` lines), to which the tap may add lines.
    fn on_head(
        &mut self,
        request: &RequestView<'_>,
        resp: &UpstreamHead,
        buf: &[u8],
        fields: &mut Vec<u8>,
        body_len: Option<u64>,
    );

    /// The next piece of the body, before it goes downstream.
    fn on_body(&mut self, data: &[u8]);

    /// Whether the body is being stored: then it is read to its end even if
    /// the client goes away, for the others waiting on it.
    fn storing(&self) -> bool;

    /// The body ended, whole or not.
    fn on_end(&mut self, complete: bool);
}

/// The tap of a route without a cache.
pub struct NoTap;

impl ResponseTap for NoTap {
    #[inline(always)]
    fn edit_upstream_head(&mut self, _: &mut Vec<u8>) {}

    #[inline(always)]
    fn instead_of_error(&mut self) -> Option<Instead> {
        None
    }

    #[inline(always)]
    fn instead_of_head(&mut self, _: &UpstreamHead, _: &[u8]) -> Option<Instead> {
        None
    }

    #[inline(always)]
    fn on_head(
        &mut self,
        _: &RequestView<'_>,
        _: &UpstreamHead,
        _: &[u8],
        _: &mut Vec<u8>,
        _: Option<u64>,
    ) {
    }

    #[inline(always)]
    fn on_body(&mut self, _: &[u8]) {}

    #[inline(always)]
    fn storing(&self) -> bool {
        false
    }

    #[inline(always)]
    fn on_end(&mut self, _: bool) {}
}
