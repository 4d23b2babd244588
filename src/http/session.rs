//! The downstream session: the one interface between a driver and a handler.
//!
//! It is object-safe (handlers take `&mut dyn Session`), so handlers are
//! compiled once whatever the transport, and poll-based where it waits, so a
//! driver over HTTP/2 streams can implement it without a runtime of its own.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::request::RequestView;
use super::request_id::RequestId;
use super::response::{Body, ResponseHead};
use crate::worker::WorkerCtx;

/// Why the request body could not be read; the driver answers it (413, 400,
/// 408) or closes, and the handler only stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyReadError {
    /// Larger than the configured body limit: 413.
    TooLarge,
    /// Broken framing (a bad chunk): 400.
    Malformed,
    /// The client stalled past the body read timeout: 408.
    Timeout,
    /// The client went away mid-body, or the socket failed.
    Closed,
}

/// What a handler's `serve` left to do.
pub enum Served<'s> {
    /// The response was given to the session (or the handler chose not to answer,
    /// in which case the driver answers 500).
    Done,
    /// The handler waits for something (the request body, an upstream): the
    /// driver polls this until it completes.
    Pending(Pin<Box<dyn Future<Output = ()> + 's>>),
}

/// One request as a handler sees it. `'h` is the lifetime of the handler and its
/// configuration, which response bodies may borrow.
pub trait Session<'h> {
    /// The request head.
    fn request(&self) -> RequestView<'_>;

    /// The worker's state for the configuration this request is served under
    /// (caches, pools, counters).
    fn worker(&self) -> &WorkerCtx;

    /// Waits until request body bytes are available and returns how many
    /// [`Session::body_chunk`] holds; `Ok(0)` once the body is complete. The
    /// first wait for bytes sends `100 Continue` when the client asked for it;
    /// the body limit and the read timeout are the driver's.
    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>>;

    /// Body bytes made available by the last [`Session::poll_body`].
    fn body_chunk(&self) -> &[u8];

    /// Marks `n` bytes of [`Session::body_chunk`] as used.
    fn consume_body(&mut self, n: usize);

    /// Answers with `head` and `body`. The driver decides the framing from the
    /// body (a known length or chunks), drops the body for `HEAD`, and sends it
    /// once the handler returns. Only the first call counts.
    fn send_response(&mut self, head: &ResponseHead<'_>, body: Body<'h>);

    /// Whether a response was given already.
    fn responded(&self) -> bool;

    /// This request's identifier: one per request, made on first use, the
    /// same for every filter, handler and upstream request that shows it.
    fn request_id(&self) -> &RequestId;

    /// The HTTP/1 connection itself, for a handler that still drives it
    /// directly (the proxy, until it reads and writes through this interface).
    /// Drivers of other protocols return `None`.
    fn legacy_http1(&mut self) -> Option<crate::server::h1::LegacyHttp1<'_, 'h>> {
        None
    }
}

/// `async` conveniences over the poll methods.
#[allow(async_fn_in_trait)]
pub trait SessionExt<'h>: Session<'h> {
    /// Waits for request body bytes; see [`Session::poll_body`].
    async fn fill_body(&mut self) -> Result<usize, BodyReadError> {
        std::future::poll_fn(|cx| self.poll_body(cx)).await
    }

    /// Reads and drops the rest of the request body.
    async fn discard_body(&mut self) -> Result<(), BodyReadError> {
        loop {
            match self.fill_body().await? {
                0 => return Ok(()),
                n => self.consume_body(n),
            }
        }
    }
}

impl<'h, S: Session<'h> + ?Sized> SessionExt<'h> for S {}
