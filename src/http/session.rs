//! The downstream session: the one interface between a driver and a handler.
//!
//! It is object-safe (handlers take `&mut dyn Session`), so handlers are
//! compiled once whatever the transport, and poll-based where it waits, so a
//! driver over HTTP/2 streams can implement it without a runtime of its own.

use std::future::Future;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::request::RequestView;
use super::request_id::RequestId;
use super::request_trace::RequestTrace;
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

impl BodyReadError {
    /// The status that answers a request whose body failed so, on a
    /// protocol that can still answer it; `None` when the client went away.
    pub fn status(self) -> Option<u16> {
        match self {
            BodyReadError::TooLarge => Some(413),
            BodyReadError::Malformed => Some(400),
            BodyReadError::Timeout => Some(408),
            BodyReadError::Closed => None,
        }
    }
}

/// What a driver keeps of one request beside its framing, alike on every
/// protocol: its identifier and trace, the status answered, why its body
/// could not be read, and what the access log notes. One type, so the
/// accessors of [`Session`] and of the service step are written once, over
/// [`Session::record`].
#[derive(Default)]
pub struct RequestRecord {
    /// The request's identifier, made only if something shows it.
    pub request_id: RequestId,
    /// The request's trace (off unless tracing is on).
    pub trace: RequestTrace,
    /// The status answered so far; 0 before an answer.
    pub status: u16,
    /// Why reading the request body failed, for the driver to answer.
    pub body_error: Option<BodyReadError>,
    /// The upstream server and the time to its response head, set by the
    /// proxy for the access log.
    pub upstream: Option<(SocketAddr, Duration)>,
    /// How a cache answered the request, for the access log.
    pub cache: Option<&'static str>,
}

/// A driver's [`Session::poll_body`]: polls its own read of the body unless
/// an earlier read failed, and keeps a failure in the record, so every later
/// read fails alike.
pub fn poll_body_once<'h, S: Session<'h> + ?Sized>(
    s: &mut S,
    cx: &mut Context<'_>,
    read: impl FnOnce(&mut S, &mut Context<'_>) -> Poll<Result<usize, BodyReadError>>,
) -> Poll<Result<usize, BodyReadError>> {
    if let Some(e) = s.record().body_error {
        return Poll::Ready(Err(e));
    }
    let r = read(s, cx);
    if let Poll::Ready(Err(e)) = r {
        s.record_mut().body_error = Some(e);
    }
    r
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
    /// (caches, pools, counters). It outlives the request, so a handler may
    /// hold it (an admission, a pool) while it reads and writes the session.
    fn worker(&self) -> &'h WorkerCtx;

    /// Waits until request body bytes are available and returns how many
    /// [`Session::body_chunk`] holds; `Ok(0)` once the body is complete. The
    /// first wait for bytes sends `100 Continue` when the client asked for it;
    /// the body limit and the read timeout are the driver's.
    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>>;

    /// Body bytes made available by the last [`Session::poll_body`].
    fn body_chunk(&self) -> &[u8];

    /// Marks `n` bytes of [`Session::body_chunk`] as used.
    fn consume_body(&mut self, n: usize);

    /// The request's trailer fields, once [`Session::poll_body`] said the body
    /// is complete, for the proxy to relay (gRPC client streaming may send
    /// them). Drivers that do not keep them (HTTP/1) have none.
    fn request_trailers(&self) -> Vec<(&str, &[u8])> {
        Vec::new()
    }

    /// Answers with `head` and `body`. The driver decides the framing from the
    /// body (a known length or chunks), drops the body for `HEAD`, and sends it
    /// once the handler returns. Only the first call counts.
    fn send_response(&mut self, head: &ResponseHead<'_>, body: Body<'h>);

    /// Whether a response was given already.
    fn responded(&self) -> bool;

    /// Sends an interim (1xx) response ahead of the final one, as a proxy
    /// relays an upstream's `103 Early Hints` (its `Link` fields let the
    /// client fetch what the page needs while the server still works on it).
    /// `fields` are end-to-end fields with token names. The driver queues the
    /// head in front of the final answer and sends it with its next write;
    /// [`Session::poll_flush_body`] sends it at once. It is dropped where it
    /// has no place: once the final head was given, for an HTTP/1.0 client
    /// (which knows no 1xx), for a status outside 100..=199 or 101 (an upgrade
    /// is a final answer here), and for a `100 Continue` the client did not
    /// ask for or was sent already (the driver sends its own as the body is
    /// first waited for: a client never gets two). By default, for a session
    /// that answers no client, it is dropped.
    fn send_interim(&mut self, status: u16, fields: &[(&str, &[u8])]) {
        let _ = (status, fields);
    }

    /// The driver's record of this request: its identifier, trace, status
    /// and what the access log notes. A layer passes its inner session's.
    /// Handlers read it, and note through [`Session::note_upstream`] and
    /// [`Session::note_cache`] so a layer sees what they note.
    fn record(&self) -> &RequestRecord;

    /// The record, to write; see [`Session::record`].
    fn record_mut(&mut self) -> &mut RequestRecord;

    /// This request's identifier: one per request, made on first use, the
    /// same for every filter, handler and upstream request that shows it.
    fn request_id(&self) -> &RequestId {
        &self.record().request_id
    }

    /// This request's trace: off unless tracing is on, then its context, the
    /// `traceparent` upstreams get and the spans it records.
    fn trace(&self) -> &RequestTrace {
        &self.record().trace
    }

    /// Takes the next piece of a [`Body::Push`] body and returns how much of
    /// `data` it took (call again with the rest). The driver frames it (a
    /// chunk, or bytes counted against the promised length), drops it for
    /// `HEAD`, and waits only when its output is full, so a handler relays a
    /// body without holding more than a buffer. Each wait is bounded by the
    /// driver's write timeout.
    fn poll_write_body(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>>;

    /// Takes the next pieces of a [`Body::Push`] body, in order, and returns
    /// how many bytes of them it took, as [`Session::poll_write_body`] does.
    /// A handler holding the body as several buffers (a stored response) hands
    /// them all at once: the HTTP/1 driver over plain TCP then sends its
    /// pending head and the pieces in one gathered write, copying none of
    /// them. By default only the first piece that is not empty is taken.
    fn poll_write_body_gathered(
        &mut self,
        cx: &mut Context<'_>,
        pieces: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match pieces.iter().find(|p| !p.is_empty()) {
            Some(first) => self.poll_write_body(cx, first),
            None => Poll::Ready(Ok(0)),
        }
    }

    /// Sends what the driver holds of a [`Body::Push`] body; a handler calls
    /// it before it waits for more of the body, so a slow source's bytes are
    /// not held back. Before the final head, it sends the interim heads
    /// queued by [`Session::send_interim`].
    fn poll_flush_body(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>>;

    /// Ends a [`Body::Push`] body, with trailer fields: the one way a handler
    /// sends response trailers (a relayed gRPC status). They go where the
    /// framing carries them (HTTP/1.1 chunked: after the last chunk; HTTP/2: a
    /// HEADERS frame ending the stream) and are dropped otherwise (a known
    /// length, HTTP/1.0, `HEAD`). A pushed body never finished,
    /// or shorter than its promised length, ends the connection (HTTP/1) or
    /// resets the stream (HTTP/2): the client must not take it for whole.
    fn finish_body(&mut self, trailers: &[(&str, &[u8])]);

    /// Records the upstream server that answered (or failed) and the time to
    /// its response head, for the access log.
    fn note_upstream(&mut self, addr: SocketAddr, elapsed: Duration) {
        self.record_mut().upstream = Some((addr, elapsed));
    }

    /// Records how a cache answered (`hit`, `miss`, `stale`, `revalidated`,
    /// `expired`, `collapsed`), for the access log.
    fn note_cache(&mut self, outcome: &'static str) {
        self.record_mut().cache = Some(outcome);
    }
}

/// `async` conveniences over the poll methods.
#[allow(async_fn_in_trait)]
pub trait SessionExt<'h>: Session<'h> {
    /// Waits for request body bytes; see [`Session::poll_body`].
    async fn fill_body(&mut self) -> Result<usize, BodyReadError> {
        std::future::poll_fn(|cx| self.poll_body(cx)).await
    }

    /// Hands `data` to a [`Body::Push`] body whole; see
    /// [`Session::poll_write_body`].
    async fn write_body(&mut self, mut data: &[u8]) -> std::io::Result<()> {
        while !data.is_empty() {
            let n = std::future::poll_fn(|cx| self.poll_write_body(cx, data)).await?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Hands all of `pieces` to a [`Body::Push`] body; see
    /// [`Session::poll_write_body_gathered`].
    async fn write_body_gathered(&mut self, mut pieces: &mut [IoSlice<'_>]) -> std::io::Result<()> {
        IoSlice::advance_slices(&mut pieces, 0);
        while !pieces.is_empty() {
            let n = std::future::poll_fn(|cx| self.poll_write_body_gathered(cx, pieces)).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut pieces, n);
        }
        Ok(())
    }

    /// Sends what is held of a pushed body; see [`Session::poll_flush_body`].
    async fn flush_body(&mut self) -> std::io::Result<()> {
        std::future::poll_fn(|cx| self.poll_flush_body(cx)).await
    }

    /// Reads the rest of the request body into one buffer (the driver's body
    /// limit bounds it), for a handler that needs it whole.
    async fn read_body_to_end(&mut self) -> Result<Vec<u8>, BodyReadError> {
        let mut got = Vec::new();
        loop {
            match self.fill_body().await? {
                0 => return Ok(got),
                n => {
                    got.extend_from_slice(self.body_chunk());
                    self.consume_body(n);
                }
            }
        }
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
