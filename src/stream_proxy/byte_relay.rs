//! The two-way byte relay behind a `kind = "tcp"` listener's streams and an
//! HTTP upgrade's tunnel (`src/handler/proxy/tunnel.rs`): whatever the bytes
//! mean, they are copied both ways until both sides have ended.
//!
//! The relay is one task polling both directions, each through its own fixed
//! buffer: a direction reads only when its buffer has been written out, so a slow
//! reader stops the other side being read (backpressure, bounded memory). End of
//! stream on one side shuts down the write side of the other (half-close) and
//! the other direction goes on until it ends too, or until no byte moved for
//! the idle timeout.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// Buffer per direction of a relayed stream when it starts: one TLS record.
pub const RELAY_BUF: usize = 16 * 1024;

/// The most a direction's buffer grows to. A read that fills the buffer means
/// the source has more queued (a bulk transfer); a larger buffer then moves it
/// in fewer, larger reads and writes (a TLS sink writes the records of one
/// buffer in one `writev`). Interactive and idle streams keep the small one,
/// and a stream whose bulk is over returns to it on its next short read.
pub const RELAY_BUF_MAX: usize = 128 * 1024;

/// One direction of a relay: read into `buf`, write it all out, repeat.
struct Half {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    done: bool,
    moved: u64,
}

impl Half {
    fn new(size: usize) -> Self {
        Half {
            buf: vec![0u8; size],
            start: 0,
            end: 0,
            eof: false,
            done: false,
            moved: 0,
        }
    }

    /// Doubles the buffer, keeping the bytes read so far.
    fn grow(&mut self) {
        let size = (self.buf.len() * 2).min(RELAY_BUF_MAX);
        self.buf.resize(size, 0);
    }

    /// Back to the starting size once the bulk is over (a read that fits in
    /// it), keeping the bytes read so far, which fit.
    fn shrink(&mut self) {
        self.buf.truncate(RELAY_BUF);
        self.buf.shrink_to_fit();
    }

    /// Moves bytes from `r` to `w` until both would block; `Ready(Ok)` once the
    /// source ended and the sink was shut down.
    fn poll_copy<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        r: &mut R,
        w: &mut W,
        progress: &mut bool,
    ) -> Poll<io::Result<()>>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        loop {
            if self.start == self.end && !self.eof {
                let mut rb = ReadBuf::new(&mut self.buf);
                match Pin::new(&mut *r).poll_read(cx, &mut rb) {
                    Poll::Pending => {
                        // Nothing to read: make sure what was written is on its way
                        // (TLS may hold a record until flushed).
                        ready!(Pin::new(&mut *w).poll_flush(cx))?;
                        return Poll::Pending;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Ready(Ok(())) => {
                        let n = rb.filled().len();
                        if n == 0 {
                            self.eof = true;
                        } else {
                            self.start = 0;
                            self.end = n;
                            *progress = true;
                            if n == self.buf.len() && n < RELAY_BUF_MAX {
                                self.grow();
                            } else if n < RELAY_BUF && self.buf.len() > RELAY_BUF {
                                self.shrink();
                            }
                        }
                    }
                }
            }
            while self.start < self.end {
                let n = ready!(Pin::new(&mut *w).poll_write(cx, &self.buf[self.start..self.end]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.start += n;
                self.moved += n as u64;
                *progress = true;
            }
            self.start = 0;
            self.end = 0;
            if self.eof {
                ready!(Pin::new(&mut *w).poll_flush(cx))?;
                ready!(Pin::new(&mut *w).poll_shutdown(cx))?;
                return Poll::Ready(Ok(()));
            }
        }
    }
}

/// Relays bytes both ways between `a` and `b` until both directions have ended
/// (with half-close in between), an error, or `idle` passes with no byte moved.
/// Returns the bytes moved a->b and b->a.
pub async fn relay<A, B>(a: &mut A, b: &mut B, idle: Duration) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let mut ab = Half::new(RELAY_BUF);
    let mut ba = Half::new(RELAY_BUF);
    let sleep = tokio::time::sleep(idle);
    tokio::pin!(sleep);
    let mut last = Instant::now();
    poll_fn(|cx| {
        let mut progress = false;
        if !ab.done {
            match ab.poll_copy(cx, a, b, &mut progress) {
                Poll::Ready(Ok(())) => ab.done = true,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {}
            }
        }
        if !ba.done {
            match ba.poll_copy(cx, b, a, &mut progress) {
                Poll::Ready(Ok(())) => ba.done = true,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {}
            }
        }
        if ab.done && ba.done {
            return Poll::Ready(Ok((ab.moved, ba.moved)));
        }
        if progress {
            last = Instant::now();
        }
        // The timer is re-armed only when it fires, not on every byte.
        while sleep.as_mut().poll(cx).is_ready() {
            let due = last + idle;
            if Instant::now() >= due {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "idle timeout")));
            }
            sleep.as_mut().reset(due);
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn relay_copies_both_ways_and_half_closes() {
        let (mut a_far, mut a) = tokio::io::duplex(64);
        let (mut b, mut b_far) = tokio::io::duplex(64);
        let task = tokio::spawn(async move { relay(&mut a, &mut b, Duration::from_secs(5)).await });
        let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let send = big.clone();
        let writer = tokio::spawn(async move {
            a_far.write_all(&send).await.unwrap();
            a_far.shutdown().await.unwrap();
            let mut back = Vec::new();
            a_far.read_to_end(&mut back).await.unwrap();
            back
        });
        let mut got = Vec::new();
        b_far.read_to_end(&mut got).await.unwrap();
        assert!(got == big, "a->b bytes differ");
        // a half-closed; b can still answer.
        b_far.write_all(b"reply").await.unwrap();
        b_far.shutdown().await.unwrap();
        assert_eq!(writer.await.unwrap(), b"reply");
        assert_eq!(task.await.unwrap().unwrap(), (200_000, 5));
    }

    /// Copies all of `data` through `half`; returns the sink and the buffer
    /// size the half ended with.
    async fn copy_through(half: &mut Half, data: Vec<u8>) -> (Vec<u8>, usize) {
        half.eof = false;
        let mut source = std::io::Cursor::new(data);
        let mut sink = Vec::new();
        let mut progress = false;
        poll_fn(|cx| half.poll_copy(cx, &mut source, &mut sink, &mut progress))
            .await
            .unwrap();
        (sink, half.buf.len())
    }

    async fn copy_through_half(data: Vec<u8>) -> (Vec<u8>, usize) {
        copy_through(&mut Half::new(RELAY_BUF), data).await
    }

    #[tokio::test]
    async fn relay_buffer_grows_for_bulk_and_stays_small_otherwise() {
        let bulk: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let (out, size) = copy_through_half(bulk.clone()).await;
        assert!(out == bulk, "bulk bytes differ after growing");
        assert_eq!(size, RELAY_BUF_MAX);

        let small = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n".to_vec();
        let (out, size) = copy_through_half(small.clone()).await;
        assert_eq!(out, small);
        assert_eq!(size, RELAY_BUF);

        // The same half, bulk then small: back to the small buffer.
        let mut half = Half::new(RELAY_BUF);
        assert_eq!(copy_through(&mut half, bulk.clone()).await.1, RELAY_BUF_MAX);
        let (out, size) = copy_through(&mut half, small.clone()).await;
        assert_eq!(out, small);
        assert_eq!(size, RELAY_BUF);
    }

    #[tokio::test]
    async fn relay_ends_on_idle_timeout() {
        let (_a_far, mut a) = tokio::io::duplex(64);
        let (mut b, _b_far) = tokio::io::duplex(64);
        let started = std::time::Instant::now();
        let r = relay(&mut a, &mut b, Duration::from_millis(100)).await;
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
