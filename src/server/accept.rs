//! Accepting: each listener's accept loop under the worker's connection
//! limit and the current generation, handing every connection to
//! [`super::dispatch`].

use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tracing::{debug, warn};

use super::dispatch::serve_accepted;
use super::h1::serve_http1;
use super::transport::Plain;
use crate::config::ListenerConfig;
use crate::listener_key::ListenerKey;
use crate::worker::{ActiveGuard, WorkerCtx, WorkerShared};

/// The generation new connections are accepted under, and a count of reloads
/// so accept loops notice a change without comparing configurations.
pub(super) struct Current {
    pub(super) ctx: RefCell<Rc<WorkerCtx>>,
    pub(super) serial: Cell<u64>,
    pub(super) changed: Notify,
}

/// Connections accepted in one go before the accept loop yields, so a flood of
/// new clients cannot starve the connections this worker already serves.
const ACCEPT_BATCH: usize = 32;
/// What an accept loop needs of the current generation for its listener.
struct Accepting {
    serial: u64,
    /// The listener's position in the generation's configuration.
    index: usize,
    ctx: Rc<WorkerCtx>,
    lc: Rc<ListenerConfig>,
    tls: Option<crate::tls::WorkerTls>,
}

impl Accepting {
    /// The current generation's settings for the listener configured as `addr`;
    /// `None` once a reload removed it.
    fn of(current: &Current, key: ListenerKey) -> Option<Accepting> {
        let ctx = current.ctx.borrow().clone();
        let index = ListenerKey::of(&ctx.config)
            .iter()
            .position(|k| *k == key)?;
        let lc = ctx.config.listeners[index].clone();
        Some(Accepting {
            serial: current.serial.get(),
            index,
            tls: lc.tls.as_ref().map(|t| t.listener.worker()),
            lc: Rc::new(lc),
            ctx,
        })
    }
}

pub(super) async fn accept_loop(current: Rc<Current>, listener: TcpListener, key: ListenerKey) {
    let shared = current.ctx.borrow().shared.clone();
    let Some(mut now) = Accepting::of(&current, key) else {
        return;
    };
    let mut batch = 0;
    let mut changed = Box::pin(current.changed.notified());
    changed.as_mut().enable();
    loop {
        if !shared.wait_for_capacity().await {
            break;
        }
        batch += 1;
        if batch > ACCEPT_BATCH {
            batch = 0;
            tokio::task::yield_now().await;
        }
        if now.serial != current.serial.get() {
            match Accepting::of(&current, key) {
                Some(a) => now = a,
                None => {
                    debug!(worker = shared.id, listener = %key, "listener removed by reload; closing it");
                    return;
                }
            }
        }
        let accepted = tokio::select! {
            biased;
            _ = shared.stopped() => break,
            _ = changed.as_mut() => {
                changed = Box::pin(current.changed.notified());
                changed.as_mut().enable();
                continue;
            }
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                if is_fd_exhaustion(&e) {
                    warn!(worker = shared.id, error = %e, "accept: out of file descriptors; backing off");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                } else {
                    debug!(worker = shared.id, error = %e, "accept failed");
                }
                continue;
            }
        };
        start_conn(&shared, &mut now, stream, peer);
    }
    // The kernel completed the handshakes of the connections still queued, so
    // their clients (or a balancer) already count on an answer: take them
    // before the socket closes, which would reset them.
    let mut late = 0;
    while let Some((stream, peer)) = accept_queued(&listener) {
        start_conn(&shared, &mut now, stream, peer);
        late += 1;
    }
    debug!(worker = shared.id, listener = %key, queued = late, "stopped accepting");
}

/// Accepts one connection waiting in the listen queue without waiting for
/// readiness (the reactor may not have seen it yet); `None` once it is empty.
fn accept_queued(listener: &TcpListener) -> Option<(TcpStream, SocketAddr)> {
    let (socket, addr) = socket2::SockRef::from(listener).accept().ok()?;
    let peer = addr.as_socket()?;
    let std = std::net::TcpStream::from(socket);
    std.set_nonblocking(true).ok()?;
    Some((TcpStream::from_std(std).ok()?, peer))
}

/// Counts an accepted connection and starts serving it under the generation it
/// was accepted in.
fn start_conn(shared: &Rc<WorkerShared>, now: &mut Accepting, stream: TcpStream, peer: SocketAddr) {
    // TCP_NODELAY and the other socket options come from the listening socket.
    shared.stats.accepted.add(1);
    let guard = ActiveGuard::new(shared.clone());
    let ctx = now.ctx.clone();
    let lc = &now.lc;
    let index = now.index;
    if now.tls.is_none() && lc.tcp.is_none() && !lc.accept_proxy_protocol && !lc.http2 {
        // The common case, kept free of the steps below.
        let trusted = lc
            .client_address
            .trusts_any()
            .then(|| lc.client_address.clone());
        tokio::task::spawn_local(async move {
            serve_http1(Plain::new(stream), &ctx, peer, index, trusted.as_deref()).await;
            drop(guard);
        });
        return;
    }
    // Taken at accept time, so a reloaded certificate applies to the next
    // connection and each worker keeps its own session cache.
    let acceptor = now.tls.as_mut().map(|t| t.acceptor());
    let lc = lc.clone();
    tokio::task::spawn_local(async move {
        serve_accepted(&ctx, &lc, index, acceptor, stream, peer).await;
        drop(guard);
    });
}

fn is_fd_exhaustion(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(code) if code == rustix::io::Errno::MFILE.raw_os_error() || code == rustix::io::Errno::NFILE.raw_os_error() || code == rustix::io::Errno::NOBUFS.raw_os_error() || code == rustix::io::Errno::NOMEM.raw_os_error())
}
