//! The HTTP/1.1 driver for a downstream connection, plain or TLS: read bytes,
//! run the sans-IO parser, route, hand the request to its handler as a
//! [`Session`], write the answer.
//!
//! Framing, `HEAD`, keep-alive, `100 Continue`, lingering close, the access-log
//! record and the request metrics are decided here and nowhere else. Pipelined
//! requests that arrive in one read are answered with one write. A keep-alive
//! connection idle for more than a moment hands its buffers back to the
//! worker's pool, so it costs little more than its socket.

mod log;
mod push;
mod send;
mod session;
#[cfg(test)]
mod tests;

use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::futures::Notified;
use tokio::time::Instant;
use tracing::debug;

use crate::http::client_address::ClientAddress;
use crate::http::{Body, BodyReadError, RequestRecord, SessionExt};
use crate::http1::parse::{parse_request, BodyKind, Parsed};
use crate::http1::write;
use crate::observe::metrics::HandlerKind;
use crate::service::{self, DriverSession, NeverAbandoned, Outcome};
use crate::worker::{ConnBuffers, WorkerCtx, READ_BUF};

pub use super::transport::Downstream;
use crate::deadline::{io_within, Deadline, RollingDeadline};
use push::PushState;
use session::BodyReader;

/// Output is flushed once this much is pending, bounding memory under pipelining floods.
pub(crate) const WRITE_HIGH_WATER: usize = 64 * 1024;
/// Lingering close: how long and how much to drain after an error response, so the
/// client reads the response instead of a reset.
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 256 * 1024;
/// How long a connection idle between requests keeps its buffers: a client
/// that sends its next request within it (a page's requests, a busy API
/// client) costs no trip to the worker's pool; one idle longer gives them back.
const BUFFERS_KEPT_IDLE: Duration = Duration::from_secs(1);

/// Why a connection ends.
pub enum Exit {
    /// Nothing more to say: end of stream, idle timeout, shutdown, or `Connection: close` answered.
    Done,
    /// Answer with this status and close, draining the input for a moment.
    Reject(u16),
    /// The socket failed; nothing can be sent.
    Broken,
}

/// One downstream HTTP/1 connection's state. `'a` is the worker context's
/// lifetime, which the configuration and its handlers share.
pub struct Http1Conn<'a, D> {
    pub(crate) io: D,
    pub(crate) ctx: &'a WorkerCtx,
    /// Client address (after PROXY protocol, when the listener accepts it).
    pub(crate) peer: SocketAddr,
    /// The listener's trusted proxies, when it has any: requests from them
    /// may name the client address ([`crate::http::RequestView::client`]).
    pub(crate) client_address: Option<&'a ClientAddress>,
    /// The listener the connection came on, by its position in the configuration.
    pub(crate) listener: usize,
    /// `Alt-Svc` for every answer, when the listener serves HTTP/3.
    pub(crate) alt_svc: Option<std::rc::Rc<[u8]>>,
    pub(crate) bufs: Option<ConnBuffers>,
    /// Start of unconsumed input in `bufs.read`.
    pub(crate) rpos: usize,
    requests: u64,
    /// Bytes written downstream so far, so a log line can tell one response's size.
    pub(crate) sent: u64,
    /// The current request's record: its identifier, trace, status and what
    /// the access log notes.
    pub(crate) record: RequestRecord,
    /// Whether the connection may carry the next request once the current
    /// answer is sent: decided when the answer's body starts.
    keep_alive_after: bool,
    /// Set when the connection ends with input left unread (a request body the
    /// answer made moot): read and drop it for a moment after the last write,
    /// so the client sees the answer rather than a reset.
    pub(crate) linger_on_close: bool,
    /// The request being logged, copied out of the read buffer, which the proxy
    /// consumes; only allocated when the access log is on.
    logged: Option<Box<log::LoggedRequest>>,
    /// The answer to the current request, once the handler gave one.
    answer: Option<Answered>,
    /// The request body being read through the session.
    body: BodyReader,
    /// The body still to send after the head, which is in the output buffer.
    pending: Option<Body<'a>>,
    /// The idle deadline between requests, and the body read timeout while a
    /// request body waits: one timer for the connection's life.
    pub(super) idle: RollingDeadline,
    /// Waits for the worker's drain between requests; registered at the first
    /// keep-alive wait and kept, so later waits do not register again.
    drain: Option<Pin<Box<Notified<'a>>>>,
    /// `drain` has been polled, so it holds the task's waker.
    drain_polled: bool,
    /// A body the handler pushes piece by piece.
    push: PushState,
}

/// What the driver decided when the head was written.
#[derive(Clone, Copy)]
struct Answered {
    keep_alive: bool,
    /// Chunked framing: the pending stream ends with the last chunk and trailers.
    chunked: bool,
    /// Content-Length promised, checked against what a stream produces.
    length: Option<u64>,
}

/// Serves one downstream HTTP/1 connection until it closes.
pub async fn serve_http1<'a, D: Downstream>(
    io: D,
    ctx: &'a WorkerCtx,
    peer: SocketAddr,
    listener: usize,
    client_address: Option<&'a ClientAddress>,
) {
    let mut conn = Http1Conn {
        io,
        ctx,
        peer,
        client_address,
        listener,
        alt_svc: ctx.alt_svc(listener),
        bufs: None,
        rpos: 0,
        requests: 0,
        sent: 0,
        record: RequestRecord::default(),
        keep_alive_after: false,
        linger_on_close: false,
        logged: None,
        answer: None,
        body: BodyReader::default(),
        pending: None,
        idle: RollingDeadline::default(),
        drain: None,
        drain_polled: false,
        push: PushState::default(),
    };
    // A new wake-up of this task (after the accept or the TLS handshake).
    ctx.clock.woke();
    let exit = conn.run().await;
    match exit {
        Exit::Done => {
            let flushed = conn.flush().await.is_ok();
            conn.io.shutdown().await;
            if flushed && conn.linger_on_close {
                conn.linger().await;
            }
        }
        Exit::Reject(status) => {
            debug!(peer = %conn.peer, status, "rejecting request");
            ctx.stats.request(HandlerKind::Error, status);
            if ctx.access_log.is_some() && !conn.log_active() {
                // Refused before it was routed: a line without a request.
                conn.begin_log(false);
            }
            let b = conn.bufs.get_or_insert_with(|| ctx.take_buffers());
            write::write_error(&mut b.write, status, ctx.date.borrow_mut().get());
            let flushed = conn.flush().await.is_ok();
            if let Some(log) = &ctx.access_log {
                conn.record.status = status;
                conn.end_log(log);
            }
            if flushed {
                conn.io.shutdown().await;
                conn.linger().await;
            }
        }
        Exit::Broken => {}
    }
    if let Some(b) = conn.bufs.take() {
        ctx.give_buffers(b);
    }
}

impl<'a, D: Downstream> Http1Conn<'a, D> {
    fn unread(&self) -> usize {
        self.bufs.as_ref().map_or(0, |b| b.read.len() - self.rpos)
    }

    /// Whether this connection may carry another request after the current one,
    /// as far as the worker is concerned: the one place keep-alive is decided,
    /// with the request's own wish.
    pub(crate) fn keep_alive_allowed(&self) -> bool {
        self.bufs.as_ref().is_some_and(|b| b.head.keep_alive) && !self.ctx.draining.get()
    }

    /// Writes out everything pending in the output buffer.
    pub(crate) async fn flush(&mut self) -> std::io::Result<()> {
        let Some(b) = self.bufs.as_mut() else {
            return Ok(());
        };
        if b.write.is_empty() {
            return Ok(());
        }
        self.note_log_head();
        let b = self.bufs.as_mut().expect("checked above");
        let r = match self.io.write_now(&b.write) {
            Ok(n) if n == b.write.len() => Ok(()),
            Ok(n) => {
                let r = io_within(
                    self.ctx.config.http.write_timeout,
                    "write timeout",
                    self.io.write_all(&b.write[n..]),
                )
                .await;
                self.ctx.clock.woke();
                r
            }
            Err(e) => Err(e),
        };
        if r.is_ok() {
            self.ctx.stats.bytes_out.add(b.write.len() as u64);
            self.sent += b.write.len() as u64;
        }
        b.write.clear();
        r
    }

    /// Reads more input, keeping unconsumed bytes and leaving room for at least a few KiB.
    async fn read_more(&mut self, deadline: &mut Deadline) -> Result<usize, Exit> {
        let b = self.bufs.as_mut().expect("buffers held while reading");
        if self.rpos > 0 {
            b.read.drain(..self.rpos);
            self.rpos = 0;
        }
        if b.read.capacity() - b.read.len() < 2048 {
            b.read.reserve(READ_BUF);
        }
        // Bytes that are there already (the usual case after a readiness
        // wait) are read without a future or a deadline around the read.
        let r = match self.io.read_now(&mut b.read) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let r = deadline.run(self.io.read_into(&mut b.read)).await;
                self.ctx.clock.woke();
                r
            }
            r => Ok(r),
        };
        match r {
            Ok(Ok(n)) => {
                self.ctx.stats.bytes_in.add(n as u64);
                Ok(n)
            }
            Ok(Err(_)) => Err(Exit::Broken),
            Err(_) => Err(Exit::Reject(408)),
        }
    }

    async fn run(&mut self) -> Exit {
        let ctx = self.ctx;
        let http = &ctx.config.http;
        let accepted = ctx.clock.now();
        loop {
            // Idle between requests: wait for bytes, with the buffers kept
            // while the wait is brief and given back once it is not.
            if self.unread() == 0 {
                if self.flush().await.is_err() {
                    return Exit::Broken;
                }
                if let Some(b) = self.bufs.as_mut() {
                    b.read.clear();
                }
                self.rpos = 0;
                // A drain closes connections between requests, not before the
                // first: its client has reused nothing and would not retry. That
                // first request waits at most `header_read_timeout`.
                if self.requests > 0 && ctx.draining.get() {
                    return Exit::Done;
                }
                // The idle limit runs from this wake-up: the clock read that
                // timed the last request serves, and the timer stays armed.
                let now = ctx.clock.now();
                // A drain signal once polled holds this task's waker and
                // wakes it; one that came between waits was seen by the check
                // above. One not yet polled (new, or its wait ended at the
                // first look at the socket) is polled at once.
                let idle_until = if self.requests == 0 {
                    accepted + http.header_read_timeout
                } else {
                    if self.drain.is_none() {
                        let mut drain = Box::pin(ctx.drain_signal.notified());
                        drain.as_mut().enable();
                        self.drain = Some(drain);
                        self.drain_polled = false;
                    }
                    now + http.keepalive_timeout
                };
                let release_at = now + BUFFERS_KEPT_IDLE;
                let (io, idle, drain, drain_polled, bufs) = (
                    &mut self.io,
                    &mut self.idle,
                    &mut self.drain,
                    &mut self.drain_polled,
                    &mut self.bufs,
                );
                let mut resumed = false;
                // Readable first: a drain or the idle limit closes only a
                // connection with nothing to read.
                let woken = poll_fn(|cx| {
                    if let Poll::Ready(r) = io.poll_readable(cx) {
                        return Poll::Ready(r.map_err(|_| Exit::Broken));
                    }
                    if let Some(d) = drain.as_mut().filter(|_| resumed || !*drain_polled) {
                        if d.as_mut().poll(cx).is_ready() {
                            return Poll::Ready(Err(Exit::Done));
                        }
                        *drain_polled = true;
                    }
                    loop {
                        let holding = bufs.is_some() && release_at < idle_until;
                        let until = if holding { release_at } else { idle_until };
                        let passed = idle.poll_wait_passed(cx, until, resumed);
                        resumed = true;
                        std::task::ready!(passed);
                        if !holding {
                            return Poll::Ready(Err(Exit::Done));
                        }
                        // Idle past a brief pause: the buffers go back to the
                        // worker, and the connection costs little more than
                        // its socket until its client speaks again.
                        if let Some(b) = bufs.take() {
                            ctx.give_buffers(b);
                        }
                    }
                })
                .await;
                ctx.clock.woke();
                if let Err(e) = woken {
                    return e;
                }
                if self.bufs.is_none() {
                    self.bufs = Some(ctx.take_buffers());
                }
            }
            // The head deadline starts with the connection for its first request, and
            // with the first incomplete read for later ones; a head that is already
            // buffered whole needs no clock read at all.
            let mut head_deadline = if self.requests == 0 {
                Deadline::at(accepted + http.header_read_timeout)
            } else {
                Deadline::after(http.header_read_timeout)
            };
            // Read until a whole head is buffered.
            loop {
                let b = self.bufs.as_mut().expect("buffers held while parsing");
                // Nothing buffered (a wake-up for a new request): read before parsing.
                let parsed = if b.read.len() == self.rpos {
                    Ok(Parsed::Partial)
                } else {
                    parse_request(&b.read[self.rpos..], &http.limits, &mut b.head)
                };
                match parsed {
                    Ok(Parsed::Complete) => break,
                    Ok(Parsed::Partial) => {
                        if self.flush().await.is_err() {
                            return Exit::Broken;
                        }
                        let had = self.unread();
                        match self.read_more(&mut head_deadline).await {
                            Ok(0) => return Exit::Done,
                            Ok(_) => {}
                            Err(Exit::Reject(408)) if had == 0 => return Exit::Done,
                            Err(e) => return e,
                        }
                    }
                    Err(e) => return Exit::Reject(e.status()),
                }
            }

            let keep_alive = match self.handle().await {
                Ok(k) => k,
                Err(e) => return e,
            };
            self.requests += 1;
            if !keep_alive {
                return Exit::Done;
            }
            if self
                .bufs
                .as_ref()
                .is_some_and(|b| b.write.len() >= WRITE_HIGH_WATER)
                && self.flush().await.is_err()
            {
                return Exit::Broken;
            }
        }
    }

    /// Hands the parsed request to the service step, then sends the answer;
    /// returns whether the connection stays open.
    async fn answer(&mut self, started: Instant) -> Result<bool, Exit> {
        let b = self.bufs.as_ref().expect("buffers held while handling");
        let head_len = b.head.head_len;
        // `pending` is always taken by the previous answer.
        self.answer = None;
        self.record.request_id.reset();
        self.record.trace.reset();
        self.record.body_error = None;
        self.body.start(
            b.head.body,
            b.head.expect_continue,
            self.rpos + head_len,
            self.ctx.config.http.max_body_bytes,
        );
        match service::serve_request(self, started).await {
            Outcome::Answered { .. } => Ok(self.keep_alive_after),
            // A client gives up on an HTTP/1 request only by closing.
            Outcome::Abandoned => Err(Exit::Broken),
            Outcome::Stopped(exit) => Err(exit),
        }
    }

    /// Reads and drops a request body the handler does not want, keeping the
    /// head in place in front of it. A declared length over the limit is
    /// refused before reading anything.
    async fn discard_request_body(&mut self, kind: BodyKind) -> Result<(), Exit> {
        match kind {
            BodyKind::None => Ok(()),
            BodyKind::Length(n) if n > self.ctx.config.http.max_body_bytes => {
                Err(Exit::Reject(413))
            }
            _ => {
                let r = self.discard_body().await.map_err(body_exit);
                self.ctx.clock.woke();
                r
            }
        }
    }

    /// After an error response: stop sending, then read and drop input for a
    /// moment so the peer sees the response rather than a reset.
    async fn linger(&mut self) {
        let Some(b) = self.bufs.as_mut() else { return };
        let mut deadline = Deadline::after(LINGER_TIME);
        let mut seen = 0;
        while seen < LINGER_BYTES {
            b.read.clear();
            b.read.reserve(READ_BUF);
            match deadline.run(self.io.read_into(&mut b.read)).await {
                Ok(Ok(n)) if n > 0 => seen += n,
                _ => break,
            }
        }
        b.read.clear();
    }
}

/// How HTTP/1 meets the service step: a body nobody reads is read off the
/// connection, a body over the limit is refused with the connection, and the
/// client gives up on a request only by closing.
impl<'a, D: Downstream> DriverSession<'a> for Http1Conn<'a, D> {
    type Stop = Exit;
    type Watch = NeverAbandoned;

    fn protocol_version(&self) -> &'static str {
        match crate::http::Session::request(self).version() {
            crate::http1::parse::Version::Http10 => "1.0",
            _ => "1.1",
        }
    }

    fn watch(&self) -> NeverAbandoned {
        NeverAbandoned
    }

    async fn skip_unwanted_body(&mut self) -> Result<(), Exit> {
        let kind = self.bufs.as_ref().map_or(BodyKind::None, |b| b.head.body);
        self.discard_request_body(kind).await
    }

    fn refuse_oversized_body(&mut self) -> Result<(), Exit> {
        Err(Exit::Reject(413))
    }

    fn answer_body_error(&mut self, error: BodyReadError) -> Result<(), Exit> {
        Err(body_exit(error))
    }

    async fn finish_answer(&mut self) -> Result<(), Exit> {
        if self.push.end() {
            // A pushed body left short: the client must not take it for whole.
            debug!(peer = %self.peer, "pushed response body left unfinished");
            return Err(Exit::Broken);
        }
        let answered = self.answer.expect("an answer was given");
        let body_done = self.body.finish(&mut self.rpos);
        self.keep_alive_after = answered.keep_alive && body_done;
        if !body_done {
            self.linger_on_close = true;
        }
        if let Some(body) = self.pending.take() {
            let r = self.send_body(body, answered).await;
            self.ctx.clock.woke();
            r?;
        }
        Ok(())
    }
}

/// How a failed body read ends the connection.
fn body_exit(e: BodyReadError) -> Exit {
    match e {
        BodyReadError::TooLarge => Exit::Reject(413),
        BodyReadError::Malformed => Exit::Reject(400),
        BodyReadError::Timeout => Exit::Reject(408),
        BodyReadError::Closed => Exit::Done,
    }
}
