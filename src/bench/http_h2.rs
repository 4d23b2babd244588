//! `pier bench http --h2`: HTTP/2 load in the manner of h2load, each of the
//! `-c` connections carrying `--streams` requests at once (ALPN `h2` over
//! TLS, prior knowledge over TCP), on the same slots, watchdog, schedule and
//! statistics as HTTP/1.1 runs, so the report, JSON and sweeps are the same.
//!
//! A connection is one `h2` client connection: its frames are driven in the
//! slot's own task beside the stream loops (so the watchdog, aborting the
//! slot, ends all of them), each stream loop sending one request and reading
//! its response to the end before the next. Bytes are counted on the socket
//! (TLS: plaintext), frames and HPACK included, as h2load counts them.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::http_conn::{Slot, ThreadCtx};
use super::io::dial;
use super::multiplexed::{
    after_connect, connection_ended, connection_lifetime, record_first_byte, stream_loop,
    ConnectAttempt, StreamFailure, StreamLoop, PROGRESS_EVERY,
};
use super::stats::FailureKind;
use super::stream_request::StreamRequest;
use crate::http1::client::ClientStream;

/// Receive window per stream and per connection: large, so the server is
/// measured rather than the client's window updates.
const WINDOW: u32 = 8 * 1024 * 1024;

/// A transport whose bytes are counted into the thread's statistics as they
/// pass, so a run cut at its deadline still counts them.
struct Counted {
    inner: ClientStream,
    ctx: Rc<ThreadCtx>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.ctx.stats.borrow_mut().bytes_read += n as u64;
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = r {
            self.ctx.stats.borrow_mut().bytes_written += n as u64;
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// How an h2 error is counted.
fn classify_h2(e: &h2::Error) -> FailureKind {
    if let Some(io) = e.get_io() {
        return super::io::classify(io);
    }
    if e.is_go_away() || e.is_reset() {
        FailureKind::Reset
    } else {
        FailureKind::Malformed
    }
}

/// Reconnects until the connection's share is done (or the run is over); on
/// each connection, `--streams` stream loops run at once.
pub(super) async fn run_slot_h2(ctx: Rc<ThreadCtx>, slot: Rc<Slot>) {
    let plan = ctx.plan.clone();
    let Some(request) = plan.stream_request.as_ref() else {
        return;
    };
    let mut failures = 0u32;
    while slot.remaining.get() > 0 && !ctx.expired(Instant::now()) {
        slot.busy_since.set(Some(Instant::now()));
        let connect_start = Instant::now();
        let connected = match dial(plan.target.addr, ctx.tls.as_ref()).await {
            Ok(c) => Ok(c),
            Err(e) => Err(e.kind),
        };
        let handshake = match connected {
            Ok(c) => {
                let agreed = match &c.transport {
                    ClientStream::Tls(t) => t.get_ref().1.alpn_protocol() == Some(b"h2"),
                    ClientStream::Plain(_) => true,
                };
                if ctx.tls.is_some() {
                    ctx.stats.borrow_mut().record_handshake(c.resumed);
                }
                if agreed {
                    let io = Counted {
                        inner: c.transport,
                        ctx: ctx.clone(),
                    };
                    h2::client::Builder::new()
                        .initial_window_size(WINDOW)
                        .initial_connection_window_size(WINDOW)
                        .enable_push(false)
                        .handshake::<_, Bytes>(io)
                        .await
                        .map_err(|e| classify_h2(&e))
                } else {
                    Err(FailureKind::Tls)
                }
            }
            Err(kind) => Err(kind),
        };
        let (send, driver) =
            match after_connect(&ctx, &slot, handshake, connect_start, &mut failures).await {
                ConnectAttempt::Ready(pair) => pair,
                ConnectAttempt::Retry => continue,
                ConnectAttempt::GiveUp => break,
            };
        let first_byte = Cell::new(Some(connect_start));
        let waiting = Cell::new(0u64);
        let streams: Vec<StreamLoop<'_>> = (0..plan.depth)
            .map(|_| {
                let send = send.clone();
                let (ctx, slot, first_byte) = (&*ctx, &*slot, &first_byte);
                Box::pin(stream_loop(
                    ctx,
                    slot,
                    &waiting,
                    move || {
                        let mut send = send.clone();
                        async move { one_request(&mut send, request, first_byte, ctx, slot).await }
                    },
                    |e: &h2::Error| judge_h2(e, first_byte),
                )) as StreamLoop<'_>
            })
            .collect();
        drop(send);
        let mut driver = driver;
        let ended = connection_lifetime(
            |cx| match Pin::new(&mut driver).poll(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
                Poll::Ready(Err(e)) => Poll::Ready(Err(classify_h2(&e))),
                Poll::Pending => Poll::Pending,
            },
            streams,
        )
        .await;
        connection_ended(&ctx, &slot, &waiting, ended);
    }
    ctx.slot_ended.notify_one();
}

/// What an h2 error means for its stream loop. A stream the server did not
/// process counts as such only on a connection that answered before: a
/// server that refuses everything counts as failing.
fn judge_h2(e: &h2::Error, first_byte: &Cell<Option<Instant>>) -> StreamFailure {
    if unprocessed(e) && first_byte.get().is_none() {
        StreamFailure::Unprocessed
    } else if e.is_reset() && !e.is_go_away() {
        StreamFailure::StreamReset
    } else {
        StreamFailure::Connection(classify_h2(e))
    }
}

/// Whether the server said it did not process the stream: a graceful GOAWAY
/// below its id, or REFUSED_STREAM (RFC 9113 §8.7).
fn unprocessed(e: &h2::Error) -> bool {
    (e.is_go_away() && e.reason() == Some(h2::Reason::NO_ERROR))
        || (e.is_reset() && e.reason() == Some(h2::Reason::REFUSED_STREAM))
}

/// Sends the request and reads its response to the end; its status.
async fn one_request(
    send: &mut SendRequest<Bytes>,
    request: &StreamRequest,
    first_byte: &Cell<Option<Instant>>,
    ctx: &ThreadCtx,
    slot: &Slot,
) -> Result<u16, h2::Error> {
    std::future::poll_fn(|cx| send.poll_ready(cx)).await?;
    let no_body = request.body.is_empty();
    let (response, mut upload) = send.send_request(request.head.clone(), no_body)?;
    if !no_body {
        upload.send_data(request.body.clone(), true)?;
    }
    let response = response.await?;
    record_first_byte(ctx, first_byte);
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut unmarked = 0usize;
    while let Some(data) = body.data().await {
        let data = data?;
        unmarked += data.len();
        if unmarked >= PROGRESS_EVERY {
            slot.progressed();
            unmarked = 0;
        }
        let _ = body.flow_control().release_capacity(data.len());
    }
    body.trailers().await?;
    Ok(status)
}
