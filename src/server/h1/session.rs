//! The HTTP/1 driver as a [`Session`]: the request view over the parsed head,
//! the request body read in place from the connection's buffer, and the
//! response head encoded into the output buffer.

use std::io;
use std::task::{Context, Poll};

use tokio::time::Instant;

use super::{Downstream, Http1Conn};
use crate::http::{
    poll_body_once, Body, BodyReadError, RequestRecord, RequestView, ResponseHead, Session,
};
use crate::http1::body::{BodyDecoder, BodyError};
use crate::http1::parse::{BodyKind, Version};
use crate::worker::{WorkerCtx, READ_BUF};

/// Request body state: the body's bytes are decoded in place, just past the
/// head, and dropped from the buffer once the handler has used them, so the
/// head stays where the request view expects it.
#[derive(Default)]
pub(super) struct BodyReader {
    decoder: Option<BodyDecoder>,
    /// `100 Continue` sent, or not asked for.
    continued: bool,
    /// Offset in the read buffer just past the head.
    start: usize,
    /// Undecoded input starts here.
    pos: usize,
    /// Decoded bytes not yet consumed: `chunk.0..chunk.1` of the read buffer.
    chunk: (usize, usize),
    done: bool,
    /// When the read that waits now started waiting: the body read timeout
    /// runs from there (on the connection's idle timer, which is not in use
    /// while a request is answered).
    stalled_since: Option<Instant>,
}

impl BodyReader {
    /// Prepares for the body of the request whose head ends at `start`; a
    /// request without a body (most) costs a few stores.
    #[inline]
    pub(super) fn start(&mut self, kind: BodyKind, expect_continue: bool, start: usize, max: u64) {
        self.start = start;
        self.pos = start;
        self.chunk = (start, start);
        if kind == BodyKind::None {
            // A decoder left from an earlier request is never used: `done` says so.
            self.done = true;
            self.continued = true;
        } else {
            self.start_decoding(kind, expect_continue, max);
        }
    }

    fn start_decoding(&mut self, kind: BodyKind, expect_continue: bool, max: u64) {
        // The limit goes into the decoder so a chunk whose size line alone
        // exceeds it is refused at once, not after the client trickled its data.
        self.decoder = Some(BodyDecoder::new(kind).with_max_body(max));
        self.done = false;
        self.continued = !expect_continue;
        self.stalled_since = None;
    }

    /// Whether the whole body was read.
    pub(super) fn is_done(&self) -> bool {
        self.done
    }

    /// Whether the whole body was read; if so, moves `rpos` to the next request.
    pub(super) fn finish(&mut self, rpos: &mut usize) -> bool {
        if self.done {
            *rpos = self.pos;
        }
        self.done
    }
}

fn read_error(e: BodyError) -> BodyReadError {
    match e {
        BodyError::TooLarge => BodyReadError::TooLarge,
        _ => BodyReadError::Malformed,
    }
}

impl<'a, D: Downstream> Http1Conn<'a, D> {
    /// Writes what the output buffer holds without waiting past readiness.
    pub(super) fn poll_flush_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.note_log_head();
        let Some(b) = self.bufs.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        while !b.write.is_empty() {
            let n = std::task::ready!(self.io.poll_write_some(cx, &b.write))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            b.write.drain(..n);
            self.ctx.stats.bytes_out.add(n as u64);
            self.sent += n as u64;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_body_inner(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>> {
        loop {
            let r = &mut self.body;
            if r.chunk.1 > r.chunk.0 {
                return Poll::Ready(Ok(r.chunk.1 - r.chunk.0));
            }
            if r.done {
                return Poll::Ready(Ok(0));
            }
            let b = self
                .bufs
                .as_mut()
                .expect("buffers held while reading a body");
            if r.pos > r.start {
                b.read.drain(r.start..r.pos);
                r.pos = r.start;
                r.chunk = (r.start, r.start);
            }
            let decoder = r.decoder.as_mut().expect("a body to read");
            // Decoded even when nothing is buffered: an empty body (a
            // `Content-Length: 0`) is complete without a byte.
            let input = &b.read[r.pos..];
            let step = decoder.decode(input).map_err(read_error)?;
            r.chunk = if step.data.is_empty() {
                // An empty slice need not point into the input.
                (r.pos, r.pos)
            } else {
                let offset = step.data.as_ptr() as usize - input.as_ptr() as usize;
                (r.pos + offset, r.pos + offset + step.data.len())
            };
            r.pos += step.consumed;
            r.done = step.done;
            if step.consumed > 0 || step.done {
                continue;
            }
            // Once a final answer is given the client is not invited to send
            // the body (RFC 9110 §10.1.1): it is read only if it comes anyway.
            if !r.continued && self.answer.is_none() {
                r.continued = true;
                b.write.extend_from_slice(crate::http1::write::CONTINUE);
            }
            if !b.write.is_empty() {
                match self.poll_flush_out(cx) {
                    Poll::Ready(Ok(())) => {}
                    Poll::Ready(Err(_)) => return Poll::Ready(Err(BodyReadError::Closed)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            let b = self
                .bufs
                .as_mut()
                .expect("buffers held while reading a body");
            if b.read.capacity() - b.read.len() < 2048 {
                b.read.reserve(READ_BUF);
            }
            match self.io.poll_read_into(cx, &mut b.read) {
                Poll::Ready(Ok(0)) => {
                    // Cut short: the decoder says whether that ends the body
                    // (it does only for a body read until close).
                    let r = &mut self.body;
                    match r.decoder.as_ref().map(BodyDecoder::finish) {
                        Some(Ok(())) => r.done = true,
                        _ => return Poll::Ready(Err(BodyReadError::Closed)),
                    }
                }
                Poll::Ready(Ok(n)) => {
                    self.ctx.stats.bytes_in.add(n as u64);
                    self.body.stalled_since = None;
                }
                Poll::Ready(Err(_)) => return Poll::Ready(Err(BodyReadError::Closed)),
                Poll::Pending => {
                    let limit = self.ctx.config.http.body_read_timeout;
                    // A read that waits is the slow path: the clock is read
                    // as it starts waiting, not taken from the wake-up.
                    let since = *self.body.stalled_since.get_or_insert_with(Instant::now);
                    if self.idle.poll_passed(cx, since + limit).is_ready() {
                        return Poll::Ready(Err(BodyReadError::Timeout));
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

impl<'a, D: Downstream> Session<'a> for Http1Conn<'a, D> {
    fn request(&self) -> RequestView<'_> {
        let b = self.bufs.as_ref().expect("buffers held while handling");
        let view = RequestView::http1(
            &b.head,
            &b.read[self.rpos..],
            self.peer,
            self.io.tls_facts(),
        )
        .on_listener(self.listener);
        match self.client_address {
            Some(trusted) => view.with_client_address(trusted),
            None => view,
        }
    }

    fn worker(&self) -> &'a WorkerCtx {
        self.ctx
    }

    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>> {
        poll_body_once(self, cx, Self::poll_body_inner)
    }

    fn body_chunk(&self) -> &[u8] {
        let (start, end) = self.body.chunk;
        self.bufs
            .as_ref()
            .and_then(|b| b.read.get(start..end))
            .unwrap_or(&[])
    }

    fn consume_body(&mut self, n: usize) {
        let r = &mut self.body;
        r.chunk.0 = (r.chunk.0 + n).min(r.chunk.1);
    }

    fn send_response(&mut self, head: &ResponseHead<'_>, body: Body<'a>) {
        self.encode_response(head, body);
    }

    fn responded(&self) -> bool {
        self.answer.is_some()
    }

    fn send_interim(&mut self, status: u16, fields: &[(&str, &[u8])]) {
        if self.answer.is_some() || !crate::http::status::is_interim(status) {
            return;
        }
        let Some(b) = self.bufs.as_mut() else {
            return;
        };
        // HTTP/1.0 has no interim answers: its client would take one for the
        // response.
        if b.head.version != Version::Http11 {
            return;
        }
        if status == 100 {
            if self.body.continued {
                return;
            }
            self.body.continued = true;
        }
        // Queued behind whatever answers precede it; flushed with the next
        // write or by `poll_flush_body`.
        crate::http1::write::write_interim(&mut b.write, status, fields);
    }

    fn record(&self) -> &RequestRecord {
        &self.record
    }

    fn record_mut(&mut self) -> &mut RequestRecord {
        &mut self.record
    }

    fn poll_write_body(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_push(cx, data)
    }

    fn poll_write_body_gathered(
        &mut self,
        cx: &mut Context<'_>,
        pieces: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_push_gathered(cx, pieces)
    }

    fn poll_flush_body(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Before the answer, what is queued is interim heads (the last
        // response's body state says nothing then).
        if self.push.drop && self.answer.is_some() {
            return Poll::Ready(Ok(()));
        }
        self.poll_flush_timed(cx)
    }

    fn finish_body(&mut self, trailers: &[(&str, &[u8])]) {
        self.finish_push(trailers);
    }
}
