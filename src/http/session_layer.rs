//! A session seen through a layer: a response filter or a sink changes a few
//! of the driver's session calls and passes the others through. The passing
//! through is written once, here, so a layer states only what it changes.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use super::request::RequestView;
use super::response::{Body, ResponseHead};
use super::session::{BodyReadError, RequestRecord, Session};
use crate::worker::WorkerCtx;

/// What a layer changes of the session it wraps. Each method gets the
/// wrapped session and, unless the layer overrides it, makes the same call
/// on it. The request head and its trailers, the worker and the request id
/// always come from the wrapped session.
pub trait SessionLayer<'h> {
    /// See [`Session::poll_body`].
    fn poll_body(
        &mut self,
        inner: &mut dyn Session<'h>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<usize, BodyReadError>> {
        inner.poll_body(cx)
    }

    /// See [`Session::body_chunk`].
    fn body_chunk<'a>(&'a self, inner: &'a dyn Session<'h>) -> &'a [u8] {
        inner.body_chunk()
    }

    /// See [`Session::consume_body`].
    fn consume_body(&mut self, inner: &mut dyn Session<'h>, n: usize) {
        inner.consume_body(n)
    }

    /// See [`Session::send_response`].
    fn send_response(
        &mut self,
        inner: &mut dyn Session<'h>,
        head: &ResponseHead<'_>,
        body: Body<'h>,
    ) {
        inner.send_response(head, body)
    }

    /// See [`Session::responded`].
    fn responded(&self, inner: &dyn Session<'h>) -> bool {
        inner.responded()
    }

    /// See [`Session::send_interim`].
    fn send_interim(&mut self, inner: &mut dyn Session<'h>, status: u16, fields: &[(&str, &[u8])]) {
        inner.send_interim(status, fields)
    }

    /// See [`Session::poll_write_body`].
    fn poll_write_body(
        &mut self,
        inner: &mut dyn Session<'h>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        inner.poll_write_body(cx, data)
    }

    /// See [`Session::poll_write_body_gathered`]. By default the pieces go
    /// one at a time through this layer's own [`SessionLayer::poll_write_body`],
    /// so a layer that changes body bytes sees them all; a layer that leaves
    /// bodies alone passes them to `inner` whole.
    fn poll_write_body_gathered(
        &mut self,
        inner: &mut dyn Session<'h>,
        cx: &mut Context<'_>,
        pieces: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match pieces.iter().find(|p| !p.is_empty()) {
            Some(first) => self.poll_write_body(inner, cx, first),
            None => Poll::Ready(Ok(0)),
        }
    }

    /// See [`Session::poll_flush_body`].
    fn poll_flush_body(
        &mut self,
        inner: &mut dyn Session<'h>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        inner.poll_flush_body(cx)
    }

    /// See [`Session::finish_body`].
    fn finish_body(&mut self, inner: &mut dyn Session<'h>, trailers: &[(&str, &[u8])]) {
        inner.finish_body(trailers)
    }

    /// See [`Session::note_upstream`].
    fn note_upstream(&mut self, inner: &mut dyn Session<'h>, addr: SocketAddr, elapsed: Duration) {
        inner.note_upstream(addr, elapsed)
    }

    /// See [`Session::note_cache`].
    fn note_cache(&mut self, inner: &mut dyn Session<'h>, outcome: &'static str) {
        inner.note_cache(outcome)
    }
}

/// The session `inner` as `layer` changes it.
pub struct LayeredSession<'s, 'h, L> {
    /// The session wrapped: the driver's, or another layer.
    pub inner: &'s mut dyn Session<'h>,
    /// What changes.
    pub layer: L,
}

impl<'h, L: SessionLayer<'h>> Session<'h> for LayeredSession<'_, 'h, L> {
    fn request(&self) -> RequestView<'_> {
        self.inner.request()
    }

    fn worker(&self) -> &'h WorkerCtx {
        self.inner.worker()
    }

    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>> {
        self.layer.poll_body(self.inner, cx)
    }

    fn body_chunk(&self) -> &[u8] {
        self.layer.body_chunk(self.inner)
    }

    fn consume_body(&mut self, n: usize) {
        self.layer.consume_body(self.inner, n)
    }

    fn request_trailers(&self) -> Vec<(&str, &[u8])> {
        self.inner.request_trailers()
    }

    fn send_response(&mut self, head: &ResponseHead<'_>, body: Body<'h>) {
        self.layer.send_response(self.inner, head, body)
    }

    fn responded(&self) -> bool {
        self.layer.responded(self.inner)
    }

    fn send_interim(&mut self, status: u16, fields: &[(&str, &[u8])]) {
        self.layer.send_interim(self.inner, status, fields)
    }

    fn record(&self) -> &RequestRecord {
        self.inner.record()
    }

    fn record_mut(&mut self) -> &mut RequestRecord {
        self.inner.record_mut()
    }

    fn poll_write_body(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.layer.poll_write_body(self.inner, cx, data)
    }

    fn poll_write_body_gathered(
        &mut self,
        cx: &mut Context<'_>,
        pieces: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.layer.poll_write_body_gathered(self.inner, cx, pieces)
    }

    fn poll_flush_body(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.layer.poll_flush_body(self.inner, cx)
    }

    fn finish_body(&mut self, trailers: &[(&str, &[u8])]) {
        self.layer.finish_body(self.inner, trailers)
    }

    fn note_upstream(&mut self, addr: SocketAddr, elapsed: Duration) {
        self.layer.note_upstream(self.inner, addr, elapsed)
    }

    fn note_cache(&mut self, outcome: &'static str) {
        self.layer.note_cache(self.inner, outcome)
    }
}
