//! A session for refreshing a stored response after its client was answered
//! (stale-while-revalidate): it reads the client's request through the real
//! session, and takes whatever the phases answer and drops it, so the
//! upstream exchange runs as for any request while only the cache keeps its
//! result.

use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::http::response::{Body, ResponseHead};
use crate::http::session::{BodyReadError, Session};
use crate::http::session_layer::SessionLayer;

/// The layer over the real session, answered already, that makes it a sink:
/// no request body (it was read for the client), and every answer (interim
/// ones too), body and log note dropped.
pub(super) struct RefreshSink;

impl<'h> SessionLayer<'h> for RefreshSink {
    fn poll_body(
        &mut self,
        _: &mut dyn Session<'h>,
        _: &mut Context<'_>,
    ) -> Poll<Result<usize, BodyReadError>> {
        Poll::Ready(Ok(0))
    }

    fn body_chunk<'a>(&'a self, _: &'a dyn Session<'h>) -> &'a [u8] {
        &[]
    }

    fn consume_body(&mut self, _: &mut dyn Session<'h>, _: usize) {}

    fn send_response(&mut self, _: &mut dyn Session<'h>, _: &ResponseHead<'_>, _: Body<'h>) {}

    fn responded(&self, _: &dyn Session<'h>) -> bool {
        false
    }

    fn send_interim(&mut self, _: &mut dyn Session<'h>, _: u16, _: &[(&str, &[u8])]) {}

    fn poll_write_body(
        &mut self,
        _: &mut dyn Session<'h>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush_body(
        &mut self,
        _: &mut dyn Session<'h>,
        _: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn finish_body(&mut self, _: &mut dyn Session<'h>, _: &[(&str, &[u8])]) {}

    fn note_upstream(&mut self, _: &mut dyn Session<'h>, _: SocketAddr, _: Duration) {}

    fn note_cache(&mut self, _: &mut dyn Session<'h>, _: &'static str) {}
}
