//! A session for refreshing a stored response after its client was answered
//! (stale-while-revalidate): it reads the client's request through the real
//! session, and takes whatever the phases answer and drops it, so the
//! upstream exchange runs as for any request while only the cache keeps its
//! result.

use std::task::{Context, Poll};

use crate::http::request::RequestView;
use crate::http::request_id::RequestId;
use crate::http::response::{Body, ResponseHead};
use crate::http::session::{BodyReadError, Session};
use crate::worker::WorkerCtx;

/// The real session, answered already, seen through a sink.
pub(super) struct RefreshSession<'s, 'h> {
    /// The client's session, for the request head and the worker.
    pub(super) inner: &'s mut dyn Session<'h>,
}

impl<'h> Session<'h> for RefreshSession<'_, 'h> {
    fn request(&self) -> RequestView<'_> {
        self.inner.request()
    }

    fn worker(&self) -> &'h WorkerCtx {
        self.inner.worker()
    }

    fn poll_body(&mut self, _: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>> {
        Poll::Ready(Ok(0))
    }

    fn body_chunk(&self) -> &[u8] {
        &[]
    }

    fn consume_body(&mut self, _: usize) {}

    fn send_response(&mut self, _: &ResponseHead<'_>, _: Body<'h>) {}

    fn responded(&self) -> bool {
        false
    }

    fn request_id(&self) -> &RequestId {
        self.inner.request_id()
    }

    fn poll_write_body(
        &mut self,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush_body(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn finish_body(&mut self, _: &[(&str, &[u8])]) {}

    fn note_upstream(&mut self, _: std::net::SocketAddr, _: std::time::Duration) {}
}
