//! The HTTP/2 driver for a downstream connection (TLS with ALPN `h2`, or plain
//! TCP with prior knowledge), on the `h2` crate: a second driver of the
//! [`Session`] seam, so every handler serves HTTP/2 as it serves HTTP/1.
//!
//! The connection task drives h2 (reading frames, writing what the streams
//! queued) and owns the connection's limits: the idle timeout, the request
//! count, the budget of streams the client resets before their answer
//! (rapid reset), a write stall, and the GOAWAY of a drain. Each stream runs
//! as a task of its own on the worker's runtime, so a slow handler delays no
//! other stream; the tasks end with the connection. The protocol's own
//! floods (CONTINUATION, empty DATA, resets before accept, PING and SETTINGS
//! acks never read: h2 stops reading while an ack waits) are bounded by h2 as
//! configured from `[http2]`.
//!
//! [`Session`]: crate::http::Session

mod drain;
mod flood;
mod request;
mod reuse;
mod send;
mod stream;
#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::debug;

use crate::handler::Handler;
use crate::http::client_address::ClientAddress;
use crate::http::{Body, BodyReadError, ResponseHead, Served, Session};
use crate::http1::parse::BodyKind;
use crate::observe::access_log::{Entry, TlsFields};
use crate::observe::metrics::{H2Event, HandlerKind, ROUTE_NONE};
use crate::server::transport::Downstream;
use crate::worker::WorkerCtx;
use stream::{H2Stream, StreamOut};

/// How long a connection that sent GOAWAY stays open once its last stream
/// is done, for frames already in flight; a client that never acknowledges
/// the GOAWAY's PING cannot keep it longer.
const GOAWAY_GRACE: Duration = Duration::from_secs(1);

/// What a request view needs of the connection's TLS session, copied once so
/// streams do not borrow the transport h2 owns.
#[derive(Default)]
pub(crate) struct ConnFacts {
    secure: bool,
    version: Option<&'static str>,
    cipher: Option<&'static str>,
    sni: Option<Box<str>>,
    client_subject: Option<Box<str>>,
    /// The listener's trusted proxies, when it has any.
    client_address: Option<Arc<ClientAddress>>,
}

/// What the connection task and its streams share.
pub(crate) struct ConnState {
    /// Streams being answered.
    active: Cell<usize>,
    /// When the last stream ended (or the connection began).
    idle_since: Cell<Instant>,
    /// Streams the client reset before their answer was complete.
    client_resets: Cell<u32>,
    /// The client sent control frames past its budget.
    flooded: Cell<bool>,
    /// Since when the socket has refused output.
    stalled_since: Cell<Option<Instant>>,
    /// Tells the connection task to look at the above again.
    wake: Notify,
    /// What one stream leaves for the next.
    reuse: reuse::StreamReuse,
}

/// The transport as h2 sees it, noting when writes stall (for the
/// connection's write timeout) and counting bytes.
struct Watched<'c, T> {
    io: T,
    /// Frees the transport's read buffer ([`Downstream::release_idle_io`]).
    release: fn(&mut T),
    budget: flood::ControlBudget,
    state: Rc<ConnState>,
    ctx: &'c WorkerCtx,
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<'_, T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.state.flooded.get() {
            // Nothing more is read; the connection task closes it.
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if r.is_pending() && self.state.active.get() == 0 {
            // Nothing to read and no stream open: an idle connection keeps
            // no read buffer, as an idle HTTP/1 one keeps none.
            (self.release)(&mut self.io);
        }
        let n = buf.filled().len() - before;
        self.ctx.stats.bytes_in.add(n as u64);
        if !self.budget.scan(&buf.filled()[before..]) {
            buf.set_filled(before);
            self.state.flooded.set(true);
            self.state.wake.notify_one();
            return Poll::Pending;
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> Watched<'_, T> {
    /// Runs one write on the transport, counting the bytes it took and
    /// noting whether it stalled.
    fn counted_write(
        &mut self,
        write: impl FnOnce(Pin<&mut T>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        let r = write(Pin::new(&mut self.io));
        if let Poll::Ready(Ok(n)) = r {
            self.ctx.stats.bytes_out.add(n as u64);
        }
        self.note(r)
    }

    fn note<R>(&self, r: Poll<R>) -> Poll<R> {
        match r {
            Poll::Pending => {
                if self.state.stalled_since.get().is_none() {
                    self.state.stalled_since.set(Some(Instant::now()));
                    self.state.wake.notify_one();
                }
            }
            Poll::Ready(_) => self.state.stalled_since.set(None),
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<'_, T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.counted_write(|io| io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.counted_write(|io| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.note(r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Counts a stream as open until dropped (its task may be aborted).
struct StreamGuard(Rc<ConnState>, Rc<WorkerCtx>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let n = self.0.active.get() - 1;
        self.0.active.set(n);
        self.1
            .stats
            .h2_streams_open
            .set(self.1.stats.h2_streams_open.get().saturating_sub(1));
        if n == 0 {
            self.0.idle_since.set(self.1.clock.now());
            self.0.wake.notify_one();
        }
    }
}

/// Serves one downstream HTTP/2 connection until it closes.
pub async fn serve_h2<D: Downstream>(
    mut io: D,
    ctx: Rc<WorkerCtx>,
    peer: SocketAddr,
    client_address: Option<Arc<ClientAddress>>,
) {
    let facts = Rc::new(match io.tls_facts() {
        Some(t) => ConnFacts {
            secure: true,
            version: t.version,
            cipher: t.cipher,
            sni: t.sni.map(Into::into),
            client_subject: t.client_subject.map(Into::into),
            client_address,
        },
        None => ConnFacts {
            client_address,
            ..ConnFacts::default()
        },
    });
    let state = Rc::new(ConnState {
        active: Cell::new(0),
        idle_since: Cell::new(Instant::now()),
        client_resets: Cell::new(0),
        flooded: Cell::new(false),
        stalled_since: Cell::new(None),
        wake: Notify::new(),
        reuse: reuse::StreamReuse::default(),
    });
    let cfg = &ctx.config.http2;
    let http = &ctx.config.http;
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(cfg.max_concurrent_streams)
        .initial_window_size(cfg.initial_stream_window)
        .initial_connection_window_size(cfg.initial_connection_window)
        .max_frame_size(cfg.max_frame_size)
        .max_header_list_size(http.limits.max_head_bytes as u32)
        .header_table_size(cfg.header_table_size)
        .max_send_buffer_size(cfg.max_send_buffer)
        .max_pending_accept_reset_streams(cfg.max_pending_resets)
        .max_local_error_reset_streams(Some(cfg.max_error_resets));
    let watched = Watched {
        io: io.io_mut(),
        release: |io| D::release_idle_io(io),
        budget: flood::ControlBudget::new(cfg.max_control_frames),
        state: state.clone(),
        ctx: &ctx,
    };
    let started = Instant::now();
    let mut conn = match tokio::time::timeout(
        http.header_read_timeout,
        builder.handshake::<_, Bytes>(watched),
    )
    .await
    {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            debug!(%peer, error = %e, "HTTP/2 preface refused");
            return;
        }
        Err(_) => {
            debug!(%peer, "HTTP/2 preface timed out");
            return;
        }
    };
    ctx.stats.h2_event(H2Event::Connection);
    let mut streams = JoinSet::new();
    let mut batch = Vec::new();
    let mut requests = 0u64;
    let mut goaway_at: Option<Instant> = None;
    let mut calmed = false;
    // One timer for the connection's life, moved when its deadline moves.
    let timer = tokio::time::sleep_until(started + Duration::from_secs(1 << 30));
    tokio::pin!(timer);
    loop {
        // The one deadline of the connection: idle with no stream, or a
        // write that stalls.
        let mut deadline = started + Duration::from_secs(1 << 30);
        if state.active.get() == 0 {
            deadline = match goaway_at {
                // After GOAWAY and the last stream: a moment for frames in
                // flight, then close, whether or not the client acknowledged.
                Some(at) => at.max(state.idle_since.get()) + GOAWAY_GRACE,
                None if requests == 0 => state.idle_since.get() + http.header_read_timeout,
                None => state.idle_since.get() + cfg.idle_timeout,
            };
        }
        if let Some(since) = state.stalled_since.get() {
            deadline = deadline.min(since + http.write_timeout);
        }
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        tokio::select! {
            biased;
            () = ctx.draining(), if goaway_at.is_none() => {
                debug!(%peer, "draining: HTTP/2 GOAWAY");
                conn.graceful_shutdown();
                ctx.stats.h2_event(H2Event::Goaway);
                goaway_at.get_or_insert_with(Instant::now);
            }
            () = state.wake.notified() => {
                if state.flooded.get() {
                    debug!(%peer, "PING or SETTINGS flood: GOAWAY");
                    conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                    ctx.stats.h2_event(H2Event::Goaway);
                    ctx.stats.h2_event(H2Event::ControlFlood);
                    break;
                }
                if !calmed && state.client_resets.get() > cfg.max_client_resets {
                    debug!(%peer, "too many streams reset by the client: GOAWAY");
                    conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                    ctx.stats.h2_event(H2Event::Goaway);
                    ctx.stats.h2_event(H2Event::ResetFlood);
                    calmed = true;
                    goaway_at.get_or_insert_with(Instant::now);
                }
            }
            () = &mut timer => {
                if state.stalled_since.get().is_some_and(|s| s + http.write_timeout <= Instant::now()) {
                    debug!(%peer, "HTTP/2 connection write timeout");
                    break;
                }
                if state.active.get() == 0 {
                    if goaway_at.is_some() {
                        // The grace after GOAWAY is over.
                        break;
                    }
                    debug!(%peer, "HTTP/2 connection idle: GOAWAY");
                    conn.graceful_shutdown();
                    ctx.stats.h2_event(H2Event::Goaway);
                    goaway_at.get_or_insert_with(Instant::now);
                    state.idle_since.set(Instant::now());
                }
            }
            accepted = conn.accept() => {
                // Every stream that came in the same read is accepted before
                // any is answered, so their answers leave in one write.
                let mut next = Some(accepted);
                let mut closed = false;
                while let Some(accepted) = next.take() {
                    match accepted {
                        Some(Ok((_, mut respond))) if requests >= cfg.max_requests => {
                            // Past max_requests, before the client saw the GOAWAY:
                            // refused, so it retries on a new connection.
                            respond.send_reset(h2::Reason::REFUSED_STREAM);
                        }
                        Some(Ok(stream)) => {
                            requests += 1;
                            if requests >= cfg.max_requests && goaway_at.is_none() {
                                conn.graceful_shutdown();
                                ctx.stats.h2_event(H2Event::Goaway);
                                goaway_at.get_or_insert_with(Instant::now);
                            }
                            state.active.set(state.active.get() + 1);
                            ctx.stats.h2_streams_open.set(ctx.stats.h2_streams_open.get() + 1);
                            batch.push((stream, StreamGuard(state.clone(), ctx.clone())));
                        }
                        Some(Err(e)) => {
                            debug!(%peer, error = %e, "HTTP/2 connection error");
                            if e.is_go_away() || e.reason() == Some(h2::Reason::ENHANCE_YOUR_CALM) {
                                ctx.stats.h2_event(H2Event::Goaway);
                            }
                            closed = true;
                        }
                        None => closed = true,
                    }
                    if !closed {
                        let more = std::future::poll_fn(|cx| Poll::Ready(conn.poll_accept(cx)));
                        next = match more.await {
                            Poll::Ready(item) => Some(item),
                            Poll::Pending => None,
                        };
                    }
                }
                ctx.clock.woke();
                for ((req, respond), guard) in batch.drain(..) {
                    let (ctx, state, facts) = (ctx.clone(), state.clone(), facts.clone());
                    let mut stream = Box::pin(async move {
                        let _guard = guard;
                        let (parts, recv) = req.into_parts();
                        let clock = &ctx.clock;
                        clock.track(run_stream(&ctx, state, facts, peer, parts, recv, respond)).await;
                    });
                    // A stream answered at once (a `respond` route, a file in
                    // memory that fits the window) ends here, with no task of
                    // its own; one that waits goes on as a task, so it delays
                    // no other stream.
                    let waits = std::future::poll_fn(|cx| Poll::Ready(stream.as_mut().poll(cx).is_pending())).await;
                    if waits {
                        streams.spawn_local(stream);
                    }
                }
                if closed {
                    break;
                }
            }
            Some(_) = streams.join_next(), if !streams.is_empty() => {}
        }
    }
    // The last frames (a GOAWAY) go out if the socket takes them at once.
    let _ = futures_poll_closed(&mut conn).await;
    streams.abort_all();
}

/// Lets h2 write what it holds for a moment before the connection closes.
async fn futures_poll_closed<T: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut h2::server::Connection<T, Bytes>,
) -> Result<(), tokio::time::error::Elapsed> {
    tokio::time::timeout(
        Duration::from_millis(100),
        std::future::poll_fn(|cx| conn.poll_closed(cx).map(|_| ())),
    )
    .await
}

/// Serves one stream: its head checked and routed, its handler run beside a
/// watch for the client's reset, its body sent, its log line written.
async fn run_stream(
    ctx: &WorkerCtx,
    state: Rc<ConnState>,
    facts: Rc<ConnFacts>,
    peer: SocketAddr,
    parts: http::request::Parts,
    recv: RecvStream,
    respond: SendResponse<Bytes>,
) {
    let started = ctx.clock.now();
    let (mut buf, mut head) = state.reuse.take_head();
    let parsed = request::read_h2_head(
        &parts,
        recv.is_end_stream(),
        &ctx.config.http.limits,
        &mut buf,
        &mut head,
    );
    drop(parts);
    let out = RefCell::new(StreamOut {
        respond,
        send: None,
    });
    let mut s = H2Stream::new(ctx, facts, state.clone(), peer, buf, head, recv, &out);
    let mut route_slot = ROUTE_NONE;
    let kind = match parsed {
        Err(status) => {
            send_status(&mut s, status);
            HandlerKind::Error
        }
        Ok(()) => match route_and_serve(&mut s, &mut route_slot).await {
            Some(kind) => kind,
            None => {
                // Reset by the client before its answer.
                ctx.stats.h2_event(H2Event::ClientReset);
                state.client_resets.set(state.client_resets.get() + 1);
                state.wake.notify_one();
                return;
            }
        },
    };
    if s.status == 0 {
        match s.body_error {
            Some(BodyReadError::TooLarge) => send_status(&mut s, 413),
            Some(BodyReadError::Malformed) => send_status(&mut s, 400),
            Some(BodyReadError::Timeout) => send_status(&mut s, 408),
            Some(BodyReadError::Closed) => {
                s.reset(h2::Reason::CANCEL);
                return;
            }
            None => {
                debug!(%peer, "handler gave no answer");
                send_status(&mut s, 500);
            }
        }
    }
    ctx.stats.request(kind, s.status);
    if s.push.active && !s.push.finished {
        debug!(%peer, stream = s.stream_id, "pushed response body left unfinished");
        s.reset(h2::Reason::INTERNAL_ERROR);
        ctx.stats.h2_event(H2Event::ServerReset);
    } else if let Err(e) = s.send_pending().await {
        debug!(%peer, stream = s.stream_id, error = %e, "HTTP/2 response body not sent whole");
        let reason = if e.kind() == io::ErrorKind::TimedOut {
            ctx.stats.h2_event(H2Event::WriteTimeout);
            h2::Reason::CANCEL
        } else {
            ctx.stats.h2_event(H2Event::ServerReset);
            h2::Reason::INTERNAL_ERROR
        };
        s.reset(reason);
    }
    let took = ctx.clock.now().saturating_duration_since(started);
    ctx.stats.request_duration(route_slot, s.status, took);
    ctx.stats.h2_event(H2Event::Request);
    if let Some(log) = &ctx.access_log {
        let view = s.request();
        let f = &s.facts;
        log.record(&Entry {
            client: view.client_socket(),
            method: view.method_token(),
            target: view.target(),
            protocol: "HTTP/2.0",
            stream: Some(s.stream_id),
            status: s.status,
            body_bytes: s.sent,
            duration: took,
            referer: view.header("referer"),
            user_agent: view.header("user-agent"),
            tls: f.secure.then(|| TlsFields {
                version: f.version,
                cipher: f.cipher,
                sni: f.sni.as_deref(),
            }),
            upstream: s.upstream.map(|u| u.0),
            upstream_time: s.upstream.map(|u| u.1),
            cache: s.cache,
        });
    }
    s.drain_unread_body().await;
    let (buf, head) = (std::mem::take(&mut s.buf), std::mem::take(&mut s.head));
    state.reuse.give_head(buf, head);
}

/// Routes the request and lets its handler answer; `None` when the client
/// reset the stream first (the handler's work is dropped with it).
async fn route_and_serve<'a>(
    s: &mut H2Stream<'a, '_>,
    route_slot: &mut usize,
) -> Option<HandlerKind> {
    let ctx = s.ctx;
    let routes = &ctx.config.routes;
    if s.head.body == BodyKind::None && routes.has_pre_routes() {
        if let Some(pre) = routes.pre_route(s.facts.secure, s.head.path(&s.buf)) {
            if !serve_watched(s, pre).await {
                return None;
            }
            if s.status != 0 {
                return Some(pre.kind());
            }
        }
    }
    let route = routes.find_route(s.head.host_name(&s.buf), s.head.path(&s.buf));
    *route_slot = route.map_or(ROUTE_NONE, |r| r.index);
    let Some(route) = route else {
        send_status(s, 404);
        return Some(HandlerKind::NoRoute);
    };
    if let BodyKind::Length(n) = s.head.body {
        if n > ctx.config.http.max_body_bytes {
            send_status(s, 413);
            return Some(route.handler.kind());
        }
    }
    let handler: &'a dyn Handler = &*route.handler;
    if !serve_watched(s, handler).await {
        return None;
    }
    Some(handler.kind())
}

/// Runs `handler` on the stream until it is done; false if the client reset
/// the stream before the answer was complete.
async fn serve_watched<'a>(s: &mut H2Stream<'a, '_>, handler: &'a dyn Handler) -> bool {
    let out = s.out;
    let Served::Pending(mut fut) = handler.serve(s) else {
        return true;
    };
    let mut watching = true;
    std::future::poll_fn(|cx| {
        if fut.as_mut().poll(cx).is_ready() {
            return Poll::Ready(true);
        }
        if watching {
            match out.borrow_mut().respond.poll_reset(cx) {
                Poll::Ready(Ok(_)) => return Poll::Ready(false),
                Poll::Ready(Err(_)) => watching = false,
                Poll::Pending => {}
            }
        }
        Poll::Pending
    })
    .await
}

/// Answers with the status page of `status`.
fn send_status(s: &mut H2Stream<'_, '_>, status: u16) {
    let fields = [("content-type", b"text/plain; charset=utf-8".as_slice())];
    s.send_response(
        &ResponseHead::new(status, &fields),
        Body::Bytes(crate::http::status::status_text(status)),
    );
}
