//! A body the handler pushes after the head ([`Body::Push`]): each piece is
//! framed as it comes (a chunk, or bytes counted against the promised
//! length), copied behind what is pending when small and written straight
//! from the handler's buffer when large, so a relayed body is never held
//! whole and costs no allocation. A body the handler holds whole in several
//! buffers (a stored response) is taken at once and, over plain TCP, leaves
//! with what is pending in gathered writes (`writev`), none of it copied.
//!
//! [`Body::Push`]: crate::http::Body::Push

use std::io::{self, IoSlice};
use std::task::{ready, Context, Poll};

use tokio::time::Instant;

use super::{Downstream, Http1Conn, WRITE_HIGH_WATER};
use crate::http1::write;

/// Pieces at least this large are written straight from the handler's buffer
/// once the output buffer is flushed (or with it, in one gathered write),
/// rather than copied into it; in-memory bodies this large are not copied
/// behind their head either.
pub(super) const DIRECT_WRITE_MIN: usize = 16 * 1024;

/// Slices per gathered write: the output buffer and this many pieces less
/// one, far under the kernel's `IOV_MAX`; more pieces go with the next write.
const GATHER_SLICES: usize = 64;

/// The state of a pushed body, reset with each response.
#[derive(Default)]
pub(super) struct PushState {
    /// The response's body is pushed by its handler.
    pub(super) active: bool,
    /// `finish_body` was called on a body that kept its framing promise.
    pub(super) finished: bool,
    /// Pieces are counted but not sent: a `HEAD` request, or a status
    /// without a body.
    pub(super) drop: bool,
    /// Body bytes taken so far.
    written: u64,
    /// Bytes of a piece announced (its chunk size line is out) but not yet
    /// written straight from the handler's buffer.
    direct: usize,
    /// When the write that waits started waiting: the write timeout runs
    /// from there, on the connection's one rolling timer.
    pub(super) stalled_since: Option<Instant>,
}

impl PushState {
    /// Starts the pushed body of a new response.
    pub(super) fn start(&mut self, drop: bool) {
        self.active = true;
        self.finished = false;
        self.drop = drop;
        self.written = 0;
        self.direct = 0;
        self.stalled_since = None;
    }

    /// Ends the response's pushed body; true when it was left unfinished (the
    /// connection cannot carry another message).
    pub(super) fn end(&mut self) -> bool {
        let broken = self.active && !self.finished;
        self.active = false;
        broken
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "write timeout")
}

impl<'a, D: Downstream> Http1Conn<'a, D> {
    /// Writes out the output buffer under the write timeout.
    pub(super) fn poll_flush_timed(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.poll_flush_out(cx) {
            Poll::Ready(r) => {
                self.push.stalled_since = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.poll_write_timeout(cx),
        }
    }

    /// Writes some of `data` straight to the transport under the write timeout.
    fn poll_write_direct(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match self.io.poll_write_some(cx, data) {
            Poll::Ready(Ok(0)) => Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            Poll::Ready(Ok(n)) => {
                self.push.stalled_since = None;
                self.ctx.stats.bytes_out.add(n as u64);
                self.sent += n as u64;
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.poll_write_timeout(cx),
        }
    }

    /// A write waits: fails once it has waited for the write timeout.
    fn poll_write_timeout<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.ctx.config.http.write_timeout;
        let since = *self.push.stalled_since.get_or_insert_with(Instant::now);
        if self.idle.poll_passed(cx, since + limit).is_ready() {
            return Poll::Ready(Err(timed_out()));
        }
        Poll::Pending
    }

    /// Takes the next piece of a pushed body; see `Session::poll_write_body`.
    pub(super) fn poll_push(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let Some(answered) = self
            .answer
            .filter(|_| self.push.active && !self.push.finished)
        else {
            return Poll::Ready(Err(io::Error::other("no pushed body is being sent")));
        };
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if self.push.drop {
            self.push.written += data.len() as u64;
            return Poll::Ready(Ok(data.len()));
        }
        if self.push.direct > 0 {
            // The piece's size line is in the output buffer: send it, then the
            // piece from where the handler holds it.
            ready!(self.poll_flush_timed(cx))?;
            let n = data.len().min(self.push.direct);
            let n = ready!(self.poll_write_direct(cx, &data[..n]))?;
            self.push.direct -= n;
            self.push.written += n as u64;
            if self.push.direct == 0 && answered.chunked {
                let b = self.bufs.as_mut().expect("buffers held while answering");
                b.write.extend_from_slice(b"\r\n");
            }
            return Poll::Ready(Ok(n));
        }
        if let Some(len) = answered.length {
            if self.push.written + data.len() as u64 > len {
                return Poll::Ready(Err(io::Error::other("pushed body longer than its length")));
            }
        }
        let pending = self.bufs.as_ref().map_or(0, |b| b.write.len());
        if pending >= WRITE_HIGH_WATER {
            ready!(self.poll_flush_timed(cx))?;
        }
        let b = self.bufs.as_mut().expect("buffers held while answering");
        if data.len() < DIRECT_WRITE_MIN || b.write.len() + data.len() <= WRITE_HIGH_WATER {
            if answered.chunked {
                write::write_chunk(&mut b.write, data);
            } else {
                b.write.extend_from_slice(data);
            }
            self.push.written += data.len() as u64;
            return Poll::Ready(Ok(data.len()));
        }
        // Large: announce the piece, then write it without a copy.
        if answered.chunked {
            write::write_chunk_size(&mut b.write, data.len());
        }
        self.push.direct = data.len();
        self.poll_push(cx, data)
    }

    /// Takes the next pieces of a pushed body at once; see
    /// `Session::poll_write_body_gathered`. Over a transport with gathered
    /// writes, a large body of known length goes out with what is pending
    /// (the head, earlier pipelined answers) in one `writev`, straight from
    /// where the handler holds it; otherwise, and for small or chunked
    /// bodies, piece by piece as [`Http1Conn::poll_push`] takes them.
    pub(super) fn poll_push_gathered(
        &mut self,
        cx: &mut Context<'_>,
        pieces: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let total: usize = pieces.iter().map(|p| p.len()).sum();
        let gather = D::GATHERED_WRITES
            && total >= DIRECT_WRITE_MIN
            && self.push.active
            && !self.push.finished
            && !self.push.drop
            && self.push.direct == 0
            && self.answer.is_some_and(|a| !a.chunked);
        if !gather {
            return match pieces.iter().find(|p| !p.is_empty()) {
                Some(first) => self.poll_push(cx, first),
                None => Poll::Ready(Ok(0)),
            };
        }
        if let Some(len) = self.answer.and_then(|a| a.length) {
            if self.push.written + total as u64 > len {
                return Poll::Ready(Err(io::Error::other("pushed body longer than its length")));
            }
        }
        let n = ready!(self.poll_write_behind_pending(cx, pieces))?;
        self.push.written += n as u64;
        Poll::Ready(Ok(n))
    }

    /// Writes what the output buffer holds, then some of `pieces`, in one
    /// gathered write each time, under the write timeout; returns how many
    /// bytes of `pieces` went (at least one, once the buffer is out).
    pub(super) fn poll_write_behind_pending(
        &mut self,
        cx: &mut Context<'_>,
        pieces: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.note_log_head();
        let b = self.bufs.as_mut().expect("buffers held while answering");
        loop {
            let mut slices = [IoSlice::new(&[]); GATHER_SLICES];
            slices[0] = IoSlice::new(&b.write);
            let mut used = 1;
            for p in pieces.iter().filter(|p| !p.is_empty()) {
                if used == GATHER_SLICES {
                    break;
                }
                slices[used] = *p;
                used += 1;
            }
            let first = usize::from(b.write.is_empty());
            let n = match self.io.poll_write_gathered(cx, &slices[first..used]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return self.poll_write_timeout(cx),
            };
            self.push.stalled_since = None;
            self.ctx.stats.bytes_out.add(n as u64);
            self.sent += n as u64;
            let pending = b.write.len();
            if n >= pending {
                b.write.clear();
                if n > pending || used == 1 {
                    return Poll::Ready(Ok(n - pending));
                }
            } else {
                // Only part of what was pending: the rest goes first next time.
                b.write.drain(..n);
            }
        }
    }

    /// Ends a pushed body; see `Session::finish_body`.
    pub(super) fn finish_push(&mut self, trailers: &[(&str, &[u8])]) {
        let Some(answered) = self
            .answer
            .filter(|_| self.push.active && !self.push.finished)
        else {
            return;
        };
        if self.push.drop {
            self.push.finished = true;
            return;
        }
        if self.push.direct > 0 {
            return;
        }
        if answered.chunked {
            let b = self.bufs.as_mut().expect("buffers held while answering");
            if trailers.is_empty() {
                b.write.extend_from_slice(write::LAST_CHUNK);
            } else {
                b.write.extend_from_slice(b"0\r\n");
                for (name, value) in trailers {
                    b.write.extend_from_slice(name.as_bytes());
                    b.write.extend_from_slice(b": ");
                    b.write.extend_from_slice(value);
                    b.write.extend_from_slice(b"\r\n");
                }
                b.write.extend_from_slice(b"\r\n");
            }
        } else if answered.length.is_some_and(|n| n != self.push.written) {
            return;
        }
        self.push.finished = true;
    }
}
