//! One worker: a thread with its own current-thread runtime, its own listening
//! sockets and its own state (buffers, `Date` cache, counters). Workers share only
//! the frozen config and a shutdown signal that is read once, off the request path.

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tracing::{debug, warn};

use crate::config::{Config, ListenerConfig};
use crate::conn::{self, Downstream, Plain, Tls};
use crate::handler::proxy::ProxyWorker;
use crate::http1::parse::RequestHead;
use crate::http1::write::DateCache;
use crate::observe::access_log::{self, WorkerLog};
use crate::observe::metrics::WorkerStats;
use crate::stream_proxy::{self, TlsInfo};
use crate::tls::stream::ReadAhead;

/// Buffers a connection holds only while it is working; idle connections give them back.
#[derive(Default)]
pub struct ConnBuffers {
    /// Bytes read from downstream, not yet consumed.
    pub read: Vec<u8>,
    /// Encoded responses not yet written.
    pub write: Vec<u8>,
    /// Parsed request head (spans into `read`).
    pub head: RequestHead,
}

/// Capacity a pooled read buffer starts with.
pub const READ_BUF: usize = 8 * 1024;
/// Buffers larger than this are freed instead of pooled, so one big request
/// does not pin memory for the life of the worker.
const POOL_MAX_CAPACITY: usize = 64 * 1024;
/// Pooled buffer sets kept per worker.
const POOL_MAX_SETS: usize = 256;

/// Per-worker counters, read when the worker stops.
#[derive(Default, Debug)]
pub struct Counters {
    /// Connections accepted.
    pub accepted: Cell<u64>,
    /// Requests answered.
    pub requests: Cell<u64>,
    /// Times an accept loop paused because the worker was at its connection limit.
    pub shed_pauses: Cell<u64>,
}

/// Connections accepted in one go before the accept loop yields, so a flood of
/// new clients cannot starve the connections this worker already serves.
const ACCEPT_BATCH: usize = 32;

/// A worker's share of `max_connections`: at `limit` the accept loops stop taking
/// connections (they wait in the kernel backlog, not refused) and resume once the
/// count falls to `low_water`, so accepting does not flap at the edge.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimit {
    /// Open connections at which accepting pauses; 0 means no limit.
    pub limit: usize,
    /// Open connections at or below which accepting resumes.
    pub low_water: usize,
}

impl ConnLimit {
    /// A limit of `limit` (0: none) that resumes at about 90% of it.
    pub fn new(limit: usize) -> Self {
        ConnLimit {
            limit,
            low_water: limit - (limit / 10).max(1).min(limit),
        }
    }

    fn is_full(&self, active: usize) -> bool {
        self.limit > 0 && active >= self.limit
    }
}

/// Everything a connection task of this worker can reach.
pub struct WorkerCtx {
    /// Worker index.
    pub id: usize,
    /// Frozen configuration.
    pub config: Arc<Config>,
    /// Cached `Date` value.
    pub date: RefCell<DateCache>,
    pool: RefCell<Vec<ConnBuffers>>,
    /// Open connections.
    pub active: Cell<usize>,
    /// Set once shutdown starts: finish in-flight requests, close idle ones.
    pub draining: Cell<bool>,
    /// Wakes idle connections and accept loops when shutdown starts.
    pub drain_signal: Notify,
    /// Wakes the drain wait when the last connection closes.
    idle_signal: Notify,
    /// This worker's connection limit.
    pub conn_limit: ConnLimit,
    /// Wakes paused accept loops when open connections fall to the low-water mark.
    capacity_signal: Notify,
    /// Counters.
    pub counters: Counters,
    /// Upstream pools and health as this worker sees them.
    pub proxy: ProxyWorker,
    /// Counters the admin listener reads; only this worker writes them.
    pub stats: Arc<WorkerStats>,
    /// This worker's access-log buffer; `None` when the log is off.
    pub access_log: Option<WorkerLog>,
}

impl WorkerCtx {
    /// Takes a buffer set from the pool, or makes one.
    pub fn take_buffers(&self) -> ConnBuffers {
        self.pool.borrow_mut().pop().unwrap_or_else(|| ConnBuffers {
            read: Vec::with_capacity(READ_BUF),
            write: Vec::with_capacity(READ_BUF),
            head: RequestHead::default(),
        })
    }

    /// Returns a buffer set; callers have consumed everything in it.
    pub fn give_buffers(&self, mut b: ConnBuffers) {
        if b.read.capacity() > POOL_MAX_CAPACITY || b.write.capacity() > POOL_MAX_CAPACITY {
            return;
        }
        b.read.clear();
        b.write.clear();
        b.head.clear();
        let mut pool = self.pool.borrow_mut();
        if pool.len() < POOL_MAX_SETS {
            pool.push(b);
        }
    }

    /// Resolves once shutdown has started.
    pub async fn draining(&self) {
        let notified = self.drain_signal.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.draining.get() {
            return;
        }
        notified.await;
    }

    /// Returns at once below the connection limit; at it, waits until the count
    /// has fallen to the low-water mark. False when shutdown started meanwhile.
    async fn wait_for_capacity(&self) -> bool {
        if !self.conn_limit.is_full(self.active.get()) {
            return true;
        }
        self.counters
            .shed_pauses
            .set(self.counters.shed_pauses.get() + 1);
        self.stats.shed.add(1);
        debug!(
            worker = self.id,
            open = self.active.get(),
            "at max_connections; pausing accepts"
        );
        loop {
            let resumed = self.capacity_signal.notified();
            tokio::pin!(resumed);
            resumed.as_mut().enable();
            if self.active.get() <= self.conn_limit.low_water {
                debug!(
                    worker = self.id,
                    open = self.active.get(),
                    "resuming accepts"
                );
                return true;
            }
            tokio::select! {
                biased;
                _ = self.draining() => return false,
                _ = resumed => {}
            }
        }
    }
}

/// Counts a connection as open until dropped.
pub struct ActiveGuard(Rc<WorkerCtx>);

impl ActiveGuard {
    /// Registers one more open connection.
    pub fn new(ctx: Rc<WorkerCtx>) -> Self {
        ctx.active.set(ctx.active.get() + 1);
        ctx.stats.open.set(ctx.active.get() as u64);
        ActiveGuard(ctx)
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        let n = self.0.active.get() - 1;
        self.0.active.set(n);
        self.0.stats.open.set(n as u64);
        if n == 0 {
            self.0.idle_signal.notify_waiters();
        }
        if n == self.0.conn_limit.low_water && self.0.conn_limit.limit > 0 {
            self.0.capacity_signal.notify_waiters();
        }
    }
}

/// A worker's listening sockets: (index into config.listeners, socket).
pub type WorkerListeners = Vec<(usize, std::net::TcpListener)>;

/// Runs one worker until shutdown has drained (or the drain deadline passed).
pub fn run(
    id: usize,
    config: Arc<Config>,
    listeners: WorkerListeners,
    mut shutdown: watch::Receiver<bool>,
    stats: Arc<WorkerStats>,
    access_log: Option<Arc<access_log::Shared>>,
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .event_interval(61)
        .build()?;
    let local = tokio::task::LocalSet::new();
    let ctx = Rc::new(WorkerCtx {
        id,
        config: config.clone(),
        date: RefCell::new(DateCache::default()),
        pool: RefCell::new(Vec::new()),
        active: Cell::new(0),
        draining: Cell::new(false),
        drain_signal: Notify::new(),
        idle_signal: Notify::new(),
        conn_limit: ConnLimit::new(config.max_connections_per_worker()),
        capacity_signal: Notify::new(),
        counters: Counters::default(),
        proxy: ProxyWorker::new(&config),
        access_log: access_log.map(|shared| WorkerLog::new(shared, stats.clone())),
        stats,
    });
    local.block_on(&rt, async move {
        for (index, std_listener) in listeners {
            let listener = TcpListener::from_std(std_listener)?;
            let lc = config.listeners[index].clone();
            tokio::task::spawn_local(accept_loop(ctx.clone(), listener, lc));
        }
        if !config.upstreams.is_empty() {
            tokio::task::spawn_local(sweep_pools(ctx.clone()));
        }
        if ctx.access_log.is_some() {
            tokio::task::spawn_local(flush_access_log(ctx.clone()));
        }
        let _ = shutdown.wait_for(|s| *s).await;
        ctx.draining.set(true);
        ctx.drain_signal.notify_waiters();
        let drained = async {
            while ctx.active.get() > 0 {
                let idle = ctx.idle_signal.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if ctx.active.get() == 0 {
                    break;
                }
                idle.await;
            }
        };
        if tokio::time::timeout(config.drain_timeout, drained)
            .await
            .is_err()
        {
            warn!(
                worker = id,
                open = ctx.active.get(),
                "drain timeout; closing remaining connections"
            );
        }
        if let Some(log) = &ctx.access_log {
            log.flush();
        }
        debug!(
            worker = id,
            accepted = ctx.counters.accepted.get(),
            requests = ctx.counters.requests.get(),
            shed_pauses = ctx.counters.shed_pauses.get(),
            "worker stopped"
        );
        Ok::<(), io::Error>(())
    })
}

async fn accept_loop(ctx: Rc<WorkerCtx>, listener: TcpListener, lc: ListenerConfig) {
    let mut tls = lc.tls.as_ref().map(|t| t.listener.worker());
    let lc = Rc::new(lc);
    let mut batch = 0;
    loop {
        if !ctx.wait_for_capacity().await {
            break;
        }
        batch += 1;
        if batch > ACCEPT_BATCH {
            batch = 0;
            tokio::task::yield_now().await;
        }
        let accepted = tokio::select! {
            biased;
            _ = ctx.draining() => break,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                if is_fd_exhaustion(&e) {
                    warn!(worker = ctx.id, error = %e, "accept: out of file descriptors; backing off");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                } else {
                    debug!(worker = ctx.id, error = %e, "accept failed");
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        ctx.counters.accepted.set(ctx.counters.accepted.get() + 1);
        ctx.stats.accepted.add(1);
        let guard = ActiveGuard::new(ctx.clone());
        let ctx = ctx.clone();
        if tls.is_none() && lc.tcp.is_none() && !lc.accept_proxy_protocol {
            // The common case, kept free of the steps below.
            tokio::task::spawn_local(async move {
                conn::serve(Plain::new(stream), &ctx, peer).await;
                drop(guard);
            });
            continue;
        }
        // Taken at accept time, so a reloaded certificate applies to the next
        // connection and each worker keeps its own session cache.
        let acceptor = tls.as_mut().map(|t| t.acceptor());
        let lc = lc.clone();
        tokio::task::spawn_local(async move {
            serve_accepted(&ctx, &lc, acceptor, stream, peer).await;
            drop(guard);
        });
    }
    debug!(worker = ctx.id, addr = %lc.addr, "stopped accepting");
}

/// The steps after accept in order: PROXY protocol header, TLS handshake, then
/// HTTP or stream forwarding. A drain does not cut the first two short: the
/// connection was accepted, so its client (or balancer) expects an answer, and
/// both steps are bounded by the handshake timeout.
async fn serve_accepted(
    ctx: &WorkerCtx,
    lc: &ListenerConfig,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    mut stream: tokio::net::TcpStream,
    mut peer: std::net::SocketAddr,
) {
    let handshake_timeout = lc
        .tls
        .as_ref()
        .map_or(Duration::from_secs(10), |t| t.handshake_timeout);
    if lc.accept_proxy_protocol {
        match stream_proxy::receive_proxy_header(&mut stream, handshake_timeout).await {
            Ok(Some(source)) => peer = source,
            Ok(None) => {}
            Err(e) => {
                debug!(%peer, error = %e, "PROXY protocol header refused; closing");
                return;
            }
        }
    }
    let local = stream.local_addr().unwrap_or(lc.addr);
    let Some(acceptor) = acceptor else {
        match &lc.tcp {
            Some(fwd) => stream_proxy::serve(ctx, fwd, stream, peer, local, None).await,
            None => conn::serve(Plain::new(stream), ctx, peer).await,
        }
        return;
    };
    let handshake =
        tokio::time::timeout(handshake_timeout, acceptor.accept(ReadAhead::new(stream))).await;
    count_handshake(ctx, &handshake);
    match handshake {
        Ok(Ok(tls)) => match &lc.tcp {
            Some(fwd) => {
                let session = tls.get_ref().1;
                if let Some(subject) = session
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(crate::tls::subject_of)
                {
                    debug!(%peer, subject, "TLS client certificate verified");
                }
                let info = TlsInfo {
                    alpn: session.alpn_protocol().map(<[u8]>::to_vec),
                    sni: session.server_name().map(str::to_string),
                };
                stream_proxy::serve(ctx, fwd, tls, peer, local, Some(info)).await
            }
            None => {
                let tls = Tls::new(tls);
                if let Some(subject) = tls.peer_subject() {
                    debug!(%peer, subject, "TLS client certificate verified");
                }
                conn::serve(tls, ctx, peer).await
            }
        },
        Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => debug!(%peer, "TLS handshake timed out"),
    }
}

/// Counts a finished handshake as full, resumed or failed (a timeout is a failure).
fn count_handshake<T>(
    ctx: &WorkerCtx,
    handshake: &Result<io::Result<tokio_rustls::server::TlsStream<T>>, tokio::time::error::Elapsed>,
) {
    let stats = &ctx.stats;
    match handshake {
        Ok(Ok(tls)) => match tls.get_ref().1.handshake_kind() {
            Some(rustls::HandshakeKind::Resumed) => stats.tls_resumed.add(1),
            _ => stats.tls_full.add(1),
        },
        _ => stats.tls_failed.add(1),
    }
}

/// Closes idle upstream connections past their timeout once a second.
async fn sweep_pools(ctx: Rc<WorkerCtx>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = ctx.draining() => return,
            _ = tick.tick() => ctx.proxy.sweep(),
        }
    }
}

/// Hands the partial access-log buffer to the writer every `flush_interval`, so
/// lines from a quiet server do not wait for the buffer to fill.
async fn flush_access_log(ctx: Rc<WorkerCtx>) {
    let Some(log) = &ctx.access_log else { return };
    let mut tick = tokio::time::interval(log.flush_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = ctx.draining() => return,
            _ = tick.tick() => log.flush(),
        }
    }
}

fn is_fd_exhaustion(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(code) if code == rustix::io::Errno::MFILE.raw_os_error() || code == rustix::io::Errno::NFILE.raw_os_error() || code == rustix::io::Errno::NOBUFS.raw_os_error() || code == rustix::io::Errno::NOMEM.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_water_leaves_room_below_the_limit() {
        let l = ConnLimit::new(4);
        assert_eq!((l.limit, l.low_water), (4, 3));
        assert!(l.is_full(4) && !l.is_full(3));
        assert_eq!(ConnLimit::new(1000).low_water, 900);
        assert_eq!(ConnLimit::new(1).low_water, 0);
        let none = ConnLimit::new(0);
        assert!(!none.is_full(usize::MAX));
    }
}
