//! The HTTP/2 driver for a downstream connection (TLS with ALPN `h2`, or plain
//! TCP with prior knowledge), on Pier's own codec ([`crate::http2`]): a
//! second driver of the [`Session`] seam, so every handler serves HTTP/2 as
//! it serves HTTP/1.
//!
//! The connection task moves bytes between the socket and the codec, starts
//! a stream for each request and owns the connection's limits: the idle
//! timeout, the request count, the budget of streams the client resets
//! before their answer (rapid reset), a write stall, and the GOAWAY of a
//! drain. A stream that can answer at once (a `respond` route, a file in
//! memory) is answered inside the read that brought it, so the answers to
//! one read leave in one write; one that waits goes on as a task of its own
//! on the worker's runtime, so a slow handler delays no other stream. The
//! protocol's floods (PING, SETTINGS, empty frames, CONTINUATION, resets for
//! errors) are bounded by the codec as configured from `[http2]`; a client
//! that never reads what the connection owes it is not read from.
//!
//! [`Session`]: crate::http::Session

mod drain;
mod stream;
mod streams;
#[cfg(test)]
mod tests;
mod tunnel;

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::debug;

use crate::http::client_address::ClientAddress;
use crate::http::BodyReadError;
use crate::http2::conn::ServerConnection;
use crate::http2::ErrorCode;
use crate::observe::access_log::TlsFields;
use crate::observe::metrics::H2Event;
use crate::server::stream_session::{answer_body_error, log_stream, StreamLine, StreamReset};
use crate::server::stream_tunnel::send_pending;
use crate::server::transport::Downstream;
use crate::service::{self, AbandonWatch, DriverSession, Outcome};
use crate::worker::WorkerCtx;
use stream::H2Stream;
use streams::{Fresh, Shared, SharedCell, StreamTable};

/// How long a connection that sent GOAWAY stays open once its last stream
/// is done, for frames already in flight.
const GOAWAY_GRACE: Duration = Duration::from_secs(1);

/// How long a connection with no open stream keeps its buffers (read,
/// output, spare heads) before freeing them: long enough that a busy
/// connection between two reads keeps them, short enough that an idle one
/// holds as little as an idle HTTP/1 connection.
const RELEASE_AFTER: Duration = Duration::from_millis(200);

/// Frees what an idle connection holds beyond its codec's state.
fn release_idle_buffers(shared: &SharedCell, rbuf: &mut Vec<u8>) {
    if rbuf.is_empty() {
        *rbuf = Vec::new();
    }
    let mut sh = shared.borrow_mut();
    sh.conn.release_idle_buffers();
    sh.table.release_idle();
}

/// Most runs of queued output handed to one write (a DATA frame's head and
/// its body slice are two).
const WRITE_SLICES: usize = 64;

/// Room kept free in the read buffer before each read.
const READ_ROOM: usize = 16 * 1024;

/// What a request view needs of the connection's TLS session, copied once so
/// streams do not borrow the transport.
#[derive(Default)]
pub(crate) struct ConnFacts {
    secure: bool,
    version: Option<&'static str>,
    cipher: Option<&'static str>,
    sni: Option<Box<str>>,
    client_subject: Option<Box<str>>,
    /// The listener's trusted proxies, when it has any.
    client_address: Option<Arc<ClientAddress>>,
    /// The listener the connection came on, by its position in the configuration.
    listener: usize,
    /// `Alt-Svc` for every answer, when the listener serves HTTP/3.
    alt_svc: Option<Rc<[u8]>>,
}

/// What the connection task and its streams share besides the codec.
pub(crate) struct ConnState {
    /// Streams being answered.
    active: Cell<usize>,
    /// When the last stream ended (or the connection began).
    idle_since: Cell<Instant>,
    /// Streams the client reset before their answer was complete.
    client_resets: Cell<u32>,
    /// Since when the socket has refused output.
    stalled_since: Cell<Option<Instant>>,
    /// Tells the connection task to look at the above again.
    wake: Notify,
}

/// Counts a stream as open until dropped (its task may be aborted), then
/// takes it out of the table.
struct StreamGuard {
    state: Rc<ConnState>,
    ctx: Rc<WorkerCtx>,
    shared: Rc<SharedCell>,
    id: u32,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Ok(mut sh) = self.shared.try_borrow_mut() {
            let sh = &mut *sh;
            let unread = sh.table.remove(self.id);
            sh.conn.release(self.id, unread);
            // Whatever the stream has not ended ends here (NO_ERROR after a
            // whole answer: the client may stop sending its body).
            sh.conn.reset_stream(self.id, ErrorCode::NoError);
            // A stream that waited for this one's turn to end goes on.
            if let Some(next) = sh.conn.next_sender() {
                sh.table.wake_stream(next);
            }
            sh.table.wake_conn();
        }
        let n = self.state.active.get() - 1;
        self.state.active.set(n);
        let open = &self.ctx.stats.h2_streams_open;
        open.set(open.get().saturating_sub(1));
        if n == 0 {
            self.state.idle_since.set(self.ctx.clock.now());
            self.state.wake.notify_one();
        }
    }
}

/// What the socket did.
enum IoEvent {
    /// Bytes arrived (in the read buffer).
    Read,
    /// The peer closed, or the socket failed.
    Closed,
}

/// Writes what the codec queued, then reads if the output is not backed up.
fn poll_io<D: Downstream>(
    cx: &mut Context<'_>,
    io: &mut D,
    shared: &SharedCell,
    rbuf: &mut Vec<u8>,
    state: &ConnState,
    ctx: &WorkerCtx,
) -> Poll<IoEvent> {
    let mut sh = shared.borrow_mut();
    let sh = &mut *sh;
    sh.table.set_conn_waker(cx.waker());
    loop {
        if sh.conn.output_len() == 0 {
            // Records TLS took in but a full socket did not (the last of a
            // long answer) leave once the socket has room, not with whatever
            // is queued next: nothing may be.
            match io.poll_flush_held(cx) {
                Poll::Ready(Ok(())) => state.stalled_since.set(None),
                Poll::Ready(Err(_)) => return Poll::Ready(IoEvent::Closed),
                Poll::Pending => {
                    if state.stalled_since.get().is_none() {
                        state.stalled_since.set(Some(Instant::now()));
                        state.wake.notify_one();
                    }
                }
            }
            break;
        }
        let mut slices = [std::io::IoSlice::new(&[]); WRITE_SLICES];
        let n = sh.conn.output_slices(&mut slices);
        match io.poll_write_gathered(cx, &slices[..n]) {
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(IoEvent::Closed),
            Poll::Ready(Ok(n)) => {
                sh.conn.consume_output(n);
                ctx.stats.bytes_out.add(n as u64);
                state.stalled_since.set(None);
            }
            Poll::Pending => {
                if state.stalled_since.get().is_none() {
                    state.stalled_since.set(Some(Instant::now()));
                    state.wake.notify_one();
                }
                break;
            }
        }
    }
    if sh.conn.output_len() == 0 && sh.conn.error().is_some() {
        // The codec ended the connection outside a read (a client's tiny
        // windows spent its small-data budget): its GOAWAY is written.
        return Poll::Ready(IoEvent::Closed);
    }
    let high = ctx.config.http2.max_send_buffer;
    if sh.table.output_waiters && sh.conn.output_len() < high / 2 {
        sh.table.output_waiters = false;
        sh.table.wake_all();
    }
    if sh.conn.output_len() >= high {
        // A client that does not read what it is owed is not read from.
        return Poll::Pending;
    }
    if rbuf.capacity() - rbuf.len() < READ_ROOM / 4 {
        rbuf.reserve(READ_ROOM);
    }
    match io.poll_read_into(cx, rbuf) {
        Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => Poll::Ready(IoEvent::Closed),
        Poll::Ready(Ok(n)) => {
            ctx.stats.bytes_in.add(n as u64);
            Poll::Ready(IoEvent::Read)
        }
        Poll::Pending => {
            if state.active.get() == 0 {
                // Nothing to read and no stream open: the transport's read
                // buffer goes at once, the connection's own at RELEASE_AFTER.
                D::release_idle_io(io.io_mut());
            }
            Poll::Pending
        }
    }
}

/// Writes what the codec queued for a moment, before the connection closes.
async fn flush_last<D: Downstream>(io: &mut D, shared: &SharedCell) {
    let flush = std::future::poll_fn(|cx| {
        let mut sh = shared.borrow_mut();
        loop {
            if sh.conn.output_len() == 0 {
                return Poll::Ready(());
            }
            let mut slices = [std::io::IoSlice::new(&[]); WRITE_SLICES];
            let n = sh.conn.output_slices(&mut slices);
            match io.poll_write_gathered(cx, &slices[..n]) {
                Poll::Ready(Ok(n)) if n > 0 => sh.conn.consume_output(n),
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    });
    let _ = tokio::time::timeout(Duration::from_millis(100), flush).await;
}

/// Serves one downstream HTTP/2 connection until it closes.
pub async fn serve_h2<D: Downstream>(
    mut io: D,
    ctx: Rc<WorkerCtx>,
    peer: SocketAddr,
    listener: usize,
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
            listener,
            alt_svc: ctx.alt_svc(listener),
        },
        None => ConnFacts {
            client_address,
            listener,
            ..ConnFacts::default()
        },
    });
    let state = Rc::new(ConnState {
        active: Cell::new(0),
        idle_since: Cell::new(Instant::now()),
        client_resets: Cell::new(0),
        stalled_since: Cell::new(None),
        wake: Notify::new(),
    });
    let cfg = &ctx.config.http2;
    let http = &ctx.config.http;
    let limits = ctx.config.http2.conn_limits(&ctx.config.http);
    let shared: Rc<SharedCell> = Rc::new(RefCell::new(Shared {
        conn: ServerConnection::new(limits),
        table: StreamTable::new(http.limits),
    }));
    let started = Instant::now();
    let mut rbuf: Vec<u8> = Vec::new();
    let mut streams = JoinSet::new();
    let mut fresh: Vec<Fresh> = Vec::new();
    // The allocation of the last stream answered at once, for the next one.
    let mut spare_task = None;
    let mut requests = 0u64;
    let mut spoke = false;
    let mut goaway_at: Option<Instant> = None;
    let mut calmed = false;
    // Buffers are held (since the last read) and not yet freed.
    let mut holding = true;
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
        if holding && state.active.get() == 0 {
            deadline = deadline.min(state.idle_since.get() + RELEASE_AFTER);
        }
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        tokio::select! {
            biased;
            () = ctx.draining(), if goaway_at.is_none() => {
                debug!(%peer, "draining: HTTP/2 GOAWAY");
                shared.borrow_mut().conn.goaway_gracefully();
                ctx.stats.h2_event(H2Event::Goaway);
                goaway_at.get_or_insert_with(Instant::now);
            }
            () = state.wake.notified() => {
                if !calmed && state.client_resets.get() > cfg.max_client_resets {
                    debug!(%peer, "too many streams reset by the client: GOAWAY");
                    shared.borrow_mut().conn.goaway(ErrorCode::EnhanceYourCalm);
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
                if holding && state.active.get() == 0 && state.idle_since.get() + RELEASE_AFTER <= Instant::now() {
                    release_idle_buffers(&shared, &mut rbuf);
                    holding = false;
                    continue;
                }
                if state.active.get() == 0 {
                    if !spoke {
                        // The preface never came in time.
                        break;
                    }
                    if goaway_at.is_some() {
                        let mut sh = shared.borrow_mut();
                        if sh.conn.shutdown_complete() {
                            // The grace after the final GOAWAY is over.
                            break;
                        }
                        // The client did not acknowledge the first GOAWAY's
                        // PING in time: the final GOAWAY now, and its grace.
                        sh.conn.goaway(ErrorCode::NoError);
                        goaway_at = Some(Instant::now());
                        continue;
                    }
                    debug!(%peer, "HTTP/2 connection idle: GOAWAY");
                    shared.borrow_mut().conn.goaway_gracefully();
                    ctx.stats.h2_event(H2Event::Goaway);
                    goaway_at.get_or_insert_with(Instant::now);
                    state.idle_since.set(Instant::now());
                }
            }
            event = std::future::poll_fn(|cx| poll_io(cx, &mut io, &shared, &mut rbuf, &state, &ctx)) => {
                if let IoEvent::Closed = event {
                    break;
                }
                holding = true;
                let received = {
                    let mut sh = shared.borrow_mut();
                    let sh = &mut *sh;
                    let r = sh.conn.receive(&rbuf, ctx.clock.now().into_std(), &mut sh.table);
                    std::mem::swap(&mut fresh, &mut sh.table.fresh);
                    for (id, n) in sh.table.unclaimed.drain(..) {
                        sh.conn.release(id, n);
                    }
                    r
                };
                let closing = match &received {
                    Ok(n) => {
                        let n = *n;
                        rbuf.drain(..n);
                        false
                    }
                    Err(e) => {
                        debug!(%peer, code = ?e.code, "HTTP/2 connection error: GOAWAY");
                        ctx.stats.h2_event(H2Event::Goaway);
                        if e.code == ErrorCode::EnhanceYourCalm {
                            ctx.stats.h2_event(H2Event::ControlFlood);
                        }
                        true
                    }
                };
                if !spoke && received.is_ok() {
                    spoke = true;
                    ctx.stats.h2_event(H2Event::Connection);
                }
                ctx.clock.woke();
                for f in fresh.drain(..) {
                    if requests >= cfg.max_requests {
                        // Past max_requests, before the client saw the GOAWAY:
                        // refused, so it retries on a new connection.
                        let mut sh = shared.borrow_mut();
                        sh.conn.reset_stream(f.id, ErrorCode::RefusedStream);
                        sh.table.remove(f.id);
                        sh.table.give_head(f.head);
                        continue;
                    }
                    requests += 1;
                    if requests >= cfg.max_requests && goaway_at.is_none() {
                        shared.borrow_mut().conn.goaway(ErrorCode::NoError);
                        ctx.stats.h2_event(H2Event::Goaway);
                        goaway_at.get_or_insert_with(Instant::now);
                    }
                    state.active.set(state.active.get() + 1);
                    ctx.stats.h2_streams_open.set(ctx.stats.h2_streams_open.get() + 1);
                    let guard = StreamGuard {
                        state: state.clone(),
                        ctx: ctx.clone(),
                        shared: shared.clone(),
                        id: f.id,
                    };
                    let (ctx, state, facts, shared) =
                        (ctx.clone(), state.clone(), facts.clone(), shared.clone());
                    let task = async move {
                        let _guard = guard;
                        // Pinned where it is made: the clock tracks it through
                        // the pin, so the stream's state is not moved again.
                        let stream = std::pin::pin!(run_stream(&ctx, state, facts, shared, peer, f));
                        ctx.clock.track(stream).await;
                    };
                    let mut stream = match spare_task.take() {
                        Some(mut spare) => {
                            std::pin::Pin::set(&mut spare, task);
                            spare
                        }
                        None => Box::pin(task),
                    };
                    // A stream answered at once ends here, with no task of
                    // its own (its allocation kept for the next stream); one
                    // that waits goes on as a task, so it delays no other
                    // stream.
                    let waits = std::future::poll_fn(|cx| Poll::Ready(stream.as_mut().poll(cx).is_pending())).await;
                    if waits {
                        streams.spawn_local(stream);
                    } else {
                        spare_task = Some(stream);
                    }
                }
                if closing {
                    break;
                }
            }
            Some(_) = streams.join_next(), if !streams.is_empty() => {}
        }
    }
    // The last frames (a GOAWAY) go out if the socket takes them soon.
    flush_last(&mut io, &shared).await;
    streams.abort_all();
}

/// Serves one stream: its head handed to the service step (or refused, when
/// the codec marked it so), its log line written.
async fn run_stream(
    ctx: &WorkerCtx,
    state: Rc<ConnState>,
    facts: Rc<ConnFacts>,
    shared: Rc<SharedCell>,
    peer: SocketAddr,
    fresh: Fresh,
) {
    let started = ctx.clock.now();
    let Fresh {
        id,
        head,
        parsed,
        extended_connect,
    } = fresh;
    let mut s = H2Stream::new(ctx, facts, shared, peer, id, head);
    s.extended_connect = extended_connect;
    let outcome = match parsed {
        Err(status) => service::refuse_request(&mut s, status, started).await,
        Ok(()) => service::serve_request(&mut s, started).await,
    };
    let took = match outcome {
        Outcome::Answered { took, .. } => took,
        Outcome::Abandoned => {
            // Reset by the client before its answer.
            ctx.stats.h2_event(H2Event::ClientReset);
            state.client_resets.set(state.client_resets.get() + 1);
            state.wake.notify_one();
            return;
        }
        // The client went away mid-body: the stream is reset.
        Outcome::Stopped(StreamReset) => return,
    };
    ctx.stats.h2_event(H2Event::Request);
    if let Some(log) = &ctx.access_log {
        let f = &s.facts;
        let line = StreamLine {
            protocol: "HTTP/2.0",
            stream: Some(s.stream_id),
            body_bytes: s.answer.sent,
            took,
            tls: f.secure.then(|| TlsFields {
                version: f.version,
                cipher: f.cipher,
                sni: f.sni.as_deref(),
            }),
        };
        log_stream(log, &s, line);
    }
    s.drain_unread_body().await;
    s.shared.borrow_mut().table.give_head(s.built);
}

/// How HTTP/2 meets the service step: a body nobody reads is left to the
/// stream's end, a body over the limit is answered 413 on the stream, and a
/// client gives up on a request by resetting its stream.
impl<'a> DriverSession<'a> for H2Stream<'a> {
    type Stop = StreamReset;
    type Watch = ResetWatch;

    fn protocol_version(&self) -> &'static str {
        "2"
    }

    fn watch(&self) -> ResetWatch {
        ResetWatch {
            shared: self.shared.clone(),
            id: self.stream_id,
        }
    }

    fn answer_body_error(&mut self, error: BodyReadError) -> Result<(), StreamReset> {
        answer_body_error(self, error, |s| s.reset(ErrorCode::Cancel))
    }

    async fn finish_answer(&mut self) -> Result<(), StreamReset> {
        let ctx = self.ctx;
        if self.answer.push.unfinished() {
            debug!(peer = %self.peer, stream = self.stream_id, "pushed response body left unfinished");
            self.reset(ErrorCode::InternalError);
            ctx.stats.h2_event(H2Event::ServerReset);
        } else if let Err(e) = send_pending(self).await {
            debug!(peer = %self.peer, stream = self.stream_id, error = %e, "HTTP/2 response body not sent whole");
            let code = if e.kind() == std::io::ErrorKind::TimedOut {
                ctx.stats.h2_event(H2Event::WriteTimeout);
                ErrorCode::Cancel
            } else {
                ctx.stats.h2_event(H2Event::ServerReset);
                ErrorCode::InternalError
            };
            self.reset(code);
        }
        // A stream whose answer failed is still counted and logged.
        Ok(())
    }
}

/// Watches one stream's table slot for the client's reset.
pub struct ResetWatch {
    shared: Rc<SharedCell>,
    id: u32,
}

impl AbandonWatch for ResetWatch {
    fn poll_abandoned(&self, cx: &mut Context<'_>) -> bool {
        let mut sh = self.shared.borrow_mut();
        match sh.table.slot_mut(self.id) {
            Some(slot) if slot.reset.is_some() => true,
            Some(slot) => {
                slot.wait(cx.waker());
                false
            }
            None => true,
        }
    }
}
