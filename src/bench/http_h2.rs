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
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{sleep, sleep_until, Instant};

use super::h2_request::H2Request;
use super::http_conn::{Slot, ThreadCtx, MAX_CONNECT_FAILURES};
use super::io::dial;
use super::stats::FailureKind;
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

/// One stream loop of a connection, polled beside the others.
type StreamLoop<'a> = Pin<Box<dyn Future<Output = Result<(), FailureKind>> + 'a>>;

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
    let Some(request) = plan.h2.as_ref() else {
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
        let (send, driver) = match handshake {
            Ok(pair) => {
                failures = 0;
                ctx.stats
                    .borrow_mut()
                    .record_connect(connect_start.elapsed());
                pair
            }
            Err(kind) => {
                slot.busy_since.set(None);
                slot.take(1);
                ctx.stats.borrow_mut().errors.add(kind, 1);
                failures += 1;
                if plan.requests.is_some() && failures >= MAX_CONNECT_FAILURES {
                    let rest = slot.remaining.get();
                    slot.take(rest);
                    ctx.stats.borrow_mut().errors.add(kind, rest);
                    break;
                }
                if plan.rate.is_none() {
                    sleep(Duration::from_millis(10 << failures.min(5))).await;
                }
                continue;
            }
        };
        let first_byte = Cell::new(Some(connect_start));
        let waiting = Cell::new(0u64);
        let streams: Vec<StreamLoop<'_>> = (0..plan.depth)
            .map(|_| {
                Box::pin(stream_loop(
                    &ctx,
                    &slot,
                    send.clone(),
                    request,
                    &first_byte,
                    &waiting,
                )) as StreamLoop<'_>
            })
            .collect();
        drop(send);
        let ended = connection_lifetime(driver, streams).await;
        // Requests taken by loops still waiting for their send time when the
        // connection ended were never sent: they go on the next connection.
        slot.give_back(waiting.replace(0));
        if let Err(kind) = ended {
            slot.fail(&ctx, kind);
        }
        slot.in_flight.set(0);
        slot.busy_since.set(None);
    }
    ctx.slot_ended.notify_one();
}

/// Polls the connection's frame driver and its stream loops together until
/// every loop is done, or the connection or a loop fails.
async fn connection_lifetime<T>(
    mut driver: h2::client::Connection<T, Bytes>,
    mut streams: Vec<StreamLoop<'_>>,
) -> Result<(), FailureKind>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut driver_done = false;
    std::future::poll_fn(|cx| {
        if !driver_done {
            match Pin::new(&mut driver).poll(cx) {
                Poll::Ready(Ok(())) => driver_done = true,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(classify_h2(&e))),
                Poll::Pending => {}
            }
        }
        let mut i = 0;
        while i < streams.len() {
            match streams[i].as_mut().poll(cx) {
                Poll::Ready(Ok(())) => {
                    drop(streams.swap_remove(i));
                }
                Poll::Ready(Err(kind)) => return Poll::Ready(Err(kind)),
                Poll::Pending => i += 1,
            }
        }
        if streams.is_empty() {
            return Poll::Ready(Ok(()));
        }
        if driver_done {
            return Poll::Ready(Err(FailureKind::Closed));
        }
        Poll::Pending
    })
    .await
}

/// One stream slot of a connection: a request, its whole response, the next.
async fn stream_loop(
    ctx: &ThreadCtx,
    slot: &Slot,
    mut send: SendRequest<Bytes>,
    request: &H2Request,
    first_byte: &Cell<Option<Instant>>,
    waiting: &Cell<u64>,
) -> Result<(), FailureKind> {
    loop {
        if slot.remaining.get() == 0 || ctx.expired(Instant::now()) {
            return Ok(());
        }
        let k = slot.next.get();
        slot.take(1);
        let origin = match &slot.schedule {
            Some(s) => {
                let due = s.intended(k);
                waiting.set(waiting.get() + 1);
                sleep_until(due).await;
                waiting.set(waiting.get() - 1);
                due
            }
            None => Instant::now(),
        };
        slot.in_flight.set(slot.in_flight.get() + 1);
        if slot.busy_since.get().is_none() {
            slot.busy_since.set(Some(Instant::now()));
        }
        let outcome = one_request(&mut send, request, first_byte, ctx).await;
        slot.in_flight.set(slot.in_flight.get().saturating_sub(1));
        let now = Instant::now();
        slot.busy_since
            .set((slot.in_flight.get() > 0).then_some(now));
        match outcome {
            Ok(status) => {
                ctx.stats.borrow_mut().record(status, now - origin);
                ctx.progress.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if unprocessed(&e) && first_byte.get().is_none() => {
                // The server never processed it (above its graceful GOAWAY, or
                // refused): given back, to go on the next connection as RFC
                // 9113 §8.7 allows and browsers do, while this connection's
                // other streams, which the server does answer, run to their end.
                // Only on a connection that answered before: a server that
                // refuses everything counts as failing.
                slot.give_back(1);
                return Ok(());
            }
            Err(e) if e.is_reset() && !e.is_go_away() => {
                // The server reset this stream only: counted, and the
                // connection goes on.
                ctx.stats.borrow_mut().errors.add(FailureKind::Reset, 1);
            }
            Err(e) => {
                ctx.stats.borrow_mut().errors.add(classify_h2(&e), 1);
                return Err(classify_h2(&e));
            }
        }
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
    request: &H2Request,
    first_byte: &Cell<Option<Instant>>,
    ctx: &ThreadCtx,
) -> Result<u16, h2::Error> {
    std::future::poll_fn(|cx| send.poll_ready(cx)).await?;
    let no_body = request.body.is_empty();
    let (response, mut upload) = send.send_request(request.head.clone(), no_body)?;
    if !no_body {
        upload.send_data(request.body.clone(), true)?;
    }
    let response = response.await?;
    if let Some(start) = first_byte.take() {
        ctx.stats.borrow_mut().record_first_byte(start.elapsed());
    }
    let status = response.status().as_u16();
    let mut body = response.into_body();
    while let Some(data) = body.data().await {
        let data = data?;
        let _ = body.flow_control().release_capacity(data.len());
    }
    body.trailers().await?;
    Ok(status)
}
