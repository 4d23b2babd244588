//! A worker's state: what its connections read and write on the request path
//! (buffers, the `Date` cache, the wake-up clock, counters, the open-connection
//! count, upstream state) and the configuration generation they were accepted
//! under. Nothing here imports a driver: the accept loop and the drivers in
//! [`crate::server`] sit above it, the handlers beside them.
//!
//! A reload hands each worker a new [`Generation`]: a configuration with the
//! worker's upstream and access-log state built for it. Each connection takes the
//! current generation at accept and keeps it for its life; the one it replaced
//! drains like a shutting-down nginx worker (in-flight requests finish with
//! `Connection: close`, idle keep-alive connections close), so open connections
//! finish on the old configuration while new ones get the new one.

mod handler_slots;

use std::cell::{Cell, RefCell};
use std::ops::Deref;
use std::rc::Rc;
use std::sync::Arc;

use tokio::sync::Notify;
use tracing::debug;

use crate::config::Config;
use crate::http1::parse::RequestHead;
use crate::http1::write::DateCache;
use crate::listener_key::WorkerListeners;
use crate::observe::access_log::{self, WorkerLog};
use crate::observe::metrics::WorkerStats;
use crate::upstream::UpstreamWorker;
pub use handler_slots::HandlerSlots;

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

    pub(crate) fn is_full(&self, active: usize) -> bool {
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
    pub(crate) stopping: Cell<bool>,
    /// Wakes accept loops when the worker stops.
    pub(crate) stop_signal: Notify,
    /// Wakes the drain wait when the last connection closes.
    pub(crate) idle_signal: Notify,
    /// This worker's connection limit (the current generation's).
    pub(crate) conn_limit: Cell<ConnLimit>,
    /// Wakes paused accept loops when open connections fall to the low-water mark.
    pub(crate) capacity_signal: Notify,
    /// This worker's counters, the only ones it keeps: the admin listener
    /// reads them, only this worker writes them.
    pub stats: Arc<WorkerStats>,
    /// Turns of this worker's downloads on the blocking pool while it answers
    /// other requests.
    pub downloads: crate::server::download_pacing::DownloadPacer,
    /// The `Alt-Svc` value of each listener this worker serves HTTP/3 on
    /// (`h3=":PORT"; ma=86400`), set when its QUIC endpoint starts.
    alt_svc: RefCell<Vec<(crate::listener_key::ListenerKey, Rc<[u8]>)>>,
}

impl WorkerShared {
    /// A worker's state before its first connection.
    pub(crate) fn new(id: usize, config: &Config, stats: Arc<WorkerStats>) -> Rc<Self> {
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
            alt_svc: RefCell::new(Vec::new()),
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

    /// How many buffer sets wait in the pool.
    #[cfg(test)]
    pub(crate) fn pooled_buffer_sets(&self) -> usize {
        self.pool.borrow().len()
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

    /// Announces HTTP/3 on `key`'s UDP `port` to the listener's HTTP/1.1
    /// and HTTP/2 clients.
    pub fn offer_http3(&self, key: crate::listener_key::ListenerKey, port: u16) {
        let value: Rc<[u8]> = format!("h3=\":{port}\"; ma=86400").into_bytes().into();
        let mut offers = self.alt_svc.borrow_mut();
        offers.retain(|(k, _)| *k != key);
        offers.push((key, value));
    }

    /// This worker's connection limit.
    pub fn conn_limit(&self) -> ConnLimit {
        self.conn_limit.get()
    }

    /// Resolves once the worker stops.
    pub(crate) async fn stopped(&self) {
        flag_raised(&self.stopping, &self.stop_signal).await;
    }

    /// Returns at once below the connection limit; at it, waits until the count
    /// has fallen to the low-water mark. False when shutdown started meanwhile.
    pub(crate) async fn wait_for_capacity(&self) -> bool {
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
    pub(crate) shared: Rc<WorkerShared>,
    /// Frozen configuration of this generation.
    pub config: Arc<Config>,
    /// Set once this generation stops taking requests (shutdown, or a reload
    /// replaced it): finish in-flight requests, close idle ones.
    pub draining: Cell<bool>,
    /// Wakes idle connections when this generation starts draining.
    pub drain_signal: Notify,
    /// Upstream pools and health as this worker sees them.
    pub upstreams: UpstreamWorker,
    /// This worker's access-log buffer; `None` when the log is off.
    pub access_log: Option<WorkerLog>,
    /// This worker's side of the trace exporter; `None` when tracing is off.
    pub tracer: Option<crate::observe::trace::WorkerTracer>,
    /// Each handler's own state for this generation (buffers, open files),
    /// made on first use and dropped with the generation.
    pub handlers: HandlerSlots,
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
    /// The `Alt-Svc` value for answers on listener `listener` (its position
    /// in this generation's configuration), when HTTP/3 is served there.
    pub fn alt_svc(&self, listener: usize) -> Option<Rc<[u8]>> {
        if !self.config.listeners.get(listener)?.http3 {
            return None;
        }
        let key = *crate::listener_key::ListenerKey::of(&self.config).get(listener)?;
        let offers = self.alt_svc.borrow();
        offers
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
    }

    /// Resolves once this generation drains (shutdown or replaced by a reload).
    pub async fn draining(&self) {
        flag_raised(&self.draining, &self.drain_signal).await;
    }

    pub(crate) fn start_draining(&self) {
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

/// A configuration for a worker to switch to: the first one at start, then one
/// per reload.
pub struct Generation {
    /// The validated configuration.
    pub config: Arc<Config>,
    /// The access log its connections write to, when on.
    pub access_log: Option<Arc<access_log::AccessLogShared>>,
    /// The trace exporter its requests hand spans to, when on.
    pub trace: Option<Arc<crate::observe::trace::export::TraceShared>>,
    /// Sockets of listeners this worker does not run yet. Listeners missing from
    /// `config` stop accepting and their sockets close.
    pub listeners: WorkerListeners,
    /// This worker's UDP sockets of the TLS listeners with HTTP/3 it does
    /// not serve yet: at start, and for a listener a reload adds with
    /// HTTP/3 or turns it on for.
    pub quic: Vec<(
        crate::listener_key::ListenerKey,
        crate::quic::socket::WorkerUdp,
    )>,
    /// Told once new connections are accepted under this generation.
    pub applied: Option<std::sync::mpsc::Sender<()>>,
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
            trace: None,
            listeners: Vec::new(),
            quic: Vec::new(),
            applied: None,
        },
    )
}

pub(crate) fn new_ctx(shared: &Rc<WorkerShared>, g: &Generation) -> Rc<WorkerCtx> {
    Rc::new(WorkerCtx {
        shared: shared.clone(),
        config: g.config.clone(),
        draining: Cell::new(false),
        drain_signal: Notify::new(),
        upstreams: UpstreamWorker::new(&g.config),
        access_log: g
            .access_log
            .clone()
            .map(|s| WorkerLog::new(s, shared.stats.clone())),
        tracer: g
            .trace
            .clone()
            .map(|s| crate::observe::trace::WorkerTracer::new(s, shared.stats.clone())),
        handlers: HandlerSlots::default(),
    })
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
