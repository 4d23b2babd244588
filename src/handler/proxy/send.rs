//! Phase 5, sending: the upstream head and the request body, re-framed, with
//! backpressure, watching the upstream for an early answer meanwhile.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{ready, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;

use super::request_info::RequestInfo;
use super::{ErrorKind, ProxyError};
use crate::deadline::{self, Deadline, DeadlinePassed};
use crate::http1::body::BodyDecoder;
use crate::http1::client::{parse_final_head, ClientStream};
use crate::http1::parse::{BodyKind, Method};
use crate::http1::response::ResponseHead;
use crate::http1::write;
use crate::server::h1::{Downstream, Exit, Http1Conn};
use crate::worker::READ_BUF;

/// Request body bytes gathered before a write to the upstream.
pub(super) const SEND_HIGH_WATER: usize = 64 * 1024;

/// How sending a request failed.
pub(super) enum SendError {
    /// The client failed (or sent a bad body); the exchange is over.
    Downstream(Exit),
    /// The upstream failed while the request was being written; true when the
    /// whole request is still in the buffer and could be sent again.
    Upstream(ProxyError, bool),
}

/// How far sending a request got.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sent {
    /// The whole request came from the buffer, so it can be sent again after
    /// an early failure.
    pub(super) replayable: bool,
    /// The upstream answered (or closed) before the whole request was sent.
    pub(super) answered_early: bool,
}

/// Where an upstream's early answer goes while the request is being sent.
pub(super) struct Answer<'a> {
    /// The upstream read buffer (the response head is parsed from it later).
    pub(super) buf: &'a mut Vec<u8>,
    /// Scratch for telling a final head from an interim 1xx one.
    pub(super) head: &'a mut ResponseHead,
    /// The request's method (a response to HEAD has no body).
    pub(super) method: Method,
    /// Head limits, as for any upstream response.
    pub(super) limits: &'a crate::http1::Limits,
    /// Set once an interim 1xx head was dropped: the upstream has answered.
    pub(super) interim: &'a mut bool,
}

impl Answer<'_> {
    /// Whether what the upstream sent so far ends the sending: a final response
    /// head (or bytes that cannot start one). Interim 1xx heads are dropped,
    /// and part of a head waits for the rest.
    pub(super) fn is_final(&mut self) -> bool {
        match parse_final_head(self.buf, self.limits, self.method, self.head) {
            Ok(found) => {
                if found.interim > 0 {
                    self.buf.drain(..found.interim);
                    *self.interim = true;
                }
                found.complete
            }
            Err(_) => true,
        }
    }

    pub(super) fn reserve(&mut self) {
        if self.buf.capacity() - self.buf.len() < 2048 {
            self.buf.reserve(READ_BUF);
        }
    }
}

/// Phase 5: writes the upstream head and streams the request body, re-framed
/// (chunked stays chunked, re-encoded; a length stays that length). Body bytes
/// already buffered go with the head in one write. While a body is being sent
/// the upstream is watched: once it answers (or closes), sending stops and its
/// bytes are in `answer`, as nginx stops sending a body the upstream answered.
#[allow(clippy::too_many_arguments)]
pub(super) async fn send_request<D: Downstream>(
    conn: &mut Http1Conn<'_, D>,
    up: &mut ClientStream,
    up_head: &[u8],
    out: &mut Vec<u8>,
    decoder: &mut BodyDecoder,
    info: &RequestInfo,
    continued: &mut bool,
    idle: Duration,
    mut answer: Answer<'_>,
) -> Result<Sent, SendError> {
    let http = &conn.ctx.config.http;
    let chunked = info.body == BodyKind::Chunked;
    // Without a body the head goes in one write, straight from where it was
    // encoded, and there is nothing to stop.
    if info.body == BodyKind::None {
        write_upstream(up, up_head, idle, true, None).await?;
        return Ok(Sent {
            replayable: true,
            answered_early: false,
        });
    }
    out.clear();
    out.extend_from_slice(up_head);
    let mut replayable = true;
    macro_rules! write_out {
        () => {
            let answered = write_upstream(up, out, idle, replayable, Some(&mut answer)).await;
            out.clear();
            if answered? {
                return Ok(Sent {
                    replayable,
                    answered_early: true,
                });
            }
        };
    }
    loop {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        if !decoder.is_done() {
            let step = decoder
                .decode(&b.read[conn.rpos..])
                .map_err(|e| SendError::Downstream(Exit::Reject(e.status())))?;
            if chunked {
                write::write_chunk(out, step.data);
            } else {
                out.extend_from_slice(step.data);
            }
            conn.rpos += step.consumed;
            if step.done && chunked {
                out.extend_from_slice(write::LAST_CHUNK);
            }
            if !step.done && step.consumed > 0 && conn.rpos < b.read.len() {
                if out.len() >= SEND_HIGH_WATER {
                    write_out!();
                }
                continue;
            }
        }
        if decoder.is_done() {
            write_out!();
            return Ok(Sent {
                replayable,
                answered_early: false,
            });
        }
        // The buffered body is used up: pass on what we have, then wait for more.
        if !out.is_empty() {
            write_out!();
        }
        if !*continued {
            *continued = true;
            b.write.extend_from_slice(write::CONTINUE);
            if conn.flush().await.is_err() {
                return Err(SendError::Downstream(Exit::Broken));
            }
        }
        replayable = false;
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        if conn.rpos > 0 {
            b.read.drain(..conn.rpos);
            conn.rpos = 0;
        }
        if b.read.capacity() - b.read.len() < 2048 {
            b.read.reserve(READ_BUF);
        }
        answer.reserve();
        // Waiting for the client, the upstream may answer first (readiness only:
        // no system call unless it sent something).
        let read = tokio::select! {
            biased;
            r = up.read_into(answer.buf) => Err(r),
            r = deadline::within(http.body_read_timeout, conn.io.read_into(&mut b.read)) => Ok(r),
        };
        match read {
            Err(Ok(n)) => {
                if n == 0 || answer.is_final() {
                    return Ok(Sent {
                        replayable,
                        answered_early: true,
                    });
                }
            }
            Err(Err(e)) => {
                return Err(SendError::Upstream(
                    ProxyError::upstream(ErrorKind::Reset, e),
                    replayable,
                ))
            }
            Ok(Ok(Ok(0)) | Ok(Err(_))) => return Err(SendError::Downstream(Exit::Broken)),
            Ok(Ok(Ok(n))) => conn.ctx.stats.bytes_in.add(n as u64),
            Ok(Err(_)) => return Err(SendError::Downstream(Exit::Reject(408))),
        }
    }
}

/// Writes `out` to the upstream. With `watch`, stops early (returning true)
/// once the upstream sends a final response head or closes; its bytes are in
/// the answer buffer. Interim 1xx heads do not stop the request.
pub(super) async fn write_upstream(
    up: &mut ClientStream,
    out: &[u8],
    idle: Duration,
    replayable: bool,
    watch: Option<&mut Answer<'_>>,
) -> Result<bool, SendError> {
    // Most writes complete at once; a deadline arms a timer only when one does
    // not. `Deadline::run` itself: one future layer fewer per write than
    // `deadline::io_within`.
    let r = match watch {
        None => Deadline::after(idle)
            .run(up.write_all(out))
            .await
            .map(|w| w.map(|()| false)),
        Some(answer) => {
            let mut pos = 0;
            loop {
                answer.reserve();
                let watched = Deadline::after(idle)
                    .run(write_watching(up, out, &mut pos, answer.buf))
                    .await;
                match watched {
                    Ok(Ok(None)) => break Ok(Ok(false)),
                    Ok(Ok(Some(0))) => break Ok(Ok(true)),
                    Ok(Ok(Some(_))) if answer.is_final() => break Ok(Ok(true)),
                    // Part of a head, or an interim one: go on sending.
                    Ok(Ok(Some(_))) => {}
                    Ok(Err(e)) => break Ok(Err(e)),
                    Err(passed) => break Err(passed),
                }
            }
        }
    };
    match r {
        Ok(Ok(answered)) => Ok(answered),
        Err(DeadlinePassed) => Err(SendError::Upstream(
            ProxyError::upstream(ErrorKind::Timeout, "request write timed out"),
            false,
        )),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::TimedOut => Err(SendError::Upstream(
            ProxyError::upstream(ErrorKind::Timeout, "request write timed out"),
            false,
        )),
        Ok(Err(e)) => Err(SendError::Upstream(
            ProxyError::upstream(ErrorKind::Reset, e),
            replayable,
        )),
    }
}

/// Writes `data[*pos..]` to the upstream (advancing `pos`) unless it sends
/// bytes or closes first: then returns how many bytes it sent (0: closed),
/// appended to `answer`. `None` once everything is written.
pub(super) async fn write_watching(
    up: &mut ClientStream,
    data: &[u8],
    pos: &mut usize,
    answer: &mut Vec<u8>,
) -> std::io::Result<Option<usize>> {
    poll_fn(|cx| {
        if let Poll::Ready(r) = up.poll_read_into(cx, answer) {
            return Poll::Ready(r.map(Some));
        }
        while *pos < data.len() {
            let n = ready!(Pin::new(&mut *up).poll_write(cx, &data[*pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            *pos += n;
        }
        ready!(Pin::new(&mut *up).poll_flush(cx))?;
        Poll::Ready(Ok(None))
    })
    .await
}
