//! One worker: a thread with its own current-thread runtime, its own listening
//! sockets and its own state (buffers, `Date` cache, counters). Workers share only
//! the frozen config and signals that are read off the request path.
//!
//! A reload hands each worker a new [`Generation`]: a configuration with the
//! worker's proxy and access-log state built for it. Each connection takes the
//! current generation at accept and keeps it for its life; the one it replaced
//! drains like a shutting-down nginx worker (in-flight requests finish with
//! `Connection: close`, idle keep-alive connections close), so open connections
//! finish on the old configuration while new ones get the new one.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, warn};

use crate::config::{Config, ListenerConfig};
use crate::deadline;
use crate::handler::proxy::ProxyWorker;
use crate::handler::static_files::OpenFileCache;
use crate::http1::parse::RequestHead;
use crate::http1::write::DateCache;
use crate::observe::access_log::{self, WorkerLog};
use crate::observe::metrics::{TlsFailure, WorkerStats};
use crate::server::h1::serve_http1;
use crate::server::h2::serve_h2;
use crate::server::prior_knowledge::{close_invalid_preface, plain_opening, PlainOpening};
use crate::server::transport::{Downstream, Plain, Tls};
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

/// What a worker keeps across reloads: buffers, counters, the open-connection
/// count and the signals of its own shutdown.
pub struct WorkerShared {
    /// Worker index.
    pub id: usize,
    /// Cached `Date` value.
    pub date: RefCell<DateCache>,
    /// The time of the current wake-up, for the HTTP/1 driver's request
    /// timing, `Date` and idle deadlines.
    pub clock: crate::deadline::WakeClock,
    pool: RefCell<Vec<ConnBuffers>>,
    /// Open connections, of every generation.
    pub active: Cell<usize>,
    /// Set once the worker stops: accept loops end.
    stopping: Cell<bool>,
    /// Wakes accept loops when the worker stops.
    stop_signal: Notify,
    /// Wakes the drain wait when the last connection closes.
    idle_signal: Notify,
    /// This worker's connection limit (the current generation's).
    conn_limit: Cell<ConnLimit>,
    /// Wakes paused accept loops when open connections fall to the low-water mark.
    capacity_signal: Notify,
    /// This worker's counters, the only ones it keeps: the admin listener
    /// reads them, only this worker writes them.
    pub stats: Arc<WorkerStats>,
    /// Turns of this worker's downloads on the blocking pool while it answers
    /// other requests.
    pub downloads: crate::server::download_pacing::DownloadPacer,
}

impl WorkerShared {
    /// A worker's state before its first connection.
    fn new(id: usize, config: &Config, stats: Arc<WorkerStats>) -> Rc<Self> {
        Rc::new(WorkerShared {
            id,
            date: RefCell::new(DateCache::default()),
            clock: Default::default(),
            pool: RefCell::new(Vec::new()),
            active: Cell::new(0),
            stopping: Cell::new(false),
            stop_signal: Notify::new(),
            idle_signal: Notify::new(),
            conn_limit: Cell::new(ConnLimit::new(config.max_connections_per_worker())),
            capacity_signal: Notify::new(),
            stats,
            downloads: Default::default(),
        })
    }

    /// Takes a buffer set from the pool, or makes one.
    pub fn take_buffers(&self) -> ConnBuffers {
        self.pool.borrow_mut().pop().unwrap_or_else(|| ConnBuffers {
            read: Vec::with_capacity(READ_BUF),
            // Allocated by the first response: a client still sending its head
            // (slowloris) costs no output buffer.
            write: Vec::new(),
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

    /// This worker's connection limit.
    pub fn conn_limit(&self) -> ConnLimit {
        self.conn_limit.get()
    }

    /// Resolves once the worker stops.
    async fn stopped(&self) {
        flag_raised(&self.stopping, &self.stop_signal).await;
    }

    /// Returns at once below the connection limit; at it, waits until the count
    /// has fallen to the low-water mark. False when shutdown started meanwhile.
    async fn wait_for_capacity(&self) -> bool {
        if !self.conn_limit().is_full(self.active.get()) {
            return true;
        }
        self.stats.shed.add(1);
        self.stats.shedding.set(1);
        debug!(
            worker = self.id,
            open = self.active.get(),
            "at max_connections; pausing accepts"
        );
        loop {
            let resumed = self.capacity_signal.notified();
            tokio::pin!(resumed);
            resumed.as_mut().enable();
            if self.active.get() <= self.conn_limit().low_water {
                self.stats.shedding.set(0);
                debug!(
                    worker = self.id,
                    open = self.active.get(),
                    "resuming accepts"
                );
                return true;
            }
            tokio::select! {
                biased;
                _ = self.stopped() => {
                    self.stats.shedding.set(0);
                    return false;
                }
                _ = resumed => {}
            }
        }
    }
}

/// Everything a connection task of this worker can reach: one configuration
/// generation, plus (through `Deref`) the worker's state shared by every generation.
pub struct WorkerCtx {
    shared: Rc<WorkerShared>,
    /// Frozen configuration of this generation.
    pub config: Arc<Config>,
    /// Set once this generation stops taking requests (shutdown, or a reload
    /// replaced it): finish in-flight requests, close idle ones.
    pub draining: Cell<bool>,
    /// Wakes idle connections when this generation starts draining.
    pub drain_signal: Notify,
    /// Upstream pools and health as this worker sees them.
    pub proxy: ProxyWorker,
    /// This worker's access-log buffer; `None` when the log is off.
    pub access_log: Option<WorkerLog>,
    /// Files the static handlers of this generation keep open; closed when the
    /// generation goes, so a reload does not leave the old ones open.
    pub open_files: OpenFileCache,
}

/// Connection code reads worker-wide state (buffers, `Date`, counters) through
/// the generation it was accepted under, so it needs one handle, not two.
impl Deref for WorkerCtx {
    type Target = WorkerShared;

    fn deref(&self) -> &WorkerShared {
        &self.shared
    }
}

/// Resolves once `flag` is set; whoever sets it notifies `signal`'s waiters.
/// The wait registers before the flag is read, so a flag set in between
/// cannot be missed.
async fn flag_raised(flag: &Cell<bool>, signal: &Notify) {
    let notified = signal.notified();
    tokio::pin!(notified);
    notified.as_mut().enable();
    if flag.get() {
        return;
    }
    notified.await;
}

impl WorkerCtx {
    /// Resolves once this generation drains (shutdown or replaced by a reload).
    pub async fn draining(&self) {
        flag_raised(&self.draining, &self.drain_signal).await;
    }

    fn start_draining(&self) {
        self.draining.set(true);
        self.drain_signal.notify_waiters();
    }
}

/// The lines of a replaced generation's last connections are handed to the
/// writer when the generation goes away.
impl Drop for WorkerCtx {
    fn drop(&mut self) {
        if let Some(log) = &self.access_log {
            log.flush();
        }
    }
}

/// Counts a connection as open until dropped.
pub struct ActiveGuard(Rc<WorkerShared>);

impl ActiveGuard {
    /// Registers one more open connection.
    pub fn new(shared: Rc<WorkerShared>) -> Self {
        shared.active.set(shared.active.get() + 1);
        shared.stats.open.set(shared.active.get() as u64);
        ActiveGuard(shared)
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
        let limit = self.0.conn_limit();
        if n == limit.low_water && limit.limit > 0 {
            self.0.capacity_signal.notify_waiters();
        }
    }
}

/// Identifies a listener across reloads and upgrades: its configured (not bound)
/// address, and which of the listeners configured with that address it is, as
/// several may listen on port 0, each on the port it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerKey {
    /// The configured `listen` address.
    pub addr: SocketAddr,
    /// 0 for the first listener with this address, 1 for the second, ...
    pub nth: usize,
}

impl ListenerKey {
    /// The keys of `config.listeners`, in the same order.
    pub fn of(config: &Config) -> Vec<ListenerKey> {
        let mut keys: Vec<ListenerKey> = Vec::with_capacity(config.listeners.len());
        for l in &config.listeners {
            let nth = keys.iter().filter(|k| k.addr == l.addr).count();
            keys.push(ListenerKey { addr: l.addr, nth });
        }
        keys
    }
}

impl std::fmt::Display for ListenerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.nth {
            0 => write!(f, "{}", self.addr),
            n => write!(f, "{}#{n}", self.addr),
        }
    }
}

impl std::str::FromStr for ListenerKey {
    type Err = std::net::AddrParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, nth) = match s.rsplit_once('#') {
            Some((a, n)) => (a, n.parse().unwrap_or(usize::MAX)),
            None => (s, 0),
        };
        Ok(ListenerKey {
            addr: addr.parse()?,
            nth,
        })
    }
}

/// A worker's listening sockets, each with the listener it belongs to.
pub type WorkerListeners = Vec<(ListenerKey, std::net::TcpListener)>;

/// A configuration for a worker to switch to: the first one at start, then one
/// per reload.
pub struct Generation {
    /// The validated configuration.
    pub config: Arc<Config>,
    /// The access log its connections write to, when on.
    pub access_log: Option<Arc<access_log::AccessLogShared>>,
    /// Sockets of listeners this worker does not run yet. Listeners missing from
    /// `config` stop accepting and their sockets close.
    pub listeners: WorkerListeners,
    /// Told once new connections are accepted under this generation.
    pub applied: Option<std::sync::mpsc::Sender<()>>,
}

/// The generation new connections are accepted under, and a count of reloads
/// so accept loops notice a change without comparing configurations.
struct Current {
    ctx: RefCell<Rc<WorkerCtx>>,
    serial: Cell<u64>,
    changed: Notify,
}

/// Runs one worker until shutdown has drained (or the drain deadline passed).
pub fn run(
    id: usize,
    first: Generation,
    mut reloads: mpsc::UnboundedReceiver<Generation>,
    mut shutdown: watch::Receiver<bool>,
    stats: Arc<WorkerStats>,
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .event_interval(61)
        .build()?;
    let local = tokio::task::LocalSet::new();
    let shared = WorkerShared::new(id, &first.config, stats);
    local.block_on(&rt, async move {
        let current = Rc::new(Current {
            ctx: RefCell::new(new_ctx(&shared, &first)),
            serial: Cell::new(0),
            changed: Notify::new(),
        });
        start_generation(&current, first)?;
        loop {
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|s| *s) => break,
                next = reloads.recv() => match next {
                    Some(mut g) => {
                        let applied = g.applied.take();
                        let old = current.ctx.replace(new_ctx(&shared, &g));
                        current.serial.set(current.serial.get() + 1);
                        shared.conn_limit.set(ConnLimit::new(g.config.max_connections_per_worker()));
                        start_generation(&current, g)?;
                        tokio::task::spawn_local(retire(old));
                        current.changed.notify_waiters();
                        shared.capacity_signal.notify_waiters();
                        debug!(worker = id, "switched to the reloaded configuration");
                        if let Some(applied) = applied {
                            let _ = applied.send(());
                        }
                    }
                    None => break,
                },
            }
        }
        let ctx = current.ctx.borrow().clone();
        shared.stopping.set(true);
        shared.stop_signal.notify_waiters();
        ctx.start_draining();
        let drained = async {
            while shared.active.get() > 0 {
                let idle = shared.idle_signal.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if shared.active.get() == 0 {
                    break;
                }
                idle.await;
            }
        };
        if deadline::within(ctx.config.drain_timeout, drained)
            .await
            .is_err()
        {
            warn!(
                worker = id,
                open = shared.active.get(),
                "drain timeout; closing remaining connections"
            );
        }
        if let Some(log) = &ctx.access_log {
            log.flush();
        }
        debug!(
            worker = id,
            accepted = shared.stats.accepted.get(),
            requests = shared.stats.requests_total(),
            shed_pauses = shared.stats.shed.get(),
            "worker stopped"
        );
        Ok::<(), io::Error>(())
    })
}

/// A worker context for `config` outside the worker threads: the admin
/// listener's thread, and unit tests of the code that runs on a worker.
pub fn standalone_ctx(config: Config, stats: Arc<WorkerStats>) -> Rc<WorkerCtx> {
    let config = Arc::new(config);
    let shared = WorkerShared::new(0, &config, stats);
    new_ctx(
        &shared,
        &Generation {
            config,
            access_log: None,
            listeners: Vec::new(),
            applied: None,
        },
    )
}

fn new_ctx(shared: &Rc<WorkerShared>, g: &Generation) -> Rc<WorkerCtx> {
    Rc::new(WorkerCtx {
        shared: shared.clone(),
        config: g.config.clone(),
        draining: Cell::new(false),
        drain_signal: Notify::new(),
        proxy: ProxyWorker::new(&g.config),
        access_log: g
            .access_log
            .clone()
            .map(|s| WorkerLog::new(s, shared.stats.clone())),
        open_files: OpenFileCache::default(),
    })
}

/// A replaced generation keeps its connections as they are for one
/// `keepalive_timeout` (a request begun on it, or a client reusing its
/// connection at once, is served as before), then drains: in-flight requests
/// finish with `Connection: close` and idle connections close, so a busy
/// keep-alive connection cannot keep an old configuration alive for ever.
/// Shutdown drains it at once.
async fn retire(ctx: Rc<WorkerCtx>) {
    tokio::select! {
        biased;
        _ = ctx.stopped() => {}
        _ = tokio::time::sleep(ctx.config.http.keepalive_timeout) => {}
    }
    ctx.start_draining();
}

/// Starts the accept loops of the generation's new listeners and its timers.
fn start_generation(current: &Rc<Current>, g: Generation) -> io::Result<()> {
    for (key, std_listener) in g.listeners {
        let listener = TcpListener::from_std(std_listener)?;
        tokio::task::spawn_local(accept_loop(current.clone(), listener, key));
    }
    let ctx = current.ctx.borrow().clone();
    if !ctx.config.upstreams.is_empty() {
        tokio::task::spawn_local(sweep_pools(ctx.clone()));
    }
    if ctx.access_log.is_some() {
        tokio::task::spawn_local(flush_access_log(ctx));
    }
    Ok(())
}

/// What an accept loop needs of the current generation for its listener.
struct Accepting {
    serial: u64,
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
            tls: lc.tls.as_ref().map(|t| t.listener.worker()),
            lc: Rc::new(lc),
            ctx,
        })
    }
}

async fn accept_loop(current: Rc<Current>, listener: TcpListener, key: ListenerKey) {
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
    if now.tls.is_none() && lc.tcp.is_none() && !lc.accept_proxy_protocol && !lc.http2 {
        // The common case, kept free of the steps below.
        let trusted = lc
            .client_address
            .trusts_any()
            .then(|| lc.client_address.clone());
        tokio::task::spawn_local(async move {
            serve_http1(Plain::new(stream), &ctx, peer, trusted.as_deref()).await;
            drop(guard);
        });
        return;
    }
    // Taken at accept time, so a reloaded certificate applies to the next
    // connection and each worker keeps its own session cache.
    let acceptor = now.tls.as_mut().map(|t| t.acceptor());
    let lc = lc.clone();
    tokio::task::spawn_local(async move {
        serve_accepted(&ctx, &lc, acceptor, stream, peer).await;
        drop(guard);
    });
}

/// The steps after accept in order: PROXY protocol header, TLS handshake, then
/// HTTP or stream forwarding. A drain does not cut the first two short: the
/// connection was accepted, so its client (or balancer) expects an answer, and
/// both steps are bounded by the handshake timeout.
async fn serve_accepted(
    ctx: &Rc<WorkerCtx>,
    lc: &ListenerConfig,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    mut stream: tokio::net::TcpStream,
    mut peer: std::net::SocketAddr,
) {
    let handshake_timeout = lc
        .tls
        .as_ref()
        .map_or(Duration::from_secs(10), |t| t.handshake_timeout);
    // The PROXY header and the TLS handshake are not cut short by a drain: the
    // client has sent no request yet and would see its first one fail. Both are
    // bounded by `handshake_timeout`, and the request that follows is answered
    // with `Connection: close`.
    let trusted = lc
        .client_address
        .trusts_any()
        .then_some(&*lc.client_address);
    // From a peer the listener does not trust, no PROXY header is expected:
    // what it sends is read as HTTP (or TLS) from its first byte.
    if lc.accept_proxy_protocol && lc.client_address.accepts_proxy_header_from(peer.ip()) {
        let header = stream_proxy::receive_proxy_header(&mut stream, handshake_timeout).await;
        match header {
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
            Some(fwd) => {
                let state = &ctx.proxy.groups[fwd.group.index];
                let rejected = &ctx.stats.upstream_rejected;
                stream_proxy::relay_stream(state, rejected, fwd, stream, peer, local, None).await
            }
            None if lc.http2 => match plain_opening(&stream, handshake_timeout).await {
                PlainOpening::H2 => {
                    serve_h2(
                        Plain::new(stream),
                        ctx.clone(),
                        peer,
                        trusted.map(|_| lc.client_address.clone()),
                    )
                    .await
                }
                PlainOpening::Http1 => serve_http1(Plain::new(stream), ctx, peer, trusted).await,
                PlainOpening::Neither => {
                    debug!(%peer, "neither an HTTP/1 request nor the HTTP/2 preface; closing");
                    close_invalid_preface(stream).await
                }
            },
            None => serve_http1(Plain::new(stream), ctx, peer, trusted).await,
        }
        return;
    };
    // One deadline for the first bytes and the handshake together.
    let mut handshake_deadline = deadline::Deadline::after(handshake_timeout);
    let mut stream = ReadAhead::new(stream);
    if lc.tcp.is_none() {
        let first = handshake_deadline.run(stream.read_first()).await;
        if first.is_ok_and(|r| r.is_ok_and(crate::tls::plain_http::is_plain_http)) {
            debug!(%peer, "plain HTTP request on a TLS port; answering 400");
            ctx.stats.tls_failure(TlsFailure::PlainHttp);
            crate::tls::plain_http::answer_plain_http(&mut stream).await;
            return;
        }
    }
    let handshake = handshake_deadline.run(acceptor.accept(stream)).await;
    count_handshake(ctx, &handshake);
    if let Ok(Ok(tls)) = &handshake {
        // A TLS-ALPN-01 validation ends with its handshake (RFC 8737 3).
        if tls.get_ref().1.alpn_protocol() == Some(crate::tls::acme::ACME_TLS_ALPN) {
            debug!(%peer, "ACME TLS-ALPN-01 validation handshake answered");
            return;
        }
    }
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
                let state = &ctx.proxy.groups[fwd.group.index];
                let rejected = &ctx.stats.upstream_rejected;
                stream_proxy::relay_stream(state, rejected, fwd, tls, peer, local, Some(info)).await
            }
            None => {
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                let tls = Tls::new(tls);
                if let Some(subject) = tls.peer_subject() {
                    debug!(%peer, subject, "TLS client certificate verified");
                }
                if h2 {
                    serve_h2(
                        tls,
                        ctx.clone(),
                        peer,
                        trusted.map(|_| lc.client_address.clone()),
                    )
                    .await
                } else {
                    serve_http1(tls, ctx, peer, trusted).await
                }
            }
        },
        Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => debug!(%peer, "TLS handshake timed out"),
    }
}

/// Counts a finished handshake as full, resumed or failed (a timeout is a failure).
fn count_handshake<T>(
    ctx: &WorkerCtx,
    handshake: &Result<io::Result<tokio_rustls::server::TlsStream<T>>, deadline::DeadlinePassed>,
) {
    let stats = &ctx.stats;
    match handshake {
        Ok(Ok(tls)) => {
            let session = tls.get_ref().1;
            stats.tls_handshake(
                session
                    .protocol_version()
                    .and_then(crate::tls::names::protocol_name),
                session.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            )
        }
        Ok(Err(e)) => stats.tls_failure(TlsFailure::of(e)),
        Err(_) => stats.tls_failure(TlsFailure::Timeout),
    }
}

/// Closes idle upstream connections past their timeout once a second, and
/// all of them once the configuration drains.
async fn sweep_pools(ctx: Rc<WorkerCtx>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = ctx.draining() => {
                ctx.proxy.close_idle();
                return;
            }
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

    #[test]
    fn listener_keys_tell_port_0_listeners_apart_and_survive_the_environment() {
        for text in ["127.0.0.1:0", "127.0.0.1:0#2", "[::1]:443", "[::1]:443#1"] {
            let key: ListenerKey = text.parse().unwrap();
            assert_eq!(key.to_string(), text);
        }
        let key: ListenerKey = "127.0.0.1:0#1".parse().unwrap();
        assert_eq!((key.addr.port(), key.nth), (0, 1));
        assert!("nonsense".parse::<ListenerKey>().is_err());
    }
}
