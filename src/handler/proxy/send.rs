//! Phase 5, sending: the upstream head and the request body, re-framed, with
//! backpressure, watching the upstream for an early answer meanwhile.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;

use super::interim::relay_interim;
use super::{ErrorKind, ProxyError};
use crate::deadline::{Deadline, DeadlinePassed};
use crate::http::Session;
use crate::http1::client::ClientStream;
use crate::http1::parse::{BodyKind, Method};
use crate::http1::response::ParsedResponseHead;
use crate::http1::write;
use crate::worker::READ_BUF;

/// Request body bytes gathered before a write to the upstream.
pub(super) const SEND_HIGH_WATER: usize = 64 * 1024;

/// How sending a request failed.
pub(super) enum SendError {
    /// The client failed (or sent a bad body): the exchange is over, and the
    /// driver answers for the client's fault.
    Downstream,
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
    pub(super) head: &'a mut ParsedResponseHead,
    /// The request's method (a response to HEAD has no body).
    pub(super) method: Method,
    /// Head limits, as for any upstream response.
    pub(super) limits: &'a crate::http1::Limits,
    /// Interim 1xx heads the upstream sent so far (each relayed to the client
    /// where it can go): once there is one, the upstream has answered.
    pub(super) interim: &'a mut u32,
}

impl Answer<'_> {
    /// Whether what the upstream sent so far ends the sending: a final response
    /// head (or bytes that cannot start one, or too many interim heads).
    /// Interim 1xx heads are relayed to the client through `session` and
    /// dropped from the buffer, and part of a head waits for the rest.
    pub(super) fn is_final(&mut self, session: &mut dyn Session<'_>) -> bool {
        relay_interim(
            session,
            self.buf,
            self.limits,
            self.method,
            self.head,
            self.interim,
        )
        .unwrap_or(true)
    }

    pub(super) fn reserve(&mut self) {
        if self.buf.capacity() - self.buf.len() < 2048 {
            self.buf.reserve(READ_BUF);
        }
    }
}

/// The request body on its way to the upstream, kept across attempts: what
/// was taken from the session is framed for the upstream into the exchange's
/// output buffer behind the head, and stays there while it may be sent again.
pub(super) struct BodySend {
    /// Chunked framing toward the upstream (the body's length is not known).
    chunked: bool,
    /// Where the body starts in the output buffer (behind the head).
    body_at: usize,
    /// The output buffer still holds every body byte taken from the session.
    kept: bool,
    /// A read of the body had to wait: the client was told to go on (`100
    /// Continue`), and the body no longer came from what was buffered.
    pub(super) waited: bool,
    /// The whole body was taken from the session.
    pub(super) done: bool,
}

impl BodySend {
    /// For a request whose body is delimited as `kind`.
    pub(super) fn new(kind: BodyKind) -> Self {
        BodySend {
            chunked: kind == BodyKind::Chunked,
            body_at: 0,
            kept: true,
            waited: false,
            done: kind == BodyKind::None,
        }
    }
}

/// What taking body bytes from the session without waiting came to.
enum Gathered {
    /// The output buffer reached its high-water mark.
    Full,
    /// The whole body is framed in the output buffer.
    Done,
    /// The session has nothing more buffered.
    WouldWait,
    /// The client failed (the driver answers for it).
    Failed,
}

/// Takes what the session has buffered of the body, framed into `out`, without
/// waiting for the client.
fn gather_body(
    session: &mut dyn Session<'_>,
    cx: &mut Context<'_>,
    out: &mut Vec<u8>,
    body: &mut BodySend,
) -> Gathered {
    loop {
        match session.poll_body(cx) {
            Poll::Ready(Ok(0)) => {
                body.done = true;
                if body.chunked {
                    write_last_chunk(session, out);
                }
                return Gathered::Done;
            }
            Poll::Ready(Ok(n)) => {
                let chunk = session.body_chunk();
                if body.chunked {
                    write::write_chunk(out, chunk);
                } else {
                    out.extend_from_slice(chunk);
                }
                session.consume_body(n);
                if out.len() >= SEND_HIGH_WATER {
                    return Gathered::Full;
                }
            }
            Poll::Ready(Err(_)) => return Gathered::Failed,
            Poll::Pending => {
                body.waited = true;
                return Gathered::WouldWait;
            }
        }
    }
}

/// Ends a chunked body, with the request's trailers (an HTTP/2 client's) in
/// the trailer section.
fn write_last_chunk(session: &dyn Session<'_>, out: &mut Vec<u8>) {
    let trailers = session.request_trailers();
    if trailers.is_empty() {
        out.extend_from_slice(write::LAST_CHUNK);
        return;
    }
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers {
        if super::fields::relayed_trailer(name) {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// Phase 5: writes the upstream head and streams the request body, re-framed
/// (a body of unknown length chunked, a length kept). Body bytes already
/// buffered go with the head in one write. While a body is being sent the
/// upstream is watched: once it answers (or closes), sending stops and its
/// bytes are in `answer`, as nginx stops sending a body the upstream answered.
pub(super) async fn send_request(
    session: &mut dyn Session<'_>,
    up: &mut ClientStream,
    up_head: &[u8],
    out: &mut Vec<u8>,
    body: &mut BodySend,
    idle: Duration,
    mut answer: Answer<'_>,
) -> Result<Sent, SendError> {
    // Without a body the head goes in one write, straight from where it was
    // encoded, and there is nothing to stop.
    if body.done && body.body_at == 0 {
        write_upstream(up, up_head, idle, true, None).await?;
        return Ok(Sent {
            replayable: true,
            answered_early: false,
        });
    }
    if !body.kept {
        // Part of the body is gone: it cannot go to another connection.
        return Err(SendError::Upstream(
            ProxyError::upstream(ErrorKind::Reset, "request body already streamed"),
            false,
        ));
    }
    // The head for this server in front of what is kept of the body (all of
    // it taken so far).
    out.splice(..body.body_at, up_head.iter().copied());
    body.body_at = up_head.len();
    let mut written = 0;
    let replayable = |body: &BodySend| body.kept && !body.waited;
    macro_rules! write_out {
        () => {
            let answered = write_pending(
                up,
                out,
                &mut written,
                idle,
                replayable(body),
                (&mut answer, &mut *session),
            )
            .await?;
            if answered {
                return Ok(Sent {
                    replayable: replayable(body),
                    answered_early: true,
                });
            }
        };
    }
    loop {
        let gathered = if body.done {
            Gathered::Done
        } else {
            poll_fn(|cx| Poll::Ready(gather_body(session, cx, out, body))).await
        };
        match gathered {
            Gathered::Done => {
                write_out!();
                return Ok(Sent {
                    replayable: replayable(body),
                    answered_early: false,
                });
            }
            Gathered::Failed => return Err(SendError::Downstream),
            Gathered::Full => {
                write_out!();
                out.clear();
                written = 0;
                body.kept = false;
                continue;
            }
            Gathered::WouldWait => {}
        }
        // What the session had is used up: pass it on, then wait for more.
        write_out!();
        answer.reserve();
        // Waiting for the client, the upstream may answer first (readiness
        // only: no system call unless it sent something). The body read
        // timeout is the session's.
        let read = poll_fn(|cx| {
            if let Poll::Ready(r) = up.poll_read_into(cx, answer.buf) {
                return Poll::Ready(Err(r));
            }
            session.poll_body(cx).map(Ok)
        })
        .await;
        match read {
            Err(Ok(n)) => {
                if n == 0 || answer.is_final(session) {
                    return Ok(Sent {
                        replayable: replayable(body),
                        answered_early: true,
                    });
                }
            }
            Err(Err(e)) => {
                return Err(SendError::Upstream(
                    ProxyError::upstream(ErrorKind::Reset, e),
                    replayable(body),
                ))
            }
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err(SendError::Downstream),
        }
    }
}

/// Writes what of `out` is not written yet (from `written`), watching for an
/// early answer; true when the upstream answered (or closed) first.
async fn write_pending(
    up: &mut ClientStream,
    out: &[u8],
    written: &mut usize,
    idle: Duration,
    replayable: bool,
    watch: (&mut Answer<'_>, &mut dyn Session<'_>),
) -> Result<bool, SendError> {
    if *written >= out.len() {
        return Ok(false);
    }
    let r = write_upstream(up, &out[*written..], idle, replayable, Some(watch)).await;
    *written = out.len();
    r
}

/// Writes `out` to the upstream. With `watch`, stops early (returning true)
/// once the upstream sends a final response head or closes; its bytes are in
/// the answer buffer. Interim 1xx heads do not stop the request: they are
/// relayed to the client through the session at once.
pub(super) async fn write_upstream(
    up: &mut ClientStream,
    out: &[u8],
    idle: Duration,
    replayable: bool,
    watch: Option<(&mut Answer<'_>, &mut dyn Session<'_>)>,
) -> Result<bool, SendError> {
    // Most writes complete at once; a deadline arms a timer only when one does
    // not. `Deadline::run` itself: one future layer fewer per write than
    // `deadline::io_within`.
    let r = match watch {
        None => Deadline::after(idle)
            .run(up.write_all(out))
            .await
            .map(|w| w.map(|()| false)),
        Some((answer, session)) => {
            let mut pos = 0;
            loop {
                answer.reserve();
                let watched = Deadline::after(idle)
                    .run(write_watching(up, out, &mut pos, answer.buf))
                    .await;
                let relayed = *answer.interim;
                match watched {
                    Ok(Ok(None)) => break Ok(Ok(false)),
                    Ok(Ok(Some(0))) => break Ok(Ok(true)),
                    Ok(Ok(Some(_))) if answer.is_final(session) => break Ok(Ok(true)),
                    // Part of a head, or an interim one: go on sending, the
                    // interim head on its way to the client first (a client
                    // gone shows when the answer is given).
                    Ok(Ok(Some(_))) => {
                        if *answer.interim > relayed {
                            let _ = poll_fn(|cx| session.poll_flush_body(cx)).await;
                        }
                    }
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
