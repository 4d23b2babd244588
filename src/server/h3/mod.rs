//! The HTTP/3 driver (RFC 9114) on QUIC ([`crate::quic`]) and Pier's own
//! codec ([`crate::http3`]): a third driver of the [`Session`] seam, whose
//! requests go through the same service step as HTTP/1's and HTTP/2's.
//!
//! Each worker runs one endpoint per TLS listener with HTTP/3 on its own
//! UDP socket; every connection gets a task that steps its QUIC and HTTP/3
//! state ([`conn`]) and starts a task per request ([`stream`]). A drain
//! sends GOAWAY, lets the requests in flight finish, then closes.
//!
//! [`Session`]: crate::http::Session

mod conn;
mod send_order;
mod stream;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Context;
use std::time::Instant;

use tokio::sync::Notify;
use tokio::task::JoinSet;
use tracing::{debug, warn};

use crate::http::client_address::ClientAddress;
use crate::http::{BodyReadError, Session};
use crate::http3::ErrorCode;
use crate::observe::access_log::TlsFields;
use crate::observe::quic_stats::TransportFigures;
use crate::quic::config::QuicListenerConfig;
use crate::quic::connection::{Flushed, QuicConnIo};
use crate::quic::endpoint::{Accepted, WorkerEndpoint};
use crate::server::stream_session::{answer_body_error, log_stream, StreamLine, StreamReset};
use crate::server::stream_tunnel::send_pending;
use crate::service::{self, AbandonWatch, DriverSession, Outcome};
use crate::worker::{ActiveGuard, WorkerCtx};
use conn::{Fresh, H3Conn};
use stream::H3Stream;

use super::accept::Current;
use crate::listener_key::ListenerKey;

/// What a request view needs of the connection, copied once.
pub(crate) struct ConnFacts {
    sni: Option<Box<str>>,
    client_address: Option<Arc<ClientAddress>>,
    listener: usize,
}

/// Runs a listener's QUIC endpoint on this worker: each connection is
/// served under the generation current when it arrives.
pub(super) async fn quic_listener(
    current: Rc<Current>,
    udp: crate::quic::socket::WorkerUdp,
    key: ListenerKey,
) {
    let socket = match crate::quic::socket::QuicSocket::new(udp.socket) {
        Ok(s) => s,
        Err(e) => {
            warn!(listener = %key, error = %e, "cannot serve HTTP/3 on this socket");
            return;
        }
    };
    let endpoint = WorkerEndpoint::new(socket, udp.steering);
    let shared = current.ctx.borrow().shared.clone();
    if let Ok(bound) = endpoint.local_addr() {
        shared.offer_http3(key, bound.port());
    }
    {
        let endpoint = endpoint.clone();
        tokio::task::spawn_local(async move {
            shared.stopped().await;
            endpoint.refuse_new();
        });
    }
    // The TLS and transport config, built again when a reload changes the
    // generation.
    let built: RefCell<Option<(u64, Option<Arc<QuicListenerConfig>>)>> = RefCell::new(None);
    let config = || {
        let serial = current.serial.get();
        let mut b = built.borrow_mut();
        if b.as_ref().is_none_or(|(s, _)| *s != serial) {
            let ctx = current.ctx.borrow().clone();
            let index = ListenerKey::of(&ctx.config).iter().position(|k| *k == key);
            let made = index
                .and_then(|i| {
                    ctx.config.listeners[i]
                        .tls
                        .as_ref()
                        .filter(|_| ctx.config.listeners[i].http3)
                })
                .and_then(|tls| {
                    crate::quic::config::quic_listener_config(
                        tls.listener.quic_config(),
                        tls.listener.quic_token_key(),
                        &ctx.config.http3,
                    )
                    .map_err(|e| warn!(listener = %key, error = %e, "HTTP/3 is off"))
                    .ok()
                });
            *b = Some((serial, made));
        }
        b.as_ref().and_then(|(_, c)| c.clone())
    };
    let mut accept = |a: Accepted| {
        let ctx = current.ctx.borrow().clone();
        let Some(index) = ListenerKey::of(&ctx.config).iter().position(|k| *k == key) else {
            return;
        };
        ctx.stats.accepted.add(1);
        ctx.stats.quic.connections.add(1);
        let guard = ActiveGuard::new(ctx.shared.clone());
        tokio::task::spawn_local(serve_h3(a, ctx, index, guard));
    };
    // QUIC connections count toward `max_connections` with TCP ones; at
    // the limit a new client is refused (it may use HTTP/1.1 or HTTP/2,
    // whose accepts wait in the backlog).
    let admit = || {
        let shared = &current.ctx.borrow().shared;
        !shared.conn_limit().is_full(shared.active.get())
    };
    let steered = || current.ctx.borrow().stats.quic.packets_steered.add(1);
    let retried = || current.ctx.borrow().stats.quic.retry_sent.add(1);
    endpoint
        .run(&config, &admit, &steered, &retried, &mut accept)
        .await;
}

/// Counts a request as open until dropped (its task may be aborted), then
/// lets the connection end its stream.
struct RequestGuard {
    ctx: Rc<WorkerCtx>,
    conn: Rc<RefCell<H3Conn>>,
    wake: Rc<Notify>,
    id: quinn_proto::StreamId,
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.ctx.stats.quic.stream_closed();
        if let Ok(mut c) = self.conn.try_borrow_mut() {
            let unfinished = c.requests.get(&self.id).is_some_and(|s| !s.fin && !s.reset);
            if unfinished {
                // An answer left unfinished must not look whole.
                c.reset_stream(self.id, ErrorCode::InternalError);
            }
            if let Some(slot) = c.requests.get_mut(&self.id) {
                slot.done = true;
            }
        }
        self.wake.notify_one();
    }
}

/// What the connection's transport counted so far.
fn transport_figures(quic: &quinn_proto::Connection) -> TransportFigures {
    let stats = quic.stats();
    TransportFigures {
        packets_lost: stats.path.lost_packets,
        datagrams_sent: stats.udp_tx.datagrams,
        datagrams_received: stats.udp_rx.datagrams,
        udp_sends: stats.udp_tx.ios,
    }
}

/// Serves one QUIC connection until it closes.
async fn serve_h3(a: Accepted, ctx: Rc<WorkerCtx>, listener: usize, guard: ActiveGuard) {
    let Accepted { conn, route } = a;
    let mut io = QuicConnIo::new(route);
    let peer = conn.remote_address();
    let lc = &ctx.config.listeners[listener];
    let trusted = lc
        .client_address
        .trusts_any()
        .then(|| lc.client_address.clone());
    let shared = Rc::new(RefCell::new(H3Conn::new(conn, &ctx.config)));
    let wake = Rc::new(Notify::new());
    let link = io.link().clone();
    let mut facts: Option<Rc<ConnFacts>> = None;
    let mut handshaken = false;
    let mut tasks = JoinSet::new();
    let mut fresh: Vec<Fresh> = Vec::new();
    let mut closing = false;
    let mut reported = TransportFigures::default();
    let mut counted = FloodsCounted::default();
    // QUIC closes a connection quiet for the idle timeout (keepalive_timeout)
    // whether requests are open or not; one that has requests open (a
    // tunnel, a slow answer) is not idle, so it is pinged within it.
    let ping_every = ctx.config.http.keepalive_timeout / 2;
    let mut next_ping: Option<Instant> = None;
    // A handshake gets the listener's TLS deadline, not the idle timeout.
    let handshake_deadline = lc
        .tls
        .as_ref()
        .map(|t| Instant::now() + t.handshake_timeout);
    loop {
        let now = Instant::now();
        let (deadline, flushed, drained) = {
            let mut c = shared.borrow_mut();
            let c = &mut *c;
            io.absorb(&mut c.quic);
            if c.quic.poll_timeout().is_some_and(|t| t <= now) {
                c.quic.handle_timeout(now);
            }
            c.final_goaway(now);
            c.step(now);
            // Floods are counted when the connection is closed for them,
            // not once it has drained: the client has its
            // CONNECTION_CLOSE long before.
            if c.reset_flood && !counted.reset_flood {
                counted.reset_flood = true;
                ctx.stats.quic.reset_floods.add(1);
            }
            if c.frame_flood && !counted.frame_flood {
                counted.frame_flood = true;
                ctx.stats.quic.frame_floods.add(1);
            }
            // The facts are known once the ClientHello is read: requests in
            // 0-RTT early data are served before the handshake ends.
            if facts.is_none() {
                if let Some(data) = c.quic.crypto_session().handshake_data() {
                    let sni = data
                        .downcast::<quinn_proto::crypto::rustls::HandshakeData>()
                        .ok()
                        .and_then(|d| d.server_name)
                        .map(Into::into);
                    facts = Some(Rc::new(ConnFacts {
                        sni,
                        client_address: trusted.clone(),
                        listener,
                    }));
                    if c.quic.has_0rtt() {
                        ctx.stats.quic.early_data.add(1);
                    }
                }
            }
            // A connection closed mid-handshake is no longer handshaking
            // either.
            if !handshaken && !c.quic.is_handshaking() && !c.quic.is_closed() {
                handshaken = true;
                ctx.stats.tls_handshake(Some("TLSv1.3"), false);
                ctx.stats.quic.handshakes.add(1);
            }
            if !handshaken && !closing && handshake_deadline.is_some_and(|d| now >= d) {
                debug!(%peer, "QUIC handshake timeout");
                c.close(now, ErrorCode::NoError, "handshake timeout");
                closing = true;
            }
            // Requests wait here until the handshake's facts are read.
            fresh.append(&mut c.fresh);
            if c.goaway.is_some() && c.idle() && !closing && !c.lost {
                // Drained: every request before the GOAWAY is answered.
                c.close(now, ErrorCode::NoError, "");
                closing = true;
            }
            if c.requests.is_empty() || ping_every.is_zero() {
                next_ping = None;
            } else {
                let due = *next_ping.get_or_insert(now + ping_every);
                if due <= now {
                    c.quic.ping();
                    next_ping = Some(now + ping_every);
                }
            }
            let flushed = io.flush(&mut c.quic, now);
            ctx.stats
                .quic
                .absorb(transport_figures(&c.quic), &mut reported);
            let handshake_deadline = handshake_deadline.filter(|_| !handshaken && !closing);
            let goaway_due = c.goaway_due.filter(|_| c.goaway.is_none());
            let deadline = [
                c.quic.poll_timeout(),
                next_ping,
                handshake_deadline,
                goaway_due,
            ]
            .into_iter()
            .flatten()
            .min();
            (deadline, flushed, c.quic.is_drained())
        };
        if drained {
            break;
        }
        if let Some(facts) = &facts {
            for f in fresh.drain(..) {
                ctx.stats.quic.stream_opened();
                let request = RequestGuard {
                    ctx: ctx.clone(),
                    conn: shared.clone(),
                    wake: wake.clone(),
                    id: f.id,
                };
                let (ctx, facts, conn, wake) =
                    (ctx.clone(), facts.clone(), shared.clone(), wake.clone());
                tasks.spawn_local(async move {
                    let _request = request;
                    let clock = &ctx.clock;
                    clock
                        .track(run_request(&ctx, facts, conn, wake, peer, f))
                        .await;
                });
            }
        }
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = ctx.draining(), if shared.borrow().goaway_due.is_none() => {
                debug!(%peer, "draining: HTTP/3 GOAWAY");
                shared.borrow_mut().goaway(Instant::now());
                ctx.stats.quic.goaways.add(1);
            }
            () = link.notify.notified() => {}
            () = wake.notified() => {}
            () = io.writable(), if flushed == Flushed::Blocked => {}
            () = sleep => {}
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    tasks.abort_all();
    if !handshaken {
        ctx.stats.quic.handshakes_failed.add(1);
    }
    let c = shared.borrow();
    let stats = c.quic.stats();
    debug!(
        %peer,
        rtt = ?stats.path.rtt,
        lost_packets = stats.path.lost_packets,
        congestion_events = stats.path.congestion_events,
        sent_packets = stats.path.sent_packets,
        "HTTP/3 connection ended"
    );
    drop(guard);
}

/// The floods a connection was closed for that the counters have.
#[derive(Default)]
struct FloodsCounted {
    reset_flood: bool,
    frame_flood: bool,
}

/// Serves one request: its head handed to the service step (or refused),
/// its log line written.
async fn run_request(
    ctx: &WorkerCtx,
    facts: Rc<ConnFacts>,
    conn: Rc<RefCell<H3Conn>>,
    wake: Rc<Notify>,
    peer: SocketAddr,
    fresh: Fresh,
) {
    let started = ctx.clock.now();
    let Fresh {
        id,
        buf,
        head,
        parsed,
        extended_connect,
        early_data,
    } = fresh;
    let mut s = H3Stream::new(ctx, facts, conn, wake, peer, id, buf, head);
    s.extended_connect = extended_connect;
    s.early_data = early_data;
    // Early data may be a replay: only what reads is served from it, the
    // rest is for the client to send again after the handshake (RFC 8470).
    let parsed = match parsed {
        Ok(()) if early_data && !s.request().method().serves_from_early_data() => {
            ctx.stats.quic.too_early.add(1);
            Err(425)
        }
        p => p,
    };
    let outcome = match parsed {
        Err(status) => service::refuse_request(&mut s, status, started).await,
        Ok(()) => service::serve_request(&mut s, started).await,
    };
    let took = match outcome {
        Outcome::Answered { took, .. } => took,
        Outcome::Abandoned | Outcome::Stopped(StreamReset) => return,
    };
    ctx.stats.quic.requests.add(1);
    if let Ok(c) = s.conn.try_borrow() {
        ctx.stats.quic.rtt_sample(c.quic.rtt());
    }
    if let Some(log) = &ctx.access_log {
        let line = StreamLine {
            protocol: "HTTP/3.0",
            stream: u32::try_from(u64::from(s.id)).ok(),
            body_bytes: s.answer.sent,
            took,
            tls: Some(TlsFields {
                version: Some("TLSv1_3"),
                cipher: None,
                sni: s.facts.sni.as_deref(),
            }),
        };
        log_stream(log, &s, line);
    }
}

/// How HTTP/3 meets the service step: as HTTP/2 does, a body nobody reads
/// is left to the stream's end (STOP_SENDING once answered), one over the
/// limit is answered 413 on the stream, and a client gives up on a request
/// by resetting its stream.
impl<'a> DriverSession<'a> for H3Stream<'a> {
    type Stop = StreamReset;
    type Watch = ResetWatch;

    fn protocol_version(&self) -> &'static str {
        "3"
    }

    fn watch(&self) -> ResetWatch {
        ResetWatch {
            conn: self.conn.clone(),
            id: self.id,
        }
    }

    fn answer_body_error(&mut self, error: BodyReadError) -> Result<(), StreamReset> {
        answer_body_error(self, error, |s| s.reset(ErrorCode::RequestCancelled))
    }

    async fn finish_answer(&mut self) -> Result<(), StreamReset> {
        if self.answer.push.unfinished() {
            debug!(peer = %self.peer, stream = %self.id, "pushed response body left unfinished");
            self.reset(ErrorCode::InternalError);
        } else if let Err(e) = send_pending(self).await {
            debug!(peer = %self.peer, stream = %self.id, error = %e, "HTTP/3 response body not sent whole");
            self.reset(ErrorCode::InternalError);
        }
        // A stream whose answer failed is still counted and logged.
        Ok(())
    }
}

/// Watches one request's slot for the client's reset.
pub struct ResetWatch {
    conn: Rc<RefCell<H3Conn>>,
    id: quinn_proto::StreamId,
}

impl AbandonWatch for ResetWatch {
    fn poll_abandoned(&self, cx: &mut Context<'_>) -> bool {
        let Ok(mut c) = self.conn.try_borrow_mut() else {
            return false;
        };
        match c.requests.get_mut(&self.id) {
            Some(slot) if slot.reset => true,
            Some(slot) => {
                slot.wait(cx.waker());
                false
            }
            None => true,
        }
    }
}
